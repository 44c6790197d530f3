//! Rebalance `migrate` against the mocked API server (docs/rebalance.md): the one request the
//! reconciler writes (OME's annotation, exactly, and the ledger, in one merge patch guarded by the
//! resourceVersion), each guardrail that holds it back said once with no write, a restart that
//! finds a migration under way and sends no duplicate, two reconciles at once that write one
//! request, and a request OME's webhook refuses.

mod harness;

use std::sync::Arc;

use http::StatusCode;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use ome_spread_controller::context::{Context, Mode};
use ome_spread_controller::reconcile::reconcile;
use ome_spread_core::diagnosis::Reason;
use ome_spread_core::ome::InferenceReplica;
use serde_json::{Value, json};

use harness::*;

const SERVICE_PATH: &str = "/apis/ome.io/v1beta1/namespaces/spread-demo/inferenceservices/qwen3-0-6b?";
/// The Skewed fixture's first move, as `recommend` says it (tests/reconcile.rs).
const FIRST_MOVE: &str = "Move Instance 2 from gpu-node-1 (zone-a) to zone-b: kubectl ome migration start qwen3-0-6b --component engine --instance 2 --from-node gpu-node-1 --hint-node gpu-node-2 -n spread-demo";
const REASON: &str = "Skewed: the engine's Instances per domain differ by more than maxSkew; ome-spread moves Instance 2 from zone-a to zone-b";

/// The Skewed fixture with every pod Ready and the InferenceService at resourceVersion 41:
/// nothing holds a request back.
fn ready_cluster() -> Vec<Value> {
    let mut objects = fixture(Reason::Skewed);
    for object in &mut objects {
        match object["kind"].as_str() {
            Some("Pod") => object["status"]["conditions"] = json!([{"type": "Ready", "status": "True"}]),
            Some("InferenceService") => object["metadata"]["resourceVersion"] = json!("41"),
            _ => {}
        }
    }
    objects
}

/// The InferenceService as the API server answers a patch of it.
fn patched() -> Value {
    ready_cluster()
        .into_iter()
        .find(|o| o["kind"] == "InferenceService")
        .expect("the service")
}

fn changed(mut objects: Vec<Value>, kind: &str, name: &str, change: impl Fn(&mut Value)) -> Vec<Value> {
    let object = objects
        .iter_mut()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .expect("the object");
    change(object);
    objects
}

/// The replica as reconciled: its `Spread` condition already set (so the only writes are the
/// rebalance's), and its migration records.
fn reconciled(replica: InferenceReplica, migrations: Option<Value>) -> Arc<InferenceReplica> {
    let skewed = condition(
        "False",
        "Skewed",
        &expected_message(Reason::Skewed),
        "2026-11-01T10:00:00Z",
    );
    let mut replica = with_condition(replica, skewed);
    if let Some(status) = replica.status.as_mut() {
        status.migrations = migrations;
    }
    Arc::new(replica)
}

fn minutes_ago(minutes: i64) -> String {
    (Timestamp::now() - SignedDuration::from_mins(minutes)).to_string()
}

/// The next request is an Event of `reason` with `note`; answered.
async fn expect_event(server: &mut ApiServer, type_: &str, reason: &str, note: &str) -> Value {
    let event = event_recorded(server).await;
    assert_eq!(
        (&event["type"], &event["reason"], &event["note"]),
        (&json!(type_), &json!(reason), &json!(note)),
        "{event}"
    );
    event
}

/// A reconcile of `replica` whose one request is the Event `[type, reason, note]` (answered);
/// the reconcile succeeds. The Event as written.
async fn reconciled_saying(
    ctx: &Arc<Context>,
    replica: &Arc<InferenceReplica>,
    server: &mut ApiServer,
    said: [&str; 3],
) -> Value {
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let [type_, reason, note] = said;
    let event = expect_event(server, type_, reason, note).await;
    let done = reconciling.await.expect("no panic");
    done.unwrap_or_else(|e| panic!("{reason} {note}: {e}"));
    event
}

