//! One admission request, from the policy-server's ValidationRequest to its response:
//! P1 and P2 (is this ours), P11 (the pod's labels), P3 (its InferenceReplica, read through the
//! one host call), P4 (the replica's fields), then the rules.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use ome_spread_core::replica::ReplicaRef;
use ome_spread_core::rules::{self, Decision, Unchanged};
use ome_spread_core::settings::{OnMissingReplica, Settings};
use ome_spread_core::shown::{cut, shown};
use ome_spread_core::spread::{SpreadFields, SpreadSettings};

use crate::early;
use crate::pod::{Pod, Splice};
use crate::raw::{self, Checked};
use crate::rejection::Rejection;

/// What the policy reads of a ValidationRequest; everything else is skipped unparsed, and the
/// pod is kept as the text it came in (serde_json checks it, and [`Pod`] reads its parts).
#[derive(Deserialize)]
struct ValidationRequest<'a> {
    #[serde(borrow, default)]
    settings: Option<&'a RawValue>,
    #[serde(borrow)]
    request: AdmissionRequest<'a>,
}

#[derive(Deserialize)]
struct AdmissionRequest<'a> {
    #[serde(borrow, default)]
    operation: Cow<'a, str>,
    #[serde(borrow, default)]
    kind: GroupVersionKind<'a>,
    #[serde(borrow, default)]
    namespace: Cow<'a, str>,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct GroupVersionKind<'a> {
    #[serde(borrow, default)]
    group: Cow<'a, str>,
    #[serde(borrow, default)]
    version: Cow<'a, str>,
    #[serde(borrow, default)]
    kind: Cow<'a, str>,
}

/// What the policy reads of the host's answer: the kind, and the spec with its three spread fields.
#[derive(Deserialize)]
struct ReplicaAnswer<'a> {
    #[serde(default)]
    kind: Option<Value>,
    #[serde(borrow, default)]
    spec: Option<&'a RawValue>,
}

/// The payload of the `kubewarden/kubernetes/get_resource` host call.
#[derive(Serialize)]
struct GetResource<'a> {
    api_version: &'static str,
    kind: &'static str,
    name: &'a str,
    namespace: &'a str,
    disable_cache: bool,
}

/// The payload of the `kubewarden/kubernetes/get_resource` host call that reads `replica`; it
/// cannot fail to serialise, and if it did the reason would reject the pod like a host error.
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

/// What happens to an admission request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome<'a> {
    Unchanged(Unchanged),
    /// Accepted with this pod: the request's pod text with the one term spliced in.
    Mutated(Splice<'a>),
    Rejected(Rejection),
}

/// The outcome of one request, and a warning for the API client, if any.
pub struct Evaluation<'a> {
    pub outcome: Outcome<'a>,
    warning: Option<String>,
}

/// Evaluates a ValidationRequest. `read_replica` is the host call: it returns the replica's JSON,
/// or the host's reason for not returning it. It is called at most once, and only for an
/// OMENative pod with well-formed labels. A request that is not a Pod CREATE, or a pod that is
/// not OMENative, passes as soon as the start of its text says so ([`early`](crate::early)).
pub fn evaluate<'a>(
    payload: &'a [u8],
    read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>,
) -> Evaluation<'a> {
    match early::unchanged(payload) {
        Some(why) => Evaluation {
            outcome: Outcome::Unchanged(why),
            warning: None,
        },
        None => evaluate_fully(payload, read_replica),
    }
}

