//! A test-only admission host: the built `policy.wasm` behind a real API server's mutating
//! webhook, where the Kubewarden policy-server is not installed. This is test code. The product is
//! the policy, run by policy-server; nothing here ships.
//!
//! Why not policy-server: the cluster suites run where it is not installed (not run here). Where it
//! is, controller/tests/policy_server.rs runs every case of the rule table through it, and e2e.bats
//! runs the policy under kwctl; each skips where its tool is missing, saying so.
//!
//! It does what policy-server (Kubewarden 1.31, the release the project's kwctl and policy-server
//! suites pin) does for one policy:
//! - serves `POST /validate/<policy id>` (AdmissionReview v1) over HTTPS, and `GET /readiness`;
//! - runs the policy through waPC in wasmtime: the wasm tests' host, [`crate::policy::wasm`];
//! - answers the policy's `kubewarden/kubernetes/get_resource` from the API server, as the
//!   identity of `--kubeconfig` (the policy-server ServiceAccount's token), so `policy.yaml`'s
//!   RBAC decides what it may read;
//! - turns the policy's mutated object into a JSONPatch with `json_patch::diff`, as
//!   policy-evaluator's `AdmissionResponse::from_policy_validation_response` does.
//!
//! With `--apply-webhook` it writes, by server-side apply, the MutatingWebhookConfiguration that
//! kubewarden-controller writes for `policy.yaml`'s ClusterAdmissionPolicy ([`webhook::render`]),
//! pointing at itself by `url`, and waits until the API server calls it (a dry-run pod, logged as
//! `admission-host-probe`). It prints one line on stdout once it is ready:
//!
//! ```text
//! target/debug/admission-host --wasm policy.wasm --cert pki/webhook.crt \
//!   --key pki/webhook.key --listen 127.0.0.1:0 --kubeconfig policy-server.kubeconfig \
//!   [--settings '{"onMissingReplica":"Reject"}' | --settings FILE] \
//!   [--ca pki/ca.crt --apply-webhook --admin-kubeconfig kubeconfig]
//! admission host: listening on https://127.0.0.1:PORT
//! ```
//!
//! It stops on SIGINT or SIGTERM, and leaves the webhook configuration in place: a test of
//! `failurePolicy` needs it there while the host is down, and the test removes it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::{self, ServerConfig};

use crate::policy::wasm::Module;

/// What the host needs to serve one policy.
pub struct Options {
    pub wasm: PathBuf,
    pub settings: Value,
    pub cert: PathBuf,
    pub key: PathBuf,
    pub listen: SocketAddr,
    pub kubeconfig: PathBuf,
    /// The id of `/validate/<id>`: [`webhook::policy_id`].
    pub policy_id: String,
}

