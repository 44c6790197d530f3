//! The room a rebalance plan counts on: what every pod bound to a node requests of it, whichever
//! workload it belongs to (a training job's GPUs are as taken as an engine's). Kept by the events
//! of the controller's watch of every pod ([`crate::pods::changes`], [`crate::index`]).

use ome_spread_core::pod::Pod;
use ome_spread_core::room::{self, Requested, Resources};
use tracing::warn;

use crate::index::{self, Derived, Index, Shared};

/// The requests of the pods bound to each node, from each pod's entry: its node and what it
/// holds there.
#[derive(Debug, Default)]
pub struct Sums(Requested);

impl Sums {
    /// The requests of the pods bound to each node.
    pub fn requested(&self) -> &Requested {
        &self.0
    }
}

impl Derived for Sums {
    type Object = Pod;
    type Entry = (String, Resources);
    /// None: a pod of any workload re-plans a component at that component's next change.
    type Trigger = ();

    /// What the pod holds of its node, as the core counts it ([`room::held`]).
    fn entry(pod: &Pod) -> Option<Self::Entry> {
        match room::held(pod) {
            Ok(held) => held.map(|(node, requests)| (node.to_owned(), requests)),
            Err(e) => {
                // Cannot happen for a pod the API server sent (it refuses a quantity it cannot
                // read); said, naming the pod, if one does.
                warn!(pod = %index::key(pod), error = %e, "a pod's requests cannot be read: they are not counted");
                None
            }
        }
    }

    fn trigger(_: &Self::Entry) -> Option<()> {
        None
    }

    fn insert(&mut self, (node, requests): &Self::Entry) {
        self.0.entry(node.clone()).or_default().add(requests);
    }

    fn remove(&mut self, (node, requests): &Self::Entry) {
        if let Some(sum) = self.0.get_mut(node) {
            sum.take(requests);
            if sum.is_empty() {
                self.0.remove(node);
            }
        }
    }
}

/// The requests per node, shared between the pods' watch and the reconciles.
pub type Room = Shared<Index<Sums>>;