/// A request written: one merge patch of the InferenceService at resourceVersion 41 with OME's
/// annotation, exactly, and the ledger naming it; then one Event on the replica naming it; then
/// nothing more while OME has not recorded it (the gate), said once.
#[tokio::test(start_paused = true)]
async fn one_request_is_written_with_omes_exact_annotation_and_the_ledger() {
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness(&ready_cluster(), Mode::Migrate);
    let replica = reconciled(replica, None);
    let before = Timestamp::now();
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));

    let (request, respond) = server.next_request().await.expect("a request");
    assert_eq!(request.method(), "PATCH");
    assert_eq!(request.uri().to_string(), SERVICE_PATH);
    assert_eq!(request.headers()["content-type"], "application/merge-patch+json");
    let body: Value =
        serde_json::from_slice(&request.into_body().collect_bytes().await.expect("a body")).expect("json");
    let metadata = body["metadata"].as_object().expect("metadata only");
    assert_eq!(body.as_object().map(|b| b.len()), Some(1), "{body}");
    assert_eq!(metadata["resourceVersion"], "41");
    let annotations = metadata["annotations"].as_object().expect("annotations");
    assert_eq!(annotations.len(), 2, "the request and the ledger: {body}");
    let (key, value) = annotations
        .iter()
        .find(|(k, _)| k.starts_with("ome.io/migration-request-v1-"))
        .expect("OME's request");
    let uuid = key.trim_start_matches("ome.io/migration-request-v1-");
    let parsed = uuid::Uuid::parse_str(uuid).expect("a UUID");
    assert_eq!(parsed.get_version_num(), 4, "{uuid}");
    let value = value.as_str().expect("a JSON string");
    let requested_at = serde_json::from_str::<Value>(value).expect("JSON")["requested_at"]
        .as_str()
        .expect("requested_at")
        .to_owned();
    let at: Timestamp = requested_at.parse().expect("RFC 3339");
    assert!(
        before - SignedDuration::from_secs(1) <= at && at <= Timestamp::now(),
        "{requested_at}: the time of the request"
    );
    assert_eq!(
        value,
        format!(
            r#"{{"schemaVersion":"v1","component":"engine","instance":2,"from_node":"gpu-node-1","hint_target_nodes":["gpu-node-2"],"reason":"{REASON}","requested_at":"{requested_at}","requested_by":"ome-spread"}}"#
        )
    );
    let ledger: Value = serde_json::from_str(
        annotations["spread.ome.io/rebalance-requests"]
            .as_str()
            .expect("a string"),
    )
    .expect("the ledger's JSON");
    assert_eq!(ledger.as_array().map(Vec::len), Some(1));
    assert_eq!(
        (
            &ledger[0]["uuid"],
            &ledger[0]["component"],
            &ledger[0]["instance"],
            &ledger[0]["from_node"]
        ),
        (&json!(uuid), &json!("engine"), &json!(2), &json!("gpu-node-1"))
    );
    answer(respond, StatusCode::OK, &patched());

    let requested = format!("Requested {key} on InferenceService spread-demo/qwen3-0-6b: {FIRST_MOVE}");
    let event = expect_event(&mut server, "Normal", "RebalanceRequested", &requested).await;
    assert_eq!(event["regarding"]["kind"], "InferenceReplica");
    reconciling.await.expect("no panic").expect("reconciled");

    // The resync, the caches not yet showing the request: held, said once, nothing written.
    let held = format!(
        "request {uuid} on InferenceService spread-demo/qwen3-0-6b is not yet in OME's records: one migration at a time. Next: {FIRST_MOVE}"
    );
    reconciled_saying(&ctx, &replica, &mut server, ["Normal", "RebalanceHeld", &held]).await;
    reconcile(replica, ctx)
        .await
        .expect("held again, said once, no request");
}

/// A row: what it shows, the objects, the replica's records, the Event's type and note.
type HeldCase = (&'static str, Vec<Value>, Option<Value>, &'static str, String);

/// Each case's guardrail alone: no write, one Event saying why (a Warning for bad input), once.
async fn holds_once(cases: Vec<HeldCase>) {
    for (case, objects, migrations, type_, note) in cases {
        let Harness {
            ctx,
            replica,
            mut server,
            _writers,
        } = harness(&objects, Mode::Migrate);
        let replica = reconciled(replica, migrations);
        let event = reconciled_saying(&ctx, &replica, &mut server, [type_, "RebalanceHeld", &note]).await;
        assert_eq!(event["regarding"]["name"], "qwen3-0-6b-engine", "{case}");
        // The resync: the same hold, no second Event, no write (one would go unanswered).
        reconcile(replica, ctx).await.expect(case);
    }
}

