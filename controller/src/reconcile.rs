//! One reconcile: read a replica's InferenceService, runtime, pods and the nodes from the caches,
//! diagnose (the shared core), then show the report as the `Spread` condition, an Event when the
//! reason changes, and metrics. It writes nothing else.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::FutureExt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use ome_spread_core::diagnosis::{Component, DiagnosisError, Report, diagnose, node_keys};
use ome_spread_core::explain::{no_move, what_to_do};
use ome_spread_core::migration::Entry;
use ome_spread_core::nodes::Nodes;
use ome_spread_core::rebalance::{NoPlan, Plan, recommend, rooms};
use ome_spread_core::replica::RuntimeRef;
use ome_spread_core::settings::Settings;
use serde_json::{Value, json};
use tracing::{debug, info, warn};

use crate::cache::{NodeSnapshot, RecordSnapshot, RequestSnapshot};
use crate::metrics::Metrics;
use crate::pods::Pods;
use crate::rebalance::{self, Mode};
use crate::resources::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};
use crate::room::Room;
use crate::triggers::KeysInUse;

/// The field manager of the `Spread` condition.
pub const FIELD_MANAGER: &str = "ome-spread";
pub const CONDITION: &str = "Spread";
/// How long one API write may take before the reconcile counts as failed and is retried.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);
/// Watches trigger every reconcile that matters; this only catches what a lost watch event missed.
const RESYNC: Duration = Duration::from_secs(600);
/// How long a reconcile waits for the caches it reads before it fails, naming them, and is
/// retried: never a reconcile that waits silently (and holds a graceful shutdown) forever.
const FILL_TIMEOUT: Duration = Duration::from_secs(30);

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
}

