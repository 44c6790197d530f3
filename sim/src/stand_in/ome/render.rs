//! Part of the OME stand-in, which says why OME itself cannot serve here ([`super`]).
//!
//! What the OME stand-in writes, as pure functions of what it reads: the InferenceReplica OME
//! v1.3 projects from an OMENative InferenceService and its runtime (the settings in effect by the
//! core's own M1), each Instance's pods as OME names, labels and shapes them, OME's in-tree spread
//! terms when asked for, and the statuses.
//!
//! Upstream (`ome-projects/ome`): the InferenceService's component spec over its runtime's
//! (`inferenceservice/utils` `MergeEngineSpec`, a strategic merge patch), the replica it projects
//! (`components/engine.go`, `reconcilers/irprojector`), the pods (`workload/ops/render.go`
//! `RenderWithRevision`, `workload/query/names.go` `PodName`, `workload/ops/create.go`
//! `expectedPodNamesForInstance`) and the replica's `Ready` (`inferencereplica/status.go`
//! `computeReadyCondition`) and the InferenceService's `<Component>Ready`
//! (`inferenceservice/status` `TopLevelComponentReadyFromLifecycle`).
//!
//! Simpler than OME, on purpose: the runtime's pod fields are taken whole, the InferenceService's
//! over them field by field (upstream merges containers and pod specs deeply); the model is not
//! read (its node selector is written from its name); no headless Service, PodGroup object (its
//! label is on the pods), environment, hostname or ControllerRevision; the revision hash is a
//! hash of the runners; no rollout, so no `RolloutInProgress` or `InstanceFailed`; an Instance's
//! terms follow the replica's settings now (upstream keeps an Instance's older `topologyKey`
//! while its live pods carry it).

use std::collections::BTreeMap;

use ome_spread_core::diagnosis::settings_in_effect;
use ome_spread_core::labels::{
    COMPONENT, INFERENCE_SERVICE, INSTANCE_INCARNATION, INSTANCE_INDEX, MANAGED_BY, OME_NATIVE, POD_GROUP, POD_ORDINAL,
    REVISION_HASH, RUNNER,
};
use ome_spread_core::ome::{ClusterServingRuntime, InferenceService, Runtime, ServingRuntime};
use ome_spread_core::pod::Pod;
use ome_spread_core::spread::SpreadSettings;
use serde_json::{Value, json};

use crate::policy::without_nulls;
use crate::stand_in::migration::with_condition;
use crate::support::objects::{name, namespace_of};

/// The readiness gate OME puts on every pod it creates.
pub const SERVING_GATE: &str = "ome.io/serving";

/// The most Instances, and workers an Instance, the stand-in creates: a test cluster's, not a
/// typo's thousands.
const MAX_INSTANCES: u64 = 64;
const MAX_WORKERS: u64 = 16;

/// Whether OME's own terms are on the pods it creates, or left to the ome-spread policy (behind
/// its webhook).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Terms {
    /// OME v1.3's in-tree terms: P5's constraint on a leader or only pod, P8's affinity on a worker.
    InTree,
    /// None: the admission webhook adds them.
    Webhook,
}

