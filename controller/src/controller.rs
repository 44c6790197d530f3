//! `ome-spread controller`: leader election, then the caches and the triggers wired to the
//! reconciler. What change re-diagnoses which InferenceReplica: a pod its replica
//! ([`crate::pods`]), an InferenceService its engine and decoder, a runtime the services that use
//! it, a node every replica (only when what the diagnosis reads of it changed, [`crate::nodes`]).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use kube::runtime::controller::{self, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::utils::PredicateConfig;
use kube::runtime::watcher::ExponentialBackoff;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use kube_lease_manager::LeaseManagerBuilder;
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::replica::RuntimeRef;
use ome_spread_core::settings::Settings;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{debug, error, info, warn};

use crate::context::{Caches, Context, Fill, Mode, ReplicaStates};
use crate::error::{API_TIMEOUT, FILL_TIMEOUT, lock, within_timeout};
use crate::metrics::Metrics;
use crate::policy::{self, Source};
use crate::reconcile::{error_policy, reconcile};
use crate::reflected::{self, Events, reflected};
use crate::report::Reports;
use crate::resources::{self, CONDITION};
use crate::serve::Health;
use crate::{nodes, pods};
use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};

/// The leader-election Lease, in `--lease-namespace`.
pub const LEASE: &str = "ome-spread-controller";

pub struct Options {
    pub settings: Source,
    pub lease_namespace: String,
    pub identity: String,
    pub health: Arc<Health>,
    pub metrics: Arc<Metrics>,
    pub rebalance: Mode,
    /// `--rebalance-max-per-hour`: migration requests of ours started in an hour, at most.
    pub max_per_hour: usize,
    /// `--reports`: the reports written, and the policy their results name.
    pub reports: Arc<Reports>,
}

/// Runs the controller while this process holds the Lease; returns when asked to stop (SIGTERM
/// or SIGINT, in any phase), or fails when the Lease is lost (the Deployment restarts the
/// process, which stands by again). It stands for the Lease once the settings are read.
pub async fn run(client: Client, options: Options) -> Result<(), String> {
    let stop = stop_signal()?;
    let (sender, mut settings) = watch::channel(Settings::default());
    // What follows the policy and the Lease, aborted when the run ends.
    let mut following = JoinSet::new();
    match &options.settings {
        Source::Fixed(fixed) => sender.send_modify(|settings| *settings = fixed.clone()),
        Source::Policy(name) => {
            let (health, reports) = (options.health.clone(), options.reports.clone());
            let follow = policy::follow(client.clone(), name.clone(), sender.clone(), health, reports);
            following.spawn(follow);
        }
    }
    tokio::select! {
        read = settings.changed() => read.map_err(|_| "the settings' watch stopped".to_owned())?,
        () = stop.cancelled() => return Ok(()),
    }
    let (holder_sender, holder) = watch::channel(None);
    let namespace = options.lease_namespace.clone();
    let lease = watch_lease(client.clone(), namespace, options.health.clone(), holder_sender);
    following.spawn(lease);
    let Some((mut leading, lease_task)) = stand_by(&client, &options, holder, stop.clone()).await? else {
        return Ok(());
    };
    info!("leading: watching InferenceReplicas");
    options.health.set_ready(false);
    options.metrics.set_leading(true);
    let (health, metrics) = (options.health.clone(), options.metrics.clone());
    let controller = reconcile_all(client, options, settings, stop.clone());
    let outcome = tokio::select! {
        () = controller => Ok(()),
        _ = leading.wait_for(|leading| !*leading) => Err("lost the Lease: another replica leads now".to_owned()),
        () = stop.cancelled().then(|()| tokio::time::sleep(SHUTDOWN_GRACE)) => {
            warn!("the reconciles in flight did not end within {SHUTDOWN_GRACE:?} of the stop: stopping without them");
            Ok(())
        }
    };
    health.set_ready(false);
    metrics.set_leading(false);
    // The manager releases the Lease (its holder cleared) once its channel is closed, so that a
    // standby leads at once rather than after the Lease's 30 s.
    drop(leading);
    match tokio::time::timeout(API_TIMEOUT, lease_task).await {
        Ok(Ok(Ok(_))) if outcome.is_ok() => info!("stopped: the Lease {LEASE} released"),
        Ok(Ok(Ok(_))) => {}
        Ok(Ok(Err(e))) => warn!(error = %e, "releasing the Lease {LEASE}"),
        Ok(Err(e)) => warn!(error = %e, "releasing the Lease {LEASE}"),
        Err(_) => warn!("the Lease {LEASE} not released within {API_TIMEOUT:?}: it expires by itself"),
    }
    outcome
}

