//! One reconcile: read a replica's InferenceService, runtime, pods and the nodes from the caches,
//! diagnose (the shared core), then show the report as the `Spread` condition, an Event when the
//! reason changes, and metrics. It writes nothing else.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType::{Normal, Warning};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use ome_spread_core::action::{no_move, what_to_do};
use ome_spread_core::diagnosis::{Report, diagnose, node_keys};
use ome_spread_core::loss::worst;
use ome_spread_core::rebalance::{recommend, rooms};
use ome_spread_core::replica::RuntimeRef;
use serde_json::json;
use tokio::time::Instant;
use tracing::{Span, debug, field, info, instrument, warn};

use crate::context::{Caches, Context, Fill, Mode, Objects, event};
use crate::error::{Error, FILL_TIMEOUT, lock, within_timeout};
use crate::pods::replica_of_component;
use crate::rebalance::{self, recommendation};
use crate::resources::{CONDITION, FIELD_MANAGER};
use ome_spread_core::ome::{InferenceReplica, namespaced_name};

/// Watches trigger every reconcile that matters; this only catches what a lost watch event missed.
const RESYNC: Duration = Duration::from_secs(600);
/// One reconcile, in a span naming the replica, on which the diagnosis's reason and the time the
/// reconcile took are recorded: each of its log lines (the API writes among them) carries them.
#[instrument(skip_all, fields(replica = %namespaced_name(&*replica), reason = field::Empty, duration_ms = field::Empty))]
pub async fn reconcile(replica: Arc<InferenceReplica>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let _running = ctx.health.reconciling();
    let key = ObjectRef::from_obj(&*replica);
    // The events this reconcile acts on: those arrived by now (a later one reconciles again).
    let mut arrived = ctx.replicas.with(&key, |kept| kept.arrived.take());
    let result = reconcile_replica(&replica, &ctx, &mut arrived).await;
    Span::current().record("duration_ms", started.elapsed().as_secs_f64() * 1000.0);
    debug!("reconciled");
    match &result {
        Ok(_) => {
            ctx.metrics.reconciled(started.elapsed());
            ctx.replicas.succeeded(&key);
        }
        Err(error) => {
            ctx.metrics.failed(&error.kind(), started.elapsed());
            // Not yet shown: the retry acts on those events still.
            if let Some(at) = arrived {
                ctx.replicas.arrived(&key, at);
            }
        }
    }
    result
}

