//! Why not kube-apiserver: each of the controller's tests that use it runs its own cluster in
//! milliseconds under tokio's paused time, so that "nothing happened within 2 s" is exact, and the
//! churn benchmark measures the controller alone. The controller runs against the real
//! kube-apiserver in the cluster suites (controller/tests/deployed.rs, cluster.rs, seed.rs) and in
//! `make bench-cluster`.
//!
//! The in-memory API server of the controller's tests and of `make bench-churn`: it lists,
//! watches, creates and patches objects held as JSON, behind tower-test's mock service
//! ([`ApiServer::client`]: controller/tests/controller.rs, explain.rs) or over HTTP on 127.0.0.1
//! ([`serve`]: controller/benches/churn.rs).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use bytes::Bytes;
use futures::channel::mpsc;
use http::{Request, Response};
use http_body::Frame;
use http_body_util::{BodyExt, StreamBody};
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock;

use crate::support::local::workspace;

type Chunks = mpsc::UnboundedSender<Result<Frame<Bytes>, Infallible>>;
pub type ResponseBody = StreamBody<mpsc::UnboundedReceiver<Result<Frame<Bytes>, Infallible>>>;

/// Where an object lives: its API prefix (`/api/v1`, `/apis/ome.io/v1beta1`), resource, namespace,
/// name (empty where a request names none: a list or a watch).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Key {
    prefix: String,
    resource: String,
    namespace: Option<String>,
    name: String,
}

impl Key {
    /// Whether a list or watch of `self` (all namespaces, where it names none) holds `key`.
    fn holds(&self, key: &Key) -> bool {
        self.prefix == key.prefix
            && self.resource == key.resource
            && (self.namespace.is_none() || self.namespace == key.namespace)
    }
}

struct Watch {
    of: Key,
    /// The watch's query, its selectors read from it.
    query: String,
    chunks: Chunks,
}

#[derive(Default)]
pub struct ApiServer {
    pub objects: Mutex<BTreeMap<Key, Value>>,
    watches: Mutex<Vec<Watch>>,
    /// Every write, in order.
    pub writes: Mutex<Vec<Write>>,
    /// The path of every request, in order.
    pub paths: Mutex<Vec<String>>,
    version: AtomicU64,
    /// Serve the InferenceReplica schema of OME's minimal CRD, not of its full one.
    pub minimal_crd: AtomicBool,
    /// Per resource, how many of its next watches are answered 410 Gone.
    expired: Mutex<BTreeMap<String, usize>>,
}

/// A write the API server took: method, path, body, and when.
#[derive(Clone, Debug)]
pub struct Write {
    pub method: String,
    pub path: String,
    pub body: Value,
    pub at: Instant,
}

/// Where kube-apiserver serves the OpenAPI v3 document of the group version ome.io/v1beta1.
const OPENAPI_PATH: &str = "/openapi/v3/apis/ome.io/v1beta1";

/// The OpenAPI v3 document kube-apiserver v1.35.8 served for OME's full or minimal
/// InferenceReplica CRD (cut to its status).
fn served_schema(minimal: bool) -> Value {
    let file = if minimal { "minimal.json" } else { "full.json" };
    let path = workspace().join("controller/tests/data/openapi").join(file);
    serde_json::from_str(&std::fs::read_to_string(path).expect("recorded document")).expect("json")
}

/// The value of the query's parameter `name`.
fn param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
}

/// Whether the query's selectors (an equality label selector, a `metadata.name` field selector)
/// select `object`.
fn selected(object: &Value, query: &str) -> bool {
    let metadata = &object["metadata"];
    let label = param(query, "labelSelector").and_then(|s| s.split_once('='));
    let name = param(query, "fieldSelector").and_then(|s| s.strip_prefix("metadata.name="));
    label.is_none_or(|(k, v)| metadata["labels"][k] == v) && name.is_none_or(|name| metadata["name"] == name)
}

impl ApiServer {
    /// An API server that holds `objects`, each stored as [`ApiServer::put`] stores it.
    pub fn holding(objects: impl IntoIterator<Item = Value>) -> Arc<Self> {
        let server = Arc::new(Self::default());
        for object in objects {
            server.put(object);
        }
        server
    }