/// The component's own pods hold the request: one not Ready, one Pending.
#[tokio::test(start_paused = true)]
async fn an_unready_or_pending_pod_holds_the_request_and_says_so_once() {
    let not_ready = changed(ready_cluster(), "Pod", "qwen3-0-6b-engine-1-default-0", |pod| {
        pod["status"]["conditions"][0]["status"] = json!("False");
    });
    // A fourth Instance not yet placed: it is not counted, the plan is the same.
    let mut unplaced = ready_cluster();
    let mut pending_pod = unplaced
        .iter()
        .find(|o| o["metadata"]["name"] == "qwen3-0-6b-engine-1-default-0")
        .expect("a pod")
        .clone();
    pending_pod["metadata"]["name"] = json!("qwen3-0-6b-engine-3-default-0");
    pending_pod["metadata"]["labels"]["ome.io/instance-index"] = json!("3");
    pending_pod["spec"].as_object_mut().expect("a spec").remove("nodeName");
    pending_pod["status"] = json!({"phase": "Pending"});
    unplaced.push(pending_pod);
    let next = format!(". Next: {FIRST_MOVE}");
    holds_once(vec![
        (
            "an Instance not Ready",
            not_ready,
            None,
            "Normal",
            format!(
                "pod qwen3-0-6b-engine-1-default-0 is not Ready: every Instance of the component must be Ready first{next}"
            ),
        ),
        (
            "a pod Pending",
            unplaced,
            None,
            "Normal",
            format!(
                "pod qwen3-0-6b-engine-3-default-0 is Pending: every pod of the component must be placed first{next}"
            ),
        ),
    ])
    .await;
}

/// Another migration, the hourly limit and a bad record hold the request (a Warning for the bad
/// record).
#[tokio::test(start_paused = true)]
async fn another_migration_the_limit_or_a_bad_record_holds_the_request_and_says_so_once() {
    let mut other_pending = ready_cluster();
    other_pending.push(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "llama", "namespace": "team-b",
            "annotations": {"ome.io/migration-request-v1-5f0c": r#"{"schemaVersion":"v1","component":"decoder","instance":0,"from_node":"n1","requested_by":"alfred"}"#}},
        "spec": {"deploymentMode": "OMENative"}}));
    let ten_this_hour: Vec<Value> = (0..10)
        .map(|i| json!({"uuid": format!("u{i}"), "component": "engine", "instance": 0, "from_node": "gpu-node-3", "at": minutes_ago(15 + i)}))
        .collect();
    let hourly = changed(ready_cluster(), "InferenceService", "qwen3-0-6b", |service| {
        service["metadata"]["annotations"] =
            json!({"spread.ome.io/rebalance-requests": Value::from(ten_this_hour.clone()).to_string()});
    });
    let next = format!(". Next: {FIRST_MOVE}");
    holds_once(vec![
        (
            "someone's request pending on another InferenceService",
            other_pending,
            None,
            "Normal",
            format!(
                "InferenceService team-b/llama has ome.io/migration-request-v1-5f0c pending: one migration at a time{next}"
            ),
        ),
        (
            "a migration of the component under way",
            ready_cluster(),
            Some(
                json!([{"requestUUID": "r-1", "trigger": "Manual", "sourceInstance": 0, "phase": "SurgePending", "startedAt": minutes_ago(3)}]),
            ),
            "Normal",
            format!(
                "migration r-1 of InferenceReplica spread-demo/qwen3-0-6b-engine is SurgePending: one migration at a time{next}"
            ),
        ),
        (
            "ten requests of ours this hour",
            hourly,
            None,
            "Normal",
            format!(
                "10 requests of ome-spread started in the last hour: the limit is 10 (--rebalance-max-per-hour){next}"
            ),
        ),
        (
            "a malformed status.migrations",
            ready_cluster(),
            Some(json!([{"requestUUID": "r-1", "phase": "Surging"}])),
            "Warning",
            format!(
                r#"InferenceReplica spread-demo/qwen3-0-6b-engine has status.migrations[0].phase "Surging": not Accepted, SurgePending, SurgeReady, Draining, Completed, Failed or Relocated{next}"#
            ),
        ),
    ])
    .await;
}

