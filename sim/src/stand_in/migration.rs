//! Why not OME: its manager is not built here (see [`crate::stand_in::ome`]), and the rebalance
//! property (720 generated clusters in one test) and the controller's migrate tests (the in-memory
//! API server under paused time) need OME's surge migration with no control plane at all. The
//! same migrations run against the OME stand-in, kube-scheduler and kwok in the cluster suites.
//!
//! OME v1.3's side of a surge migration, as its InferenceReplica controller drives one (upstream
//! `Migrate`: "Accepted -> SurgePending -> SurgeReady -> Draining -> Completed", the record in
//! `status.migrations` as the single source of truth): it takes each request annotation off the
//! InferenceService into a queued Accepted record, and runs a component's records oldest first,
//! one at a time; checks the source (it exists and a pod of it is on `from_node`, else the record
//! fails; not placed or not Ready, it waits); creates the surge Instance at the lowest unused
//! index, its pods admitted by the policy itself; has the [`World`] place them, and fails the
//! record at its deadline if they are not all placed; marks them Ready; deletes the source's
//! pods; completes. Without its migration caps (`lifecycle.audit`, which OME's chart sets and its
//! kustomize manifests leave out: [`Ome::caps`]) it holds every request it would start in
//! Accepted, with upstream's message, a Warning Event once per hold and the replica's
//! `MigrationPolicyUnconfigured` condition `True`, until the caps are set or the request's
//! deadline passes. One phase per [`Ome::step`], so that a test can look at every state in
//! between. The [`World`] is this crate's models ([`Ome`]'s own: the policy in process and the
//! [`scheduler`](crate::stand_in::scheduler) model, what [`Ome::step`] uses), or a real cluster's
//! admission, kube-scheduler and kwok (the OME stand-in's, through [`Ome::step_in`]).
//!
//! Simpler than upstream, on purpose: the surge's index comes from the pods' labels (upstream:
//! the replica's instance statuses, the same while pods and statuses agree); the surge carries no
//! anti-affinity to `from_node` (the plan never targets the source's domain); hint nodes are tried
//! first rather than weighted as preferred node affinity.

use jiff::{SignedDuration, Timestamp};

use ome_spread_core::instance::component_of;
use ome_spread_core::labels::{INSTANCE_INDEX, POD_GROUP, POD_ORDINAL, RUNNER};
use ome_spread_core::migration::REQUEST_PREFIX;
use serde_json::{Value, json};

use crate::stand_in::scheduler;
use crate::support::objects::{name, namespace_of, read};

/// OME, with the policy's settings (for the surge's pods), the time a record may stay
/// non-terminal (its `deadline`, from its acceptance), and whether the operator configured its
/// migration caps.
pub struct Ome {
    pub settings: Value,
    pub deadline: SignedDuration,
    /// `ome.controller.lifecycle.audit` is set (`maxInFlightMigrations`, `maxMigrationsPerWindow`,
    /// `window`): without it OME holds every request in Accepted.
    pub caps: bool,
}

/// OME's condition on an InferenceReplica, `True` while a request of it waits for caps (upstream
/// `workload/types/conditions.go`).
const POLICY_UNCONFIGURED: &str = "MigrationPolicyUnconfigured";
/// The message of [`POLICY_UNCONFIGURED`] while caps are unset (upstream's condition message).
const UNCONFIGURED: &str = "lifecycle.audit is not configured; migration requests wait instead of executing";
/// What a record OME holds for caps says (upstream `migrationCapacityUnconfiguredMessage`).
const HELD_FOR_CAPS: &str = "waiting for migration capacity policy (no lifecycle.audit configured)";

/// What a step changes, each as small as OME writes it (so that a fake API server can apply
/// it beside the controller's own writes), each object named by its [`At`].
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// A request annotation (its key) taken off an InferenceService.
    Unannotated(At, String),
    /// An InferenceReplica's `status.migrations`, whole.
    Records(At, Value),
    /// One condition of an InferenceReplica, in its type's place (the others kept).
    Condition(At, Value),
    /// A pod created, bound or marked Ready: the whole pod.
    Pod(Value),
    PodDeleted(At),
}

/// An object's namespace and name.
pub type At = (String, String);

fn at(object: &Value) -> At {
    (namespace_of(object).into(), name(object).into())
}

