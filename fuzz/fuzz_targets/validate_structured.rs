//! Well-formed requests with arbitrary OME labels, replicas, lists and settings: the policy
//! answers, and a pod it mutated passes a second time unchanged (P6, P9).
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

#[derive(Arbitrary, Debug)]
struct Input {
    runner: String,
    service: String,
    component: String,
    index: String,
    spread: Option<String>,
    spread_key: Option<String>,
    topology_key: Option<String>,
    constraint_keys: Option<Vec<String>>,
    affinity_keys: Option<Vec<String>>,
    max_skew: Option<i64>,
    min_domains: Option<i64>,
    extra: String,
}

fn keyed(keys: &Option<Vec<String>>) -> Value {
    match keys {
        None => Value::Null,
        Some(keys) => keys.iter().map(|k| json!({"topologyKey": k, "labelSelector": {"matchLabels": {"a": "b"}}})).collect(),
    }
}

fn request(input: &Input, pod: &Value) -> Vec<u8> {
    let settings = json!({"maxSkew": input.max_skew, "minDomains": input.min_domains});
    let settings: serde_json::Map<String, Value> =
        settings.as_object().into_iter().flatten().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), v.clone())).collect();
    serde_json::to_vec(&json!({"settings": settings, "request": {
        "operation": "CREATE", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "namespace": "ns", "object": pod,
    }}))
    .expect("json")
}

fuzz_target!(|input: Input| {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "labels": {
            "ome.io/managed-by": "OMENative", "ome.io/runner": input.runner, "ome.io/inferenceservice": input.service,
            "component": input.component, "ome.io/instance-index": input.index}},
        "spec": {"containers": [{"name": "c", "image": input.extra}], "topologySpreadConstraints": keyed(&input.constraint_keys),
            "affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": keyed(&input.affinity_keys)}}}});
    let replica = serde_json::to_vec(&json!({"kind": "InferenceReplica", "spec": {
        "topologySpread": input.spread, "topologySpreadKey": input.spread_key, "topologyKey": input.topology_key}}))
    .expect("json");
    let answer = |payload: &[u8]| {
        let response = ome_spread::validate(payload, |_| Ok(replica.clone())).expect("the policy answers");
        serde_json::from_slice::<Value>(&response).expect("the response is JSON")
    };
    let first = answer(&request(&input, &pod));
    if first["mutated_object"].is_object() {
        let second = answer(&request(&input, &first["mutated_object"]));
        assert_eq!(second["accepted"], json!(true), "{second}");
        assert!(second["mutated_object"].is_null(), "a second pass adds nothing: {second}");
    }
});
