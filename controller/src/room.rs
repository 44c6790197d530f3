//! The room a rebalance plan counts on: what every pod bound to a node requests of it, whichever
//! workload it belongs to (a training job's GPUs are as taken as an engine's). Kept by the pods'
//! own watch events, the pods trimmed on the way in to what the room reads: an event costs its
//! own pod, a relist rebuilds once.

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec, PodStatus, ResourceRequirements};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use kube::runtime::watcher;
use ome_spread_core::room::{self, Requested, Resources};
use tokio::sync::watch;
use tracing::warn;

/// The pods that hold room, and the sums per node.
#[derive(Debug, Default)]
pub struct NodeRequests {
    /// Each pod that holds room (`namespace/name`): its node, and what it holds there.
    pods: HashMap<String, (String, Resources)>,
    requested: Requested,
    /// During a relist: the pods listed so far, which replace `pods` when it is done.
    relisting: Option<HashMap<String, (String, Resources)>>,
}

impl NodeRequests {
    pub fn apply(&mut self, event: &watcher::Event<Pod>) {
        match event {
            watcher::Event::Apply(pod) => {
                let key = key(pod);
                self.forget(&key);
                if let Some((node, requests)) = held(pod) {
                    self.requested.entry(node.clone()).or_default().add(&requests);
                    self.pods.insert(key, (node, requests));
                }
            }
            watcher::Event::Delete(pod) => self.forget(&key(pod)),
            watcher::Event::Init => self.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(pod) => {
                let relisting = self.relisting.get_or_insert_default();
                match held(pod) {
                    Some(held) => relisting.insert(key(pod), held),
                    None => relisting.remove(&key(pod)),
                };
            }
            watcher::Event::InitDone => {
                self.pods = self.relisting.take().unwrap_or_default();
                self.requested = Requested::new();
                for (node, requests) in self.pods.values() {
                    self.requested.entry(node.clone()).or_default().add(requests);
                }
            }
        }
    }

    /// The requests of the pods bound to each node.
    pub fn requested(&self) -> &Requested {
        &self.requested
    }

    fn forget(&mut self, key: &str) {
        let Some((node, requests)) = self.pods.remove(key) else {
            return;
        };
        if let Some(sum) = self.requested.get_mut(&node) {
            sum.take(&requests);
            if sum.is_empty() {
                self.requested.remove(&node);
            }
        }
    }
}

fn key(pod: &Pod) -> String {
    format!("{}/{}", pod.namespace().unwrap_or_default(), pod.name_any())
}

/// What the pod holds of its node, as the core counts it ([`room::held`]).
fn held(pod: &Pod) -> Option<(String, Resources)> {
    match serde_json::to_value(pod) {
        Ok(value) => room::held(&value).map(|(node, requests)| (node.to_owned(), requests)),
        Err(e) => {
            // Cannot happen for a pod the API server sent; said, naming it, if it does.
            warn!(pod = %key(pod), error = %e, "a pod cannot be read as JSON: its requests are not counted");
            None
        }
    }
}

/// The pod as the room reads it: its name, node, phase and its containers' requests. Every other
/// field (env, volumes, probes, managed fields) is dropped before it is kept.
pub fn trim(pod: &mut Pod) {
    let metadata = std::mem::take(&mut pod.metadata);
    pod.metadata = ObjectMeta {
        name: metadata.name,
        namespace: metadata.namespace,
        resource_version: metadata.resource_version,
        ..ObjectMeta::default()
    };
    let spec = pod.spec.take().unwrap_or_default();
    let containers = spec
        .containers
        .into_iter()
        .map(|container| Container {
            name: container.name,
            resources: container.resources.map(|r| ResourceRequirements {
                requests: r.requests,
                ..ResourceRequirements::default()
            }),
            ..Container::default()
        })
        .collect();
    pod.spec = Some(PodSpec {
        node_name: spec.node_name,
        containers,
        ..PodSpec::default()
    });
    pod.status = pod.status.take().map(|status| PodStatus {
        phase: status.phase,
        ..PodStatus::default()
    });
}

/// [`NodeRequests`] shared between the pods' watch and the reconciles, and whether its first
/// list is in.
#[derive(Debug)]
pub struct Room {
    requests: Mutex<NodeRequests>,
    filled: watch::Sender<bool>,
}

impl Default for Room {
    fn default() -> Self {
        Self {
            requests: Mutex::default(),
            filled: watch::Sender::new(false),
        }
    }
}

