//! One admission request, from the policy-server's ValidationRequest to its ValidationResponse,
//! in the order of docs/rules.md: P1 (a Pod CREATE), P2 (an OMENative pod), P11 (its labels), P3
//! (its InferenceReplica, read through the one host call), P4 (the replica's fields), then the
//! rules of the core, and the term they decide written into the pod. The pod is read and changed
//! as a `serde_json::Value`: every field it carries comes back as it came, known or not.

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use ome_spread_core::instance::{InstanceLabels, Runner};
use ome_spread_core::labels;
use ome_spread_core::replica::{ReplicaRef, is_controlling_replica};
use ome_spread_core::rules::{self, Decision, Unchanged};
use ome_spread_core::settings::{OnMissingReplica, Settings};
use ome_spread_core::shown::{cut, shown};
use ome_spread_core::spread::{SpreadFields, SpreadSettings};

use crate::rejection::Rejection;

/// What happens to an admission request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Unchanged(Unchanged),
    /// Accepted with this pod: the request's pod with the one term added.
    Mutated(Value),
    Rejected(Rejection),
}

/// The outcome of one request, and a warning for the API client, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    pub outcome: Outcome,
    pub warning: Option<String>,
}

impl From<Outcome> for Admission {
    fn from(outcome: Outcome) -> Self {
        Self { outcome, warning: None }
    }
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

#[cfg(any(not(target_arch = "wasm32"), target_os = "wasi"))]
pub use with_sdk::{PolicySettings, validate};

/// The request and the response, as the Kubewarden SDK reads and writes them. The playground
/// (wasm32-unknown-unknown) goes without: it calls [`admit`] with the pod it builds.
#[cfg(any(not(target_arch = "wasm32"), target_os = "wasi"))]
mod with_sdk {
    use kubewarden_policy_sdk::request::ValidationRequest;
    use kubewarden_policy_sdk::response::ValidationResponse;
    use kubewarden_policy_sdk::settings::Validatable;
    use kubewarden_policy_sdk::wapc_guest::CallResult;
    use kubewarden_policy_sdk::{mutate_request, reject_request};
    use serde::Deserialize;
    use serde_json::Value;

    use ome_spread_core::replica::ReplicaRef;
    use ome_spread_core::rules::Unchanged;
    use ome_spread_core::settings::Settings;

