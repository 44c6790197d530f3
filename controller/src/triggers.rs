//! What change re-diagnoses which InferenceReplica: a pod its replica ([`crate::pods`]), an InferenceService its
//! engine and decoder, a runtime the services that use it, a node every replica (only when what
//! the diagnosis reads of it changed).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::replica::{ReplicaRef, RuntimeRef};

use crate::resources::{CONDITION, InferenceReplica, InferenceService};
use crate::state::lock;

/// The node labels some replica's diagnosis reads ([`ome_spread_core::diagnosis::node_keys`]),
/// as each replica's last reconcile found them.
#[derive(Debug, Default)]
pub struct KeysInUse(Mutex<Keys>);

#[derive(Debug, Default)]
struct Keys {
    by_replica: HashMap<ObjectRef<InferenceReplica>, BTreeSet<String>>,
    /// Their union, made anew when a replica's keys change.
    all: Arc<BTreeSet<String>>,
    /// A label no replica read changed since a replica last started to read a new key.
    unread: bool,
}

impl KeysInUse {
    /// Records a replica's keys. True when the nodes the diagnosis read must be built again for
    /// it: a key no replica read before is among them, and a label no replica read changed since
    /// (such a change does not rebuild them, [`NodeChange::Unread`]).
    pub fn set(&self, replica: ObjectRef<InferenceReplica>, keys: BTreeSet<String>) -> bool {
        let before = self.all();
        self.update(|by_replica| by_replica.insert(replica, keys.clone()) != Some(keys));
        let mut keys = lock(&self.0);
        !keys.all.is_subset(&before) && std::mem::take(&mut keys.unread)
    }

    /// A label no replica reads changed.
    fn unread(&self) {
        lock(&self.0).unread = true;
    }

    pub fn forget(&self, replica: &ObjectRef<InferenceReplica>) {
        self.update(|by_replica| by_replica.remove(replica).is_some());
    }

    pub fn all(&self) -> Arc<BTreeSet<String>> {
        lock(&self.0).all.clone()
    }

    /// `change` the keys per replica; it says whether they changed.
    fn update(&self, change: impl FnOnce(&mut HashMap<ObjectRef<InferenceReplica>, BTreeSet<String>>) -> bool) {
        let mut keys = lock(&self.0);
        if change(&mut keys.by_replica) {
            keys.all = Arc::new(keys.by_replica.values().flatten().cloned().collect());
        }
    }
}

/// What a node event changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeChange {
    /// Nothing that is kept of a node (a heartbeat, an image pulled).
    Nothing,
    /// What is kept, but nothing a diagnosis reads: a label no replica reads (GPU Feature
    /// Discovery rewrites its timestamp every minute). The node cache moves, but no replica is
    /// reconciled and the nodes the diagnosis reads are not built again; a replica that starts
    /// to read the label builds them anew (its reconcile, when it records a new key).
    Unread,
    /// A label in use, taints, cordon or allocatable, a node deleted, or a relist done (which may
    /// drop nodes): every replica is reconciled.
    Read,
}

/// Tells what each node event changed, from the nodes seen so far.
pub struct NodeChanges {
    keys: Arc<KeysInUse>,
    seen: HashMap<String, Seen>,
    /// During a relist: the nodes listed so far, which replace `seen` when it is done.
    relisting: Option<HashMap<String, Seen>>,
}

/// What is kept of a node: its labels, whole, so that a change is read against the keys in use
/// now (a replica may start to read a label after the node was seen), and a fingerprint of the
/// rest the diagnosis and the room read.
#[derive(PartialEq)]
struct Seen {
    labels: BTreeMap<String, String>,
    /// Taints, cordon, allocatable.
    rest: u64,
}

impl Seen {
    fn of(node: &KubeNode) -> Self {
        let mut hasher = DefaultHasher::new();
        let spec = node.spec.as_ref();
        spec.and_then(|s| s.unschedulable).hash(&mut hasher);
        for taint in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten() {
            (&taint.key, &taint.value, &taint.effect).hash(&mut hasher);
        }
        // The room a rebalance plan counts on.
        for (name, quantity) in node.status.iter().flat_map(|s| s.allocatable.iter().flatten()) {
            (name, &quantity.0).hash(&mut hasher);
        }
        Seen {
            labels: node.labels().clone(),
            rest: hasher.finish(),
        }
    }
}

impl NodeChanges {
    pub fn new(keys: Arc<KeysInUse>) -> Self {
        Self {
            keys,
            seen: HashMap::new(),
            relisting: None,
        }
    }

