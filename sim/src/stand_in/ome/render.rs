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

use ome_spread_core::diagnosis::settings_in_effect;
use ome_spread_core::labels::{
    COMPONENT, INFERENCE_SERVICE, INSTANCE_INCARNATION, INSTANCE_INDEX, MANAGED_BY, OME_NATIVE, POD_GROUP, POD_ORDINAL,
    REVISION_HASH, RUNNER,
};
use ome_spread_core::ome::{ClusterServingRuntime, InferenceService, Runtime, ServingRuntime};
use ome_spread_core::pod::Pod;
use ome_spread_core::spread::SpreadSettings;
use serde_json::{Map, Value, json};

use crate::stand_in::migration::with_condition;

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

pub fn is_ome_native(service: &Value) -> bool {
    service["spec"]["deploymentMode"] == "OMENative"
}

fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
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
    let mut spec = json!({
        "parentRef": {"name": name(service)},
        "component": component,
        "replicas": replicas,
        "runners": runners,
    });
    for (field, value) in spread_fields(&in_effect) {
        spec[field] = json!(value);
    }
    if own["lifecycle"].is_object() {
        spec["lifecycle"] = own["lifecycle"].clone();
    }
    Ok(json!({
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {
            "name": format!("{}-{component}", name(service)), "namespace": namespace(service),
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

fn spread_fields(settings: &SpreadSettings) -> Vec<(&'static str, &str)> {
    let mut fields = Vec::new();
    if let Some(spread) = settings.spread {
        fields.push(("topologySpread", spread.as_str()));
    }
    if let Some(key) = &settings.spread_key {
        fields.push(("topologySpreadKey", key.as_str()));
    }
    if let Some(key) = &settings.topology_key {
        fields.push(("topologyKey", key.as_str()));
    }
    fields
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
    merged(own, config, &["minReplicas"])
        .as_u64()
        .filter(|count| *count > 0)
        .unwrap_or(1)
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
        template(
            service,
            own,
            config,
            component,
            runner,
            over(&container(config), &container(own)),
        )
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
const POD_FIELDS: [&str; 7] = [
    "tolerations",
    "affinity",
    "topologySpreadConstraints",
    "schedulerName",
    "priorityClassName",
    "serviceAccountName",
    "volumes",
];

fn template(service: &Value, own: &Value, config: &Value, component: &str, runner: &str, container: Value) -> Value {
    let mut container = container;
    if container["name"].is_null() {
        container["name"] = json!("ome-container");
    }
    let mut node_selector = Map::new();
    for from in [config, own] {
        if let Some(selector) = from["nodeSelector"].as_object() {
            node_selector.extend(selector.clone());
        }
    }
    if let Some(label) = model_label(service) {
        node_selector.insert(label, json!("Ready"));
    }
    let mut spec = json!({
        "containers": [container],
        "nodeSelector": node_selector,
        "readinessGates": [{"conditionType": SERVING_GATE}],
    });
    for field in POD_FIELDS {
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
        Some("BaseModel") => format!("models.ome.io/{}.basemodel.{model_name}", namespace(service)),
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
    let Instance {
        index,
        incarnation,
        slot,
    } = instance;
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
                (INSTANCE_INCARNATION.to_owned(), json!(incarnation.to_string())),
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
                    "namespace": namespace(replica), "labels": labels,
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
            let Some(constraints) = slot(pod, &["spec", "topologySpreadConstraints"]) else {
                return;
            };
            if constraints
                .as_array()
                .is_some_and(|cs| cs.iter().any(|c| c["topologyKey"] == key))
            {
                return;
            }
            let constraint = json!({"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": spread.when_unsatisfiable(),
                "labelSelector": {"matchLabels": {INFERENCE_SERVICE: service, COMPONENT: component, RUNNER: runner}}});
            push(constraints, constraint);
        }
        Some("worker") => {
            let Some(key) = settings.topology_key.as_deref() else {
                return;
            };
            let path = [
                "spec",
                "affinity",
                "podAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
            ];
            let Some(terms) = slot(pod, &path) else {
                return;
            };
            if terms
                .as_array()
                .is_some_and(|ts| ts.iter().any(|t| t["topologyKey"] == key))
            {
                return;
            }
            let term = json!({"topologyKey": key, "labelSelector": {"matchLabels": {INFERENCE_SERVICE: service,
                COMPONENT: component, INSTANCE_INDEX: labels[INSTANCE_INDEX], RUNNER: "leader"}}});
            push(terms, term);
        }
        _ => {}
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

/// Appends `item` to the list, or makes it one.
fn push(list: &mut Value, item: Value) {
    match list.as_array_mut() {
        Some(items) => items.push(item),
        None => *list = json!([item]),
    }
}

/// The pods one Instance needs: the runners' sizes added up.
pub fn pods_per_instance(replica: &Value) -> usize {
    let runners = replica["spec"]["runners"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    runners
        .iter()
        .map(|r| usize::try_from(r["size"].as_u64().unwrap_or(1)).unwrap_or(1))
        .sum()
}

/// Whether every pod of an Instance is there and Ready.
fn instance_ready(pods: &[&Pod], size: usize) -> bool {
    pods.len() >= size && pods.iter().all(|p| p.is_ready())
}

/// Instance index -> its pods (those not being deleted), in index order.
pub fn instances<'a>(pods: &[&'a Pod]) -> std::collections::BTreeMap<u64, Vec<&'a Pod>> {
    let mut instances = std::collections::BTreeMap::<u64, Vec<&Pod>>::new();
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
    let (status, reason, message) = if replicas == 0 {
        (
            false,
            "NoReplicas",
            "InferenceReplica has no desired Instances".to_owned(),
        )
    } else if ready == replicas {
        (true, "AllInstancesReady", format!("{ready}/{replicas} Instances Ready"))
    } else if ready >= floor {
        (
            true,
            "MinimumAvailable",
            format!("{ready}/{replicas} Instances serving (min {floor})"),
        )
    } else {
        let message = format!("{ready}/{replicas} Instances serving, need {floor} (no rollout in flight)");
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
        let mut capitalised = component.to_owned();
        if let Some(first) = capitalised.get_mut(..1) {
            first.make_ascii_uppercase();
        }
        let component_ready = component_ready(&format!("{capitalised}Ready"), replica, now);
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
        Some(first) => condition(
            "Ready",
            false,
            first["reason"].as_str().unwrap_or_default(),
            first["message"].as_str().unwrap_or_default().to_owned(),
            now,
        ),
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
    let (replicas, serving, floor) = (
        counts.replicas,
        count("servingReplicas"),
        counts.floor(&replica["spec"]["lifecycle"]),
    );
    let (ready, reason, message) = if replicas == 0 {
        (false, "NoReplicas", "Component has no desired Instances".to_owned())
    } else if counts.ready >= replicas {
        (true, "Ready", "All Instances are Ready".to_owned())
    } else if serving >= floor {
        (
            true,
            "MinimumAvailable",
            format!("{serving}/{replicas} Instances serving (min {floor})"),
        )
    } else {
        (
            false,
            "InsufficientAvailable",
            format!("{serving}/{replicas} Instances serving, need {floor}"),
        )
    };
    condition(kind, ready, reason, message, now)
}

fn condition(kind: &str, status: bool, reason: &str, message: String, now: &str) -> Value {
    let status = if status { "True" } else { "False" };
    json!({"type": kind, "status": status, "reason": reason, "message": message, "lastTransitionTime": now})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The seed's InferenceService, as the API server returns it (a uid), and its runtime, with
    /// the seed's engine shape (1 GPU, 10 CPUs, 30 GiB).
    fn seed() -> (Value, Value) {
        let service = json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "qwen3-0-6b", "namespace": "spread-demo", "uid": "isvc-uid"},
            "spec": {"deploymentMode": "OMENative", "model": {"name": "qwen3-0-6b"}, "runtime": {"name": "srt-qwen3-0-6b"},
                "engine": {"minReplicas": 2, "maxReplicas": 2, "topologySpread": "Required",
                    "topologySpreadKey": "topology.kubernetes.io/zone"}}});
        let runtime = json!({"apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime",
            "metadata": {"name": "srt-qwen3-0-6b"},
            "spec": {"engineConfig": {"runner": {"name": "engine", "image": "docker.io/lmsysorg/sglang:v0.5.5",
                "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi"},
                    "limits": {"nvidia.com/gpu": "1"}}}}}});
        (service, runtime)
    }

    fn seed_template() -> Value {
        json!({"metadata": {"labels": {"ome.io/managed-by": "OMENative", "ome.io/inferenceservice": "qwen3-0-6b",
                "component": "engine", "ome.io/runner": "default"}},
            "spec": {"containers": [{"name": "engine", "image": "docker.io/lmsysorg/sglang:v0.5.5",
                    "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi"},
                        "limits": {"nvidia.com/gpu": "1"}}}],
                "nodeSelector": {"models.ome.io/clusterbasemodel.qwen3-0-6b": "Ready"},
                "readinessGates": [{"conditionType": "ome.io/serving"}]}})
    }

    #[test]
    fn the_seeds_replica_carries_the_settings_in_effect_and_one_default_runner() {
        let (service, runtime) = seed();
        let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
        assert_eq!(
            replica,
            json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                "metadata": {"name": "qwen3-0-6b-engine", "namespace": "spread-demo",
                    "labels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine"},
                    "ownerReferences": [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "qwen3-0-6b",
                        "uid": "isvc-uid", "controller": true, "blockOwnerDeletion": true}]},
                "spec": {"parentRef": {"name": "qwen3-0-6b"}, "component": "engine", "replicas": 2,
                    "topologySpread": "Required", "topologySpreadKey": "topology.kubernetes.io/zone",
                    "runners": [{"name": "default", "size": 1, "template": seed_template()}]}})
        );
    }

    #[test]
    fn a_decoder_takes_its_runtimes_decoder_config_and_a_namespaced_base_model() {
        let service = json!({"metadata": {"name": "pd", "namespace": "llm", "uid": "u"},
            "spec": {"deploymentMode": "OMENative", "model": {"name": "llama", "kind": "BaseModel"},
                "runtime": {"name": "srt", "kind": "ServingRuntime"},
                "decoder": {"minReplicas": 3, "topologySpreadKey": "rack"}}});
        let runtime = json!({"kind": "ServingRuntime", "metadata": {"name": "srt", "namespace": "llm"},
            "spec": {"decoderConfig": {"topologySpread": "Preferred", "runner": {"image": "decoder:1"},
                "nodeSelector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]},
                "engineConfig": {"topologySpread": "Required", "runner": {"image": "engine:1"}}}});
        let replica = replica(&service, Some(&runtime), "decoder").expect("a replica");
        assert_eq!(
            (
                &replica["metadata"]["name"],
                &replica["spec"]["replicas"],
                &replica["spec"]["topologySpread"],
                &replica["spec"]["topologySpreadKey"]
            ),
            (&json!("pd-decoder"), &json!(3), &json!("Preferred"), &json!("rack"))
        );
        assert_eq!(
            replica["spec"]["runners"][0]["template"]["spec"],
            json!({"containers": [{"image": "decoder:1", "name": "ome-container"}],
                "nodeSelector": {"pool": "gpu", "models.ome.io/llm.basemodel.llama": "Ready"},
                "readinessGates": [{"conditionType": "ome.io/serving"}],
                "tolerations": [{"key": "gpu", "operator": "Exists"}]})
        );
    }

    #[test]
    fn a_malformed_runtime_field_is_left_as_it_is_not_indexed() {
        let (mut service, mut runtime) = seed();
        service["spec"]["engine"]["topologyKey"] = json!("rack");
        runtime["spec"]["engineConfig"]["leader"] = json!({});
        runtime["spec"]["engineConfig"]["worker"] = json!({"size": 1});
        runtime["spec"]["engineConfig"]["affinity"] = json!("anywhere");
        let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
        let pods = instance_pods(&replica, Instance::new(0), Terms::InTree);
        assert_eq!(
            pods[1]["spec"]["affinity"],
            json!("anywhere"),
            "no worker term, no panic"
        );
        let mut odd = json!({"metadata": {"labels": {"ome.io/runner": "default"}}, "spec": "x"});
        in_tree_terms(&mut odd, &replica);
        assert_eq!(odd["spec"], json!("x"));
    }

    #[test]
    fn counts_beyond_a_test_clusters_are_refused() {
        let (mut service, mut runtime) = seed();
        service["spec"]["engine"]["minReplicas"] = json!(100_000);
        assert_eq!(
            replica(&service, Some(&runtime), "engine").map(|_| ()),
            Err("spec.engine.minReplicas is 100000: the stand-in runs at most 64".into())
        );
        service["spec"]["engine"]["minReplicas"] = json!(2);
        runtime["spec"]["engineConfig"]["leader"] = json!({});
        runtime["spec"]["engineConfig"]["worker"] = json!({"size": 17});
        assert_eq!(
            replica(&service, Some(&runtime), "engine").map(|_| ()),
            Err("a worker size of 17: the stand-in runs at most 16".into())
        );
    }

    #[test]
    fn m1_the_runtime_gives_what_the_service_leaves_unset() {
        let (mut service, mut runtime) = seed();
        service["spec"]["engine"]["topologySpreadKey"] = Value::Null;
        runtime["spec"]["engineConfig"]["topologySpreadKey"] = json!("nvidia.com/gpu.clique");
        runtime["spec"]["engineConfig"]["topologySpread"] = json!("Preferred");
        let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
        let spec = &replica["spec"];
        assert_eq!(
            (
                &spec["topologySpread"],
                &spec["topologySpreadKey"],
                &spec["topologyKey"]
            ),
            (&json!("Required"), &json!("nvidia.com/gpu.clique"), &Value::Null)
        );
        service["spec"]["engine"]["topologySpread"] = json!("Sometimes");
        assert_eq!(
            super::replica(&service, Some(&runtime), "engine").map(|_| ()),
            Err("InferenceService spread-demo/qwen3-0-6b spec.engine.topologySpread: \"Sometimes\" must be Required, Preferred or unset".into())
        );
    }

    #[test]
    fn p5_an_only_pod_is_named_labelled_and_constrained_as_ome_renders_it() {
        let (service, runtime) = seed();
        let mut replica = replica(&service, Some(&runtime), "engine").expect("a replica");
        replica["metadata"]["uid"] = json!("ir-uid");
        let pods = instance_pods(&replica, Instance::new(1), Terms::InTree);
        let mut spec = seed_template()["spec"].clone();
        spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {
                "ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}}}]);
        let revision = revision_hash(&replica);
        assert_eq!(revision.len(), 8);
        assert_eq!(
            pods,
            [json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "qwen3-0-6b-engine-1-default-0", "namespace": "spread-demo",
                    "labels": {"ome.io/managed-by": "OMENative", "ome.io/inferenceservice": "qwen3-0-6b", "component": "engine",
                        "ome.io/runner": "default", "ome.io/instance-index": "1", "ome.io/instance-incarnation": "1",
                        "ome.io/pod-ordinal": "0", "ome.io/revision-hash": revision},
                    "ownerReferences": [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "qwen3-0-6b-engine",
                        "uid": "ir-uid", "controller": true, "blockOwnerDeletion": true}]},
                "spec": spec})]
        );
        let bare = instance_pods(&replica, Instance::new(1), Terms::Webhook);
        assert_eq!(
            bare[0]["spec"],
            seed_template()["spec"],
            "no terms: the webhook adds them"
        );
    }

    #[test]
    fn p8_a_leader_and_its_workers_from_the_runtimes_worker_size() {
        let (mut service, mut runtime) = seed();
        service["spec"]["engine"]["topologyKey"] = json!("nvidia.com/gpu.clique");
        runtime["spec"]["engineConfig"]["leader"] = json!({});
        runtime["spec"]["engineConfig"]["worker"] = json!({"size": 2});
        let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
        let runners: Vec<(&Value, &Value)> = replica["spec"]["runners"]
            .as_array()
            .expect("runners")
            .iter()
            .map(|r| (&r["name"], &r["size"]))
            .collect();
        assert_eq!(runners, [(&json!("leader"), &json!(1)), (&json!("worker"), &json!(2))]);
        let pods = instance_pods(&replica, Instance::new(0), Terms::InTree);
        let shown: Vec<(&str, &Value, &Value, usize, &Value)> = pods
            .iter()
            .map(|p| {
                let constraints = p["spec"]["topologySpreadConstraints"].as_array().map_or(0, Vec::len);
                let affinity = &p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
                let labels = &p["metadata"]["labels"];
                (
                    name(p),
                    &labels["ome.io/pod-ordinal"],
                    &labels["scheduling.x-k8s.io/pod-group"],
                    constraints,
                    affinity,
                )
            })
            .collect();
        let leader_term = json!([{"topologyKey": "nvidia.com/gpu.clique", "labelSelector": {"matchLabels": {
            "ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/instance-index": "0",
            "ome.io/runner": "leader"}}}]);
        // The ordinal within the runner (`podLabels`), the group of the Instance (`PodGroupName`).
        let group = json!("qwen3-0-6b-engine-0");
        assert_eq!(
            shown,
            [
                ("qwen3-0-6b-engine-0-leader-0", &json!("0"), &group, 1, &Value::Null),
                ("qwen3-0-6b-engine-0-worker-0", &json!("0"), &group, 0, &leader_term),
                ("qwen3-0-6b-engine-0-worker-1", &json!("1"), &group, 0, &leader_term)
            ]
        );
    }

    #[test]
    fn p6_a_constraint_the_runtime_sets_on_the_key_is_kept() {
        let (service, mut runtime) = seed();
        let own = json!([{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app": "x"}}}]);
        runtime["spec"]["engineConfig"]["topologySpreadConstraints"] = own.clone();
        let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
        let pods = instance_pods(&replica, Instance::new(0), Terms::InTree);
        assert_eq!(pods[0]["spec"]["topologySpreadConstraints"], own);
    }

    fn ready_pod(index: &str, ready: bool) -> Pod {
        crate::support::objects::read(&json!({"metadata": {"labels": {"ome.io/instance-index": index}},
            "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
    }

    #[test]
    fn the_replica_and_the_service_are_ready_in_omes_words() {
        let (service, runtime) = seed();
        let mut replica = replica(&service, Some(&runtime), "engine").expect("a replica");
        replica["metadata"]["generation"] = json!(1);
        replica["status"] = json!({"conditions": [{"type": "Spread", "status": "True", "reason": "Satisfied",
            "message": "", "lastTransitionTime": "2026-12-01T09:00:00Z"}]});
        let (zero, one) = (ready_pod("0", true), ready_pod("1", false));
        let status = replica_status(&replica, &[&zero, &one], "2026-12-01T10:00:00Z");
        // No lifecycle budget: the floor is every Instance (`InstanceAvailabilityFloor`).
        assert_eq!(
            status,
            json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 1, "availableReplicas": 1, "servingReplicas": 1,
                "labelSelector": "component=engine,ome.io/inferenceservice=qwen3-0-6b,ome.io/managed-by=OMENative",
                "conditions": [
                    {"type": "Spread", "status": "True", "reason": "Satisfied", "message": "", "lastTransitionTime": "2026-12-01T09:00:00Z"},
                    {"type": "Ready", "status": "False", "reason": "ReplicaCountMismatch",
                        "message": "1/2 Instances serving, need 2 (no rollout in flight)", "lastTransitionTime": "2026-12-01T10:00:00Z"}]})
        );
        replica["status"] = status;
        assert_eq!(
            service_conditions(&service, &[&replica], "2026-12-01T10:00:00Z"),
            json!([
                {"type": "EngineReady", "status": "False", "reason": "InsufficientAvailable",
                    "message": "1/2 Instances serving, need 2", "lastTransitionTime": "2026-12-01T10:00:00Z"},
                {"type": "Ready", "status": "False", "reason": "InsufficientAvailable",
                    "message": "1/2 Instances serving, need 2", "lastTransitionTime": "2026-12-01T10:00:00Z"}])
        );
        let one = ready_pod("1", true);
        let status = replica_status(&replica, &[&zero, &one], "2026-12-01T10:01:00Z");
        assert_eq!(
            (&status["readyReplicas"], &status["conditions"][1]),
            (
                &json!(2),
                &json!({"type": "Ready", "status": "True", "reason": "AllInstancesReady",
                "message": "2/2 Instances Ready", "lastTransitionTime": "2026-12-01T10:01:00Z"})
            )
        );
        replica["status"] = status;
        assert_eq!(
            service_conditions(&service, &[&replica], "2026-12-01T10:01:00Z"),
            json!([
                {"type": "EngineReady", "status": "True", "reason": "Ready", "message": "All Instances are Ready",
                    "lastTransitionTime": "2026-12-01T10:01:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:01:00Z"}])
        );
    }

    #[test]
    fn below_every_instance_ready_the_lifecycles_budget_keeps_the_replica_minimum_available() {
        let (service, runtime) = seed();
        let mut replica = replica(&service, Some(&runtime), "engine").expect("a replica");
        let (zero, one, two) = (ready_pod("0", true), ready_pod("1", false), ready_pod("2", true));
        // `maxUnavailable: 1` of 2 wanted: a floor of 1; `"50%"` of 3, rounded up to 2: a floor of 1.
        for (wanted, budget, pods, message) in [
            (2, json!(1), vec![&zero, &one], "1/2 Instances serving (min 1)"),
            (
                3,
                json!("50%"),
                vec![&zero, &one, &two],
                "2/3 Instances serving (min 1)",
            ),
        ] {
            replica["spec"]["replicas"] = json!(wanted);
            replica["spec"]["lifecycle"] = json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": budget}}});
            let status = replica_status(&replica, &pods, "2026-12-01T10:00:00Z");
            assert_eq!(
                (
                    &status["conditions"][0]["status"],
                    &status["conditions"][0]["reason"],
                    &status["conditions"][0]["message"]
                ),
                (&json!("True"), &json!("MinimumAvailable"), &json!(message))
            );
        }
    }

    fn runners_of(service: &Value, runtime: &Value) -> Result<Vec<(String, u64)>, String> {
        let replica = replica(service, Some(runtime), "engine")?;
        let runners = replica["spec"]["runners"].as_array().cloned().unwrap_or_default();
        Ok(runners
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap_or_default().to_owned(),
                    r["size"].as_u64().unwrap_or(0),
                )
            })
            .collect())
    }

    #[test]
    fn a_leader_and_a_worker_make_an_instance_multi_pod_as_ome_decides_it() {
        let (mut service, mut runtime) = seed();
        let single = Ok(vec![("default".to_owned(), 1)]);
        // A worker size alone is no multi-pod shape (`components/engine.go`: a leader and a worker).
        runtime["spec"]["engineConfig"]["worker"] = json!({"size": 3});
        assert_eq!(runners_of(&service, &runtime), single);
        // A worker runner of three: the leader on the InferenceService, the worker on its runtime.
        service["spec"]["engine"]["leader"] = json!({});
        assert_eq!(
            runners_of(&service, &runtime),
            Ok(vec![("leader".to_owned(), 1), ("worker".to_owned(), 3)])
        );
        // A leader and a worker with no size: one worker.
        runtime["spec"]["engineConfig"]["worker"] = json!({});
        assert_eq!(
            runners_of(&service, &runtime),
            Ok(vec![("leader".to_owned(), 1), ("worker".to_owned(), 1)])
        );
        service["spec"]["engine"]["worker"] = json!({"size": 0});
        assert_eq!(
            runners_of(&service, &runtime),
            Err("spec.engine.worker.size is 0: OME requires a whole number above 0".to_owned())
        );
    }

    #[test]
    fn a_worker_runner_of_three_numbers_its_pods_and_the_leader_takes_the_instances_slot() {
        let (mut service, mut runtime) = seed();
        service["spec"]["engine"]["topologyKey"] = json!("nvidia.com/gpu.clique");
        runtime["spec"]["engineConfig"]["leader"] = json!({});
        runtime["spec"]["engineConfig"]["worker"] = json!({"size": 3});
        let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
        // Instance 1, repaired once, on its second slot after a SurgeThenDrain update.
        let second_slot = Instance {
            index: 1,
            incarnation: 2,
            slot: 1,
        };
        let pods = instance_pods(&replica, second_slot, Terms::InTree);
        let shown: Vec<(&str, &Value, &Value, &Value)> = pods
            .iter()
            .map(|p| {
                let labels = &p["metadata"]["labels"];
                (
                    name(p),
                    &labels["ome.io/pod-ordinal"],
                    &labels["ome.io/instance-incarnation"],
                    &labels["scheduling.x-k8s.io/pod-group"],
                )
            })
            .collect();
        let (two, group) = (json!("2"), json!("qwen3-0-6b-engine-1"));
        assert_eq!(
            shown,
            [
                ("qwen3-0-6b-engine-1-leader-1", &json!("1"), &two, &group),
                ("qwen3-0-6b-engine-1-worker-0", &json!("0"), &two, &group),
                ("qwen3-0-6b-engine-1-worker-1", &json!("1"), &two, &group),
                ("qwen3-0-6b-engine-1-worker-2", &json!("2"), &two, &group)
            ]
        );
        let (service, runtime) = seed();
        let single_pod = super::replica(&service, Some(&runtime), "engine").expect("a replica");
        let only = &instance_pods(&single_pod, second_slot, Terms::InTree)[0];
        assert_eq!(
            (
                name(only),
                &only["metadata"]["labels"]["ome.io/pod-ordinal"],
                &only["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
            ),
            ("qwen3-0-6b-engine-1-default-1", &json!("1"), &Value::Null)
        );
    }

    #[test]
    fn min_replicas_0_gives_one_instance_and_unset_the_runtimes() {
        let (mut service, mut runtime) = seed();
        runtime["spec"]["engineConfig"]["minReplicas"] = json!(3);
        let count = |service: &Value| {
            replica(service, Some(&runtime), "engine").expect("a replica")["spec"]["replicas"].clone()
        };
        assert_eq!(count(&service), json!(2));
        service["spec"]["engine"]["minReplicas"] = json!(0);
        assert_eq!(count(&service), json!(1));
        service["spec"]["engine"]["minReplicas"] = Value::Null;
        assert_eq!(count(&service), json!(3));
    }
}
