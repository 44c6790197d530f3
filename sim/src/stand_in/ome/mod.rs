//! Why not OME itself: its manager is not built here (cluster/ pins no module of it), and it
//! serves its webhooks through a Service with a cert-manager certificate (its chart's
//! `inferenceservice.ome.io` webhook configurations), which cluster/up.sh's control plane, with no
//! cluster network, cannot reach. Only OME's CRDs (cluster/ome-crds.yaml) and what its controllers
//! write are reproduced; no suite here runs OME (not run here).
//!
//! The OME stand-in, test-only: what OME v1.3's controllers do for an OMENative InferenceService,
//! against a real API server, so that the seed's how-to runs without OME. Each pass reads the
//! cluster afresh (restartable, nothing kept between passes but what it has said) and:
//!
//! - writes each component's InferenceReplica ([`render::replica`]: the settings in effect,
//!   owner, runners), and updates its spec when the InferenceService changes, leaving running
//!   pods where they are (the seed: "Running Instances stay where they are");
//! - creates the pods of each missing Instance through the API server, so that admission (the
//!   ome-spread policy behind its webhook) applies, with or without OME's in-tree terms
//!   ([`Terms`]); the real kube-scheduler places them and kwok runs them;
//! - writes the replica's status and the InferenceService's `Ready` condition as field manager
//!   [`MANAGER`], beside the ome-spread controller's `Spread` condition;
//! - moves each migration request one phase, by [`crate::stand_in::migration`]'s own logic, its surge admitted by
//!   the API server and placed by kube-scheduler ([`cluster::Cluster`]).
//!
//! Simpler than OME, on purpose (besides [`render`]'s): no scale-down or rollout, so a new
//! Instance is always on slot 0 (an Instance OME moved to its second slot is counted as any
//! other); a repair only of an Instance whose pods are all gone, created again at the lowest free
//! index with incarnation 1 (upstream keeps its index and counts its incarnation up, and repairs
//! a missing worker too); a component taken off the InferenceService keeps its replica; the status is
//! written whole by a merge patch guarded by the resourceVersion read, rather than through OME's
//! status writer.

pub mod cluster;
pub mod render;

use std::collections::HashSet;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::Client;
use ome_spread_core::explain::Objects;
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::pod::Pod;
use serde_json::{Value, json};

use crate::stand_in::migration::Ome;
use crate::support::api::{
    self, ApiError, CLUSTER_SERVING_RUNTIME, INFERENCE_REPLICA, INFERENCE_SERVICE, Kind, NODE, POD, SERVING_RUNTIME,
};
pub use render::Terms;

/// The field manager of everything the OME stand-in writes.
pub const MANAGER: &str = "ome-stand-in";
const WHO: &str = "OME stand-in";

/// How the OME stand-in runs.
#[derive(Debug, Clone)]
pub struct Options {
    pub terms: Terms,
    /// The time between passes.
    pub interval: Duration,
    /// How long a migration record may stay under way (upstream's `deadline`).
    pub deadline: SignedDuration,
    /// Stop when the API server has not answered for this long: its cluster is gone, and a
    /// stand-in a test left behind does not run on for ever.
    pub give_up: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            terms: Terms::InTree,
            interval: Duration::from_secs(1),
            deadline: SignedDuration::from_mins(10),
            give_up: Some(Duration::from_secs(300)),
        }
    }
}

/// Runs the OME stand-in: one pass every `interval`, each failure logged and tried again on the
/// next pass.
pub async fn run(client: Client, options: Options) {
    let mut stand_in = StandIn {
        client,
        options: options.clone(),
        said: HashSet::new(),
    };
    // Said when it changes: an API server away for a while is one line, and one when it is back.
    let mut failing: Option<(String, tokio::time::Instant)> = None;
    let terms = match options.terms {
        Terms::InTree => "on",
        Terms::Webhook => "off (the webhook adds them)",
    };
    api::log(WHO, format!("running, OME's in-tree terms {terms}"));
    loop {
        match (stand_in.pass().await, &failing) {
            (Err(e), Some((said, _))) if *said == e.to_string() => {}
            (Err(e), _) => {
                api::log(WHO, format!("reading the cluster failed: {e}"));
                let since = failing.map_or_else(tokio::time::Instant::now, |(_, since)| since);
                failing = Some((e.to_string(), since));
            }
            (Ok(()), Some(_)) => {
                api::log(WHO, "reading the cluster again");
                failing = None;
            }
            (Ok(()), None) => {}
        }
        if let (Some((_, since)), Some(give_up)) = (&failing, options.give_up)
            && since.elapsed() >= give_up
        {
            let seconds = give_up.as_secs();
            api::log(
                WHO,
                format!("the API server has not answered for {seconds} s: stopping"),
            );
            break;
        }
        tokio::time::sleep(options.interval).await;
    }
    api::log(WHO, "stopped");
}