/// An Event OME records on the InferenceService.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    pub reason: &'static str,
    pub service: String,
    pub message: String,
}

impl Ome {
    /// One step over the cluster's objects (every kind, nodes included): the migration under way
    /// of each component moves one phase, then each pending request is queued as an Accepted
    /// record (upstream queues them all, and runs them oldest first, one at a time).
    pub fn step(&self, objects: &[Value], now: Timestamp) -> (Vec<Change>, Vec<Event>) {
        self.step_in(self, objects, now)
    }

    /// [`Ome::step`] with the surge's pods admitted and placed by `world`.
    pub fn step_in(&self, world: &dyn World, objects: &[Value], now: Timestamp) -> (Vec<Change>, Vec<Event>) {
        let mut step = Step::default();
        let mut taken = Vec::new();
        for replica in objects.iter().filter(|o| o["kind"] == "InferenceReplica") {
            let mut records = replica["status"]["migrations"].as_array().cloned().unwrap_or_default();
            let before = records.clone();
            if let Some(at) = records.iter().position(active) {
                self.advance(world, replica, &mut records[at], objects, now, &mut step);
            }
            for (key, request) in requests_for(replica, objects) {
                let uuid = &key[REQUEST_PREFIX.len()..];
                records.push(json!({
                    "requestUUID": uuid, "trigger": "Manual",
                    "sourceInstance": request["instance"], "fromNode": request["from_node"],
                    "hintTargetNodes": request["hint_target_nodes"], "reason": request["reason"],
                    "phase": "Accepted", "attempt": 1, "startedAt": now.to_string(),
                    "deadline": (now + self.deadline).to_string(),
                }));
                let service = parent(replica);
                let accepted = format!("migration request {uuid} accepted");
                step.event("MigrationRequestAccepted", service, accepted);
                step.unannotate(namespace_of(replica), service, key);
                taken.push(key);
            }
            if records != before {
                step.changes.push(Change::Records(at(replica), Value::from(records)));
            }
        }
        // A request no component of its InferenceService takes: refused.
        for service in objects.iter().filter(|o| o["kind"] == "InferenceService") {
            for (key, _) in requests_on(service).filter(|(key, _)| !taken.contains(key)) {
                let rejected = format!("migration request {}: no such component", &key[REQUEST_PREFIX.len()..]);
                step.event("MigrationRequestRejected", name(service), rejected);
                step.unannotate(namespace_of(service), name(service), key);
            }
        }
        (step.changes, step.events)
    }

    /// The record one phase on, or Failed; the guards that defer leave it where it is.
    fn advance(
        &self,
        world: &dyn World,
        replica: &Value,
        record: &mut Value,
        objects: &[Value],
        now: Timestamp,
        step: &mut Step,
    ) {
        let service = parent(replica).to_owned();
        let pods = component_pods(replica, objects);
        let instance = |index: &Value| -> Vec<&Value> {
            let index = index.as_u64().map(|i| i.to_string());
            pods.iter()
                .copied()
                .filter(|p| p["metadata"]["labels"][INSTANCE_INDEX].as_str() == index.as_deref())
                .collect()
        };
        let uuid = record["requestUUID"].as_str().unwrap_or_default().to_owned();
        let outcome = match record["phase"].as_str() {
            Some("Accepted") => {
                let source = instance(&record["sourceInstance"]);
                self.start_surge(world, replica, record, &source, &pods, objects, now, step)
            }
            Some("SurgePending") => place_surge(world, record, &instance(&record["surgeInstance"]), objects, now, step),
            Some("SurgeReady") => {
                let source = instance(&record["sourceInstance"]);
                step.changes
                    .extend(source.into_iter().map(|pod| Change::PodDeleted(at(pod))));
                Ok("Draining")
            }
            Some("Draining") => {
                step.event("MigrationCompleted", &service, format!("migration {uuid} completed"));
                Ok("Completed")
            }
            // OME's legacy phases: this model never writes them.
            other => Err(format!("phase {other:?} is not this model's")),
        };
        match outcome {
            Ok(phase) => record["phase"] = json!(phase),
            Err(message) => {
                let failed = format!("migration {uuid} failed: {message}");
                step.event("MigrationFailed", &service, failed);
                record["phase"] = json!("Failed");
                record["message"] = json!(message);
            }
        }
        if matches!(record["phase"].as_str(), Some("Completed" | "Failed")) {
            record["completedAt"] = json!(now.to_string());
        }
    }