/// How long a leader asked to stop waits for its reconciles in flight (each API call is bounded
/// by `API_TIMEOUT`) before it releases the Lease without them: within the kubelet's default 30 s
/// grace period, the release included.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(15);

/// Listens for SIGTERM (the kubelet's, on a rollout or a drain) and SIGINT from now on, in every
/// phase: as its container's PID 1, the process would ignore a signal it does not handle, and be
/// killed only at the end of the grace period. The token is cancelled at the first of them.
fn stop_signal() -> Result<CancellationToken, String> {
    let listen = |kind: SignalKind, name: &str| signal(kind).map_err(|e| format!("listening for {name}: {e}"));
    let mut terminate = listen(SignalKind::terminate(), "SIGTERM")?;
    let mut interrupt = listen(SignalKind::interrupt(), "SIGINT")?;
    let stop = CancellationToken::new();
    let asked = stop.clone();
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = terminate.recv() => "SIGTERM",
            _ = interrupt.recv() => "SIGINT",
        };
        info!("{name}: stopping");
        asked.cancel();
    });
    Ok(stop)
}

/// The Lease's manager as it runs: whether this replica holds the Lease, and its task, which
/// releases the Lease when the receiver is dropped.
type Lead = (
    watch::Receiver<bool>,
    tokio::task::JoinHandle<kube_lease_manager::Result<kube_lease_manager::LeaseManager>>,
);

/// Stands by until this replica holds the Lease; None when asked to stop first (at once: a
/// standby holds nothing to hand over). kube-lease-manager's standby sleeps until the holder's
/// term would end (up to 30 s), even when the holder released the Lease on its way out: the
/// Lease's watch (`holder`) sees the holder cleared, and a new manager then takes the Lease.
async fn stand_by(
    client: &Client,
    options: &Options,
    mut holder: watch::Receiver<Option<String>>,
    stop: CancellationToken,
) -> Result<Option<Lead>, String> {
    info!(identity = %options.identity, "standing by for the Lease {LEASE}");
    options.health.set_ready(true);
    loop {
        let manager = LeaseManagerBuilder::new(client.clone(), LEASE)
            .with_namespace(&options.lease_namespace)
            .with_identity(&options.identity)
            .with_field_manager(format!("ome-spread/{}", options.identity))
            .build();
        let manager = tokio::select! {
            built = manager => built.map_err(|e| format!("leader election: {e}"))?,
            () = stop.cancelled() => return Ok(None),
        };
        let (mut leading, task) = manager.watch().await;
        holder.borrow_and_update();
        loop {
            if *leading.borrow_and_update() {
                return Ok(Some((leading, task)));
            }
            tokio::select! {
                changed = leading.changed() => changed.map_err(|_| "leader election stopped".to_owned())?,
                Ok(()) = holder.changed() => if holder.borrow_and_update().is_none() {
                    debug!("the Lease {LEASE} was released: standing for it again");
                    break;
                },
                () = stop.cancelled() => return Ok(None),
            }
        }
        // It never led: closing its channel releases nothing.
        drop(leading);
        let _ = task.await;
    }
}

