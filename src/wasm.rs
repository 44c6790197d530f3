//! The waPC entry points the Kubewarden policy-server calls.

use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult, register_function};

use ome_spread_core::settings;

use crate::admission;

#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("validate_settings", validate_settings);
    register_function("protocol_version", kubewarden_policy_sdk::protocol_version_guest);
}

fn validate(payload: &[u8]) -> CallResult {
    let evaluation = admission::evaluate(payload, |replica| {
        let request = admission::get_resource_request(replica)?;
        guest::host_call("kubewarden", "kubernetes", "get_resource", &request).map_err(|e| e.to_string())
    });
    Ok(evaluation.response())
}

fn validate_settings(payload: &[u8]) -> CallResult {
    Ok(serde_json::to_vec(&settings::validation_response(payload))?)
}