    use super::{Outcome, admit};
    use crate::rejection::Rejection;

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

/// P2 onwards, for the `pod` of a Pod CREATE in `namespace` with the policy's `settings`.
pub fn admit(
    namespace: &str,
    pod: Value,
    settings: &Value,
    read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>,
) -> Admission {
    let mut warning = None;
    let outcome = match mutated(namespace, pod, settings, read_replica, &mut warning) {
        Ok(pod) => Outcome::Mutated(pod),
        Err(outcome) => outcome,
    };
    Admission { outcome, warning }
}

/// The pod with the term the rules decide; the outcome instead where they leave it unchanged.
fn mutated(
    namespace: &str,
    mut pod: Value,
    settings: &Value,
    read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>,
    warning: &mut Option<String>,
) -> Result<Value, Outcome> {
    let rejected = Outcome::Rejected;
    let reader = Pod::read(&pod, namespace).map_err(rejected)?;
    if reader.label(labels::MANAGED_BY).map_err(rejected)?.as_deref() != Some(labels::OME_NATIVE) {
        return Err(Outcome::Unchanged(Unchanged::NotOmeNative));
    }
    let settings = Settings::from_json(settings)
        .map_err(Rejection::BadSettings)
        .map_err(rejected)?;
    let instance = reader.instance_labels().map_err(rejected)?;
    let replica = match reader.controller_replica().map_err(rejected)? {
        Some(name) => ReplicaRef {
            namespace: reader.namespace.clone(),
            name,
        },
        None => ReplicaRef::for_component(&reader.namespace, &instance.service, &instance.component),
    };
    let spread = match replica_settings(&replica, read_replica(&replica)).map_err(rejected)? {
        Ok(spread) => spread,
        Err(unreadable) if settings.on_missing_replica == OnMissingReplica::Accept => {
            *warning = Some(format!(
                "{unreadable}; admitted without spread (onMissingReplica: Accept)"
            ));
            return Err(Outcome::Unchanged(Unchanged::ReplicaUnreadable));
        }
        Err(unreadable) => return Err(rejected(unreadable)),
    };
    let term = rules::wanted(&instance, &spread, &settings).map_err(Outcome::Unchanged)?;
    let path = term.list().path();
    let present = reader.listed(path).map_err(rejected)?;
    let name = reader.name.clone();
    let internal = |what: String| rejected(Rejection::Internal { pod: name, what });
    let as_json = |e: serde_json::Error| format!("the term cannot be written as JSON: {e}");
    let edited = match rules::decide(term, &present, &settings) {
        Decision::Unchanged(why) => return Err(Outcome::Unchanged(why)),
        Decision::Append(term) => serde_json::to_value(term)
            .map_err(as_json)
            .map(|term| append(&mut pod, path, term)),
        Decision::Complete { index, fields } => serde_json::to_value(fields)
            .map_err(as_json)
            .and_then(|fields| complete(&mut pod, path, index, fields)),
    };
    edited.map_err(internal)?;
    Ok(pod)
}

/// P12: `fields` added to the term at `index` of the list at `path`.
fn complete(pod: &mut Value, path: &[&str], index: usize, fields: Value) -> Result<(), String> {
    let Value::Object(fields) = fields else {
        return Err("the fields to add are not an object".into());
    };
    let own = list_at(pod, path)
        .and_then(|list| list.get_mut(index))
        .and_then(Value::as_object_mut)
        .ok_or_else(|| format!("no term {index} to complete"))?;
    own.extend(fields);
    Ok(())
}

/// P5, P8: `term` at the end of the list at `path`; the list and the objects above it are made
/// where they are absent or null (the pod's lists were read, so every step is an object).
fn append(pod: &mut Value, path: &[&str], term: Value) {
    let mut at = pod;
    for step in path {
        if let Value::Object(fields) = at {
            at = fields.entry(*step).or_insert(Value::Null);
        }
        if at.is_null() {
            *at = Value::Object(Map::new());
        }
    }
    match at {
        Value::Array(list) => list.push(term),
        other => *other = Value::Array(vec![term]),
    }
}

fn list_at<'a>(pod: &'a mut Value, path: &[&str]) -> Option<&'a mut Vec<Value>> {
    path.iter()
        .try_fold(pod, |at, step| at.get_mut(*step))
        .and_then(Value::as_array_mut)
}

/// What the rules read of a pod: its namespace, name, labels and owners, and a list's terms.
struct Pod<'a> {
    /// The request's namespace; a pod created from `generateName` may carry none of its own.
    namespace: String,
    /// `<namespace>/<name>` for messages (`<generateName>*` before the API server names it).
    name: String,
    object: &'a Value,
    metadata: Option<&'a Map<String, Value>>,
}

impl<'a> Pod<'a> {
    fn read(object: &'a Value, request_namespace: &str) -> Result<Self, Rejection> {
        let bad = |field: &str, value: &Value, why: &str| Rejection::BadPod {
            pod: format!("{request_namespace}/(unnamed)"),
            field: field.into(),
            value: shown(value),
            why: why.into(),
        };
        if !object.is_object() {
            return Err(bad("object", object, "must be a Pod object"));
        }
        let metadata = match &object["metadata"] {
            Value::Null => None,
            Value::Object(metadata) => Some(metadata),
            other => return Err(bad("metadata", other, "must be an object")),
        };
        let text = |field: &str| {
            metadata
                .and_then(|m| m.get(field))
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let namespace = match request_namespace {
            "" => text("namespace"),
            namespace => namespace,
        }
        .to_owned();
        let name = match (text("name"), text("generateName")) {
            ("", "") => format!("{namespace}/(unnamed)"),
            ("", prefix) => format!("{namespace}/{prefix}*"),
            (name, _) => format!("{namespace}/{name}"),
        };
        let pod = Self {
            namespace,
            name,
            object,
            metadata,
        };
        match pod.field("labels") {
            Value::Null | Value::Object(_) => Ok(pod),
            other => Err(pod.bad("metadata.labels", other, "must be an object")),
        }
    }

    fn field(&self, name: &str) -> &'a Value {
        self.metadata.and_then(|m| m.get(name)).unwrap_or(&Value::Null)
    }