/// The Lease's watch: its holder, for the standby, and for `/healthz` an event now and then:
/// whoever leads renews the Lease every 25 s, so that each replica, leading or standing by, sees
/// an event while its watches work.
async fn watch_lease(client: Client, namespace: String, health: Arc<Health>, holder: watch::Sender<Option<String>>) {
    health.watched();
    let lease = watcher::watch_object(Api::<Lease>::namespaced(client, &namespace), LEASE);
    let mut events = std::pin::pin!(lease.backoff(reflected::backoff()));
    while let Some(event) = events.next().await {
        match event {
            Ok(lease) => {
                health.watched();
                holder.send_replace(lease.and_then(|lease| lease.spec?.holder_identity));
            }
            Err(e) => warn!(error = %e, "watching the Lease {LEASE}"),
        }
    }
}

/// The caches, the context and the controller's triggers, run until the controller ends: asked
/// to stop, or stopped before the caches filled.
async fn reconcile_all(client: Client, options: Options, settings: watch::Receiver<Settings>, stop: CancellationToken) {
    let no_condition = tokio::select! {
        refused = condition_refused(&client) => refused,
        () = stop.cancelled() => return,
    };
    let (services, service_events) = reflected(Api::<InferenceService>::all(client.clone()));
    let (runtimes, runtime_events) = reflected(Api::<ServingRuntime>::all(client.clone()));
    let (cluster_runtimes, cluster_runtime_events) = reflected(Api::<ClusterServingRuntime>::all(client.clone()));
    let (replicas, replica_events) = reflected(Api::<InferenceReplica>::all(client.clone()));
    let reporter = Reporter {
        controller: "ome-spread".into(),
        instance: Some(options.identity.clone()),
    };
    let context = Arc::new(Context {
        client: client.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        no_condition: Mutex::new(no_condition),
        reports: options.reports,
        caches: Caches::new(services, runtimes, cluster_runtimes, replicas.clone(), settings),
        replicas: ReplicaStates::default(),
        rebalance: options.rebalance,
        max_per_hour: options.max_per_hour,
        migrations: tokio::sync::Mutex::default(),
        metrics: options.metrics,
        health: options.health,
    });
    tokio::spawn(ready_when_filled(context.clone(), stop.clone()));
    let every_replica = every_replica_changes(&client, &context);
    let replica_changes = replica_changes(replica_events, context.clone());
    let [of_pods, of_services, of_runtimes, of_cluster_runtimes] = [(); 4].map(|()| context.clone());
    let pod_changes = pods::changes(client, context.caches.pods.clone());
    let controller = Controller::for_stream(replica_changes, replicas)
        .reconcile_on(pod_changes.flat_map(move |replicas| futures::stream::iter(of_pods.arrived(replicas))))
        .watches_stream(service_events.touched_objects(), move |service| {
            of_services.arrived(replicas_of_service(&service))
        })
        .watches_stream(runtime_events.touched_objects(), move |runtime| {
            let namespaced = RuntimeRef::Namespaced(&runtime.name_any());
            let replicas = replicas_using(&of_runtimes.caches.services, namespaced, runtime.namespace());
            of_runtimes.arrived(replicas)
        })
        .watches_stream(cluster_runtime_events.touched_objects(), move |runtime| {
            let cluster = RuntimeRef::Cluster(&runtime.name_any());
            let replicas = replicas_using(&of_cluster_runtimes.caches.services, cluster, None);
            of_cluster_runtimes.arrived(replicas)
        })
        .reconcile_all_on(every_replica);
    let mut fill = context.caches.filled.subscribe();
    tokio::select! {
        () = run_controller(controller, context.clone(), stop) => {}
        // Stopped before the caches filled: no reconcile got past its wait for them, and
        // kube-runtime holds its runner until the replicas' store is filled, which their ended
        // watch never does (its graceful shutdown would wait for it forever).
        _ = fill.wait_for(|fill| *fill == Fill::Stopping) => {}
    }
}

