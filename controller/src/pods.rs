//! The controller's two watches of pods. Of an OMENative pod of a component (OME's label selects
//! them), the core's model of it ([`Pod`]: what the diagnosis reads, nothing else), kept in a
//! kube-runtime store ([`crate::reflected::Reflected`]) with the pods of each component derived of it,
//! so that a pod event moves that pod alone, triggers its replica's reconcile
//! ([`crate::reconcile`]), and a reconcile reads its own component's pods only. Of every pod, of
//! every workload, what it holds of its node ([`Held`]), in a store of its own with the room of
//! each node derived of it ([`Room`]): what a rebalance plan counts on, whichever workload the pod
//! belongs to (a training job's GPUs are as taken as an engine's). A pod of another workload is
//! kept as that alone: most of a large GPU cluster's pods are not OME's, and the core's model of a
//! pod in a store costs twice as much.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use futures::{Stream, StreamExt, future, stream};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::Api;
use kube::runtime::reflector::{Lookup, ObjectRef};
use kube::runtime::watcher::{Config, Event};
use ome_spread_core::instance::component_of;
use ome_spread_core::labels;
use ome_spread_core::ome::{InferenceReplica, namespaced_name};
use ome_spread_core::pod::{Pod, Spec};
use ome_spread_core::replica::ReplicaRef;
use ome_spread_core::room::{self, Requested, Resources};
use tracing::warn;

use crate::reflected::{self, Derived, Reflected};

/// The watches of the OMENative pods and of every pod, trimmed, filling `pods`: each event's replicas
/// whose OMENative pods changed, a relist's pods found gone among them. An event that changes
/// nothing kept of a pod (a container restarted, a probe's status) triggers no reconcile, nor does
/// a pod of another workload (it re-plans a component at that component's next change). Two
/// watches, so that after a relist (a kube-apiserver restart expires every watch) the components,
/// and their conditions, are back once OME's pods are listed, not every pod of the cluster.
pub fn changes(client: kube::Client, pods: Arc<Pods>) -> impl Stream<Item = Vec<ObjectRef<InferenceReplica>>> {
    let omenative = Config::default().labels(&format!("{}={}", labels::MANAGED_BY, labels::OME_NATIVE));
    let room = pods.clone();
    let every_pod = reflected::changes(Api::all(client.clone()), Config::default(), trim, move |e| room.hold(e));
    let components = reflected::changes(Api::all(client), omenative, trim, move |event| pods.apply(event));
    // The room triggers no reconcile: its watch is only polled beside the components'.
    let held = every_pod.filter_map(|()| future::ready(None));
    stream::select(components, held)
}

/// The replica of an InferenceService's component, whose reconcile reads that component's pods.
pub fn replica_of_component(namespace: &str, service: &str, component: &str) -> ObjectRef<InferenceReplica> {
    let replica = ReplicaRef::for_component(namespace, service, component);
    ObjectRef::new(&replica.name).within(&replica.namespace)
}

/// Its component by OME's labels, as the replica that reads it (None: not an OMENative pod, or
/// no component's).
fn component(pod: &Pod) -> Option<ObjectRef<InferenceReplica>> {
    if pod.label(labels::MANAGED_BY) != Some(labels::OME_NATIVE) {
        return None;
    }
    let (namespace, service, component) = component_of(pod)?;
    Some(replica_of_component(namespace, service, component))
}

/// Every pod: the OMENative pods of the components, and the room every pod holds.
#[derive(Default)]
pub struct Pods {
    /// The OMENative pods, filled by their watch's first list.
    pub(crate) components: Reflected<Pod, Components>,
    /// What every pod holds, filled by the first list of every pod.
    pub(crate) room: Reflected<Held, Room>,
}

impl Pods {
    /// Applies an event of the OMENative pods' watch to the store and the components (a pod that
    /// is not one of a component, or no longer, is not in the store). The replicas whose
    /// reconcile reads the pod, before and after.
    pub fn apply(&self, event: &Event<Pod>) -> Vec<ObjectRef<InferenceReplica>> {
        match event {
            Event::InitApply(pod) if component(pod).is_none() => Vec::new(),
            Event::Apply(pod) if component(pod).is_none() => self.components.apply(&Event::Delete(pod.clone())),
            _ => self.components.apply(event),
        }
    }

