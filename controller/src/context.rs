//! What a reconcile and the rebalance share: the caches they read, how they write, what is kept
//! of each replica, the objects of a component as the core reads them, and the rebalance mode.
//! Beneath both, so that neither imports the other in a circle.

use std::sync::{Arc, Mutex};

use kube::ResourceExt;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::ObjectRef;
use ome_spread_core::diagnosis::Component;
use ome_spread_core::migration::Entry;
use ome_spread_core::nodes::Nodes;
use ome_spread_core::pod::Pod;
use ome_spread_core::rebalance::Move;
use tokio::time::Instant;

use crate::cache::Caches;
use crate::metrics::Metrics;
use crate::report::Reports;
use crate::serve::Health;
use crate::state::ReplicaStates;
use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService, Runtime, ServingRuntime};

/// What a reconcile reads and writes through, and what it keeps.
pub struct Context {
    pub client: kube::Client,
    pub recorder: Recorder,
    /// Why the `Spread` condition is not written (the served schema would let it replace OME's
    /// status: [`crate::schema`]), or None.
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
        self.replicas.forget(replica);
        self.metrics
            .forget(replica.namespace.as_deref().unwrap_or_default(), &replica.name);
        self.caches.nodes.forget(replica);
    }

    /// A watch event that triggers `replicas` arrived now: noted on each that the replicas' cache
    /// holds (no reconcile runs for another), so that a reconcile times the condition it writes
    /// from the earliest event it acts on.
    pub fn arrived<'a>(&self, replicas: impl IntoIterator<Item = &'a ObjectRef<InferenceReplica>>) {
        let now = Instant::now();
        for replica in replicas {
            if self.caches.replicas.get(replica).is_some() {
                self.replicas.arrived(replica, now);
            }
        }
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