struct StandIn {
    client: Client,
    options: Options,
    /// What was logged as a standing condition (a bad field, a missing runtime), so that it is
    /// said once, not every pass.
    said: HashSet<String>,
}

impl StandIn {
    fn say_once(&mut self, line: String) {
        if self.said.insert(line.clone()) {
            api::log(WHO, line);
        }
    }

    async fn pass(&mut self) -> Result<(), ApiError> {
        let now = api::now();
        let mut objects = Vec::new();
        let kinds = [
            INFERENCE_SERVICE,
            INFERENCE_REPLICA,
            CLUSTER_SERVING_RUNTIME,
            SERVING_RUNTIME,
            POD,
            NODE,
        ];
        for kind in kinds {
            objects.extend(api::list(&self.client, kind).await?);
        }
        let seen = match Objects::new(objects.clone()) {
            Ok(seen) => seen,
            Err(e) => {
                // Never served (the API server refuses such a quantity); said once, should one come.
                self.say_once(format!("cannot read the cluster: {e}"));
                return Ok(());
            }
        };
        let services = objects
            .iter()
            .filter(|o| o["kind"] == INFERENCE_SERVICE.kind)
            .filter(|s| s["spec"]["deploymentMode"] == "OMENative" && s["metadata"]["deletionTimestamp"].is_null());
        for service in services {
            self.reconcile(service, &seen, &objects, now).await;
        }
        let (deadline, terms) = (self.options.deadline, self.options.terms);
        // OME's migration caps (`lifecycle.audit`) configured, as its chart sets them.
        let ome = Ome {
            settings: json!({}),
            deadline,
            caps: true,
        };
        let (changes, events) = ome.step_in(&cluster::Cluster { terms }, &objects, now);
        cluster::apply(&self.client, changes).await;
        for event in events {
            cluster::record_event(&self.client, &event, &objects).await;
        }
        Ok(())
    }

    /// One InferenceService: its replicas, their Instances' pods, their statuses, its `Ready`.
    async fn reconcile(&mut self, service: &Value, seen: &Objects, objects: &[Value], now: Timestamp) {
        let now = now.to_string();
        let mut replicas = Vec::new();
        for component in COMPONENTS.into_iter().filter(|c| service["spec"][c].is_object()) {
            if let Some(replica) = self.reconcile_component(service, component, seen, objects, &now).await {
                replicas.push(replica);
            }
        }
        self.write_service_status(service, &replicas, &now).await;
    }

    /// A component's replica as OME projects it, its Instances' pods and its status; the replica
    /// with that status, once the API server has given it a uid (its pods' owner reference).
    async fn reconcile_component(
        &mut self,
        service: &Value,
        component: &str,
        seen: &Objects,
        objects: &[Value],
        now: &str,
    ) -> Option<Value> {
        let (namespace, name) = api::identity(service);
        let runtime = seen.service(namespace, name).and_then(|typed| seen.runtime_of(typed));
        if runtime.is_none() {
            self.say_once(format!(
                "InferenceService {namespace}/{name}: its runtime {} is not there; the replica has no runtime defaults",
                service["spec"]["runtime"]
            ));
        }
        let config = runtime.and_then(|r| {
            let (namespace, name) = (r.meta().namespace.as_deref(), r.meta().name.as_deref());
            raw(objects, r.kind(), namespace, name.unwrap_or_default())
        });
        let wanted = match render::replica(service, config, component) {
            Ok(wanted) => wanted,
            Err(e) => {
                self.say_once(format!(
                    "InferenceService {namespace}/{name}: {e}; its {component} is left as it is"
                ));
                return None;
            }
        };
        let (_, replica_name) = api::identity(&wanted);
        let existing = raw(objects, INFERENCE_REPLICA.kind, Some(namespace), replica_name);
        if existing.is_none_or(|r| spec_differs(&r["spec"], &wanted["spec"])) {
            let said = match api::apply(&self.client, INFERENCE_REPLICA, &wanted, MANAGER, false).await {
                Ok(()) => format!(" written: {}", shown(&wanted["spec"])),
                Err(e) => format!(": {e}"),
            };
            api::log(WHO, format!("InferenceReplica {namespace}/{replica_name}{said}"));
        }
        let mut replica = existing?.clone();
        replica["spec"] = wanted["spec"].clone();
        let pods = seen.pods_of(namespace, name, component);
        self.create_missing_instances(&replica, &pods).await;
        let status = render::replica_status(&replica, &pods, now);
        if status_differs(&replica["status"], &status) {
            let patch =
                json!({"metadata": {"resourceVersion": replica["metadata"]["resourceVersion"]}, "status": status});
            let said = format!(
                "InferenceReplica {namespace}/{replica_name} status: {} of {} Instances Ready",
                status["readyReplicas"], replica["spec"]["replicas"]
            );
            self.write_status(INFERENCE_REPLICA, (namespace, replica_name), &patch, said)
                .await;
        }
        replica["status"] = status;
        Some(replica)
    }

