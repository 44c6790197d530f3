//! What a reconcile and the rebalance share: the caches they read (one watch fills each, into
//! kube-runtime's stores; InferenceServices, runtimes and InferenceReplicas are read by key, the
//! OMENative pods, what every pod holds of its node (the room) and the nodes also keep plain maps
//! derived from their store, [`crate::reflected::Reflected`]), how they write, what is kept of
//! each replica, the objects of a component as the core reads them, and the rebalance mode.
//! Beneath both, so that neither imports the other in a circle.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::ResourceExt;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::store::WriterDropped;
use kube::runtime::reflector::{ObjectRef, Store};
use ome_spread_core::diagnosis::Component;
use ome_spread_core::migration::Entry;
use ome_spread_core::nodes::Nodes;
use ome_spread_core::pod::Pod;
use ome_spread_core::rebalance::Move;
use ome_spread_core::settings::Settings;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::error::{Error, lock};
use crate::metrics::Metrics;
use crate::nodes::NodeIndex;
use crate::pods::Pods;
use crate::report::Reports;
use crate::serve::Health;
use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService, Runtime, ServingRuntime};

/// What a reconcile reads and writes through, and what it keeps.
pub struct Context {
    pub client: kube::Client,
    pub recorder: Recorder,
    /// Why the `Spread` condition is not written (the served schema would let it replace OME's
    /// status: [`crate::resources`]), or None.
    pub no_condition: Mutex<Option<String>>,
    /// Each diagnosis as a policy report (`--reports`).
    pub reports: Arc<Reports>,
    /// What the watches keep of the cluster.
    pub caches: Caches,
    /// What is kept of each replica between its reconciles.
    pub replicas: ReplicaStates,
    /// The controller's rebalance mode (`--rebalance`).
    pub rebalance: Mode,
    /// `--rebalance-max-per-hour`.
    pub max_per_hour: usize,
    /// The migration gate: held from the guardrails' check to the request's write, so that two
    /// reconciles never write two requests; it keeps what this process wrote (InferenceService,
    /// ledger entry) until the caches show it.
    pub migrations: tokio::sync::Mutex<Vec<(String, Entry)>>,
    /// Each replica's series and the reconciles' counts, for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Each reconcile's start and end, for `/healthz`.
    pub health: Arc<Health>,
}

impl Context {
    /// Forgets a replica: its record, its metric series and the node labels it read. A replica
    /// deleted, or one with nothing left to say.
    pub fn forget(&self, replica: &ObjectRef<InferenceReplica>) {
        lock(&self.replicas.0).remove(replica);
        self.metrics
            .forget(replica.namespace.as_deref().unwrap_or_default(), &replica.name);
        self.caches.nodes.forget(replica);
    }

    /// A watch event that triggers `replicas` arrived now: noted on each that the replicas' cache
    /// holds (no reconcile runs for another), so that a reconcile times the condition it writes
    /// from the earliest event it acts on. The replicas, for the controller to trigger.
    pub fn arrived(&self, replicas: Vec<ObjectRef<InferenceReplica>>) -> Vec<ObjectRef<InferenceReplica>> {
        let now = Instant::now();
        for replica in &replicas {
            if self.caches.replicas.get(replica).is_some() {
                self.replicas.arrived(replica, now);
            }
        }
        replicas
    }
}

