//! Any bytes as the ValidationRequest, and any bytes (or an error) as the host's answer: the
//! policy answers JSON with `accepted`, and never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;

const REPLICA: &[u8] = include_bytes!("../../tests/data/replicas/deepseek-v3-engine.json");

fuzz_target!(|data: &[u8]| {
    // The first byte picks the host's answer; the rest is the request.
    let Some((&mode, request)) = data.split_first() else { return };
    let response = ome_spread::validate(request, |_| match mode % 3 {
        0 => Ok(REPLICA.to_vec()),
        1 => Ok(request.to_vec()),
        _ => Err("Cannot find ome.io/v1beta1/InferenceReplica".to_owned()),
    })
    .expect("the policy answers");
    let response: Value = serde_json::from_slice(&response).expect("the response is JSON");
    assert!(response["accepted"].is_boolean(), "{response}");
});