/// The InferenceReplica OME writes for the `component` of `service`: `<isvc>-<component>`, owned
/// by the InferenceService, its spec the settings in effect, the Instance count and the runners.
pub fn replica(service: &Value, runtime: Option<&Value>, component: &str) -> Result<Value, String> {
    let in_effect = in_effect(service, runtime, component)?;
    let own = &service["spec"][component];
    let config = runtime.map_or(&Value::Null, |r| &r["spec"][format!("{component}Config")]);
    let replicas = instance_count(own, config);
    if replicas > MAX_INSTANCES {
        return Err(format!(
            "spec.{component}.minReplicas is {replicas}: the stand-in runs at most {MAX_INSTANCES}"
        ));
    }
    let runners = runners(service, own, config, component)?;
    if let Some(size) = runners[1]["size"].as_u64().filter(|size| *size > MAX_WORKERS) {
        return Err(format!(
            "a worker size of {size}: the stand-in runs at most {MAX_WORKERS}"
        ));
    }
    // The settings in effect, each field only where it is set.
    let mut spec = without_nulls(json!({
        "parentRef": {"name": name(service)},
        "component": component,
        "replicas": replicas,
        "runners": runners,
        "topologySpread": in_effect.spread.map(|spread| spread.as_str()),
        "topologySpreadKey": in_effect.spread_key,
        "topologyKey": in_effect.topology_key,
    }));
    if own["lifecycle"].is_object() {
        spec["lifecycle"] = own["lifecycle"].clone();
    }
    Ok(json!({
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {
            "name": format!("{}-{component}", name(service)), "namespace": namespace_of(service),
            "labels": {INFERENCE_SERVICE: name(service), COMPONENT: component},
            "ownerReferences": [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": name(service),
                "uid": service["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}],
        },
        "spec": spec,
    }))
}

/// The settings in effect (M1), as the core reads them from the objects, read into its model.
fn in_effect(service: &Value, runtime: Option<&Value>, component: &str) -> Result<SpreadSettings, String> {
    let error = |e: serde_json::Error| e.to_string();
    let service: InferenceService = serde_json::from_value(service.clone()).map_err(error)?;
    let (namespaced, cluster): (Option<ServingRuntime>, Option<ClusterServingRuntime>) = match runtime {
        Some(r) if r["kind"] == "ServingRuntime" => (Some(serde_json::from_value(r.clone()).map_err(error)?), None),
        Some(r) => (None, Some(serde_json::from_value(r.clone()).map_err(error)?)),
        None => (None, None),
    };
    let runtime = namespaced.as_ref().map(Runtime::Namespaced);
    let runtime = runtime.or(cluster.as_ref().map(Runtime::Cluster));
    settings_in_effect(&service, runtime, component).map_err(|e| e.to_string())
}

/// The field of the InferenceService's component spec, else its runtime's: `MergeEngineSpec`
/// patches the runtime's with every field the InferenceService sets.
fn merged<'a>(own: &'a Value, config: &'a Value, path: &[&str]) -> &'a Value {
    let at = |from: &'a Value| path.iter().fold(from, |value, key| &value[*key]);
    if at(own).is_null() { at(config) } else { at(own) }
}

/// The Instances OME projects (irprojector `replicasFromComponentExt`): the merged `minReplicas`,
/// one where it is unset, 0 or less. So the InferenceService's `0` gives one Instance, and its
/// unset `minReplicas` the runtime's.
fn instance_count(own: &Value, config: &Value) -> u64 {
    let count = merged(own, config, &["minReplicas"]).as_u64();
    count.filter(|count| *count > 0).unwrap_or(1)
}

/// `default` (size 1), or `leader` (1) and `worker` (N) when the merged spec declares both a
/// `leader` and a `worker` (`components/engine.go`: `multiPod`); a `worker` without a size has
/// one (OME's `declaredMultiPod` and its defaulting), one of 0 or less OME's admission refuses.
fn runners(service: &Value, own: &Value, config: &Value, component: &str) -> Result<Value, String> {
    let declared = |block: &str| own[block].is_object() || config[block].is_object();
    let workers = match merged(own, config, &["worker", "size"]) {
        _ if !(declared("leader") && declared("worker")) => 0,
        Value::Null => 1,
        size => size
            .as_u64()
            .filter(|size| *size > 0)
            .ok_or_else(|| format!("spec.{component}.worker.size is {size}: OME requires a whole number above 0"))?,
    };
    let template = |runner: &str, section: Option<&str>| {
        let container = |from: &Value| match section {
            Some(section) if from[section]["runner"].is_object() => from[section]["runner"].clone(),
            _ => from["runner"].clone(),
        };
        let container = over(&container(config), &container(own));
        template(service, own, config, component, runner, container)
    };
    Ok(if workers == 0 {
        json!([{"name": "default", "size": 1, "template": template("default", None)}])
    } else {
        json!([
            {"name": "leader", "size": 1, "template": template("leader", Some("leader"))},
            {"name": "worker", "size": workers, "template": template("worker", Some("worker"))},
        ])
    })
}

/// `top`'s fields over `base`'s, one level deep (`Null` is unset).
fn over(base: &Value, top: &Value) -> Value {
    let mut merged = base.as_object().cloned().unwrap_or_default();
    if let Some(top) = top.as_object() {
        merged.extend(top.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    Value::Object(merged)
}

/// The pod fields an engine or decoder (or its runtime's config) may set, taken as they are.
const POD_FIELDS: &str =
    "tolerations affinity topologySpreadConstraints schedulerName priorityClassName serviceAccountName volumes";

fn template(service: &Value, own: &Value, config: &Value, component: &str, runner: &str, container: Value) -> Value {
    let mut container = container;
    if container["name"].is_null() {
        container["name"] = json!("ome-container");
    }
    let mut node_selector = over(&config["nodeSelector"], &own["nodeSelector"]);
    if let Some(label) = model_label(service) {
        node_selector[label] = json!("Ready");
    }
    let mut spec = json!({
        "containers": [container],
        "nodeSelector": node_selector,
        "readinessGates": [{"conditionType": SERVING_GATE}],
    });
    for field in POD_FIELDS.split(' ') {
        for from in [config, own] {
            if !from[field].is_null() {
                spec[field] = from[field].clone();
            }
        }
    }
    json!({"metadata": {"labels": {MANAGED_BY: OME_NATIVE, INFERENCE_SERVICE: name(service), COMPONENT: component, RUNNER: runner}},
        "spec": spec})
}

/// The node label OME's model agent sets where the model is Ready, which OME's pods select.
fn model_label(service: &Value) -> Option<String> {
    let model = &service["spec"]["model"];
    let model_name = model["name"].as_str()?;
    Some(match model["kind"].as_str() {
        Some("BaseModel") => format!("models.ome.io/{}.basemodel.{model_name}", namespace_of(service)),
        _ => format!("models.ome.io/clusterbasemodel.{model_name}"),
    })
}

/// The revision the runners make, as OME names it on the pods: a short hash (FNV-1a) of them.
pub fn revision_hash(replica: &Value) -> String {
    let runners = replica["spec"]["runners"].to_string();
    let hash = runners
        .bytes()
        .fold(0x811c_9dc5_u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    format!("{hash:08x}")
}

/// Where an Instance is in its life: its index, its incarnation (from 1) and the slot its one-pod
/// runners take (0, or 1 after a SurgeThenDrain update: the Instance's `activeOrdinal`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Instance {
    pub index: u64,
    pub incarnation: u64,
    pub slot: u64,
}

impl Instance {
    /// A new Instance at `index`: its first incarnation, on slot 0.
    pub fn new(index: u64) -> Self {
        Self {
            index,
            incarnation: 1,
            slot: 0,
        }
    }
}

/// The pods of `instance` of `replica`, the leader first, owned by the replica, from the runners'
/// templates; with OME's terms when `terms` is [`Terms::InTree`]. Each is named
/// `<isvc>-<component>-<index>-<runner>-<ordinal>` and labelled with that ordinal: a runner of
/// several pods numbers them 0..N-1, a one-pod runner takes the Instance's slot
/// (`expectedPodNamesForInstance`); a multi-pod Instance's pods carry its pod group
/// (`query.PodGroupName`).
pub fn instance_pods(replica: &Value, instance: Instance, terms: Terms) -> Vec<Value> {
    let service = replica["spec"]["parentRef"]["name"].as_str().unwrap_or_default();
    let component = replica["spec"]["component"].as_str().unwrap_or_default();
    let Instance { index, slot, .. } = instance;
    let revision = revision_hash(replica);
    let multi_pod = pods_per_instance(replica) > 1;
    let mut pods = Vec::new();
    let runners = replica["spec"]["runners"].as_array().cloned().unwrap_or_default();
    for runner in &runners {
        let runner_name = runner["name"].as_str().unwrap_or_default();
        let ordinals = match runner["size"].as_u64().unwrap_or(1) {
            1 => slot..slot + 1,
            size => 0..size,
        };
        for ordinal in ordinals {
            let template = &runner["template"];
            let mut labels = template["metadata"]["labels"].as_object().cloned().unwrap_or_default();
            labels.extend([
                (INSTANCE_INDEX.to_owned(), json!(index.to_string())),
                (INSTANCE_INCARNATION.to_owned(), json!(instance.incarnation.to_string())),
                (POD_ORDINAL.to_owned(), json!(ordinal.to_string())),
                (REVISION_HASH.to_owned(), json!(revision)),
            ]);
            if multi_pod {
                labels.insert(POD_GROUP.to_owned(), json!(format!("{service}-{component}-{index}")));
            }
            let mut pod = json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {
                    "name": format!("{service}-{component}-{index}-{runner_name}-{ordinal}"),
                    "namespace": namespace_of(replica), "labels": labels,
                    "ownerReferences": [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": name(replica),
                        "uid": replica["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}],
                },
                "spec": template["spec"],
            });
            if terms == Terms::InTree {
                in_tree_terms(&mut pod, replica);
            }
            pods.push(pod);
        }
    }
    pods
}

/// OME v1.3's own terms (its `injectTopologySpread` and `injectGangDomainAffinity`), as
/// docs/rules.md's P5 and P8 write them: the spread constraint on a leader or only pod, unless one
/// on its key is there already; the affinity to its leader's domain on a worker, unless a required
/// term on that key is there.
pub fn in_tree_terms(pod: &mut Value, replica: &Value) {
    let settings: SpreadSettings =
        SpreadSettings::from_fields(serde_json::from_value(replica["spec"].clone()).unwrap_or_default())
            .unwrap_or_default();
    let labels = pod["metadata"]["labels"].clone();
    let (service, component, runner) = (&labels[INFERENCE_SERVICE], &labels[COMPONENT], &labels[RUNNER]);
    match runner.as_str() {
        Some("default" | "leader") => {
            let (Some(spread), Some(key)) = (settings.spread, settings.domain_key()) else {
                return;
            };
            let constraint = json!({"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": spread.when_unsatisfiable(),
                "labelSelector": {"matchLabels": {INFERENCE_SERVICE: service, COMPONENT: component, RUNNER: runner}}});
            add_unless_keyed(pod, &["spec", "topologySpreadConstraints"], key, constraint);
        }
        Some("worker") => {
            let Some(key) = settings.topology_key.as_deref() else {
                return;
            };
            let term = json!({"topologyKey": key, "labelSelector": {"matchLabels": {INFERENCE_SERVICE: service,
                COMPONENT: component, INSTANCE_INDEX: labels[INSTANCE_INDEX], RUNNER: "leader"}}});
            add_unless_keyed(pod, &["spec", "affinity", "podAffinity", REQUIRED], key, term);
        }
        _ => {}
    }
}

const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";

/// `item` appended to the list at `path` (made where unset), unless one there is on its key.
fn add_unless_keyed(pod: &mut Value, path: &[&str], key: &str, item: Value) {
    let Some(list) = slot(pod, path) else {
        return;
    };
    match list.as_array_mut() {
        Some(items) if items.iter().any(|i| i["topologyKey"] == key) => {}
        Some(items) => items.push(item),
        None => *list = json!([item]),
    }
}

/// The field at `path`, the objects on the way made where they are unset; None where one is
/// something else (a runtime's `affinity: "x"`), which is left as it is rather than indexed.
pub fn slot<'a>(value: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut at = value;
    for key in path {
        if at.is_null() {
            *at = json!({});
        }
        at = at.as_object_mut()?.entry(*key).or_insert(Value::Null);
    }
    Some(at)
}

/// The pods one Instance needs: the runners' sizes added up.
pub fn pods_per_instance(replica: &Value) -> usize {
    let runners = replica["spec"]["runners"].as_array().into_iter().flatten();
    runners.map(|r| r["size"].as_u64().unwrap_or(1) as usize).sum()
}

/// Whether every pod of an Instance is there and Ready.
fn instance_ready(pods: &[&Pod], size: usize) -> bool {
    pods.len() >= size && pods.iter().all(|p| p.is_ready())
}

/// Instance index -> its pods (those not being deleted), in index order.
pub fn instances<'a>(pods: &[&'a Pod]) -> BTreeMap<u64, Vec<&'a Pod>> {
    let mut instances = BTreeMap::<u64, Vec<&Pod>>::new();
    for pod in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
        if let Some(index) = pod.label(INSTANCE_INDEX).and_then(|i| i.parse().ok()) {
            instances.entry(index).or_default().push(pod);
        }
    }
    instances
}