impl Error {
    /// The kind of error, as the `error` label of the errors metric.
    pub fn kind(&self) -> String {
        match self {
            Self::Api(kube::Error::Api(status)) => format!("api_{}", status.code),
            Self::Api(_) => "api".into(),
            Self::Timeout(_) => "timeout".into(),
            Self::BadObject(_) | Self::Json(_) => "bad_object".into(),
            Self::CacheGone | Self::NotFilled(_) => "cache".into(),
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
    pub settings: Settings,
    pub metrics: Arc<Metrics>,
    /// Failures in a row per replica, for the retry's backoff.
    pub failures: Mutex<HashMap<ObjectRef<InferenceReplica>, u32>>,
    /// The controller's rebalance mode (`--rebalance`).
    pub rebalance: Mode,
    /// The rebalance Event last published per replica, so that a resync does not repeat it.
    pub announced: Mutex<HashMap<ObjectRef<InferenceReplica>, String>>,
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
    /// The reason last told by an Event per replica whose condition was held back, so that the
    /// Event is not told again, then or once the condition can be written.
    pub held: Mutex<HashMap<ObjectRef<InferenceReplica>, String>>,
}

impl Context {
    /// Waits until every cache the diagnosis reads is filled (its watch's first list applied).
    pub async fn filled(&self) -> Result<(), Error> {
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

    /// [`Self::filled`], for at most [`FILL_TIMEOUT`].
    async fn synced(&self) -> Result<(), Error> {
        match tokio::time::timeout(FILL_TIMEOUT, self.filled()).await {
            Ok(filled) => filled,
            Err(_) => {
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
                Err(Error::NotFilled(names.join(", ")))
            }
        }
    }
}

pub async fn reconcile(replica: Arc<InferenceReplica>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_replica(&replica, &ctx).await;
    match &result {
        Ok(_) => {
            ctx.metrics.reconciled(started.elapsed());
            if let Ok(mut failures) = ctx.failures.lock() {
                failures.remove(&ObjectRef::from_obj(&*replica));
            }
        }
        Err(error) => ctx.metrics.failed(&error.kind(), started.elapsed()),
    }
    result
}

/// Retries a failed reconcile after 5 s, doubling per failure in a row, up to 5 minutes.
pub fn error_policy(replica: Arc<InferenceReplica>, error: &Error, ctx: Arc<Context>) -> Action {
    let failures = ctx.failures.lock().map_or(1, |mut failures| {
        let count = failures.entry(ObjectRef::from_obj(&*replica)).or_insert(0);
        *count += 1;
        *count
    });
    let wait = retry_after(failures);
    warn!(replica = %ObjectRef::from_obj(&*replica), %error, failures, retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

pub fn retry_after(failures: u32) -> Duration {
    Duration::from_secs(
        5u64.saturating_mul(1 << failures.clamp(1, 7).saturating_sub(1))
            .min(300),
    )
}

async fn reconcile_replica(replica: &InferenceReplica, ctx: &Context) -> Result<Action, Error> {
    ctx.synced().await?;
    let (namespace, name) = (replica.namespace().unwrap_or_default(), replica.name_any());
    let Some(Diagnosed {
        service,
        report,
        action,
        plan,
        objects,
    }) = diagnosed(replica, ctx)?
    else {
        // Nothing to say: the InferenceService's watch brings the replica back if that changes.
        ctx.metrics.forget(&namespace, &name);
        ctx.keys.forget(&ObjectRef::from_obj(replica));
        if let Ok(mut announced) = ctx.announced.lock() {
            announced.remove(&ObjectRef::from_obj(replica));
        }
        return Ok(Action::await_change());
    };
    ctx.metrics.show(&namespace, &name, &report);
    record(replica, &report, &action, ctx).await?;
    rebalance::recommend(replica, &service, &plan, &objects, ctx).await?;
    Ok(Action::requeue(RESYNC))
}

/// A replica's diagnosis, the rebalance plan from it, and the objects both read.
struct Diagnosed {
    service: Arc<InferenceService>,
    report: Report,
    /// What to do, knowing the plan (`explain`'s words).
    action: String,
    plan: Result<Plan, NoPlan>,
    objects: Objects,
}

/// The objects of a component as the core reads them, kept so that the migration guardrails
/// read the very objects the diagnosis and the plan read.
pub struct Objects {
    service: Value,
    runtime: Option<Value>,
    replica: Value,
    /// The component's pods.
    pods: Vec<Value>,
    nodes: Arc<Nodes>,
}

impl Objects {
    pub fn component(&self) -> Component<'_> {
        Component {
            service: &self.service,
            runtime: self.runtime.as_ref(),
            replica: &self.replica,
            pods: &self.pods,
            nodes: &self.nodes,
        }
    }
}

/// The diagnosis of a replica of an OMENative InferenceService, from the caches; None for any
/// other replica.
fn diagnosed(replica: &InferenceReplica, ctx: &Context) -> Result<Option<Diagnosed>, Error> {
    let namespace = replica.namespace().unwrap_or_default();
    // A replica without a parent (OME's standalone form) has no InferenceService to diagnose.
    let parent = replica.spec.parent_ref.as_ref().map(|p| p.name.clone());
    let service = parent.as_ref().and_then(|parent| {
        ctx.services
            .get(&ObjectRef::new(parent).within(&namespace))
            .filter(|s| s.on_omenative())
    });
    let (Some(parent), Some(service)) = (parent, service) else {
        debug!(replica = %ObjectRef::from_obj(replica), "no OMENative InferenceService of this replica in the cache: nothing to say");
        return Ok(None);
    };
    let runtime = match service.runtime() {
        Some(RuntimeRef::Namespaced(runtime)) => {
            to_value(ctx.runtimes.get(&ObjectRef::new(runtime).within(&namespace)))?
        }
        Some(RuntimeRef::Cluster(runtime)) => to_value(ctx.cluster_runtimes.get(&ObjectRef::new(runtime)))?,
        None => None,
    };
    let objects = Objects {
        service: serde_json::to_value(&*service).map_err(Error::Json)?,
        runtime,
        replica: serde_json::to_value(replica).map_err(Error::Json)?,
        pods: ctx
            .pods
            .of(&(namespace.clone(), parent, replica.spec.component.clone())),
        nodes: ctx.nodes.current(),
    };
    let component = objects.component();
    let report = diagnose(&component, &ctx.settings)?;
    ctx.keys
        .set(ObjectRef::from_obj(replica), node_keys(&component, &report));
    let (plan, action) = ctx.room.with(|requested| {
        let plan = recommend(&component, &report, requested, &ctx.settings);
        // The domains where no node takes the pods are read only when a skew has no migration.
        let rooms = match no_move(&plan) {
            Some(_) => rooms(&component, &report, requested, 0),
            None => Vec::new(),
        };
        let action = what_to_do(&report, &plan, &rooms, &objects.replica);
        (plan, action)
    });
    Ok(Some(Diagnosed {
        service,
        report,
        action,
        plan,
        objects,
    }))
}

/// The Event when the reason changes, then the condition when it changes.
async fn record(replica: &InferenceReplica, report: &Report, action: &str, ctx: &Context) -> Result<(), Error> {
    let (namespace, name) = (replica.namespace().unwrap_or_default(), replica.name_any());
    let previous = replica
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION));
    let condition = spread_condition(
        report,
        action,
        replica.meta().generation,
        previous,
        Time(k8s_openapi::jiff::Timestamp::now()),
    );
    let reference = replica.object_ref(&());
    let told = previous.map(|p| p.reason.clone()).or_else(|| {
        ctx.held
            .lock()
            .expect("the held reasons")
            .get(&ObjectRef::from_obj(replica))
            .cloned()
    });
    if told.is_none_or(|reason| reason != condition.reason) {
        // Before the condition, so that a failed write retries the Event too rather than lose it.
        let event = Event {
            type_: if report.reason.holds() {
                EventType::Normal
            } else {
                EventType::Warning
            },
            reason: condition.reason.clone(),
            note: Some(condition.message.clone()),
            action: "Diagnose".into(),
            secondary: None,
        };
        within_timeout("the Event", ctx.recorder.publish(&event, &reference)).await?;
    }
    if ctx.no_condition.lock().expect("the refusal").is_some() {
        let mut held = ctx.held.lock().expect("the held reasons");
        held.insert(ObjectRef::from_obj(replica), condition.reason);
        return Ok(());
    }
    ctx.held
        .lock()
        .expect("the held reasons")
        .remove(&ObjectRef::from_obj(replica));
    if previous.is_none_or(|p| !same(p, &condition)) {
        let api: Api<InferenceReplica> = Api::namespaced(ctx.client.clone(), &namespace);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        within_timeout(
            "the status patch",
            api.patch_status(&name, &params, &Patch::Apply(status_patch(&condition))),
        )
        .await?;
        info!(replica = %format!("{namespace}/{name}"), reason = %condition.reason, status = %condition.status, "Spread condition set");
    }
    Ok(())
}

fn to_value<K: serde::Serialize>(object: Option<Arc<K>>) -> Result<Option<Value>, Error> {
    object
        .map(|o| serde_json::to_value(&*o))
        .transpose()
        .map_err(Error::Json)
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

/// The `Spread` condition for a report and what to do. Its transition time moves only when its
/// status does.
pub fn spread_condition(
    report: &Report,
    action: &str,
    generation: Option<i64>,
    previous: Option<&Condition>,
    now: Time,
) -> Condition {
    let status = if report.reason.holds() { "True" } else { "False" };
    Condition {
        type_: CONDITION.into(),
        status: status.into(),
        reason: report.reason.as_str().into(),
        message: format!("{}. {action}", report.message),
        observed_generation: generation,
        last_transition_time: previous
            .filter(|p| p.status == status)
            .map_or(now, |p| p.last_transition_time.clone()),
    }
}

fn same(a: &Condition, b: &Condition) -> bool {
    (&a.status, &a.reason, &a.message, a.observed_generation)
        == (&b.status, &b.reason, &b.message, b.observed_generation)
}

/// The server-side apply body: ome-spread's one condition, nothing else of the replica.
pub fn status_patch(condition: &Condition) -> Value {
    json!({
        "apiVersion": "ome.io/v1beta1",
        "kind": "InferenceReplica",
        "status": {"conditions": [condition]},
    })
}