/// A host that serves until [`Running::stop`], or until it is dropped.
pub struct Running {
    pub addr: SocketAddr,
    /// The AdmissionReviews that reached `/validate`, readable or not.
    pub reviews: Arc<AtomicUsize>,
    /// The connections the host accepted: each a TLS handshake.
    pub connections: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Running {
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Stops listening and closes every open connection: the API server's next call is refused.
    pub async fn stop(mut self) {
        self.task.abort();
        let _ = (&mut self.task).await;
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Compiles the policy, checks its settings as policy-server does before it serves, and listens.
/// Errors are said in a line each, naming the file or the address.
pub async fn start(options: Options) -> Result<Running, String> {
    let address = options.listen;
    if !address.ip().is_loopback() {
        return Err(format!("--listen {address}: this host listens on 127.0.0.1 only"));
    }
    let module = Module::load(&options.wasm, None)?;
    policy::validate_settings(&module, &options.settings)?;
    let reader = lookup::Reader::new(client(&options.kubeconfig).await?);
    let acceptor = TlsAcceptor::from(Arc::new(tls(&options.cert, &options.key)?));
    let listen = |e| format!("listen on {address}: {e}");
    let listener = TcpListener::bind(options.listen).await.map_err(listen)?;
    let addr = listener.local_addr().map_err(listen)?;
    let (reviews, connections) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let host = Arc::new(Host {
        policy_id: options.policy_id,
        policy: policy::Policy {
            module: Arc::new(module),
            settings: options.settings,
            reader: Arc::new(reader),
        },
        reviews: reviews.clone(),
        connections: connections.clone(),
    });
    let task = tokio::spawn(serve(listener, acceptor, host));
    Ok(Running {
        addr,
        reviews,
        connections,
        task,
    })
}

/// A client of the kubeconfig's cluster, as whom it names.
pub async fn client(kubeconfig: &Path) -> Result<kube::Client, String> {
    let client = crate::support::api::client(Some(kubeconfig)).await;
    client.map_err(|e| format!("kubeconfig {}: {e}", kubeconfig.display()))
}

/// The serving certificate, with ring as the workspace's other TLS users have it.
fn tls(cert: &Path, key: &Path) -> Result<ServerConfig, String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let failed = |path: &Path, e: &dyn std::fmt::Display| format!("TLS: {}: {e}", path.display());
    let read = |path: &Path| std::fs::read(path).map_err(|e| failed(path, &e));
    let certs = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| failed(cert, &e))?;
    if certs.is_empty() {
        return Err(failed(cert, &"no PEM certificate in it"));
    }
    let key_der = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(|e| failed(key, &e))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| format!("TLS: {e}"))?;
    // The API server's webhook client speaks HTTP/2 when offered; this host serves HTTP/1.1.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// Accepts until the task is aborted. Dropping the connections' JoinSet then aborts the open
/// ones, so that a stopped host answers no one, not even on a kept-alive connection.
async fn serve(listener: TcpListener, acceptor: TlsAcceptor, host: Arc<Host>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            accepted = listener.accept() => match accepted {
                Ok((tcp, peer)) => {
                    host.connections.fetch_add(1, Ordering::SeqCst);
                    let (acceptor, host) = (acceptor.clone(), host.clone());
                    connections.spawn(async move {
                        let tls = match acceptor.accept(tcp).await {
                            Ok(tls) => tls,
                            Err(e) => return eprintln!("admission host: TLS handshake with {peer}: {e}"),
                        };
                        let service = hyper::service::service_fn(move |request| {
                            let host = host.clone();
                            async move { Ok::<_, std::convert::Infallible>(host.respond(request).await) }
                        });
                        let io = hyper_util::rt::TokioIo::new(tls);
                        if let Err(e) = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await {
                            eprintln!("admission host: connection from {peer}: {e}");
                        }
                    });
                }
                // Such as too many open files: the listener stays, and tries again in a moment.
                Err(e) => {
                    eprintln!("admission host: accept: {e}");
                    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                }
            },
        }
    }
}

/// The biggest AdmissionReview read: well above the API server's 3 MiB request limit.
const MAX_REVIEW_BYTES: usize = 16 << 20;

struct Host {
    policy_id: String,
    policy: policy::Policy,
    reviews: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
}

impl Host {
    async fn respond(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let path = parts.uri.path();
        if path == "/readiness" {
            return match parts.method {
                Method::GET => answer(StatusCode::OK, "text/plain", Vec::new()),
                _ => text(StatusCode::METHOD_NOT_ALLOWED, "/readiness: GET only"),
            };
        }
        let Some(id) = path.strip_prefix("/validate/") else {
            return text(StatusCode::NOT_FOUND, &format!("{path}: not served here"));
        };
        if id != self.policy_id {
            return text(
                StatusCode::NOT_FOUND,
                &format!("no policy {id:?}: this host serves {:?}", self.policy_id),
            );
        }
        if parts.method != Method::POST {
            return text(StatusCode::METHOD_NOT_ALLOWED, "/validate: POST only");
        }
        self.reviews.fetch_add(1, Ordering::SeqCst);
        let body = match Limited::new(body, MAX_REVIEW_BYTES).collect().await {
            Ok(body) => body.to_bytes(),
            Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                return text(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    &format!("the AdmissionReview is over {MAX_REVIEW_BYTES} bytes"),
                );
            }
            Err(e) => return text(StatusCode::BAD_REQUEST, &format!("cannot read the request body: {e}")),
        };
        match self.policy.review(&body).await {
            Ok(review) => {
                log(&review);
                answer(
                    StatusCode::OK,
                    "application/json",
                    serde_json::to_vec(&review).unwrap_or_default(),
                )
            }
            Err(e) => text(StatusCode::BAD_REQUEST, &e),
        }
    }
}

