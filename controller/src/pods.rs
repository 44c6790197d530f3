//! The controller's one watch of pods, of every workload, trimmed on the way in to what the
//! diagnosis and the room read. Its events keep two indexes ([`crate::index`]): the room's requests
//! per node ([`crate::room`]), and here the OMENative pods of each component, as the core reads
//! them (JSON): a pod event converts that pod alone, triggers its replica's reconcile
//! ([`crate::reconcile`]), and a reconcile reads its own component's pods only.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures::{Stream, StreamExt};
use k8s_openapi::api::core::v1::{Container, Pod, PodCondition, PodSpec, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use ome_spread_core::instance::component_of;
use ome_spread_core::labels;
use ome_spread_core::replica::ReplicaRef;
use serde_json::Value;
use tracing::warn;

use crate::index::{self, Derived, Index, Shared};
use crate::room::Room;
use ome_spread_core::ome::InferenceReplica;

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
pub struct ByComponent(HashMap<ComponentKey, BTreeMap<String, Arc<Value>>>);

impl Derived for ByComponent {
    type Object = Pod;
    /// A pod's component, its name, and the pod.
    type Entry = (ComponentKey, String, Arc<Value>);
    /// The replica whose reconcile reads the pod: its component's.
    type Trigger = ObjectRef<InferenceReplica>;

    /// Its component by OME's labels (None: not an OMENative pod, or no component's), as JSON.
    fn entry(pod: &Pod) -> Option<Self::Entry> {
        if pod.labels().get(labels::MANAGED_BY).map(String::as_str) != Some(labels::OME_NATIVE) {
            return None;
        }
        let value = match serde_json::to_value(pod) {
            Ok(value) => value,
            Err(e) => {
                // Cannot happen for a pod the API server sent; said, naming it, if it does.
                warn!(pod = %index::key(pod), error = %e, "a pod cannot be read as JSON: it is left out of its component");
                return None;
            }
        };
        let (namespace, service, component) = component_of(&value)?;
        let key = (namespace.to_owned(), service.to_owned(), component.to_owned());
        let name = value["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        Some((key, name, Arc::new(value)))
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
    pub fn of(&self, component: &ComponentKey) -> Vec<Arc<Value>> {
        self.with(|index| {
            let pods = index.derived().0.get(component).into_iter().flat_map(BTreeMap::values);
            pods.cloned().collect()
        })
    }
}

/// The pod as the diagnosis, the plan, the triggers and the room read it: its name, labels and
/// owners; its node, scheduler, node selection, tolerations, spread constraints and what it
/// requests ([`requests_only`]); its phase and the conditions read ([`read_conditions`]). Env,
/// volumes, probes, annotations, managed fields and the resourceVersion are dropped before it is
/// kept: most of an OME pod's size, and what changes in an event that changes nothing the
/// diagnosis reads (which then triggers no reconcile).
pub fn trim(pod: &mut Pod) {
    let metadata = std::mem::take(&mut pod.metadata);
    pod.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        labels: metadata.labels,
        owner_references: metadata.owner_references,
        ..ObjectMeta::default()
    };
    let mut spec = pod.spec.take().unwrap_or_default();
    pod.spec = Some(PodSpec {
        node_name: spec.node_name.take(),
        scheduler_name: spec.scheduler_name.take(),
        node_selector: spec.node_selector.take(),
        affinity: spec.affinity.take(),
        tolerations: spec.tolerations.take(),
        topology_spread_constraints: spec.topology_spread_constraints.take(),
        ..requests_only(spec)
    });
    pod.status = pod.status.take().map(|status| PodStatus {
        phase: status.phase,
        conditions: status.conditions.map(read_conditions),
        ..PodStatus::default()
    });
}

/// The conditions the diagnosis reads: whether the pod is Ready, and why it is not scheduled.
/// The rest (Initialized, ContainersReady, readiness gates') and every condition's times are
/// dropped: kept as JSON, a running pod's five conditions held 18 MiB of the controller's 211 over
/// 10,000 OME pods on a real API server (BENCHMARKS.md).
fn read_conditions(conditions: Vec<PodCondition>) -> Vec<PodCondition> {
    let read = |c: &PodCondition| c.type_ == "Ready" || c.type_ == "PodScheduled";
    conditions
        .into_iter()
        .filter(read)
        .map(|c| PodCondition {
            type_: c.type_,
            status: c.status,
            reason: c.reason,
            message: c.message,
            ..PodCondition::default()
        })
        .collect()
}

/// What a pod requests of its node, as the core counts it (the core's `Resources::of_pod`): its
/// containers' and init containers' names and requests (and whether an init container is a
/// sidecar), its pod-level requests and its overhead.
fn requests_only(spec: PodSpec) -> PodSpec {
    let requests = |resources: ResourceRequirements| ResourceRequirements {
        requests: resources.requests,
        ..ResourceRequirements::default()
    };
    let container = |container: Container| Container {
        name: container.name,
        restart_policy: container.restart_policy,
        resources: container.resources.map(requests),
        ..Container::default()
    };
    PodSpec {
        containers: spec.containers.into_iter().map(container).collect(),
        init_containers: spec.init_containers.map(|all| all.into_iter().map(container).collect()),
        resources: spec.resources.map(requests),
        overhead: spec.overhead,
        ..PodSpec::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Apply;
    use proptest::prelude::*;
    use serde_json::json;

    /// An OME pod of component `component` of InferenceService `m` (none: unlabelled), Instance
    /// `index`, on `node`.
    fn pod(name: &str, component: Option<&str>, node: &str) -> Pod {
        let mut labels = json!({"ome.io/managed-by": "OMENative"});
        if let Some(component) = component {
            labels["ome.io/inferenceservice"] = json!("m");
            labels["component"] = json!(component);
        }
        serde_json::from_value(json!({"metadata": {"name": name, "namespace": "ns", "labels": labels,
            "annotations": {"a": "b"}, "managedFields": [{"manager": "ome"}]},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "sglang", "env": [{"name": "A", "value": "b"}],
                "resources": {"requests": {"nvidia.com/gpu": "1"}}, "readinessProbe": {"httpGet": {"port": 8080}}}],
                "nodeSelector": {"models.ome.io/clusterbasemodel.m": "Ready"}, "volumes": [{"name": "v", "emptyDir": {}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}], "podIP": "10.0.0.1"}}))
        .expect("a pod")
    }

    #[test]
    fn a_trimmed_pod_keeps_what_the_diagnosis_reads() {
        let mut as_served = serde_json::to_value(pod("m-engine-0-default-0", Some("engine"), "n1")).expect("json");
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
        let mut trimmed: Pod = serde_json::from_value(as_served).expect("a pod");
        trim(&mut trimmed);
        assert_eq!(
            serde_json::to_value(trimmed).expect("json"),
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "m-engine-0-default-0", "namespace": "ns",
                    "labels": {"component": "engine", "ome.io/inferenceservice": "m", "ome.io/managed-by": "OMENative"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
                    "nodeName": "n1", "nodeSelector": {"models.ome.io/clusterbasemodel.m": "Ready"}},
                "status": {"conditions": [{"status": "True", "type": "Ready"}, {"status": "True", "type": "PodScheduled"}],
                    "phase": "Running"}})
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
            let mut value = serde_json::to_value(pod("m-engine-0-default-0", Some("engine"), node)).expect("json");
            value["metadata"]["resourceVersion"] = json!(restarts.to_string());
            value["status"]["containerStatuses"] =
                json!([{"name": "c", "image": "sglang", "imageID": "", "ready": true, "restartCount": restarts}]);
            let mut pod: Pod = serde_json::from_value(value).expect("a pod");
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
                .map(|p| {
                    (
                        p["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                        p["spec"]["nodeName"].as_str().unwrap_or_default().to_owned(),
                    )
                })
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
        prop_oneof![
            4 => pod.clone().prop_map(watcher::Event::Apply),
            2 => pod.clone().prop_map(watcher::Event::Delete),
            1 => Just(watcher::Event::Init),
            2 => pod.prop_map(watcher::Event::InitApply),
            1 => Just(watcher::Event::InitDone),
        ]
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
