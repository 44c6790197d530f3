//! The controller's caches: one watch per kind fills each. InferenceServices, runtimes and
//! InferenceReplicas in kube-runtime's stores, read by key; the pods and the nodes in indexes kept
//! by their own watch events ([`crate::index`]). A reconcile waits until all are filled.

use std::hash::Hash;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use ome_spread_core::settings::Settings;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::error::Error;
use crate::nodes::{KeysInUse, NodeIndex, NodeSet};
use crate::pods::Pods;
use crate::room::Room;
use crate::state::lock;
use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};

/// What the reconciles read.
pub struct Caches {
    pub services: Store<InferenceService>,
    pub runtimes: Store<ServingRuntime>,
    pub cluster_runtimes: Store<ClusterServingRuntime>,
    /// Filled by the controller's own watch of them.
    pub replicas: Store<InferenceReplica>,
    /// The OMENative pods of each component.
    pub pods: Arc<Pods>,
    /// What every pod bound to a node requests of it.
    pub room: Arc<Room>,
    pub nodes: Arc<NodeIndex>,
    /// The policy's settings, as last read (`--settings`, or the ClusterAdmissionPolicy followed).
    pub settings: watch::Receiver<Settings>,
    /// Whether every cache the diagnosis reads is filled: the readiness tells it
    /// ([`Self::all_filled`]), and the reconciles wait on it.
    pub filled: watch::Sender<Fill>,
    /// The caches [`Self::all_filled`] has seen filled, by name: what [`Self::unfilled`] reads.
    seen_filled: Mutex<Vec<&'static str>>,
}

/// Whether the reconciles can read the caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    Filling,
    Filled,
    /// Asked to stop before they were filled: the watches that fill them end first.
    Stopping,
}

/// A cache of `K`, and the stream of its watch's events that fills it.
pub fn reflected<K>(api: Api<K>) -> (Store<K>, impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(|object: &mut K| object.meta_mut().managed_fields = None)
        .reflect(writer);
    (store, stream)
}

impl Caches {
    /// The stores as given, the indexes empty: their watches fill them ([`crate::pods::changes`]
    /// the pods and the room, [`crate::nodes::changes`] the nodes).
    pub fn new(
        services: Store<InferenceService>,
        runtimes: Store<ServingRuntime>,
        cluster_runtimes: Store<ClusterServingRuntime>,
        replicas: Store<InferenceReplica>,
        settings: watch::Receiver<Settings>,
    ) -> Self {
        Self {
            services,
            runtimes,
            cluster_runtimes,
            replicas,
            pods: Arc::default(),
            room: Arc::default(),
            nodes: Arc::new(NodeIndex::new(NodeSet::new(Arc::new(KeysInUse::default())))),
            settings,
            filled: watch::Sender::new(Fill::Filling),
            seen_filled: Mutex::default(),
        }
    }

    /// Each cache the diagnosis reads, named, and the wait until its watch's first list is
    /// applied (false: its watch is gone).
    fn fills(&self) -> [(&'static str, BoxFuture<'_, bool>); 5] {
        [
            (
                "InferenceServices",
                self.services.wait_until_ready().map(|r| r.is_ok()).boxed(),
            ),
            (
                "ServingRuntimes",
                self.runtimes.wait_until_ready().map(|r| r.is_ok()).boxed(),
            ),
            (
                "ClusterServingRuntimes",
                self.cluster_runtimes.wait_until_ready().map(|r| r.is_ok()).boxed(),
            ),
            // The room fills with the pods, by the same watch's events.
            ("pods", self.pods.wait_until_filled().map(|()| true).boxed()),
            ("nodes", self.nodes.wait_until_filled().map(|()| true).boxed()),
        ]
    }

    /// Waits until every cache the diagnosis reads is filled (its watch's first list applied),
    /// noting each as it fills. One task only may wait so (kube-runtime's `Store::wait_until_ready`
    /// wakes only the task that polled it last): the controller's readiness, which then tells
    /// [`Self::filled`].
    pub async fn all_filled(&self) -> Result<(), Error> {
        let waits = self.fills().map(|(name, fill)| async move {
            let filled = fill.await;
            if filled {
                lock(&self.seen_filled).push(name);
            }
            filled.then_some(()).ok_or(Error::CacheGone)
        });
        futures::future::try_join_all(waits).await.map(drop)
    }

    /// The caches not filled yet, named, as [`Self::all_filled`] saw them: without polling a
    /// store's wait, which would take the readiness's place as the task it wakes.
    pub fn unfilled(&self) -> Error {
        let seen = lock(&self.seen_filled);
        let names: Vec<&str> = self
            .fills()
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| !seen.contains(name))
            .collect();
        Error::NotFilled(names.join(", "))
    }
}