/// The replica's status as OME counts it (Instances, Instances with every pod Ready, its
/// `Ready` condition), each condition of another writer kept; `now` is a changed condition's
/// transition. OME keeps a row for each Instance it wants, created or not, and for a migration's
/// surge beside them.
pub fn replica_status(replica: &Value, pods: &[&Pod], now: &str) -> Value {
    let instances = instances(pods);
    let size = pods_per_instance(replica);
    let ready = instances.values().filter(|pods| instance_ready(pods, size)).count();
    let counts = Counts {
        replicas: instances.len().max(wanted(replica)),
        ready,
        wanted: wanted(replica),
    };
    let service = replica["spec"]["parentRef"]["name"].as_str().unwrap_or_default();
    let component = replica["spec"]["component"].as_str().unwrap_or_default();
    // Available and serving as soon as Ready: no minReadySeconds, and kwok starts every pod with
    // its `ome.io/serving` gate True.
    json!({
        "observedGeneration": replica["metadata"]["generation"],
        "replicas": counts.replicas, "readyReplicas": ready, "availableReplicas": ready, "servingReplicas": ready,
        // `irLabelSelectorString`: a selector's requirements sorted by key.
        "labelSelector": format!("{COMPONENT}={component},{INFERENCE_SERVICE}={service},{MANAGED_BY}={OME_NATIVE}"),
        "conditions": with_condition(&replica["status"]["conditions"], replica_ready(&counts, &replica["spec"], now)),
    })
}

