//! The real Kubewarden `policy-server`, run as a child process with the annotated policy, its
//! Kubernetes client pointed at a fake API server that serves the rule table's InferenceReplicas
//! ([`FakeApi`], which says why it is not kube-apiserver), for controller/tests/policy_server.rs
//! (every case of the table).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use http::{StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};

use crate::policy::{data_dir, fixture};
use crate::stand_in::fake_api::{Answer, FakeApi, status};
use crate::support::local::{free_port, workspace, write_kubeconfig};

/// The binaries and modules the real runtime needs, from the environment (the Makefile sets
/// them), else `PATH`, else where `.ci/run` unpacks them.
pub struct Tools {
    pub policy_server: PathBuf,
    pub policy: PathBuf,
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|file| file.is_file())
}

fn file_from_env(var: &str, default: PathBuf) -> Option<PathBuf> {
    let file = std::env::var_os(var).map(PathBuf::from).unwrap_or(default);
    file.is_file().then_some(file)
}

impl Tools {
    /// None, saying what is missing, when a piece is absent (`make e2e-server` runs this only where
    /// the tools are installed, and says it skipped it where not).
    pub fn find() -> Option<Tools> {
        let policy_server = match std::env::var_os("POLICY_SERVER") {
            Some(file) => Some(PathBuf::from(file)).filter(|file| file.is_file()),
            None => on_path("policy-server"),
        };
        let policy = file_from_env("ANNOTATED_POLICY", workspace().join("annotated-policy.wasm"));
        let mut missing = Vec::new();
        if policy_server.is_none() {
            missing.push("policy-server (https://github.com/kubewarden/adm-controller/releases)");
        }
        if policy.is_none() {
            missing.push("annotated-policy.wasm (`make annotated-policy.wasm`, with kwctl)");
        }
        if !missing.is_empty() {
            let message = format!("the real policy-server run needs {}", missing.join(", "));
            eprintln!("skipped: {message}");
            return None;
        }
        Some(Tools {
            policy_server: policy_server?,
            policy: policy?,
        })
    }
}

/// One case of the rule table, as written out under `tests/data/cases/<case>/`.
pub struct Case {
    pub name: String,
    pub request: Value,
    pub settings: Value,
    /// The exact ValidationResponse the policy must give.
    pub expected: Value,
    /// The replica the policy reads (its API path) and what the API server answers, when it reads one.
    pub replica: Option<(String, Answer)>,
}