/// Retries a failed reconcile after 5 s, doubling per failure in a row, up to 5 minutes.
pub fn error_policy(replica: Arc<InferenceReplica>, error: &Error, ctx: Arc<Context>) -> Action {
    let failures = ctx.replicas.with(&ObjectRef::from_obj(&*replica), |kept| {
        kept.failures += 1;
        kept.failures
    });
    let wait = retry_after(failures);
    warn!(replica = %namespaced_name(&*replica), %error, failures, retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

pub fn retry_after(failures: u32) -> Duration {
    Duration::from_secs((5 << (failures.clamp(1, 7) - 1)).min(300))
}

/// `arrived`: when the earliest event it acts on arrived, taken once the condition is written.
async fn reconcile_replica(
    replica: &InferenceReplica,
    ctx: &Context,
    arrived: &mut Option<Instant>,
) -> Result<Action, Error> {
    filled(&ctx.caches).await?;
    let (namespace, name) = (replica.namespace().unwrap_or_default(), replica.name_any());
    let key = ObjectRef::from_obj(replica);
    let Some(mut objects) = objects(replica, ctx) else {
        // Nothing to say: the InferenceService's watch brings the replica back if that changes.
        if ctx.replicas.with(&key, |kept| kept.reported.is_some()) {
            within_timeout("the report's deletion", ctx.reports.delete(&ctx.client, replica)).await?;
        }
        ctx.forget(&key);
        return Ok(Action::await_change());
    };
    let settings = ctx.caches.settings.borrow().clone();
    let report = loop {
        let component = objects.component();
        let report = diagnose(&component, &settings)?;
        if !ctx.caches.nodes.read_by(key.clone(), node_keys(&component, &report)) {
            break report;
        }
        // A label no replica read before: the nodes were built without its changes since.
        objects.nodes = ctx.caches.nodes.current();
    };
    let component = objects.component();
    let (plan, message, worst_loss) = ctx.caches.pods.with_requested(|requested| {
        let plan = recommend(&component, &report, requested, &settings);
        // The domains where no node takes the pods are read only when a skew has no migration.
        let rooms = no_move(&plan).map_or_else(Vec::new, |_| rooms(&component, &report, requested, 0));
        let action = what_to_do(&report, &plan, &rooms, &objects.replica);
        let worst_loss = worst(&component, &report, requested, &settings);
        // What is the matter, then what to do.
        (plan, format!("{}. {action}", report.message), worst_loss)
    });
    Span::current().record("reason", field::display(report.reason.as_str()));
    ctx.metrics.show(&namespace, &name, &report, worst_loss.as_ref());
    record(replica, &report, &message, ctx, arrived).await?;
    let recommended = |step| recommendation(objects.describe(step), &objects);
    let moves = match (ctx.rebalance.for_service(&objects.service), &plan) {
        (Ok(Mode::Recommend), Ok(plan)) => plan.moves.iter().map(recommended).collect(),
        _ => Vec::new(),
    };
    // The replica's policy report, written when its results change.
    let results = ctx.reports.results(&report, &message, worst_loss.as_ref(), &moves);
    if ctx.replicas.with(&key, |kept| kept.reported.as_ref() != Some(&results))
        && within_timeout("the report", ctx.reports.write(&ctx.client, replica, &results)).await?
    {
        ctx.replicas.with(&key, |kept| kept.reported = Some(results));
    }
    rebalance::recommend(&plan, &objects, ctx).await?;
    Ok(Action::requeue(RESYNC))
}

/// Waits, for at most [`FILL_TIMEOUT`], until the caches are filled, as the readiness tells
/// (`caches.filled`): any number of reconciles wait on it at once.
async fn filled(caches: &Caches) -> Result<(), Error> {
    let mut filled = caches.filled.subscribe();
    let waited = tokio::time::timeout(FILL_TIMEOUT, filled.wait_for(|fill| *fill != Fill::Filling)).await;
    match waited {
        Ok(Ok(fill)) if *fill == Fill::Filled => Ok(()),
        Ok(_) => Err(Error::Stopping),
        Err(_) => Err(caches.unfilled()),
    }
}

/// The objects of a replica of an OMENative InferenceService, from the caches; None for any
/// other replica.
fn objects(replica: &InferenceReplica, ctx: &Context) -> Option<Objects> {
    let namespace = replica.namespace().unwrap_or_default();
    // A replica without a parent (OME's standalone form) has no InferenceService to diagnose.
    let parent = replica.spec.parent_ref.as_ref().map(|p| p.name.as_str());
    let cached = |parent: &str| ctx.caches.services.get(&ObjectRef::new(parent).within(&namespace));
    let (Some(parent), Some(service)) = (parent, parent.and_then(cached).filter(|s| s.on_omenative())) else {
        debug!(replica = %ObjectRef::from_obj(replica), "no OMENative InferenceService of this replica in the cache: nothing to say");
        return None;
    };
    let namespaced = |runtime: &str| ctx.caches.runtimes.get(&ObjectRef::new(runtime).within(&namespace));
    let (runtime, cluster_runtime) = match service.runtime() {
        Some(RuntimeRef::Namespaced(runtime)) => (namespaced(runtime), None),
        Some(RuntimeRef::Cluster(runtime)) => (None, ctx.caches.cluster_runtimes.get(&ObjectRef::new(runtime))),
        None => (None, None),
    };
    Some(Objects {
        service,
        runtime,
        cluster_runtime,
        replica: replica.clone(),
        pods: (ctx.caches.pods).of(&replica_of_component(&namespace, parent, &replica.spec.component)),
        nodes: ctx.caches.nodes.current(),
    })
}

/// The Event when the reason changes and the condition when it changes, written at once so that
/// the condition waits on no Event; timed from the event that `arrived` first.
async fn record(
    replica: &InferenceReplica,
    report: &Report,
    message: &str,
    ctx: &Context,
    arrived: &mut Option<Instant>,
) -> Result<(), Error> {
    let (namespace, name) = (replica.namespace().unwrap_or_default(), replica.name_any());
    let key = ObjectRef::from_obj(replica);
    let mut conditions = replica.status.iter().flat_map(|s| &s.conditions);
    let cached = conditions.find(|c| c.type_ == CONDITION);
    let (written, told) = ctx.replicas.with(&key, |kept| {
        if kept.written.as_ref().zip(cached).is_some_and(|(w, c)| same(w, c)) {
            kept.written = None;
        }
        (kept.written.clone(), kept.told.clone())
    });
    let previous = written.as_ref().or(cached);
    let status = report.reason.status();
    // Its transition time moves only when its status does.
    let unmoved = previous.filter(|p| p.status == status);
    let condition = Condition {
        type_: CONDITION.into(),
        status: status.into(),
        reason: report.reason.as_str().into(),
        message: message.to_owned(),
        observed_generation: replica.meta().generation,
        last_transition_time: unmoved.map_or_else(|| Time(Timestamp::now()), |p| p.last_transition_time.clone()),
    };
    let told = told.or_else(|| previous.map(|p| p.reason.clone()));
    let tell = async {
        if told.is_some_and(|reason| reason == condition.reason) {
            return Ok(());
        }
        let type_ = if report.reason.holds() { Normal } else { Warning };
        let event = event(type_, &condition.reason, condition.message.clone(), "Diagnose");
        let published = within_timeout("the Event", ctx.recorder.publish(&event, &replica.object_ref(&()))).await;
        // A failed Event is owed (no reason told), though the condition beside it was written.
        let reason = published.as_ref().map_or(String::new(), |_| condition.reason.clone());
        ctx.replicas.with(&key, |kept| kept.told = Some(reason));
        published
    };
    let refused = lock(&ctx.no_condition).is_some();
    let write = async {
        if refused || previous.is_some_and(|p| same(p, &condition)) {
            return Ok(());
        }
        let api: Api<InferenceReplica> = Api::namespaced(ctx.client.clone(), &namespace);
        let params = PatchParams::apply(FIELD_MANAGER).force();
        // ome-spread's one condition, nothing else of the replica.
        let patch = Patch::Apply(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "status": {"conditions": [&condition]}}));
        within_timeout("the status patch", api.patch_status(&name, &params, &patch)).await?;
        if let Some(at) = arrived.take() {
            ctx.metrics.condition_written(at.elapsed());
        }
        info!(status = %condition.status, "Spread condition set");
        ctx.replicas.with(&key, |kept| kept.written = Some(condition.clone()));
        Ok(())
    };
    let (told, written) = tokio::join!(tell, write);
    told.and(written)
}

fn same(a: &Condition, b: &Condition) -> bool {
    (&a.status, &a.reason, &a.message, a.observed_generation)
        == (&b.status, &b.reason, &b.message, b.observed_generation)
}