/// As [`evaluate`], reading and checking every byte of the request first: the path of every
/// OMENative pod, and the reference the early answers are tested against.
pub fn evaluate_fully<'a>(
    payload: &'a [u8],
    read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>,
) -> Evaluation<'a> {
    let mut warning = None;
    // One UTF-8 check of the whole text, so that no part of it is checked again.
    let request = std::str::from_utf8(payload)
        .map_err(|e| format!("not UTF-8: {e}"))
        .and_then(|text| {
            let request = serde_json::from_str::<ValidationRequest>(text).map_err(|e| e.to_string())?;
            if !is_object(payload) {
                return Err("not a JSON object".to_owned());
            }
            if let Some(object) = request.request.object {
                raw::check_escapes(object.get()).map_err(|e| format!("object: {e}"))?;
            }
            Ok(request)
        });
    let outcome = match request {
        Ok(request) => decide(request, read_replica, &mut warning).unwrap_or_else(Outcome::Rejected),
        Err(e) => Outcome::Rejected(Rejection::MalformedRequest(e)),
    };
    Evaluation { outcome, warning }
}

fn decide<'a>(
    ValidationRequest { settings, request }: ValidationRequest<'a>,
    read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>,
    warning: &mut Option<String>,
) -> Result<Outcome<'a>, Rejection> {
    let kind = &request.kind;
    if request.operation != "CREATE" || !kind.group.is_empty() || kind.version != "v1" || kind.kind != "Pod" {
        return Ok(Outcome::Unchanged(Unchanged::NotPodCreate));
    }
    let pod = Pod::new(request.object.map(Checked::of), &request.namespace)?;
    if !pod.is_ome_native()? {
        return Ok(Outcome::Unchanged(Unchanged::NotOmeNative));
    }
    let settings = match settings {
        None => Settings::default(),
        Some(settings) => serde_json::from_str(settings.get())
            .map_err(|e| e.to_string())
            .and_then(|settings| Settings::from_json(&settings))
            .map_err(Rejection::BadSettings)?,
    };
    let instance = pod.instance_labels()?;
    let replica = match pod.controller_replica()? {
        Some(name) => ReplicaRef {
            namespace: pod.namespace.clone(),
            name,
        },
        None => ReplicaRef::for_component(&pod.namespace, &instance.service, &instance.component),
    };
    let spread = match replica_settings(&replica, read_replica(&replica))? {
        Ok(spread) => spread,
        Err(unreadable) => {
            return match settings.on_missing_replica {
                OnMissingReplica::Reject => Err(unreadable),
                OnMissingReplica::Accept => {
                    *warning = Some(format!(
                        "{unreadable}; admitted without spread (onMissingReplica: Accept)"
                    ));
                    Ok(Outcome::Unchanged(Unchanged::ReplicaUnreadable))
                }
            };
        }
    };
    let term = match rules::wanted(&instance, &spread, &settings) {
        Ok(term) => term,
        Err(why) => return Ok(Outcome::Unchanged(why)),
    };
    let list = term.list();
    let present = pod.listed(list)?;
    let values: Vec<&Value> = present.iter().map(|term| &term.value).collect();
    match rules::decide(term, &values, &settings) {
        Decision::Unchanged(why) => Ok(Outcome::Unchanged(why)),
        Decision::Append(term) => pod.with_appended(list.path(), &term).map(Outcome::Mutated),
        Decision::Complete { index, fields } => match present.get(index) {
            Some(own) => pod.with_fields_added(own.text, &fields).map(Outcome::Mutated),
            None => Err(Rejection::Internal {
                pod: pod.name.clone(),
                what: format!("no term {index} to complete"),
            }),
        },
    }
}