    /// Applies an event of the watch of every pod to the room, whatever the pod.
    pub fn hold(&self, event: &Event<Pod>) {
        if let Some(event) = Held::event(event) {
            self.room.apply(&event);
        }
    }

    /// The pods of the component `replica` reads, by name: shared, not copied.
    pub fn of(&self, component: &ObjectRef<InferenceReplica>) -> Vec<Arc<Pod>> {
        self.components.with(|components| {
            let pods = components.0.get(component).into_iter().flat_map(BTreeMap::values);
            pods.cloned().collect()
        })
    }

    /// `read` the requests of the pods bound to each node, as they stand.
    pub fn with_requested<T>(&self, read: impl FnOnce(&Requested) -> T) -> T {
        self.room.with(|room| read(&room.0))
    }
}

/// Each component's OMENative pods by name (shared with the store), by the replica that reads
/// them.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Components(HashMap<ObjectRef<InferenceReplica>, BTreeMap<String, Arc<Pod>>>);

impl Components {
    fn insert(&mut self, pod: &Arc<Pod>) -> Option<ObjectRef<InferenceReplica>> {
        let component = component(pod)?;
        let pods = self.0.entry(component.clone()).or_default();
        pods.insert(pod.name().to_owned(), pod.clone());
        Some(component)
    }

    /// Takes away a pod inserted before.
    fn remove(&mut self, pod: &Pod) -> Option<ObjectRef<InferenceReplica>> {
        let component = component(pod)?;
        if let Some(pods) = self.0.get_mut(&component) {
            pods.remove(pod.name());
            if pods.is_empty() {
                self.0.remove(&component);
            }
        }
        Some(component)
    }
}

impl Derived<Pod> for Components {
    /// The replicas whose reconcile reads the pod, before and after.
    type Output = Vec<ObjectRef<InferenceReplica>>;

    fn changed(&mut self, old: Option<Arc<Pod>>, new: Option<Arc<Pod>>) -> Self::Output {
        let was = old.and_then(|old| self.remove(&old));
        was.into_iter().chain(new.and_then(|new| self.insert(&new))).collect()
    }

    /// The replicas of the components whose pods the list found changed or gone.
    fn relisted(&mut self, all: Vec<Arc<Pod>>) -> Self::Output {
        let before = std::mem::take(self);
        for pod in all {
            self.insert(&pod);
        }
        let components: HashSet<&ObjectRef<InferenceReplica>> = before.0.keys().chain(self.0.keys()).collect();
        let changed = components.into_iter().filter(|c| before.0.get(*c) != self.0.get(*c));
        changed.cloned().collect()
    }
}

/// What a pod holds of its node: the node's name and the pod's requests, by the pod's name. All
/// that is kept of a pod of another workload, in a kube-runtime store as the OMENative pods are.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Held {
    name: String,
    namespace: String,
    node: String,
    requests: Resources,
}

impl Held {
    /// What the pod holds, as the core counts it ([`room::held`]); None: nothing (unbound, or
    /// finished).
    fn of(pod: &Pod) -> Option<Self> {
        let held = room::held(pod).unwrap_or_else(|e| {
            // Cannot happen for a pod the API server sent (it refuses a quantity it cannot read);
            // said, naming the pod, if one does.
            warn!(pod = %namespaced_name(pod), error = %e, "a pod's requests cannot be read: they are not counted");
            None
        });
        let (node, requests) = held?;
        Some(Self {
            node: node.to_owned(),
            requests,
            ..Self::named(pod)
        })
    }

    /// The pod by name alone: what a deletion names.
    fn named(pod: &Pod) -> Self {
        Self {
            name: pod.name().to_owned(),
            namespace: pod.namespace().to_owned(),
            ..Self::default()
        }
    }

    /// A pod event as the room takes it: a pod that holds nothing is not in the room.
    fn event(event: &Event<Pod>) -> Option<Event<Self>> {
        Some(match event {
            Event::Init => Event::Init,
            Event::InitApply(pod) => Event::InitApply(Self::of(pod)?),
            Event::InitDone => Event::InitDone,
            Event::Apply(pod) => Self::of(pod).map_or_else(|| Event::Delete(Self::named(pod)), Event::Apply),
            Event::Delete(pod) => Event::Delete(Self::named(pod)),
        })
    }
}

/// A pod's, for its store.
impl Lookup for Held {
    type DynamicType = ();

