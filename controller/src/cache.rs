//! The controller's caches: one watch per kind fills each, and what the diagnosis reads of the
//! nodes, the InferenceServices' requests and the replicas' records is built from them once per
//! change (snapshots), not once per reconcile. The pods are indexed by their own events instead
//! ([`crate::pods`], [`crate::room`]).

use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::{Stream, TryStreamExt};
use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use ome_spread_core::migration::{Annotated, BadLedger, BadRecord, Migrations, Records, Requests};
use ome_spread_core::nodes::{Node, Nodes, Taint};
use ome_spread_core::room::Resources;
use serde::de::DeserializeOwned;
use tracing::warn;

use crate::resources::{InferenceReplica, InferenceService};
use crate::state::lock;

/// What the diagnosis reads of a cache (the nodes indexed, the pods grouped by component), built
/// from it only after it changed: a burst of reconciles (every replica, after a node change)
/// shares one build instead of reading the whole cache each.
pub struct Snapshot<K: 'static + Resource, T>
where
    K::DynamicType: Eq + Hash,
{
    store: Store<K>,
    version: Arc<AtomicU64>,
    build: fn(&[Arc<K>]) -> T,
    built: Mutex<Option<(u64, Arc<T>)>>,
}

impl<K, T> Snapshot<K, T>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// `version` must move after every change of the store that `build` reads.
    pub fn new(store: Store<K>, version: Arc<AtomicU64>, build: fn(&[Arc<K>]) -> T) -> Self {
        Self {
            store,
            version,
            build,
            built: Mutex::default(),
        }
    }

    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.store.wait_until_ready().await
    }

    /// The next [`Self::current`] builds anew.
    pub fn refresh(&self) {
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    pub fn current(&self) -> Arc<T> {
        let mut built = lock(&self.built);
        // Read under the lock, so that a slower caller never tags a newer build with an older
        // version.
        let version = self.version.load(Ordering::Acquire);
        match &*built {
            Some((at, snapshot)) if *at == version => snapshot.clone(),
            _ => {
                let snapshot = Arc::new((self.build)(&self.store.state()));
                *built = Some((version, snapshot.clone()));
                snapshot
            }
        }
    }
}

pub type NodeSnapshot = Snapshot<KubeNode, Nodes>;

pub fn nodes(nodes: &[Arc<KubeNode>]) -> Nodes {
    Nodes::new(nodes.iter().map(|n| node(n)).collect())
}

/// What the diagnosis needs of a Kubernetes node.
pub fn node(node: &KubeNode) -> Node {
    let spec = node.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .map(|taints| {
            taints
                .iter()
                .map(|t| Taint {
                    key: t.key.clone(),
                    value: t.value.clone().unwrap_or_default(),
                    effect: t.effect.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    Node::new(
        node.name_any(),
        node.labels()
            .iter()
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
        taints,
        spec.and_then(|s| s.unschedulable) == Some(true),
        allocatable(node),
    )
}

/// A node's `status.allocatable`; one the API server would refuse (it never serves one) is
/// said, naming the node, and the node has no known room.
fn allocatable(node: &KubeNode) -> Resources {
    let quantities = node.status.iter().flat_map(|s| s.allocatable.iter().flatten());
    Resources::parsed(quantities.map(|(name, q)| (name.as_str(), q.0.as_str()))).unwrap_or_else(|e| {
        let e = e.within("status.allocatable.");
        warn!(node = %node.name_any(), error = %e, "a node's allocatable cannot be read: it has no known room");
        Resources::default()
    })
}

/// Every InferenceService's pending migration request and our ledgers, as `migrate`'s guardrails
/// read them: once per change of the InferenceServices, not once per reconcile (each reconcile's
/// guardrails read the whole cluster's).
pub type RequestSnapshot = Snapshot<InferenceService, Result<Requests, BadLedger>>;

pub fn requests(services: &[Arc<InferenceService>]) -> Result<Requests, BadLedger> {
    let annotated: Vec<Annotated> = services
        .iter()
        .map(|s| Annotated {
            name: named(&**s),
            annotations: s.annotations(),
        })
        .collect();
    Requests::read(&annotated)
}

/// Every InferenceReplica's migration records, once per change of the replicas.
pub type RecordSnapshot = Snapshot<InferenceReplica, Result<Records, BadRecord>>;

pub fn records(replicas: &[Arc<InferenceReplica>]) -> Result<Records, BadRecord> {
    let migrations: Vec<Migrations> = replicas.iter().map(|r| migrations(r)).collect();
    Records::read(&migrations)
}

/// A replica's records as the guardrails read them.
pub fn migrations(replica: &InferenceReplica) -> Migrations<'_> {
    Migrations {
        name: named(replica),
        migrations: replica.status.as_ref().and_then(|s| s.migrations.as_ref()),
    }
}

/// `namespace/name`, as the guardrails name objects.
pub fn named<K: ResourceExt>(object: &K) -> String {
    format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any())
}

/// A cache of `K`, and the stream of its changes that fills it; `version` moves with every change.
pub fn cached<K>(
    api: Api<K>,
    config: watcher::Config,
    version: Arc<AtomicU64>,
) -> (Store<K>, impl Stream<Item = Result<K, watcher::Error>>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|object: &mut K| object.meta_mut().managed_fields = None)
        .reflect(writer)
        .inspect_ok(move |_| {
            version.fetch_add(1, Ordering::AcqRel);
        })
        .touched_objects();
    (store, stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kube_node(value: serde_json::Value) -> KubeNode {
        serde_json::from_value(value).expect("a node")
    }

    #[test]
    fn the_node_snapshot_is_rebuilt_only_after_a_node_change() {
        let (store, mut writer) = reflector::store();
        let version = Arc::new(AtomicU64::new(0));
        let snapshot = NodeSnapshot::new(store, version.clone(), nodes);
        writer.apply_watcher_event(&watcher::Event::Apply(kube_node(
            json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}, "spec": {"unschedulable": true,
                "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
                "status": {"allocatable": {"nvidia.com/gpu": "8", "pods": "110"}}}),
        )));
        let first = snapshot.current();
        assert_eq!(
            first.get("n1"),
            Some(&Node::new(
                "n1".into(),
                [("zone".to_owned(), "a".to_owned())].into_iter().collect(),
                vec![Taint {
                    key: "gpu".into(),
                    value: "yes".into(),
                    effect: "NoSchedule".into()
                }],
                true,
                Resources::parsed([("nvidia.com/gpu", "8"), ("pods", "110")]).expect("readable")
            ))
        );
        writer.apply_watcher_event(&watcher::Event::Apply(kube_node(json!({"metadata": {"name": "n2"}}))));
        assert!(
            Arc::ptr_eq(&first, &snapshot.current()),
            "no change announced: the same snapshot"
        );
        version.fetch_add(1, Ordering::AcqRel);
        let second = snapshot.current();
        assert_eq!(second.len(), 2);
        assert!(Arc::ptr_eq(&second, &snapshot.current()));
    }

    /// An allocatable the API server would refuse (it never serves one): the node has no known
    /// room, never a resource counted as nothing beside the others.
    #[test]
    fn a_node_whose_allocatable_cannot_be_read_has_no_known_room() {
        let node = kube_node(json!({"metadata": {"name": "n1"},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "memory": "30 Gi", "pods": "110"}}}));
        assert_eq!(super::node(&node).allocatable, Resources::default());
    }
}
