//! What change re-diagnoses which InferenceReplica: a pod its replica, an InferenceService its
//! engine and decoder, a runtime the services that use it, a node every replica (only when what
//! the diagnosis reads of it changed).

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::labels;
use ome_spread_core::replica::{ReplicaRef, RuntimeRef, is_controlling_replica};

use crate::resources::{InferenceReplica, InferenceService};

/// Which node events change what the diagnosis reads: labels, taints, cordon or allocatable
/// changed, a node deleted, or a relist done (which may drop nodes). A heartbeat or an image
/// pulled does not.
#[derive(Default)]
pub struct NodeChanges {
    seen: HashMap<String, u64>,
    /// During a relist: the nodes listed so far, which replace `seen` when it is done.
    relisting: Option<HashMap<String, u64>>,
}

impl NodeChanges {
    pub fn changed(&mut self, event: &watcher::Event<KubeNode>) -> bool {
        match event {
            watcher::Event::Apply(node) => {
                self.seen.insert(node.name_any(), node_fingerprint(node)) != Some(node_fingerprint(node))
            }
            watcher::Event::Delete(node) => {
                self.seen.remove(&node.name_any());
                true
            }
            watcher::Event::Init => {
                self.relisting = Some(HashMap::new());
                false
            }
            watcher::Event::InitApply(node) => {
                self.relisting
                    .get_or_insert_default()
                    .insert(node.name_any(), node_fingerprint(node));
                false
            }
            watcher::Event::InitDone => {
                self.seen = self.relisting.take().unwrap_or_default();
                true
            }
        }
    }
}

/// Only what the diagnosis reads of a node.
fn node_fingerprint(node: &KubeNode) -> u64 {
    let mut hasher = DefaultHasher::new();
    node.labels().hash(&mut hasher);
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
    fn label_taint_cordon_changes_deletions_and_relists_are_node_changes_heartbeats_are_not() {
        let base = json!({"metadata": {"name": "n", "labels": {"zone": "a"}}, "spec": {}});
        let event = |value: &serde_json::Value| watcher::Event::Apply(kube_node(value.clone()));
        let mut changes = NodeChanges::default();
        assert!(changes.changed(&event(&base)), "a new node");
        let mut heartbeat = base.clone();
        heartbeat["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        heartbeat["metadata"]["resourceVersion"] = json!("42");
        assert!(!changes.changed(&event(&heartbeat)));
        let mut relabelled = base.clone();
        relabelled["metadata"]["labels"]["zone"] = json!("b");
        let mut tainted = base.clone();
        tainted["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
        let mut cordoned = base.clone();
        cordoned["spec"]["unschedulable"] = json!(true);
        let mut resized = base.clone();
        resized["status"] = json!({"allocatable": {"nvidia.com/gpu": "4"}});
        for changed in [relabelled, tainted, cordoned, resized, base.clone()] {
            assert!(changes.changed(&event(&changed)), "{changed}");
        }
        assert!(changes.changed(&watcher::Event::Delete(kube_node(base.clone()))));
        // A relist: one change when it is done, none per node listed; then it is what was seen.
        assert!(!changes.changed(&watcher::Event::Init));
        assert!(!changes.changed(&watcher::Event::InitApply(kube_node(base.clone()))));
        assert!(changes.changed(&watcher::Event::InitDone));
        assert!(!changes.changed(&event(&heartbeat)));
    }
}