    /// A client whose every request this server answers in the test's process (tower-test's mock
    /// service, as kube-rs tests its controllers), for as long as the client lives.
    pub fn client(self: &Arc<Self>) -> kube::Client {
        let (service, mut handle) = mock::pair::<Request<Body>, Response<ResponseBody>>();
        let server = self.clone();
        tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                let server = server.clone();
                tokio::spawn(async move { respond.send_response(server.answer(request).await) });
            }
        });
        kube::Client::new(service, "default")
    }

    fn resource_of(kind: &str) -> (&'static str, String) {
        match kind {
            "Pod" | "Node" => ("/api/v1", format!("{}s", kind.to_lowercase())),
            "Lease" => ("/apis/coordination.k8s.io/v1", "leases".into()),
            // Where the recorder patches an Event that repeats.
            "Event" => ("/apis/events.k8s.io/v1", "events".into()),
            "ClusterAdmissionPolicy" => ("/apis/policies.kubewarden.io/v1", "clusteradmissionpolicies".into()),
            "Report" => ("/apis/openreports.io/v1alpha1", "reports".into()),
            _ => ("/apis/ome.io/v1beta1", format!("{}s", kind.to_lowercase())),
        }
    }

    /// Stores an object, or replaces it, and tells the watches.
    pub fn put(&self, mut object: Value) -> Value {
        let key = Self::key(
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["namespace"].as_str(),
            object["metadata"]["name"].as_str().unwrap_or_default(),
        );
        let version = self.version.fetch_add(1, Ordering::SeqCst) + 1;
        object["metadata"]["resourceVersion"] = json!(version.to_string());
        let mut objects = self.objects.lock().unwrap();
        // As the API server does: a new object gets a uid of its own, one made again a new one.
        if !objects.contains_key(&key) && object["metadata"]["uid"].is_null() {
            object["metadata"]["uid"] = json!(format!("uid-{version}"));
        }
        let replaced = objects.insert(key.clone(), object.clone()).is_some();
        drop(objects);
        let kind = if replaced { "MODIFIED" } else { "ADDED" };
        self.notify(&key, kind, &object);
        object
    }

    /// Where an object of `kind` named so lives.
    fn key(kind: &str, namespace: Option<&str>, name: &str) -> Key {
        let (prefix, resource) = Self::resource_of(kind);
        Key {
            prefix: prefix.into(),
            resource,
            namespace: namespace.map(String::from),
            name: name.into(),
        }
    }

    pub fn delete(&self, kind: &str, namespace: Option<&str>, name: &str) {
        let key = Self::key(kind, namespace, name);
        let object = self.objects.lock().unwrap().remove(&key).expect(name);
        self.notify(&key, "DELETED", &object);
    }

    fn notify(&self, key: &Key, kind: &str, object: &Value) {
        let line = format!("{}\n", json!({"type": kind, "object": object}));
        self.watches.lock().unwrap().retain(|w| {
            let matches = w.of.holds(key) && selected(object, &w.query);
            !matches
                || w.chunks
                    .unbounded_send(Ok(Frame::data(Bytes::from(line.clone()))))
                    .is_ok()
        });
    }

    /// Deletes an object without telling the watches: a deletion while they were down.
    pub fn delete_unseen(&self, kind: &str, namespace: Option<&str>, name: &str) {
        let key = Self::key(kind, namespace, name);
        self.objects.lock().unwrap().remove(&key).expect(name);
    }

    /// Ends every watch of `resource`, and answers the next as many 410 Gone (their
    /// resourceVersion too old), as kube-apiserver does after a restart that compacted it: each
    /// watcher lists again.
    pub fn expire_watches(&self, resource: &str) {
        let mut watches = self.watches.lock().unwrap();
        let before = watches.len();
        watches.retain(|w| w.of.resource != resource);
        let ended = before - watches.len();
        *self.expired.lock().unwrap().entry(resource.to_owned()).or_default() += ended;
    }

    /// Whether this watch of `resource` is answered 410 Gone.
    fn expires(&self, resource: &str) -> bool {
        let mut expired = self.expired.lock().unwrap();
        let left = expired.entry(resource.to_owned()).or_default();
        let expires = *left > 0;
        *left = left.saturating_sub(1);
        expires
    }

    pub fn get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Value {
        self.find(kind, namespace, name).expect(name)
    }

    /// The object, if the server holds it.
    pub fn find(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<Value> {
        let key = Self::key(kind, namespace, name);
        self.objects.lock().unwrap().get(&key).cloned()
    }

    pub fn edit(&self, kind: &str, namespace: Option<&str>, name: &str, edit: impl FnOnce(&mut Value)) {
        let mut object = self.get(kind, namespace, name);
        edit(&mut object);
        self.put(object);
    }

    /// The status conditions applied so far, as (reason, message).
    pub fn spread_conditions(&self) -> Vec<(String, String)> {
        let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
        let conditions = self.patches(|path| path.ends_with("/status"));
        let first = conditions.iter().map(|body| &body["status"]["conditions"][0]);
        first.map(|c| (text(&c["reason"]), text(&c["message"]))).collect()
    }

    /// The reason of each report applied so far, in order.
    pub fn report_reasons(&self) -> Vec<String> {
        let reports = self.patches(|path| path.contains("/reports/"));
        let reason = |body: &Value| {
            body["results"][0]["properties"]["reason"]
                .as_str()
                .unwrap_or_default()
                .into()
        };
        reports.iter().map(reason).collect()
    }

    /// The bodies of the PATCHes so far whose path `matching` accepts, in order.
    fn patches(&self, matching: impl Fn(&str) -> bool) -> Vec<Value> {
        let writes = self.writes.lock().unwrap();
        let patches = writes.iter().filter(|w| w.method == "PATCH" && matching(&w.path));
        patches.map(|w| w.body.clone()).collect()
    }

    fn wrote(&self, method: &str, path: String, body: &Value) {
        self.writes.lock().unwrap().push(Write {
            method: method.into(),
            path,
            body: body.clone(),
            at: Instant::now(),
        });
    }

    pub async fn answer<B: http_body::Body>(self: Arc<Self>, request: Request<B>) -> Response<ResponseBody> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let mut body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let path = parts.uri.path().to_owned();
        self.paths.lock().unwrap().push(path.clone());
        if path == OPENAPI_PATH {
            return reply(200, &served_schema(self.minimal_crd.load(Ordering::Relaxed)));
        }
        let query = parts
            .uri
            .query()
            .unwrap_or_default()
            .replace("%2F", "/")
            .replace("%3D", "=");
        let (target, status) = target(&path);
        match (parts.method.as_str(), target.name.is_empty()) {
            ("GET", false) => match self.objects.lock().unwrap().get(&target) {
                Some(object) => reply(200, object),
                None => reply(404, &not_found()),
            },
            ("GET", true) if query.contains("watch=true") => self.watch(target, &query),
            ("GET", true) => self.list(&target, &query),
            ("POST", true) => {
                // As the API server does: the namespace comes from the path.
                if let Some(namespace) = &target.namespace {
                    body["metadata"]["namespace"] = json!(namespace);
                }
                self.wrote("POST", path, &body);
                let stored = self.put(body);
                reply(201, &stored)
            }
            ("PATCH", false) => {
                self.wrote("PATCH", path, &body);
                self.patch(&target, status, &body)
            }
            _ => reply(404, &not_found()),
        }
    }

    /// A watch of the target's kind, or its expiry (410) where one is set for the kind.
    fn watch(&self, target: Key, query: &str) -> Response<ResponseBody> {
        let (chunks, receiver) = mpsc::unbounded();
        if self.expires(&target.resource) {
            let gone = json!({"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1",
                "status": "Failure", "reason": "Expired", "code": 410,
                "message": "too old resource version"}});
            let _ = chunks.unbounded_send(Ok(Frame::data(Bytes::from(format!("{gone}\n")))));
        } else {
            self.watches.lock().unwrap().push(Watch {
                of: target,
                query: query.to_owned(),
                chunks,
            });
        }
        Response::builder().status(200).body(StreamBody::new(receiver)).unwrap()
    }

    /// A list of the target's kind in pages of `limit`, as kube-apiserver serves them,
    /// `continue` the offset of the next.
    fn list(&self, target: &Key, query: &str) -> Response<ResponseBody> {
        let number = |name| param(query, name).and_then(|n| n.parse::<usize>().ok());
        let (offset, limit) = (number("continue").unwrap_or(0), number("limit").unwrap_or(usize::MAX));
        let objects = self.objects.lock().unwrap();
        let mut matching = objects.iter().filter(|(k, o)| target.holds(k) && selected(o, query));
        let items: Vec<Value> = matching
            .by_ref()
            .skip(offset)
            .take(limit)
            .map(|(_, o)| item(o, &target.prefix))
            .collect();
        let more = matching.next().is_some();
        drop(objects);
        let version = self.version.load(Ordering::SeqCst).to_string();
        let mut metadata = json!({"resourceVersion": version});
        if more {
            metadata["continue"] = json!((offset + items.len()).to_string());
        }
        let list = json!({"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": items});
        reply(200, &list)
    }

    /// A patch of the named object: (`status`) its status's conditions by type, or its spec's
    /// fields (and an InferenceService's annotations, refused when its resourceVersion is stale).
    fn patch(&self, target: &Key, status: bool, body: &Value) -> Response<ResponseBody> {
        let existing = self.objects.lock().unwrap().get(target).cloned();
        let resource = target.resource.as_str();
        let mut object = match existing {
            // The controller's reports: applied whole, created when missing.
            _ if resource == "reports" => body.clone(),
            Some(object) => object,
            None if resource == "leases" => body.clone(),
            None => return reply(404, &not_found()),
        };
        if status {
            // Conditions are a map keyed by type: replace ours, keep the others.
            let mut conditions = object["status"]["conditions"].as_array().cloned().unwrap_or_default();
            for applied in body["status"]["conditions"].as_array().into_iter().flatten() {
                conditions.retain(|c| c["type"] != applied["type"]);
                conditions.push(applied.clone());
            }
            object["status"]["conditions"] = json!(conditions);
        } else if let Some(spec) = body["spec"].as_object() {
            for (field, value) in spec {
                object["spec"][field] = value.clone();
            }
        }
        if resource == "inferenceservices" {
            let version = &body["metadata"]["resourceVersion"];
            if !version.is_null() && *version != object["metadata"]["resourceVersion"] {
                let conflict = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict", "code": 409});
                return reply(409, &conflict);
            }
            for (key, value) in body["metadata"]["annotations"].as_object().into_iter().flatten() {
                object["metadata"]["annotations"][key] = value.clone();
            }
        }
        let stored = self.put(object);
        reply(200, &stored)
    }
}