    fn kind(_: &()) -> Cow<'_, str> {
        <Pod as Lookup>::kind(&())
    }

    fn group(_: &()) -> Cow<'_, str> {
        <Pod as Lookup>::group(&())
    }

    fn version(_: &()) -> Cow<'_, str> {
        <Pod as Lookup>::version(&())
    }

    fn plural(_: &()) -> Cow<'_, str> {
        <Pod as Lookup>::plural(&())
    }

    fn name(&self) -> Option<Cow<'_, str>> {
        Some(Cow::from(&self.name))
    }

    fn namespace(&self) -> Option<Cow<'_, str>> {
        Some(Cow::from(&self.namespace))
    }

    fn resource_version(&self) -> Option<Cow<'_, str>> {
        None
    }

    fn uid(&self) -> Option<Cow<'_, str>> {
        None
    }
}

/// The requests of the pods bound to each node, summed from what each holds.
#[derive(Debug, Default)]
pub(crate) struct Room(Requested);

impl Derived<Held> for Room {
    type Output = ();

    fn changed(&mut self, old: Option<Arc<Held>>, new: Option<Arc<Held>>) {
        if let Some(new) = new {
            self.0.entry(new.node.clone()).or_default().add(&new.requests);
        }
        if let Some(old) = old
            && let Some(sum) = self.0.get_mut(&old.node)
        {
            sum.take(&old.requests);
            if sum.is_empty() {
                self.0.remove(&old.node);
            }
        }
    }

    fn relisted(&mut self, all: Vec<Arc<Held>>) {
        *self = Self::default();
        for held in all {
            self.changed(None, Some(held));
        }
    }
}