impl Room {
    /// `read` the requests of the pods bound to each node, as they stand.
    pub fn with_requested<T>(&self, read: impl FnOnce(&Requested) -> T) -> T {
        self.with(|index| read(index.derived().requested()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::Apply;
    use crate::pods::trim;
    use kube::runtime::watcher;
    use ome_spread_sim::support::objects::read;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    /// A training pod as the API server serves it.
    fn served(name: &str, node: Option<&str>, gpus: u32, phase: &str) -> Value {
        let mut pod = json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": "train"}},
            "spec": {"containers": [{"name": "c", "image": "trainer", "env": [{"name": "A", "value": "b"}],
                "resources": {"requests": {"nvidia.com/gpu": gpus.to_string(), "cpu": "500m"}, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
            "status": {"phase": phase}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod
    }

    fn pod(name: &str, node: Option<&str>, gpus: u32, phase: &str) -> Pod {
        read(&served(name, node, gpus, phase))
    }

    fn trimmed(mut pod: Pod) -> Pod {
        trim(&mut pod);
        pod
    }

    fn requested(index: &Index<Sums>) -> &Requested {
        index.derived().requested()
    }

    #[test]
    fn every_bound_unfinished_pod_holds_its_requests_whatever_its_workload() {
        let mut index = Index::<Sums>::default();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(pod("train-0", Some("n1"), 4, "Running")),
            watcher::Event::InitApply(pod("train-1", Some("n1"), 2, "Pending")),
            watcher::Event::InitApply(pod("done", Some("n1"), 8, "Succeeded")),
            watcher::Event::InitApply(pod("unbound", None, 8, "Pending")),
            watcher::Event::InitDone,
        ] {
            index.apply(&event);
        }
        let holding = |gpus: &str, cpu: &str, pods: &str| {
            Resources::parsed([("nvidia.com/gpu", gpus), ("cpu", cpu), ("pods", pods)]).expect("readable")
        };
        assert_eq!(
            requested(&index),
            &Requested::from([("n1".to_owned(), holding("6", "1", "2"))])
        );
        // train-0 moves to n2, train-1 finishes, then train-0 goes: n1 and n2 hold nothing.
        index.apply(&watcher::Event::Apply(pod("train-0", Some("n2"), 4, "Running")));
        index.apply(&watcher::Event::Apply(pod("train-1", Some("n1"), 2, "Failed")));
        assert_eq!(
            requested(&index),
            &Requested::from([("n2".to_owned(), holding("4", "0.5", "1"))])
        );
        index.apply(&watcher::Event::Delete(pod("train-0", Some("n2"), 4, "Running")));
        assert_eq!(requested(&index), &Requested::new());
    }

    #[test]
    fn a_trimmed_pod_of_another_workload_keeps_what_the_room_reads_and_nothing_else() {
        assert_eq!(
            trimmed(pod("train-0", Some("n1"), 4, "Running")),
            read(
                &json!({"metadata": {"name": "train-0", "namespace": "ns", "labels": {"app": "train"}},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "4"}}}], "nodeName": "n1"},
                "status": {"phase": "Running"}})
            )
        );
    }

    /// Init containers, sidecars, pod-level requests and overhead hold room as kube-scheduler
    /// counts them: the trim keeps them, and the index counts them.
    #[test]
    fn a_trimmed_pod_keeps_its_init_containers_pod_level_requests_and_overhead() {
        let mut with_all = served("train-0", Some("n1"), 4, "Running");
        with_all["spec"]["initContainers"] = json!([
            {"name": "fetch", "image": "fetcher", "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}},
            {"name": "proxy", "image": "envoy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}]);
        with_all["spec"]["resources"] = json!({"requests": {"memory": "8Gi"}, "limits": {"memory": "16Gi"}});
        with_all["spec"]["overhead"] = json!({"cpu": "250m"});
        with_all["spec"]["runtimeClassName"] = json!("kata");
        let kept = trimmed(read(&with_all));
        assert_eq!(
            kept.spec,
            read(&json!({"spec": {"nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "4"}}}],
                "initContainers": [{"name": "fetch", "resources": {"requests": {"nvidia.com/gpu": "8"}}},
                    {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}],
                "resources": {"requests": {"memory": "8Gi"}},
                "overhead": {"cpu": "250m"}}}))
            .spec
        );
        let mut index = Index::<Sums>::default();
        index.apply(&watcher::Event::Apply(kept));
        // GPUs: the larger of fetch's 8 and c's 4; CPU: c's 500m, the proxy's 1 and 250m.
        let held = Resources::parsed([
            ("nvidia.com/gpu", "8"),
            ("cpu", "1750m"),
            ("memory", "8Gi"),
            ("pods", "1"),
        ])
        .expect("readable");
        assert_eq!(requested(&index), &Requested::from([("n1".to_owned(), held)]));
    }

    /// A request the API server would refuse (it never serves one): the pod holds nothing
    /// counted, and is said; a pod beside it still holds its own.
    #[test]
    fn a_pod_whose_requests_cannot_be_read_is_not_counted() {
        let mut unreadable = served("train-0", Some("n1"), 4, "Running");
        unreadable["spec"]["containers"][0]["resources"]["requests"]["cpu"] = json!("500x");
        let unreadable = read(&unreadable);
        assert_eq!(Sums::entry(&unreadable), None);
        let mut index = Index::<Sums>::default();
        index.apply(&watcher::Event::Apply(unreadable));
        index.apply(&watcher::Event::Apply(pod("train-1", Some("n1"), 2, "Running")));
        let held = Resources::parsed([("nvidia.com/gpu", "2"), ("cpu", "500m"), ("pods", "1")]).expect("readable");
        assert_eq!(requested(&index), &Requested::from([("n1".to_owned(), held)]));
    }

    /// A watch event on pods named 0..4, on nodes 0..3 or none, in any phase.
    fn event() -> impl Strategy<Value = watcher::Event<Pod>> {
        let pod = (0..4u8, proptest::option::of(0..3u8), 0..3u32, 0..3usize).prop_map(|(name, node, gpus, phase)| {
            let node = node.map(|n| format!("n{n}"));
            let phase = ["Pending", "Running", "Succeeded"][phase];
            trimmed(pod(&format!("p{name}"), node.as_deref(), gpus, phase))
        });
        index::events_of(pod)
    }

    proptest! {
        /// After any sequence of watch events the index equals the core's count over the pods a
        /// reflector would hold after the same events.
        #[test]
        fn the_index_equals_a_full_count_of_the_pods_after_any_events(events in proptest::collection::vec(event(), 0..40)) {
            let mut index = Index::<Sums>::default();
            for event in &events {
                index.apply(event);
            }
            let pods = index::reflected(&events);
            prop_assert_eq!(requested(&index), &room::requested(pods.values()).expect("readable"));
        }
    }
}
