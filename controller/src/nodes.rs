//! The nodes as the diagnosis reads them, kept in a kube-runtime store by the node watch
//! ([`crate::reflected::Reflected`]), and what the diagnosis reads of them all built at the first
//! read after a change it reads. A change no replica reads (GPU Feature Discovery rewrites its
//! timestamp label every minute per node) reconciles no replica and builds nothing.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use futures::{Stream, StreamExt, future};
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher::{Config, Event};
use ome_spread_core::nodes::{Node, Nodes, Served};
use ome_spread_core::room::Resources;
use tracing::warn;

use crate::reflected::{self, Derived, Reflected};
use ome_spread_core::ome::InferenceReplica;

/// The node watch, filling `nodes`: one item (a reconcile of every replica) for each change the
/// diagnosis reads.
pub fn changes(client: kube::Client, nodes: Arc<NodeIndex>) -> impl Stream<Item = ()> {
    let read = move |event: &Event<Served>| (nodes.apply(event) == NodeChange::Read).then_some(());
    reflected::changes(Api::all(client), Config::default(), |_| {}, read).filter_map(future::ready)
}

/// The nodes, and what the diagnosis reads of them.
pub type NodeIndex = Reflected<Served, NodeSet>;

impl NodeIndex {
    /// What the diagnosis reads of every node, in the order of their names, built at most once
    /// per change it reads.
    pub fn current(&self) -> Arc<Nodes> {
        self.with(|set| {
            let all = || {
                let mut nodes: Vec<Node> = self.store.state().iter().map(|served| node(served)).collect();
                nodes.sort_unstable_by(|a, b| a.name.cmp(&b.name));
                Arc::new(Nodes::new(nodes))
            };
            set.built.get_or_insert_with(all).clone()
        })
    }

    /// Records the labels a replica's diagnosis reads. True when the nodes it read must be
    /// built again for it: a key no replica read before is among them, and a label no replica
    /// read changed since (such a change does not rebuild them, [`NodeChange::Unread`]).
    pub fn read_by(&self, replica: ObjectRef<InferenceReplica>, keys: BTreeSet<String>) -> bool {
        self.with(|set| {
            let new = !keys.is_subset(&set.keys);
            if set.by_replica.get(&replica) != Some(&keys) {
                set.by_replica.insert(replica, keys);
                set.keys = set.by_replica.values().flatten().cloned().collect();
            }
            let refresh = new && std::mem::take(&mut set.unread);
            if refresh {
                set.built = None;
            }
            refresh
        })
    }

    /// Forgets the labels a replica read.
    pub fn forget(&self, replica: &ObjectRef<InferenceReplica>) {
        self.with(|set| {
            if set.by_replica.remove(replica).is_some() {
                set.keys = set.by_replica.values().flatten().cloned().collect();
            }
        })
    }

    /// The node labels some replica's diagnosis reads
    /// ([`ome_spread_core::diagnosis::node_keys`]), as each replica's last reconcile found them.
    pub fn keys(&self) -> BTreeSet<String> {
        self.with(|set| set.keys.clone())
    }
}

/// What a node event changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum NodeChange {
    /// Nothing that is kept of a node (a heartbeat, an image pulled).
    #[default]
    Nothing,
    /// What is kept, but nothing a diagnosis reads: a label no replica reads. No replica is
    /// reconciled and the nodes the diagnosis reads are not built again; a replica that starts
    /// to read the label builds them anew (its reconcile, when it records a new key).
    Unread,
    /// A label in use, taints, cordon or allocatable, a node come or gone, or a relist done
    /// (which may drop nodes): every replica is reconciled.
    Read,
}

/// The node labels the replicas read, and what the diagnosis reads of the nodes until a change
/// it reads.
#[derive(Default)]
pub struct NodeSet {
    by_replica: HashMap<ObjectRef<InferenceReplica>, BTreeSet<String>>,
    /// Their union, made anew when a replica's keys change.
    keys: BTreeSet<String>,
    /// A label no replica read changed since a replica last started to read a new key.
    unread: bool,
    built: Option<Arc<Nodes>>,
}

impl Derived<Served> for NodeSet {
    type Output = NodeChange;

    fn changed(&mut self, old: Option<Arc<Served>>, new: Option<Arc<Served>>) -> NodeChange {
        let change = match (old, new) {
            (Some(was), Some(now)) => {
                fn label<'a>(node: &'a Served, key: &str) -> Option<&'a String> {
                    node.metadata.labels.as_ref()?.get(key)
                }
                let labels_read = self.keys.iter().any(|key| label(&was, key) != label(&now, key));
                if labels_read || was.spec != now.spec || was.status != now.status {
                    NodeChange::Read
                } else if was.metadata.labels != now.metadata.labels {
                    self.unread = true;
                    NodeChange::Unread
                } else {
                    NodeChange::Nothing
                }
            }
            _ => NodeChange::Read,
        };
        if change == NodeChange::Read {
            self.built = None;
        }
        change
    }

    fn relisted(&mut self, _: Vec<Arc<Served>>) -> NodeChange {
        self.built = None;
        NodeChange::Read
    }
}