/// One line a review on stderr, for whoever reads the host's log beside the API server's.
fn log(review: &Value) {
    let response = &review["response"];
    let verdict = match (response["allowed"].as_bool(), response["patch"].is_string()) {
        (Some(true), true) => "allowed, patched",
        (Some(true), false) => "allowed",
        _ => "denied",
    };
    let text = |field: &Value| field.as_str().unwrap_or_default().to_owned();
    let (uid, message) = (text(&response["uid"]), text(&response["status"]["message"]));
    eprintln!("admission host: review {uid}: {verdict} {message}");
}

fn answer(status: StatusCode, content_type: &'static str, body: Vec<u8>) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    let content_type = hyper::header::HeaderValue::from_static(content_type);
    response.headers_mut().insert(hyper::header::CONTENT_TYPE, content_type);
    response
}

fn text(status: StatusCode, message: &str) -> Response<Full<Bytes>> {
    answer(status, "text/plain; charset=utf-8", format!("{message}\n").into_bytes())
}

/// One AdmissionReview through the policy, and the answer as policy-server gives it.
pub mod policy {
    use std::sync::Arc;

    use base64::Engine as _;
    use kubewarden_policy_sdk::response::ValidationResponse;
    use kubewarden_policy_sdk::settings::SettingsValidationResponse;
    use serde_json::{Value, json};

    use super::lookup::Reader;
    use crate::policy::wasm::Module;
    use crate::policy::without_nulls;

    pub struct Policy {
        pub module: Arc<Module>,
        pub settings: Value,
        pub reader: Arc<Reader>,
    }

    /// policy-server refuses to start on settings the policy's `validate_settings` refuses.
    pub fn validate_settings(module: &Module, settings: &Value) -> Result<(), String> {
        let instance = module.try_instance(|_| Err("no host call while settings are validated".into()))?;
        let payload = serde_json::to_vec(settings).map_err(|e| e.to_string())?;
        let answer = instance
            .call("validate_settings", &payload)
            .map_err(|e| format!("validate_settings: {e}"))?;
        let validation: SettingsValidationResponse = serde_json::from_slice(&answer)
            .map_err(|e| format!("validate_settings answered what is not a validation: {e}"))?;
        match validation.valid {
            true => Ok(()),
            false => Err(format!(
                "Policy settings are invalid: {}",
                validation.message.unwrap_or_default()
            )),
        }
    }

    impl Policy {
        /// The AdmissionReview v1 answering `review`; one the host cannot read is answered with a
        /// 400 and the reason.
        pub async fn review(&self, review: &[u8]) -> Result<Value, String> {
            let unreadable = |reason: &dyn std::fmt::Display| format!("cannot read the AdmissionReview: {reason}");
            let review: Value = serde_json::from_slice(review).map_err(|e| unreadable(&e))?;
            let request = &review["request"];
            if !request.is_object() {
                return Err(unreadable(&"no `request` object"));
            }
            let uid = request["uid"]
                .as_str()
                .ok_or_else(|| unreadable(&"`request.uid` is not a string"))?;
            let object = Some(&request["object"]).filter(|object| !object.is_null());
            let response = match self.validate(request).await {
                Ok(validation) => admission_response(uid, object, validation),
                // What policy-evaluator answers when an evaluation fails (a trap, a bad answer).
                Err(reason) => reject(uid, &format!("internal server error: {reason}"), Some(500)),
            };
            Ok(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
        }

        /// The policy's `validate`, on a blocking thread: its host call waits for the API server.
        async fn validate(&self, request: &Value) -> Result<ValidationResponse, String> {
            let payload = serde_json::to_vec(&json!({"request": request, "settings": self.settings}))
                .map_err(|e| e.to_string())?;
            let (module, reader) = (self.module.clone(), self.reader.clone());
            let runtime = tokio::runtime::Handle::current();
            // A fresh instance per request, as the wasm tests make them; a waPC host is not Send,
            // so it is made on the thread that runs it.
            let answer = tokio::task::spawn_blocking(move || {
                let instance = module.try_instance(move |payload| reader.answer(&runtime, payload))?;
                instance
                    .call("validate", &payload)
                    .map_err(|e| format!("the policy trapped: {e}"))
            })
            .await
            .map_err(|e| format!("the evaluation did not finish: {e}"))??;
            serde_json::from_slice(&answer).map_err(|e| format!("the policy's answer is not a ValidationResponse: {e}"))
        }
    }