fn wanted(replica: &Value) -> usize {
    usize::try_from(replica["spec"]["replicas"].as_u64().unwrap_or(1)).unwrap_or(usize::MAX)
}

/// A replica's Instances: its rows, those Ready (the stand-in's serve as soon as Ready), those wanted.
struct Counts {
    replicas: usize,
    ready: usize,
    wanted: usize,
}

impl Counts {
    /// `InstanceAvailabilityFloor`: of the Instances wanted (the rows, where fewer are wanted or
    /// none), all but the lifecycle's `updateStrategy.rollingUpdate.maxUnavailable`, a percentage
    /// rounded up; all without it.
    fn floor(&self, lifecycle: &Value) -> usize {
        let basis = if self.wanted > 0 && self.wanted < self.replicas {
            self.wanted
        } else {
            self.replicas
        };
        let budget = match &lifecycle["updateStrategy"]["rollingUpdate"]["maxUnavailable"] {
            Value::Number(count) => count.as_u64().map(|count| usize::try_from(count).unwrap_or(usize::MAX)),
            Value::String(percent) => percent
                .strip_suffix('%')
                .and_then(|p| p.parse::<usize>().ok())
                .map(|p| (p.saturating_mul(basis)).div_ceil(100)),
            _ => None,
        };
        budget.map_or(basis, |budget| basis.saturating_sub(budget))
    }
}