impl Room {
    pub fn apply(&self, event: &watcher::Event<Pod>) {
        self.requests
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .apply(event);
        if matches!(event, watcher::Event::InitDone) {
            self.filled.send_replace(true);
        }
    }

    /// Waits until the first list is in.
    pub async fn wait_until_filled(&self) {
        let mut filled = self.filled.subscribe();
        // The sender lives as long as `self`: the wait ends only when filled.
        let _ = filled.wait_for(|filled| *filled).await;
    }

    /// `read` of the requests per node, as they stand.
    pub fn with<T>(&self, read: impl FnOnce(&Requested) -> T) -> T {
        read(
            self.requests
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .requested(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn pod(name: &str, node: Option<&str>, gpus: u32, phase: &str) -> Pod {
        let mut pod = json!({"metadata": {"name": name, "namespace": "ns", "labels": {"app": "train"}},
            "spec": {"containers": [{"name": "c", "image": "trainer", "env": [{"name": "A", "value": "b"}],
                "resources": {"requests": {"nvidia.com/gpu": gpus.to_string(), "cpu": "500m"}, "limits": {"nvidia.com/gpu": gpus.to_string()}}}]},
            "status": {"phase": phase}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        serde_json::from_value(pod).expect("a pod")
    }

    fn trimmed(mut pod: Pod) -> Pod {
        trim(&mut pod);
        pod
    }

    #[test]
    fn every_bound_unfinished_pod_holds_its_requests_whatever_its_workload() {
        let mut index = NodeRequests::default();
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
        let held = |gpus: &str, cpu: &str, pods: &str| {
            Resources::parsed([("nvidia.com/gpu", gpus), ("cpu", cpu), ("pods", pods)])
        };
        assert_eq!(
            index.requested(),
            &Requested::from([("n1".to_owned(), held("6", "1", "2"))])
        );
        // train-0 moves to n2, train-1 finishes, then train-0 goes: n1 and n2 hold nothing.
        index.apply(&watcher::Event::Apply(pod("train-0", Some("n2"), 4, "Running")));
        index.apply(&watcher::Event::Apply(pod("train-1", Some("n1"), 2, "Failed")));
        assert_eq!(
            index.requested(),
            &Requested::from([("n2".to_owned(), held("4", "0.5", "1"))])
        );
        index.apply(&watcher::Event::Delete(pod("train-0", Some("n2"), 4, "Running")));
        assert_eq!(index.requested(), &Requested::new());
    }

    #[test]
    fn a_trimmed_pod_keeps_what_the_room_reads_and_nothing_else() {
        let kept = serde_json::to_value(trimmed(pod("train-0", Some("n1"), 4, "Running"))).expect("json");
        assert_eq!(
            kept,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train-0", "namespace": "ns"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "500m", "nvidia.com/gpu": "4"}}}], "nodeName": "n1"},
                "status": {"phase": "Running"}})
        );
    }

    /// A watch event on pods named 0..4, on nodes 0..3 or none, in any phase.
    fn event() -> impl Strategy<Value = watcher::Event<Pod>> {
        let pod = (0..4u8, proptest::option::of(0..3u8), 0..3u32, 0..3usize).prop_map(|(name, node, gpus, phase)| {
            let node = node.map(|n| format!("n{n}"));
            let phase = ["Pending", "Running", "Succeeded"][phase];
            trimmed(pod(&format!("p{name}"), node.as_deref(), gpus, phase))
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
        /// After any sequence of watch events the index equals the core's count over the pods a
        /// reflector would hold after the same events.
        #[test]
        fn the_index_equals_a_full_count_of_the_pods_after_any_events(events in proptest::collection::vec(event(), 0..40)) {
            let mut index = NodeRequests::default();
            let (mut pods, mut relisting): (HashMap<String, Pod>, Option<HashMap<String, Pod>>) = (HashMap::new(), None);
            for event in &events {
                index.apply(event);
                match event {
                    watcher::Event::Apply(pod) => { pods.insert(key(pod), pod.clone()); }
                    watcher::Event::Delete(pod) => { pods.remove(&key(pod)); }
                    watcher::Event::Init => relisting = Some(HashMap::new()),
                    watcher::Event::InitApply(pod) => { relisting.get_or_insert_default().insert(key(pod), pod.clone()); }
                    watcher::Event::InitDone => pods = relisting.take().unwrap_or_default(),
                }
            }
            let values: Vec<serde_json::Value> = pods.values().map(|p| serde_json::to_value(p).expect("json")).collect();
            prop_assert_eq!(index.requested(), &room::requested(&values));
        }
    }
}