impl Case {
    /// Invalid settings: the policy-server must refuse to start with them.
    pub fn settings_are_invalid(&self) -> bool {
        self.expected["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("invalid policy settings: "))
    }
}

/// The replica of a case's `session.yml` (the kwctl replay of its one `get_resource`), answered
/// the way a real API server would: the payload with a 200, or a `Status` for an error.
fn replica_of(session: &Path) -> Option<(String, Answer)> {
    let text = std::fs::read_to_string(session).ok()?;
    let exchanges: Value = serde_saphyr::from_str(&text).expect("session.yml");
    // An empty session: the policy makes no host call.
    let exchange = exchanges.get(0)?;
    let field = |key: &str| {
        let request = exchange["request"].as_str().expect("request");
        let line = request.lines().find_map(|l| l.strip_prefix(&format!("{key}: ")));
        line.expect(key).trim().to_owned()
    };
    let (namespace, name) = (field("namespace"), field("name"));
    let path = format!("/apis/ome.io/v1beta1/namespaces/{namespace}/inferencereplicas/{name}");
    let response = &exchange["response"];
    let answer = match (response["type"].as_str(), response["message"].as_str()) {
        (Some("Success"), _) => Answer {
            code: 200,
            body: response["payload"].as_str().expect("payload").to_owned(),
        },
        // The runtime's words for a 403 hold the API server's message: served back as a Status.
        (Some("Error"), Some(m)) if m.starts_with("ApiError: ") && m.contains(": Forbidden (ErrorResponse") => {
            let message = m
                .trim_start_matches("ApiError: ")
                .split(": Forbidden (ErrorResponse")
                .next()
                .unwrap_or(m);
            status(403, "Forbidden", message, &name)
        }
        // The runtime fails the call when the body is not JSON: serve such a body.
        (Some("Error"), Some(m)) if m.starts_with("Error deserializing response") => Answer {
            code: 200,
            body: "<html>502</html>".to_owned(),
        },
        (Some("Error"), Some(m)) if m.starts_with("Cannot find") || m.contains("not found") => {
            let message = format!("inferencereplicas.ome.io \"{name}\" not found");
            status(404, "NotFound", &message, &name)
        }
        (Some("Error"), Some(m)) => status(500, "InternalError", m, &name),
        _ => panic!("{}: an exchange without a response", session.display()),
    };
    Some((path, answer))
}

/// Every case of the rule table, by name.
pub fn cases() -> Vec<Case> {
    let root = data_dir().join("cases");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .expect("tests/data/cases")
        .map(|e| e.expect("entry").path())
        .collect();
    dirs.sort();
    dirs.iter()
        .map(|dir| {
            let name = dir.file_name().expect("name").to_string_lossy().into_owned();
            let file = |file: &str| fixture(&format!("cases/{name}/{file}"));
            Case {
                request: file("request.json"),
                settings: file("settings.json"),
                expected: file("response.json"),
                replica: replica_of(&dir.join("session.yml")),
                name,
            }
        })
        .collect()
}

/// Cases whose cluster answers agree: the same replica path never gets two different answers in
/// one group, since one policy-server caches a lookup for all its policies.
pub fn groups<'a>(cases: impl IntoIterator<Item = &'a Case>) -> Vec<Vec<&'a Case>> {
    let mut groups: Vec<(BTreeMap<&str, &Answer>, Vec<&Case>)> = Vec::new();
    for case in cases {
        let fits = |cluster: &BTreeMap<&str, &Answer>| match &case.replica {
            Some((path, answer)) => cluster.get(path.as_str()).is_none_or(|a| *a == answer),
            None => true,
        };
        let index = match groups.iter().position(|(cluster, _)| fits(cluster)) {
            Some(index) => index,
            None => {
                groups.push(Default::default());
                groups.len() - 1
            }
        };
        let (cluster, members) = &mut groups[index];
        if let Some((path, answer)) = &case.replica {
            cluster.insert(path, answer);
        }
        members.push(case);
    }
    groups.into_iter().map(|(_, members)| members).collect()
}

/// One policy of the policies file.
pub struct Policy {
    pub name: String,
    pub module: PathBuf,
    pub settings: Value,
}