/// What a request's path names, and whether it is the status subresource.
fn target(path: &str) -> (Key, bool) {
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let api_len = if segments[0] == "api" { 2 } else { 3 };
    let mut rest = &segments[api_len..];
    let namespace = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => {
            rest = tail;
            Some((*ns).to_owned())
        }
        _ => None,
    };
    let key = Key {
        prefix: format!("/{}", segments[..api_len].join("/")),
        resource: rest[0].to_owned(),
        namespace,
        name: rest.get(1).map(|n| (*n).to_owned()).unwrap_or_default(),
    };
    (key, rest.get(2) == Some(&"status"))
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404})
}

/// An object as a list's item: kube-apiserver leaves out the kind and apiVersion of a built-in
/// kind's items; a custom resource's keep theirs.
fn item(object: &Value, prefix: &str) -> Value {
    let mut item = object.clone();
    let custom = ["/apis/ome.io/", "/apis/policies.kubewarden.io/"]
        .iter()
        .any(|group| prefix.starts_with(group));
    if let Some(fields) = item.as_object_mut().filter(|_| !custom) {
        fields.remove("kind");
        fields.remove("apiVersion");
    }
    item
}

/// A whole answer: the body ends after the value.
fn reply(code: u16, value: &Value) -> Response<ResponseBody> {
    let (chunks, frames) = mpsc::unbounded();
    let _ = chunks.unbounded_send(Ok(Frame::data(Bytes::from(value.to_string()))));
    Response::builder().status(code).body(StreamBody::new(frames)).unwrap()
}

/// Serves `server` over HTTP/1.1 on `listener` (bound to 127.0.0.1 by the caller) until the task
/// is dropped.
pub async fn serve(server: Arc<ApiServer>, listener: tokio::net::TcpListener) {
    while let Ok((stream, _)) = listener.accept().await {
        let server = server.clone();
        tokio::spawn(async move {
            let answer = hyper::service::service_fn(move |request| {
                let server = server.clone();
                async move { Ok::<_, Infallible>(server.answer(request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), answer);
            let _ = connection.await;
        });
    }
}
