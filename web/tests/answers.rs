//! The playground against what the policy and `explain` are tested to answer: every rule case of
//! the policy (tests/data/cases, whose expected responses are written by hand from docs/rules.md)
//! and every reason of `explain` (controller/tests/data/reasons, whose expected text is written
//! by hand from docs/controller.md), pasted as a user would paste them. Natively, and compiled to
//! wasm32-unknown-unknown in Node (`make test` runs both), through the functions the page calls.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn admit(objects: &str, pod: &str, settings: &str) -> Value {
    serde_json::from_str(&ome_spread_web::admit_json(objects, pod, settings)).expect("admit's JSON")
}

fn diagnose(objects: &str, settings: &str) -> Value {
    serde_json::from_str(&ome_spread_web::diagnose_json(objects, settings)).expect("diagnose's JSON")
}

#[cfg(not(target_arch = "wasm32"))]
fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[cfg(not(target_arch = "wasm32"))]
fn entries(path: &Path) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    entries.map(|e| e.expect("entry").path()).collect()
}

/// In Node, the files through its `fs` module.
#[cfg(target_arch = "wasm32")]
mod node {
    use wasm_bindgen::prelude::wasm_bindgen;

    #[wasm_bindgen(module = "fs")]
    extern "C" {
        #[wasm_bindgen(js_name = readFileSync)]
        pub fn read_file_sync(path: &str, encoding: &str) -> String;
        #[wasm_bindgen(js_name = readdirSync)]
        pub fn readdir_sync(path: &str) -> Vec<String>;
    }
}

#[cfg(target_arch = "wasm32")]
fn read(path: &Path) -> String {
    node::read_file_sync(&path.to_string_lossy(), "utf8")
}

