//! One admission request, from the policy-server's ValidationRequest to its response:
//! P1 and P2 (is this ours), P11 (the pod's labels), P3 (its InferenceReplica, read through the
//! one host call), P4 (the replica's fields), then the rules.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::pod::{self, Pod};
use crate::rejection::Rejection;
use crate::rules::{self, Decision, Unchanged};
use crate::settings::{OnMissingReplica, Settings};
use crate::spread::SpreadSettings;

#[derive(Deserialize)]
struct ValidationRequest {
    #[serde(default)]
    settings: Value,
    request: AdmissionRequest,
}

#[derive(Deserialize)]
struct AdmissionRequest {
    #[serde(default)]
    operation: String,
    #[serde(default)]
    kind: GroupVersionKind,
    #[serde(default)]
    namespace: String,
    #[serde(default)]
    object: Value,
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

/// The outcome of one request: the decision, and the object it applies to.
pub struct Evaluation {
    pub decision: Decision,
    object: Value,
    warning: Option<String>,
}

/// Evaluates a ValidationRequest. `read_replica` is the host call: it returns the replica's JSON,
/// or the host's reason for not returning it. It is called at most once, and only for an
/// OMENative pod with well-formed labels.
pub fn evaluate(payload: &[u8], read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>) -> Evaluation {
    let request: ValidationRequest = match serde_json::from_slice(payload) {
        Ok(request) => request,
        Err(e) => {
            return Evaluation::of(
                Decision::Rejected(Rejection::MalformedRequest(e.to_string())),
                Value::Null,
            );
        }
    };
    let ValidationRequest { settings, request } = request;
    let mut warning = None;
    let decision = decide(&settings, &request, read_replica, &mut warning).unwrap_or_else(Decision::Rejected);
    Evaluation {
        decision,
        object: request.object,
        warning,
    }
}

fn decide(
    settings: &Value,
    request: &AdmissionRequest,
    read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>,
    warning: &mut Option<String>,
) -> Result<Decision, Rejection> {
    let kind = &request.kind;
    if request.operation != "CREATE" || !kind.group.is_empty() || kind.version != "v1" || kind.kind != "Pod" {
        return Ok(Decision::Unchanged(Unchanged::NotPodCreate));
    }
    let namespace = match request.namespace.as_str() {
        "" => request
            .object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or(""),
        namespace => namespace,
    };
    let pod = Pod::new(&request.object, namespace)?;
    if !pod.is_ome_native()? {
        return Ok(Decision::Unchanged(Unchanged::NotOmeNative));
    }
    let settings = Settings::from_json(settings).map_err(Rejection::BadSettings)?;
    let instance = pod.instance_labels()?;
    let replica = ReplicaRef {
        namespace: namespace.to_owned(),
        name: match pod.controller_replica()? {
            Some(owner) => owner.to_owned(),
            None => format!("{}-{}", instance.service, instance.component),
        },
    };
    let spread = match read_replica(&replica).and_then(|answer| replica_spec(&answer)) {
        Ok(replica_spec) => spread_settings(&replica, &replica_spec)?,
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
                    Ok(Decision::Unchanged(Unchanged::ReplicaUnreadable))
                }
            };
        }
    };
    rules::decide(&pod, &instance, &spread, &settings)
}

/// The host's answer, checked to be an InferenceReplica with a spec object.
fn replica_spec(answer: &[u8]) -> Result<Value, String> {
    let mut replica: Value =
        serde_json::from_slice(answer).map_err(|e| format!("the host's answer is not JSON: {e}"))?;
    match replica.get("kind") {
        None => {}
        Some(Value::String(kind)) if kind == "InferenceReplica" => {}
        Some(other) => return Err(format!("the host answered with kind {other}, not InferenceReplica")),
    }
    replica
        .get_mut("spec")
        .map(Value::take)
        .ok_or_else(|| "the host's answer has no spec".to_owned())
}

/// P4: the settings in effect that OME projected onto the replica.
fn spread_settings(replica: &ReplicaRef, spec: &Value) -> Result<SpreadSettings, Rejection> {
    let bad = |field: String, value: String, why: String| Rejection::BadReplica {
        namespace: replica.namespace.clone(),
        name: replica.name.clone(),
        field,
        value,
        why,
    };
    if !spec.is_object() {
        return Err(bad(
            "spec".into(),
            crate::rejection::shown(spec),
            "must be an object".into(),
        ));
    }
    SpreadSettings::from_fields(spec).map_err(|b| bad(format!("spec.{}", b.field), b.value, b.why))
}

impl Evaluation {
    fn of(decision: Decision, object: Value) -> Self {
        Self {
            decision,
            object,
            warning: None,
        }
    }

    /// The ValidationResponse the policy-server expects.
    pub fn response(self) -> Value {
        let mut response = match self.decision {
            Decision::Unchanged(_) => json!({"accepted": true}),
            Decision::Append { path, term } => {
                let mut object = self.object;
                match pod::append(&mut object, path, term) {
                    Ok(()) => json!({"accepted": true, "mutated_object": object}),
                    Err(e) => json!({"accepted": false, "message": format!("cannot add the term: {e}")}),
                }
            }
            Decision::Rejected(rejection) => json!({"accepted": false, "message": rejection.to_string()}),
        };
        if let Some(warning) = self.warning {
            response["warnings"] = json!([warning]);
        }
        response
    }
}
