//! ome-spread, the Kubewarden policy: a shell around the pure core (`ome_spread_core`). Below,
//! the waPC entry points and [`validate`], which reads the policy-server's ValidationRequest
//! through the Kubewarden SDK (P1) and answers; [`admission`] takes the pod from there to its
//! outcome, [`replica`] is its one host call, and [`rejection`] words what is refused.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod admission;
pub mod rejection;
pub mod replica;

#[cfg(any(not(target_arch = "wasm32"), target_os = "wasi"))]
pub use with_sdk::{PolicySettings, validate};

/// The request and the response, as the Kubewarden SDK reads and writes them. The playground
/// (wasm32-unknown-unknown) goes without: it calls [`admission::admit`] with the pod it builds.
#[cfg(any(not(target_arch = "wasm32"), target_os = "wasi"))]
mod with_sdk {
    use kubewarden_policy_sdk::request::ValidationRequest;
    use kubewarden_policy_sdk::response::ValidationResponse;
    use kubewarden_policy_sdk::settings::Validatable;
    use kubewarden_policy_sdk::wapc_guest::CallResult;
    use kubewarden_policy_sdk::{mutate_request, reject_request};
    use serde::Deserialize;
    use serde_json::Value;

    use crate::admission::{Outcome, admit};
    use crate::rejection::Rejection;
    use ome_spread_core::replica::ReplicaRef;
    use ome_spread_core::rules::Unchanged;
    use ome_spread_core::settings::Settings;

    /// The policy's settings as the policy-server passes them, any JSON: a bad one is named by
    /// `validate_settings`, and by `validate` as the reason for rejecting the pod.
    #[derive(Debug, Default, Deserialize)]
    #[serde(transparent)]
    pub struct PolicySettings(pub Value);

    impl Validatable for PolicySettings {
        fn validate(&self) -> Result<(), String> {
            Settings::from_json(&self.0).map(drop)
        }
    }

    /// Evaluates a ValidationRequest and answers its ValidationResponse. `read_replica` is the
    /// host call: it returns the replica's JSON, or the host's reason for not returning it. It is
    /// called at most once, and only for an OMENative pod with well-formed labels.
    pub fn validate(payload: &[u8], read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>) -> CallResult {
        let admission = match request(payload) {
            Err(e) => Outcome::Rejected(Rejection::MalformedRequest(e)).into(),
            Ok(ValidationRequest { settings, request }) => {
                let kind = &request.kind;
                if request.operation != "CREATE" || !kind.group.is_empty() || kind.version != "v1" || kind.kind != "Pod"
                {
                    Outcome::Unchanged(Unchanged::NotPodCreate).into()
                } else {
                    admit(&request.namespace, request.object, &settings.0, read_replica)
                }
            }
        };
        match admission.outcome {
            // The SDK's accept_request, with the warning where there is one.
            Outcome::Unchanged(_) => Ok(serde_json::to_vec(&ValidationResponse {
                accepted: true,
                message: None,
                code: None,
                mutated_object: None,
                audit_annotations: None,
                warnings: admission.warning.map(|warning| vec![warning]),
            })?),
            Outcome::Mutated(pod) => mutate_request(pod),
            Outcome::Rejected(rejection) => reject_request(Some(rejection.to_string()), None, None, None),
        }
    }

    /// The request, checked to be a JSON object (serde reads a struct from a list too). Text
    /// that is not UTF-8 is named so, whatever else is wrong with it.
    fn request(payload: &[u8]) -> Result<ValidationRequest<PolicySettings>, String> {
        let request = serde_json::from_slice(payload).map_err(|e| match std::str::from_utf8(payload) {
            Err(not_utf8) => format!("not UTF-8: {not_utf8}"),
            Ok(_) => e.to_string(),
        })?;
        if payload.trim_ascii_start().first() != Some(&b'{') {
            return Err("not a JSON object".to_owned());
        }
        Ok(request)
    }
}

/// The waPC entry points the Kubewarden policy-server calls.
#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
mod wasm {
    use kubewarden_policy_sdk::wapc_guest::{self as guest, CallResult, register_function};
    use kubewarden_policy_sdk::{protocol_version_guest, validate_settings};

    use crate::{PolicySettings, replica};

    #[unsafe(no_mangle)]
    pub extern "C" fn wapc_init() {
        register_function("validate", validate);
        register_function("validate_settings", validate_settings::<PolicySettings>);
        register_function("protocol_version", protocol_version_guest);
    }

    fn validate(payload: &[u8]) -> CallResult {
        crate::validate(payload, |replica| {
            let request = replica::get_resource_request(replica)?;
            guest::host_call("kubewarden", "kubernetes", "get_resource", &request).map_err(|e| e.to_string())
        })
    }
}
