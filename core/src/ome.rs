//! OME v1.3's objects, as far as ome-spread reads them: the InferenceService, its ServingRuntime
//! or ClusterServingRuntime, and the InferenceReplica of each component. One model for the
//! policy, the controller, `explain` and the playground, so that a field OME renames is found
//! once, by the compiler.
//!
//! They are also the CRD subsets the controller prints (`ome-spread crd`), for trying ome-spread
//! on a cluster **without** OME: each spec keeps the fields it does not name
//! (`x-kubernetes-preserve-unknown-fields`), so that OME's own objects apply to it unchanged;
//! where it names a field, it says what OME's CRD says.
//!
//! Fields the API server has validated against OME's own CRDs are typed. The three spread fields
//! ([`SpreadFields`]) are read as written, so that the diagnosis, not the reader, names a bad
//! value.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use kube::{CustomResource, Resource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::replica::{DEFAULT_NAMESPACE, RuntimeRef};
use crate::spread::SpreadFields;

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
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true), transform = as_omes_crd)]
pub struct InferenceReplicaSpec {
    /// The InferenceService that projects this replica; unset on one created without an
    /// InferenceService (OME's standalone form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_ref: Option<ParentRef>,
    // Absent reads as empty, which the diagnosis names.
    /// `engine` or `decoder`.
    #[serde(default)]
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
    #[schemars(extend("type" = "object", "x-kubernetes-preserve-unknown-fields" = true))]
    pub template: Option<Value>,
}

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
    #[schemars(extend("type" = "array", "items" = {"type": "object", "x-kubernetes-preserve-unknown-fields": true}))]
    pub migrations: Option<Value>,
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

    /// The runtime it names, a ClusterServingRuntime unless its kind says ServingRuntime; None
    /// without a name.
    pub fn runtime(&self) -> Option<RuntimeRef<'_>> {
        let runtime = self.spec.runtime.as_ref().filter(|runtime| !runtime.name.is_empty())?;
        Some(match runtime.kind.as_deref() {
            Some("ServingRuntime") => RuntimeRef::Namespaced(&runtime.name),
            _ => RuntimeRef::Cluster(&runtime.name),
        })
    }

    /// The spread fields of its `engine` or `decoder`.
    pub fn component(&self, kind: &str) -> Option<&SpreadFields> {
        of_kind(kind, &self.spec.engine, &self.spec.decoder)?.as_ref()
    }
}

/// The runtime an InferenceService runs on: either kind.
#[derive(Clone, Copy, Debug)]
pub enum Runtime<'a> {
    Namespaced(&'a ServingRuntime),
    Cluster(&'a ClusterServingRuntime),
}

impl<'a> Runtime<'a> {
    /// Its kind, metadata and spread defaults, whichever kind it is.
    fn parts(self) -> (&'static str, &'a ObjectMeta, &'a RuntimeSpread) {
        match self {
            Self::Namespaced(runtime) => ("ServingRuntime", &runtime.metadata, &runtime.spec.spread),
            Self::Cluster(runtime) => ("ClusterServingRuntime", &runtime.metadata, &runtime.spec.spread),
        }
    }

    pub fn kind(self) -> &'static str {
        self.parts().0
    }

    pub fn meta(self) -> &'a ObjectMeta {
        self.parts().1
    }

    /// Named as kubectl names it.
    pub fn named(self) -> String {
        described(self.kind(), self.meta())
    }

    /// The defaults it gives the `engine` or `decoder` (its `engineConfig` or `decoderConfig`).
    pub fn config(self, kind: &str) -> Option<&'a SpreadFields> {
        let spread = self.parts().2;
        of_kind(kind, &spread.engine_config, &spread.decoder_config)?.as_ref()
    }
}

/// Of an `engine`'s and a `decoder`'s, the `kind` component's.
fn of_kind<T>(kind: &str, engine: T, decoder: T) -> Option<T> {
    match kind {
        "engine" => Some(engine),
        "decoder" => Some(decoder),
        _ => None,
    }
}

/// An object named as kubectl names it: its kind, then `namespace/name`, or its name where it has
/// no namespace.
pub fn named<K: Resource<DynamicType = ()>>(object: &K) -> String {
    described(&K::kind(&()), object.meta())
}

fn described(kind: &str, meta: &ObjectMeta) -> String {
    let name = meta.name.as_deref().unwrap_or_default();
    match &meta.namespace {
        Some(namespace) => format!("{kind} {namespace}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// An object's `namespace/name`, as the guardrails and the controller's logs name it.
pub fn namespaced_name<K: ResourceExt>(object: &K) -> String {
    format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any())
}

/// An object's namespace, [`DEFAULT_NAMESPACE`] where its metadata names none (as kubectl reads a
/// file).
pub fn namespace<K: Resource>(object: &K) -> &str {
    object.meta().namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
}

/// What OME's CRD says of a replica's spec that the model reads more leniently, so that a value
/// the API server never validated (saved objects, another CRD) reaches the diagnosis, which names
/// it: `component` is required, and `topologySpread` only `Preferred` or `Required`.
fn as_omes_crd(schema: &mut schemars::Schema) {
    // The one field of the spec required.
    schema.insert("required".into(), json!(["component"]));
    if let Some(Value::Object(component)) = schema.pointer_mut("/properties/component") {
        component.remove("default");
    }
    if let Some(Value::Object(spread)) = schema.pointer_mut("/properties/topologySpread") {
        spread.insert("enum".into(), json!(["Preferred", "Required"]));
        spread.remove("nullable");
    }
}

/// An object of OME's written as JSON, read into the model: the core's tests write their
/// objects as the API server gives them.
#[cfg(test)]
pub(crate) fn typed<K: serde::de::DeserializeOwned>(object: &Value) -> K {
    serde_json::from_value(object.clone()).expect("an object of the model")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_is_cluster_wide_unless_its_kind_says_serving_runtime() {
        let service = |spec: Value| typed::<InferenceService>(&json!({"metadata": {"name": "s"}, "spec": spec}));
        let named = |runtime: Value| service(json!({"runtime": runtime}));
        assert_eq!(
            named(json!({"name": "srt"})).runtime(),
            Some(RuntimeRef::Cluster("srt"))
        );
        assert_eq!(
            named(json!({"kind": "ServingRuntime", "name": "srt"})).runtime(),
            Some(RuntimeRef::Namespaced("srt"))
        );
        assert_eq!(
            named(json!({"kind": "ClusterServingRuntime", "name": "srt"}))
                .runtime()
                .map(RuntimeRef::kind),
            Some("ClusterServingRuntime")
        );
        assert_eq!(named(json!({"name": ""})).runtime(), None);
        assert_eq!(service(json!({})).runtime(), None);
    }
}