/// OME's words for a request it holds without its caps (upstream `migrationCapacityUnconfiguredMessage`).
const HELD_FOR_CAPS: &str = "waiting for migration capacity policy (no lifecycle.audit configured)";
/// What the hold says to set (the docs' "The request stays Accepted").
const SET_CAPS: &str = "Set ome.controller.lifecycle.audit (maxInFlightMigrations, maxMigrationsPerWindow and window, each above zero) in OME's chart values, or the same audit block under lifecycle in its inferenceservice-config ConfigMap";

/// The replica as reconciled under OME's hold for caps: its `Spread` condition already says so
/// (the Skewed fixture's message, then the hold), OME's `MigrationPolicyUnconfigured` condition
/// `True` if `condition`, and its records.
fn held_for_caps(
    replica: InferenceReplica,
    condition: bool,
    migrations: Option<Value>,
    hold: &str,
) -> Arc<InferenceReplica> {
    let skewed = condition_of(
        "False",
        "Skewed",
        &format!("{} {hold}.", expected_message(Reason::Skewed)),
    );
    let mut replica = with_condition(replica, skewed);
    if let Some(status) = replica.status.as_mut() {
        if condition {
            status.conditions.push(Condition {
                type_: "MigrationPolicyUnconfigured".into(),
                status: "True".into(),
                reason: "MigrationCapacityUnconfigured".into(),
                message: "lifecycle.audit is not configured; migration requests wait instead of executing".into(),
                observed_generation: Some(3),
                last_transition_time: Time("2026-11-01T10:00:00Z".parse().expect("a time")),
            });
        }
        status.migrations = migrations;
    }
    Arc::new(replica)
}

fn condition_of(status: &str, reason: &str, message: &str) -> Condition {
    condition(status, reason, message, "2026-11-01T10:00:00Z")
}

/// OME v1.3 without `lifecycle.audit` holds every migration request: a replica whose
/// `MigrationPolicyUnconfigured` condition is True, or whose own record OME holds for that
/// reason, gets no request; a Warning says why in OME's words and what to set, once. Under
/// `recommend` (here the InferenceService's annotation) the plan is still recommended, with the
/// same words.
#[tokio::test(start_paused = true)]
async fn under_omes_hold_for_caps_no_request_and_the_hold_says_why_once() {
    let hold = format!(
        "OME holds every migration request of InferenceReplica spread-demo/qwen3-0-6b-engine in Accepted: {HELD_FOR_CAPS}. {SET_CAPS}"
    );
    let held_record = json!([{"requestUUID": "r-7", "trigger": "Manual", "sourceInstance": 2, "phase": "Accepted",
        "message": HELD_FOR_CAPS, "startedAt": minutes_ago(3)}]);
    let hold_naming_r7 = format!(
        "OME holds every migration request of InferenceReplica spread-demo/qwen3-0-6b-engine in Accepted (migration r-7 among them): {HELD_FOR_CAPS}. {SET_CAPS}"
    );
    let cases = [
        ("OME's condition True", true, None, hold.clone()),
        (
            "the component's record held, no condition yet",
            false,
            Some(held_record),
            hold_naming_r7,
        ),
    ];
    for (case, condition, migrations, said) in cases {
        let Harness {
            ctx,
            replica,
            mut server,
            _writers,
        } = harness(&ready_cluster(), Mode::Migrate);
        let replica = held_for_caps(replica, condition, migrations, &said);
        let note = format!("{said}. Next: {FIRST_MOVE}");
        let event = reconciled_saying(&ctx, &replica, &mut server, ["Warning", "RebalanceHeld", &note]).await;
        assert_eq!(event["regarding"]["name"], "qwen3-0-6b-engine", "{case}");
        // The resync: the same hold, no second Event, no write (one would go unanswered).
        reconcile(replica, ctx).await.expect(case);
    }

    let lowered = changed(ready_cluster(), "InferenceService", "qwen3-0-6b", |service| {
        service["metadata"]["annotations"] = json!({"spread.ome.io/rebalance": "recommend"});
    });
    for mode in [Mode::Recommend, Mode::Migrate] {
        let objects = if mode == Mode::Migrate {
            lowered.clone()
        } else {
            ready_cluster()
        };
        let Harness {
            ctx,
            replica,
            mut server,
            _writers,
        } = harness(&objects, mode);
        let replica = held_for_caps(replica, true, None, &hold);
        let recommended = format!("{FIRST_MOVE}. {hold}");
        reconciled_saying(
            &ctx,
            &replica,
            &mut server,
            ["Normal", "RebalanceRecommended", &recommended],
        )
        .await;
    }
}

