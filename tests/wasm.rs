//! The rules of docs/rules.md, through the built policy.wasm in wasmtime via waPC, with the
//! `get_resource` host call answered from the fixtures.

mod cases;

use ome_spread_sim::policy::wasm::{Wasm, call, instance};
use ome_spread_sim::policy::{Cluster, Policy, answer, review, validation_request};
use serde_json::json;

#[test]
fn every_rule_p1_to_p11_answers_exactly() {
    cases::check_all(&Wasm);
}

#[test]
fn every_kind_of_bad_input_gets_its_exact_answer() {
    let catalogue = cases::catalogue::all();
    assert!(catalogue.len() >= 40, "the catalogue holds {} kinds", catalogue.len());
    cases::check(&Wasm, catalogue);
}

#[test]
fn p6_a_second_evaluation_adds_nothing() {
    let cluster = Cluster::with_fixtures();
    let mut request = review("deepseek-v3-engine-0-leader-0");
    let first = Wasm.validate(&validation_request(&request, json!({})), &cluster);
    request["request"]["object"] = first["mutated_object"].clone();
    let second = Wasm.validate(&validation_request(&request, json!({})), &cluster);
    assert_eq!(second, json!({"accepted": true}));
    assert_eq!(cluster.calls().len(), 2, "one host call per evaluation");
}

#[test]
fn validate_settings_names_the_bad_field() {
    let policy = instance(&Cluster::default());
    let cases = [
        (json!({}), json!({"valid": true})),
        (
            json!({"maxSkew": 2, "minDomains": 2, "nodeTaintsPolicy": "Honor", "onMissingReplica": "Accept"}),
            json!({"valid": true}),
        ),
        (
            json!({"maxSkew": 0}),
            json!({"valid": false, "message": "maxSkew must be a whole number of at least 1, got 0"}),
        ),
        (
            json!({"onMissingReplica": "Allow"}),
            json!({"valid": false, "message": "onMissingReplica must be Reject or Accept, got \"Allow\""}),
        ),
        (
            json!({"maxskew": 1}),
            json!({"valid": false, "message": "unknown setting \"maxskew\": the settings are maxSkew, minDomains, nodeTaintsPolicy, onMissingReplica"}),
        ),
    ];
    for (settings, expected) in cases {
        let payload = serde_json::to_vec(&settings).expect("json");
        assert_eq!(call(&policy, "validate_settings", &payload), expected, "{settings}");
    }
}

#[test]
fn protocol_version_is_v1() {
    assert_eq!(
        call(&instance(&Cluster::default()), "protocol_version", b""),
        json!("v1")
    );
}

#[test]
fn malformed_json_is_answered_not_trapped() {
    let response = Wasm.validate(b"\x00\xff not json", &Cluster::default());
    assert_eq!(
        response,
        json!({"accepted": false, "message": "malformed ValidationRequest: not UTF-8: invalid utf-8 sequence of 1 bytes from index 1"})
    );
}

#[test]
fn a_pod_nested_100000_deep_is_answered_not_trapped() {
    // Deeper than serde_json reads (128 levels): refused by name, the module never out of stack.
    let pod = format!("{}0{}", "[".repeat(100_000), "]".repeat(100_000));
    let text =
        String::from_utf8(validation_request(&review("qwen3-0-6b-engine-0-default-0"), json!({}))).expect("utf-8");
    let at = text.find("\"hostname\":").expect("the pod has a hostname");
    let payload = format!("{}\"futureField\":{pod},{}", &text[..at], &text[at..]);
    let response = instance(&Cluster::with_fixtures())
        .call("validate", payload.as_bytes())
        .expect("no trap");
    // The request, its `request`, the pod and its spec are four levels: the 124th bracket opens
    // the 128th, at the column after the 123 before it.
    let column = at + "\"futureField\":".len() + 124;
    assert_eq!(
        answer(&response),
        json!({"accepted": false, "message": format!("malformed ValidationRequest: recursion limit exceeded at line 1 column {column}")})
    );
}
