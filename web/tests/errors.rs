//! Bad input pasted into the playground: one clear message naming what was pasted, the object,
//! the field and the value, never a blank answer or a panic. Expected messages written by hand.
//! Natively, and compiled to wasm in Node (`make test`).

use ome_spread_web::{admit, diagnose};
use serde_json::Value;
#[cfg(target_arch = "wasm32")]
use wasm_bindgen_test::wasm_bindgen_test as test;

const REPLICA: &str = "apiVersion: ome.io/v1beta1
kind: InferenceReplica
metadata: {name: qwen3-0-6b-engine, namespace: spread-demo}
spec: {component: engine, topologySpread: Required, topologySpreadKey: topology.kubernetes.io/zone}
";

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: qwen3-0-6b-engine-0-default-0
  namespace: spread-demo
  labels:
    ome.io/managed-by: OMENative
    ome.io/inferenceservice: qwen3-0-6b
    component: engine
    ome.io/runner: default
    ome.io/instance-index: \"0\"
spec:
  containers: [{name: engine, image: sglang}]
";

fn error(answer: Value) -> String {
    answer["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error in {answer}"))
        .to_owned()
}

#[test]
fn broken_yaml_names_the_box_and_the_line() {
    let message = error(admit("kind: [InferenceReplica", POD, ""));
    assert!(message.starts_with("objects: "), "{message}");
    assert!(message.contains("line 1"), "{message}");
    let message = error(diagnose("apiVersion: v1\nkind: List\nitems:\n- {kind: Pod\n", ""));
    assert!(message.starts_with("objects: "), "{message}");
    assert!(message.contains("line 4") || message.contains("line 5"), "{message}");
}

#[test]
fn a_pod_box_must_hold_one_pod() {
    assert_eq!(error(admit(REPLICA, "", "")), "pod: nothing pasted");
    assert_eq!(
        error(admit(REPLICA, "- a\n- b\n", "")),
        "pod: an object is expected, not a list"
    );
    assert_eq!(
        error(admit(REPLICA, &format!("{POD}---\n{POD}"), "")),
        "pod: one object is expected, not several documents"
    );
    assert_eq!(
        error(admit(
            REPLICA,
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n",
            ""
        )),
        "pod: kind is \"Deployment\": the policy sees Pods only; paste a Pod"
    );
}

#[test]
fn bad_settings_are_refused_as_the_policy_server_refuses_them() {
    assert_eq!(
        error(admit(REPLICA, POD, "maxskew: 2")),
        "settings: unknown setting \"maxskew\": the settings are maxSkew, minDomains, nodeTaintsPolicy, onMissingReplica"
    );
    assert_eq!(
        error(diagnose(REPLICA, "- 1\n")),
        "settings: an object is expected, not a list"
    );
}

#[test]
fn an_inference_service_with_a_bad_field_is_named_with_the_field_and_value() {
    // P4: OME would not accept a lower-case topologySpread; the projected replica cannot be made.
    let service = "apiVersion: ome.io/v1beta1
kind: InferenceService
metadata: {name: qwen3-0-6b, namespace: spread-demo}
spec:
  deploymentMode: OMENative
  engine: {topologySpread: required, topologySpreadKey: topology.kubernetes.io/zone}
";
    assert_eq!(
        error(admit(service, POD, "")),
        "InferenceService spread-demo/qwen3-0-6b spec.engine.topologySpread: \"required\" must be Required, Preferred or unset"
    );
    let runtime = "apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata: {name: srt-qwen3-0-6b}
spec:
  engineConfig: {topologySpreadKey: \"zone/\"}
";
    let service = service.replace("topologySpread: required, ", "").replace(
        "deploymentMode: OMENative",
        "deploymentMode: OMENative\n  runtime: {kind: ClusterServingRuntime, name: srt-qwen3-0-6b}",
    );
    assert_eq!(
        error(admit(&format!("{service}---\n{runtime}"), POD, "")),
        "ClusterServingRuntime srt-qwen3-0-6b spec.engineConfig.topologySpreadKey: \"zone/\" not a valid label key: the name part is empty"
    );
}

#[test]
fn a_namespace_without_an_inference_service_says_what_to_paste() {
    assert_eq!(
        error(diagnose(REPLICA, "")),
        "objects: no InferenceService among them: paste the InferenceService with its runtime, InferenceReplicas, pods and nodes"
    );
}

#[test]
fn a_replica_that_is_not_there_is_answered_as_the_host_answers() {
    // P3: the policy rejects with the host's reason, or accepts with a warning under Accept.
    let answer = admit("", POD, "");
    assert_eq!(answer["accepted"], false);
    assert_eq!(
        answer["message"],
        "cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: Cannot find ome.io/v1beta1/InferenceReplica named 'qwen3-0-6b-engine' inside of namespace 'Some(\"spread-demo\")'"
    );
}

#[test]
fn a_runtime_the_inference_service_names_must_be_pasted_with_it() {
    let service = "apiVersion: ome.io/v1beta1
kind: InferenceService
metadata: {name: qwen3-0-6b, namespace: spread-demo}
spec:
  deploymentMode: OMENative
  runtime: {name: srt-qwen3-0-6b}
  engine: {topologySpreadKey: topology.kubernetes.io/zone}
";
    // A runtime without a kind is a ClusterServingRuntime, OME's default.
    assert_eq!(
        error(admit(service, POD, "")),
        "objects: InferenceService spread-demo/qwen3-0-6b spec.runtime names ClusterServingRuntime srt-qwen3-0-6b, which is not among them: paste it too"
    );
    // Only the pod's own InferenceService matters: another one's missing runtime is not its.
    let other = service.replace("name: qwen3-0-6b,", "name: other,");
    let answer = admit(&format!("{REPLICA}---\n{other}"), POD, "");
    assert_eq!(answer["accepted"], true, "{answer}");
}

#[test]
fn an_inference_service_without_a_name_is_named_by_what_it_lacks() {
    let answer = diagnose(
        "apiVersion: ome.io/v1beta1\nkind: InferenceService\nmetadata: {namespace: d}\n",
        "",
    );
    assert_eq!(
        answer["services"][0]["error"],
        "an InferenceService in d has no metadata.name: give it its name"
    );
}

#[test]
fn the_yaml_readers_message_is_said_once() {
    let message = error(admit("kind: [InferenceReplica", POD, ""));
    assert!(message.starts_with("objects: line 1 column "), "{message}");
}