/// What is kept of a pod. Of an OMENative pod of a component, what the diagnosis reads: of its
/// metadata its name, namespace and labels (its annotations, managed fields and resourceVersion,
/// which change in an event that changes nothing read, are dropped). Of any other pod, what the
/// room reads: its name and namespace, its node, its containers' requests, its pod-level
/// requests and overhead, and its phase (whether it is terminal), as `explain` lists it.
pub fn trim(pod: &mut Pod) {
    let ome = component(pod).is_some();
    let metadata = std::mem::take(&mut pod.metadata);
    pod.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        labels: metadata.labels.filter(|_| ome),
        ..ObjectMeta::default()
    };
    if ome {
        return;
    }
    let spec = std::mem::take(&mut pod.spec);
    pod.spec = Spec {
        node_name: spec.node_name,
        containers: spec.containers,
        init_containers: spec.init_containers,
        resources: spec.resources,
        overhead: spec.overhead,
        ..Spec::default()
    };
    pod.status.conditions = Vec::new();
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::ResourceExt;
    use kube::runtime::watcher;
    use ome_spread_core::room::Resources;
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

    /// A pod with OME's component labels but not `OMENative` is not in its component, and a pod
    /// that stops being one leaves it.
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
        let component = ObjectRef::new("m-engine").within("ns");
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
        let decoder = ObjectRef::new("m-decoder").within("ns");
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
        let engine = ObjectRef::new("m-engine").within("ns");
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
        assert_eq!(pods.of(&ObjectRef::new("m-decoder").within("ns")).len(), 1);
    }

    /// A training pod as the API server serves it.
    fn training(name: &str, node: Option<&str>, gpus: u32, phase: &str) -> Value {
        let mut pod = json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": "train"}},
            "spec": {"containers": [{"name": "c", "image": "trainer", "env": [{"name": "A", "value": "b"}],
                "resources": {"requests": {"nvidia.com/gpu": gpus.to_string(), "cpu": "500m"}, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod
    }

    fn trimmed(value: &Value) -> Pod {
        let mut pod = read(value);
        trim(&mut pod);
        pod
    }

    fn requested(pods: &Pods) -> Requested {
        pods.with_requested(Clone::clone)
    }

    fn holding(gpus: &str, cpu: &str, pods: &str) -> Resources {
        Resources::from_quantities(&json!({"nvidia.com/gpu": gpus, "cpu": cpu, "pods": pods})).expect("readable")
    }

    #[test]
    fn every_bound_unfinished_pod_holds_its_requests_whatever_its_workload() {
        let pods = Pods::default();
        let train = |name, node, gpus, phase| trimmed(&training(name, node, gpus, phase));
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(train("train-0", Some("n1"), 4, "Running")),
            watcher::Event::InitApply(train("train-1", Some("n1"), 2, "Pending")),
            watcher::Event::InitApply(train("done", Some("n1"), 8, "Succeeded")),
            watcher::Event::InitApply(train("unbound", None, 8, "Pending")),
            watcher::Event::InitDone,
        ] {
            pods.hold(&event);
        }
        assert_eq!(
            requested(&pods),
            Requested::from([("n1".to_owned(), holding("6", "1", "2"))])
        );
        // train-0 moves to n2, train-1 finishes, then train-0 goes: n1 and n2 hold nothing.
        pods.hold(&watcher::Event::Apply(train("train-0", Some("n2"), 4, "Running")));
        pods.hold(&watcher::Event::Apply(train("train-1", Some("n1"), 2, "Failed")));
        assert_eq!(
            requested(&pods),
            Requested::from([("n2".to_owned(), holding("4", "0.5", "1"))])
        );
        pods.hold(&watcher::Event::Delete(train("train-0", Some("n2"), 4, "Running")));
        assert_eq!(requested(&pods), Requested::new());
    }

    /// Deleted while the watch was down: once the relist is done, the engine's pod is gone from
    /// its component, and what it held from its node; the training pod beside it still holds its
    /// own.
    #[test]
    fn a_relist_that_drops_a_pod_takes_it_from_its_component_and_the_room() {
        let pods = Pods::default();
        let listed = |listed: Vec<Pod>| {
            let events = [
                vec![watcher::Event::Init],
                listed.into_iter().map(watcher::Event::InitApply).collect(),
                vec![watcher::Event::InitDone],
            ];
            events
                .concat()
                .iter()
                .map(|event| {
                    pods.hold(event);
                    pods.apply(event).len()
                })
                .collect::<Vec<_>>()
        };
        let engine = trimmed(&served("m-engine-0-default-0", Some("engine"), "n1"));
        let train = trimmed(&training("train-0", Some("n1"), 2, "Running"));
        assert_eq!(listed(vec![engine, train.clone()]), [0, 0, 0, 1]);
        let component = ObjectRef::new("m-engine").within("ns");
        assert_eq!(pods.of(&component).len(), 1);
        assert_eq!(
            requested(&pods),
            Requested::from([("n1".to_owned(), holding("3", "0.5", "2"))])
        );
        assert_eq!(listed(vec![train]), [0, 0, 1]);
        assert_eq!(pods.of(&component), Vec::<Arc<Pod>>::new());
        assert_eq!(
            requested(&pods),
            Requested::from([("n1".to_owned(), holding("2", "0.5", "1"))])
        );
    }

    /// Of a pod of another workload, what the room reads: its name and namespace, node, requests
    /// and phase; no labels, no conditions, no container names.
    #[test]
    fn a_trimmed_pod_of_another_workload_keeps_what_the_room_reads_and_nothing_else() {
        assert_eq!(
            trimmed(&training("train-0", Some("n1"), 4, "Running")),
            read(&json!({"metadata": {"name": "train-0", "namespace": "ns"},
                "spec": {"containers": [{"resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "4"}}}], "nodeName": "n1"},
                "status": {"phase": "Running"}}))
        );
    }

    /// Init containers, sidecars, pod-level requests and overhead hold room as kube-scheduler
    /// counts them: the trim keeps them, and the room counts them.
    #[test]
    fn a_trimmed_pod_keeps_its_init_containers_pod_level_requests_and_overhead() {
        let mut with_all = training("train-0", Some("n1"), 4, "Running");
        with_all["spec"]["initContainers"] = json!([
            {"name": "fetch", "image": "fetcher", "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}},
            {"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}]);
        with_all["spec"]["resources"] = json!({"requests": {"memory": "8Gi"}, "limits": {"memory": "16Gi"}});
        with_all["spec"]["overhead"] = json!({"cpu": "250m"});
        with_all["spec"]["runtimeClassName"] = json!("kata");
        with_all["spec"]["tolerations"] = json!([{"operator": "Exists"}]);
        let kept = trimmed(&with_all);
        assert_eq!(
            kept.spec,
            read(&json!({"spec": {"nodeName": "n1",
                "containers": [{"resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "4"}}}],
                "initContainers": [{"resources": {"requests": {"nvidia.com/gpu": "8"}}},
                    {"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}],
                "resources": {"requests": {"memory": "8Gi"}},
                "overhead": {"cpu": "250m"}}}))
            .spec
        );
        let pods = Pods::default();
        pods.hold(&watcher::Event::Apply(kept));
        // GPUs: the larger of fetch's 8 and c's 4; CPU: c's 500m, the proxy's 1 and 250m.
        let held = json!({"nvidia.com/gpu": "8", "cpu": "1750m", "memory": "8Gi", "pods": "1"});
        let held = Resources::from_quantities(&held).expect("readable");
        assert_eq!(requested(&pods), Requested::from([("n1".to_owned(), held)]));
    }

    /// A request the API server would refuse (it never serves one): the pod holds nothing
    /// counted, and is said; a pod beside it still holds its own.
    #[test]
    fn a_pod_whose_requests_cannot_be_read_is_not_counted() {
        let mut unreadable = training("train-0", Some("n1"), 4, "Running");
        unreadable["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("500x");
        let pods = Pods::default();
        pods.hold(&watcher::Event::Apply(trimmed(&unreadable)));
        pods.hold(&watcher::Event::Apply(trimmed(&training(
            "train-1",
            Some("n1"),
            2,
            "Running",
        ))));
        let held = json!({"nvidia.com/gpu": "2", "cpu": "500m", "pods": "1"});
        let held = Resources::from_quantities(&held).expect("readable");
        assert_eq!(requested(&pods), Requested::from([("n1".to_owned(), held)]));
    }

    /// A watch event on pods named 0..4: an engine's, a decoder's or a training pod, on nodes
    /// 0..3 or none, in any phase; applied, deleted, or a relist.
    fn event() -> impl Strategy<Value = watcher::Event<Pod>> {
        let pod = (0..4u8, 0..3usize, proptest::option::of(0..3u8), 0..3usize).prop_map(|(name, kind, node, phase)| {
            let (name, node) = (format!("p{name}"), node.map(|n| format!("n{n}")));
            let mut value = match kind {
                0 | 1 => served(
                    &name,
                    Some(["engine", "decoder"][kind]),
                    node.as_deref().unwrap_or_default(),
                ),
                _ => training(&name, node.as_deref(), 2, "Running"),
            };
            if node.is_none() {
                value["spec"]["nodeName"] = Value::Null;
            }
            value["status"]["phase"] = json!(["Pending", "Running", "Succeeded"][phase]);
            trimmed(&value)
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
        /// After any sequence of watch events (each to both watches), the store holds the
        /// OMENative pods the watch last told of, the components are what is derived anew from
        /// the store, and the room is the core's full count of every pod the watch last told of
        /// (a relist's in place of those before it once it is done, as kube-runtime's store
        /// applies it).
        #[test]
        fn the_index_equals_a_rebuild_after_any_events(events in proptest::collection::vec(event(), 0..40)) {
            let pods = Pods::default();
            let (mut told, mut listed) = (BTreeMap::new(), BTreeMap::new());
            for event in &events {
                match event {
                    // A list names each pod once.
                    watcher::Event::InitApply(pod) if listed.contains_key(&namespaced_name(pod)) => continue,
                    watcher::Event::InitApply(pod) => drop(listed.insert(namespaced_name(pod), pod.clone())),
                    watcher::Event::Apply(pod) => drop(told.insert(namespaced_name(pod), pod.clone())),
                    watcher::Event::Delete(pod) => drop(told.remove(&namespaced_name(pod))),
                    watcher::Event::Init => listed.clear(),
                    watcher::Event::InitDone => told = std::mem::take(&mut listed),
                }
                pods.hold(event);
                pods.apply(event);
            }
            let mut stored: Vec<Pod> = pods.components.store.state().iter().map(|pod| (**pod).clone()).collect();
            stored.sort_by_key(namespaced_name);
            let ome: Vec<Pod> = told.values().filter(|pod| component(pod).is_some()).cloned().collect();
            prop_assert_eq!(stored, ome);
            let mut rebuilt = Components::default();
            rebuilt.relisted(pods.components.store.state());
            pods.components.with(|components| {
                prop_assert_eq!(&*components, &rebuilt);
                Ok(())
            })?;
            let counted = room::requested(told.values()).expect("readable");
            prop_assert_eq!(requested(&pods), counted);
        }
    }
}
