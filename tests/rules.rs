//! The rules of docs/rules.md, through the native core.

mod cases;

use cases::{SPREAD, appended};
use ome_spread_sim::policy::{Cluster, Native, Policy, review, validation_request};
use serde_json::json;

#[test]
fn every_rule_p1_to_p11_answers_exactly() {
    cases::check_all(&Native);
}

#[test]
fn every_kind_of_bad_input_gets_its_exact_answer() {
    let catalogue = cases::catalogue::all();
    assert!(catalogue.len() >= 40, "the catalogue holds {} kinds", catalogue.len());
    cases::check(&Native, catalogue);
}

#[test]
fn p6_a_second_evaluation_adds_nothing() {
    for pod in [
        "qwen3-0-6b-engine-0-default-0",
        "deepseek-v3-engine-0-leader-0",
        "deepseek-v3-engine-0-worker-0",
    ] {
        let cluster = Cluster::with_fixtures();
        let mut request = review(pod);
        let first = Native.validate(&validation_request(&request, json!({})), &cluster);
        request["request"]["object"] = first["mutated_object"].clone();
        assert!(request["request"]["object"].is_object(), "{pod} was mutated");
        let second = Native.validate(&validation_request(&request, json!({})), &cluster);
        assert_eq!(second, json!({"accepted": true}), "{pod}");
    }
}

#[test]
fn p3_the_host_call_asks_for_the_replica_in_the_request_namespace() {
    let cluster = Cluster::with_fixtures();
    Native.validate(
        &validation_request(&review("qwen3-0-6b-engine-0-default-0"), json!(null)),
        &cluster,
    );
    assert_eq!(
        cluster.calls(),
        vec![json!({
            "api_version": "ome.io/v1beta1", "kind": "InferenceReplica",
            "name": "qwen3-0-6b-engine", "namespace": "spread-demo", "disable_cache": false,
        })]
    );
}

#[test]
fn lossless_untouched_fields_come_back_equal_including_unknown_ones() {
    let request = review("qwen3-0-6b-engine-0-default-0");
    let response = Native.validate(&validation_request(&request, json!({})), &Cluster::with_fixtures());
    let pod = &request["request"]["object"];
    assert_eq!(
        response["mutated_object"]["spec"]["readinessGates"],
        pod["spec"]["readinessGates"]
    );
    let term = &response["mutated_object"]["spec"]["topologySpreadConstraints"][0];
    assert_eq!(response["mutated_object"], appended(pod, SPREAD, term));
}

#[test]
fn malformed_json_is_rejected_with_the_parser_error() {
    let response = Native.validate(b"{\"request\": ", &Cluster::default());
    assert_eq!(
        response,
        json!({"accepted": false, "message": "malformed ValidationRequest: EOF while parsing a value at line 1 column 12"})
    );
}