/// P3, P4: the replica's settings in effect from the host's answer; `Ok(Err(_))` when it could
/// not be read (P3's rejection, which `onMissingReplica` may turn into a warning).
fn replica_settings(
    replica: &ReplicaRef,
    answer: Result<Vec<u8>, String>,
) -> Result<Result<SpreadSettings, Rejection>, Rejection> {
    let answer = answer
        .map_err(|e| host_reason(&e))
        .and_then(|answer| String::from_utf8(answer).map_err(|e| format!("the host's answer is not JSON: {e}")));
    match answer.as_deref().map_err(String::clone).and_then(replica_spec) {
        Ok(spec) => SpreadSettings::from_fields(spec_fields(replica, spec)?)
            .map(Ok)
            .map_err(|b| bad_replica(replica, format!("spec.{}", b.field), b.value, b.why)),
        Err(reason) => Ok(Err(Rejection::ReplicaUnreadable {
            namespace: replica.namespace.clone(),
            name: replica.name.clone(),
            reason,
        })),
    }
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

/// The host's answer, checked to be an InferenceReplica, and its spec.
fn replica_spec(answer: &str) -> Result<&RawValue, String> {
    let replica: ReplicaAnswer = serde_json::from_str(answer).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => format!("the host's answer is not an InferenceReplica: {e}"),
        _ => format!("the host's answer is not JSON: {e}"),
    })?;
    if !is_object(answer.as_bytes()) {
        return Err("the host's answer is not an InferenceReplica: not a JSON object".to_owned());
    }
    match replica.kind {
        None => {}
        Some(Value::String(kind)) if kind == "InferenceReplica" => {}
        Some(other) => {
            return Err(format!(
                "the host answered with kind {}, not InferenceReplica",
                shown(&other)
            ));
        }
    }
    replica.spec.ok_or_else(|| "the host's answer has no spec".to_owned())
}

/// serde reads a struct from a JSON list too; a request or a replica must be an object.
fn is_object(json: &[u8]) -> bool {
    json.iter().find(|b| !raw::is_space(**b)) == Some(&b'{')
}

/// P4: the three fields of the replica's spec, which must be an object.
fn spec_fields(replica: &ReplicaRef, spec: &RawValue) -> Result<SpreadFields, Rejection> {
    let spec = Checked::of(spec);
    if raw::kind(spec) != raw::Kind::Object {
        let value = serde_json::from_str::<Value>(&spec)
            .map(|v| shown(&v))
            .unwrap_or_default();
        return Err(bad_replica(replica, "spec".into(), value, "must be an object".into()));
    }
    // serde_json has checked the answer: only the three fields are parsed.
    let value = |field: Option<Checked>| field.and_then(|text| serde_json::from_str::<Value>(&text).ok());
    let [spread, spread_key, topology_key] = raw::fields(spec, ["topologySpread", "topologySpreadKey", "topologyKey"]);
    Ok(SpreadFields {
        topology_spread: value(spread),
        topology_spread_key: value(spread_key),
        topology_key: value(topology_key),
    })
}

fn bad_replica(replica: &ReplicaRef, field: String, value: String, why: String) -> Rejection {
    Rejection::BadReplica {
        namespace: replica.namespace.clone(),
        name: replica.name.clone(),
        field,
        value,
        why,
    }
}

impl Evaluation<'_> {
    /// The ValidationResponse the policy-server expects, as JSON text. A mutated pod goes out as
    /// the text it came in, with the term spliced in: copied once, not re-serialised.
    pub fn response(self) -> Vec<u8> {
        let (head, pod, tail): (&[u8], _, _) = match (&self.outcome, &self.warning) {
            (Outcome::Unchanged(_), None) => return br#"{"accepted":true}"#.to_vec(),
            (Outcome::Unchanged(_), Some(warning)) => {
                return json!({"accepted": true, "warnings": [warning]})
                    .to_string()
                    .into_bytes();
            }
            (Outcome::Rejected(rejection), _) => {
                return json!({"accepted": false, "message": rejection.to_string()})
                    .to_string()
                    .into_bytes();
            }
            (Outcome::Mutated(pod), None) => (br#"{"accepted":true,"mutated_object":"#, pod, String::new()),
            (Outcome::Mutated(pod), Some(warning)) => (
                br#"{"accepted":true,"mutated_object":"#,
                pod,
                format!(",\"warnings\":{}", json!([warning])),
            ),
        };
        let mut response = Vec::with_capacity(head.len() + pod.len() + tail.len() + 1);
        response.extend_from_slice(head);
        pod.write_to(&mut response);
        response.extend_from_slice(tail.as_bytes());
        response.push(b'}');
        response
    }
}

#[cfg(test)]
mod tests {
    use super::host_reason;

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
