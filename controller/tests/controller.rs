//! `ome-spread controller` as it runs, against the in-memory API server (`ome_spread_sim::stand_in::memory`,
//! behind tower-test's mock service): it takes the Lease, fills its caches,
//! sets the `Spread` condition, and follows what changes it — a pod that moves, a node that loses
//! its domain label and then goes, a runtime that changes the settings in effect — each through
//! its own watch —
//! and drops the metrics of a replica that is deleted.
//!
//! Each test runs on tokio's paused time: the clock moves only when the controller and the API
//! server have nothing left to do, so "nothing happened within 2 s" is exact, not a race.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ome_spread_controller::context::Mode;
use ome_spread_controller::controller::{self, Options};
use ome_spread_controller::policy::{DEFAULT_NAME, Source};
use ome_spread_controller::report::{Format, Reports};
use ome_spread_core::diagnosis::Reason;
use ome_spread_core::settings::Settings;
use ome_spread_sim::stand_in::memory::ApiServer;
use ome_spread_sim::stand_in::migration::{Cluster, Ome, apply};
use ome_spread_sim::support::objects::Node;
use ome_spread_sim::support::wait::{eventually, until};
use serde_json::{Value, json};
use tokio::time::{Duration, Instant, sleep};

mod harness;
use harness::fixture;

/// Waits up to a minute until the controller has applied `count` conditions, and returns the last.
async fn condition_number(server: &ApiServer, count: usize) -> (String, String) {
    eventually(&format!("condition number {count}"), 60, || async {
        let applied = server.spread_conditions();
        (applied.len() >= count).then(|| {
            assert_eq!(applied.len(), count, "one write per change: {applied:?}");
            applied[count - 1].clone()
        })
    })
    .await
}

/// The controller's options in these tests: the default settings, rebalance in `mode`.
fn options(rebalance: Mode) -> Options {
    Options {
        settings: Source::Fixed(Settings::default()),
        lease_namespace: "ome-spread".into(),
        identity: "ome-spread-controller-0".into(),
        health: Arc::default(),
        metrics: Arc::default(),
        rebalance,
        max_per_hour: 10,
        reports: Reports::new(Format::Off, DEFAULT_NAME, Arc::default()),
    }
}

/// The controller with `options` against the in-memory API server.
fn running(server: &Arc<ApiServer>, options: Options) -> tokio::task::JoinHandle<Result<(), String>> {
    tokio::spawn(controller::run(server.client(), options))
}

/// The value of the sample `name` (with no labels) in /metrics.
fn sample(metrics: &ome_spread_controller::metrics::Metrics, name: &str) -> f64 {
    let text = metrics.encode();
    let value = text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' '));
    value
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in\n{text}"))
}

/// The first writes: the Event, then the condition.
fn assert_event_before_condition(server: &ApiServer) {
    let writes = server.writes.lock().unwrap().clone();
    let event = writes
        .iter()
        .position(|w| w.method == "POST" && w.path.ends_with("/events"))
        .expect("an Event");
    let patch = writes
        .iter()
        .position(|w| w.method == "PATCH" && w.path.ends_with("/status"))
        .expect("a patch");
    assert!(event < patch, "the Event goes out before the condition");
}