    /// The InferenceService's conditions from its replicas', written where they changed.
    async fn write_service_status(&self, service: &Value, replicas: &[Value], now: &str) {
        let (namespace, name) = api::identity(service);
        let conditions = render::service_conditions(service, &replicas.iter().collect::<Vec<_>>(), now);
        if same_conditions(&service["status"]["conditions"], &conditions) {
            return;
        }
        let patch = json!({"metadata": {"resourceVersion": service["metadata"]["resourceVersion"]},
            "status": {"conditions": conditions, "observedGeneration": service["metadata"]["generation"]}});
        let ready = conditions
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Ready"));
        let ready = ready.and_then(|c| c["status"].as_str()).unwrap_or_default();
        let said = format!("InferenceService {namespace}/{name} Ready: {ready}");
        self.write_status(INFERENCE_SERVICE, (namespace, name), &patch, said)
            .await;
    }

    /// `patch` merged into the status of the `kind` named, logged as `said`, or why not.
    async fn write_status(&self, kind: Kind, (namespace, name): (&str, &str), patch: &Value, said: String) {
        match api::merge(&self.client, kind, (namespace, name), patch, MANAGER, true).await {
            Ok(()) => api::log(WHO, said),
            Err(e) => api::log(WHO, format!("{} {namespace}/{name} status: {e}", kind.kind)),
        }
    }

    /// Creates the pods of each Instance the replica lacks, at the lowest free indexes, the
    /// leader first (its workers' affinity names it).
    async fn create_missing_instances(&mut self, replica: &Value, pods: &[&Pod]) {
        let instances = render::instances(pods);
        let wanted = usize::try_from(replica["spec"]["replicas"].as_u64().unwrap_or(1)).unwrap_or(1);
        let missing = wanted.saturating_sub(instances.len());
        let free = (0u64..).filter(|i| !instances.contains_key(i)).take(missing);
        for index in free.collect::<Vec<_>>() {
            for pod in render::instance_pods(replica, render::Instance::new(index), self.options.terms) {
                let (namespace, name) = api::identity(&pod);
                match api::create(&self.client, POD, &pod).await {
                    Ok(()) => api::log(WHO, format!("pod {namespace}/{name} created (Instance {index})")),
                    // The API server's word, the webhook's refusal included; tried again next
                    // pass, and said again only if it changes.
                    Err(e) => self.say_once(format!("pod {namespace}/{name} not created: {e}")),
                }
            }
        }
    }
}

/// The object of `kind` named so, as the API server gave it (the stand-in reads fields of OME's
/// that the core's model leaves out).
fn raw<'a>(objects: &'a [Value], kind: &str, namespace: Option<&str>, name: &str) -> Option<&'a Value> {
    objects.iter().find(|o| {
        let metadata = &o["metadata"];
        o["kind"] == kind && metadata["name"] == name && metadata["namespace"].as_str() == namespace
    })
}

/// Whether the replica's spec lacks what the stand-in wants in it, or keeps a spread field the
/// settings in effect no longer set (a lifecycle dropped from the InferenceService stays until
/// the next write: another writer's, such as a test's, is not fought every pass).
pub fn spec_differs(spec: &Value, wanted: &Value) -> bool {
    let wanted_fields = wanted.as_object().into_iter().flatten();
    wanted_fields.clone().any(|(k, v)| &spec[k] != v)
        || SPREAD_FIELDS.iter().any(|k| wanted[k].is_null() && !spec[k].is_null())
}

/// Whether the status the stand-in wants differs from the one stored, in what it writes.
pub fn status_differs(stored: &Value, wanted: &Value) -> bool {
    let fields = wanted.as_object().into_iter().flatten();
    fields.filter(|(k, _)| *k != "conditions").any(|(k, v)| &stored[k] != v)
        || !same_conditions(&stored["conditions"], &wanted["conditions"])
}

fn same_conditions(stored: &Value, wanted: &Value) -> bool {
    let key = |c: &Value| ["type", "status", "reason", "message"].map(|field| c[field].clone());
    let keys = |cs: &Value| cs.as_array().map(|cs| cs.iter().map(key).collect::<Vec<_>>());
    keys(stored).unwrap_or_default() == keys(wanted).unwrap_or_default()
}

/// The replica's fields of the settings in effect.
const SPREAD_FIELDS: [&str; 3] = ["topologySpread", "topologySpreadKey", "topologyKey"];

/// A replica's spec in a line: its Instances, its runners and the settings in effect.
fn shown(spec: &Value) -> String {
    let runners = spec["runners"].as_array().into_iter().flatten();
    let runners: Vec<String> = runners
        .map(|r| format!("{} x{}", r["name"].as_str().unwrap_or_default(), r["size"]))
        .collect();
    let fields = SPREAD_FIELDS.map(|k| format!("{k} {}", spec[k].as_str().unwrap_or("<none>")));
    let (runners, fields) = (runners.join(", "), fields.join(", "));
    format!("{} Instances ({runners}), {fields}", spec["replicas"])
}