/// A request OME holds for caps on another component is not in flight: it holds no
/// surge, and holding every other component behind it would stall them until its deadline. This
/// component's request is written.
#[tokio::test(start_paused = true)]
async fn a_request_held_for_caps_elsewhere_does_not_hold_this_one_back() {
    let mut objects = ready_cluster();
    let mut other = objects
        .iter()
        .find(|o| o["kind"] == "InferenceReplica")
        .expect("the replica")
        .clone();
    other["metadata"] = json!({"name": "llama-decoder", "namespace": "team-b"});
    other["spec"]["component"] = json!("decoder");
    other["spec"]["parentRef"] = json!({"name": "llama"});
    other["status"] = json!({"migrations": [{"requestUUID": "o-1", "trigger": "Manual", "sourceInstance": 0,
        "phase": "Accepted", "message": HELD_FOR_CAPS, "startedAt": minutes_ago(4)}]});
    objects.push(other);
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness(&objects, Mode::Migrate);
    let reconciling = tokio::spawn(reconcile(reconciled(replica, None), ctx));
    let (method, uri, body, respond) = next(&mut server).await;
    assert_eq!((method.as_str(), uri.as_str()), ("PATCH", SERVICE_PATH), "{body}");
    answer(respond, StatusCode::OK, &patched());
    let event = event_recorded(&mut server).await;
    assert_eq!(
        (&event["type"], &event["reason"]),
        (&json!("Normal"), &json!("RebalanceRequested"))
    );
    reconciling.await.expect("no panic").expect("reconciled");
}

/// Under migrationPolicy Never there is no plan to request, and the annotation `recommend`
/// lowers migrate to a recommendation: no write either way.
#[tokio::test(start_paused = true)]
async fn never_and_a_lowered_mode_write_nothing() {
    let never = changed(ready_cluster(), "InferenceService", "qwen3-0-6b", |service| {
        service["spec"]["engine"]["lifecycle"] = json!({"migrationPolicy": {"mode": "Never"}});
    });
    let Harness {
        ctx,
        replica,
        server,
        _writers,
    } = harness(&never, Mode::Migrate);
    // The condition already says why no migration can fix the skew: no write at all.
    let never_said = condition_of(
        "False",
        "Skewed",
        "Instances per domain (zone-a: 3, zone-b: 0) differ by 3, more than maxSkew 1. \
        No migration can fix it now: the engine's migrationPolicy.mode is Never: OME fails every migration request. \
        Change the engine's migrationPolicy.mode to one that lets OME migrate its Instances.",
    );
    reconcile(Arc::new(with_condition(replica, never_said)), ctx)
        .await
        .expect("no plan, no request");
    drop(server);

    let lowered = changed(ready_cluster(), "InferenceService", "qwen3-0-6b", |service| {
        service["metadata"]["annotations"] = json!({"spread.ome.io/rebalance": "recommend"});
    });
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness(&lowered, Mode::Migrate);
    let replica = reconciled(replica, None);
    reconciled_saying(
        &ctx,
        &replica,
        &mut server,
        ["Normal", "RebalanceRecommended", FIRST_MOVE],
    )
    .await;
}

