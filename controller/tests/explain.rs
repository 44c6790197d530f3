//! Every reason of docs/controller.md, from the seed's example changed as each troubleshooting row
//! describes: the report (reason, Instances per domain, skew) from the core, and the exact
//! output and exit code of `ome-spread explain --from`. Each case is saved under
//! `tests/data/reasons/<reason>.yaml`, with the expected output, written by hand, beside it in
//! `<reason>.txt`; `BLESS=1 cargo test -p ome-spread-controller` rewrites the objects only, and the
//! test fails when either drifts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ome_spread_core::diagnosis::{Component, Reason, Report, diagnose};
use ome_spread_core::explain::{Objects, explain};
use ome_spread_core::settings::Settings;
use ome_spread_sim::stand_in::memory::ApiServer;
use ome_spread_sim::support::objects::{Node, Pod};
use serde_json::{Value, json};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// The seed's objects, flattened: InferenceService, runtime, replica, pods, nodes.
fn seed() -> Vec<Value> {
    let text = std::fs::read_to_string(data().join("seed.yaml")).expect("seed.yaml");
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text).expect("yaml");
    documents
        .into_iter()
        .flat_map(|d| d["items"].as_array().cloned().unwrap_or_else(|| vec![d]))
        .collect()
}

fn find<'a>(objects: &'a mut [Value], kind: &str, name: &str) -> &'a mut Value {
    objects
        .iter_mut()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .expect(name)
}

const POD_0: &str = "qwen3-0-6b-engine-0-default-0";
const POD_1: &str = "qwen3-0-6b-engine-1-default-0";
const ZONE: &str = "topology.kubernetes.io/zone";
const CLIQUE: &str = "nvidia.com/gpu.clique";

fn node(name: &str, labels: Value) -> Value {
    Node::named(name).labels(labels).json()
}

/// A node of `zone` that the model's pods select, with room for one of them (as the seed's).
fn gpu_node(name: &str, zone: &str) -> Value {
    let mut node = node(
        name,
        json!({ZONE: zone, "models.ome.io/clusterbasemodel.qwen3-0-6b": "Ready"}),
    );
    node["status"] = json!({"allocatable": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi", "pods": "110"}});
    node
}

/// A training job's pod on gpu-node-2, asking for `requests`: room another workload holds.
fn training_pod(requests: Value) -> Pod {
    Pod::named("batch", "train-0")
        .on("gpu-node-2")
        .container("trainer", requests)
}

fn third_instance(objects: &mut Vec<Value>, node: Option<&str>, when: &str) {
    let mut pod = find(objects, "Pod", POD_1).clone();
    pod["metadata"]["name"] = json!("qwen3-0-6b-engine-2-default-0");
    pod["metadata"]["labels"]["ome.io/instance-index"] = json!("2");
    pod["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] = json!(when);
    match node {
        Some(node) => pod["spec"]["nodeName"] = json!(node),
        None => {
            pod["spec"].as_object_mut().expect("spec").remove("nodeName");
            pod["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": "0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 node(s) didn't match pod topology spread constraints. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."}]});
        }
    }
    objects.push(pod);
}

/// Instance `index`'s only pod made its leader, on `leader`, with one worker on `worker` (a
/// worker from before topologyKey was set: no term keeps it beside its leader), listed after its
/// leader as an API server lists pods: by name. The runtime declares a leader and a worker, as
/// OME's `components/engine.go` needs for two pods an Instance, and the replica their runners;
/// both pods carry the Instance's pod group.
fn leader_and_worker(objects: &mut Vec<Value>, index: usize, leader: &str, worker: &str) {
    let config = &mut find(objects, "ClusterServingRuntime", "srt-qwen3-0-6b")["spec"]["engineConfig"];
    config["leader"] = json!({"runner": config["runner"].clone()});
    config["worker"] = json!({"size": 1, "runner": config["runner"].clone()});
    let runners = &mut find(objects, "InferenceReplica", "qwen3-0-6b-engine")["spec"]["runners"];
    let template = runners[0]["template"].clone();
    *runners = json!([{"name": "leader", "size": 1, "template": template}, {"name": "worker", "size": 1, "template": template}]);
    let name = format!("qwen3-0-6b-engine-{index}-default-0");
    let at = objects
        .iter()
        .position(|o| o["metadata"]["name"] == name.as_str())
        .expect("the pod");
    let pod = &mut objects[at];
    pod["metadata"]["name"] = json!(format!("qwen3-0-6b-engine-{index}-leader-0"));
    pod["metadata"]["labels"]["ome.io/runner"] = json!("leader");
    pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = json!(format!("qwen3-0-6b-engine-{index}"));
    pod["spec"]["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"]["ome.io/runner"] = json!("leader");
    pod["spec"]["nodeName"] = json!(leader);
    let mut pod = pod.clone();
    pod["metadata"]["name"] = json!(format!("qwen3-0-6b-engine-{index}-worker-0"));
    pod["metadata"]["labels"]["ome.io/runner"] = json!("worker");
    pod["spec"]
        .as_object_mut()
        .expect("spec")
        .remove("topologySpreadConstraints");
    pod["spec"]["nodeName"] = json!(worker);
    objects.insert(at + 1, pod);
}

/// `change` made to the engine's fields in the InferenceService and in its replica, as OME
/// would project them.
fn as_projected(objects: &mut [Value], change: impl Fn(&mut Value)) {
    change(&mut find(objects, "InferenceService", "qwen3-0-6b")["spec"]["engine"]);
    change(&mut find(objects, "InferenceReplica", "qwen3-0-6b-engine")["spec"]);
}

fn set_spread(objects: &mut [Value], spread: Value, when: &str) {
    as_projected(objects, |fields| fields["topologySpread"] = spread.clone());
    for pod in [POD_0, POD_1] {
        find(objects, "Pod", pod)["spec"]["topologySpreadConstraints"][0]["whenUnsatisfiable"] = json!(when);
    }
}

struct Case {
    reason: Reason,
    /// What turns the seed into this reason's case.
    change: fn(&mut Vec<Value>),
    objects: Vec<Value>,
    per_domain: &'static [(&'static str, usize)],
    skew: usize,
}

impl Case {
    /// The case of `reason`.
    fn of(reason: Reason) -> Case {
        cases()
            .into_iter()
            .find(|c| c.reason == reason)
            .unwrap_or_else(|| panic!("the {} case", reason.as_str()))
    }
}