/// The replica's `Ready` as `computeReadyCondition` words it for a replica with no rollout under
/// way and no failed Instance.
fn replica_ready(counts: &Counts, spec: &Value, now: &str) -> Value {
    let Counts { replicas, ready, .. } = *counts;
    let floor = counts.floor(&spec["lifecycle"]);
    let counted = format!("{ready}/{replicas} Instances");
    let (status, reason, message) = if replicas == 0 {
        (
            false,
            "NoReplicas",
            "InferenceReplica has no desired Instances".to_owned(),
        )
    } else if ready == replicas {
        (true, "AllInstancesReady", format!("{counted} Ready"))
    } else if ready >= floor {
        (true, "MinimumAvailable", format!("{counted} serving (min {floor})"))
    } else {
        let message = format!("{counted} serving, need {floor} (no rollout in flight)");
        (false, "ReplicaCountMismatch", message)
    };
    condition("Ready", status, reason, message, now)
}

/// The InferenceService's conditions with `<Component>Ready` for each of its replicas, as
/// `TopLevelComponentReadyFromLifecycle` words it from the replica's status, and `Ready` over
/// them all as knative's condition set makes it (True when every one is, else False with the
/// first one's reason and message), each other condition kept.
pub fn service_conditions(service: &Value, replicas: &[&Value], now: &str) -> Value {
    let mut conditions = service["status"]["conditions"].clone();
    let mut not_ready: Option<Value> = None;
    for replica in replicas {
        let component = replica["spec"]["component"].as_str().unwrap_or_default();
        let (first, rest) = component.split_at(component.len().min(1));
        let component_ready = component_ready(&format!("{}{rest}Ready", first.to_uppercase()), replica, now);
        if component_ready["status"] != "True" && not_ready.is_none() {
            not_ready = Some(component_ready.clone());
        }
        conditions = with_condition(&conditions, component_ready);
    }
    // Before any replica, nothing to say: knative's `Unknown` stands.
    if replicas.is_empty() {
        return conditions;
    }
    let ready = match not_ready {
        Some(first) => json!({"type": "Ready", "status": "False", "reason": first["reason"],
            "message": first["message"], "lastTransitionTime": now}),
        None => json!({"type": "Ready", "status": "True", "lastTransitionTime": now}),
    };
    with_condition(&conditions, ready)
}

