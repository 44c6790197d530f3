//! Why a stand-in for the policy-server's `get_resource` host call ([`Cluster`]): policy-server
//! and kwctl are not installed where these tests run, and the rule table needs host answers a
//! cluster does not give on demand (a forbidden read, a body that is not JSON). Where they are
//! installed, the same table runs under the real policy-server (controller/tests/policy_server.rs)
//! and kwctl (e2e.bats).
//!
//! The policy as its tests run it: the fixtures, that host call, and the two ways to evaluate a
//! request: the core natively, and the built `policy.wasm` through waPC in wasmtime, as the
//! policy-server runs it.

pub mod wasm;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::support::objects::{name, namespace_of};

pub fn data_dir() -> PathBuf {
    crate::support::local::workspace().join("tests/data")
}

pub fn fixture(relative: &str) -> Value {
    let path = data_dir().join(relative);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The AdmissionReview of a pod under `tests/data/requests`.
pub fn review(pod: &str) -> Value {
    fixture(&format!("requests/{pod}.json"))
}

/// An InferenceReplica under `tests/data/replicas`.
pub fn replica(name: &str) -> Value {
    fixture(&format!("replicas/{name}.json"))
}

/// `review` with its pod changed by `change`.
pub fn edited(mut review: Value, change: impl FnOnce(&mut Value)) -> Value {
    change(&mut review["request"]["object"]);
    review
}

/// `replica` with these spec fields set (null removes one).
pub fn with_spec(mut replica: Value, fields: Value) -> Value {
    let spec = replica["spec"].as_object_mut().expect("spec");
    for (field, value) in fields.as_object().expect("fields") {
        match value {
            Value::Null => spec.remove(field),
            set => spec.insert(field.clone(), set.clone()),
        };
    }
    replica
}

/// The ValidationRequest the policy-server sends: the settings and an AdmissionReview's request.
pub fn validation_request(review: &Value, settings: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"settings": settings, "request": review["request"]})).expect("serialisable")
}

/// What the cluster holds, as the policy-server's `get_resource` sees it. Its errors are worded
/// as the real runtime (policy-server and kwctl 1.31, policy-evaluator 0.30) words them, recorded
/// from `make e2e-server`: the host's reason reaches the policy in that shape.
#[derive(Clone, Default)]
pub struct Cluster {
    replicas: BTreeMap<(String, String), Vec<u8>>,
    /// When set, every call fails with this reason (e.g. RBAC forbids the read).
    failure: Option<String>,
    pub calls: Arc<Mutex<Vec<Value>>>,
}

/// The runtime's reason when the API server refuses a read: its kube client's `ErrorResponse`.
pub fn refused(message: &str, reason: &str, code: u16) -> String {
    format!(
        "ApiError: {message}: {reason} (ErrorResponse {{ status: \"Failure\", message: {message:?}, reason: {reason:?}, code: {code} }})"
    )
}

impl Cluster {
    /// Every replica under `tests/data/replicas`.
    pub fn with_fixtures() -> Self {
        let entries = std::fs::read_dir(data_dir().join("replicas")).expect("tests/data/replicas");
        let files = entries.map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned());
        files.fold(Self::default(), |cluster, file| {
            cluster.with_replica(fixture(&format!("replicas/{file}")))
        })
    }

    pub fn with_replica(mut self, replica: Value) -> Self {
        let key = (namespace_of(&replica).to_owned(), name(&replica).to_owned());
        self.replicas
            .insert(key, serde_json::to_vec(&replica).expect("serialisable"));
        self
    }

    /// Answers the named replica with raw bytes, such as text that is not JSON.
    pub fn with_raw_answer(mut self, namespace: &str, name: &str, answer: &[u8]) -> Self {
        self.replicas.insert((namespace.into(), name.into()), answer.to_vec());
        self
    }

    /// Every read refused by the API server with 403 and `message` (RBAC).
    pub fn forbidding(mut self, message: &str) -> Self {
        self.failure = Some(refused(message, "Forbidden", 403));
        self
    }

    /// Every read answered with `body`, which the runtime cannot decode: its host call fails.
    pub fn undecodable(mut self, body: &str) -> Self {
        let error = serde_json::from_str::<Value>(body).expect_err("a body that is not JSON");
        self.failure = Some(format!("Error deserializing response: {error}"));
        self
    }

    /// The policy-server's `kubewarden/kubernetes/get_resource`, its errors in the runtime's shape.
    pub fn get_resource(&self, request: &[u8]) -> Result<Vec<u8>, String> {
        self.answer(request).map_err(|reason| runtime_error(&reason))
    }

    /// What the cluster answers, and the host's reason when it cannot (a replay session's message).
    pub fn answer(&self, request: &[u8]) -> Result<Vec<u8>, String> {
        let request: Value = serde_json::from_slice(request).map_err(|e| format!("bad request: {e}"))?;
        self.calls.lock().expect("lock").push(request.clone());
        if let Some(reason) = &self.failure {
            return Err(reason.clone());
        }
        let text = |field: &str| request[field].as_str().unwrap_or_default().to_owned();
        let (api_version, kind, name, namespace) = (text("api_version"), text("kind"), text("name"), text("namespace"));
        self.replicas
            .get(&(namespace.clone(), name.clone()))
            .filter(|_| api_version == "ome.io/v1beta1" && kind == "InferenceReplica")
            .cloned()
            .ok_or_else(|| {
                format!("Cannot find {api_version}/{kind} named '{name}' inside of namespace 'Some(\"{namespace}\")'")
            })
    }

    pub fn calls(&self) -> Vec<Value> {
        self.calls.lock().expect("lock").clone()
    }
}

/// A host error as kwctl and policy-server 1.31 give it to the policy where `RUST_BACKTRACE` is
/// set: the reason after a prefix, then a stack backtrace (recorded from kwctl in
/// `tests/data/host/kwctl-1.31-get-resource-error.txt`).
pub fn runtime_error(reason: &str) -> String {
    let recorded =
        std::fs::read_to_string(data_dir().join("host/kwctl-1.31-get-resource-error.txt")).expect("recorded");
    let backtrace = recorded.split_once('\n').map(|(_, rest)| rest).unwrap_or_default();
    format!("Callback evaluation failure: {reason}\n{backtrace}")
}

/// A way to run `validate`: the native core, or the wasm.
pub trait Policy {
    fn validate(&self, payload: &[u8], cluster: &Cluster) -> Value;
}

pub struct Native;

impl Policy for Native {
    fn validate(&self, payload: &[u8], cluster: &Cluster) -> Value {
        let response = ome_spread::validate(payload, |replica| {
            cluster.get_resource(&ome_spread::replica::get_resource_request(replica)?)
        })
        .expect("the policy answers");
        answer(&response)
    }
}

/// A ValidationResponse as JSON, without the members the SDK writes as null: the policy-server
/// reads a null member as an absent one.
pub fn answer(response: &[u8]) -> Value {
    without_nulls(serde_json::from_slice(response).expect("the policy answers JSON"))
}

/// An object without its null members.
pub fn without_nulls(mut object: Value) -> Value {
    if let Some(members) = object.as_object_mut() {
        members.retain(|_, value| !value.is_null());
    }
    object
}
