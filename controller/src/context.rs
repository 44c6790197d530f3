//! What a reconcile, the rebalance and the migration request share: the caches and clients they
//! read and write through, the objects of a component as the core reads them, their errors, the
//! API timeout, the rebalance mode and what the rebalance says. Beneath all three, so that none
//! of them imports another in a circle.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::ResourceExt;
use kube::runtime::events::{EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use ome_spread_core::diagnosis::{Component, DiagnosisError};
use ome_spread_core::migration::{Entry, Unconfigured};
use ome_spread_core::nodes::Nodes;
use ome_spread_core::settings::Settings;
use serde_json::Value;

use crate::cache::{NodeSnapshot, RecordSnapshot, RequestSnapshot};
use crate::metrics::Metrics;
use crate::pods::Pods;
use crate::report::Reports;
use crate::resources::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};
use crate::room::Room;
use crate::serve::Health;
use crate::state::ReplicaStates;
use crate::triggers::KeysInUse;

/// How long one API write may take before the reconcile counts as failed and is retried.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a reconcile waits for the caches it reads before it fails, naming them, and is
/// retried: never a reconcile that waits silently (and holds a graceful shutdown) forever.
pub const FILL_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("the API server did not answer {0} within {API_TIMEOUT:?}")]
    Timeout(&'static str),
    /// A value OME would not accept, named by object and field.
    #[error(transparent)]
    BadObject(#[from] DiagnosisError),
    /// An object the caches hold that cannot be read as JSON: cannot happen, and is said if it does.
    #[error("an object of the cache cannot be read as JSON: {0}")]
    Json(serde_json::Error),
    #[error("a cache stopped before it was filled")]
    CacheGone,
    /// The API server has not answered the first list of these caches' watches.
    #[error("the caches of {0} are not filled after {FILL_TIMEOUT:?}: their first list has not been answered")]
    NotFilled(String),
    /// Asked to stop before the caches filled: their watches end with the controller.
    #[error("stopping before the caches were filled")]
    Stopping,
}

impl Error {
    /// The kind of error, as the `error` label of the errors metric.
    pub fn kind(&self) -> String {
        match self {
            Self::Api(kube::Error::Api(status)) => format!("api_{}", status.code),
            Self::Api(_) => "api".into(),
            Self::Timeout(_) => "timeout".into(),
            Self::BadObject(_) | Self::Json(_) => "bad_object".into(),
            Self::CacheGone | Self::NotFilled(_) | Self::Stopping => "cache".into(),
        }
    }
}

/// The caches and clients a reconcile reads and writes through.
pub struct Context {
    pub client: kube::Client,
    pub recorder: Recorder,
    pub services: Store<InferenceService>,
    pub runtimes: Store<ServingRuntime>,
    pub cluster_runtimes: Store<ClusterServingRuntime>,
    /// The OMENative pods of each component.
    pub pods: Pods,
    pub nodes: NodeSnapshot,
    /// What every pod bound to a node requests of it.
    pub room: Room,
    /// The node labels each replica's diagnosis reads, for the node watch.
    pub keys: Arc<KeysInUse>,
    /// The policy's settings, as last read (`--settings`, or the ClusterAdmissionPolicy followed).
    pub settings: tokio::sync::watch::Receiver<Settings>,
    pub metrics: Arc<Metrics>,
    /// Each reconcile's start and end, for `/healthz`.
    pub health: Arc<Health>,
    /// What is kept of each replica between its reconciles.
    pub replicas: ReplicaStates,
    /// The controller's rebalance mode (`--rebalance`).
    pub rebalance: Mode,
    /// Every InferenceService's requests and InferenceReplica's records, for `migrate`.
    pub requests: RequestSnapshot,
    pub records: RecordSnapshot,
    /// `--rebalance-max-per-hour`.
    pub max_per_hour: usize,
    /// The migration gate: held from the guardrails' check to the request's write, so that two
    /// reconciles never write two requests; it keeps what this process wrote (InferenceService,
    /// ledger entry) until the caches show it.
    pub written: tokio::sync::Mutex<Vec<(String, Entry)>>,
    /// Why the `Spread` condition is not written (the served schema would let it replace OME's
    /// status: [`crate::schema`]), or None.
    pub no_condition: Mutex<Option<String>>,
    /// Whether every cache the diagnosis reads is filled ([`Self::caches_filled`]).
    pub filled: tokio::sync::watch::Sender<Caches>,
    /// Each diagnosis as a policy report (`--reports`).
    pub reports: Arc<Reports>,
}

/// Whether the reconciles can read the caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Caches {
    Filling,
    Filled,
    /// Asked to stop before they were filled: the watches that fill them end first.
    Stopping,
}

