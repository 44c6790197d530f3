//! Why not kube-apiserver: the rule table's cases need answers a real API server does not give on
//! demand (a 500, a body that is not JSON), and the suite checks each lookup that gets past
//! policy-server's cache. The policy reads its replicas from a real kube-apiserver, under
//! `policy.yaml`'s RBAC, in tests/webhook.rs and controller/tests/seed.rs (through the admission
//! host, [`super::admission_host`]).
//!
//! A fake Kubernetes API server, for the real Kubewarden policy-server of
//! [`crate::policy_server`]: it serves the discovery documents of `ome.io/v1beta1` and, for each
//! case of the rule table, the answer to the GET of its InferenceReplica, recording every request.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// What the API server answers to the GET of one replica.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    pub code: u16,
    pub body: String,
}

/// A Kubernetes `Status` object, as a real API server sends with an error.
pub fn status(code: u16, reason: &str, message: &str, name: &str) -> Answer {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason,
        "details": {"name": name, "group": "ome.io", "kind": "inferencereplicas"}, "code": code,
    });
    Answer {
        code,
        body: body.to_string(),
    }
}

/// A fake Kubernetes API server over plain HTTP: the discovery documents of `ome.io/v1beta1`, and
/// the replicas it was given; 404 `Status` for anything else. It records every request.
pub struct FakeApi {
    pub addr: SocketAddr,
    replicas: BTreeMap<String, Answer>,
    seen: Mutex<Vec<String>>,
}

impl FakeApi {
    pub async fn start(replicas: BTreeMap<String, Answer>) -> Arc<FakeApi> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let api = Arc::new(FakeApi {
            addr: listener.local_addr().expect("addr"),
            replicas,
            seen: Mutex::default(),
        });
        let router = Router::new().fallback(answer).with_state(api.clone());
        tokio::spawn(async move { axum::serve(listener, router).await });
        api
    }

    /// Every request so far, as `METHOD path?query`.
    pub fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

async fn answer(State(api): State<Arc<FakeApi>>, method: Method, uri: Uri) -> Response {
    api.seen.lock().unwrap().push(format!("{method} {uri}"));
    let resources = json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "ome.io/v1beta1",
        "resources": [{"name": "inferencereplicas", "singularName": "inferencereplica", "namespaced": true,
                       "kind": "InferenceReplica", "verbs": ["get", "list", "watch"]}],
    });
    let group = json!({
        "kind": "APIGroup", "apiVersion": "v1", "name": "ome.io",
        "versions": [{"groupVersion": "ome.io/v1beta1", "version": "v1beta1"}],
        "preferredVersion": {"groupVersion": "ome.io/v1beta1", "version": "v1beta1"},
    });
    let found = |body: Value| Answer {
        code: 200,
        body: body.to_string(),
    };
    let answer = match (method, uri.path()) {
        (Method::GET, "/version") => found(json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0"})),
        (Method::GET, "/api") => found(json!({"kind": "APIVersions", "versions": ["v1"]})),
        (Method::GET, "/apis") => found(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [group]})),
        (Method::GET, "/apis/ome.io") => found(group),
        (Method::GET, "/apis/ome.io/v1beta1") => found(resources),
        (Method::GET, path) => match api.replicas.get(path) {
            Some(answer) => answer.clone(),
            None => status(404, "NotFound", &format!("the server could not find {path}"), ""),
        },
        (_, path) => status(405, "MethodNotAllowed", &format!("{path}: only GET is served"), ""),
    };
    let code = StatusCode::from_u16(answer.code).expect("code");
    (code, [(header::CONTENT_TYPE, "application/json")], answer.body).into_response()
}
