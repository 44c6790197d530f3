//! The request's exact JSON (OME's v1 contract), the records read or named, and each
//! guardrail of [`hold`] alone, as a table: a cluster where a request may go, and one change
//! per row that holds it back.

use serde_json::json;

use super::*;
use crate::nodes::Nodes;
use crate::ome::typed;
use crate::pod::Pod;

fn at(time: &str) -> Timestamp {
    time.parse().expect("a time")
}

/// The Skewed fixture's first move: Instance 2 from gpu-node-1 (zone-a) to zone-b.
fn next() -> Move {
    Move {
        instance: 2,
        from_node: "gpu-node-1".into(),
        from_domain: "zone-a".into(),
        to_domain: "zone-b".into(),
        hint_nodes: vec!["gpu-node-2".into()],
    }
}

#[test]
fn the_request_is_omes_v1_json_field_for_field() {
    let request = Request::new("engine", &next(), at("2026-11-30T15:00:00.734Z"));
    assert_eq!(
        request.value(),
        concat!(
            r#"{"schemaVersion":"v1","component":"engine","instance":2,"from_node":"gpu-node-1","#,
            r#""hint_target_nodes":["gpu-node-2"],"#,
            r#""reason":"Skewed: the engine's Instances per domain differ by more than maxSkew; ome-spread moves Instance 2 from zone-a to zone-b","#,
            r#""requested_at":"2026-11-30T15:00:00Z","requested_by":"ome-spread"}"#
        )
    );
    assert_eq!(
        request_key("0b6d3f2e-8f3a-4c55-9d0e-5a1c2b3d4e5f"),
        "ome.io/migration-request-v1-0b6d3f2e-8f3a-4c55-9d0e-5a1c2b3d4e5f"
    );
}