    /// The fresh-request guards (upstream's: `migrationPolicy`, the source exists, one of its
    /// pods is on `from_node`; a source not placed or not steady Ready defers), then the surge's
    /// pods at the lowest unused index, as OME renders them (the terms of the source dropped: the
    /// world's admission gives the surge its own).
    #[allow(clippy::too_many_arguments)]
    fn start_surge(
        &self,
        world: &dyn World,
        replica: &Value,
        record: &mut Value,
        source: &[&Value],
        pods: &[&Value],
        objects: &[Value],
        now: Timestamp,
        step: &mut Step,
    ) -> Result<&'static str, String> {
        let index = &record["sourceInstance"];
        let component = replica["spec"]["component"].as_str().unwrap_or_default();
        if service_of(replica, objects)
            .is_some_and(|s| s["spec"][component]["lifecycle"]["migrationPolicy"]["mode"] == "Never")
        {
            return Err("migrationPolicy mode is Never".into());
        }
        if source.is_empty() {
            return Err(format!("instance {index} does not exist"));
        }
        if source
            .iter()
            .any(|p| p["spec"]["nodeName"].is_null() || !read(p).is_ready())
        {
            return Ok("Accepted");
        }
        if !source.iter().any(|p| p["spec"]["nodeName"] == record["fromNode"]) {
            return Err(format!(
                "from_node {} does not match observed source node {}",
                record["fromNode"], source[0]["spec"]["nodeName"]
            ));
        }
        // Upstream judges the caps after the source's guards; the condition says its last verdict.
        step.condition(replica, self.caps, now);
        if !self.caps {
            return hold_for_caps(record, now, step, parent(replica));
        }
        let used: Vec<u64> = pods
            .iter()
            .filter_map(|p| p["metadata"]["labels"][INSTANCE_INDEX].as_str()?.parse().ok())
            .collect();
        let surge = (0..).find(|i| !used.contains(i)).unwrap_or_default();
        // The leader first: its workers' affinity names it.
        let mut ordered = source.to_vec();
        ordered.sort_by_key(|p| (p["metadata"]["labels"][RUNNER] == "worker", name(p).to_owned()));
        let hints = hints(record);
        for pod in ordered {
            let admitted = world.admit(surge_pod(pod, surge), replica, &hints)?;
            step.changes.push(Change::Pod(admitted));
        }
        record["surgeInstance"] = json!(surge);
        record["allocatedAt"] = json!(now.to_string());
        Ok("SurgePending")
    }
}
/// A request held for caps nobody configured: Accepted with upstream's message, a Warning Event
/// when the hold starts; Failed once its deadline passes.
fn hold_for_caps(record: &mut Value, now: Timestamp, step: &mut Step, service: &str) -> Result<&'static str, String> {
    if past_deadline(record, now) {
        return Err("deadline exceeded in phase Accepted: surge never allocated".into());
    }
    if record["message"] != HELD_FOR_CAPS {
        record["message"] = json!(HELD_FOR_CAPS);
        let uuid = record["requestUUID"].as_str().unwrap_or_default();
        let held = format!("OMENative migration uuid={uuid} held: {HELD_FOR_CAPS}");
        step.event(POLICY_UNCONFIGURED, service, held);
    }
    Ok("Accepted")
}

fn past_deadline(record: &Value, now: Timestamp) -> bool {
    let deadline: Option<Timestamp> = record["deadline"].as_str().and_then(|d| d.parse().ok());
    deadline.is_some_and(|d| now >= d)
}

fn hints(record: &Value) -> Vec<String> {
    serde_json::from_value(record["hintTargetNodes"].clone()).unwrap_or_default()
}

/// Who admits and places a surge's pods.
pub trait World {
    /// The surge's pod as the API server stores it (or its refusal), given the request's hint
    /// nodes.
    fn admit(&self, pod: Value, replica: &Value, hints: &[String]) -> Result<Value, String>;
    /// Where the surge's pods stand.
    fn place(&self, surge: &[&Value], objects: &[Value], hints: &[String]) -> Placement;
}