/// `TopLevelComponentReadyFromLifecycle`: the replica's counts against its availability floor.
fn component_ready(kind: &str, replica: &Value, now: &str) -> Value {
    let status = &replica["status"];
    let count = |field: &str| usize::try_from(status[field].as_u64().unwrap_or(0)).unwrap_or(usize::MAX);
    let counts = Counts {
        replicas: count("replicas"),
        ready: count("readyReplicas"),
        wanted: wanted(replica),
    };
    let (replicas, serving) = (counts.replicas, count("servingReplicas"));
    let floor = counts.floor(&replica["spec"]["lifecycle"]);
    let counted = format!("{serving}/{replicas} Instances serving");
    let (ready, reason, message) = if replicas == 0 {
        (false, "NoReplicas", "Component has no desired Instances".to_owned())
    } else if counts.ready >= replicas {
        (true, "Ready", "All Instances are Ready".to_owned())
    } else if serving >= floor {
        (true, "MinimumAvailable", format!("{counted} (min {floor})"))
    } else {
        (false, "InsufficientAvailable", format!("{counted}, need {floor}"))
    };
    condition(kind, ready, reason, message, now)
}

fn condition(kind: &str, status: bool, reason: &str, message: String, now: &str) -> Value {
    let status = if status { "True" } else { "False" };
    json!({"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now})
}
