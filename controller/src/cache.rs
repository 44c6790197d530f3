//! The controller's caches: one watch per kind fills each. InferenceServices, runtimes and
//! InferenceReplicas in kube-runtime's stores, read by key; the pods and the nodes in indexes kept
//! by their own watch events ([`crate::index`]). A reconcile waits until all are filled.

use std::hash::Hash;
use std::sync::Arc;

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
    /// The stores as given, the indexes empty: their watches fill them ([`crate::pods::changes`],
    /// [`crate::room::watch`], [`crate::nodes::changes`]).
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
        }
    }

    /// Waits until every cache the diagnosis reads is filled (its watch's first list applied).
    /// One task only may wait so (kube-runtime's `Store::wait_until_ready` wakes only the task
    /// that polled it last): the controller's readiness, which then tells [`Self::filled`].
    pub async fn all_filled(&self) -> Result<(), Error> {
        let ready = futures::try_join!(
            self.services.wait_until_ready(),
            self.runtimes.wait_until_ready(),
            self.cluster_runtimes.wait_until_ready(),
            self.pods.wait_until_filled().map(Ok),
            self.nodes.wait_until_filled().map(Ok),
            self.room.wait_until_filled().map(Ok),
        );
        ready.map(|_| ()).map_err(|_| Error::CacheGone)
    }

    /// The caches not filled yet, named.
    pub fn unfilled(&self) -> Error {
        let unfilled = [
            ("InferenceServices", self.services.wait_until_ready().now_or_never()),
            ("ServingRuntimes", self.runtimes.wait_until_ready().now_or_never()),
            (
                "ClusterServingRuntimes",
                self.cluster_runtimes.wait_until_ready().now_or_never(),
            ),
            ("pods", self.pods.wait_until_filled().map(Ok).now_or_never()),
            ("nodes", self.nodes.wait_until_filled().map(Ok).now_or_never()),
            (
                "every pod's requests",
                self.room.wait_until_filled().map(Ok).now_or_never(),
            ),
        ];
        let names: Vec<&str> = unfilled
            .iter()
            .filter(|(_, ready)| ready.is_none())
            .map(|(name, _)| *name)
            .collect();
        Error::NotFilled(names.join(", "))
    }
}