/// Where a surge's pods stand.
#[derive(Debug, Clone, PartialEq)]
pub enum Placement {
    /// All placed and Ready; the pods to write for it (none where the cluster did it).
    Ready(Vec<Value>),
    /// Not yet: why (the scheduler's word), and the pods bound meanwhile, to write.
    Waiting { why: String, bound: Vec<Value> },
}

/// OME's world in this crate's models ([`Ome::step`]): the policy admits the pods in process with
/// OME's `settings`, the [`scheduler`](crate::stand_in::scheduler) model places them, and placed
/// they are Ready at once.
impl World for Ome {
    fn admit(&self, pod: Value, replica: &Value, _: &[String]) -> Result<Value, String> {
        admitted(&pod, replica, &self.settings)
    }

    /// The surge's unbound pods placed in turn, each beside those placed before it, hints first.
    fn place(&self, surge: &[&Value], objects: &[Value], hints: &[String]) -> Placement {
        let nodes: Vec<Value> = objects.iter().filter(|o| o["kind"] == "Node").cloned().collect();
        let mut pods: Vec<Value> = objects.iter().filter(|o| o["kind"] == "Pod").cloned().collect();
        let (mut unplaced, mut bound, mut placed) = (None, Vec::new(), Vec::new());
        for pod in surge {
            let mut pod = (*pod).clone();
            if pod["spec"]["nodeName"].is_null() {
                match scheduler::place(&pod, &nodes, &pods, hints) {
                    Ok(node) => {
                        pod["spec"]["nodeName"] = json!(node);
                        // Bound: it takes room from the next pod of the surge.
                        pods.push(pod.clone());
                        bound.push(pod.clone());
                    }
                    Err(why) => unplaced = unplaced.or(Some(why)),
                }
            }
            placed.push(pod);
        }
        let running = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
        for pod in &mut placed {
            pod["status"] = running.clone();
        }
        match unplaced {
            Some(why) => Placement::Waiting { why, bound },
            None => Placement::Ready(placed),
        }
    }
}

/// The request annotations on an InferenceService: (key, the request's JSON, or null).
fn requests_on(service: &Value) -> impl Iterator<Item = (&String, Value)> {
    let annotations = service["metadata"]["annotations"].as_object().into_iter().flatten();
    let requests = annotations.filter(|(key, _)| key.starts_with(REQUEST_PREFIX));
    requests.map(|(key, value)| {
        (
            key,
            serde_json::from_str(value.as_str().unwrap_or_default()).unwrap_or(Value::Null),
        )
    })
}

/// The requests pending for a replica's component, on its InferenceService.
fn requests_for<'a>(replica: &Value, objects: &'a [Value]) -> Vec<(&'a String, Value)> {
    let requests = service_of(replica, objects).into_iter().flat_map(requests_on);
    requests
        .filter(|(_, request)| request["component"] == replica["spec"]["component"])
        .collect()
}

/// The replica's InferenceService, in its namespace.
fn service_of<'a>(replica: &Value, objects: &'a [Value]) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| is_named(o, "InferenceService", namespace_of(replica), parent(replica)))
}

fn parent(replica: &Value) -> &str {
    replica["spec"]["parentRef"]["name"].as_str().unwrap_or_default()
}

/// The surge placed by the world: Ready once all its pods are; Failed at the deadline, its pods
/// deleted.
fn place_surge(
    world: &dyn World,
    record: &Value,
    surge: &[&Value],
    objects: &[Value],
    now: Timestamp,
    step: &mut Step,
) -> Result<&'static str, String> {
    match world.place(surge, objects, &hints(record)) {
        Placement::Waiting { why, .. } if past_deadline(record, now) => {
            step.changes.extend(surge.iter().map(|pod| Change::PodDeleted(at(pod))));
            let surge = &record["surgeInstance"];
            Err(format!("surge instance {surge} unschedulable: {why}"))
        }
        Placement::Waiting { bound, .. } => {
            step.changes.extend(bound.into_iter().map(Change::Pod));
            Ok("SurgePending")
        }
        Placement::Ready(pods) => {
            step.changes.extend(pods.into_iter().map(Change::Pod));
            Ok("SurgeReady")
        }
    }
}