    /// A label's value; one that is not a string is an error, not a miss.
    fn label(&self, name: &'static str) -> Result<Option<Cow<'a, str>>, Rejection> {
        match &self.field("labels")[name] {
            Value::Null => Ok(None),
            Value::String(value) => Ok(Some(Cow::Borrowed(value))),
            other => Err(self.bad_label(name, &shown(other), "must be a string")),
        }
    }

    /// P11: the labels a rule needs, present and well formed.
    fn instance_labels(&self) -> Result<InstanceLabels<'a>, Rejection> {
        let runner = match self.required(labels::RUNNER)?.as_ref() {
            "default" => Runner::Default,
            "leader" => Runner::Leader,
            "worker" => {
                let index = self.required(labels::INSTANCE_INDEX)?;
                if index.is_empty() || index.len() > 63 || !index.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(self.bad_label(labels::INSTANCE_INDEX, &quoted(&index), "must be a whole number"));
                }
                Runner::Worker {
                    instance_index: index.into_owned(),
                }
            }
            other => {
                return Err(self.bad_label(labels::RUNNER, &quoted(other), "must be default, leader or worker"));
            }
        };
        Ok(InstanceLabels {
            service: self.selector_value(labels::INFERENCE_SERVICE)?,
            component: self.selector_value(labels::COMPONENT)?,
            runner,
        })
    }

    /// P3: the name of the InferenceReplica that controls this pod, if an ownerReference says so.
    fn controller_replica(&self) -> Result<Option<String>, Rejection> {
        let references = match self.field("ownerReferences") {
            Value::Null => return Ok(None),
            Value::Array(references) => references,
            other => return Err(self.bad("metadata.ownerReferences", other, "must be a list")),
        };
        let is_replica = |r: &&Value| {
            let text = |field: &str| r[field].as_str().unwrap_or_default();
            is_controlling_replica(text("apiVersion"), text("kind"), r["controller"] == true)
        };
        match references.iter().find(is_replica).map(|r| &r["name"]) {
            None => Ok(None),
            Some(Value::String(name)) if !name.is_empty() => Ok(Some(name.clone())),
            Some(other) => Err(self.bad(
                "metadata.ownerReferences[InferenceReplica].name",
                other,
                "must be the replica's name",
            )),
        }
    }

    /// The terms of the list at `path`; every term must name its topologyKey. Absent or null
    /// along the way is an empty list; any other non-object on the way, or a non-list at the
    /// end, is an error naming the field.
    fn listed(&self, path: &[&str]) -> Result<Vec<&'a Value>, Rejection> {
        let mut at = self.object;
        for (depth, step) in path.iter().enumerate() {
            at = &at[*step];
            let last = depth + 1 == path.len();
            match at {
                Value::Null => return Ok(Vec::new()),
                Value::Array(_) if last => {}
                Value::Object(_) if !last => {}
                _ => {
                    let why = if last { "must be a list" } else { "must be an object" };
                    return Err(self.bad(&path[..=depth].join("."), at, why));
                }
            }
        }
        let terms = at.as_array().map(Vec::as_slice).unwrap_or_default();
        for (i, term) in terms.iter().enumerate() {
            if !term["topologyKey"].is_string() {
                let field = format!("{}[{i}].topologyKey", path.join("."));
                return Err(self.bad(&field, &term["topologyKey"], "must be a string"));
            }
        }
        Ok(terms.iter().collect())
    }

    fn required(&self, label: &'static str) -> Result<Cow<'a, str>, Rejection> {
        self.label(label)?.ok_or_else(|| Rejection::MissingLabel {
            pod: self.name.clone(),
            label,
        })
    }

    /// A label whose value goes into a selector: present and a valid label value.
    fn selector_value(&self, label: &'static str) -> Result<Cow<'a, str>, Rejection> {
        let value = self.required(label)?;
        match labels::check_value(&value) {
            Ok(()) if !value.is_empty() => Ok(value),
            Ok(()) => Err(self.bad_label(label, &quoted(&value), "must not be empty")),
            Err(why) => Err(self.bad_label(label, &quoted(&value), why)),
        }
    }

    fn bad(&self, field: &str, value: &Value, why: &str) -> Rejection {
        Rejection::BadPod {
            pod: self.name.clone(),
            field: field.into(),
            value: shown(value),
            why: why.into(),
        }
    }

    fn bad_label(&self, label: &'static str, value: &str, why: &str) -> Rejection {
        Rejection::BadLabel {
            pod: self.name.clone(),
            label,
            value: value.into(),
            why: why.into(),
        }
    }
}

fn quoted(text: &str) -> String {
    shown(&Value::String(text.to_owned()))
}

/// What the policy reads of the host's answer.
#[derive(Deserialize)]
struct ReplicaAnswer {
    #[serde(default)]
    kind: Option<Value>,
    #[serde(default)]
    spec: Option<Value>,
}

/// P3, P4: the replica's settings in effect from the host's answer; `Ok(Err(_))` when it could
/// not be read (P3's rejection, which `onMissingReplica` may turn into a warning).
fn replica_settings(
    replica: &ReplicaRef,
    answer: Result<Vec<u8>, String>,
) -> Result<Result<SpreadSettings, Rejection>, Rejection> {
    let spec = answer
        .map_err(|e| host_reason(&e))
        .and_then(|answer| replica_spec(&answer));
    let bad = |field: String, value: String, why: String| Rejection::BadReplica {
        namespace: replica.namespace.clone(),
        name: replica.name.clone(),
        field,
        value,
        why,
    };
    match spec {
        Ok(Value::Object(spec)) => {
            let field = |name: &str| spec.get(name).cloned();
            let fields = SpreadFields {
                topology_spread: field("topologySpread"),
                topology_spread_key: field("topologySpreadKey"),
                topology_key: field("topologyKey"),
                ..SpreadFields::default()
            };
            SpreadSettings::from_fields(fields)
                .map(Ok)
                .map_err(|b| bad(format!("spec.{}", b.field), b.value, b.why))
        }
        Ok(other) => Err(bad("spec".into(), shown(&other), "must be an object".into())),
        Err(reason) => Ok(Err(Rejection::ReplicaUnreadable {
            namespace: replica.namespace.clone(),
            name: replica.name.clone(),
            reason,
        })),
    }
}

/// The host's answer, checked to be an InferenceReplica, and its spec.
fn replica_spec(answer: &[u8]) -> Result<Value, String> {
    let answer: Value = serde_json::from_slice(answer).map_err(|e| format!("the host's answer is not JSON: {e}"))?;
    if !answer.is_object() {
        return Err("the host's answer is not an InferenceReplica: not a JSON object".to_owned());
    }
    let replica: ReplicaAnswer =
        serde_json::from_value(answer).map_err(|e| format!("the host's answer is not an InferenceReplica: {e}"))?;
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
    replica
        .spec
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
    use super::{Pod, host_reason};

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

    fn owner(references: &str) -> Result<Option<String>, String> {
        let text = format!(r#"{{"metadata": {{"name": "p", "ownerReferences": {references}}}, "spec": {{}}}}"#);
        let object = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        let pod = Pod::read(&object, "ns").map_err(|e| e.to_string())?;
        pod.controller_replica().map_err(|e| e.to_string())
    }

    #[test]
    fn p3_the_controlling_replica_is_the_controller_owner_of_that_kind() {
        let replica = |fields: &str| format!(r#"[{{"kind": "Other", "controller": true}}, {{{fields}}}]"#);
        let ok = r#""apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "r", "controller": true"#;
        assert_eq!(owner(&replica(ok)), Ok(Some("r".into())));
        let escaped = r#""api\u0056ersion": "ome.io\/v1beta1", "kind": "InferenceReplica", "name": "r\u0031", "controller": true"#;
        assert_eq!(owner(&replica(escaped)), Ok(Some("r1".into())));
        let not_controller =
            r#""apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "r", "controller": "true""#;
        assert_eq!(owner(&replica(not_controller)), Ok(None));
        assert_eq!(
            owner(r#"[["ome.io/v1beta1", "InferenceReplica", "r", true]]"#),
            Ok(None)
        );
        assert_eq!(owner("null"), Ok(None));
        assert_eq!(owner("[]"), Ok(None));
        assert_eq!(
            owner(r#""x""#),
            Err(r#"pod ns/p: metadata.ownerReferences is "x": must be a list"#.into())
        );
        let unnamed = r#""apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "", "controller": true"#;
        assert_eq!(
            owner(&replica(unnamed)),
            Err(
                r#"pod ns/p: metadata.ownerReferences[InferenceReplica].name is "": must be the replica's name"#.into()
            )
        );
    }
}
