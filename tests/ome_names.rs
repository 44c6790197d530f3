//! Every OME pod in the fixtures is named as OME v1.3 names it. Upstream (`ome-projects/ome`):
//! - `pkg/controller/v1beta1/workload/query/names.go`, `PodName`: a pod is
//!   `<service>-<component>-<index>-<runner>-<ordinal>`;
//! - `pkg/controller/v1beta1/workload/ops/render.go`: `podLabels` writes that ordinal as
//!   `ome.io/pod-ordinal`, `Render` sets `spec.hostname` to the name, and `buildOMENativeEnv`
//!   writes `OME_RUNNER_SIZE` and `OME_RUNNER_INDEX` (the pod's place in a runner of several);
//! - `pkg/controller/v1beta1/workload/ops/create.go`, `expectedPodNamesForInstance`: a runner of
//!   several pods numbers them 0..N-1 (the first worker is `-worker-0`), a one-pod runner takes
//!   its Instance's active slot, 0, or 1 after a SurgeThenDrain update;
//! - `render.go`, `RenderWithRevision`: the labels are `podLabels`' seven, `ome.io/revision-hash`,
//!   `ome.io/pairing-protocol` where a protocol is set, and on a multi-pod Instance
//!   `scheduling.x-k8s.io/pod-group` naming `<service>-<component>-<index>` (`PodGroupName`);
//!   annotations only the runner template's (the fixtures' templates have none), and no
//!   `spec.workloadRef`.

use std::path::{Path, PathBuf};

use ome_spread_sim::policy::{data_dir, fixture};
use ome_spread_sim::support::objects::Pod;
use serde_json::Value;

/// The cases whose pod is not as OME writes it, on purpose: P11's broken identity labels, and P3's
/// pod named by `generateName` (OME names each pod itself). The check must fail each of them.
const NOT_AS_OME_WRITES_IT: [&str; 8] = [
    "p11_label_that_is_not_a_string_is_rejected",
    "p11_missing_component_is_rejected",
    "p11_missing_inference_service_is_rejected",
    "p11_missing_runner_is_rejected",
    "p11_unknown_runner_is_rejected",
    "p11_worker_index_that_is_not_a_whole_number_is_rejected",
    "p11_worker_without_index_is_rejected",
    "p3_generate_name_pod_without_namespace_uses_the_request_namespace",
];

fn label<'a>(pod: &'a Value, key: &str) -> Result<&'a str, String> {
    let value = &pod["metadata"]["labels"][key];
    value.as_str().ok_or_else(|| format!("label {key} is {value}"))
}

fn whole_number(text: &str, what: &str) -> Result<u32, String> {
    text.parse()
        .map_err(|_| format!("{what} is {text:?}: not a whole number"))
}

/// An `OME_*` variable of the pod's first container, as OME's render writes it to every one.
fn env(pod: &Value, name: &str) -> Result<u32, String> {
    let vars = pod["spec"]["containers"][0]["env"].as_array().into_iter().flatten();
    let value = vars
        .filter(|var| var["name"] == name)
        .find_map(|var| var["value"].as_str())
        .ok_or_else(|| format!("env {name} is missing"))?;
    whole_number(value, &format!("env {name}"))
}

/// The labels OME's render writes: `podLabels`', the revision, the pairing protocol, the pod group.
const OME_LABELS: [&str; 10] = [
    "ome.io/inferenceservice",
    "component",
    "ome.io/instance-index",
    "ome.io/instance-incarnation",
    "ome.io/runner",
    "ome.io/managed-by",
    "ome.io/pod-ordinal",
    "ome.io/revision-hash",
    "ome.io/pairing-protocol",
    "scheduling.x-k8s.io/pod-group",
];

/// Whether `pod` carries the labels OME's render writes and nothing it does not write.
fn labelled_as_ome_labels_it(pod: &Value) -> Result<(), String> {
    let labels = pod["metadata"]["labels"].as_object().into_iter().flatten();
    if let Some((key, _)) = labels.clone().find(|(key, _)| !OME_LABELS.contains(&key.as_str())) {
        return Err(format!("label {key} is not one OME writes"));
    }
    if let Some(missing) = OME_LABELS[..8]
        .iter()
        .find(|key| !labels.clone().any(|(k, _)| k == *key))
    {
        return Err(format!("label {missing} is missing"));
    }
    let group = match label(pod, "ome.io/runner")? {
        "leader" | "worker" => Some(format!(
            "{}-{}-{}",
            label(pod, "ome.io/inferenceservice")?,
            label(pod, "component")?,
            label(pod, "ome.io/instance-index")?
        )),
        _ => None,
    };
    let found = pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"].as_str();
    if found != group.as_deref() {
        return Err(format!("pod group {found:?}: OME writes {group:?}"));
    }
    if let Some(annotations) = pod["metadata"]["annotations"].as_object() {
        return Err(format!("annotations {annotations:?}: the templates declare none"));
    }
    if !pod["spec"]["workloadRef"].is_null() {
        return Err("spec.workloadRef: OME's render sets none".into());
    }
    Ok(())
}