/// The seed changed by `change`, and the per-domain counts and skew its report holds.
fn case(
    reason: Reason,
    change: fn(&mut Vec<Value>),
    per_domain: &'static [(&'static str, usize)],
    skew: usize,
) -> Case {
    let mut objects = seed();
    change(&mut objects);
    Case {
        reason,
        change,
        objects,
        per_domain,
        skew,
    }
}

/// A case of every reason, in the diagnosis' order.
fn cases() -> Vec<Case> {
    [settings_cases(), placement_cases()].into_iter().flatten().collect()
}

/// The reasons before the pods' placement is read: the settings, the Instances, the pods' terms.
fn settings_cases() -> Vec<Case> {
    vec![
        case(
            Reason::SettingsNotProjected,
            |o| {
                find(o, "InferenceService", "qwen3-0-6b")["spec"]["engine"]["topologySpreadKey"] = json!("rack");
            },
            &[],
            0,
        ),
        case(
            Reason::InstanceSplit,
            |o| {
                as_projected(o, |fields| fields["topologyKey"] = json!(CLIQUE));
                find(o, "Node", "gpu-node-1")["metadata"]["labels"][CLIQUE] = json!("cq-a1");
                find(o, "Node", "gpu-node-2")["metadata"]["labels"][CLIQUE] = json!("cq-b1");
                for (name, zone, clique) in [("gpu-node-3", "zone-a", "cq-a1"), ("gpu-node-4", "zone-b", "cq-b2")] {
                    o.push(node(
                        name,
                        json!({ZONE: zone, CLIQUE: clique, "models.ome.io/clusterbasemodel.qwen3-0-6b": "Ready"}),
                    ));
                }
                // Instance 0 inside rack cq-a1; Instance 1's worker in another rack than its leader.
                leader_and_worker(o, 0, "gpu-node-1", "gpu-node-3");
                leader_and_worker(o, 1, "gpu-node-2", "gpu-node-4");
            },
            &[],
            0,
        ),
        case(
            Reason::NotRequested,
            |o| {
                as_projected(o, |fields| {
                    fields.as_object_mut().expect("fields").remove("topologySpread");
                });
            },
            &[],
            0,
        ),
        case(
            Reason::NoKey,
            |o| {
                as_projected(o, |fields| {
                    fields.as_object_mut().expect("fields").remove("topologySpreadKey");
                });
            },
            &[],
            0,
        ),
        case(
            Reason::PreferredUnderOmeScheduler,
            |o| {
                set_spread(o, json!("Preferred"), "ScheduleAnyway");
                find(o, "Pod", POD_0)["spec"]["schedulerName"] = json!("ome-scheduler");
            },
            &[],
            0,
        ),
        case(
            Reason::PodsPredateChange,
            |o| {
                find(o, "Pod", POD_0)["spec"]
                    .as_object_mut()
                    .expect("spec")
                    .remove("topologySpreadConstraints");
            },
            &[],
            0,
        ),
        case(
            Reason::ConflictingConstraint,
            |o| {
                find(o, "Pod", POD_1)["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": ZONE,
                "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "qwen"}}}]);
            },
            &[],
            0,
        ),
    ]
}

/// The reasons read from where the pods run, and the nodes: labels, room, domains.
fn placement_cases() -> Vec<Case> {
    vec![
        case(
            Reason::MissingLabel,
            |o| {
                o.push(node(
                    "gpu-node-3",
                    json!({"models.ome.io/clusterbasemodel.qwen3-0-6b": "Ready"}),
                ));
            },
            &[],
            0,
        ),
        case(
            Reason::DomainsFull,
            |o| third_instance(o, None, "DoNotSchedule"),
            &[],
            0,
        ),
        case(
            Reason::SingleDomain,
            |o| {
                find(o, "Node", "gpu-node-2")["metadata"]["labels"][ZONE] = json!("zone-a");
            },
            &[("zone-a", 2)],
            0,
        ),
        case(
            Reason::Skewed,
            |o| {
                set_spread(o, json!("Preferred"), "ScheduleAnyway");
                o.push(node(
                    "gpu-node-3",
                    json!({ZONE: "zone-a", "models.ome.io/clusterbasemodel.qwen3-0-6b": "Ready"}),
                ));
                find(o, "Pod", POD_1)["spec"]["nodeName"] = json!("gpu-node-3");
                third_instance(o, Some("gpu-node-1"), "ScheduleAnyway");
            },
            &[("zone-a", 3), ("zone-b", 0)],
            3,
        ),
        case(Reason::Satisfied, |_| {}, &[("zone-a", 1), ("zone-b", 1)], 0),
    ]
}

fn to_yaml(objects: &[Value]) -> String {
    let list = json!({"apiVersion": "v1", "kind": "List", "items": objects});
    serde_saphyr::to_string(&list).expect("yaml")
}

#[test]
fn every_reason_is_reported_and_explained() {
    let dir = data().join("reasons");
    let bless = std::env::var_os("BLESS").is_some();
    std::fs::create_dir_all(&dir).expect("dir");
    let cases = cases();
    assert_eq!(
        cases.iter().map(|c| c.reason).collect::<Vec<_>>(),
        Reason::ALL,
        "one case per reason, in order"
    );
    let mut failures = Vec::new();
    for case in &cases {
        let name = case.reason.as_str();
        let objects = &case.objects;
        let report = report_of(objects, &Settings::default());
        let per_domain: BTreeMap<String, usize> = case.per_domain.iter().map(|(d, n)| ((*d).to_owned(), *n)).collect();
        if (report.reason, &report.instances_per_domain, report.skew) != (case.reason, &per_domain, case.skew) {
            failures.push(format!(
                "{name}: report {:?} {:?} skew {}",
                report.reason, report.instances_per_domain, report.skew
            ));
        }

        let yaml = dir.join(format!("{name}.yaml"));
        let expected = dir.join(format!("{name}.txt"));
        if bless {
            std::fs::write(&yaml, to_yaml(objects)).expect("write");
        }
        if std::fs::read_to_string(&yaml).ok().as_deref() != Some(to_yaml(objects).as_str()) {
            failures.push(format!("{name}.yaml is stale"));
        }
        let output = Command::new(env!("CARGO_BIN_EXE_ome-spread"))
            .args(["explain", "qwen3-0-6b", "-n", "spread-demo", "--from"])
            .arg(&yaml)
            .output()
            .expect("run ome-spread");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        // The expected output is written by hand: BLESS rewrites the objects, never what they mean.
        if std::fs::read_to_string(&expected).ok() != Some(stdout.clone()) {
            failures.push(format!("{name}: explain printed\n{stdout}"));
        }
        let code = if case.reason.holds() { 0 } else { 1 };
        if output.status.code() != Some(code) {
            failures.push(format!("{name}: exit {:?}, expected {code}", output.status.code()));
        }
        if !stdout.contains(&format!(
            "Spread: {} ({name})",
            if code == 0 { "True" } else { "False" }
        )) {
            failures.push(format!("{name}: the reason is not printed"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// docs/controller.md: the first reason from the top that applies. Each case's change together with
/// the next one's gives the upper reason (MissingLabel over a pod Pending on the spread, ...).
#[test]
fn of_two_reasons_that_apply_the_upper_one_is_reported() {
    let cases = cases();
    for pair in cases.windows(2) {
        let mut objects = seed();
        (pair[0].change)(&mut objects);
        (pair[1].change)(&mut objects);
        let report = report_of(&objects, &Settings::default());
        assert_eq!(
            report.reason,
            pair[0].reason,
            "{} with {}: {}",
            pair[0].reason.as_str(),
            pair[1].reason.as_str(),
            report.message
        );
    }
}

#[test]
fn bad_input_exits_2_with_a_message() {
    let run = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_ome-spread"))
            .args(args)
            .output()
            .expect("run");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let seed = data().join("seed.yaml");
    let seed = seed.to_str().expect("path");
    assert_eq!(
        run(&["explain", "nope", "-n", "spread-demo", "--from", seed]),
        (
            Some(2),
            format!("error: no InferenceService spread-demo/nope in {seed}\n")
        )
    );
    assert_eq!(
        run(&["explain", "qwen3-0-6b", "-n", "spread-demo", "--component", "decoder", "--from", seed]),
        (Some(2), "error: InferenceService spread-demo/qwen3-0-6b has no InferenceReplica for its decoder: the component doesn't run on OMENative\n".into())
    );
    let (code, _) = run(&["explain", "qwen3-0-6b", "--from", "/nonexistent.yaml"]);
    assert_eq!(code, Some(2));

    // Without -n, the namespace the saved InferenceService names; none, or more than one, is said.
    assert_eq!(
        run(&["explain", "nope", "--from", seed]),
        (Some(2), format!("error: no InferenceService nope in {seed}\n"))
    );
    let saved = |name: &str, objects: &[Value]| {
        let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&file, to_yaml(objects)).expect("saved");
        file.to_str().expect("path").to_owned()
    };
    let mut twice = crate::seed();
    let mut other = find(&mut twice, "InferenceService", "qwen3-0-6b").clone();
    other["metadata"]["namespace"] = json!("team-a");
    twice.push(other);
    let twice = saved("twice.yaml", &twice);
    assert_eq!(
        run(&["explain", "qwen3-0-6b", "--from", &twice]),
        (
            Some(2),
            format!(
                "error: InferenceService qwen3-0-6b is in more than one namespace in {twice} (spread-demo, team-a): name one with -n\n"
            )
        )
    );

    // The runtime the InferenceService names is not saved: the settings in effect are not known.
    let mut objects = crate::seed();
    objects.retain(|o| o["kind"] != "ClusterServingRuntime");
    let no_runtime = saved("no-runtime.yaml", &objects);
    assert_eq!(
        run(&["explain", "qwen3-0-6b", "--from", &no_runtime]),
        (
            Some(2),
            format!(
                "error: ClusterServingRuntime srt-qwen3-0-6b is not in {no_runtime}: InferenceService spread-demo/qwen3-0-6b runs on it\n"
            )
        )
    );
}

/// A saved quantity the API server would refuse is named, object, field and value, as kubectl
/// would refuse the file: never a request counted as nothing.
#[test]
fn an_unreadable_quantity_exits_2_naming_it() {
    let saved = |name: &str, objects: &[Value]| {
        let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
        std::fs::write(&file, to_yaml(objects)).expect("saved");
        file.to_str().expect("path").to_owned()
    };
    let explain = |file: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_ome-spread"))
            .args(["explain", "qwen3-0-6b", "--from", file])
            .output()
            .expect("run");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let why = "is not a quantity: a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki to Ei) or exponent (e3, E-3)";
    let mut objects = crate::seed();
    objects.push(training_pod(json!({"cpu": "86000001x"})).json());
    let file = saved("bad-request.yaml", &objects);
    assert_eq!(
        explain(&file),
        (
            Some(2),
            format!(
                "error: {file}: Pod batch/train-0: spec.containers[0].resources.requests.cpu: \"86000001x\" {why}\n"
            )
        )
    );
    let mut objects = crate::seed();
    find(&mut objects, "Node", "gpu-node-2")["status"]["allocatable"]["memory"] = json!("30 Gi");
    let file = saved("bad-allocatable.yaml", &objects);
    assert_eq!(
        explain(&file),
        (
            Some(2),
            format!("error: {file}: Node gpu-node-2: status.allocatable.memory: \"30 Gi\" {why}\n")
        )
    );
}

/// Room counts CPU as kube-scheduler does, to the milli-CPU rounded up: a training pod asking
/// for 86000001u of zone-b's 96 cores leaves 9.999999, too few for a 10-core engine pod, so no
/// move can go there, as with 86001m; one asking for 86000000u leaves 10, and the move hints the
/// node.
#[test]
fn a_request_in_micro_cpus_holds_its_room_as_in_milli_cpus() {
    let with_training = |cpu: &str| {
        let mut objects = Case::of(Reason::Skewed).objects;
        find(&mut objects, "Node", "gpu-node-2")["status"]["allocatable"] =
            json!({"nvidia.com/gpu": "2", "cpu": "96", "memory": "512Gi", "pods": "110"});
        objects.push(training_pod(json!({"nvidia.com/gpu": "1", "cpu": cpu})).json());
        explained(objects)
    };
    let no_room = "What to do: No migration can fix it now: no eligible domain has room for one more Instance. \
        Free room for one more Instance in zone-b.\n";
    for cpu in ["86000001u", "86001m"] {
        let text = with_training(cpu);
        assert!(text.ends_with(no_room), "{cpu}: {text}");
    }
    let text = with_training("86000000u");
    assert!(text.ends_with(&format!("{SKEWED_ACTION}{FIRST_MOVE}")), "{text}");
}

/// `--from` without -n reads the namespace the saved InferenceService names (spread-demo).
#[test]
fn explain_from_reads_the_namespace_the_saved_inference_service_names() {
    let output = Command::new(env!("CARGO_BIN_EXE_ome-spread"))
        .args(["explain", "qwen3-0-6b", "--from"])
        .arg(data().join("seed.yaml"))
        .output()
        .expect("run");
    let expected = std::fs::read_to_string(data().join("reasons/Satisfied.txt")).expect("expected");
    assert_eq!(String::from_utf8_lossy(&output.stdout), expected);
    assert_eq!(output.status.code(), Some(0));
}

/// `explain` without --from reads the same objects from the cluster (here a fake API server
/// over each reason's fixture) and prints exactly what `explain --from` prints for them.
#[tokio::test]
async fn live_explain_prints_what_explain_from_prints() {
    for &reason in Reason::ALL {
        let name = reason.as_str();
        let dir = data().join("reasons");
        let text = std::fs::read_to_string(dir.join(format!("{name}.yaml"))).expect("fixture");
        let list: Value = serde_saphyr::from_str(&text).expect("yaml");
        let client = ApiServer::holding(list["items"].as_array().expect("items").clone()).client();
        let objects = ome_spread_controller::explain::fetch(client, "qwen3-0-6b", "spread-demo")
            .await
            .expect(name);
        let (printed, holds) = ome_spread_controller::explain::run(
            "qwen3-0-6b",
            "spread-demo",
            None,
            &objects,
            "the cluster",
            &Settings::default(),
            false,
        )
        .expect(name);
        let expected = std::fs::read_to_string(dir.join(format!("{name}.txt"))).expect("expected");
        assert_eq!(printed, expected, "{name}");
        assert_eq!(holds, reason.holds(), "{name}");
    }
}

/// The reason and message for the seed changed by `change`, diagnosed with `settings`.
fn diagnosed(change: impl FnOnce(&mut Vec<Value>), settings: Settings) -> (Reason, String) {
    let mut objects = seed();
    change(&mut objects);
    let report = report_of(&objects, &settings);
    (report.reason, report.message)
}

/// The core's report on the one component among `objects`.
fn report_of(objects: &[Value], settings: &Settings) -> Report {
    let read = Objects::new(objects.to_vec()).expect("readable objects");
    let service = read.parts.services.first().expect("the service");
    let replica = read.parts.replicas.first().expect("the replica");
    let pods: Vec<_> = (objects.iter().filter(|o| o["kind"] == "Pod"))
        .map(ome_spread_sim::support::objects::read)
        .collect();
    let component = Component::new(service, read.runtime_of(service), replica, &pods, &read.nodes);
    diagnose(&component, settings).expect("a report")
}

/// OME's own constraint (its selector exactly) on `key`, as OME v1.3 renders it.
fn omes_constraint(key: &str) -> Value {
    json!({"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}}})
}

#[test]
fn omes_terms_on_an_older_key_predate_the_change_and_never_conflict() {
    let foreign_on_zone = json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "qwen"}}});
    let predate = "the pods qwen3-0-6b-engine-0-default-0 are older than the change: they have no SPREAD-KEY, or a SPREAD-KEY or WHEN from before it";
    // PodsPredateChange: OME rendered pod 0 on the Instance's older key, beside a foreign
    // constraint on the key now in effect.
    let older = omes_constraint("example.com/rack");
    let both = json!([foreign_on_zone.clone(), older.clone()]);
    assert_eq!(
        diagnosed(
            |o| find(o, "Pod", POD_0)["spec"]["topologySpreadConstraints"] = both,
            Settings::default()
        ),
        (Reason::PodsPredateChange, predate.to_owned())
    );
    assert_eq!(
        diagnosed(
            |o| find(o, "Pod", POD_0)["spec"]["topologySpreadConstraints"] = json!([older]),
            Settings::default()
        ),
        (Reason::PodsPredateChange, predate.to_owned())
    );
    // ConflictingConstraint: a foreign constraint on the key, and nothing of OME's.
    assert_eq!(
        diagnosed(|o| find(o, "Pod", POD_0)["spec"]["topologySpreadConstraints"] = json!([foreign_on_zone]), Settings::default()),
        (
            Reason::ConflictingConstraint,
            "WHEN isn't what you set on qwen3-0-6b-engine-0-default-0: your runtime or InferenceService already sets a spread constraint on topology.kubernetes.io/zone, and OME keeps it".to_owned()
        )
    );
}

#[test]
fn p12_the_constraint_in_effect_is_omes_completed_by_the_settings() {
    let honor = Settings::from_json(&json!({"nodeTaintsPolicy": "Honor", "minDomains": 2})).expect("settings");
    // The seed's pods carry OME's constraint as OME renders it: without the settings' fields.
    assert_eq!(
        diagnosed(|_| {}, honor.clone()).0,
        Reason::PodsPredateChange,
        "pods OME rendered before the policy completed them predate the settings"
    );
    let completed = |o: &mut Vec<Value>| {
        for pod in [POD_0, POD_1] {
            let constraint = &mut find(o, "Pod", pod)["spec"]["topologySpreadConstraints"][0];
            constraint["nodeTaintsPolicy"] = json!("Honor");
            constraint["minDomains"] = json!(2);
        }
    };
    assert_eq!(diagnosed(completed, honor).0, Reason::Satisfied);
}

#[test]
fn p4_empty_keys_are_unset_in_the_settings_in_effect() {
    let empty_keys = |o: &mut Vec<Value>| {
        find(o, "InferenceService", "qwen3-0-6b")["spec"]["engine"]["topologySpreadKey"] = json!("");
        let replica = &mut find(o, "InferenceReplica", "qwen3-0-6b-engine")["spec"];
        replica["topologySpreadKey"] = json!("");
        replica["topologyKey"] = json!("");
    };
    assert_eq!(
        diagnosed(empty_keys, Settings::default()),
        (
            Reason::NoKey,
            "SPREAD-KEY and TOPOLOGY-KEY are both <none>: OME has no key to spread on".to_owned()
        )
    );
    let mut objects = seed();
    empty_keys(&mut objects);
    let yaml = std::env::temp_dir().join(format!("ome-spread-empty-keys-{}.yaml", std::process::id()));
    std::fs::write(&yaml, to_yaml(&objects)).expect("write");
    let output = Command::new(env!("CARGO_BIN_EXE_ome-spread"))
        .args(["explain", "qwen3-0-6b", "-n", "spread-demo", "--from"])
        .arg(&yaml)
        .output()
        .expect("run ome-spread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let replica_row: Vec<&str> = stdout.lines().nth(1).unwrap_or_default().split_whitespace().collect();
    assert_eq!(
        replica_row,
        ["qwen3-0-6b-engine", "Required", "<none>", "<none>"],
        "{stdout}"
    );
    // OME's render reads both keys as unset; its Alfred refuses the empty topologyKey.
    assert!(
        stdout.ends_with("Note: Alfred will not simulate or relocate any Instance of this component: its replica's topologyKey is \"\" (\"configured topology key is empty\").\n"),
        "{stdout}"
    );
    assert_eq!(output.status.code(), Some(1));
}

/// What `explain` prints for saved objects, and whether the spread holds.
fn explained(objects: Vec<Value>) -> String {
    let objects = ome_spread_core::explain::Objects::new(objects).expect("readable objects");
    let (text, _) = ome_spread_controller::explain::run(
        "qwen3-0-6b",
        "spread-demo",
        None,
        &objects,
        "saved objects",
        &Settings::default(),
        false,
    )
    .expect("explained");
    text
}

const SKEWED_ACTION: &str =
    "What to do: Request an Instance migration to move an Instance out of the fullest domain.\n";

/// Rebalance (docs/rebalance.md): under "What to do", every move of the plan with its `kubectl ome`
/// command, in the order to request them; or why a skew has no plan.
#[test]
fn explain_prints_the_whole_plan_or_why_a_skew_has_none() {
    let skewed = Case::of(Reason::Skewed);
    // A fourth Instance in zone-a, and zone-c's gpu-node-4 with room for one: 4,0,0 takes two moves.
    let mut four = skewed.objects.clone();
    let mut pod_3 = find(&mut four, "Pod", "qwen3-0-6b-engine-2-default-0").clone();
    pod_3["metadata"]["name"] = json!("qwen3-0-6b-engine-3-default-0");
    pod_3["metadata"]["labels"]["ome.io/instance-index"] = json!("3");
    pod_3["spec"]["nodeName"] = json!("gpu-node-3");
    four.push(pod_3);
    four.push(gpu_node("gpu-node-4", "zone-c"));
    let text = explained(four);
    let expected = [
        SKEWED_ACTION,
        "  1. Move Instance 3 from gpu-node-3 (zone-a) to zone-b: kubectl ome migration start qwen3-0-6b --component engine --instance 3 --from-node gpu-node-3 --hint-node gpu-node-2 -n spread-demo\n",
        "  2. Move Instance 2 from gpu-node-1 (zone-a) to zone-c: kubectl ome migration start qwen3-0-6b --component engine --instance 2 --from-node gpu-node-1 --hint-node gpu-node-4 -n spread-demo\n",
    ]
    .concat();
    assert!(text.ends_with(&expected), "{text}");

    // Another workload's pod takes zone-b's only GPU: no domain can take one more Instance, and
    // What to do says so once, with what would make a move possible.
    let mut full = skewed.objects.clone();
    full.push(
        Pod::named("batch", "batch-0")
            .on("gpu-node-2")
            .container("job", json!({"nvidia.com/gpu": "1"}))
            .json(),
    );
    let text = explained(full);
    assert!(
        text.ends_with("What to do: No migration can fix it now: no eligible domain has room for one more Instance. Free room for one more Instance in zone-b.\n"),
        "{text}"
    );

    // zone-b's node cordoned: it still counts (nodeTaintsPolicy Ignore), with no node that takes
    // the pods; Honor would stop it counting.
    let mut cordoned = skewed.objects;
    find(&mut cordoned, "Node", "gpu-node-2")["spec"] = json!({"unschedulable": true});
    let text = explained(cordoned);
    assert!(
        text.ends_with("What to do: No migration can fix it now: no eligible domain has room for one more Instance. \
            Let the nodes of zone-b take the pods (uncordon them, or tolerate their taints), or set nodeTaintsPolicy: Honor in the policy's settings, so that zone-b, where no node takes the pods, stops counting.\n"),
        "{text}"
    );
}

const FIRST_MOVE: &str = "  1. Move Instance 2 from gpu-node-1 (zone-a) to zone-b: kubectl ome migration start qwen3-0-6b --component engine --instance 2 --from-node gpu-node-1 --hint-node gpu-node-2 -n spread-demo\n";

/// OME v1.3 without its migration caps holds every request in Accepted: the plan is
/// still printed, and What to do says so in OME's words, and what to set. The replica's own
/// record that OME holds names the request.
#[test]
fn explain_prints_the_plan_and_says_ome_holds_every_migration_for_its_caps() {
    let mut held = Case::of(Reason::Skewed).objects;
    find(&mut held, "InferenceReplica", "qwen3-0-6b-engine")["status"] = json!({
        "conditions": [{"type": "MigrationPolicyUnconfigured", "status": "True", "reason": "MigrationCapacityUnconfigured",
            "message": "lifecycle.audit is not configured; migration requests wait instead of executing",
            "lastTransitionTime": "2026-11-30T12:00:00Z"}],
        "migrations": [{"requestUUID": "7c9e6679-7425-40de-944b-e07fc1f90ae7", "trigger": "Manual", "sourceInstance": 1,
            "phase": "Accepted", "message": "waiting for migration capacity policy (no lifecycle.audit configured)"}]});
    let text = explained(held);
    let expected = [
        "What to do: Request an Instance migration to move an Instance out of the fullest domain. \
            OME holds every migration request of InferenceReplica spread-demo/qwen3-0-6b-engine in Accepted (migration 7c9e6679-7425-40de-944b-e07fc1f90ae7 among them): \
            waiting for migration capacity policy (no lifecycle.audit configured). \
            Set ome.controller.lifecycle.audit (maxInFlightMigrations, maxMigrationsPerWindow and window, each above zero) in OME's chart values, \
            or the same audit block under lifecycle in its inferenceservice-config ConfigMap.\n",
        FIRST_MOVE,
    ]
    .concat();
    assert!(text.ends_with(&expected), "{text}");
}

/// Alfred refuses to relocate an Instance whose anchor carries a constraint with OME's selector
/// and a maxSkew other than 1 (docs/rules.md, on `maxSkew` and Alfred): explain names it, after
/// the plan.
#[test]
fn explain_names_the_instances_alfred_will_not_relocate() {
    let mut objects = Case::of(Reason::Skewed).objects;
    find(&mut objects, "Pod", "qwen3-0-6b-engine-1-default-0")["spec"]["topologySpreadConstraints"][0]["maxSkew"] =
        json!(2);
    let text = explained(objects);
    let expected = [
        SKEWED_ACTION,
        FIRST_MOVE,
        "Note: Alfred will not simulate or relocate Instance 1 (pod qwen3-0-6b-engine-1-default-0, maxSkew 2): \
            the anchor pod of each carries a spread constraint with OME's selector and a maxSkew other than 1 \
            (\"configured topology spread does not match observed Pod constraints\").\n",
    ]
    .concat();
    assert!(text.ends_with(&expected), "{text}");
}

/// More than 20 nodes: a line per domain, with how many nodes and the whole Instances it can
/// still start (each node of the seed's shape has room for one engine pod); `--nodes` lists them.
#[test]
fn more_than_20_nodes_are_summed_up_per_domain_unless_every_node_is_asked_for() {
    let mut objects = seed();
    let shape = find(&mut objects, "Node", "gpu-node-1").clone();
    for (n, zone) in (3..=22).zip(["zone-a", "zone-b", "zone-c", "zone-b"].into_iter().cycle()) {
        let mut node = shape.clone();
        node["metadata"]["name"] = json!(format!("gpu-node-{n}"));
        node["metadata"]["labels"][ZONE] = json!(zone);
        objects.push(node);
    }
    let yaml = Path::new(env!("CARGO_TARGET_TMPDIR")).join("22-nodes.yaml");
    std::fs::write(&yaml, to_yaml(&objects)).expect("saved");
    let explain = |every: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_ome-spread"))
            .args(["explain", "qwen3-0-6b", "--from"])
            .arg(&yaml)
            .args(every)
            .output()
            .expect("run");
        String::from_utf8_lossy(&output.stdout).into_owned()
    };
    let summed = explain(&[]);
    let nodes: Vec<&str> = summed.split("\n\n").nth(2).unwrap_or_default().lines().collect();
    // zone-a: gpu-node-1 (taken) and 3, 7, ...: 6 nodes, 5 free; zone-b: 2 (taken), 4, 6, 8, ...: 11, 10; zone-c: 5.
    assert_eq!(
        nodes,
        [
            "ZONE     NODES   ROOM",
            "zone-a   6       5",
            "zone-b   11      10",
            "zone-c   5       5",
        ],
        "{summed}"
    );
    let every = explain(&["--nodes"]);
    let listed = every.split("\n\n").nth(2).unwrap_or_default().lines().count();
    assert_eq!(listed, 1 + 22, "{every}");
}

/// InstanceSplit (docs/controller.md): whenever topologyKey is set, whatever topologySpread is; a
/// node without the rack label splits an Instance too; a worker still Pending does not, nor does
/// a worker on a node the objects do not hold (its rack is not known).
#[test]
fn an_instance_split_across_racks_is_named_whatever_topology_spread_is() {
    let split = Case::of(Reason::InstanceSplit);
    let (reason, message) = diagnosed(
        |o| {
            (split.change)(o);
            // Instance 1 whole in cq-b1; Instance 0's worker on a node without a rack.
            find(o, "Pod", "qwen3-0-6b-engine-1-worker-0")["spec"]["nodeName"] = json!("gpu-node-2");
            let labels = &mut find(o, "Node", "gpu-node-3")["metadata"]["labels"];
            labels.as_object_mut().expect("labels").remove(CLIQUE);
            // Off: the rack is still kept, so an Instance is still whole or split.
            (Case::of(Reason::NotRequested).change)(o);
        },
        Settings::default(),
    );
    assert_eq!(reason, Reason::InstanceSplit);
    assert_eq!(
        message,
        "the pods of an Instance run in more than one rack of nvidia.com/gpu.clique, or on a node without it: \
         Instance 0: qwen3-0-6b-engine-0-leader-0 on gpu-node-1 (cq-a1), qwen3-0-6b-engine-0-worker-0 on gpu-node-3 (<none>)"
    );

    let (reason, _) = diagnosed(
        |o| {
            (split.change)(o);
            // Instance 1's worker Pending, Instance 0's on a node that is not among the objects.
            let pod = find(o, "Pod", "qwen3-0-6b-engine-1-worker-0");
            pod["spec"].as_object_mut().expect("spec").remove("nodeName");
            find(o, "Pod", "qwen3-0-6b-engine-0-worker-0")["spec"]["nodeName"] = json!("gpu-node-9");
        },
        Settings::default(),
    );
    assert_eq!(reason, Reason::Satisfied);
}

/// Satisfied counts the placed Instances only; one still Pending for want of GPUs (not on the
/// spread constraint, so not DomainsFull) is named apart, never counted in a domain.
#[test]
fn a_pending_instance_is_named_apart_from_the_placed_ones() {
    let (reason, message) = diagnosed(
        |o| {
            third_instance(o, None, "DoNotSchedule");
            let pod = find(o, "Pod", "qwen3-0-6b-engine-2-default-0");
            pod["status"]["conditions"][0]["message"] = json!(
                "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
            );
        },
        Settings::default(),
    );
    assert_eq!(reason, Reason::Satisfied);
    assert_eq!(
        message,
        "the 2 placed Instances run in 2 different domains of topology.kubernetes.io/zone; qwen3-0-6b-engine-2-default-0 is Pending"
    );
}

/// Satisfied says that losing a domain leaves Instances serving only when they run in two domains
/// or more: one Instance, or every Instance in one domain (a maxSkew at least their number), is
/// Satisfied too, and losing that domain leaves none; so it is while the others are Pending.
#[test]
fn satisfied_in_one_domain_says_losing_it_leaves_none_serving() {
    let report = |change: &dyn Fn(&mut Vec<Value>), settings: Settings| {
        let mut objects = seed();
        change(&mut objects);
        let report = report_of(&objects, &settings);
        (report.reason, report.message, report.action)
    };
    let one_domain = "Nothing the spread requires, but losing that domain leaves no Instance serving. To survive it, \
                      run two Instances or more with a maxSkew below their number, on nodes in two domains or more.";
    let one = report(&|o| o.retain(|o| o["metadata"]["name"] != POD_1), Settings::default());
    assert_eq!(
        one,
        (
            Reason::Satisfied,
            "the 1 Instance runs in 1 domain of topology.kubernetes.io/zone".into(),
            one_domain
        )
    );
    let piled = report(
        &|o| {
            let zone_a = find(o, "Pod", POD_0)["spec"]["nodeName"].clone();
            find(o, "Pod", POD_1)["spec"]["nodeName"] = zone_a;
        },
        Settings {
            max_skew: 2,
            ..Settings::default()
        },
    );
    assert_eq!(
        piled,
        (
            Reason::Satisfied,
            "the 2 Instances run in 1 domain of topology.kubernetes.io/zone".into(),
            one_domain
        )
    );
    // Pending for want of GPUs, not on the spread constraint: not DomainsFull.
    let unbound = |o: &mut Vec<Value>, name: &str| {
        let pod = find(o, "Pod", name);
        pod["spec"].as_object_mut().expect("spec").remove("nodeName");
        pod["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
            "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]});
    };
    let one_placed = report(&|o| unbound(o, POD_1), Settings::default());
    assert_eq!(
        one_placed,
        (
            Reason::Satisfied,
            "the 1 placed Instance runs in 1 domain of topology.kubernetes.io/zone; qwen3-0-6b-engine-1-default-0 is Pending"
                .into(),
            "Nothing yet: losing that domain leaves no Instance serving until the Pending ones are placed."
        )
    );
    let none_placed = report(
        &|o| {
            unbound(o, POD_0);
            unbound(o, POD_1);
        },
        Settings::default(),
    );
    assert_eq!(
        none_placed,
        (
            Reason::Satisfied,
            "no Instance runs in a domain of topology.kubernetes.io/zone; qwen3-0-6b-engine-0-default-0, qwen3-0-6b-engine-1-default-0 are Pending"
                .into(),
            "Nothing yet: the Instances count once they run in a domain."
        )
    );
    let spread = report(&|_| (), Settings::default());
    assert_eq!(
        spread.2,
        "Nothing: losing one domain leaves the Instances in the others serving."
    );
}

/// Live, the room counts every pod of the cluster, of any workload, as `--from` counts every
/// saved pod: a training job's pod in another namespace holding zone-b's only GPU leaves no move.
#[tokio::test]
async fn live_explain_counts_the_room_other_workloads_hold() {
    let mut objects = Case::of(Reason::Skewed).objects;
    objects.push(
        training_pod(json!({"nvidia.com/gpu": "1"}))
            .label("app", "train")
            .running()
            .json(),
    );
    let client = ApiServer::holding(objects).client();
    let fetched = ome_spread_controller::explain::fetch(client, "qwen3-0-6b", "spread-demo")
        .await
        .expect("fetched");
    let (printed, _) = ome_spread_controller::explain::run(
        "qwen3-0-6b",
        "spread-demo",
        None,
        &fetched,
        "the cluster",
        &Settings::default(),
        false,
    )
    .expect("explained");
    assert!(
        printed.ends_with("What to do: No migration can fix it now: no eligible domain has room for one more Instance. Free room for one more Instance in zone-b.\n"),
        "{printed}"
    );
}

/// `explain` on the Satisfied fixture with `args`: its exit code, stdout and stderr.
fn explain_satisfied(args: &[&str]) -> (Option<i32>, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_ome-spread"))
        .args(["explain", "qwen3-0-6b", "--from"])
        .arg(data().join("reasons/Satisfied.yaml"))
        .args(args)
        .output()
        .expect("run");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn written(name: &str, text: &str) -> String {
    let file = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&file, text).expect("written");
    file.to_str().expect("path").to_owned()
}

/// `--settings` takes policy.yaml as it ships (its ClusterAdmissionPolicy's spec.settings among
/// its documents), or the settings alone.
#[test]
fn explain_reads_the_settings_of_the_policy_in_policy_yaml() {
    let policy_yaml = Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy.yaml");
    let shipped = std::fs::read_to_string(&policy_yaml).expect("policy.yaml");
    let satisfied = std::fs::read_to_string(data().join("reasons/Satisfied.txt")).expect("expected");
    assert_eq!(
        explain_satisfied(&["--settings", policy_yaml.to_str().expect("path")]),
        (Some(0), satisfied, String::new())
    );
    // Honor taints: the pods OME rendered without it predate the settings.
    let honor = shipped.replace("# nodeTaintsPolicy: Honor", "nodeTaintsPolicy: Honor");
    assert_ne!(honor, shipped);
    let predate = "Spread: False (PodsPredateChange)\n";
    let (code, out, err) = explain_satisfied(&["--settings", &written("honor-policy.yaml", &honor)]);
    assert_eq!((code, err.as_str()), (Some(1), ""));
    assert!(out.contains(predate), "{out}");
    let (code, out, err) = explain_satisfied(&["--settings", &written("honor.yaml", "nodeTaintsPolicy: Honor\n")]);
    assert_eq!((code, err.as_str()), (Some(1), ""));
    assert!(out.contains(predate), "{out}");
}

/// A file whose settings are not to be told apart, or bad, is named with what is wrong.
#[test]
fn explain_names_a_settings_file_it_cannot_read() {
    let policy = |name: &str, settings: &str| {
        format!(
            "apiVersion: policies.kubewarden.io/v1\nkind: ClusterAdmissionPolicy\nmetadata:\n  name: {name}\nspec:\n  module: registry://example/ome-spread:v0.1.0\n  settings: {settings}\n"
        )
    };
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: x\n";
    let two = written("two.yaml", &format!("{}---\n{}", policy("a", "{}"), policy("b", "{}")));
    assert_eq!(
        explain_satisfied(&["--settings", &two]),
        (
            Some(2),
            String::new(),
            format!("error: {two}: 2 ClusterAdmissionPolicies (a, b): keep the one whose settings to read\n")
        )
    );
    let none = written("none.yaml", &format!("{role}---\n{role}"));
    assert_eq!(
        explain_satisfied(&["--settings", &none]),
        (
            Some(2),
            String::new(),
            format!(
                "error: {none}: no ClusterAdmissionPolicy among its documents (ClusterRole, ClusterRole), nor the settings alone\n"
            )
        )
    );
    let alone = written("role.yaml", role);
    assert_eq!(
        explain_satisfied(&["--settings", &alone]),
        (
            Some(2),
            String::new(),
            format!(
                "error: {alone}: no ClusterAdmissionPolicy among its documents (ClusterRole), nor the settings alone\n"
            )
        )
    );
    let bad = written(
        "bad-policy.yaml",
        &format!("{role}---\n{}", policy("ome-spread", "{maxSkew: 0}")),
    );
    assert_eq!(
        explain_satisfied(&["--settings", &bad]),
        (
            Some(2),
            String::new(),
            format!(
                "error: {bad}: ClusterAdmissionPolicy ome-spread: spec.settings: maxSkew must be a whole number of at least 1, got 0\n"
            )
        )
    );
}

/// Live explain reads the settings of the cluster's ClusterAdmissionPolicy; absent, it says so
/// and how to pass them instead, rather than diagnose on the defaults.
#[tokio::test]
async fn live_explain_reads_the_settings_of_the_clusters_policy() {
    let policy = json!({"apiVersion": "policies.kubewarden.io/v1", "kind": "ClusterAdmissionPolicy",
        "metadata": {"name": "ome-spread"}, "spec": {"settings": {"nodeTaintsPolicy": "Honor"}}});
    let client = ApiServer::holding(vec![policy]).client();
    let read = ome_spread_controller::policy::fetch_settings(client.clone(), "ome-spread").await;
    assert_eq!(
        read,
        Ok(Settings::from_json(&json!({"nodeTaintsPolicy": "Honor"})).expect("settings"))
    );
    assert_eq!(
        ome_spread_controller::policy::fetch_settings(client, "spread").await,
        Err(
            "no ClusterAdmissionPolicy spread in the cluster: name it with --policy, or pass the settings with --settings policy.yaml"
                .into()
        )
    );
}

/// During a SurgeThenDrain update OME starts an Instance's pod on its second slot
/// (`-default-1`, the same Instance index) before it drains the first (docs/rules.md): the spread
/// counts the Instance once, where its newer slot runs, and the losses and the words are those
/// of slot 0; then the older pod gone, the same.
#[test]
fn an_instance_on_both_slots_is_counted_once() {
    let both_slots = |o: &mut Vec<Value>| {
        o.push(gpu_node("gpu-node-3", "zone-b"));
        let mut second = find(o, "Pod", POD_1).clone();
        second["metadata"]["name"] = json!("qwen3-0-6b-engine-1-default-1");
        second["metadata"]["labels"]["ome.io/pod-ordinal"] = json!("1");
        second["spec"]["nodeName"] = json!("gpu-node-3");
        o.push(second);
    };
    let report = |change: &dyn Fn(&mut Vec<Value>)| {
        let mut objects = seed();
        change(&mut objects);
        let report = report_of(&objects, &Settings::default());
        (report.reason, report.message, report.instances_per_domain, report.skew)
    };
    let one_each = BTreeMap::from([("zone-a".to_owned(), 1), ("zone-b".to_owned(), 1)]);
    let satisfied = (
        Reason::Satisfied,
        "the 2 Instances run in 2 different domains of topology.kubernetes.io/zone".to_owned(),
        one_each,
        0,
    );
    assert_eq!(report(&both_slots), satisfied);
    let drained = |o: &mut Vec<Value>| {
        both_slots(o);
        o.retain(|p| p["metadata"]["name"] != POD_1);
    };
    assert_eq!(report(&drained), satisfied);

    let mut objects = seed();
    both_slots(&mut objects);
    let expected = "\
NAME                SPREAD     SPREAD-KEY                    TOPOLOGY-KEY
qwen3-0-6b-engine   Required   topology.kubernetes.io/zone   <none>

NAME                            SPREAD-KEY                    WHEN            NODE
qwen3-0-6b-engine-0-default-0   topology.kubernetes.io/zone   DoNotSchedule   gpu-node-1
qwen3-0-6b-engine-1-default-0   topology.kubernetes.io/zone   DoNotSchedule   gpu-node-2
qwen3-0-6b-engine-1-default-1   topology.kubernetes.io/zone   DoNotSchedule   gpu-node-3

NAME         ZONE
gpu-node-1   zone-a
gpu-node-2   zone-b
gpu-node-3   zone-b

IF LOST   INSTANCES LOST   LEFT SERVING   RE-PLACEABLE
zone-a    1                1 of 2         0 of 1 (zone-a still counts; with Honor: 0 of 1)
zone-b    1                1 of 2         0 of 1 (zone-b still counts; with Honor: 0 of 1)
Losing zone-a leaves 1 of 2 Instances serving, and 0 of the 1 lost can be placed again elsewhere: the loss is not absorbed.

Spread: True (Satisfied)
Why: the 2 Instances run in 2 different domains of topology.kubernetes.io/zone.
What to do: Nothing: losing one domain leaves the Instances in the others serving.
";
    assert_eq!(explained(objects), expected);
}

/// Saved pods are read into the core's model of a pod: a field the API server would refuse is named
/// with the pod and why; a null reads as the field left out, as the API server reads it.
#[test]
fn a_pod_the_api_server_would_refuse_is_named_with_its_field() {
    let mut objects = seed();
    find(&mut objects, "Pod", "qwen3-0-6b-engine-1-default-0")["spec"]["nodeSelector"] = json!({"gpu": 1});
    let error = Objects::new(objects).err().map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some(
            "Pod spread-demo/qwen3-0-6b-engine-1-default-0: spec.nodeSelector.gpu: invalid type: integer `1`, expected a string"
        )
    );
    let mut objects = seed();
    let pod = find(&mut objects, "Pod", "qwen3-0-6b-engine-1-default-0");
    pod["spec"]["tolerations"] = Value::Null;
    pod["status"] = Value::Null;
    let read = Objects::new(objects).expect("readable objects");
    let pods = read.pods_of("spread-demo", "qwen3-0-6b", "engine");
    assert_eq!(
        (pods.iter())
            .map(|p| (p.name(), p.node(), p.status.phase.as_deref()))
            .collect::<Vec<_>>(),
        [
            ("qwen3-0-6b-engine-0-default-0", Some("gpu-node-1"), Some("Running")),
            ("qwen3-0-6b-engine-1-default-0", Some("gpu-node-2"), None)
        ]
    );
}

/// Saved objects are read into the core's model of OME's objects: one that OME's CRD would refuse
/// is named with its field and why, never read as nothing; a spread field is read as written, so
/// that the diagnosis names a bad one.
#[test]
fn an_object_omes_crd_would_refuse_is_named_with_its_field() {
    let mut objects = seed();
    find(&mut objects, "InferenceService", "qwen3-0-6b")["spec"]["runtime"] = json!("srt-qwen3-0-6b");
    let error = Objects::new(objects).err().map(|e| e.to_string());
    assert_eq!(
        error.as_deref(),
        Some(
            "InferenceService spread-demo/qwen3-0-6b: spec.runtime: invalid type: string \"srt-qwen3-0-6b\", expected struct NamedRuntime"
        )
    );
    let mut objects = seed();
    find(&mut objects, "InferenceReplica", "qwen3-0-6b-engine")["spec"]["topologySpreadKey"] = json!(["zone"]);
    let report = Objects::new(objects).map(|objects| {
        let explained = explain(
            "qwen3-0-6b",
            "spread-demo",
            None,
            &objects,
            "seed.yaml",
            &Settings::default(),
            false,
        );
        explained.err().map(|e| e.to_string())
    });
    assert_eq!(
        report,
        Ok(Some(
            "InferenceReplica qwen3-0-6b-engine spec.topologySpreadKey: [\"zone\"] must be a label key (a string)"
                .into()
        ))
    );
}