/// The policies file as Kubewarden's controller writes it for ClusterAdmissionPolicies
/// (kubewarden/adm-controller, `internal/controller/policyserver_controller_configmap.go`):
/// `hostCapabilities: ["*"]` for a cluster-wide policy, without which policy-server 1.36 and
/// later refuse every host call; 1.31 ignores the field. The policy reads InferenceReplicas and
/// mutates: `contextAwareResources` and `allowedToMutate`, as `policy.yaml` has them.
pub fn policies_file(policies: &[Policy]) -> Value {
    let file: serde_json::Map<String, Value> = policies
        .iter()
        .map(|p| {
            let policy = json!({
                "module": format!("file://{}", p.module.display()),
                "settings": p.settings,
                "hostCapabilities": ["*"],
                "allowedToMutate": true,
                "contextAwareResources": [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica"}],
            });
            (p.name.clone(), policy)
        })
        .collect();
    Value::Object(file)
}

/// The real `policy-server`, without TLS on a free localhost port; killed when dropped.
pub struct PolicyServer {
    child: Child,
    pub port: u16,
    dir: PathBuf,
}

static STARTED: AtomicUsize = AtomicUsize::new(0);

impl PolicyServer {
    /// Starts it with `policies` and its Kubernetes client on `api`, and waits until it is ready.
    /// When it exits first (bad settings refuse the start), its output is the error.
    pub fn start(binary: &Path, policies: &[Policy], api: &FakeApi, log_level: &str) -> Result<Self, String> {
        let (pid, started) = (std::process::id(), STARTED.fetch_add(1, Ordering::SeqCst));
        let dir = std::env::temp_dir().join(format!("ome-spread-policy-server-{pid}-{started}"));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let server = json!({"server": format!("http://{}", api.addr)});
        write_kubeconfig(&dir.join("kubeconfig"), server, json!({"token": "fake"}), None);
        // JSON is YAML: the policies file as policy-server reads it.
        std::fs::write(dir.join("policies.yml"), policies_file(policies).to_string()).expect("policies");
        let (port, readiness) = (free_port(), free_port());
        let log = std::fs::File::create(dir.join("policy-server.log")).expect("log");
        let child = Command::new(binary)
            .arg("--policies")
            .arg(dir.join("policies.yml"))
            .args(["--addr", "127.0.0.1", "--port", &port.to_string()])
            .args(["--readiness-probe-port", &readiness.to_string()])
            .arg("--policies-download-dir")
            .arg(dir.join("downloads"))
            .arg("--sigstore-cache-dir")
            .arg(dir.join("sigstore"))
            .args(["--log-level", log_level, "--log-no-color"])
            .env("KUBECONFIG", dir.join("kubeconfig"))
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
        let mut server = PolicyServer { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(180);
        while Instant::now() < deadline {
            if let Some(exit) = server.child.try_wait().expect("wait") {
                return Err(format!("policy-server exited ({exit}): {}", server.log()));
            }
            if ready(readiness) {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Err(format!("policy-server not ready within 180 s: {}", server.log()))
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("policy-server.log")).unwrap_or_default()
    }
}

impl Drop for PolicyServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The readiness probe answers 200.
fn ready(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let mut answer = String::new();
    stream
        .write_all(b"GET /readiness HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .is_ok()
        && stream.read_to_string(&mut answer).is_ok()
        && answer.split(' ').nth(1) == Some("200")
}

pub type Client = HyperClient<HttpConnector, Full<Bytes>>;

pub fn client() -> Client {
    HyperClient::builder(TokioExecutor::new()).build_http()
}

/// POSTs an AdmissionReview to `/validate/<policy>`; the AdmissionReview that comes back.
pub async fn validate(client: &Client, port: u16, policy: &str, review: &Value) -> Result<Value, String> {
    let request = http::Request::post(format!("http://127.0.0.1:{port}/validate/{policy}"))
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(review.to_string())))
        .map_err(|e| e.to_string())?;
    let response = client.request(request).await.map_err(|e| format!("{e:?}"))?;
    let code = response.status();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    if code != StatusCode::OK {
        return Err(format!("HTTP {code}: {}", String::from_utf8_lossy(&body)));
    }
    serde_json::from_slice(&body).map_err(|e| format!("{e}: {}", String::from_utf8_lossy(&body)))
}

/// An empty list is no list: the policy-server writes `null` where the policy gave none.
fn list_or_null(value: &Value) -> Value {
    match value {
        Value::Array(items) if items.is_empty() => Value::Null,
        other => other.clone(),
    }
}

/// Where the policy-server's answer to `case` differs from the case's ValidationResponse, one
/// line per field, with both values; empty when it matches exactly.
pub fn differences(request: &Value, expected: &Value, review: &Value) -> Vec<String> {
    let response = &review["response"];
    let mut differ = Vec::new();
    let mut check = |field: &str, want: &Value, got: &Value| {
        if want != got {
            differ.push(format!("{field}:\n    expected {want}\n    got      {got}"));
        }
    };
    check("uid", &request["request"]["uid"], &response["uid"]);
    check("allowed", &expected["accepted"], &response["allowed"]);
    check("message", &expected["message"], &response["status"]["message"]);
    let (want, got) = (list_or_null(&expected["warnings"]), list_or_null(&response["warnings"]));
    check("warnings", &want, &got);
    let mutated = match response["patch"].as_str() {
        None => Value::Null,
        Some(patch) => match patched(&request["request"]["object"], patch) {
            Ok(pod) => pod,
            Err(e) => json!(format!("an unusable patch: {e}")),
        },
    };
    if !mutated.is_null() {
        check("patchType", &json!("JSONPatch"), &response["patchType"]);
    }
    check("mutated_object", &expected["mutated_object"], &mutated);
    differ
}

/// The pod with the policy-server's JSONPatch (base64) applied, as the API server applies it.
fn patched(pod: &Value, patch: &str) -> Result<Value, String> {
    let bytes = STANDARD.decode(patch).map_err(|e| e.to_string())?;
    let patch: json_patch::Patch = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    let mut pod = pod.clone();
    json_patch::patch(&mut pod, &patch).map_err(|e| e.to_string())?;
    Ok(pod)
}
