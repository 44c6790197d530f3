//! The floor of `make bench`: what any SDK-built policy pays before it decides anything.

use kubewarden_policy_sdk::request::ValidationRequest;
use kubewarden_policy_sdk::settings::Validatable;
use kubewarden_policy_sdk::wapc_guest::{CallResult, register_function};
use kubewarden_policy_sdk::{accept_request, protocol_version_guest, validate_settings};
use serde::Deserialize;

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
    register_function("validate_settings", validate_settings::<Settings>);
    register_function("protocol_version", protocol_version_guest);
}

fn validate(payload: &[u8]) -> CallResult {
    let _request: ValidationRequest<Settings> = ValidationRequest::new(payload)?;
    accept_request()
}