/// A pod of Instance `surge` from one of the source's: its index, its name, no node, no status,
/// and none of the source's spread constraints and leader terms (OME renders the surge's own).
/// The surge is a new Instance, on slot 0: a one-pod runner's pod is `-0` whatever the source's
/// slot, a worker keeps its place in its runner (`expectedPodNamesForInstance`), and a multi-pod
/// Instance's pods name its own pod group (`render.go`).
pub fn surge_pod(source: &Value, surge: u64) -> Value {
    let mut pod = source.clone();
    let labels = &source["metadata"]["labels"];
    let service = labels["ome.io/inferenceservice"].as_str().unwrap_or_default();
    let component = labels["component"].as_str().unwrap_or_default();
    let runner = labels[RUNNER].as_str().unwrap_or_default();
    let ordinal = if runner == "worker" {
        name(source).rsplit('-').next().unwrap_or("0")
    } else {
        "0"
    };
    pod["metadata"] = json!({
        "name": format!("{service}-{component}-{surge}-{runner}-{ordinal}"),
        "namespace": source["metadata"]["namespace"],
        "labels": labels,
    });
    // Owned by the source's replica, as OME's pods are (a real cluster collects them with it).
    if let Some(owners) = source["metadata"].get("ownerReferences") {
        pod["metadata"]["ownerReferences"] = owners.clone();
    }
    let labels = &mut pod["metadata"]["labels"];
    labels[INSTANCE_INDEX] = json!(surge.to_string());
    if labels.get(POD_ORDINAL).is_some() {
        labels[POD_ORDINAL] = json!(ordinal);
    }
    if labels.get(POD_GROUP).is_some() {
        labels[POD_GROUP] = json!(format!("{service}-{component}-{surge}"));
    }
    if let Some(spec) = pod["spec"].as_object_mut() {
        spec.remove("nodeName");
        if let Some(constraints) = spec.get_mut("topologySpreadConstraints").and_then(Value::as_array_mut) {
            constraints.retain(|c| c["labelSelector"]["matchLabels"]["ome.io/inferenceservice"].is_null());
        }
        let leader_terms = spec
            .get_mut("affinity")
            .and_then(|a| a["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"].as_array_mut());
        if let Some(terms) = leader_terms {
            terms.retain(|t| t["labelSelector"]["matchLabels"][INSTANCE_INDEX].is_null());
        }
    }
    pod["status"] = json!({"phase": "Pending"});
    pod
}

/// The pod as the policy admits it (its one host call answered with the replica); its
/// rejection is the API server's refusal to create the pod.
pub fn admitted(pod: &Value, replica: &Value, settings: &Value) -> Result<Value, String> {
    let request = json!({"settings": settings, "request": {"uid": "surge", "operation": "CREATE",
        "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": pod["metadata"]["namespace"], "object": pod}});
    let payload = request.to_string().into_bytes();
    let response =
        ome_spread::validate(&payload, |_| Ok(replica.to_string().into_bytes())).map_err(|e| e.to_string())?;
    let response: Value = serde_json::from_slice(&response).map_err(|e| e.to_string())?;
    if response["accepted"] != true {
        return Err(format!("pod {} denied: {}", name(pod), response["message"]));
    }
    match &response["mutated_object"] {
        Value::Null => Ok(pod.clone()),
        mutated => Ok(mutated.clone()),
    }
}

/// The pods of the replica's component, by OME's labels.
fn component_pods<'a>(replica: &Value, objects: &'a [Value]) -> Vec<&'a Value> {
    let component = replica["spec"]["component"].as_str();
    let wanted = Some((namespace_of(replica), parent(replica), component.unwrap_or_default()));
    let pods = objects.iter().filter(|o| o["kind"] == "Pod");
    pods.filter(|p| component_of(&read(p)) == wanted).collect()
}

fn active(record: &Value) -> bool {
    matches!(
        record["phase"].as_str(),
        Some("Accepted" | "SurgePending" | "SurgeReady" | "Draining")
    )
}

#[derive(Default)]
struct Step {
    changes: Vec<Change>,
    events: Vec<Event>,
}

impl Step {
    fn unannotate(&mut self, namespace: &str, service: &str, key: &str) {
        let service = (namespace.into(), service.into());
        self.changes.push(Change::Unannotated(service, key.into()));
    }