#[cfg(target_arch = "wasm32")]
fn entries(path: &Path) -> Vec<PathBuf> {
    node::readdir_sync(&path.to_string_lossy())
        .into_iter()
        .map(|name| path.join(name))
        .collect()
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// What the playground is given for a case: the replica the host answered with (as JSON text, as
/// `kubectl get -o json` prints it), or nothing when the host found none; None when the case's
/// host answer cannot be pasted (an error other than not found, an answer that is no replica).
fn pasted_objects(case: &Path) -> Option<String> {
    let session: Vec<Value> = serde_saphyr::from_str(&read(&case.join("session.yml"))).expect("session.yml");
    let Some(exchange) = session.first() else {
        return Some(String::new());
    };
    let response = &exchange["response"];
    match response["type"].as_str() {
        Some("Success") => {
            let mut replica: Value = serde_json::from_str(response["payload"].as_str()?).ok()?;
            if replica["metadata"].is_null() {
                // A replica pasted has the name and namespace the host was asked for.
                let asked = exchange["request"].as_str()?;
                let field = |f: &str| asked.lines().find_map(|l| l.strip_prefix(f)).map(str::to_owned);
                replica["metadata"] = json!({"name": field("name: ")?, "namespace": field("namespace: ")?});
            }
            (replica["kind"] == "InferenceReplica").then(|| replica.to_string())
        }
        _ => response["message"]
            .as_str()
            .filter(|m| m.starts_with("Cannot find"))
            .map(|_| String::new()),
    }
}

#[test]
fn every_rule_case_gets_the_policys_answer() {
    let cases = repository().join("tests/data/cases");
    let mut names = entries(&cases);
    names.sort();
    let mut skipped = Vec::new();
    let mut compared = 0;
    for case in names {
        let name = case.file_name().and_then(|n| n.to_str()).unwrap_or_default().to_owned();
        let request = json(&case.join("request.json"));
        let expected = json(&case.join("response.json"));
        let request = &request["request"];
        let objects = pasted_objects(&case);
        let (true, Some(objects)) = (
            request["operation"] == "CREATE" && request["kind"]["kind"] == "Pod" && request["object"].is_object(),
            objects,
        ) else {
            skipped.push(name);
            continue;
        };
        let pod = serde_saphyr::to_string(&request["object"]).expect("the pod as YAML");
        let answer = admit(&objects, &pod, &read(&case.join("settings.json")));
        compared += 1;
        if let Some(message) = answer["error"].as_str() {
            // The policy-server refuses bad settings before any request; the playground says so.
            let refused = expected["message"]
                .as_str()
                .and_then(|m| m.strip_prefix("invalid policy settings: "));
            assert_eq!(
                Some(message),
                refused.map(|m| format!("settings: {m}")).as_deref(),
                "{name}"
            );
            continue;
        }
        assert_eq!(answer["accepted"], expected["accepted"], "{name}");
        assert_eq!(answer["message"], expected["message"], "{name}");
        assert_eq!(
            answer["warnings"],
            *expected.get("warnings").unwrap_or(&json!([])),
            "{name}"
        );
        let pod = expected.get("mutated_object").unwrap_or(&request["object"]);
        assert_eq!(answer["pod"], *pod, "{name}");
        assert_eq!(answer["mutated"], expected.get("mutated_object").is_some(), "{name}");
    }
    // What a browser cannot paste: requests that are not a Pod CREATE, and host answers that are
    // neither a replica nor "not found".
    assert_eq!(
        skipped,
        [
            "bad_request_with_a_null_object_is_rejected",
            "p1_create_of_a_deployment_is_accepted_unchanged",
            "p1_update_of_an_ome_pod_is_accepted_unchanged",
            "p3_forbidden_read_is_rejected_with_the_host_reason",
            "p3_host_answer_of_another_kind_is_rejected",
            "p3_host_answer_that_is_not_json_is_rejected",
        ]
    );
    assert_eq!(compared, 68);
}

/// docs/controller.md's twelve reasons, in the menu's order: Satisfied first, then that page's
/// order.
const REASONS: [&str; 12] = [
    "Satisfied",
    "SettingsNotProjected",
    "InstanceSplit",
    "NotRequested",
    "NoKey",
    "PreferredUnderOMEScheduler",
    "PodsPredateChange",
    "ConflictingConstraint",
    "MissingLabel",
    "DomainsFull",
    "SingleDomain",
    "Skewed",
];

#[test]
fn every_reason_is_explained_as_explain_prints_it() {
    let reasons = repository().join("controller/tests/data/reasons");
    for reason in REASONS {
        let answer = diagnose(&read(&reasons.join(format!("{reason}.yaml"))), "");
        let component = &answer["services"][0]["components"][0];
        assert_eq!(component["reason"], reason, "{answer}");
        assert_eq!(
            component["text"],
            read(&reasons.join(format!("{reason}.txt"))),
            "{reason}"
        );
    }
}

#[test]
fn every_scenario_of_the_menu_is_answered() {
    let menu: Value = serde_json::from_str(&ome_spread_web::scenarios_json()).expect("the menu's JSON");
    let menu = menu.as_array().expect("a list");
    // The seed's example, 3 more pods, 12 reasons.
    assert_eq!(menu.len(), 16);
    let mut reasons = Vec::new();
    for scenario in menu {
        if let Some(inputs) = scenario.get("admit") {
            let answer = admit(
                inputs["objects"].as_str().expect("objects"),
                inputs["pod"].as_str().expect("pod"),
                "",
            );
            // Every pod of the menu is an OMENative pod the policy gives a term (P5, P8).
            assert_eq!(
                (&answer["accepted"], &answer["mutated"]),
                (&json!(true), &json!(true)),
                "{scenario}: {answer}"
            );
        }
        if let Some(inputs) = scenario.get("diagnose") {
            let answer = diagnose(inputs["objects"].as_str().expect("objects"), "");
            reasons.push(answer["services"][0]["components"][0]["reason"].clone());
        }
    }
    // The seed's example holds; then one namespace per reason.
    assert_eq!(reasons[0], "Satisfied");
    assert_eq!(reasons[1..], REASONS);
}

/// M1 in the playground: without an InferenceReplica, the replica OME would make is projected
/// from the InferenceService over its runtime, field by field, and the pod gets its term (P5).
#[test]
fn an_inference_service_over_its_runtime_gives_the_replica_ome_would_make() {
    let objects = "apiVersion: ome.io/v1beta1
kind: InferenceService
metadata: {name: qwen3-0-6b, namespace: spread-demo}
spec:
  deploymentMode: OMENative
  runtime: {kind: ClusterServingRuntime, name: srt-qwen3-0-6b}
  engine: {topologySpreadKey: topology.kubernetes.io/zone}
---
apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata: {name: srt-qwen3-0-6b}
spec:
  engineConfig: {topologySpread: Preferred, topologySpreadKey: example.com/rack}
";
    let pod = "apiVersion: v1
kind: Pod
metadata:
  name: qwen3-0-6b-engine-0-default-0
  namespace: spread-demo
  labels: {ome.io/managed-by: OMENative, ome.io/inferenceservice: qwen3-0-6b, component: engine, ome.io/runner: default, ome.io/instance-index: \"0\"}
spec:
  containers: [{name: engine, image: sglang}]
";
    let answer = admit(objects, pod, "");
    assert_eq!(answer["accepted"], true, "{answer}");
    // topologySpread from the runtime, the key from the InferenceService.
    assert_eq!(
        answer["pod"]["spec"]["topologySpreadConstraints"],
        json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}}}])
    );
    assert_eq!(
        answer["patch"],
        json!([{"op": "add", "path": "/spec/topologySpreadConstraints",
            "value": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine",
                    "ome.io/runner": "default"}}}]}])
    );
    // An InferenceService on another mode makes no replica: the host finds none (P3).
    let answer = admit(
        &objects.replace("OMENative", "RawDeployment"),
        pod,
        "onMissingReplica: Accept",
    );
    assert_eq!(answer["accepted"], true, "{answer}");
    assert_eq!(answer["mutated"], false);
    assert_eq!(answer["warnings"].as_array().map(Vec::len), Some(1));
}

