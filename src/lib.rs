//! ome-spread, the Kubewarden policy: a shell around the pure core (`ome_spread_core`). One
//! admission request goes from the policy-server's ValidationRequest to its answer in
//! [`admission`]; [`rejection`] words what is refused. The waPC entry points below call the host
//! once, through the Kubewarden SDK, and answer.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod admission;
pub mod rejection;

/// The waPC entry points the Kubewarden policy-server calls.
#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
mod wasm {
    use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult, register_function};
    use kubewarden_policy_sdk::{protocol_version_guest, validate_settings};

    use crate::admission::{self, PolicySettings};

    #[unsafe(no_mangle)]
    pub extern "C" fn wapc_init() {
        register_function("validate", validate);
        register_function("validate_settings", validate_settings::<PolicySettings>);
        register_function("protocol_version", protocol_version_guest);
    }

    fn validate(payload: &[u8]) -> CallResult {
        admission::validate(payload, |replica| {
            let request = admission::get_resource_request(replica)?;
            guest::host_call("kubewarden", "kubernetes", "get_resource", &request).map_err(|e| e.to_string())
        })
    }
}
