use jiff::{SignedDuration, Timestamp};
use ome_spread_core::labels::{INSTANCE_INDEX, POD_GROUP, POD_ORDINAL, RUNNER};
use ome_spread_sim::stand_in::migration::{Ome, apply, surge_pod};
use ome_spread_sim::support::objects::name;
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";
const KEY: &str = "ome.io/migration-request-v1-r-1";

fn at(minutes: i64) -> Timestamp {
    "2026-11-30T12:00:00Z".parse::<Timestamp>().expect("a time") + SignedDuration::from_mins(minutes)
}

/// Two Instances on a1 (zone-a, 2 GPUs, both taken), b1 in zone-b with `b_gpus`; a request
/// to move Instance 1 to b1.
fn cluster(b_gpus: &str, mode: Option<&str>) -> Vec<Value> {
    let fields = json!({"topologySpread": "Required", "topologySpreadKey": ZONE});
    let mut engine = fields.clone();
    if let Some(mode) = mode {
        engine["lifecycle"] = json!({"migrationPolicy": {"mode": mode}});
    }
    let request = r#"{"schemaVersion":"v1","component":"engine","instance":1,"from_node":"a1","hint_target_nodes":["b1"],"reason":"skew","requested_at":"2026-11-30T12:00:00Z","requested_by":"ome-spread"}"#;
    let mut replica = json!({"kind": "InferenceReplica", "metadata": {"name": "s-engine", "namespace": "ns"},
        "spec": {"component": "engine", "parentRef": {"name": "s"}}});
    replica["spec"]
        .as_object_mut()
        .expect("spec")
        .extend(fields.as_object().expect("fields").clone());
    let node = |name: &str, zone: &str, gpus: &str| {
        json!({"kind": "Node", "metadata": {"name": name, "labels": {ZONE: zone}},
            "status": {"allocatable": {"nvidia.com/gpu": gpus, "pods": "110"}}})
    };
    let pod = |index: u32| {
        json!({"kind": "Pod", "metadata": {"name": format!("s-engine-{index}-default-0"), "namespace": "ns",
            "labels": {"ome.io/managed-by": "OMENative", "ome.io/inferenceservice": "s", "component": "engine",
                "ome.io/runner": "default", "ome.io/instance-index": index.to_string()}},
            "spec": {"nodeName": "a1", "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "s", "component": "engine", "ome.io/runner": "default"}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    };
    vec![
        json!({"kind": "InferenceService", "metadata": {"name": "s", "namespace": "ns", "annotations": {KEY: request}},
            "spec": {"engine": engine}}),
        replica,
        node("a1", "zone-a", "2"),
        node("b1", "zone-b", b_gpus),
        pod(0),
        pod(1),
    ]
}

fn ome() -> Ome {
    Ome {
        caps: true,
        settings: json!({}),
        deadline: SignedDuration::from_mins(10),
    }
}

/// Steps at the given minutes; the record after each, and every Event.
fn run(objects: &mut Vec<Value>, minutes: &[i64]) -> (Vec<Value>, Vec<String>) {
    run_with(&ome(), objects, minutes)
}

fn run_with(ome: &Ome, objects: &mut Vec<Value>, minutes: &[i64]) -> (Vec<Value>, Vec<String>) {
    let (mut records, mut said) = (Vec::new(), Vec::new());
    for minute in minutes {
        let (changes, events) = ome.step(objects, at(*minute));
        apply(objects, changes);
        records.push(objects[1]["status"]["migrations"][0].clone());
        said.extend(
            events
                .into_iter()
                .map(|e| format!("{} {}: {}", e.reason, e.service, e.message)),
        );
    }
    (records, said)
}

fn pods(objects: &[Value]) -> Vec<(&str, &str)> {
    let pods = objects.iter().filter(|o| o["kind"] == "Pod");
    pods.map(|p| (name(p), p["spec"]["nodeName"].as_str().unwrap_or("-")))
        .collect()
}

#[test]
fn a_surge_is_a_new_instance_on_slot_0_its_workers_keeping_their_places() {
    let pod = |name: &str, runner: &str, ordinal: &str| {
        json!({"metadata": {"name": name, "namespace": "ns", "labels": {"ome.io/inferenceservice": "s",
            "component": "engine", RUNNER: runner, INSTANCE_INDEX: "1", POD_ORDINAL: ordinal,
            POD_GROUP: "s-engine-1"}}, "spec": {}})
    };
    let shown = |surge: &Value| {
        let labels = &surge["metadata"]["labels"];
        (
            name(surge).to_owned(),
            labels[INSTANCE_INDEX].clone(),
            labels[POD_ORDINAL].clone(),
            labels[POD_GROUP].clone(),
        )
    };
    // The source's leader on its second slot after a SurgeThenDrain update; its second worker.
    assert_eq!(
        shown(&surge_pod(&pod("s-engine-1-leader-1", "leader", "1"), 2)),
        (
            "s-engine-2-leader-0".to_owned(),
            json!("2"),
            json!("0"),
            json!("s-engine-2")
        )
    );
    assert_eq!(
        shown(&surge_pod(&pod("s-engine-1-worker-1", "worker", "1"), 2)),
        (
            "s-engine-2-worker-1".to_owned(),
            json!("2"),
            json!("1"),
            json!("s-engine-2")
        )
    );
}

#[test]
fn a_surge_with_room_is_placed_on_the_hint_then_the_source_drains() {
    let mut objects = cluster("1", None);
    let (records, said) = run(&mut objects, &[0, 1, 2, 3, 4]);
    let phases: Vec<&Value> = records.iter().map(|r| &r["phase"]).collect();
    assert_eq!(
        phases,
        ["Accepted", "SurgePending", "SurgeReady", "Draining", "Completed"]
    );
    assert_eq!(
        objects[0]["metadata"]["annotations"],
        json!({}),
        "the request is taken off"
    );
    assert_eq!(
        (
            &records[4]["surgeInstance"],
            &records[4]["startedAt"],
            &records[4]["completedAt"]
        ),
        (
            &json!(2),
            &json!("2026-11-30T12:00:00Z"),
            &json!("2026-11-30T12:04:00Z")
        )
    );
    assert_eq!(
        pods(&objects),
        [("s-engine-0-default-0", "a1"), ("s-engine-2-default-0", "b1")]
    );
    // The surge got its constraint from the policy, not from the source.
    let surge = &objects[5];
    assert_eq!(
        surge["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"]["ome.io/runner"],
        "default"
    );
    assert_eq!(
        surge["spec"]["topologySpreadConstraints"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(
        said,
        [
            "MigrationRequestAccepted s: migration request r-1 accepted",
            "MigrationCompleted s: migration r-1 completed"
        ]
    );
}

/// Without `lifecycle.audit` (upstream's `holdMigrationForUnconfiguredCapacity`): the request
/// stays Accepted with OME's message, one Warning when the hold starts, the replica's
/// `MigrationPolicyUnconfigured` True; once the caps are set the surge starts and the
/// condition turns False; a request still held at its deadline fails.
#[test]
fn without_caps_a_request_is_held_in_accepted_until_they_are_set_or_its_deadline() {
    let unconfigured = Ome { caps: false, ..ome() };
    let held = "waiting for migration capacity policy (no lifecycle.audit configured)";
    let condition = |objects: &[Value]| {
        let c = &objects[1]["status"]["conditions"][0];
        (c["type"].clone(), c["status"].clone(), c["reason"].clone())
    };
    let mut objects = cluster("1", None);
    let (records, said) = run_with(&unconfigured, &mut objects, &[0, 1, 2, 3]);
    let phases: Vec<(&Value, &Value)> = records.iter().map(|r| (&r["phase"], &r["message"])).collect();
    assert_eq!(
        phases,
        [
            (&json!("Accepted"), &Value::Null),
            (&json!("Accepted"), &json!(held)),
            (&json!("Accepted"), &json!(held)),
            (&json!("Accepted"), &json!(held)),
        ]
    );
    assert_eq!(
        said,
        [
            "MigrationRequestAccepted s: migration request r-1 accepted".to_owned(),
            format!("MigrationPolicyUnconfigured s: OMENative migration uuid=r-1 held: {held}"),
        ]
    );
    assert_eq!(
        condition(&objects),
        (
            json!("MigrationPolicyUnconfigured"),
            json!("True"),
            json!("MigrationCapacityUnconfigured")
        )
    );
    assert_eq!(pods(&objects).len(), 2, "no surge");

    let (records, _) = run(&mut objects, &[4]);
    assert_eq!(records[0]["phase"], "SurgePending");
    assert_eq!(
        condition(&objects),
        (
            json!("MigrationPolicyUnconfigured"),
            json!("False"),
            json!("MigrationCapacityConfigured")
        )
    );

    let mut expired = cluster("1", None);
    let (records, _) = run_with(&unconfigured, &mut expired, &[0, 1, 10]);
    assert_eq!(
        (&records[2]["phase"], &records[2]["message"]),
        (
            &json!("Failed"),
            &json!("deadline exceeded in phase Accepted: surge never allocated")
        )
    );
}

#[test]
fn a_surge_nothing_takes_fails_at_the_deadline_and_the_source_keeps_serving() {
    let mut objects = cluster("0", None);
    let (records, said) = run(&mut objects, &[0, 1, 5, 11]);
    let phases: Vec<&Value> = records.iter().map(|r| &r["phase"]).collect();
    assert_eq!(phases, ["Accepted", "SurgePending", "SurgePending", "Failed"]);
    let message = "surge instance 2 unschedulable: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu.";
    assert_eq!(records[3]["message"], message);
    assert_eq!(
        pods(&objects),
        [("s-engine-0-default-0", "a1"), ("s-engine-1-default-0", "a1")]
    );
    assert_eq!(said[1], format!("MigrationFailed s: migration r-1 failed: {message}"));
}

#[test]
fn never_a_moved_source_and_a_second_request_are_what_ome_says() {
    let mut never = cluster("1", Some("Never"));
    let (records, _) = run(&mut never, &[0, 1]);
    assert_eq!(
        (&records[1]["phase"], &records[1]["message"]),
        (&json!("Failed"), &json!("migrationPolicy mode is Never"))
    );

    let mut moved = cluster("1", None);
    moved[5]["spec"]["nodeName"] = json!("b1");
    let (records, _) = run(&mut moved, &[0, 1]);
    assert_eq!(
        records[1]["message"],
        r#"from_node "a1" does not match observed source node "b1""#
    );

    // A second request is queued behind the first: taken off its annotation into an
    // Accepted record, which waits while the first runs.
    let mut two = cluster("1", None);
    run(&mut two, &[0]);
    let same = cluster("1", None)[0]["metadata"]["annotations"][KEY].clone();
    two[0]["metadata"]["annotations"]["ome.io/migration-request-v1-r-2"] = same;
    run(&mut two, &[1, 2]);
    assert_eq!(two[0]["metadata"]["annotations"], json!({}));
    let phases: Vec<(&Value, &Value)> = two[1]["status"]["migrations"]
        .as_array()
        .expect("records")
        .iter()
        .map(|r| (&r["requestUUID"], &r["phase"]))
        .collect();
    assert_eq!(
        phases,
        [
            (&json!("r-1"), &json!("SurgeReady")),
            (&json!("r-2"), &json!("Accepted"))
        ]
    );
}