/// What reconciles every replica: a node change the diagnosis reads ([`crate::nodes`]), the
/// refusal to write the condition lifted (the conditions held back are written: the schema's
/// recheck, started here, tells it), and the settings changed (the policy's, followed: every
/// diagnosis reads them), each noted as arrived on every replica.
fn every_replica_changes(client: &Client, context: &Arc<Context>) -> impl Stream<Item = ()> + use<> {
    let (lifted, lifts) = futures::channel::mpsc::unbounded();
    tokio::spawn(recheck_schema(client.clone(), context.clone(), lifted));
    let settings = context.caches.settings.clone();
    let settings_changes = futures::stream::unfold(settings, |mut settings| async {
        settings.changed().await.ok().map(|()| ((), settings))
    });
    let node_changes = nodes::changes(client.clone(), context.caches.nodes.clone());
    let context = context.clone();
    let changes = futures::stream::select(node_changes, futures::stream::select(lifts, settings_changes));
    changes.inspect(move |()| {
        let replicas = context.caches.replicas.state();
        context.arrived(replicas.iter().map(|replica| ObjectRef::from_obj(&**replica)).collect());
    })
}

/// Runs the reconciles until the stop: the reconciles in flight end first, then the Lease is
/// released.
async fn run_controller(controller: Controller<InferenceReplica>, context: Arc<Context>, stop: CancellationToken) {
    // The backoff on the triggers merged, on an error of any one: none (always a zero delay), each
    // watch backs off by itself ([`reflected::backoff`]). kube-runtime's default pauses every
    // watch, the replicas' too, on any one's error: after kube-apiserver restarted, the errors of
    // six watches in turn held them all back for minutes.
    let each_watch_backs_off = backon::ExponentialBuilder::new().with_min_delay(Duration::ZERO);
    controller
        .trigger_backoff(ExponentialBackoff::from(each_watch_backs_off.without_max_times()))
        .graceful_shutdown_on(stop.cancelled_owned())
        // At most 16 reconciles at once: each holds its component's pods and the nodes it read,
        // and at a start a thousand at once would set the peak memory (BENCHMARKS.md).
        .with_config(controller::Config::default().concurrency(16))
        .run(reconcile, error_policy, context)
        .for_each(|result| async move {
            match result {
                // A service's decoder (or engine) that OME has not made, or a replica just
                // deleted: the watches name it, there is nothing to reconcile.
                Err(controller::Error::ObjectNotFound(object)) => debug!(%object, "no such replica"),
                Err(e) => error!(error = %e, "controller"),
                Ok(_) => {}
            }
        })
        .await;
}