    pub fn changed(&mut self, event: &watcher::Event<KubeNode>) -> NodeChange {
        match event {
            watcher::Event::Apply(node) => {
                let now = Seen::of(node);
                let change = match self.seen.get(&node.name_any()) {
                    None => NodeChange::Read,
                    Some(was) if was == &now => NodeChange::Nothing,
                    Some(was) => {
                        let keys = self.keys.all();
                        if was.rest != now.rest || keys.iter().any(|key| was.labels.get(key) != now.labels.get(key)) {
                            NodeChange::Read
                        } else {
                            self.keys.unread();
                            NodeChange::Unread
                        }
                    }
                };
                self.seen.insert(node.name_any(), now);
                change
            }
            watcher::Event::Delete(node) => {
                self.seen.remove(&node.name_any());
                NodeChange::Read
            }
            watcher::Event::Init => {
                self.relisting = Some(HashMap::new());
                NodeChange::Nothing
            }
            watcher::Event::InitApply(node) => {
                self.relisting
                    .get_or_insert_default()
                    .insert(node.name_any(), Seen::of(node));
                NodeChange::Nothing
            }
            watcher::Event::InitDone => {
                self.seen = self.relisting.take().unwrap_or_default();
                NodeChange::Read
            }
        }
    }
}

/// A replica as a trigger reads it: all but its resourceVersion and the `Spread` condition, so
/// that the condition a reconcile writes does not reconcile the replica again (kube-runtime's
/// predicate filter drops an event whose value is the one seen last).
pub fn all_but_the_condition(replica: &InferenceReplica) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    let metadata = &replica.metadata;
    (
        &metadata.uid,
        metadata.generation,
        &metadata.labels,
        &metadata.annotations,
    )
        .hash(&mut hasher);
    serde_json::to_string(&replica.spec).ok()?.hash(&mut hasher);
    if let Some(status) = &replica.status {
        let others = status.conditions.iter().filter(|c| c.type_ != CONDITION);
        for c in others {
            (&c.type_, &c.status, &c.reason, &c.message, c.observed_generation).hash(&mut hasher);
        }
        serde_json::to_string(&status.migrations).ok()?.hash(&mut hasher);
    }
    Some(hasher.finish())
}

/// The replicas of an InferenceService: one per component.
pub fn replicas_of_service(service: &InferenceService) -> Vec<ObjectRef<InferenceReplica>> {
    let namespace = service.namespace().unwrap_or_default();
    COMPONENTS
        .iter()
        .map(|component| replica_of_component(&namespace, &service.name_any(), component))
        .collect()
}

/// The replica of an InferenceService's component, whose reconcile reads that component's pods.
pub fn replica_of_component(namespace: &str, service: &str, component: &str) -> ObjectRef<InferenceReplica> {
    let replica = ReplicaRef::for_component(namespace, service, component);
    ObjectRef::new(&replica.name).within(&replica.namespace)
}