#[test]
fn the_ledger_keeps_a_day_then_the_new_entry() {
    let request = Request::new("engine", &next(), at("2026-11-30T15:00:00Z"));
    let old = Entry::new("u-old", &request, at("2026-11-29T14:59:59Z"));
    let recent = Entry::new("u-recent", &request, at("2026-11-30T14:00:00Z"));
    let new = Entry::new("u-new", &request, at("2026-11-30T15:00:00Z"));
    let written = ledger_with(&[old, recent], new, at("2026-11-30T15:00:00Z"));
    assert_eq!(
        written,
        concat!(
            r#"[{"uuid":"u-recent","component":"engine","instance":2,"from_node":"gpu-node-1","at":"2026-11-30T14:00:00Z"},"#,
            r#"{"uuid":"u-new","component":"engine","instance":2,"from_node":"gpu-node-1","at":"2026-11-30T15:00:00Z"}]"#
        )
    );
    let annotations = BTreeMap::from([(LEDGER.to_owned(), written)]);
    let read = ledger("spread-demo/qwen3-0-6b", &annotations).expect("our own ledger");
    assert_eq!(
        read.iter().map(|e| e.uuid.as_str()).collect::<Vec<_>>(),
        ["u-recent", "u-new"]
    );

    let bad = BTreeMap::from([(LEDGER.to_owned(), "[{\"uuid\":1}]".to_owned())]);
    let error = ledger("spread-demo/qwen3-0-6b", &bad).expect_err("not our JSON");
    assert!(
        error
            .to_string()
            .starts_with(r#"InferenceService spread-demo/qwen3-0-6b has spread.ome.io/rebalance-requests "[{\"uuid\":1}]": invalid type"#),
        "{error}"
    );
}

#[test]
fn records_are_read_and_a_malformed_one_is_named() {
    let replica = "spread-demo/qwen3-0-6b-engine";
    let good = json!([
        {"requestUUID": "u1", "trigger": "Manual", "sourceInstance": 2, "phase": "SurgeReady", "startedAt": "2026-11-30T14:00:00Z"},
        {"requestUUID": "u2", "trigger": "Auto", "sourceInstance": 0, "phase": "Relocated", "message": "node drained", "completedAt": "2026-11-30T14:10:00Z"},
    ]);
    let read = records(replica, Some(&good)).expect("OME's records");
    assert_eq!(
        read,
        [
            Record {
                uuid: "u1".into(),
                phase: Phase::SurgeReady,
                message: String::new(),
                completed_at: None,
            },
            Record {
                uuid: "u2".into(),
                phase: Phase::Relocated,
                message: "node drained".into(),
                completed_at: Some(at("2026-11-30T14:10:00Z")),
            },
        ]
    );
    assert!(read[0].phase.active() && !read[1].phase.active());
    assert_eq!(records(replica, None), Ok(Vec::new()));

    let cases = [
        (
            json!({"requestUUID": "u1"}),
            r#"InferenceReplica spread-demo/qwen3-0-6b-engine has status.migrations {"requestUUID":"u1"}: not a list"#,
        ),
        (
            json!([{"requestUUID": "u1", "phase": "Surging"}]),
            r#"InferenceReplica spread-demo/qwen3-0-6b-engine has status.migrations[0].phase "Surging": not Accepted, SurgePending, SurgeReady, Draining, Completed, Failed or Relocated"#,
        ),
        (
            json!([{"requestUUID": "u1", "phase": "Completed"}, {"phase": "Accepted"}]),
            "InferenceReplica spread-demo/qwen3-0-6b-engine has status.migrations[1].requestUUID null: not a request UUID",
        ),
        (
            json!([{"requestUUID": "u1", "phase": "Failed", "completedAt": "yesterday"}]),
            r#"InferenceReplica spread-demo/qwen3-0-6b-engine has status.migrations[0].completedAt "yesterday": not an RFC 3339 time"#,
        ),
    ];
    for (migrations, message) in cases {
        let error = records(replica, Some(&migrations)).expect_err("malformed");
        assert_eq!(error.to_string(), message);
    }
}

/// The cluster of one row: the component's objects, and every service's annotations and
/// replica's records.
struct Cluster {
    service: Value,
    replica: Value,
    pods: Vec<Value>,
    annotations: Vec<(String, BTreeMap<String, String>)>,
    migrations: Vec<(String, Value)>,
    written: Vec<(String, Entry)>,
    lowered_to: Option<&'static str>,
}

const NOW: &str = "2026-11-30T15:00:00Z";
const SERVICE: &str = "spread-demo/qwen3-0-6b";

fn ready_pod(index: u32, node: &str) -> Value {
    json!({"metadata": {"name": format!("qwen3-0-6b-engine-{index}-default-0"), "namespace": "spread-demo"},
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// Every Instance Ready, nothing pending or running anywhere, no request of ours yet.
fn quiet() -> Cluster {
    Cluster {
        service: json!({"metadata": {"name": "qwen3-0-6b", "namespace": "spread-demo"}, "spec": {"engine": {}}}),
        replica: json!({"metadata": {"name": "qwen3-0-6b-engine", "namespace": "spread-demo"}, "spec": {"component": "engine"}}),
        pods: vec![
            ready_pod(0, "gpu-node-1"),
            ready_pod(1, "gpu-node-3"),
            ready_pod(2, "gpu-node-1"),
        ],
        annotations: vec![
            (SERVICE.into(), BTreeMap::new()),
            ("other/llama".into(), BTreeMap::new()),
        ],
        migrations: vec![
            ("spread-demo/qwen3-0-6b-engine".into(), json!([])),
            ("other/llama-engine".into(), json!([])),
        ],
        written: Vec::new(),
        lowered_to: None,
    }
}

fn held(cluster: &Cluster) -> Result<(), Hold> {
    held_with_own(cluster, &cluster.migrations[0].1)
}

/// As [`held`], the component's own replica's records being `own` (the reconcile's copy, which
/// may be fresher or older than the caches').
fn held_with_own(cluster: &Cluster, own: &Value) -> Result<(), Hold> {
    let nodes = Nodes::from_json(&[]).expect("readable");
    let mut replica = cluster.replica.clone();
    replica["status"]["migrations"] = own.clone();
    let (service, replica) = (typed(&cluster.service), typed(&replica));
    let pods: Vec<Pod> = cluster.pods.iter().map(typed).collect();
    let component = Component::new(&service, None, &replica, &pods, &nodes);
    // Every service and replica of the cluster as its objects, named `namespace/name`.
    let object = |name: &str, field: &str, value: Value| {
        let (namespace, name) = name.split_once('/').expect("namespace/name");
        let mut object = json!({"metadata": {"name": name, "namespace": namespace}, "spec": {"component": "engine"}});
        object[field][if field == "status" { "migrations" } else { "annotations" }] = value;
        object
    };
    let services: Vec<InferenceService> = (cluster.annotations.iter())
        .map(|(name, annotations)| typed(&object(name, "metadata", json!(annotations))))
        .collect();
    let replicas: Vec<InferenceReplica> = (cluster.migrations.iter())
        .map(|(name, migrations)| typed(&object(name, "status", migrations.clone())))
        .collect();
    let next = next();
    hold(&Situation {
        component: &component,
        lowered_to: cluster.lowered_to,
        next: &next,
        requests: &Requests::read(&services),
        records: &Records::read(&replicas),
        written: &cluster.written,
        now: at(NOW),
        max_per_hour: 10,
    })
}

/// A ledger entry of ours for `instance` off `from_node`, `minutes` before NOW.
fn entry(uuid: &str, instance: u32, from_node: &str, minutes: i64, rejected: Option<&str>) -> Entry {
    Entry {
        uuid: uuid.into(),
        component: "engine".into(),
        instance,
        from_node: from_node.into(),
        at: at(NOW) - SignedDuration::from_mins(minutes),
        rejected: rejected.map(str::to_owned),
    }
}

fn with_ledger(mut cluster: Cluster, service: usize, entries: &[Entry]) -> Cluster {
    let value = serde_json::to_string(entries).expect("json");
    cluster.annotations[service].1.insert(LEDGER.into(), value);
    cluster
}

fn with_records(mut cluster: Cluster, replica: usize, records: Value) -> Cluster {
    cluster.migrations[replica].1 = records;
    cluster
}

fn record(uuid: &str, phase: &str) -> Value {
    json!({"requestUUID": uuid, "trigger": "Manual", "sourceInstance": 2, "phase": phase})
}

/// A record OME holds in Accepted for caps nobody configured, as upstream writes it.
fn held_for_caps(uuid: &str) -> Value {
    json!({"requestUUID": uuid, "trigger": "Manual", "sourceInstance": 2, "phase": "Accepted",
        "message": "waiting for migration capacity policy (no lifecycle.audit configured)"})
}

/// A record that ended Failed at `completed_at`.
fn failed(uuid: &str, completed_at: &str) -> Value {
    json!({"requestUUID": uuid, "trigger": "Manual", "sourceInstance": 0, "phase": "Failed",
        "message": "no node fits the surge", "completedAt": completed_at})
}

#[test]
fn a_quiet_cluster_holds_nothing_back() {
    assert_eq!(held(&quiet()), Ok(()));
    // Ours, recorded and Completed, an hour and more ago: nothing holds.
    let done = with_ledger(quiet(), 0, &[entry("u1", 1, "gpu-node-3", 90, None)]);
    assert_eq!(held(&with_records(done, 0, json!([record("u1", "Completed")]))), Ok(()));
}

/// The cluster's records are read from the caches, the component's own replica when the
/// reconcile started: either may be the older. Each migration counts at the furthest
/// phase either shows (OME only moves a record forward).
#[test]
fn the_components_own_records_join_the_clusters_read_at_the_furthest_phase() {
    let ledger = [entry("u1", 2, "gpu-node-1", 20, None)];
    let draining = with_records(with_ledger(quiet(), 0, &ledger), 0, json!([record("u1", "Draining")]));
    let active = |replica: &str, uuid: &str, phase| {
        Err(Hold::Active {
            replica: replica.into(),
            uuid: uuid.into(),
            phase,
        })
    };
    // The read is older: its Draining is over.
    assert_eq!(held_with_own(&draining, &json!([record("u1", "Completed")])), Ok(()));
    // The read is newer: the reconcile's copy still shows Draining, the read Completed.
    let completed = with_records(with_ledger(quiet(), 0, &ledger), 0, json!([record("u1", "Completed")]));
    assert_eq!(held_with_own(&completed, &json!([record("u1", "Draining")])), Ok(()));
    // Only the reconcile's copy has it yet.
    let behind = with_records(with_ledger(quiet(), 0, &ledger), 0, json!([]));
    assert_eq!(
        held_with_own(&behind, &json!([record("u1", "SurgePending")])),
        active("spread-demo/qwen3-0-6b-engine", "u1", Phase::SurgePending)
    );
    // Only the read has it: someone else's request (not in our ledger), recorded since.
    let alfred = with_records(quiet(), 0, json!([record("alfred-1", "SurgePending")]));
    assert_eq!(
        held_with_own(&alfred, &json!([])),
        active("spread-demo/qwen3-0-6b-engine", "alfred-1", Phase::SurgePending)
    );
    // Another replica's record.
    let other = with_records(quiet(), 1, json!([record("o1", "Accepted")]));
    assert_eq!(held(&other), active("other/llama-engine", "o1", Phase::Accepted));
}

/// Each row's cluster held back as the row says.
fn holds(rows: Vec<(&str, Cluster, Hold)>) {
    for (row, cluster, expected) in rows {
        assert_eq!(held(&cluster), Err(expected), "{row}");
    }
}

#[test]
fn the_component_and_its_objects_hold_the_request_back_naming_them() {
    let mut lowered = quiet();
    lowered.lowered_to = Some("recommend");
    let mut paused = quiet();
    paused.replica["spec"]["paused"] = json!(true);
    let mut pending_pod = quiet();
    pending_pod.pods[1]["status"] = json!({"phase": "Pending"});
    pending_pod.pods[1]["spec"] = json!({});
    let mut unready = quiet();
    unready.pods[2]["status"]["conditions"][0]["status"] = json!("False");
    let mut unconfigured_replica = quiet();
    unconfigured_replica.replica["status"]["conditions"] = json!([
        {"type": "Spread", "status": "False", "reason": "Skewed", "message": "", "lastTransitionTime": "2026-05-01T10:00:00Z"},
        {"type": "MigrationPolicyUnconfigured", "status": "True", "reason": "MigrationCapacityUnconfigured",
            "message": "lifecycle.audit is not configured; migration requests wait instead of executing",
            "lastTransitionTime": "2026-05-01T10:00:00Z"},
    ]);
    holds(vec![
        (
            "the service's annotation lowers the mode",
            lowered,
            Hold::ModeLowered(SERVICE.into(), "recommend".into()),
        ),
        (
            "the replica is paused",
            paused,
            Hold::Paused("spread-demo/qwen3-0-6b-engine".into()),
        ),
        (
            "a pod is Pending",
            pending_pod,
            Hold::PodPending("qwen3-0-6b-engine-1-default-0".into()),
        ),
        (
            "an Instance is not Ready",
            unready,
            Hold::NotReady("qwen3-0-6b-engine-2-default-0".into()),
        ),
        (
            "OME's MigrationPolicyUnconfigured condition on the replica",
            unconfigured_replica,
            Hold::Unconfigured(Unconfigured {
                replica: "spread-demo/qwen3-0-6b-engine".into(),
                held: None,
            }),
        ),
        (
            "a record of the component held for caps, before OME's condition says so",
            with_records(quiet(), 0, json!([held_for_caps("u4")])),
            Hold::Unconfigured(Unconfigured {
                replica: "spread-demo/qwen3-0-6b-engine".into(),
                held: Some("u4".into()),
            }),
        ),
    ]);
}

#[test]
fn a_migration_in_flight_or_a_bad_record_anywhere_holds_the_request_back_naming_it() {
    let mut elsewhere = quiet();
    elsewhere.annotations[1]
        .1
        .insert("ome.io/migration-request-v1-abc".into(), "{}".into());
    let mut just_written = quiet();
    just_written.written = vec![(SERVICE.into(), entry("u9", 2, "gpu-node-1", 0, None))];
    holds(vec![
        (
            "a record of the component is active",
            with_records(quiet(), 0, json!([record("u1", "Completed"), record("u2", "Draining")])),
            Hold::Active {
                replica: "spread-demo/qwen3-0-6b-engine".into(),
                uuid: "u2".into(),
                phase: Phase::Draining,
            },
        ),
        (
            "a record of another service is active",
            with_records(quiet(), 1, json!([record("a1", "Accepted")])),
            Hold::Active {
                replica: "other/llama-engine".into(),
                uuid: "a1".into(),
                phase: Phase::Accepted,
            },
        ),
        (
            "someone's request is pending on another service",
            elsewhere,
            Hold::Pending("other/llama".into(), "ome.io/migration-request-v1-abc".into()),
        ),
        (
            "ours was just written and is not in the caches yet",
            just_written,
            Hold::Unacknowledged(SERVICE.into(), "u9".into()),
        ),
        (
            "ours is in the ledger, not yet recorded",
            with_ledger(quiet(), 0, &[entry("u8", 2, "gpu-node-1", 9, None)]),
            Hold::Unacknowledged(SERVICE.into(), "u8".into()),
        ),
        (
            "a malformed record anywhere",
            with_records(quiet(), 1, json!([{"requestUUID": "x", "phase": "Surging"}])),
            Hold::BadRecord(BadRecord {
                replica: "other/llama-engine".into(),
                at: "[0].phase".into(),
                value: "\"Surging\"".into(),
                expected: "not Accepted, SurgePending, SurgeReady, Draining, Completed, Failed or Relocated",
            }),
        ),
    ]);
}

#[test]
fn the_limits_hold_the_request_back_naming_them() {
    let ten_this_hour: Vec<Entry> = (0..10)
        .map(|i| entry(&format!("u{i}"), 7, "gpu-node-9", 5 + i, None))
        .collect();
    let three_tries = [
        entry("u1", 2, "gpu-node-1", 300, Some("migration request: no")),
        entry("u2", 2, "gpu-node-1", 200, Some("migration request: no")),
        entry("u3", 2, "gpu-node-1", 100, Some("migration request: no")),
    ];
    holds(vec![
        (
            "ten of ours started this hour, on another service",
            with_records(
                with_ledger(quiet(), 1, &ten_this_hour),
                1,
                json!(
                    (0..10)
                        .map(|i| record(&format!("u{i}"), "Completed"))
                        .collect::<Vec<_>>()
                ),
            ),
            Hold::HourlyLimit(10, 10),
        ),
        (
            "the same move three times",
            with_ledger(quiet(), 0, &three_tries),
            Hold::Tried {
                service: SERVICE.into(),
                component: "engine".into(),
                instance: 2,
                from_node: "gpu-node-1".into(),
                tries: 3,
            },
        ),
        (
            "a request of the component, made 20 minutes ago, failed 4 minutes ago",
            with_records(
                with_ledger(quiet(), 0, &[entry("u5", 0, "gpu-node-1", 20, None)]),
                0,
                json!([failed("u5", "2026-11-30T14:56:00Z")]),
            ),
            Hold::Backoff {
                service: SERVICE.into(),
                component: "engine".into(),
                uuid: "u5".into(),
                outcome: "failed (no node fits the surge)".into(),
                until: at("2026-11-30T15:01:00Z"),
            },
        ),
        (
            "two rejected: 10 minutes after the last",
            with_ledger(
                quiet(),
                0,
                &[
                    entry(
                        "u6",
                        0,
                        "gpu-node-1",
                        30,
                        Some("migration request: instance 0 is migrating"),
                    ),
                    entry("u7", 1, "gpu-node-3", 8, Some("migration request: from_node mismatch")),
                ],
            ),
            Hold::Backoff {
                service: SERVICE.into(),
                component: "engine".into(),
                uuid: "u7".into(),
                outcome: "was rejected (migration request: from_node mismatch)".into(),
                until: at("2026-11-30T15:02:00Z"),
            },
        ),
    ]);
}

#[test]
fn backoff_ends_and_an_old_failure_holds_nothing() {
    // Failed 6 minutes ago, once: 5 minutes of backoff are over.
    let over = with_records(
        with_ledger(quiet(), 0, &[entry("u5", 0, "gpu-node-1", 20, None)]),
        0,
        json!([failed("u5", "2026-11-30T14:54:00Z")]),
    );
    assert_eq!(held(&over), Ok(()));
    // Nine of ours this hour, one rejected (it never started): under the limit.
    let mut nine: Vec<Entry> = (0..9)
        .map(|i| entry(&format!("u{i}"), 7, "gpu-node-9", 15 + i, None))
        .collect();
    nine.push(entry("r", 8, "gpu-node-8", 50, Some("migration request: no")));
    let done = json!(
        (0..9)
            .map(|i| record(&format!("u{i}"), "Completed"))
            .collect::<Vec<_>>()
    );
    assert_eq!(held(&with_records(with_ledger(quiet(), 1, &nine), 1, done)), Ok(()));
}

/// OME's hold for caps, in its own words and with what to set.
#[test]
fn the_hold_for_caps_says_omes_message_and_what_to_set() {
    let unconfigured = Unconfigured {
        replica: "spread-demo/qwen3-0-6b-engine".into(),
        held: Some("u4".into()),
    };
    assert_eq!(
        unconfigured.to_string(),
        "OME holds every migration request of InferenceReplica spread-demo/qwen3-0-6b-engine in Accepted (migration u4 among them): waiting for migration capacity policy (no lifecycle.audit configured). Set ome.controller.lifecycle.audit (maxInFlightMigrations, maxMigrationsPerWindow and window, each above zero) in OME's chart values, or the same audit block under lifecycle in its inferenceservice-config ConfigMap"
    );
    // The condition False (OME judged a request under caps since) holds nothing.
    let mut configured = quiet();
    configured.replica["status"]["conditions"] = json!([{"type": "MigrationPolicyUnconfigured", "status": "False", "reason": "MigrationCapacityConfigured",
            "message": "", "lastTransitionTime": "2026-05-01T10:00:00Z"}]);
    assert_eq!(held(&configured), Ok(()));
    // A record that OME held once and has since taken on is not held.
    let running =
        json!([{"requestUUID": "u4", "phase": "SurgePending", "message": "surge allocated; waiting for surge pods"}]);
    assert_eq!(
        Unconfigured::of(&typed(&json!({"metadata": {"name": "r", "namespace": "n"},
            "spec": {"component": "engine"}, "status": {"migrations": running}}))),
        None
    );
}

/// A request held for caps on another component is not in flight: OME gives it no surge, so it
/// does not hold this component's request back, while one under way still does.
#[test]
fn a_request_held_for_caps_elsewhere_holds_no_other_component_back() {
    let ledger = [entry("o1", 0, "gpu-node-7", 20, None)];
    let held_elsewhere = with_records(with_ledger(quiet(), 1, &ledger), 1, json!([held_for_caps("o1")]));
    assert_eq!(held(&held_elsewhere), Ok(()));
    let mut accepted = held_for_caps("o1");
    accepted["message"] = json!("");
    let waiting_its_turn = with_records(with_ledger(quiet(), 1, &ledger), 1, json!([accepted]));
    assert_eq!(
        held(&waiting_its_turn),
        Err(Hold::Active {
            replica: "other/llama-engine".into(),
            uuid: "o1".into(),
            phase: Phase::Accepted
        })
    );
}