/// Why the `Spread` condition must not be written here, or None: read before the first
/// reconcile (asked again every few seconds until the API server answers: nothing is written
/// meanwhile).
async fn condition_refused(client: &Client) -> Option<String> {
    loop {
        match within_timeout("the InferenceReplica schema", resources::served(client)).await {
            Ok(document) => return resources::condition_merges(&document).err(),
            Err(e) => {
                warn!(error = %e, "reading the served InferenceReplica schema ({}); asking again", resources::OPENAPI_PATH);
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        }
    }
}

/// Keeps the refusal current, saying each change once, and sends on `lifted` when it lifts: the
/// CRD can be replaced under a running controller (OME's full CRDs installed, or a minimal one
/// applied), and the API server publishes a CRD's schema a moment after the CRD itself. Asked
/// again every 15 s while refused, every 5 minutes while not.
async fn recheck_schema(client: Client, context: Arc<Context>, lifted: futures::channel::mpsc::UnboundedSender<()>) {
    let mut refused = lock(&context.no_condition).clone();
    loop {
        match &refused {
            Some(why) => error!("writing no Spread condition: {why}"),
            None => debug!("the served InferenceReplica schema keeps OME's status beside the Spread condition"),
        }
        let mut now = refused.clone();
        while now == refused {
            let wait = if refused.is_some() { 15 } else { 300 };
            tokio::time::sleep(Duration::from_secs(wait)).await;
            now = condition_refused(&client).await;
        }
        *lock(&context.no_condition) = now.clone();
        if now.is_none() {
            info!("the served InferenceReplica schema now keeps OME's status: writing the Spread condition");
            let _ = lifted.unbounded_send(());
        }
        refused = now;
    }
}

/// Ready once the caches the diagnosis reads are filled, which it tells the reconciles
/// (`context.caches.filled`): the one task that waits on the caches themselves, since
/// kube-runtime's `Store::wait_until_ready` wakes only the task that polled it last (the first
/// reconciles, waiting beside it, each waited until their 30 s ran out). Asked to stop first, it
/// tells them so: the watches that fill the caches end with the controller's queue.
async fn ready_when_filled(context: Arc<Context>, stop: CancellationToken) {
    loop {
        tokio::select! {
            filled = tokio::time::timeout(FILL_TIMEOUT, context.caches.all_filled()) => match filled {
                Ok(Ok(())) => {
                    info!("caches filled");
                    context.caches.filled.send_replace(Fill::Filled);
                    context.health.set_ready(true);
                    return;
                }
                Ok(Err(e)) => warn!(error = %e, "not ready"),
                Err(_) => warn!(error = %context.caches.unfilled(), "not ready"),
            },
            () = stop.cancelled() => {
                context.caches.filled.send_replace(Fill::Stopping);
                return;
            }
        }
    }
}

/// The replicas' own watch's events, as the controller's triggers: what is kept of a deleted
/// replica goes with it, and a change of all but the `Spread` condition reconciles it (its
/// arrival noted).
fn replica_changes(
    events: impl Stream<Item = Events<InferenceReplica>>,
    context: Arc<Context>,
) -> impl Stream<Item = Result<InferenceReplica, watcher::Error>> {
    let forgetting = context.clone();
    events
        .inspect_ok(move |event| match event {
            watcher::Event::Delete(replica) => forgetting.forget(&ObjectRef::from_obj(replica)),
            // Those deleted while the watch was down: the relist no longer lists them.
            watcher::Event::InitDone => {
                for replica in forgetting.replicas.replicas() {
                    if forgetting.caches.replicas.get(&replica).is_none() {
                        forgetting.forget(&replica);
                    }
                }
            }
            _ => {}
        })
        .touched_objects()
        .predicate_filter(all_but_the_condition, PredicateConfig::default())
        // Its own event: noted even while it is listed, before the store holds it.
        .inspect_ok(move |replica| (context.replicas).arrived(&ObjectRef::from_obj(replica), Instant::now()))
}

/// A replica as a trigger reads it: all but its resourceVersion and the `Spread` condition, so
/// that the condition a reconcile writes does not reconcile the replica again (kube-runtime's
/// predicate filter drops an event whose value is the one seen last).
fn all_but_the_condition(replica: &InferenceReplica) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    let meta = &replica.metadata;
    (&meta.uid, meta.generation, &meta.labels, &meta.annotations).hash(&mut hasher);
    serde_json::to_string(&replica.spec).ok()?.hash(&mut hasher);
    if let Some(status) = &replica.status {
        let others = status.conditions.iter().filter(|c| c.type_ != CONDITION);
        for c in others {
            (&c.type_, &c.status, &c.reason, &c.message, c.observed_generation).hash(&mut hasher);
        }
        serde_json::to_string(&status.migrations).ok()?.hash(&mut hasher);
    }
    Some(hasher.finish())
}

/// The replicas of an InferenceService: one per component.
fn replicas_of_service(service: &InferenceService) -> Vec<ObjectRef<InferenceReplica>> {
    let (namespace, name) = (service.namespace().unwrap_or_default(), service.name_any());
    Vec::from(COMPONENTS.map(|component| pods::replica_of_component(&namespace, &name, component)))
}