/// The replicas of every InferenceService that uses the runtime (a namespaced one only in its
/// own namespace).
pub fn replicas_using(
    services: &Store<InferenceService>,
    runtime: RuntimeRef,
    namespace: Option<String>,
) -> Vec<ObjectRef<InferenceReplica>> {
    let namespaced = matches!(runtime, RuntimeRef::Namespaced(_));
    services
        .state()
        .iter()
        .filter(|s| s.runtime() == Some(runtime) && (!namespaced || s.namespace() == namespace))
        .flat_map(|s| replicas_of_service(s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use serde_json::json;

    fn kube_node(value: serde_json::Value) -> KubeNode {
        serde_json::from_value(value).expect("a node")
    }

    #[test]
    fn the_spread_condition_written_alone_triggers_nothing_else_does() {
        let replica = |generation: i64, conditions: serde_json::Value, migrations: serde_json::Value| {
            let replica: InferenceReplica = serde_json::from_value(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                "metadata": {"name": "m-engine", "namespace": "ns", "uid": "u1", "generation": generation, "resourceVersion": "7"},
                "spec": {"parentRef": {"name": "m"}, "component": "engine", "replicas": 2},
                "status": {"conditions": conditions, "migrations": migrations}}))
            .expect("a replica");
            all_but_the_condition(&replica)
        };
        let condition = |type_: &str, reason: &str| json!({"type": type_, "status": "True", "reason": reason, "message": "", "lastTransitionTime": "2026-12-01T10:00:00Z"});
        let ready = condition("Ready", "Available");
        let before = replica(3, json!([ready]), json!(null));
        // Ours, written or changed: the same value, so the filter drops the event.
        assert_eq!(
            replica(3, json!([ready, condition("Spread", "Satisfied")]), json!(null)),
            before
        );
        assert_eq!(
            replica(3, json!([ready, condition("Spread", "Skewed")]), json!(null)),
            before
        );
        // OME's condition, its migrations, a new generation: each reconciles.
        assert_ne!(
            replica(3, json!([condition("Ready", "Progressing")]), json!(null)),
            before
        );
        assert_ne!(
            replica(3, json!([ready]), json!([{"id": "m1", "phase": "Running"}])),
            before
        );
        assert_ne!(replica(4, json!([ready]), json!(null)), before);
    }

    #[test]
    fn a_service_maps_to_its_engine_and_decoder_and_a_runtime_to_the_services_using_it() {
        let service = |name: &str, ns: &str, runtime: serde_json::Value| -> InferenceService {
            serde_json::from_value(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
                "metadata": {"name": name, "namespace": ns}, "spec": {"runtime": runtime}}))
            .expect("a service")
        };
        let (store, mut writer) = reflector::store();
        for s in [
            service("a", "ns1", json!({"name": "srt"})),
            service("b", "ns2", json!({"name": "srt", "kind": "ClusterServingRuntime"})),
            service("c", "ns1", json!({"name": "srt", "kind": "ServingRuntime"})),
            service("d", "ns2", json!({"name": "srt", "kind": "ServingRuntime"})),
            service("e", "ns1", json!({"name": "other"})),
        ] {
            writer.apply_watcher_event(&watcher::Event::Apply(s));
        }
        let names = |refs: Vec<ObjectRef<InferenceReplica>>| {
            let mut names: Vec<String> = refs
                .iter()
                .map(|r| format!("{}/{}", r.namespace.clone().unwrap_or_default(), r.name))
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            names(replicas_of_service(&service("a", "ns1", json!(null)))),
            ["ns1/a-decoder", "ns1/a-engine"]
        );
        assert_eq!(
            names(replicas_using(&store, RuntimeRef::Cluster("srt"), None)),
            ["ns1/a-decoder", "ns1/a-engine", "ns2/b-decoder", "ns2/b-engine"]
        );
        assert_eq!(
            names(replicas_using(
                &store,
                RuntimeRef::Namespaced("srt"),
                Some("ns1".into())
            )),
            ["ns1/c-decoder", "ns1/c-engine"]
        );
    }

    #[test]
    fn labels_in_use_taint_cordon_changes_deletions_and_relists_are_read_heartbeats_are_not() {
        use NodeChange::{Nothing, Read, Unread};
        let base = json!({"metadata": {"name": "n", "labels": {"zone": "a", "nvidia.com/gfd.timestamp": "1764590000"}}, "spec": {}});
        let event = |value: &serde_json::Value| watcher::Event::Apply(kube_node(value.clone()));
        let keys = Arc::new(KeysInUse::default());
        keys.set(
            ObjectRef::new("m-engine").within("ns"),
            BTreeSet::from(["zone".to_owned()]),
        );
        let mut changes = NodeChanges::new(keys.clone());
        assert_eq!(changes.changed(&event(&base)), Read, "a new node");
        // Seen before any replica read a key (the list at start): a label no replica reads
        // changes, and nothing read did.
        let mut early = NodeChanges::new(Arc::default());
        assert_eq!(early.changed(&event(&base)), Read);
        early.keys = keys.clone();
        let mut stamped = base.clone();
        stamped["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = json!("1764590060");
        assert_eq!(early.changed(&event(&stamped)), Unread);
        let mut heartbeat = base.clone();
        heartbeat["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        heartbeat["metadata"]["resourceVersion"] = json!("42");
        assert_eq!(changes.changed(&event(&heartbeat)), Nothing);
        // GPU Feature Discovery's minutely rewrite: kept, but no replica reads it.
        let mut rewritten = heartbeat.clone();
        rewritten["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = json!("1764590060");
        assert_eq!(changes.changed(&event(&rewritten)), Unread);
        // Once a replica reads it (its node selection names it), its change is read.
        let decoder = ObjectRef::new("m-decoder").within("ns");
        let timestamp = BTreeSet::from(["nvidia.com/gfd.timestamp".to_owned()]);
        assert!(
            keys.set(decoder.clone(), timestamp.clone()),
            "a key no replica read before, after an unread change"
        );
        assert!(!keys.set(decoder.clone(), timestamp), "the same keys again");
        let gpu = ObjectRef::new("g-engine").within("ns");
        let product = BTreeSet::from(["nvidia.com/gpu.product".to_owned()]);
        assert!(!keys.set(gpu.clone(), product), "a new key, but no unread change since");
        keys.forget(&gpu);
        rewritten["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = json!("1764590120");
        assert_eq!(changes.changed(&event(&rewritten)), Read);
        keys.forget(&decoder);
        assert_eq!(keys.all().iter().collect::<Vec<_>>(), ["zone"]);

        let mut relabelled = base.clone();
        relabelled["metadata"]["labels"]["zone"] = json!("b");
        let mut tainted = base.clone();
        tainted["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
        let mut cordoned = base.clone();
        cordoned["spec"]["unschedulable"] = json!(true);
        let mut resized = base.clone();
        resized["status"] = json!({"allocatable": {"nvidia.com/gpu": "4"}});
        for changed in [relabelled, tainted, cordoned, resized, base.clone()] {
            assert_eq!(changes.changed(&event(&changed)), Read, "{changed}");
        }
        assert_eq!(changes.changed(&watcher::Event::Delete(kube_node(base.clone()))), Read);
        // A relist: read once when it is done, nothing per node listed; then it is what was seen.
        assert_eq!(changes.changed(&watcher::Event::Init), Nothing);
        assert_eq!(
            changes.changed(&watcher::Event::InitApply(kube_node(base.clone()))),
            Nothing
        );
        assert_eq!(changes.changed(&watcher::Event::InitDone), Read);
        assert_eq!(changes.changed(&event(&heartbeat)), Nothing);
    }
}