/// A pod of InferenceService `d/ds`'s engine, Instance `index`, on `node` (None: Pending).
fn engine_pod(name: &str, runner: &str, index: &str, node: Option<&str>) -> Value {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "d", "labels": {"ome.io/managed-by": "OMENative",
            "ome.io/inferenceservice": "ds", "component": "engine", "ome.io/runner": runner,
            "ome.io/instance-index": index}},
        "spec": {"containers": [{"name": "engine"}]}});
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    if runner == "leader" {
        // As the policy gives it (P5), so that the diagnosis counts the placement.
        pod["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "ds", "component": "engine",
                "ome.io/runner": "leader"}}}]);
    }
    pod
}

/// `d/ds` spread across the zones of two nodes: Instance 0 in zone-a, Instance 1's leader Pending
/// and its worker in zone-b, Instance 2 a worker alone.
fn picture_objects() -> Value {
    let node = |name: &str, zone: &str| {
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"topology.kubernetes.io/zone": zone}}})
    };
    let spread = json!({"topologySpread": "Required", "topologySpreadKey": "topology.kubernetes.io/zone"});
    let mut replica_spec = spread.clone();
    replica_spec["component"] = json!("engine");
    json!({"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "metadata": {"name": "ds", "namespace": "d"},
            "spec": {"deploymentMode": "OMENative", "engine": spread}},
        {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "metadata": {"name": "ds-engine", "namespace": "d"},
            "spec": replica_spec},
        node("node-a", "zone-a"), node("node-b", "zone-b"),
        engine_pod("ds-engine-0-leader-0", "leader", "0", Some("node-a")),
        engine_pod("ds-engine-0-worker-0", "worker", "0", Some("node-a")),
        engine_pod("ds-engine-1-leader-0", "leader", "1", None),
        engine_pod("ds-engine-1-worker-0", "worker", "1", Some("node-b")),
        engine_pod("ds-engine-2-worker-0", "worker", "2", Some("node-b")),
    ]})
}

/// Pods as the picture draws them: (name, runner, node).
fn drawn(pods: &[(&str, &str, Option<&str>)]) -> Value {
    pods.iter()
        .map(|(name, runner, node)| json!({"name": name, "runner": runner, "node": node}))
        .collect()
}

/// The picture counts what the diagnosis counts: an Instance is its leader (or only pod), in the
/// eligible domain of the leader's node; its workers are drawn under it; a Pending leader, or
/// workers without a leader, are counted in no domain. Expected columns written by hand.
#[test]
fn the_picture_draws_instances_where_the_diagnosis_counts_them() {
    let answer = diagnose(&picture_objects().to_string(), "");
    assert_eq!(
        answer["services"][0]["components"][0]["domains"],
        json!([
            {"domain": "zone-a", "instances": [{"index": "0", "pods": drawn(&[
                ("ds-engine-0-leader-0", "leader", Some("node-a")), ("ds-engine-0-worker-0", "worker", Some("node-a"))])}]},
            {"domain": "zone-b", "instances": []},
            {"domain": null, "instances": [
                {"index": "1", "pods": drawn(&[
                    ("ds-engine-1-leader-0", "leader", None), ("ds-engine-1-worker-0", "worker", Some("node-b"))])},
                {"index": "2", "pods": drawn(&[("ds-engine-2-worker-0", "worker", Some("node-b"))])},
            ]},
        ]),
        "{answer}"
    );
}

