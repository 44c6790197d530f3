//! The policy's one host call (P3): what it asks for, and the replica's settings in effect read
//! from the host's answer (P4).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use ome_spread_core::replica::ReplicaRef;
use ome_spread_core::shown::{cut, shown};
use ome_spread_core::spread::{SpreadFields, SpreadSettings};

use crate::rejection::Rejection;

/// The payload of the `kubewarden/kubernetes/get_resource` host call.
#[derive(Serialize)]
struct GetResource<'a> {
    api_version: &'static str,
    kind: &'static str,
    name: &'a str,
    namespace: &'a str,
    disable_cache: bool,
}

/// The payload of the host call that reads `replica`; it cannot fail to serialise, and if it did
/// the reason would reject the pod like a host error.
pub fn get_resource_request(replica: &ReplicaRef) -> Result<Vec<u8>, String> {
    let request = GetResource {
        api_version: "ome.io/v1beta1",
        kind: "InferenceReplica",
        name: &replica.name,
        namespace: &replica.namespace,
        disable_cache: false,
    };
    serde_json::to_vec(&request).map_err(|e| format!("internal error: the host call cannot be written: {e}"))
}

/// P3, P4: the replica's settings in effect from the host's `answer`. A replica that could not be
/// read is [`Rejection::ReplicaUnreadable`], which `onMissingReplica: Accept` turns into a warning.
pub fn settings_in_effect(replica: &ReplicaRef, answer: Result<Vec<u8>, String>) -> Result<SpreadSettings, Rejection> {
    let replica = format!("{}/{}", replica.namespace, replica.name);
    let spec = answer
        .map_err(|e| host_reason(&e))
        .and_then(|answer| spec(&answer))
        .map_err(|reason| Rejection::ReplicaUnreadable(replica.clone(), reason))?;
    let bad = |field: String, value: String, why: String| Rejection::BadField {
        object: format!("InferenceReplica {replica}"),
        field,
        value,
        why,
    };
    let fields = match spec {
        Value::Object(_) => SpreadFields::deserialize(&spec).map_err(|e| e.to_string()),
        _ => Err("must be an object".to_owned()),
    };
    let fields = fields.map_err(|why| bad("spec".into(), shown(&spec), why))?;
    SpreadSettings::from_fields(fields).map_err(|b| bad(format!("spec.{}", b.field), b.value, b.why))
}

/// The host's answer, checked to be an InferenceReplica, and its spec.
fn spec(answer: &[u8]) -> Result<Value, String> {
    let answer: Value = serde_json::from_slice(answer).map_err(|e| format!("the host's answer is not JSON: {e}"))?;
    let Value::Object(mut replica) = answer else {
        return Err("the host's answer is not an InferenceReplica: not a JSON object".to_owned());
    };
    match replica.get("kind") {
        None | Some(Value::Null) => {}
        Some(Value::String(kind)) if kind == "InferenceReplica" => {}
        Some(other) => {
            let kind = shown(other);
            return Err(format!("the host answered with kind {kind}, not InferenceReplica"));
        }
    }
    replica
        .remove("spec")
        .filter(|spec| !spec.is_null())
        .ok_or_else(|| "the host's answer has no spec".to_owned())
}

/// The host's reason for not answering, as one short line for the message a user reads: without
/// the prefixes the waPC guest and the policy runtime add, and without what follows the first line
/// (the runtime appends a stack backtrace where `RUST_BACKTRACE` is set).
fn host_reason(error: &str) -> String {
    let reason = error.trim_start();
    let reason = reason.strip_prefix("Host error: ").unwrap_or(reason);
    let reason = reason.strip_prefix("Callback evaluation failure: ").unwrap_or(reason);
    let line = reason
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty())
        .unwrap_or_default();
    // The API server's refusal, without the client's debug dump of the same Status after it.
    let line = match line.strip_prefix("ApiError: ") {
        Some(refusal) => [" (ErrorResponse {", " (Status {"]
            .iter()
            .fold(refusal, |line, dump| line.split(dump).next().unwrap_or(line)),
        None => line,
    };
    cut(line, 300)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{host_reason, spec};

    #[test]
    fn p3_an_answer_whose_kind_is_null_is_read_as_one_without_a_kind() {
        let answer = br#"{"kind": null, "spec": {"topologySpread": "Required"}}"#;
        assert_eq!(spec(answer), Ok(json!({"topologySpread": "Required"})));
    }

    #[test]
    fn p3_the_host_reason_is_one_short_line() {
        let kwctl = "Callback evaluation failure: Cannot find ome.io/v1beta1/InferenceReplica named 'r' inside of namespace 'ns'\n\nStack backtrace:\n   0: anyhow::error::<impl anyhow::Error>::msg\n   1: policy_evaluator::callback_handler::kubernetes";
        assert_eq!(
            host_reason(&format!("Host error: {kwctl}")),
            "Cannot find ome.io/v1beta1/InferenceReplica named 'r' inside of namespace 'ns'"
        );
        assert_eq!(host_reason("forbidden"), "forbidden");
        assert_eq!(host_reason("Host error: \n  Cannot find r\nmore"), "Cannot find r");
        assert_eq!(
            host_reason("ApiError: r is forbidden: Forbidden (Status { code: 403 })"),
            "r is forbidden: Forbidden"
        );
        let refused = r#"ApiError: r is forbidden: User "u" cannot get resource "r": Forbidden (ErrorResponse { status: "Failure", message: "r is forbidden: User \"u\" cannot get resource \"r\"", reason: "Forbidden", code: 403 })"#;
        assert_eq!(
            host_reason(&format!("{refused}\n\nCaused by:\n    r is forbidden")),
            r#"r is forbidden: User "u" cannot get resource "r": Forbidden"#
        );
        assert_eq!(host_reason(&"x".repeat(400)), format!("{}...", "x".repeat(300)));
    }
}
