//! What change re-diagnoses which InferenceReplica: a pod its replica, an InferenceService its
//! engine and decoder, a runtime the services that use it, a node every replica (only when what
//! the diagnosis reads of it changed).

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::labels;
use ome_spread_core::replica::{ReplicaRef, RuntimeRef, is_controlling_replica};

use crate::resources::{InferenceReplica, InferenceService};

/// The node labels some replica's diagnosis reads ([`ome_spread_core::diagnosis::node_keys`]),
/// as each replica's last reconcile found them.
#[derive(Debug, Default)]
pub struct KeysInUse(Mutex<Keys>);

#[derive(Debug, Default)]
struct Keys {
    by_replica: HashMap<ObjectRef<InferenceReplica>, BTreeSet<String>>,
    /// Their union, made anew when a replica's keys change.
    all: Arc<BTreeSet<String>>,
}

impl KeysInUse {
    pub fn set(&self, replica: ObjectRef<InferenceReplica>, keys: BTreeSet<String>) {
        self.update(|by_replica| by_replica.insert(replica, keys.clone()) != Some(keys));
    }

    pub fn forget(&self, replica: &ObjectRef<InferenceReplica>) {
        self.update(|by_replica| by_replica.remove(replica).is_some());
    }

    pub fn all(&self) -> Arc<BTreeSet<String>> {
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .all
            .clone()
    }

    /// `change` the keys per replica; it says whether they changed.
    fn update(&self, change: impl FnOnce(&mut HashMap<ObjectRef<InferenceReplica>, BTreeSet<String>>) -> bool) {
        let mut keys = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
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
    /// Discovery rewrites its timestamp every minute). The node cache moves, no replica is
    /// reconciled; one that starts to read the label reconciles on its own change.
    Unread,
    /// A label in use, taints, cordon or allocatable, a node deleted, or a relist done (which may
    /// drop nodes): every replica is reconciled.
    Read,
}

/// Tells what each node event changed, from the nodes seen so far.
pub struct NodeChanges {
    keys: Arc<KeysInUse>,
    /// Each node's fingerprints: of all it keeps, and of what the diagnosis reads.
    seen: HashMap<String, (u64, u64)>,
    /// During a relist: the nodes listed so far, which replace `seen` when it is done.
    relisting: Option<HashMap<String, (u64, u64)>>,
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
        let keys = self.keys.all();
        let fingerprints = |node: &KubeNode| (node_fingerprint(node, None), node_fingerprint(node, Some(&keys)));
        match event {
            watcher::Event::Apply(node) => {
                let (kept, read) = fingerprints(node);
                match self.seen.insert(node.name_any(), (kept, read)) {
                    Some((_, was_read)) if was_read != read => NodeChange::Read,
                    None => NodeChange::Read,
                    Some((was_kept, _)) if was_kept != kept => NodeChange::Unread,
                    Some(_) => NodeChange::Nothing,
                }
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
                    .insert(node.name_any(), fingerprints(node));
                NodeChange::Nothing
            }
            watcher::Event::InitDone => {
                self.seen = self.relisting.take().unwrap_or_default();
                NodeChange::Read
            }
        }
    }
}

/// What the diagnosis reads of a node, and the room model: the labels `keys` names (all of them
/// when None), taints, cordon, allocatable.
fn node_fingerprint(node: &KubeNode, keys: Option<&BTreeSet<String>>) -> u64 {
    let mut hasher = DefaultHasher::new();
    for (key, value) in node.labels() {
        if keys.is_none_or(|keys| keys.contains(key)) {
            (key, value).hash(&mut hasher);
        }
    }
    let spec = node.spec.as_ref();
    spec.and_then(|s| s.unschedulable).hash(&mut hasher);
    for taint in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten() {
        (&taint.key, &taint.value, &taint.effect).hash(&mut hasher);
    }
    // The room a rebalance plan counts on.
    for (name, quantity) in node.status.iter().flat_map(|s| s.allocatable.iter().flatten()) {
        (name, &quantity.0).hash(&mut hasher);
    }
    hasher.finish()
}

/// The replica of a pod: its controller owner, else the one its OME labels name (P3).
pub fn replica_of_pod(pod: &Pod) -> Option<ObjectRef<InferenceReplica>> {
    let namespace = pod.namespace()?;
    let owner = pod
        .owner_references()
        .iter()
        .find(|o| is_controlling_replica(&o.api_version, &o.kind, o.controller == Some(true)))
        .map(|o| o.name.clone());
    let name = owner.or_else(|| {
        let labels = pod.labels();
        let (service, component) = (labels.get(labels::INFERENCE_SERVICE)?, labels.get(labels::COMPONENT)?);
        Some(ReplicaRef::for_component(&namespace, service, component).name)
    })?;
    Some(ObjectRef::new(&name).within(&namespace))
}

/// The replicas of an InferenceService: one per component.
pub fn replicas_of_service(service: &InferenceService) -> Vec<ObjectRef<InferenceReplica>> {
    let namespace = service.namespace().unwrap_or_default();
    COMPONENTS
        .iter()
        .map(|component| {
            let replica = ReplicaRef::for_component(&namespace, &service.name_any(), component);
            ObjectRef::new(&replica.name).within(&replica.namespace)
        })
        .collect()
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
    fn a_pod_maps_to_its_controller_replica_else_to_the_one_its_labels_name() {
        let owned: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns",
            "labels": {"ome.io/inferenceservice": "m", "component": "engine"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "1"},
                {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "m-decoder", "uid": "2", "controller": true}]}}))
        .expect("a pod");
        assert_eq!(replica_of_pod(&owned), Some(ObjectRef::new("m-decoder").within("ns")));
        let labelled: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns",
            "labels": {"ome.io/inferenceservice": "m", "component": "engine"}}}))
        .expect("a pod");
        assert_eq!(replica_of_pod(&labelled), Some(ObjectRef::new("m-engine").within("ns")));
        // P3: an owner of another API group or version is not the replica; the labels name it.
        let foreign: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns",
            "labels": {"ome.io/inferenceservice": "m", "component": "engine"},
            "ownerReferences": [{"apiVersion": "ome.io/v1alpha1", "kind": "InferenceReplica", "name": "m-decoder", "uid": "2", "controller": true}]}}))
        .expect("a pod");
        assert_eq!(replica_of_pod(&foreign), Some(ObjectRef::new("m-engine").within("ns")));
        let neither: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}})).expect("a pod");
        assert_eq!(replica_of_pod(&neither), None);
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
        keys.set(decoder.clone(), BTreeSet::from(["nvidia.com/gfd.timestamp".to_owned()]));
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