    /// The replica's `MigrationPolicyUnconfigured` as a pass that judged a request under caps
    /// (`caps`) or without them leaves it, written when its status changes.
    fn condition(&mut self, replica: &Value, caps: bool, now: Timestamp) {
        let (status, reason, message) = match caps {
            true => (
                "False",
                "MigrationCapacityConfigured",
                "Migration capacity policy is configured",
            ),
            false => ("True", "MigrationCapacityUnconfigured", UNCONFIGURED),
        };
        let mut conditions = replica["status"]["conditions"].as_array().into_iter().flatten();
        if conditions.any(|c| c["type"] == POLICY_UNCONFIGURED && c["status"] == status) {
            return;
        }
        let condition = json!({"type": POLICY_UNCONFIGURED, "status": status, "reason": reason,
                "message": message, "lastTransitionTime": now.to_string()});
        self.changes.push(Change::Condition(at(replica), condition));
    }

    fn event(&mut self, reason: &'static str, service: &str, message: String) {
        let service = service.into();
        self.events.push(Event {
            reason,
            service,
            message,
        });
    }
}

/// Where OME's changes are written: the tests' list of objects, or a fake API server.
pub trait Cluster {
    /// Edits the object of `kind`, if it is there.
    fn edit(&mut self, kind: &str, namespace: &str, name: &str, edit: &mut dyn FnMut(&mut Value));
    /// Creates or replaces a pod.
    fn put_pod(&mut self, pod: Value);
    fn delete_pod(&mut self, namespace: &str, name: &str);
}

/// The changes written as OME writes them: the annotation and the records by editing their
/// objects (beside whatever else wrote them), the pods whole.
pub fn apply(cluster: &mut impl Cluster, changes: Vec<Change>) {
    for change in changes {
        match change {
            Change::Unannotated((namespace, service), key) => {
                cluster.edit("InferenceService", &namespace, &service, &mut |service| {
                    if let Some(annotations) = service["metadata"]["annotations"].as_object_mut() {
                        annotations.remove(&key);
                    }
                });
            }
            Change::Records((namespace, replica), migrations) => {
                cluster.edit("InferenceReplica", &namespace, &replica, &mut |replica| {
                    replica["status"]["migrations"] = migrations.clone();
                });
            }
            Change::Condition((namespace, replica), condition) => {
                cluster.edit("InferenceReplica", &namespace, &replica, &mut |replica| {
                    replica["status"]["conditions"] =
                        with_condition(&replica["status"]["conditions"], condition.clone());
                });
            }
            Change::Pod(pod) => cluster.put_pod(pod),
            Change::PodDeleted((namespace, name)) => cluster.delete_pod(&namespace, &name),
        }
    }
}

/// `conditions` with `condition` in its type's place (or added), its transition time kept when
/// its status did not change.
pub fn with_condition(conditions: &Value, mut condition: Value) -> Value {
    let mut conditions = conditions.as_array().cloned().unwrap_or_default();
    match conditions.iter_mut().find(|c| c["type"] == condition["type"]) {
        Some(old) => {
            if old["status"] == condition["status"] && old["lastTransitionTime"].is_string() {
                condition["lastTransitionTime"] = old["lastTransitionTime"].clone();
            }
            *old = condition;
        }
        None => conditions.push(condition),
    }
    Value::Array(conditions)
}

impl Cluster for Vec<Value> {
    fn edit(&mut self, kind: &str, namespace: &str, name: &str, edit: &mut dyn FnMut(&mut Value)) {
        if let Some(object) = self.iter_mut().find(|o| is_named(o, kind, namespace, name)) {
            edit(object);
        }
    }

    fn put_pod(&mut self, pod: Value) {
        match self
            .iter()
            .position(|o| is_named(o, "Pod", namespace_of(&pod), name(&pod)))
        {
            Some(at) => self[at] = pod,
            None => self.push(pod),
        }
    }

    fn delete_pod(&mut self, namespace: &str, pod: &str) {
        self.retain(|o| !is_named(o, "Pod", namespace, pod));
    }
}

fn is_named(object: &Value, kind: &str, namespace: &str, name: &str) -> bool {
    object["kind"] == kind && namespace_of(object) == namespace && self::name(object) == name
}