/// A new controller (a restart, or another leader) over the objects of a migration under way
/// sends no duplicate: while OME has not taken the request (the annotation is pending), and
/// once it has (its record is active).
#[tokio::test(start_paused = true)]
async fn a_restart_mid_migration_sends_no_duplicate() {
    let ledger = json!([{"uuid": "0b6d3f2e-8f3a-4c55-9d0e-5a1c2b3d4e5f", "component": "engine", "instance": 2,
        "from_node": "gpu-node-1", "at": minutes_ago(2)}])
    .to_string();
    let key = "ome.io/migration-request-v1-0b6d3f2e-8f3a-4c55-9d0e-5a1c2b3d4e5f";
    let pending = changed(ready_cluster(), "InferenceService", "qwen3-0-6b", |service| {
        service["metadata"]["annotations"] = json!({"spread.ome.io/rebalance-requests": ledger.clone(), key: "{}"});
    });
    let taken = changed(ready_cluster(), "InferenceService", "qwen3-0-6b", |service| {
        service["metadata"]["annotations"] = json!({"spread.ome.io/rebalance-requests": ledger.clone()});
    });
    let record = json!([{"requestUUID": "0b6d3f2e-8f3a-4c55-9d0e-5a1c2b3d4e5f", "trigger": "Manual",
        "sourceInstance": 2, "phase": "Draining", "startedAt": minutes_ago(2)}]);
    let cases = [
        (
            pending,
            None,
            format!("InferenceService spread-demo/qwen3-0-6b has {key} pending: one migration at a time"),
        ),
        (
            taken,
            Some(record),
            "migration 0b6d3f2e-8f3a-4c55-9d0e-5a1c2b3d4e5f of InferenceReplica spread-demo/qwen3-0-6b-engine is Draining: one migration at a time".to_owned(),
        ),
    ];
    for (objects, migrations, why) in cases {
        let Harness {
            ctx,
            replica,
            mut server,
            _writers,
        } = harness(&objects, Mode::Migrate);
        let replica = reconciled(replica, migrations);
        let held = format!("{why}. Next: {FIRST_MOVE}");
        reconciled_saying(&ctx, &replica, &mut server, ["Normal", "RebalanceHeld", &held]).await;
    }
}

/// Two reconciles at once (the replica's and the InferenceService's triggers): one request.
#[tokio::test(start_paused = true)]
async fn two_reconciles_at_once_write_one_request() {
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness(&ready_cluster(), Mode::Migrate);
    let replica = reconciled(replica, None);
    let first = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let second = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let (method, uri, body, respond) = next(&mut server).await;
    assert_eq!((method.as_str(), uri.as_str()), ("PATCH", SERVICE_PATH));
    assert!(
        body["metadata"]["annotations"]
            .as_object()
            .is_some_and(|a| a.len() == 2)
    );
    answer(respond, StatusCode::OK, &patched());
    let mut reasons = Vec::new();
    for _ in 0..2 {
        let event = event_recorded(&mut server).await;
        reasons.push(event["reason"].as_str().unwrap_or_default().to_owned());
    }
    reasons.sort();
    assert_eq!(reasons, ["RebalanceHeld", "RebalanceRequested"]);
    first.await.expect("no panic").expect("reconciled");
    second.await.expect("no panic").expect("reconciled");
}

/// A migration of ours that OME failed (no node took the surge before its deadline): held, with
/// a Warning naming the request and OME's message, until 5 minutes after it failed; then the
/// same move is requested again (its second try of 3).
#[tokio::test(start_paused = true)]
async fn a_migration_ome_failed_is_named_and_retried_after_backoff() {
    let ome_message = "surge Instance 3 unschedulable: 0/3 nodes are available";
    let with_failure = |failed_at: Timestamp| {
        let entry = json!([{"uuid": "r-9", "component": "engine", "instance": 2, "from_node": "gpu-node-1",
            "at": (failed_at - SignedDuration::from_mins(20)).to_string()}]);
        let objects = changed(ready_cluster(), "InferenceService", "qwen3-0-6b", |service| {
            service["metadata"]["annotations"] = json!({"spread.ome.io/rebalance-requests": entry.to_string()});
        });
        let record = json!([{"requestUUID": "r-9", "trigger": "Manual", "sourceInstance": 2, "phase": "Failed",
            "message": ome_message, "completedAt": failed_at.to_string()}]);
        (objects, record)
    };

    // Failed 2 minutes ago: held until 5 minutes after the failure.
    let failed_at = Timestamp::now() - SignedDuration::from_mins(2);
    let (objects, record) = with_failure(failed_at);
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness(&objects, Mode::Migrate);
    let until = failed_at + SignedDuration::from_mins(5);
    let note = format!(
        "request r-9 on InferenceService spread-demo/qwen3-0-6b failed ({ome_message}): the engine's next request waits until {until}. Next: {FIRST_MOVE}"
    );
    let replica = reconciled(replica, Some(record));
    reconciled_saying(&ctx, &replica, &mut server, ["Warning", "RebalanceHeld", &note]).await;

    // Failed 6 minutes ago: the backoff is over, and the move is requested again.
    let (objects, record) = with_failure(Timestamp::now() - SignedDuration::from_mins(6));
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness(&objects, Mode::Migrate);
    let reconciling = tokio::spawn(reconcile(reconciled(replica, Some(record)), ctx));
    let (method, uri, body, respond) = next(&mut server).await;
    assert_eq!((method.as_str(), uri.as_str()), ("PATCH", SERVICE_PATH));
    let ledger: Value = serde_json::from_str(
        body["metadata"]["annotations"]["spread.ome.io/rebalance-requests"]
            .as_str()
            .expect("the ledger"),
    )
    .expect("json");
    let tries: Vec<(&Value, &Value)> = ledger
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| (&e["instance"], &e["from_node"]))
        .collect();
    assert_eq!(
        tries,
        [(&json!(2), &json!("gpu-node-1")), (&json!(2), &json!("gpu-node-1"))]
    );
    answer(respond, StatusCode::OK, &patched());
    let event = event_recorded(&mut server).await;
    assert_eq!(
        (&event["type"], &event["reason"]),
        (&json!("Normal"), &json!("RebalanceRequested"))
    );
    reconciling.await.expect("no panic").expect("reconciled");
}