/// Instance 0 on both its slots (a SurgeThenDrain update): one Instance, drawn where its newer
/// slot's leader runs, that leader first, then the older one and the worker.
#[test]
fn the_picture_draws_an_instance_on_both_slots_once_where_its_newer_leader_runs() {
    let objects = picture_objects();
    let mut both_slots = objects.clone();
    let mut newer = engine_pod("ds-engine-0-leader-1", "leader", "0", Some("node-b"));
    newer["metadata"]["labels"]["ome.io/pod-ordinal"] = json!("1");
    both_slots["items"] = json!([
        objects["items"][0],
        objects["items"][1],
        objects["items"][2],
        objects["items"][3],
        objects["items"][4],
        newer,
        objects["items"][5]
    ]);
    let answer = diagnose(&both_slots.to_string(), "");
    assert_eq!(
        answer["services"][0]["components"][0]["domains"],
        json!([
            {"domain": "zone-a", "instances": []},
            {"domain": "zone-b", "instances": [{"index": "0", "pods": drawn(&[
                ("ds-engine-0-leader-1", "leader", Some("node-b")), ("ds-engine-0-leader-0", "leader", Some("node-a")),
                ("ds-engine-0-worker-0", "worker", Some("node-a"))])}]},
        ]),
        "{answer}"
    );
}

/// The seed's example without Instance indexes: still one Instance per pod, one per zone.
#[test]
fn the_picture_draws_pods_without_an_index_as_an_instance_each() {
    let seed = read(&repository().join("controller/tests/data/seed.yaml"));
    let unindexed: String = seed
        .lines()
        .filter(|l| !l.contains("ome.io/instance-index"))
        .map(|l| format!("{l}\n"))
        .collect();
    let answer = diagnose(&unindexed, "");
    let component = &answer["services"][0]["components"][0];
    let counts: Vec<(Value, usize)> = component["domains"]
        .as_array()
        .expect("domains")
        .iter()
        .map(|d| (d["domain"].clone(), d["instances"].as_array().map_or(0, Vec::len)))
        .collect();
    assert_eq!(counts, [(json!("zone-a"), 1), (json!("zone-b"), 1)], "{answer}");
    assert_eq!(component["reason"], "Satisfied");
}

/// What losing each domain leaves, beside the picture: on the seed's example, losing
/// either zone leaves 1 of 2, and the lost Instance fits nowhere (zone-b's node is full, and under
/// the default nodeTaintsPolicy the failed zone still counts), so the picture draws no repair;
/// without a key, nothing to lose. Written by hand.
#[test]
fn the_losses_of_each_domain_are_shown_beside_the_picture() {
    let seed = read(&repository().join("controller/tests/data/seed.yaml"));
    let answer = diagnose(&seed, "");
    assert_eq!(
        answer["services"][0]["components"][0]["losses"],
        json!({
            "table": [
                ["IF LOST", "INSTANCES LOST", "LEFT SERVING", "RE-PLACEABLE"],
                ["zone-a", "1", "1 of 2", "0 of 1 (zone-a still counts; with Honor: 0 of 1)"],
                ["zone-b", "1", "1 of 2", "0 of 1 (zone-b still counts; with Honor: 0 of 1)"],
            ],
            "sentence": "Losing zone-a leaves 1 of 2 Instances serving, and 0 of the 1 lost can be placed again elsewhere: the loss is not absorbed.",
            "domains": [
                {"domain": "zone-a", "lost": ["qwen3-0-6b-engine-0-default-0"], "placedAgain": []},
                {"domain": "zone-b", "lost": ["qwen3-0-6b-engine-1-default-0"], "placedAgain": []},
            ],
        }),
        "{answer}"
    );
    let no_key = read(&repository().join("controller/tests/data/reasons/NoKey.yaml"));
    let answer = diagnose(&no_key, "");
    assert_eq!(
        answer["services"][0]["components"][0]["losses"],
        Value::Null,
        "{answer}"
    );
}

/// The lines marked as the policy's: P12 completes OME's own constraint in place (two lines
/// inside it), P6 keeps it as it is (no line marked, nothing mutated).
#[test]
fn the_lines_the_policy_added_or_completed_are_marked() {
    let case = |name: &str| {
        let case = repository().join("tests/data/cases").join(name);
        let request: Value = serde_json::from_str(&read(&case.join("request.json"))).expect("request.json");
        let pod = serde_saphyr::to_string(&request["request"]["object"]).expect("the pod as YAML");
        let objects = pasted_objects(&case).expect("a replica");
        admit(&objects, &pod, &read(&case.join("settings.json")))
    };
    let marked = |answer: &Value| -> Vec<String> {
        let lines = answer["lines"].as_array().expect("lines");
        let added = lines.iter().filter(|l| l["added"] == true);
        added
            .map(|l| l["text"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let completed = case("p12_settings_complete_omes_constraint_in_place");
    assert_eq!(marked(&completed), ["    minDomains: 3", "    nodeTaintsPolicy: Honor"]);
    let kept = case("p6_ome_constraint_on_the_spread_key_is_kept");
    assert_eq!((marked(&kept), &kept["mutated"]), (Vec::<String>::new(), &json!(false)));
}