#[tokio::test(start_paused = true)]
async fn the_controller_leads_then_follows_pods_nodes_and_runtimes() {
    let server = ApiServer::holding(fixture(Reason::Satisfied));
    let metrics = Arc::new(ome_spread_controller::metrics::Metrics::default());
    let controller = running(
        &server,
        Options {
            metrics: metrics.clone(),
            reports: Reports::new(Format::OpenReports, "ome-spread", Arc::default()),
            ..options(Mode::Recommend)
        },
    );

    let (reason, message) = condition_number(&server, 1).await;
    assert_eq!(reason, "Satisfied", "{message}");
    let lease = server.get("Lease", Some("ome-spread"), "ome-spread-controller");
    assert_eq!(lease["spec"]["holderIdentity"], "ome-spread-controller-0");
    assert_event_before_condition(&server);

    // A pod moves to the other zone's node: its watch reconciles the replica.
    server.edit("Pod", Some("spread-demo"), "qwen3-0-6b-engine-1-default-0", |pod| {
        pod["spec"]["nodeName"] = json!("gpu-node-1");
    });
    let (reason, message) = condition_number(&server, 2).await;
    assert_eq!(reason, "Skewed", "{message}");

    // A selected node loses its zone label: the node watch reconciles every replica.
    server.edit("Node", None, "gpu-node-2", |node| {
        node["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("topology.kubernetes.io/zone");
    });
    let (reason, message) = condition_number(&server, 3).await;
    assert_eq!(reason, "MissingLabel", "{message}");
    assert!(message.contains("gpu-node-2"), "{message}");

    // That node is deleted: the only nodes left that the pods select are in zone-a.
    server.delete("Node", None, "gpu-node-2");
    let (reason, message) = condition_number(&server, 4).await;
    assert_eq!(reason, "SingleDomain", "{message}");

    // The runtime gains a topologyKey default: the settings in effect change under the replica.
    server.edit("ClusterServingRuntime", None, "srt-qwen3-0-6b", |runtime| {
        runtime["spec"]["engineConfig"]["topologyKey"] = json!("nvidia.com/gpu.clique");
    });
    let (reason, message) = condition_number(&server, 5).await;
    assert_eq!(reason, "SettingsNotProjected", "{message}");

    let replica = server.get("InferenceReplica", Some("spread-demo"), "qwen3-0-6b-engine");
    assert_eq!(replica["status"]["conditions"][0]["reason"], "SettingsNotProjected");
    // The report followed each change, once each.
    let reasons = [
        "Satisfied",
        "Skewed",
        "MissingLabel",
        "SingleDomain",
        "SettingsNotProjected",
    ];
    until("a report for each change", 60, || {
        server.report_reasons().len() >= reasons.len()
    })
    .await;
    assert_eq!(server.report_reasons(), reasons);
    assert!(metrics.encode().contains(
        r#"ome_spread_reason{namespace="spread-demo",replica="qwen3-0-6b-engine",reason="SettingsNotProjected"} 1"#
    ));
    // Each condition timed from the watch event that led to it: the replica's first listing, the
    // pod's, the node's two and the runtime's.
    assert_eq!(sample(&metrics, "ome_spread_event_to_condition_seconds_count"), 5.0);
    // A change of the InferenceService that changes no condition: reconciled, not timed.
    let reconciles = sample(&metrics, "ome_spread_reconciles_total");
    server.edit("InferenceService", Some("spread-demo"), "qwen3-0-6b", |service| {
        service["metadata"]["labels"]["team"] = json!("serving");
    });
    until("the InferenceService's change reconciled", 60, || {
        sample(&metrics, "ome_spread_reconciles_total") > reconciles
    })
    .await;
    assert_eq!(sample(&metrics, "ome_spread_event_to_condition_seconds_count"), 5.0);

    // The replica goes: so do its series.
    server.delete("InferenceReplica", Some("spread-demo"), "qwen3-0-6b-engine");
    until("the replica's series dropped", 60, || {
        !metrics.encode().contains("qwen3-0-6b-engine")
    })
    .await;
    controller.abort();
}

/// A second replica of the controller stands by while another holds a live Lease: it starts no
/// watch and writes nothing.
#[tokio::test(start_paused = true)]
async fn a_replica_stands_by_while_another_holds_the_lease() {
    let server = ApiServer::holding(fixture(Reason::Satisfied));
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    server.put(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "ome-spread-controller", "namespace": "ome-spread"},
        "spec": {"holderIdentity": "ome-spread-controller-1", "leaseDurationSeconds": 3600,
            "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}));
    let health = Arc::new(ome_spread_controller::serve::Health::default());
    let controller = running(
        &server,
        Options {
            health: health.clone(),
            ..options(Mode::Recommend)
        },
    );
    sleep(Duration::from_secs(2)).await;
    let paths = server.paths.lock().unwrap().clone();
    assert!(
        !paths.is_empty() && paths.iter().all(|p| p.contains("/leases")),
        "only the Lease is read: {paths:?}"
    );
    assert!(server.writes.lock().unwrap().is_empty(), "nothing written");
    assert_eq!(health.ready(), Ok(()), "a replica standing by is ready");
    assert_eq!(health.live(), Ok(()), "and live");
    let lease = server.get("Lease", Some("ome-spread"), "ome-spread-controller");
    assert_eq!(lease["spec"]["holderIdentity"], "ome-spread-controller-1");
    controller.abort();
}

/// Kubewarden's ClusterAdmissionPolicy `ome-spread` with `settings` as its spec.settings.
fn policy(settings: Value) -> Value {
    json!({"apiVersion": "policies.kubewarden.io/v1", "kind": "ClusterAdmissionPolicy",
        "metadata": {"name": "ome-spread"},
        "spec": {"module": "registry://ghcr.io/ome-spread/policies/ome-spread:v0.1.0", "settings": settings}})
}

/// With `--policy`, the controller stands for the Lease once the ClusterAdmissionPolicy is read
/// (until then it is not ready, saying why), diagnoses with its settings, follows a change of them
/// without a restart, and keeps the last good settings when a change does not parse.
#[tokio::test(start_paused = true)]
async fn the_settings_are_the_policys_and_follow_its_changes() {
    let server = ApiServer::holding(fixture(Reason::Satisfied));
    let health = Arc::new(ome_spread_controller::serve::Health::default());
    let metrics = Arc::new(ome_spread_controller::metrics::Metrics::default());
    let controller = running(
        &server,
        Options {
            settings: Source::Policy("ome-spread".into()),
            health: health.clone(),
            metrics: metrics.clone(),
            ..options(Mode::Recommend)
        },
    );
    until("the policy's absence said", 60, || {
        health.ready() == Err("no ClusterAdmissionPolicy ome-spread in the cluster".into())
    })
    .await;
    sleep(Duration::from_secs(1)).await;
    assert!(
        server.writes.lock().unwrap().is_empty(),
        "no Lease taken, nothing written"
    );
    assert!(metrics.encode().contains("\nome_spread_leader 0\n"));

    // The policy as policy.yaml ships it: Satisfied.
    server.put(policy(json!({"onMissingReplica": "Reject"})));
    let (reason, message) = condition_number(&server, 1).await;
    assert_eq!(reason, "Satisfied", "{message}");
    assert_eq!(health.ready(), Ok(()));
    assert!(metrics.encode().contains("\nome_spread_leader 1\n"));

    // nodeTaintsPolicy Honor: the pods carry OME's constraint without it, which the policy would
    // no longer give them.
    server.edit("ClusterAdmissionPolicy", None, "ome-spread", |policy| {
        policy["spec"]["settings"] = json!({"nodeTaintsPolicy": "Honor"});
    });
    let (reason, message) = condition_number(&server, 2).await;
    assert_eq!(reason, "PodsPredateChange", "{message}");

    // Settings that do not parse: the last good ones stay (the defaults would write Satisfied).
    server.edit("ClusterAdmissionPolicy", None, "ome-spread", |policy| {
        policy["spec"]["settings"] = json!({"maxSkew": 0});
    });
    sleep(Duration::from_secs(2)).await;
    assert_eq!(server.spread_conditions().len(), 2, "{:?}", server.spread_conditions());
    // The policy deleted: the same.
    server.delete("ClusterAdmissionPolicy", None, "ome-spread");
    sleep(Duration::from_secs(2)).await;
    assert_eq!(server.spread_conditions().len(), 2, "{:?}", server.spread_conditions());

    // Back to OME's terms: Satisfied again, with no restart.
    server.put(policy(Value::Null));
    let (reason, message) = condition_number(&server, 3).await;
    assert_eq!(reason, "Satisfied", "{message}");
    assert_eq!(health.live(), Ok(()));
    controller.abort();
}

/// `migrate` and its hourly limit are flags the controller starts with: it goes on to connect
/// (and, here, fails there: there is no cluster).
#[test]
fn rebalance_migrate_starts_and_connects() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ome-spread"))
        .args([
            "controller",
            "--rebalance",
            "migrate",
            "--rebalance-max-per-hour",
            "3",
            "--identity",
            "test",
            "--listen",
            "127.0.0.1:0",
        ])
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("run ome-spread");
    let printed = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{printed}");
    assert!(printed.contains("connecting to the cluster"), "{printed}");
    assert!(!printed.contains("not yet supported"), "{printed}");
}

/// The settings come from one place: --policy and --settings together are refused, naming both.
#[test]
fn policy_and_settings_together_are_refused() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ome-spread"))
        .args([
            "controller",
            "--policy",
            "ome-spread",
            "--settings",
            "policy.yaml",
            "--identity",
            "test",
        ])
        .env("KUBECONFIG", "/nonexistent")
        .output()
        .expect("run ome-spread");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(
        stderr.lines().next(),
        Some("error: the argument '--policy <POLICY>' cannot be used with '--settings <SETTINGS>'")
    );
}

