//! The controller's one watch of pods, of every workload, read into the core's model of a pod
//! ([`Pod`]: what the diagnosis and the room read, nothing else). Its events keep two indexes
//! ([`crate::index`]): the room's requests per node ([`crate::room`]), and here the OMENative
//! pods of each component: a pod event moves that pod alone, triggers its replica's reconcile
//! ([`crate::reconcile`]), and a reconcile reads its own component's pods only.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use ome_spread_core::instance::component_of;
use ome_spread_core::labels;
use ome_spread_core::ome::InferenceReplica;
use ome_spread_core::pod::Pod;
use ome_spread_core::replica::ReplicaRef;
use tracing::warn;

use crate::index::{Derived, Index, Shared};
use crate::room::Room;

/// The watch of every pod, trimmed, filling `room` then `pods`: the replicas whose OMENative pods
/// it changed, a relist's pods found gone among them ([`Index`]). An event that changes nothing
/// the diagnosis reads of a pod (a container restarted, a probe's status) triggers no reconcile,
/// nor does a pod of another workload (it re-plans a component at that component's next change).
/// One watch for both: an OME pod's event is read once, and every pod is listed once.
pub fn changes(
    client: kube::Client,
    pods: Arc<Pods>,
    room: Arc<Room>,
) -> impl Stream<Item = ObjectRef<InferenceReplica>> {
    watcher(Api::<Pod>::all(client), watcher::Config::default())
        .default_backoff()
        .modify(trim)
        .flat_map(move |event| {
            let replicas = match event {
                Ok(event) => {
                    room.apply(&event);
                    pods.apply(&event)
                }
                Err(e) => {
                    warn!(error = %e, "watching the pods");
                    Vec::new()
                }
            };
            futures::stream::iter(replicas)
        })
}

/// The replica of an InferenceService's component, whose reconcile reads that component's pods.
pub fn replica_of_component(namespace: &str, service: &str, component: &str) -> ObjectRef<InferenceReplica> {
    let replica = ReplicaRef::for_component(namespace, service, component);
    ObjectRef::new(&replica.name).within(&replica.namespace)
}

/// (namespace, InferenceService, component).
pub type ComponentKey = (String, String, String);

/// Each component's pods, by name.
#[derive(Debug, Default, PartialEq)]
pub struct ByComponent(HashMap<ComponentKey, BTreeMap<String, Arc<Pod>>>);

impl Derived for ByComponent {
    type Object = Pod;
    /// A pod's component, its name, and the pod.
    type Entry = (ComponentKey, String, Arc<Pod>);
    /// The replica whose reconcile reads the pod: its component's.
    type Trigger = ObjectRef<InferenceReplica>;

    /// Its component by OME's labels (None: not an OMENative pod, or no component's).
    fn entry(pod: &Pod) -> Option<Self::Entry> {
        if pod.label(labels::MANAGED_BY) != Some(labels::OME_NATIVE) {
            return None;
        }
        let (namespace, service, component) = component_of(pod)?;
        let key = (namespace.to_owned(), service.to_owned(), component.to_owned());
        Some((key, pod.name().to_owned(), Arc::new(pod.clone())))
    }

    fn trigger(((namespace, service, component), _, _): &Self::Entry) -> Option<Self::Trigger> {
        Some(replica_of_component(namespace, service, component))
    }

    fn insert(&mut self, (component, name, pod): &Self::Entry) {
        self.0
            .entry(component.clone())
            .or_default()
            .insert(name.clone(), pod.clone());
    }

    fn remove(&mut self, (component, name, _): &Self::Entry) {
        if let Some(pods) = self.0.get_mut(component) {
            pods.remove(name);
            if pods.is_empty() {
                self.0.remove(component);
            }
        }
    }
}

/// The pods of every component, shared between the pods' watch and the reconciles.
pub type Pods = Shared<Index<ByComponent>>;

impl Pods {
    /// The pods of `component`, by name: shared, not copied.
    pub fn of(&self, component: &ComponentKey) -> Vec<Arc<Pod>> {
        self.with(|index| {
            let pods = index.derived().0.get(component).into_iter().flat_map(BTreeMap::values);
            pods.cloned().collect()
        })
    }
}