/// What the diagnosis reads of a node as served. An allocatable the API server would refuse (it
/// never serves one) is said, and the node has no known room.
pub fn node(node: &Served) -> Node {
    let allocatable = node.allocatable().unwrap_or_else(|e| {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        warn!(node = name, error = %e, "a node's allocatable cannot be read: it has no known room");
        Resources::default()
    });
    Node::of(node, allocatable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher;
    use ome_spread_core::nodes::Taint;
    use serde_json::json;

    fn served(value: serde_json::Value) -> Served {
        serde_json::from_value(value).expect("a node")
    }

    #[test]
    fn the_nodes_are_built_again_only_after_a_change_the_diagnosis_reads() {
        let nodes = NodeIndex::default();
        let n1 = json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}, "spec": {"unschedulable": true,
            "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "pods": "110"}}});
        nodes.apply(&watcher::Event::Apply(served(n1.clone())));
        let first = nodes.current();
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
                Resources::from_quantities(&json!({"nvidia.com/gpu": "8", "pods": "110"})).expect("readable")
            ))
        );
        let mut stamped = n1.clone();
        stamped["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = json!("1764590060");
        nodes.apply(&watcher::Event::Apply(served(stamped)));
        assert!(
            Arc::ptr_eq(&first, &nodes.current()),
            "a label no replica reads: the same nodes"
        );
        let engine = ObjectRef::new("m-engine").within("ns");
        assert!(nodes.read_by(engine, BTreeSet::from(["nvidia.com/gfd.timestamp".to_owned()])));
        let second = nodes.current();
        assert_eq!(
            second.get("n1").map(|n| n.labels.get("nvidia.com/gfd.timestamp")),
            Some(Some(&"1764590060".to_owned())),
            "built anew for the replica that reads it"
        );
        nodes.apply(&watcher::Event::Apply(served(json!({"metadata": {"name": "n2"}}))));
        let third = nodes.current();
        assert_eq!(third.iter().count(), 2);
        assert!(Arc::ptr_eq(&third, &nodes.current()));
    }

    /// An allocatable the API server would refuse (it never serves one): the node has no known
    /// room, never a resource counted as nothing beside the others.
    #[test]
    fn a_node_whose_allocatable_cannot_be_read_has_no_known_room() {
        let node = served(json!({"metadata": {"name": "n1"},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "memory": "30 Gi", "pods": "110"}}}));
        assert_eq!(super::node(&node).allocatable, Resources::default());
    }

    #[test]
    fn labels_in_use_taint_cordon_changes_deletions_and_relists_are_read_heartbeats_are_not() {
        use NodeChange::{Nothing, Read, Unread};
        let base = json!({"metadata": {"name": "n", "labels": {"zone": "a", "nvidia.com/gfd.timestamp": "1764590000"}}, "spec": {}});
        let event = |value: &serde_json::Value| watcher::Event::Apply(served(value.clone()));
        let zone = || BTreeSet::from(["zone".to_owned()]);
        let changes = NodeIndex::default();
        changes.read_by(ObjectRef::new("m-engine").within("ns"), zone());
        assert_eq!(changes.apply(&event(&base)), Read, "a new node");
        // Seen before any replica read a key (the list at start): a label no replica reads
        // changes, and nothing read did.
        let early = NodeIndex::default();
        assert_eq!(early.apply(&event(&base)), Read);
        early.read_by(ObjectRef::new("m-engine").within("ns"), zone());
        let mut stamped = base.clone();
        stamped["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = json!("1764590060");
        assert_eq!(early.apply(&event(&stamped)), Unread);
        let mut heartbeat = base.clone();
        heartbeat["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        heartbeat["metadata"]["resourceVersion"] = json!("42");
        assert_eq!(changes.apply(&event(&heartbeat)), Nothing);
        // GPU Feature Discovery's minutely rewrite: kept, but no replica reads it.
        let mut rewritten = heartbeat.clone();
        rewritten["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = json!("1764590060");
        assert_eq!(changes.apply(&event(&rewritten)), Unread);
        // Once a replica reads it (its node selection names it), its change is read.
        let decoder = ObjectRef::new("m-decoder").within("ns");
        let timestamp = BTreeSet::from(["nvidia.com/gfd.timestamp".to_owned()]);
        assert!(
            changes.read_by(decoder.clone(), timestamp.clone()),
            "a key no replica read before, after an unread change"
        );
        assert!(!changes.read_by(decoder.clone(), timestamp), "the same keys again");
        let gpu = ObjectRef::new("g-engine").within("ns");
        let product = BTreeSet::from(["nvidia.com/gpu.product".to_owned()]);
        assert!(
            !changes.read_by(gpu.clone(), product),
            "a new key, but no unread change since"
        );
        changes.forget(&gpu);
        rewritten["metadata"]["labels"]["nvidia.com/gfd.timestamp"] = json!("1764590120");
        assert_eq!(changes.apply(&event(&rewritten)), Read);
        changes.forget(&decoder);
        assert_eq!(changes.keys().iter().collect::<Vec<_>>(), ["zone"]);

        let mut relabelled = base.clone();
        relabelled["metadata"]["labels"]["zone"] = json!("b");
        let mut tainted = base.clone();
        tainted["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
        let mut cordoned = base.clone();
        cordoned["spec"]["unschedulable"] = json!(true);
        let mut resized = base.clone();
        resized["status"] = json!({"allocatable": {"nvidia.com/gpu": "4"}});
        for changed in [relabelled, tainted, cordoned, resized, base.clone()] {
            assert_eq!(changes.apply(&event(&changed)), Read, "{changed}");
        }
        assert_eq!(changes.apply(&watcher::Event::Delete(served(base.clone()))), Read);
        // A relist: read once when it is done, nothing per node listed; then it is what was seen.
        assert_eq!(changes.apply(&watcher::Event::Init), Nothing);
        assert_eq!(changes.apply(&watcher::Event::InitApply(served(base.clone()))), Nothing);
        assert_eq!(changes.apply(&watcher::Event::InitDone), Read);
        assert_eq!(changes.apply(&event(&heartbeat)), Nothing);
    }
}
