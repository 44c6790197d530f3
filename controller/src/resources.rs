//! The OME objects the controller reads, as the subsets of OME v1.3's types that it needs, and
//! the CRD subsets generated from them (`deploy/without-ome/ome-crd-subsets.yaml`), for trying
//! ome-spread on a cluster **without** OME: they carry OME's CRD names, so applied where OME runs
//! they would replace OME's CRDs. Each subset's spec keeps the fields it does not name
//! (`x-kubernetes-preserve-unknown-fields`), so OME's own objects apply to it unchanged; where it
//! names a field, it says what OME's CRD says.
//!
//! Fields the API server has validated against OME's own CRDs are typed; the three spread fields
//! stay strings so that the diagnosis, not the watcher, names a bad value.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use ome_spread_core::replica::RuntimeRef;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The spread fields of an engine or decoder, of its runtime's config, or projected on a replica.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct SpreadFields {
    /// `Required` or `Preferred`: spread the component's Instances across domains of the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread: Option<String>,
    /// The node label whose values are the fault domains Instances spread across.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_key: Option<String>,
    /// The node label that keeps a multi-node Instance's workers in their leader's domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_key: Option<String>,
    /// OME's lifecycle policies, kept as written: rebalance reads `migrationPolicy.mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub lifecycle: Option<Value>,
}

/// An InferenceReplica: the Instances of one component of an OMENative InferenceService.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "ome.io",
    version = "v1beta1",
    kind = "InferenceReplica",
    namespaced,
    status = "InferenceReplicaStatus",
    shortname = "irep",
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.labelSelector"
    ),
    printcolumn = r#"{"name":"Component","type":"string","jsonPath":".spec.component"}"#,
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".spec.replicas"}"#,
    printcolumn = r#"{"name":"Current","type":"integer","jsonPath":".status.replicas"}"#,
    printcolumn = r#"{"name":"Ready","type":"integer","jsonPath":".status.readyReplicas"}"#,
    printcolumn = r#"{"name":"Available","type":"integer","jsonPath":".status.availableReplicas"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true), transform = spread_enum)]
pub struct InferenceReplicaSpec {
    /// The InferenceService that projects this replica; unset on one created without an
    /// InferenceService (OME's standalone form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_ref: Option<ParentRef>,
    /// `engine` or `decoder`.
    pub component: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// The settings in effect, as OME projects them.
    #[serde(flatten)]
    pub spread: SpreadFields,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runners: Vec<Runner>,
    /// OME starts no migration of a paused replica.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct ParentRef {
    /// The InferenceService's name.
    pub name: String,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Runner {
    /// `default`, `leader` or `worker`.
    pub name: String,
    pub size: i32,
    /// The pod template, kept as OME wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_object")]
    pub template: Option<Value>,
}

/// The type of ome-spread's condition on an InferenceReplica.
pub const CONDITION: &str = "Spread";
/// The field manager of what ome-spread writes: the `Spread` condition and the reports.
pub const FIELD_MANAGER: &str = "ome-spread";

#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
pub struct InferenceReplicaStatus {
    /// A map keyed by `type`, so that OME's conditions and ome-spread's `Spread` have one owner
    /// each under server-side apply.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// OME's migration records, kept as written, so that a malformed one reaches the core, which
    /// names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_list")]
    pub migrations: Option<Value>,
}

/// OME's CRD takes only `Preferred` or `Required` as a replica's `topologySpread`. The Rust field
/// stays a string, so that a value the API server never validated (saved objects, another CRD)
/// reaches the diagnosis, which names it.
fn spread_enum(schema: &mut schemars::Schema) {
    if let Some(spread) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("topologySpread"))
        .and_then(Value::as_object_mut)
    {
        spread.insert("type".into(), "string".into());
        spread.insert("enum".into(), serde_json::json!(["Preferred", "Required"]));
    }
}

fn any_list(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "array", "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}})
}

fn any_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

/// An InferenceService: only the fields the diagnosis reads.
#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(group = "ome.io", version = "v1beta1", kind = "InferenceService", namespaced)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct InferenceServiceSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_mode: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<NamedRuntime>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<SpreadFields>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoder: Option<SpreadFields>,
}

#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct NamedRuntime {
    pub name: String,
    /// `ClusterServingRuntime` when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
}

/// The defaults a ServingRuntime or ClusterServingRuntime gives its engine and decoder.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeSpread {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_config: Option<SpreadFields>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decoder_config: Option<SpreadFields>,
}

#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(group = "ome.io", version = "v1beta1", kind = "ServingRuntime", namespaced)]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ServingRuntimeSpec {
    #[serde(flatten)]
    pub spread: RuntimeSpread,
}

#[derive(CustomResource, Clone, Debug, Deserialize, Serialize, JsonSchema)]
#[kube(group = "ome.io", version = "v1beta1", kind = "ClusterServingRuntime")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ClusterServingRuntimeSpec {
    #[serde(flatten)]
    pub spread: RuntimeSpread,
}

impl InferenceService {
    pub fn on_omenative(&self) -> bool {
        self.spec.deployment_mode.as_deref() == Some("OMENative")
    }

    /// The runtime it names.
    pub fn runtime(&self) -> Option<RuntimeRef<'_>> {
        let runtime = self.spec.runtime.as_ref()?;
        RuntimeRef::of(runtime.kind.as_deref(), Some(&runtime.name))
    }
}

/// What `ome-spread crd` prints first.
pub const CRD_WARNING: &str = "\
# WARNING: ONLY FOR A CLUSTER WITHOUT OME. NEVER APPLY THIS WHERE OME RUNS.
# These are cut-down copies of OME v1.3's CRDs under OME's own names (inferencereplicas.ome.io,
# inferenceservices.ome.io, servingruntimes.ome.io, clusterservingruntimes.ome.io). Applied to a
# cluster that runs OME, they replace OME's CRDs: the API server then drops OME's validation and
# prunes every field of OME's objects that these subsets do not name, their status included.
#
# The subsets of OME v1.3's CRDs that ome-spread reads and writes, for trying its controller.
# Generated by `ome-spread crd` from controller/src/resources.rs: do not edit.
";

/// The CRD subsets, as YAML documents, for trying ome-spread on a cluster without OME, after
/// [`CRD_WARNING`].
pub fn crd_yaml() -> Result<String, String> {
    use kube::CustomResourceExt;
    let crds = [
        InferenceReplica::crd(),
        InferenceService::crd(),
        ServingRuntime::crd(),
        ClusterServingRuntime::crd(),
    ];
    let mut yaml = String::from(CRD_WARNING);
    for crd in crds {
        yaml.push_str("---\n");
        yaml.push_str(&serde_saphyr::to_string(&crd).map_err(|e| e.to_string())?);
    }
    Ok(yaml)
}