/// The replicas of every InferenceService that uses the runtime (a namespaced one only in its
/// own namespace).
fn replicas_using(
    services: &Store<InferenceService>,
    runtime: RuntimeRef,
    namespace: Option<String>,
) -> Vec<ObjectRef<InferenceReplica>> {
    let namespaced = matches!(runtime, RuntimeRef::Namespaced(_));
    let using = services.state_filter(|s| s.runtime() == Some(runtime) && (!namespaced || s.namespace() == namespace));
    using.iter().flat_map(|s| replicas_of_service(s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::{reflector, watcher};
    use serde_json::json;

    #[test]
    fn the_spread_condition_written_alone_triggers_nothing_else_does() {
        let replica = |generation: i64, conditions: serde_json::Value, migrations: serde_json::Value| {
            let replica: InferenceReplica = serde_json::from_value(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                "metadata": {"name": "m-engine", "namespace": "ns", "uid": "u1", "generation": generation, "resourceVersion": "7"},
                "spec": {"parentRef": {"name": "m"}, "component": "engine", "replicas": 2},
                "status": {"conditions": conditions, "migrations": migrations}}))
            .expect("a replica");
            all_but_the_condition(&replica)
        };
        let condition = |type_: &str, reason: &str| json!({"type": type_, "status": "True", "reason": reason, "message": "", "lastTransitionTime": "2026-12-01T10:00:00Z"});
        let ready = condition("Ready", "Available");
        let before = replica(3, json!([ready]), json!(null));
        // Ours, written or changed: the same value, so the filter drops the event.
        assert_eq!(
            replica(3, json!([ready, condition("Spread", "Satisfied")]), json!(null)),
            before
        );
        assert_eq!(
            replica(3, json!([ready, condition("Spread", "Skewed")]), json!(null)),
            before
        );
        // OME's condition, its migrations, a new generation: each reconciles.
        assert_ne!(
            replica(3, json!([condition("Ready", "Progressing")]), json!(null)),
            before
        );
        assert_ne!(
            replica(3, json!([ready]), json!([{"id": "m1", "phase": "Running"}])),
            before
        );
        assert_ne!(replica(4, json!([ready]), json!(null)), before);
    }

    #[test]
    fn a_service_maps_to_its_engine_and_decoder_and_a_runtime_to_the_services_using_it() {
        let service = |name: &str, ns: &str, runtime: serde_json::Value| -> InferenceService {
            serde_json::from_value(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
                "metadata": {"name": name, "namespace": ns}, "spec": {"runtime": runtime}}))
            .expect("a service")
        };
        let (store, mut writer) = reflector::store();
        for s in [
            service("a", "ns1", json!({"name": "srt"})),
            service("b", "ns2", json!({"name": "srt", "kind": "ClusterServingRuntime"})),
            service("c", "ns1", json!({"name": "srt", "kind": "ServingRuntime"})),
            service("d", "ns2", json!({"name": "srt", "kind": "ServingRuntime"})),
            service("e", "ns1", json!({"name": "other"})),
        ] {
            writer.apply_watcher_event(&watcher::Event::Apply(s));
        }
        let names = |refs: Vec<ObjectRef<InferenceReplica>>| {
            let mut names: Vec<String> = refs
                .iter()
                .map(|r| format!("{}/{}", r.namespace.clone().unwrap_or_default(), r.name))
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            names(replicas_of_service(&service("a", "ns1", json!(null)))),
            ["ns1/a-decoder", "ns1/a-engine"]
        );
        assert_eq!(
            names(replicas_using(&store, RuntimeRef::Cluster("srt"), None)),
            ["ns1/a-decoder", "ns1/a-engine", "ns2/b-decoder", "ns2/b-engine"]
        );
        assert_eq!(
            names(replicas_using(
                &store,
                RuntimeRef::Namespaced("srt"),
                Some("ns1".into())
            )),
            ["ns1/c-decoder", "ns1/c-engine"]
        );
    }
}