/// A request OME's webhook refuses: the refusal goes into the ledger alone, a Warning Event on
/// the InferenceService names the request and OME's message, and the next try waits (backoff).
#[tokio::test(start_paused = true)]
async fn a_request_ome_rejects_is_named_kept_in_the_ledger_and_backed_off() {
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness(&ready_cluster(), Mode::Migrate);
    let replica = reconciled(replica, None);
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let (method, _, body, respond) = next(&mut server).await;
    assert_eq!(method, "PATCH");
    let annotations = body["metadata"]["annotations"]
        .as_object()
        .expect("annotations")
        .clone();
    let (key, value) = annotations
        .iter()
        .find(|(k, _)| k.starts_with("ome.io/migration-request-v1-"))
        .expect("OME's request");
    let uuid = key.trim_start_matches("ome.io/migration-request-v1-").to_owned();
    let message = r#"admission webhook "inferenceservice.ome.io" denied the request: migration request: from_node gpu-node-1 hosts no pod of Instance 2"#;
    answer(respond, StatusCode::BAD_REQUEST, &failure(400, message));

    let (method, uri, ledger_only, respond) = next(&mut server).await;
    assert_eq!((method.as_str(), uri.as_str()), ("PATCH", SERVICE_PATH));
    let written = ledger_only["metadata"]["annotations"].as_object().expect("annotations");
    assert_eq!(written.keys().collect::<Vec<_>>(), ["spread.ome.io/rebalance-requests"]);
    let ledger: Value =
        serde_json::from_str(written["spread.ome.io/rebalance-requests"].as_str().expect("")).expect("json");
    assert_eq!(
        (&ledger[0]["uuid"], &ledger[0]["rejected"]),
        (&json!(uuid), &json!(message))
    );
    answer(respond, StatusCode::OK, &patched());

    let rejected = format!(
        "OME rejected {key}: {} on InferenceService spread-demo/qwen3-0-6b: {message}",
        value.as_str().expect("a string")
    );
    let event = expect_event(&mut server, "Warning", "RebalanceRejected", &rejected).await;
    assert_eq!(event["regarding"]["kind"], "InferenceService");
    reconciling.await.expect("no panic").expect("reconciled");

    let reconciling = tokio::spawn(reconcile(replica, ctx.clone()));
    let event = event_recorded(&mut server).await;
    let note = event["note"].as_str().expect("a note");
    assert_eq!(
        (&event["type"], &event["reason"]),
        (&json!("Warning"), &json!("RebalanceHeld"))
    );
    let backoff = format!(
        "request {uuid} on InferenceService spread-demo/qwen3-0-6b was rejected ({message}): the engine's next request waits until "
    );
    assert!(note.starts_with(&backoff), "{note}");
    reconciling.await.expect("no panic").expect("reconciled");
}
