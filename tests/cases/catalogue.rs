//! The bad-input catalogue: odd and broken requests, pods, replicas and settings, each with the
//! exact answer. Never a trap, never a silent pass: accepted unchanged where the rules say so,
//! else rejected naming the object, the field and the value. Runs natively and through the wasm.
//! One row a case, as in the rule table.

use serde_json::{Value, json};

use ome_spread_sim::policy::{Cluster, replica, review, validation_request, with_spec};

use super::{
    AFFINITY, Case, DEEPSEEK, Expected, QWEN, QWEN_0, SPREAD, case, edited_request, label, qwen_pod, required_zone,
    worker_pod, worker_term,
};

/// A case whose payload is these bytes, not a ValidationRequest built from a review.
fn payload(name: &'static str, bytes: &[u8], message: &'static str) -> Case {
    Case {
        payload: Some(bytes.to_vec()),
        ..case(name, json!({}), None, Expected::Rejected(message))
    }
}

fn request(change: impl FnOnce(&mut Value)) -> Value {
    edited_request(review(QWEN_0), change)
}

/// The replica answer the host gives, as raw bytes.
fn answering(bytes: &[u8]) -> Cluster {
    Cluster::default().with_raw_answer("spread-demo", "qwen3-0-6b-engine", bytes)
}

fn qwen_replica(fields: Value) -> Cluster {
    Cluster::default().with_replica(with_spec(replica("qwen3-0-6b-engine"), fields))
}

/// A pod whose unread `spec.futureField` nests lists `depth` deep.
fn deeply_nested(depth: usize) -> Value {
    qwen_pod(|p| p["spec"]["futureField"] = (0..depth).fold(json!(0), |nested, _| json!([nested])))
}

/// A 3 MB pod: 40 containers of 390 env vars.
fn three_megabytes() -> Value {
    qwen_pod(|p| {
        let container = p["spec"]["containers"][0].clone();
        p["spec"]["containers"] = (0..40)
            .map(|c| {
                let mut container = container.clone();
                container["name"] = json!(format!("engine-{c}"));
                container["env"] = (0..390)
                    .map(|v| json!({"name": format!("V_{c}_{v}"), "value": format!("{v:0>150}")}))
                    .collect();
                container
            })
            .collect();
    })
}