    /// From policy-evaluator's `AdmissionResponse::from_policy_validation_response`: the patch is
    /// the JSON diff of the request's object and the policy's mutated object, base64 of its JSON;
    /// no patch when they are equal. Unset fields are left out rather than written as null.
    fn admission_response(uid: &str, object: Option<&Value>, validation: ValidationResponse) -> Value {
        let Some(object) = object else {
            return match validation.mutated_object {
                Some(_) => reject(
                    uid,
                    "Incoming object is null, which happens only with DELETE operations, but the policy is attempting a mutation. This is not allowed",
                    None,
                ),
                None => verdict(uid, validation, None),
            };
        };
        let patch = validation.mutated_object.as_ref().and_then(|mutated| {
            let diff = json_patch::diff(object, mutated);
            (!diff.0.is_empty()).then(|| base64::engine::general_purpose::STANDARD.encode(json!(diff).to_string()))
        });
        verdict(uid, validation, patch)
    }

    /// The AdmissionResponse, its unset fields left out rather than written as null.
    fn verdict(uid: &str, validation: ValidationResponse, patch: Option<String>) -> Value {
        let status = without_nulls(json!({"message": validation.message, "code": validation.code}));
        let status = if status == json!({}) { Value::Null } else { status };
        without_nulls(json!({"uid": uid, "allowed": validation.accepted, "status": status,
            "patchType": patch.as_ref().map(|_| "JSONPatch"), "patch": patch,
            "warnings": validation.warnings, "auditAnnotations": validation.audit_annotations}))
    }

    fn reject(uid: &str, message: &str, code: Option<u16>) -> Value {
        let status = without_nulls(json!({"message": message, "code": code}));
        json!({"uid": uid, "allowed": false, "status": status})
    }
}

/// `kubewarden/kubernetes/get_resource`, answered from the API server as policy-evaluator's
/// `callback_handler::kubernetes` answers it: discovery of the kind's resource (one GET of
/// `/apis/<group>/<version>` per kind), then a GET of the object.
pub mod lookup {
    use std::collections::HashMap;
    use std::sync::{Mutex, MutexGuard, PoisonError};
    use std::time::{Duration, Instant};

    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
    use kube::discovery::{Scope, pinned_kind};
    use serde::Deserialize;

    /// policy-evaluator's `get_resource_cached`: `#[cached(time = 5, result = true)]`, so a read
    /// that succeeded is answered from memory for 5 s, and a failed one is asked again.
    const CACHED_FOR: Duration = Duration::from_secs(5);

    /// The host call's request (kubewarden-policy-sdk's `GetResourceRequest`).
    #[derive(Deserialize)]
    struct GetResource {
        api_version: String,
        kind: String,
        name: String,
        namespace: Option<String>,
        #[serde(default)]
        disable_cache: bool,
    }

    pub struct Reader {
        client: kube::Client,
        kinds: Mutex<HashMap<(String, String), (ApiResource, bool)>>,
        cache: Mutex<HashMap<String, (Instant, Vec<u8>)>>,
    }

    impl Reader {
        pub fn new(client: kube::Client) -> Self {
            Self {
                client,
                kinds: Mutex::default(),
                cache: Mutex::default(),
            }
        }

        /// The host call, from the policy's blocking thread. An error reaches the policy with the
        /// prefix policy-evaluator's waPC callback gives it.
        pub fn answer(&self, runtime: &tokio::runtime::Handle, payload: &[u8]) -> Result<Vec<u8>, String> {
            let failure = |reason: String| format!("Callback evaluation failure: {reason}");
            let request: GetResource = serde_json::from_slice(payload)
                .map_err(|e| failure(format!("cannot read the get_resource request: {e}")))?;
            runtime.block_on(self.get(&request)).map_err(failure)
        }

