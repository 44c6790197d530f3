//! The controller's caches: one watch fills each, into kube-runtime's stores.
//! InferenceServices, runtimes and InferenceReplicas are read by key; the OMENative pods, what
//! every pod holds of its node (the room) and the nodes also keep plain maps derived from their
//! store ([`Reflected`]). A reconcile waits until all are filled.

use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::WriterDropped;
use ome_spread_core::nodes::Served;
use ome_spread_core::settings::Settings;
use tokio::sync::watch;

use crate::error::Error;
use crate::nodes::NodeSet;
use crate::pods::Pods;
use crate::reflected::Reflected;
use crate::state::lock;
use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};

/// What the reconciles read.
pub struct Caches {
    pub services: Store<InferenceService>,
    pub runtimes: Store<ServingRuntime>,
    pub cluster_runtimes: Store<ClusterServingRuntime>,
    /// Filled by the controller's own watch of them.
    pub replicas: Store<InferenceReplica>,
    /// The OMENative pods of each component, and the room every pod holds.
    pub pods: Arc<Pods>,
    pub nodes: Arc<Reflected<Served, NodeSet>>,
    /// The policy's settings, as last read (`--settings`, or the ClusterAdmissionPolicy followed).
    pub settings: watch::Receiver<Settings>,
    /// Whether every cache the diagnosis reads is filled: the readiness tells it
    /// ([`Self::all_filled`]), and the reconciles wait on it.
    pub filled: watch::Sender<Fill>,
    /// The caches [`Self::all_filled`] has not seen filled yet, by name: what [`Self::unfilled`]
    /// reads.
    unfilled: Mutex<Vec<&'static str>>,
}

/// The caches the diagnosis reads, named as [`Caches::all_filled`] waits on them.
const NAMES: [&str; 6] = [
    "InferenceServices",
    "ServingRuntimes",
    "ClusterServingRuntimes",
    "OMENative pods",
    "pods",
    "nodes",
];

/// Whether the reconciles can read the caches.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    #[default]
    Filling,
    Filled,
    /// Asked to stop before they were filled: the watches that fill them end first.
    Stopping,
}

impl Caches {
    /// The stores as given, the pods and nodes empty: their watches fill them.
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
            nodes: Arc::default(),
            settings,
            filled: watch::Sender::default(),
            unfilled: Mutex::new(NAMES.to_vec()),
        }
    }

    /// Waits until every cache the diagnosis reads is filled (its watch's first list applied),
    /// noting each as it fills. One task only may wait so (kube-runtime's `Store::wait_until_ready`
    /// wakes only the task that polled it last): the controller's readiness, which then tells
    /// [`Self::filled`].
    pub async fn all_filled(&self) -> Result<(), Error> {
        let fills: [BoxFuture<'_, Result<(), WriterDropped>>; 6] = [
            self.services.wait_until_ready().boxed(),
            self.runtimes.wait_until_ready().boxed(),
            self.cluster_runtimes.wait_until_ready().boxed(),
            self.pods.store().wait_until_ready().boxed(),
            self.pods.room().wait_until_ready().boxed(),
            self.nodes.store.wait_until_ready().boxed(),
        ];
        let waits = NAMES.into_iter().zip(fills).map(|(name, fill)| async move {
            fill.await.map_err(|_| Error::CacheGone)?;
            lock(&self.unfilled).retain(|unfilled| *unfilled != name);
            Ok::<_, Error>(())
        });
        futures::future::try_join_all(waits).await.map(drop)
    }

    /// The caches not filled yet, named, as [`Self::all_filled`] saw them: without polling a
    /// store's wait, which would take the readiness's place as the task it wakes.
    pub fn unfilled(&self) -> Error {
        Error::NotFilled(lock(&self.unfilled).join(", "))
    }
}
