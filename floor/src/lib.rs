//! The floors of `make bench`: what any SDK-built policy pays before it decides anything
//! (`validate`: the request parsed, accepted), and what a policy that reads one object through the
//! host and mutates the pod pays as well (`mutate`: that, one `get_resource` call whose answer is
//! parsed, and the pod written back whole). What the policy costs beyond the second is its own.

use kubewarden_policy_sdk::request::ValidationRequest;
use kubewarden_policy_sdk::settings::Validatable;
use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult, register_function};
use kubewarden_policy_sdk::{accept_request, mutate_request, protocol_version_guest, validate_settings};
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize, Default)]
#[serde(default)]
struct Settings {}

impl Validatable for Settings {
    fn validate(&self) -> Result<(), String> {
        Ok(())
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn wapc_init() {
    register_function("validate", validate);
    register_function("mutate", mutate);
    register_function("validate_settings", validate_settings::<Settings>);
    register_function("protocol_version", protocol_version_guest);
}

fn validate(payload: &[u8]) -> CallResult {
    let _request: ValidationRequest<Settings> = ValidationRequest::new(payload)?;
    accept_request()
}

fn mutate(payload: &[u8]) -> CallResult {
    let request: ValidationRequest<Settings> = ValidationRequest::new(payload)?;
    let read = br#"{"api_version":"ome.io/v1beta1","kind":"InferenceReplica","name":"r","namespace":"n","disable_cache":false}"#;
    let answer = guest::host_call("kubewarden", "kubernetes", "get_resource", read)?;
    let _object: Value = serde_json::from_slice(&answer)?;
    mutate_request(request.request.object)
}