/// Every case, section by section.
pub fn all() -> Vec<Case> {
    [
        the_request(),
        metadata_and_labels(),
        indexes_text_and_owner(),
        spec(),
        replica_answers(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The request itself: its JSON, its fields.
#[rustfmt::skip]
fn the_request() -> Vec<Case> {
    use Expected::*;
    vec![
        payload("request_that_is_truncated_json", br#"{"request": "#, "malformed ValidationRequest: EOF while parsing a value at line 1 column 12"),
        payload("request_that_is_not_utf8", b"{\"request\": \"\xff\"}", "malformed ValidationRequest: not UTF-8: invalid utf-8 sequence of 1 bytes from index 13"),
        payload("request_that_is_empty", b"", "malformed ValidationRequest: EOF while parsing a value at line 1 column 0"),
        payload("request_that_is_null", b"null", "malformed ValidationRequest: invalid type: null, expected struct ValidationRequest at line 1 column 4"),
        payload("request_that_is_a_list", br#"[{}, {}]"#, "malformed ValidationRequest: not a JSON object"),
        payload("request_without_request", br#"{"settings": {}}"#, "malformed ValidationRequest: missing field `request` at line 1 column 16"),
        payload("request_with_trailing_bytes", br#"{"settings": {}, "request": {}} x"#, "malformed ValidationRequest: trailing characters at line 1 column 33"),
        // The policy-server always sends the settings, `{}` when none are set.
        payload("request_without_settings", br#"{"request": {}}"#, "malformed ValidationRequest: missing field `settings` at line 1 column 15"),
        case("request_without_object", request(|r| { r.as_object_mut().expect("request").remove("object"); }), None, Rejected("pod spread-demo/(unnamed): object is null: must be a Pod object")),
        case("request_whose_object_is_a_string", request(|r| r["object"] = json!("pod")), None, Rejected("pod spread-demo/(unnamed): object is \"pod\": must be a Pod object")),
        case("request_with_lower_case_operation", request(|r| r["operation"] = json!("create")), None, Accepted),
        case("request_for_a_pod_of_another_group", request(|r| r["kind"]["group"] = json!("example.com")), None, Accepted),
        // The settings, as they reach validate.
        Case { settings: json!({"maxSkew": "1"}), ..case("settings_with_a_number_as_text", review(QWEN_0), None, Rejected("invalid policy settings: maxSkew must be a whole number of at least 1, got \"1\"")) },
        Case { settings: json!(["maxSkew"]), ..case("settings_that_are_a_list", review(QWEN_0), None, Rejected("invalid policy settings: settings must be an object, got [\"maxSkew\"]")) },
    ]
}

/// The pod's metadata and labels.
#[rustfmt::skip]
fn metadata_and_labels() -> Vec<Case> {
    use Expected::*;
    vec![
        case("pod_whose_metadata_is_a_string", qwen_pod(|p| p["metadata"] = json!("x")), None, Rejected("pod spread-demo/(unnamed): metadata is \"x\": must be an object")),
        case("pod_whose_metadata_is_null", qwen_pod(|p| p["metadata"] = Value::Null), None, Accepted),
        case("pod_whose_labels_are_null", qwen_pod(|p| p["metadata"]["labels"] = Value::Null), None, Accepted),
        case("pod_whose_managed_by_is_a_number", qwen_pod(|p| label(p, "ome.io/managed-by", json!(1))), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label ome.io/managed-by is 1: must be a string")),
        case("pod_whose_runner_is_empty", qwen_pod(|p| label(p, "ome.io/runner", json!(""))), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label ome.io/runner is \"\": must be default, leader or worker")),
        case("pod_whose_runner_is_capitalised", qwen_pod(|p| label(p, "ome.io/runner", json!("Leader"))), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label ome.io/runner is \"Leader\": must be default, leader or worker")),
        case("pod_whose_service_label_is_empty", qwen_pod(|p| label(p, "ome.io/inferenceservice", json!(""))), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label ome.io/inferenceservice is \"\": must not be empty")),
        case("pod_whose_service_label_has_a_space", qwen_pod(|p| label(p, "ome.io/inferenceservice", json!("qwen 3"))), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label ome.io/inferenceservice is \"qwen 3\": a name must be alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character")),
        case("pod_whose_component_is_a_list", qwen_pod(|p| label(p, "component", json!(["engine"]))), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label component is [\"engine\"]: must be a string")),
    ]
}

/// A worker's Instance index, what only the request's text can hold, the pod's replica owner.
#[rustfmt::skip]
fn indexes_text_and_owner() -> Vec<Case> {
    use Expected::*;
    vec![
        case("worker_whose_index_is_a_fraction", worker_pod(|p| label(p, "ome.io/instance-index", json!("1.5"))), None, Rejected("pod spread-demo/deepseek-v3-engine-0-worker-0: label ome.io/instance-index is \"1.5\": must be a whole number")),
        case("worker_whose_index_is_empty", worker_pod(|p| label(p, "ome.io/instance-index", json!(""))), None, Rejected("pod spread-demo/deepseek-v3-engine-0-worker-0: label ome.io/instance-index is \"\": must be a whole number")),
        case("worker_whose_index_is_too_long", worker_pod(|p| label(p, "ome.io/instance-index", json!("1".repeat(64)))), None, Rejected("pod spread-demo/deepseek-v3-engine-0-worker-0: label ome.io/instance-index is \"1111111111111111111111111111111111111111111111111111111111111111\": must be a whole number")),
        // serde_json's words: a leading surrogate must be followed by a trailing one.
        text_edited("pod_with_a_lone_surrogate_escape", r#""name":"qwen3-0-6b-engine-0-default-0""#, r#""name":"qwen3-\uDBFB-engine""#, Rejected("malformed ValidationRequest: unexpected end of hex escape at line 1 column 316")),
        text_edited("pod_with_a_repeated_label_keeps_the_last", r#""ome.io/managed-by":"OMENative","#, r#""ome.io/managed-by":"OMENative","ome.io/managed-by":"Helm","#, Accepted),
        Case { cluster: renamed_replica(), ..case("pod_whose_first_controller_owner_is_of_another_kind", qwen_pod(|p| {
            p["metadata"]["ownerReferences"][0]["name"] = json!("renamed-replica");
            let other = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "other", "controller": true});
            p["metadata"]["ownerReferences"].as_array_mut().expect("owners").insert(0, other);
        }), Some("renamed-replica"), Appended(SPREAD, required_zone())) },
        Case { cluster: renamed_replica(), ..case("pod_whose_replica_owner_says_controller_as_text", qwen_pod(|p| {
            p["metadata"]["ownerReferences"][0]["name"] = json!("renamed-replica");
            p["metadata"]["ownerReferences"][0]["controller"] = json!("true");
        }), QWEN, Appended(SPREAD, required_zone())) },
        case("pod_whose_owner_references_are_null", qwen_pod(|p| p["metadata"]["ownerReferences"] = Value::Null), QWEN, Appended(SPREAD, required_zone())),
        case("pod_whose_replica_owner_name_is_empty", qwen_pod(|p| p["metadata"]["ownerReferences"][0]["name"] = json!("")), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: metadata.ownerReferences[InferenceReplica].name is \"\": must be the replica's name")),
        case("pod_whose_name_is_a_number", qwen_pod(|p| p["metadata"] = json!({"name": 7})), None, Rejected("pod spread-demo/(unnamed): metadata is {\"name\":7}: invalid type: integer `7`, expected a borrowed string")),
        case("pod_whose_replica_owner_has_no_name", qwen_pod(|p| { p["metadata"]["ownerReferences"][0].as_object_mut().expect("owner").remove("name"); }), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: metadata.ownerReferences[InferenceReplica].name is null: must be the replica's name")),
    ]
}

/// The seed's engine replica, under the name an ownerReference gives it.
fn renamed_replica() -> Cluster {
    let mut replica = replica("qwen3-0-6b-engine");
    replica["metadata"]["name"] = json!("renamed-replica");
    Cluster::with_fixtures().with_replica(replica)
}

/// The pod's spec.
#[rustfmt::skip]
fn spec() -> Vec<Case> {
    use Expected::*;
    vec![
        case("pod_without_spec_gets_one", qwen_pod(|p| { p.as_object_mut().expect("pod").remove("spec"); }), QWEN, Appended(SPREAD, required_zone())),
        case("pod_whose_spec_is_null_gets_one", qwen_pod(|p| p["spec"] = Value::Null), QWEN, Appended(SPREAD, required_zone())),
        case("pod_whose_spec_is_a_string", qwen_pod(|p| p["spec"] = json!("x")), QWEN, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: spec is \"x\": must be an object")),
        case("pod_whose_constraints_are_an_object", qwen_pod(|p| p["spec"]["topologySpreadConstraints"] = json!({})), QWEN, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: spec.topologySpreadConstraints is {}: must be a list")),
        case("pod_whose_constraint_is_a_string", qwen_pod(|p| p["spec"]["topologySpreadConstraints"] = json!(["zone"])), QWEN, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: spec.topologySpreadConstraints[0].topologyKey is null: must be a string")),
        case("worker_whose_affinity_is_null_gets_one", worker_pod(|p| p["spec"]["affinity"] = Value::Null), DEEPSEEK, Appended(AFFINITY, worker_term())),
        case("worker_whose_pod_affinity_is_a_list", worker_pod(|p| p["spec"]["affinity"]["podAffinity"] = json!([])), DEEPSEEK, Rejected("pod spread-demo/deepseek-v3-engine-0-worker-0: spec.affinity.podAffinity is []: must be an object")),
        case("worker_whose_required_terms_are_an_object", worker_pod(|p| p["spec"]["affinity"]["podAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": {}})), DEEPSEEK, Rejected("pod spread-demo/deepseek-v3-engine-0-worker-0: spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution is {}: must be a list")),
        case("pod_nested_100_deep_in_an_unread_field", deeply_nested(100), QWEN, Appended(SPREAD, required_zone())),
        case("pod_of_three_megabytes", three_megabytes(), QWEN, Appended(SPREAD, required_zone())),
    ]
}

/// The host's answer when it is not an InferenceReplica, and the replica's spread fields when
/// they are bad.
#[rustfmt::skip]
fn replica_answers() -> Vec<Case> {
    use Expected::*;
    let qwen = |name, cluster, message| Case { cluster, ..case(name, review(QWEN_0), QWEN, Rejected(message)) };
    vec![
        qwen("replica_answer_that_is_empty", answering(b""), "cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: the host's answer is not JSON: EOF while parsing a value at line 1 column 0"),
        qwen("replica_answer_that_is_a_list", answering(b"[]"), "cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: the host's answer is not an InferenceReplica: not a JSON object"),
        qwen("replica_without_spec", answering(br#"{"kind": "InferenceReplica"}"#), "cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: the host's answer has no spec"),
        qwen("replica_whose_spec_is_null", answering(br#"{"kind": "InferenceReplica", "spec": null}"#), "cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: the host's answer has no spec"),
        qwen("replica_whose_spread_is_a_number", qwen_replica(json!({"topologySpread": 2})), "InferenceReplica spread-demo/qwen3-0-6b-engine: spec.topologySpread is 2: must be Required, Preferred or unset"),
        qwen("replica_whose_key_is_not_ascii", qwen_replica(json!({"topologySpreadKey": "zöne"})), "InferenceReplica spread-demo/qwen3-0-6b-engine: spec.topologySpreadKey is \"zöne\": not a valid label key: a name must be alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character"),
        qwen("replica_whose_key_prefix_is_too_long", qwen_replica(json!({"topologySpreadKey": format!("{}/zone", "a".repeat(254))})), "InferenceReplica spread-demo/qwen3-0-6b-engine: spec.topologySpreadKey is \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...: not a valid label key: the prefix must be a DNS subdomain of 1 to 253 characters"),
        qwen("replica_whose_key_has_no_name", qwen_replica(json!({"topologySpreadKey": "nvidia.com/"})), "InferenceReplica spread-demo/qwen3-0-6b-engine: spec.topologySpreadKey is \"nvidia.com/\": not a valid label key: the name part is empty"),
    ]
}

/// A case on the seed's engine pod whose payload has `from` replaced by `to` in its JSON text:
/// for what a `Value` cannot hold, such as a repeated key.
fn text_edited(name: &'static str, from: &str, to: &str, expected: Expected) -> Case {
    let text = String::from_utf8(validation_request(&review(QWEN_0), json!({}))).expect("utf-8");
    assert!(text.contains(from), "{name}: {from} is not in the payload");
    Case {
        payload: Some(text.replace(from, to).into_bytes()),
        ..case(name, review(QWEN_0), None, expected)
    }
}