        /// The object, from the cache where a read of it succeeded within [`CACHED_FOR`].
        async fn get(&self, request: &GetResource) -> Result<Vec<u8>, String> {
            let (api_version, kind, name) = (&request.api_version, &request.kind, &request.name);
            let (namespace, disable_cache) = (&request.namespace, request.disable_cache);
            let key = format!("get_resource_cached({api_version},{kind}),{name},{namespace:?}");
            let fresh = |(at, object): &(Instant, Vec<u8>)| (at.elapsed() < CACHED_FOR).then(|| object.clone());
            let cached = locked(&self.cache).get(&key).and_then(fresh);
            if let Some(object) = cached.filter(|_| !disable_cache) {
                return Ok(object);
            }
            let (resource, namespaced) = self.resource(api_version, kind).await?;
            let api: Api<DynamicObject> = match (namespaced, namespace) {
                (true, Some(namespace)) => Api::namespaced_with(self.client.clone(), namespace, &resource),
                (true, None) => {
                    return Err(format!(
                        "Resource {api_version}/{kind} is namespaced, but no namespace was provided"
                    ));
                }
                (false, _) => Api::all_with(self.client.clone(), &resource),
            };
            let object = match api.get_opt(name).await {
                Ok(Some(object)) => serde_json::to_vec(&object).map_err(|e| e.to_string())?,
                Ok(None) => {
                    let namespace = namespace.as_deref();
                    return Err(format!(
                        "Cannot find {api_version}/{kind} named '{name}' inside of namespace '{namespace:?}'"
                    ));
                }
                Err(e) => return Err(api_error(&e)),
            };
            if !disable_cache {
                locked(&self.cache).insert(key, (Instant::now(), object.clone()));
            }
            Ok(object)
        }

        /// The kind's resource name and scope, asked of the API server once per kind.
        async fn resource(&self, api_version: &str, kind: &str) -> Result<(ApiResource, bool), String> {
            let key = (api_version.to_owned(), kind.to_owned());
            if let Some(known) = locked(&self.kinds).get(&key) {
                return Ok(known.clone());
            }
            let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
            let gvk = GroupVersionKind::gvk(group, version, kind);
            let (resource, capabilities) = pinned_kind(&self.client, &gvk).await.map_err(|e| match e {
                kube::Error::Discovery(_) => format!("Cannot find resource {api_version}/{kind}"),
                e => format!("error finding resource {api_version} / {kind}: {}", api_error(&e)),
            })?;
            let known = (resource, capabilities.scope == Scope::Namespaced);
            locked(&self.kinds).insert(key, known.clone());
            Ok(known)
        }
    }

    /// A poisoned lock is still a cache: the panic that poisoned it left no half-written entry.
    fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
        mutex.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// An API server's refusal in the words policy-server 1.31 gives it, whatever this kube says.
    fn api_error(error: &kube::Error) -> String {
        match error {
            kube::Error::Api(status) => crate::policy::refused(&status.message, &status.reason, status.code),
            other => other.to_string(),
        }
    }
}

/// The MutatingWebhookConfiguration kubewarden-controller writes for a mutating
/// ClusterAdmissionPolicy, read from its `reconcileMutatingWebhookConfiguration` and
/// `namespaceSelector` (kubewarden/kubewarden-controller,
/// `internal/controller/policy_subreconciler_webhook.go`), its constants
/// (`internal/constants/constants.go`) and the policy's `GetUniqueName`
/// (`api/policies/v1/clusteradmissionpolicy_types.go`).
pub mod webhook {
    use std::path::Path;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
    use kube::api::{Api, Patch, PatchParams, PostParams};
    use serde_json::{Value, json};

    /// Where Kubewarden runs: the controller's deployments namespace, which the Helm charts make
    /// `kubewarden` (and policy.yaml's ClusterRoleBinding names). Its pods are never sent to a
    /// ClusterAdmissionPolicy: the controller excludes the namespace by `namespaceSelector`.
    pub const DEPLOYMENTS_NAMESPACE: &str = "kubewarden";
    /// The test host's field manager: it is not kubewarden-controller, and says so.
    pub const FIELD_MANAGER: &str = "ome-spread-admission-host";

    /// How kubewarden-controller names a ClusterAdmissionPolicy's webhook and admission path.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
    pub enum Naming {
        /// `clusterwide-<name>`: up to Kubewarden 1.37.1, so the 1.31 this project pins.
        Clusterwide,
        /// `kw.cap.<name>`: from Kubewarden 1.37.2 (advisory GHSA-m5vp-9g65-pv6v: `-` joined
        /// names that could collide; `.` cannot appear in a namespace).
        Kw,
    }