impl Context {
    /// Forgets a replica: its record, its metric series and the node labels it read. A replica
    /// deleted, or one with nothing left to say.
    pub fn forget(&self, replica: &ObjectRef<InferenceReplica>) {
        self.replicas.forget(replica);
        self.metrics
            .forget(replica.namespace.as_deref().unwrap_or_default(), &replica.name);
        self.keys.forget(replica);
    }

    /// Waits until every cache the diagnosis reads is filled (its watch's first list applied).
    /// One task only may wait so (kube-runtime's `Store::wait_until_ready` wakes only the task
    /// that polled it last): the controller's readiness, which then tells [`Self::filled`].
    pub async fn caches_filled(&self) -> Result<(), Error> {
        let ready = futures::try_join!(
            self.services.wait_until_ready(),
            self.runtimes.wait_until_ready(),
            self.cluster_runtimes.wait_until_ready(),
            self.pods.wait_until_filled().map(Ok),
            self.nodes.wait_until_ready(),
            self.room.wait_until_filled().map(Ok),
        );
        ready.map(|_| ()).map_err(|_| Error::CacheGone)
    }

    /// The caches not filled yet, named.
    pub(crate) fn unfilled(&self) -> Error {
        let unfilled = [
            ("InferenceServices", self.services.wait_until_ready().now_or_never()),
            ("ServingRuntimes", self.runtimes.wait_until_ready().now_or_never()),
            (
                "ClusterServingRuntimes",
                self.cluster_runtimes.wait_until_ready().now_or_never(),
            ),
            ("pods", self.pods.wait_until_filled().map(Ok).now_or_never()),
            ("nodes", self.nodes.wait_until_ready().now_or_never()),
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

    /// Waits, for at most [`FILL_TIMEOUT`], until the caches are filled, as [`Self::filled`]
    /// says: any number of reconciles wait on it at once.
    pub(crate) async fn synced(&self) -> Result<(), Error> {
        let mut filled = self.filled.subscribe();
        let waited = tokio::time::timeout(FILL_TIMEOUT, filled.wait_for(|caches| *caches != Caches::Filling)).await;
        match waited {
            Ok(Ok(caches)) if *caches == Caches::Filled => Ok(()),
            Ok(_) => Err(Error::Stopping),
            Err(_) => Err(self.unfilled()),
        }
    }
}

/// The objects of a component as the core reads them, kept so that the migration guardrails
/// read the very objects the diagnosis and the plan read.
pub struct Objects {
    pub(crate) service: Value,
    pub(crate) runtime: Option<Value>,
    pub(crate) replica: Value,
    /// The component's pods, shared with the pods' index.
    pub(crate) pods: Vec<Arc<Value>>,
    pub(crate) nodes: Arc<Nodes>,
}

impl Objects {
    pub fn component(&self) -> Component<'_> {
        Component::new(
            &self.service,
            self.runtime.as_ref(),
            &self.replica,
            self.pods.iter().map(|pod| &**pod),
            &self.nodes,
        )
    }
}

pub(crate) async fn within_timeout<T>(
    what: &'static str,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, Error> {
    tokio::time::timeout(API_TIMEOUT, call)
        .await
        .map_err(|_| Error::Timeout(what))?
        .map_err(Error::from)
}

/// An InferenceService's own mode, which can only lower the controller's.
pub const ANNOTATION: &str = "spread.ome.io/rebalance";

/// Ordered: a lower mode does less.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum Mode {
    Off,
    Recommend,
    Migrate,
}

impl Mode {
    /// The name the flag and the annotation spell it with.
    pub fn name(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Recommend => "recommend",
            Self::Migrate => "migrate",
        }
    }

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

/// What the rebalance says of a replica once: the Event, and the object it is about.
pub(crate) struct Announcement {
    pub type_: EventType,
    pub reason: &'static str,
    pub note: String,
    pub regarding: ObjectReference,
}

/// A recommended move as its Event says it: the move and its command, then, when OME would hold
/// the request for its caps, why and what to set (as `explain`'s "What to do" says it).
pub(crate) fn recommendation(described: String, objects: &Objects) -> String {
    match Unconfigured::of(objects.component().replica) {
        Some(unconfigured) => format!("{described}. {unconfigured}"),
        None => described,
    }
}