/// What the reconciles read.
pub struct Caches {
    pub services: Store<InferenceService>,
    pub runtimes: Store<ServingRuntime>,
    pub cluster_runtimes: Store<ClusterServingRuntime>,
    /// Filled by the controller's own watch of them.
    pub replicas: Store<InferenceReplica>,
    /// The OMENative pods of each component, and the room every pod holds.
    pub pods: Arc<Pods>,
    pub nodes: Arc<NodeIndex>,
    /// The policy's settings, as last read (`--settings`, or the ClusterAdmissionPolicy followed).
    pub settings: watch::Receiver<Settings>,
    /// Whether every cache the diagnosis reads is filled: the readiness tells it
    /// ([`Self::all_filled`]), and the reconciles wait on it.
    pub filled: watch::Sender<Fill>,
    /// The caches [`Self::all_filled`] has not seen filled yet, by name (every one as it starts):
    /// what [`Self::unfilled`] reads.
    unfilled: Mutex<Vec<&'static str>>,
}

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
            unfilled: Mutex::default(),
        }
    }

    /// Waits until every cache the diagnosis reads is filled (its watch's first list applied),
    /// noting each as it fills. One task only may wait so (kube-runtime's `Store::wait_until_ready`
    /// wakes only the task that polled it last): the controller's readiness, which then tells
    /// [`Self::filled`].
    pub async fn all_filled(&self) -> Result<(), Error> {
        let fills: [(&str, BoxFuture<'_, Result<(), WriterDropped>>); 6] = [
            ("InferenceServices", self.services.wait_until_ready().boxed()),
            ("ServingRuntimes", self.runtimes.wait_until_ready().boxed()),
            (
                "ClusterServingRuntimes",
                self.cluster_runtimes.wait_until_ready().boxed(),
            ),
            ("OMENative pods", self.pods.components.store.wait_until_ready().boxed()),
            ("pods", self.pods.room.store.wait_until_ready().boxed()),
            ("nodes", self.nodes.store.wait_until_ready().boxed()),
        ];
        *lock(&self.unfilled) = fills.iter().map(|(name, _)| *name).collect();
        let waits = fills.into_iter().map(|(name, fill)| async move {
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

/// What is kept of one replica.
#[derive(Debug, Default)]
pub struct ReplicaState {
    /// Failed reconciles in a row, for the retry's backoff.
    pub failures: u32,
    /// The rebalance Event last published, so that a resync does not repeat it.
    pub announced: Option<String>,
    /// The reason this process last told by an Event, so that it is not told again while the
    /// condition is held back or once it is written; empty when that Event failed, so that the
    /// retry tells it though the condition written beside it shows the reason.
    pub told: Option<String>,
    /// The condition this process last wrote, until the replica's cache shows it: a change that
    /// comes before the cache does is compared with what was written, not with what the cache
    /// still says (its own write triggers no reconcile).
    pub written: Option<Condition>,
    /// The results of the report last written, without their time: the report is written again
    /// only when they change.
    pub reported: Option<Vec<serde_json::Value>>,
    /// When the earliest watch event that triggered the replica and no reconcile has taken yet
    /// arrived: the event-to-condition time runs from it.
    pub arrived: Option<Instant>,
}

/// Every replica's record: created at the first event that triggers the replica or its first
/// reconcile, dropped with the replica (its watch's deletion, or a relist that no longer lists
/// it) or when it has nothing left to say, with its metric series and the node labels it read
/// ([`Context::forget`]).
#[derive(Debug, Default)]
pub struct ReplicaStates(Mutex<HashMap<ObjectRef<InferenceReplica>, ReplicaState>>);

impl ReplicaStates {
    /// `change` the replica's record, made on first use.
    pub fn with<T>(&self, replica: &ObjectRef<InferenceReplica>, change: impl FnOnce(&mut ReplicaState) -> T) -> T {
        change(lock(&self.0).entry(replica.clone()).or_default())
    }

    /// A reconcile that succeeded: no failures in a row. A replica with no record gets none (one
    /// with nothing to say has just been forgotten).
    pub(crate) fn succeeded(&self, replica: &ObjectRef<InferenceReplica>) {
        if let Some(kept) = lock(&self.0).get_mut(replica) {
            kept.failures = 0;
        }
    }

    /// A watch event that triggers the replica arrived `at`: the earliest one not taken is kept.
    pub(crate) fn arrived(&self, replica: &ObjectRef<InferenceReplica>, at: Instant) {
        self.with(replica, |kept| {
            kept.arrived = Some(kept.arrived.map_or(at, |earliest| earliest.min(at)));
        });
    }

    /// The replicas that have a record.
    pub(crate) fn replicas(&self) -> Vec<ObjectRef<InferenceReplica>> {
        lock(&self.0).keys().cloned().collect()
    }
}

/// The objects of a component as the core reads them, kept so that the migration guardrails
/// read the very objects the diagnosis and the plan read.
pub struct Objects {
    pub(crate) service: Arc<InferenceService>,
    /// The runtime the service names, of either kind, if the caches hold it.
    pub(crate) runtime: Option<Arc<ServingRuntime>>,
    pub(crate) cluster_runtime: Option<Arc<ClusterServingRuntime>>,
    pub(crate) replica: InferenceReplica,
    /// The component's pods, shared with the pods' index.
    pub(crate) pods: Vec<Arc<Pod>>,
    pub(crate) nodes: Arc<Nodes>,
}

impl Objects {
    /// `step` in words, then its command, for this component: as `explain` lists it.
    pub(crate) fn describe(&self, step: &Move) -> String {
        let namespace = self.service.namespace().unwrap_or_default();
        step.describe(&self.service.name_any(), &self.replica.spec.component, &namespace)
    }

    pub fn component(&self) -> Component<'_> {
        let runtime = self.runtime.as_deref().map(Runtime::Namespaced);
        let runtime = runtime.or(self.cluster_runtime.as_deref().map(Runtime::Cluster));
        let pods = self.pods.iter().map(|pod| &**pod);
        Component::new(&self.service, runtime, &self.replica, pods, &self.nodes)
    }
}

/// An InferenceService's own mode, which can only lower the controller's.
pub const ANNOTATION: &str = "spread.ome.io/rebalance";

/// Ordered: a lower mode does less. Its name is the one the flag and the annotation spell it with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Mode {
    Off,
    Recommend,
    Migrate,
}

impl Mode {
    /// The mode for `service`: its annotation's, if lower. An unknown value is returned as Err.
    pub fn for_service(self, service: &InferenceService) -> Result<Self, String> {
        match service.annotations().get(ANNOTATION) {
            None => Ok(self),
            Some(value) => <Self as clap::ValueEnum>::from_str(value, false)
                .map(|own| own.min(self))
                .map_err(|_| value.clone()),
        }
    }
}

/// An Event of ome-spread's: `action` is what it did (`Diagnose`, `Rebalance`).
pub(crate) fn event(type_: EventType, reason: &str, note: String, action: &str) -> Event {
    Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: action.into(),
        secondary: None,
    }
}