    /// The ClusterAdmissionPolicy among the documents of a file such as policy.yaml.
    pub fn read_policy(path: &Path) -> Result<Value, String> {
        let read = |reason: String| format!("{}: {reason}", path.display());
        let text = std::fs::read_to_string(path).map_err(|e| read(e.to_string()))?;
        let documents = serde_saphyr::from_multiple::<Value>(&text).map_err(|e| read(e.to_string()))?;
        documents
            .into_iter()
            .find(|document| {
                document["apiVersion"] == "policies.kubewarden.io/v1" && document["kind"] == "ClusterAdmissionPolicy"
            })
            .ok_or_else(|| "policy file: no ClusterAdmissionPolicy in it".to_owned())
    }

    /// `spec.settings`, `{}` where unset.
    pub fn settings(policy: &Value) -> Value {
        match &policy["spec"]["settings"] {
            Value::Null => json!({}),
            settings => settings.clone(),
        }
    }

    /// `GetUniqueName`: the webhook configuration's name, and the policy's id in the admission path.
    pub fn policy_id(policy: &Value, naming: Naming) -> Result<String, String> {
        let name = policy["metadata"]["name"]
            .as_str()
            .filter(|name| !name.is_empty())
            .ok_or("ClusterAdmissionPolicy: metadata.name: missing")?;
        Ok(match naming {
            Naming::Clusterwide => format!("clusterwide-{name}"),
            Naming::Kw => format!("kw.cap.{name}"),
        })
    }

    /// What kubewarden-controller writes for `policy`, field for field, but for the client config:
    /// a `url` at `base_url` (this host) where the controller names the Service
    /// ([`render_for_policy_server`]). A control plane without kubelets has no cluster network and
    /// no Services to reach, so the API server calls the host on 127.0.0.1, the path kept as the
    /// controller writes it.
    pub fn render(
        policy: &Value,
        base_url: &str,
        ca_bundle: &[u8],
        naming: Naming,
    ) -> Result<MutatingWebhookConfiguration, String> {
        let url = format!("{base_url}/validate/{}", policy_id(policy, naming)?);
        let client_config = json!({"url": url, "caBundle": STANDARD.encode(ca_bundle)});
        render_with(policy, client_config, naming)
    }

    /// What kubewarden-controller writes for `policy`, field for field, its client config too
    /// (`reconcileMutatingWebhookConfiguration`): the Service
    /// `kubewarden/policy-server-<spec.policyServer>` (`PolicyServer.NameWithPrefix`) on
    /// `constants.PolicyServerPort`, 8443, at `/validate/<id>`.
    pub fn render_for_policy_server(
        policy: &Value,
        ca_bundle: &[u8],
        naming: Naming,
    ) -> Result<MutatingWebhookConfiguration, String> {
        // The CRD's default PolicyServer.
        let server = policy["spec"]["policyServer"].as_str().unwrap_or("default");
        let service = json!({"namespace": DEPLOYMENTS_NAMESPACE, "name": format!("policy-server-{server}"),
            "path": format!("/validate/{}", policy_id(policy, naming)?), "port": 8443});
        let client_config = json!({"service": service, "caBundle": STANDARD.encode(ca_bundle)});
        render_with(policy, client_config, naming)
    }