/// Of a pod's metadata, what is read: its name, namespace and labels. The model skips the rest of
/// the pod as it reads it; its annotations, managed fields and resourceVersion (which change in an
/// event that changes nothing read, which then triggers no reconcile) are dropped here.
pub fn trim(pod: &mut Pod) {
    let metadata = std::mem::take(&mut pod.metadata);
    pod.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        labels: metadata.labels,
        ..ObjectMeta::default()
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{self, Apply};
    use kube::ResourceExt;
    use ome_spread_sim::support::objects::read;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// An OME pod of component `component` of InferenceService `m` (none: unlabelled), on `node`,
    /// as the API server serves it.
    fn served(name: &str, component: Option<&str>, node: &str) -> Value {
        let mut labels = json!({"ome.io/managed-by": "OMENative"});
        if let Some(component) = component {
            labels["ome.io/inferenceservice"] = json!("m");
            labels["component"] = json!(component);
        }
        json!({"metadata": {"name": name, "namespace": "ns", "labels": labels,
            "annotations": {"a": "b"}, "managedFields": [{"manager": "ome"}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "sglang", "env": [{"name": "A", "value": "b"}],
                "resources": {"requests": {"nvidia.com/gpu": "1"}}, "readinessProbe": {"httpGet": {"port": 8080}}}],
                "nodeSelector": {"models.ome.io/clusterbasemodel.m": "Ready"}, "volumes": [{"name": "v", "emptyDir": {}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.0.0.1"}})
    }

    fn pod(name: &str, component: Option<&str>, node: &str) -> Pod {
        read(&served(name, component, node))
    }

    #[test]
    fn a_trimmed_pod_keeps_what_the_diagnosis_reads() {
        let mut as_served = served("m-engine-0-default-0", Some("engine"), "n1");
        // The conditions as the API server serves a running pod's: only Ready and PodScheduled
        // are read, and neither's times.
        let condition = |kind: &str| {
            json!({"type": kind, "status": "True", "lastProbeTime": null,
            "lastTransitionTime": "2026-12-05T03:54:57Z"})
        };
        as_served["status"]["conditions"] = json!([
            condition("Initialized"),
            condition("Ready"),
            condition("ContainersReady"),
            condition("ome.io/serving"),
            condition("PodScheduled")
        ]);
        let mut trimmed = read(&as_served);
        trim(&mut trimmed);
        assert_eq!(
            trimmed,
            read(&json!({"metadata": {"name": "m-engine-0-default-0", "namespace": "ns",
                    "labels": {"component": "engine", "ome.io/inferenceservice": "m", "ome.io/managed-by": "OMENative"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
                    "nodeName": "n1", "nodeSelector": {"models.ome.io/clusterbasemodel.m": "Ready"}},
                "status": {"conditions": [{"status": "True", "type": "Ready"}, {"status": "True", "type": "PodScheduled"}],
                    "phase": "Running"}}))
        );
    }

    /// The names of the replicas each event triggers, sorted (a relist's come in no order).
    fn triggered(pods: &Pods, events: Vec<watcher::Event<Pod>>) -> Vec<Vec<String>> {
        let names = |replicas: Vec<ObjectRef<InferenceReplica>>| {
            let mut names: Vec<String> = replicas.into_iter().map(|r| r.name).collect();
            names.sort();
            names
        };
        events.iter().map(|event| names(pods.apply(event))).collect()
    }

    #[test]
    fn only_an_event_that_changes_what_is_kept_of_a_pod_triggers() {
        // As the watch takes it: a new resourceVersion, a container's restarts, then trimmed.
        let seen = |node: &str, restarts: u32| {
            let mut value = served("m-engine-0-default-0", Some("engine"), node);
            value["metadata"]["resourceVersion"] = json!(restarts.to_string());
            value["status"]["containerStatuses"] =
                json!([{"name": "c", "image": "sglang", "imageID": "", "ready": true, "restartCount": restarts}]);
            let mut pod = read(&value);
            trim(&mut pod);
            pod
        };
        let triggers = triggered(
            &Pods::default(),
            vec![
                watcher::Event::Init,
                watcher::Event::InitApply(seen("n1", 0)),
                watcher::Event::InitDone,
                watcher::Event::Apply(seen("n1", 1)),
                watcher::Event::Apply(seen("n2", 1)),
                watcher::Event::Init,
                watcher::Event::InitApply(seen("n2", 2)),
                watcher::Event::InitApply(pod("stray", None, "n1")),
                watcher::Event::InitDone,
                watcher::Event::Delete(seen("n2", 2)),
                watcher::Event::Delete(seen("n2", 2)),
            ],
        );
        let engine = || vec!["m-engine".to_owned()];
        let none = Vec::<String>::new;
        assert_eq!(
            triggers,
            [
                none(),
                none(),
                engine(),
                none(),
                // The pod left n1 and came to n2: its replica, before and after.
                vec!["m-engine".to_owned(), "m-engine".to_owned()],
                none(),
                none(),
                none(),
                none(),
                engine(),
                none()
            ]
        );
    }

    /// The watch sees every pod: one with OME's component labels but not `OMENative` is not in
    /// its component, and a pod that stops being one leaves it.
    #[test]
    fn only_an_omenative_pod_is_in_its_component() {
        let not_omenative = || {
            let mut pod = pod("m-engine-0-default-0", Some("engine"), "n1");
            pod.labels_mut().remove(labels::MANAGED_BY);
            pod
        };
        let pods = Pods::default();
        let triggers = triggered(
            &pods,
            vec![
                watcher::Event::Init,
                watcher::Event::InitApply(not_omenative()),
                watcher::Event::InitDone,
                watcher::Event::Apply(pod("m-engine-0-default-0", Some("engine"), "n1")),
                watcher::Event::Apply(not_omenative()),
            ],
        );
        let engine = || vec!["m-engine".to_owned()];
        assert_eq!(triggers, [vec![], vec![], vec![], engine(), engine()]);
        let component = ("ns".to_owned(), "m".to_owned(), "engine".to_owned());
        assert_eq!(pods.of(&component).len(), 0);
    }

    #[test]
    fn a_relist_triggers_the_replicas_of_the_pods_it_found_gone_or_changed_once_it_is_done() {
        let pods = Pods::default();
        let listed = |events: Vec<watcher::Event<Pod>>| {
            let all = [vec![watcher::Event::Init], events, vec![watcher::Event::InitDone]].concat();
            triggered(&pods, all)
        };
        let none = Vec::<String>::new;
        assert_eq!(
            listed(vec![
                watcher::Event::InitApply(pod("m-engine-0-default-0", Some("engine"), "n1")),
                watcher::Event::InitApply(pod("m-decoder-0-default-0", Some("decoder"), "n1")),
            ]),
            [
                none(),
                none(),
                none(),
                vec!["m-decoder".to_owned(), "m-engine".to_owned()]
            ]
        );
        // Deleted while the watch was down: the decoder's pod is not listed again.
        assert_eq!(
            listed(vec![watcher::Event::InitApply(pod(
                "m-engine-0-default-0",
                Some("engine"),
                "n1"
            ))]),
            [none(), none(), vec!["m-decoder".to_owned()]]
        );
        let decoder = ("ns".to_owned(), "m".to_owned(), "decoder".to_owned());
        assert_eq!(pods.of(&decoder).len(), 0);
    }

    #[test]
    fn a_pod_event_moves_its_pod_alone_and_a_component_reads_its_own_pods_by_name() {
        let pods = Pods::default();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(pod("m-engine-1-default-0", Some("engine"), "n1")),
            watcher::Event::InitApply(pod("m-engine-0-default-0", Some("engine"), "n2")),
            watcher::Event::InitApply(pod("m-decoder-0-default-0", Some("decoder"), "n1")),
            watcher::Event::InitApply(pod("stray", None, "n1")),
            watcher::Event::InitDone,
        ] {
            pods.apply(&event);
        }
        let engine = ("ns".to_owned(), "m".to_owned(), "engine".to_owned());
        let placed = |pods: &Pods| -> Vec<(String, String)> {
            pods.of(&engine)
                .iter()
                .map(|p| (p.name().to_owned(), p.node().unwrap_or_default().to_owned()))
                .collect()
        };
        let named = |name: &str, node: &str| (name.to_owned(), node.to_owned());
        assert_eq!(
            placed(&pods),
            [named("m-engine-0-default-0", "n2"), named("m-engine-1-default-0", "n1")]
        );
        pods.apply(&watcher::Event::Apply(pod(
            "m-engine-1-default-0",
            Some("engine"),
            "n3",
        )));
        pods.apply(&watcher::Event::Delete(pod(
            "m-engine-0-default-0",
            Some("engine"),
            "n2",
        )));
        assert_eq!(placed(&pods), [named("m-engine-1-default-0", "n3")]);
        assert_eq!(
            pods.of(&("ns".to_owned(), "m".to_owned(), "decoder".to_owned())).len(),
            1
        );
    }

    /// A watch event on pods named 0..4, of the engine, the decoder or none, on nodes 0..2.
    fn event() -> impl Strategy<Value = watcher::Event<Pod>> {
        let pod = (0..4u8, 0..3usize, 0..2u8).prop_map(|(name, component, node)| {
            let component = [Some("engine"), Some("decoder"), None][component];
            pod(&format!("p{name}"), component, &format!("n{node}"))
        });
        index::events_of(pod)
    }

    proptest! {
        /// After any sequence of watch events the index equals one built anew from the pods a
        /// reflector would hold after the same events.
        #[test]
        fn the_index_equals_a_rebuild_after_any_events(events in proptest::collection::vec(event(), 0..40)) {
            let mut index = Index::<ByComponent>::default();
            for event in &events {
                index.apply(event);
            }
            let mut rebuilt = ByComponent::default();
            for pod in index::reflected(&events).values() {
                if let Some(entry) = ByComponent::entry(pod) {
                    rebuilt.insert(&entry);
                }
            }
            prop_assert_eq!(index.derived(), &rebuilt);
        }
    }
}
