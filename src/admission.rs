//! One admission request, from the policy-server's ValidationRequest to its response:
//! P1 and P2 (is this ours), P11 (the pod's labels), P3 (its InferenceReplica, read through the
//! one host call), P4 (the replica's fields), then the rules.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::pod::Pod;
use crate::rejection::{Rejection, shown};
use crate::rules::{self, Decision, Unchanged};
use crate::settings::{OnMissingReplica, Settings};
use crate::spread::{SpreadFields, SpreadSettings};

/// What the policy reads of a ValidationRequest; everything else is skipped unparsed, and the
/// pod is kept as the text it came in.
#[derive(Deserialize)]
struct ValidationRequest<'a> {
    #[serde(borrow, default)]
    settings: Option<&'a RawValue>,
    #[serde(borrow)]
    request: AdmissionRequest<'a>,
}

#[derive(Deserialize)]
struct AdmissionRequest<'a> {
    #[serde(default)]
    operation: String,
    #[serde(default)]
    kind: GroupVersionKind,
    #[serde(default)]
    namespace: String,
    #[serde(borrow, default)]
    object: Option<&'a RawValue>,
}

#[derive(Deserialize, Default)]
struct GroupVersionKind {
    #[serde(default)]
    group: String,
    #[serde(default)]
    version: String,
    #[serde(default)]
    kind: String,
}

/// What the policy reads of the host's answer: the kind, and the spec's three spread fields.
#[derive(Deserialize)]
struct ReplicaAnswer<'a> {
    #[serde(default)]
    kind: Option<Value>,
    #[serde(borrow, default)]
    spec: Option<&'a RawValue>,
}

/// The InferenceReplica a pod belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaRef {
    pub namespace: String,
    pub name: String,
}

impl ReplicaRef {
    /// The payload of the `kubewarden/kubernetes/get_resource` host call.
    pub fn get_resource_request(&self) -> Value {
        json!({
            "api_version": "ome.io/v1beta1",
            "kind": "InferenceReplica",
            "name": self.name,
            "namespace": self.namespace,
            "disable_cache": false,
        })
    }
}

/// What happens to an admission request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Unchanged(Unchanged),
    /// Accepted with this pod: the request's pod text with the one term spliced in.
    Mutated(String),
    Rejected(Rejection),
}

/// The outcome of one request, and a warning for the API client, if any.
pub struct Evaluation {
    pub outcome: Outcome,
    warning: Option<String>,
}

/// Evaluates a ValidationRequest. `read_replica` is the host call: it returns the replica's JSON,
/// or the host's reason for not returning it. It is called at most once, and only for an
/// OMENative pod with well-formed labels.
pub fn evaluate(payload: &[u8], read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>) -> Evaluation {
    let mut warning = None;
    let outcome = match serde_json::from_slice::<ValidationRequest>(payload) {
        Ok(request) => decide(request, read_replica, &mut warning).unwrap_or_else(Outcome::Rejected),
        Err(e) => Outcome::Rejected(Rejection::MalformedRequest(e.to_string())),
    };
    Evaluation { outcome, warning }
}

fn decide(
    ValidationRequest { settings, request }: ValidationRequest,
    read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>,
    warning: &mut Option<String>,
) -> Result<Outcome, Rejection> {
    let kind = &request.kind;
    if request.operation != "CREATE" || !kind.group.is_empty() || kind.version != "v1" || kind.kind != "Pod" {
        return Ok(Outcome::Unchanged(Unchanged::NotPodCreate));
    }
    let pod = Pod::new(request.object, &request.namespace)?;
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
    let name = match pod.controller_replica()? {
        Some(owner) => owner,
        None => format!("{}-{}", instance.service, instance.component),
    };
    let replica = ReplicaRef {
        namespace: pod.namespace.clone(),
        name,
    };
    let answer = read_replica(&replica);
    let spread = match answer.as_deref().map_err(String::clone).and_then(replica_spec) {
        Ok(spec) => spread_settings(&replica, spec)?,
        Err(reason) => {
            let unreadable = Rejection::ReplicaUnreadable {
                namespace: replica.namespace,
                name: replica.name,
                reason,
            };
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
    match rules::decide(&pod, &instance, &spread, &settings)? {
        Decision::Unchanged(why) => Ok(Outcome::Unchanged(why)),
        Decision::Append { path, term } => pod.with_appended(path, &term).map(Outcome::Mutated),
    }
}

/// The host's answer, checked to be an InferenceReplica, and its spec.
fn replica_spec(answer: &[u8]) -> Result<&RawValue, String> {
    let replica: ReplicaAnswer = serde_json::from_slice(answer).map_err(|e| match e.classify() {
        serde_json::error::Category::Data => format!("the host's answer is not an InferenceReplica: {e}"),
        _ => format!("the host's answer is not JSON: {e}"),
    })?;
    match replica.kind {
        None => {}
        Some(Value::String(kind)) if kind == "InferenceReplica" => {}
        Some(other) => return Err(format!("the host answered with kind {other}, not InferenceReplica")),
    }
    replica.spec.ok_or_else(|| "the host's answer has no spec".to_owned())
}

/// P4: the settings in effect that OME projected onto the replica.
fn spread_settings(replica: &ReplicaRef, spec: &RawValue) -> Result<SpreadSettings, Rejection> {
    let bad = |field: String, value: String, why: String| Rejection::BadReplica {
        namespace: replica.namespace.clone(),
        name: replica.name.clone(),
        field,
        value,
        why,
    };
    let fields: SpreadFields = match serde_json::from_str(spec.get()) {
        Ok(fields) => fields,
        Err(e) => {
            let value = serde_json::from_str::<Value>(spec.get())
                .map(|v| shown(&v))
                .unwrap_or_default();
            let why = if spec.get().starts_with('{') {
                e.to_string()
            } else {
                "must be an object".into()
            };
            return Err(bad("spec".into(), value, why));
        }
    };
    SpreadSettings::from_fields(fields).map_err(|b| bad(format!("spec.{}", b.field), b.value, b.why))
}

impl Evaluation {
    /// The ValidationResponse the policy-server expects, as JSON text. A mutated pod goes out as
    /// the text it is, not re-serialised.
    pub fn response(self) -> Vec<u8> {
        let mut response = match self.outcome {
            Outcome::Unchanged(_) => json!({"accepted": true}),
            Outcome::Mutated(pod) => return mutated_response(&pod, self.warning.as_deref()),
            Outcome::Rejected(rejection) => json!({"accepted": false, "message": rejection.to_string()}),
        };
        if let Some(warning) = self.warning {
            response["warnings"] = json!([warning]);
        }
        response.to_string().into_bytes()
    }
}

fn mutated_response(pod: &str, warning: Option<&str>) -> Vec<u8> {
    let mut response = Vec::with_capacity(pod.len() + 64);
    response.extend_from_slice(br#"{"accepted":true,"mutated_object":"#);
    response.extend_from_slice(pod.as_bytes());
    if let Some(warning) = warning {
        response.extend_from_slice(br#","warnings":"#);
        response.extend_from_slice(json!([warning]).to_string().as_bytes());
    }
    response.push(b'}');
    response
}