/// Whether `pod` is named as OME names it, from its own labels and environment, and labelled as
/// OME labels it.
fn named_as_ome_names(pod: &Value) -> Result<(), String> {
    labelled_as_ome_labels_it(pod)?;
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let runner = label(pod, "ome.io/runner")?;
    let ordinal = whole_number(label(pod, "ome.io/pod-ordinal")?, "label ome.io/pod-ordinal")?;
    let ome_name = format!(
        "{}-{}-{}-{runner}-{ordinal}",
        label(pod, "ome.io/inferenceservice")?,
        label(pod, "component")?,
        label(pod, "ome.io/instance-index")?,
    );
    if name != ome_name {
        return Err(format!("OME names it {ome_name}"));
    }
    if let Some(hostname) = pod["spec"]["hostname"].as_str().filter(|h| *h != name) {
        return Err(format!("spec.hostname is {hostname}: OME sets the pod's name"));
    }
    let (size, index) = (env(pod, "OME_RUNNER_SIZE")?, env(pod, "OME_RUNNER_INDEX")?);
    if size > 1 && ordinal != index {
        return Err(format!(
            "{runner} {index} of {size} takes ordinal {index}, not {ordinal}"
        ));
    }
    if size <= 1 && ordinal > 1 {
        return Err(format!(
            "a one-pod runner's ordinal is its Instance's slot, 0 or 1, not {ordinal}"
        ));
    }
    Ok(())
}

/// The pods a fixture file holds: a request's object and old object, a response's mutated object.
fn pods(file: &Value) -> Vec<&Value> {
    let request = &file["request"];
    [&request["object"], &request["oldObject"], &file["mutated_object"]]
        .into_iter()
        .filter(|pod| pod["kind"] == "Pod")
        .collect()
}

fn is_ome_pod(pod: &Value) -> bool {
    pod["metadata"]["labels"]["ome.io/managed-by"] == "OMENative"
}

/// Every fixture file holding pods: the requests, and each case's request and response.
fn fixture_files() -> Vec<PathBuf> {
    let root = data_dir();
    let listed = |dir: &Path| -> Vec<PathBuf> {
        let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut paths: Vec<_> = entries.map(|entry| entry.expect("entry").path()).collect();
        paths.sort();
        paths
    };
    let mut files = listed(&root.join("requests"));
    for case in listed(&root.join("cases")) {
        files.extend(["request.json", "response.json"].map(|file| case.join(file)));
    }
    files
}

#[test]
fn every_fixture_pod_is_named_and_labelled_as_ome_writes_it() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    let mut listed_seen = Vec::new();
    for path in fixture_files() {
        let relative = path
            .strip_prefix(data_dir())
            .expect("under tests/data")
            .display()
            .to_string();
        let case = relative.strip_prefix("cases/").and_then(|c| c.split('/').next());
        let on_purpose = case.is_some_and(|case| NOT_AS_OME_WRITES_IT.contains(&case));
        if on_purpose {
            listed_seen.extend(case.map(str::to_owned));
        }
        for pod in pods(&fixture(&relative)).into_iter().filter(|pod| is_ome_pod(pod)) {
            checked += 1;
            let name = pod["metadata"]["name"].as_str().unwrap_or_default();
            match (named_as_ome_names(pod), on_purpose) {
                (Err(why), false) => wrong.push(format!("{relative}: {name}: {why}")),
                (Ok(()), true) => wrong.push(format!("{relative}: {name}: named as OME names it, yet listed as not")),
                _ => {}
            }
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
            if relative.starts_with("requests/") && stem != name {
                wrong.push(format!("{relative}: the file is not named for its pod {name}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "pods not named or labelled as OME writes them:\n{}",
        wrong.join("\n")
    );
    // Five requests and about a hundred case files hold OME pods: a walk finding fewer is lost.
    assert!(checked >= 90, "only {checked} OME pods found under tests/data");
}

#[test]
fn the_tests_builder_names_and_labels_a_pod_as_ome_does() {
    for (runner, ordinal) in [("default", 0), ("default", 1), ("leader", 0), ("worker", 2)] {
        let pod = Pod::instance("spread-demo", "deepseek-v3", "engine", 3, runner, ordinal).json();
        assert_eq!(labelled_as_ome_labels_it(&pod), Ok(()), "{runner} {ordinal}");
        assert_eq!(
            pod["metadata"]["name"],
            format!("deepseek-v3-engine-3-{runner}-{ordinal}")
        );
    }
}