    fn render_with(
        policy: &Value,
        client_config: Value,
        naming: Naming,
    ) -> Result<MutatingWebhookConfiguration, String> {
        let spec = &policy["spec"];
        if spec["mutating"] != true {
            return Err("ClusterAdmissionPolicy: spec.mutating is not true: kubewarden-controller would write a ValidatingWebhookConfiguration, which this host does not render".into());
        }
        let id = policy_id(policy, naming)?;
        // The deployments namespace first, then the policy's own expressions. The controller
        // appends only `matchExpressions`: a policy's `namespaceSelector.matchLabels` is dropped.
        let own: Option<LabelSelector> = serde_json::from_value(spec["namespaceSelector"].clone())
            .map_err(|e| format!("ClusterAdmissionPolicy: namespaceSelector: {e}"))?;
        let mut expressions =
            vec![json!({"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [DEPLOYMENTS_NAMESPACE]})];
        let own = own.and_then(|own| own.match_expressions).unwrap_or_default();
        expressions.extend(own.iter().map(|expression| json!(expression)));
        let or = |field: &str, default: Value| spec.get(field).filter(|v| !v.is_null()).cloned().unwrap_or(default);
        let webhook = json!({
            "name": format!("{id}.kubewarden.admission"),
            "clientConfig": client_config,
            "rules": spec["rules"],
            "failurePolicy": spec["failurePolicy"],
            "matchPolicy": spec["matchPolicy"],
            "namespaceSelector": {"matchExpressions": expressions},
            "objectSelector": spec["objectSelector"],
            // The controller's default where the policy has none.
            "sideEffects": or("sideEffects", json!("None")),
            // The CRD's default (`+kubebuilder:default:=10`), which the API server would fill in.
            "timeoutSeconds": or("timeoutSeconds", json!(10)),
            "admissionReviewVersions": ["v1"],
            // Passed on where the controller's AdmissionWebhookMatchConditions gate is on.
            "matchConditions": spec["matchConditions"],
            // No reinvocationPolicy: the controller sets none, and the API server makes it `Never`.
        });
        let config = json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {
                "name": id,
                "labels": {"app.kubernetes.io/part-of": "kubewarden", "kubewardenPolicyScope": "cluster"},
                // A ClusterAdmissionPolicy has no namespace: the controller writes "".
                "annotations": {"kubewardenPolicyName": policy["metadata"]["name"], "kubewardenPolicyNamespace": ""},
            },
            "webhooks": [webhook],
        });
        serde_json::from_value(config).map_err(|e| format!("ClusterAdmissionPolicy: a field the webhook copies: {e}"))
    }

    /// Waits until the API server calls the webhook: it learns of a new configuration through a
    /// watch, and until then pods pass without it. A dry run (the webhook's `sideEffects: None`
    /// lets it through) of a pod that `policy`'s objectSelector selects, in `namespace`, shows
    /// it: the host counts the review.
    pub async fn await_in_effect(
        admin: &kube::Client,
        policy: &Value,
        namespace: &str,
        reviews: &AtomicUsize,
        within: Duration,
    ) -> Result<(), String> {
        let pods: Api<Pod> = Api::namespaced(admin.clone(), namespace);
        let probe: Pod = serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "admission-host-probe", "labels": selected_labels(&policy["spec"]["objectSelector"])},
            "spec": {"containers": [{"name": "probe", "image": "probe"}]},
        }))
        .map_err(|e| format!("the probe pod: {e}"))?;
        let dry_run = PostParams {
            dry_run: true,
            ..PostParams::default()
        };
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let before = reviews.load(Ordering::SeqCst);
            // Admitted or denied, it does not matter: only whether the host saw it.
            let _ = pods.create(&dry_run, &probe).await;
            if reviews.load(Ordering::SeqCst) > before {
                return Ok(());
            }
            if tokio::time::Instant::now() > deadline {
                return Err(format!(
                    "the API server did not call the webhook within {} s of its configuration",
                    within.as_secs()
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Labels an objectSelector selects: its matchLabels, the first value of each `In`, any
    /// value for `Exists` (the other operators are met by leaving the key out).
    fn selected_labels(selector: &Value) -> Value {
        let mut labels = selector["matchLabels"].as_object().cloned().unwrap_or_default();
        for expression in selector["matchExpressions"].as_array().into_iter().flatten() {
            let key = expression["key"].as_str().unwrap_or_default().to_owned();
            match expression["operator"].as_str() {
                Some("In") => {
                    labels.insert(key, expression["values"][0].clone());
                }
                Some("Exists") => {
                    labels.insert(key, json!("probe"));
                }
                _ => {}
            }
        }
        Value::Object(labels)
    }

    /// Server-side apply of `config` (the controller itself uses CreateOrPatch; the stored
    /// object is the same).
    pub async fn apply(
        admin: &kube::Client,
        config: &MutatingWebhookConfiguration,
    ) -> Result<MutatingWebhookConfiguration, kube::Error> {
        let api: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
        let name = config.metadata.name.clone().unwrap_or_default();
        api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(config))
            .await
    }
}