/// The Skewed fixture (zone-a: 3 Instances, zone-b: 0) with every pod Ready, gpu-node-2 room for
/// two, and a zone-c node with room for two: 3,0,0 takes two moves. While a surge runs, the
/// emptiest zone could still take another move (zone-a counts its source until it drains),
/// which only the record under way holds back.
fn skewed_and_ready() -> Vec<Value> {
    let mut objects = fixture(Reason::Skewed);
    let room_for_two = json!({"nvidia.com/gpu": "2", "cpu": "20", "memory": "60Gi", "pods": "110"});
    for object in &mut objects {
        if object["kind"] == "Pod" {
            object["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]);
        }
        if object["metadata"]["name"] == "gpu-node-2" {
            object["status"]["allocatable"] = room_for_two.clone();
        }
    }
    let zone_c = Node::named("gpu-node-4")
        .label("topology.kubernetes.io/zone", "zone-c")
        .label("models.ome.io/clusterbasemodel.qwen3-0-6b", "Ready")
        .allocatable(room_for_two);
    objects.push(zone_c.json());
    objects
}

/// The migration requests written so far: (annotation key, value).
fn requests(server: &ApiServer) -> Vec<(String, Value)> {
    let writes = server.writes.lock().unwrap();
    writes
        .iter()
        .filter(|w| w.method == "PATCH" && w.path.contains("/inferenceservices/"))
        .flat_map(|w| {
            w.body["metadata"]["annotations"]
                .as_object()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|(key, _)| key.starts_with("ome.io/migration-request-v1-"))
        .collect()
}

/// The notes of the Events of `reason` written so far.
fn notes(server: &ApiServer, reason: &str) -> Vec<String> {
    let writes = server.writes.lock().unwrap();
    writes
        .iter()
        .filter(|w| w.method == "POST" && w.path.ends_with("/events") && w.body["reason"] == reason)
        .map(|w| w.body["note"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// The fake API server as OME writes to it: each edit on the object as stored then.
struct AsStored<'a>(&'a ApiServer);

impl Cluster for AsStored<'_> {
    fn edit(&mut self, kind: &str, namespace: &str, name: &str, edit: &mut dyn FnMut(&mut Value)) {
        let namespace = (!namespace.is_empty()).then_some(namespace);
        self.0.edit(kind, namespace, name, edit);
    }

    fn put_pod(&mut self, pod: Value) {
        self.0.put(pod);
    }

    fn delete_pod(&mut self, namespace: &str, name: &str) {
        self.0.delete("Pod", Some(namespace), name);
    }
}

/// What OME's side looked like at one of its steps.
struct Seen {
    /// Instances whose pod is placed and Ready (one pod each here).
    serving: usize,
    /// Requests pending on the InferenceServices and migrations under way.
    in_flight: usize,
}

/// One step of the fake OME (the `sim` crate's: OME's migration, the scheduler) over the API
/// server's objects, its changes written as OME writes them, beside the controller's own.
fn ome_step(server: &ApiServer, caps: bool) -> Seen {
    let objects: Vec<Value> = server.objects.lock().unwrap().values().cloned().collect();
    let ome = Ome {
        settings: json!({}),
        deadline: jiff::SignedDuration::from_mins(10),
        caps,
    };
    let (changes, _) = ome.step(&objects, jiff::Timestamp::now());
    apply(&mut AsStored(server), changes);
    let objects: Vec<Value> = server.objects.lock().unwrap().values().cloned().collect();
    let of_kind = |kind: &'static str| objects.iter().filter(move |o| o["kind"] == kind);
    let pending = of_kind("InferenceService")
        .flat_map(|s| s["metadata"]["annotations"].as_object().into_iter().flatten())
        .filter(|(key, _)| key.starts_with("ome.io/migration-request-v1-"))
        .count();
    let active = of_kind("InferenceReplica")
        .flat_map(|r| r["status"]["migrations"].as_array().into_iter().flatten())
        .filter(|m| !matches!(m["phase"].as_str(), Some("Completed" | "Failed")))
        .count();
    let serving = of_kind("Pod")
        .filter(|p| p["spec"]["nodeName"].is_string() && p["status"]["conditions"][0]["status"] == "True")
        .count();
    Seen {
        serving,
        in_flight: pending + active,
    }
}

/// `migrate` as it runs, with the fake OME of the `sim` crate: the controller writes one request;
/// it restarts while OME has not taken it and again while the migration runs, and writes no
/// second one; OME takes it into `status.migrations`, creates the surge (admitted by the policy),
/// has the scheduler place it on the hint node, Ready before the source drains; the controller
/// then requests the second move, into zone-c; 3,0,0 ends 1,1,1 in exactly two requests, never
/// two in flight, serving Instances never below 3; and nothing more is requested.
#[tokio::test(start_paused = true)]
async fn migrate_converges_through_omes_surges_across_restarts() {
    let server = ApiServer::holding(skewed_and_ready());
    let controller = running(&server, options(Mode::Migrate));
    until("a request", 60, || !requests(&server).is_empty()).await;
    let (key, value) = requests(&server).remove(0);
    let request: Value = serde_json::from_str(value.as_str().expect("a string")).expect("JSON");
    assert_eq!(
        (
            &request["instance"],
            &request["from_node"],
            &request["hint_target_nodes"]
        ),
        (&json!(2), &json!("gpu-node-1"), &json!(["gpu-node-2"]))
    );
    let uuid = key.trim_start_matches("ome.io/migration-request-v1-").to_owned();

    // A restart before OME takes the request: the new controller finds it pending (and says
    // so), and sends nothing more.
    controller.abort();
    let pending = format!("InferenceService spread-demo/qwen3-0-6b has {key} pending: one migration at a time");
    let said = |start: &str| {
        notes(&server, "RebalanceHeld")
            .iter()
            .filter(|n| n.starts_with(start))
            .count()
    };
    let before = said(&pending);
    let controller = running(&server, options(Mode::Migrate));
    until("the restarted controller holds the request back", 60, || {
        said(&pending) > before
    })
    .await;
    assert_eq!(requests(&server).len(), 1, "no duplicate after a restart");

    // OME takes it, creates the surge and has it placed and Ready; a restart while the source
    // still runs sends nothing more.
    let seen = vec![
        ome_step(&server, true),
        ome_step(&server, true),
        ome_step(&server, true),
    ];
    controller.abort();
    let active = format!("migration {uuid} of InferenceReplica spread-demo/qwen3-0-6b-engine is SurgeReady");
    let before = said(&active);
    let controller = running(&server, options(Mode::Migrate));
    until("the restarted controller waits for the record", 60, || {
        said(&active) > before
    })
    .await;
    assert_eq!(requests(&server).len(), 1, "no duplicate while the migration runs");

    converges(&server, seen).await;
    controller.abort();
}

/// OME goes on, one step every 100 ms, until the spread holds and nothing is under way: 3,0,0
/// ends 1,1,1 in exactly two requests, never two in flight, serving Instances never below 3.
async fn converges(server: &ApiServer, mut seen: Vec<Seen>) {
    let done = |server: &ApiServer| {
        let satisfied = server
            .spread_conditions()
            .last()
            .is_some_and(|(reason, _)| reason == "Satisfied");
        satisfied && requests(server).len() >= 2
    };
    for _ in 0..600 {
        seen.push(ome_step(server, true));
        if done(server) && seen.last().is_some_and(|s| s.in_flight == 0) {
            break;
        }
        sleep(Duration::from_millis(100)).await;
    }
    assert!(done(server), "{:?}", server.spread_conditions());
    sleep(Duration::from_secs(2)).await;
    assert_eq!(
        requests(server).len(),
        2,
        "two moves, two requests: {:?}",
        requests(server)
    );
    assert!(seen.iter().all(|s| s.in_flight <= 1), "one migration at a time");
    assert_eq!(seen.iter().map(|s| s.serving).min(), Some(3), "serving never drops");
    let replica = server.get("InferenceReplica", Some("spread-demo"), "qwen3-0-6b-engine");
    let records: Vec<(&Value, &Value, &Value)> = replica["status"]["migrations"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| (&r["sourceInstance"], &r["surgeInstance"], &r["phase"]))
        .collect();
    // Instance 2 leaves zone-a for zone-b as Instance 3 (OME's lowest unused index); then, the
    // highest index left in zone-a, Instance 1 leaves for zone-c as Instance 2.
    assert_eq!(
        records,
        [
            (&json!(2), &json!(3), &json!("Completed")),
            (&json!(1), &json!(2), &json!("Completed"))
        ]
    );
    let placed: BTreeMap<String, String> = server
        .objects
        .lock()
        .unwrap()
        .values()
        .filter(|o| o["kind"] == "Pod")
        .map(|p| {
            (
                p["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                p["spec"]["nodeName"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        placed,
        BTreeMap::from([
            ("qwen3-0-6b-engine-0-default-0".to_owned(), "gpu-node-1".to_owned()),
            ("qwen3-0-6b-engine-2-default-0".to_owned(), "gpu-node-4".to_owned()),
            ("qwen3-0-6b-engine-3-default-0".to_owned(), "gpu-node-2".to_owned()),
        ])
    );
}

/// Without OME's migration caps (a kustomize install): OME takes the request and holds
/// it in Accepted with its message and `MigrationPolicyUnconfigured` True; the controller says why
/// (a Warning, in OME's words, and what to set) and requests nothing more; once the caps are set,
/// OME runs the held request and the controller carries on to the same spread.
#[tokio::test(start_paused = true)]
async fn migrate_waits_while_ome_holds_it_for_caps_then_converges() {
    let server = ApiServer::holding(skewed_and_ready());
    let controller = running(&server, options(Mode::Migrate));
    until("a request", 60, || !requests(&server).is_empty()).await;
    let (key, _) = requests(&server).remove(0);
    let uuid = key.trim_start_matches("ome.io/migration-request-v1-").to_owned();
    let mut seen = vec![ome_step(&server, false), ome_step(&server, false)];
    let held = format!(
        "OME holds every migration request of InferenceReplica spread-demo/qwen3-0-6b-engine in Accepted (migration {uuid} among them): \
        waiting for migration capacity policy (no lifecycle.audit configured). \
        Set ome.controller.lifecycle.audit (maxInFlightMigrations, maxMigrationsPerWindow and window, each above zero) in OME's chart values, \
        or the same audit block under lifecycle in its inferenceservice-config ConfigMap. \
        Next: Move Instance 2 from gpu-node-1 (zone-a) to zone-b: kubectl ome migration start qwen3-0-6b --component engine --instance 2 --from-node gpu-node-1 --hint-node gpu-node-2 -n spread-demo"
    );
    until("the hold for caps said", 60, || {
        notes(&server, "RebalanceHeld").contains(&held)
    })
    .await;
    for _ in 0..20 {
        seen.push(ome_step(&server, false));
        sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(requests(&server).len(), 1, "no request while OME holds one for caps");
    assert_eq!(
        notes(&server, "RebalanceHeld").iter().filter(|n| **n == held).count(),
        1,
        "said once"
    );
    let replica = server.get("InferenceReplica", Some("spread-demo"), "qwen3-0-6b-engine");
    assert_eq!(
        (
            &replica["status"]["migrations"][0]["phase"],
            &replica["status"]["migrations"][0]["message"]
        ),
        (
            &json!("Accepted"),
            &json!("waiting for migration capacity policy (no lifecycle.audit configured)")
        )
    );
    converges(&server, seen).await;
    controller.abort();
}

/// On OME's minimal CRD an applied condition would replace OME's whole status (kube-apiserver
/// v1.35.8 does so: cluster tests): the controller writes none there, and its Events still go out;
/// once the full CRD is served, it writes it.
#[tokio::test(start_paused = true)]
async fn on_omes_minimal_crd_no_condition_is_written() {
    let server = ApiServer::holding(fixture(Reason::Satisfied));
    server.minimal_crd.store(true, Ordering::Relaxed);
    let controller = running(&server, options(Mode::Recommend));
    until("the Satisfied Event", 60, || !notes(&server, "Satisfied").is_empty()).await;
    sleep(Duration::from_secs(1)).await;
    assert_eq!(server.spread_conditions(), Vec::<(String, String)>::new());
    let replica = server.get("InferenceReplica", Some("spread-demo"), "qwen3-0-6b-engine");
    assert_eq!(replica["status"]["conditions"], Value::Null, "{replica}");

    // OME's full CRD installed: within the 15 s of a re-check, the condition held back is written.
    server.minimal_crd.store(false, Ordering::Relaxed);
    let (reason, message) = condition_number(&server, 1).await;
    assert_eq!(reason, "Satisfied", "{message}");
    assert_eq!(notes(&server, "Satisfied").len(), 1, "the Event told once");
    controller.abort();
}

/// Pods deleted while the watches of pods were down (their deletions never sent): the relist of
/// the OMENative pods that follows the watches' 410 finds them gone, and their replica is
/// reconciled at once, not at the next resync ten minutes on, nor after the list of every pod,
/// which the server here takes a minute to answer.
#[tokio::test(start_paused = true)]
async fn a_relist_reconciles_the_replica_of_pods_deleted_while_the_watch_was_down() {
    let server = ApiServer::holding(fixture(Reason::Satisfied));
    // The server's client, but once `slow`, a list of every pod is answered a minute late.
    let (slow, answering) = (Arc::new(AtomicBool::new(false)), server.clone());
    let late = slow.clone();
    let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
        let (server, late) = (answering.clone(), late.load(Ordering::Relaxed));
        async move {
            let query = request.uri().query().unwrap_or_default();
            if late
                && request.uri().path() == "/api/v1/pods"
                && !query.contains("watch=")
                && !query.contains("labelSelector")
            {
                sleep(Duration::from_secs(60)).await;
            }
            Ok::<_, std::convert::Infallible>(server.answer(request).await)
        }
    });
    let client = kube::Client::new(service, "default");
    let controller = tokio::spawn(controller::run(client, options(Mode::Recommend)));
    let (reason, message) = condition_number(&server, 1).await;
    assert_eq!(reason, "Satisfied", "{message}");
    assert!(
        message.starts_with("the 2 Instances run in 2 different domains of topology.kubernetes.io/zone"),
        "{message}"
    );

    slow.store(true, Ordering::Relaxed);
    server.delete_unseen("Pod", Some("spread-demo"), "qwen3-0-6b-engine-1-default-0");
    let cut = Instant::now();
    server.expire_watches("pods");
    let (reason, message) = condition_number(&server, 2).await;
    eprintln!(
        "the condition followed the relist {:?} after the watch was cut",
        cut.elapsed()
    );
    assert_eq!(reason, "Satisfied", "{message}");
    assert!(
        message.starts_with("the 1 Instance runs in 1 domain of topology.kubernetes.io/zone"),
        "{message}"
    );
    assert!(cut.elapsed() < Duration::from_secs(10), "{:?}", cut.elapsed());
    controller.abort();
}

/// A replica deleted and made again under its name is a new replica: its first rebalance Event
/// is told again, not held back as one already told.
#[tokio::test(start_paused = true)]
async fn a_replica_made_again_under_its_name_is_told_its_first_rebalance_event_again() {
    let objects = skewed_and_ready();
    let server = ApiServer::holding(objects.clone());
    let controller = running(&server, options(Mode::Recommend));
    until("a RebalanceRecommended Event", 60, || {
        notes(&server, "RebalanceRecommended").len() == 1
    })
    .await;

    server.delete("InferenceReplica", Some("spread-demo"), "qwen3-0-6b-engine");
    let replica = objects
        .into_iter()
        .find(|o| o["kind"] == "InferenceReplica")
        .expect("the replica");
    server.put(replica);
    until("the Event told again", 60, || {
        notes(&server, "RebalanceRecommended").len() == 2
    })
    .await;
    let told = notes(&server, "RebalanceRecommended");
    assert_eq!(told[0], told[1], "the same move");
    controller.abort();
}
