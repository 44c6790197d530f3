//! What the tests against a live cluster share: the cluster a kubeconfig names
//! (`OME_SPREAD_E2E_KUBECONFIG`; `make e2e-cluster` starts one with cluster/up.sh and names it),
//! kubectl run as a user runs it, and the processes a test starts (kwok, the OME stand-in, the
//! admission host, the controller), each stopped when the test ends, pass or fail.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use kube::Client;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc::UnboundedSender;

use crate::support::api;
use crate::support::local::workspace;

/// Logs of a controller run inside the test's process, shown with a failing test's output:
/// `RUST_LOG`, else the controller's debug lines (what it reconciled, and why not).
pub fn logs() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| "info,ome_spread_controller=debug,kube_runtime::controller=debug".into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_test_writer()
        .try_init();
}

/// The kubeconfig of the cluster under test (a relative path is the workspace's), or None,
/// saying that the test is skipped.
pub fn kubeconfig() -> Option<PathBuf> {
    let Some(path) = std::env::var_os("OME_SPREAD_E2E_KUBECONFIG") else {
        eprintln!("skipped: OME_SPREAD_E2E_KUBECONFIG names no cluster");
        return None;
    };
    Some(workspace().join(path))
}

/// The cluster under test with OME's CRDs on it, Established: [`kubeconfig`], then
/// [`install`] of [`OME_CRDS`].
pub async fn with_crds() -> Option<PathBuf> {
    let admin = kubeconfig()?;
    install(&admin, OME_CRDS).await;
    Some(admin)
}

/// cluster/up.sh's run directory (certificates, logs, the components' arguments), when the
/// cluster is the one it started: faults that restart a component need it.
pub fn run_dir() -> Option<PathBuf> {
    std::env::var_os("OME_SPREAD_E2E_RUN").map(PathBuf::from)
}

/// kubectl: cluster/up.sh's, else the one on PATH.
fn kubectl_program() -> PathBuf {
    let built = workspace().join("target/cluster/bin/kubectl");
    if built.is_file() { built } else { "kubectl".into() }
}

pub async fn client_of(kubeconfig: &Path) -> Client {
    api::client(Some(kubeconfig))
        .await
        .expect("a cluster in the kubeconfig")
}

/// A client of the kubeconfig's cluster acting as `user` (impersonation).
pub async fn client_as(kubeconfig: &Path, user: &str) -> Client {
    let mut config = api::config(Some(kubeconfig))
        .await
        .expect("a cluster in the kubeconfig");
    config.auth_info.impersonate = Some(user.to_owned());
    Client::try_from(config).expect("a client")
}

/// What kubectl printed, and whether it succeeded.
#[derive(Debug)]
pub struct Printed {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// `kubectl ARGS` as a user runs it, its input piped when there is `stdin`.
fn kubectl_command(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> std::process::Command {
    let mut command = std::process::Command::new(kubectl_program());
    command
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn printed(output: &std::process::Output) -> Printed {
    Printed {
        ok: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `kubectl ARGS` as a user runs it, with `stdin` piped in, bounded to two minutes.
pub async fn kubectl_with(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Printed {
    let mut command = Command::from(kubectl_command(kubeconfig, args, stdin));
    let mut child = command.kill_on_drop(true).spawn().expect("kubectl runs");
    if let Some(input) = stdin {
        use tokio::io::AsyncWriteExt;
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input.as_bytes()).await.expect("stdin written");
    }
    let output = tokio::time::timeout(Duration::from_secs(120), child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in 2 minutes"))
        .expect("kubectl's output");
    printed(&output)
}

/// [`kubectl_with`] where no runtime can wait on it: a guard's `Drop` that cleans up after a
/// test, pass or fail. It never panics (a panic while unwinding aborts the tests): a kubectl that
/// cannot run is said in `stderr`.
pub fn kubectl_blocking(kubeconfig: &Path, args: &[&str], stdin: Option<&str>) -> Printed {
    let run = || -> std::io::Result<std::process::Output> {
        // Bounded in time as the async one is, by kubectl's own flag: no runtime here to time it.
        let mut command = kubectl_command(kubeconfig, args, stdin);
        let mut child = command.arg("--request-timeout=60s").spawn()?;
        if let (Some(input), Some(mut pipe)) = (stdin, child.stdin.take()) {
            std::io::Write::write_all(&mut pipe, input.as_bytes())?;
        }
        child.wait_with_output()
    };
    match run() {
        Ok(output) => printed(&output),
        Err(e) => Printed {
            ok: false,
            stdout: String::new(),
            stderr: format!("kubectl {args:?}: {e}"),
        },
    }
}

/// `kubectl ARGS`, which must succeed: its standard output.
pub async fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let printed = kubectl_with(kubeconfig, args, None).await;
    assert!(printed.ok, "kubectl {}: {}", args.join(" "), printed.stderr);
    printed.stdout
}

/// A tool `make cluster-bin` builds (helm, kubectl, promtool), which must be there.
pub fn cluster_bin(tool: &str) -> PathBuf {
    let path = workspace().join("target/cluster/bin").join(tool);
    assert!(
        path.is_file(),
        "{} not built: make cluster-bin builds it",
        path.display()
    );
    path
}

/// `helm ARGS` with `kubeconfig`, bounded to three minutes: what it printed.
pub async fn helm_with(kubeconfig: &Path, args: &[&str]) -> Printed {
    let mut command = Command::new(cluster_bin("helm"));
    command.args(args).env("KUBECONFIG", kubeconfig).kill_on_drop(true);
    let output = tokio::time::timeout(Duration::from_secs(180), command.output())
        .await
        .unwrap_or_else(|_| panic!("helm {args:?} did not finish in 3 minutes"))
        .expect("helm runs");
    printed(&output)
}

/// `helm ARGS`, which must succeed.
pub async fn helm(kubeconfig: &Path, args: &[&str]) {
    let printed = helm_with(kubeconfig, args).await;
    assert!(printed.ok, "helm {}: {}", args.join(" "), printed.stderr);
}

/// The chart's release (`ome-spread` in namespace ome-spread) uninstalled where installed, its
/// objects gone.
pub async fn uninstall_chart(kubeconfig: &Path) {
    let args = words("uninstall ome-spread -n ome-spread --ignore-not-found --wait");
    helm(kubeconfig, &args).await;
}

/// `kubectl apply -f -` of a manifest, which must succeed.
pub async fn apply(kubeconfig: &Path, manifest: &str) -> String {
    let printed = kubectl_with(kubeconfig, &["apply", "--server-side", "-f", "-"], Some(manifest)).await;
    assert!(printed.ok, "kubectl apply: {}\n{manifest}", printed.stderr);
    printed.stdout
}

/// A file of CRDs in cluster/, and which of them to wait for (a CRD's name, or `--all`).
pub type Crds = (&'static str, &'static str);
pub const OME_CRDS: Crds = ("ome-crds.yaml", "--all");
pub const OPENREPORTS_CRD: Crds = ("openreports-crd.yaml", "reports.openreports.io");
pub const KUBEWARDEN_CRD: Crds = (
    "kubewarden-crds.yaml",
    "clusteradmissionpolicies.policies.kubewarden.io",
);

/// The CRDs of a file on the cluster, the ones it names Established.
pub async fn install(admin: &Path, (file, which): Crds) {
    let crds = std::fs::read_to_string(workspace().join("cluster").join(file)).expect("the CRDs");
    apply(admin, &crds).await;
    let args = ["wait", "--for=condition=Established", "crd", which, "--timeout=60s"];
    kubectl(admin, &args).await;
}

/// No Report CRD on the cluster: what a suite that runs after one that installed it (seed's) and
/// holds a cluster without it starts from.
pub async fn remove_openreports_crd(admin: &Path) {
    let delete = "delete crd reports.openreports.io --ignore-not-found --wait --timeout=60s";
    kubectl(admin, &words(delete)).await;
}

/// policy.yaml whole, on Kubewarden's CRD (its ClusterAdmissionPolicy is where `explain` reads the
/// settings, as in a cluster that runs Kubewarden), with the policy-server's ServiceAccount its
/// RBAC names: a kubeconfig of that ServiceAccount, in `dir`, for what reads as policy-server.
pub async fn policy_server(admin: &Path, dir: &Path) -> PathBuf {
    apply(
        admin,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: kubewarden}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: policy-server, namespace: kubewarden}\n",
    )
    .await;
    install(admin, KUBEWARDEN_CRD).await;
    let policy = std::fs::read_to_string(workspace().join("policy.yaml")).expect("policy.yaml");
    apply(admin, &policy).await;
    service_account_kubeconfig(admin, "kubewarden", "policy-server", dir).await
}

/// The controller's Lease deleted: one an earlier run left (its last holder killed, not
/// released) would name one of today's identities, which would then lead before it stood by.
pub async fn forget_lease(admin: &Path) {
    let args = ["delete", "lease", LEASE, "-n", LEASE_NAMESPACE, "--ignore-not-found"];
    kubectl(admin, &args).await;
}

/// The controller's namespace (`ome-spread`, as deploy/ and the chart name it), with no Lease an
/// earlier run left there.
pub async fn controller_namespace(admin: &Path) {
    let namespace = format!("apiVersion: v1\nkind: Namespace\nmetadata: {{name: {LEASE_NAMESPACE}}}\n");
    apply(admin, &namespace).await;
    forget_lease(admin).await;
}

/// The objects OME writes for an InferenceService of `namespace` that asks for no spread: its
/// ClusterServingRuntime `runtime`, and its engine's replica of two single-pod Instances.
pub fn unspread_service(namespace: &str, runtime: &str) -> String {
    format!(
        "apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata: {{name: {runtime}}}
spec: {{engineConfig: {{}}}}
---
apiVersion: ome.io/v1beta1
kind: InferenceService
metadata: {{name: qwen3-0-6b, namespace: {namespace}}}
spec: {{deploymentMode: OMENative, runtime: {{name: {runtime}}}, engine: {{minReplicas: 2}}}}
---
apiVersion: ome.io/v1beta1
kind: InferenceReplica
metadata: {{name: qwen3-0-6b-engine, namespace: {namespace}}}
spec:
  parentRef: {{name: qwen3-0-6b}}
  component: engine
  replicas: 2
  runners: [{{name: default, size: 1, template: {{spec: {{containers: [{{name: ome-container, image: sglang}}]}}}}}}]
"
    )
}

/// Who holds the controller's Lease, if anyone.
pub async fn lease_holder(admin: &Path) -> Option<String> {
    let args = format!("get lease {LEASE} -n {LEASE_NAMESPACE} -o jsonpath={{.spec.holderIdentity}}");
    let printed = kubectl_with(admin, &words(&args), None).await;
    (printed.ok && !printed.stdout.is_empty()).then_some(printed.stdout)
}

/// The controller's Lease, as deploy/ and the chart name it.
const LEASE: &str = "ome-spread-controller";
const LEASE_NAMESPACE: &str = "ome-spread";

/// qwen3-0-6b-engine (the how-to's example) in `namespace` as the API server stores it, if it
/// could be read.
pub async fn replica(admin: &Path, namespace: &str) -> Option<serde_json::Value> {
    let args = format!("get inferencereplica qwen3-0-6b-engine -n {namespace} -o json");
    let printed = kubectl_with(admin, &words(&args), None).await;
    printed.ok.then(|| serde_json::from_str(&printed.stdout).ok()).flatten()
}

/// A replica's `Spread` condition, once written.
pub fn spread(replica: &serde_json::Value) -> Option<&serde_json::Value> {
    replica["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Spread")
}

/// The reason of the `Spread` condition of qwen3-0-6b-engine in `namespace`, once written.
pub async fn spread_reason(admin: &Path, namespace: &str) -> Option<String> {
    let replica = replica(admin, namespace).await?;
    Some(spread(&replica)?["reason"].as_str()?.to_owned())
}

/// `GET http://ADDRESS PATH` (ADDRESS host:port): the status code and the body; "000" and no
/// body when no whole answer came (refused, or cut off by the time limit).
pub async fn get(address: &str, path: &str) -> (String, String) {
    let url = format!("http://{address}{path}");
    let printed = tokio::process::Command::new("curl")
        .args(["-s", "--max-time", "5", "-o", "-", "-w", "%{http_code}", &url])
        .output()
        .await
        .expect("curl");
    if !printed.status.success() {
        return ("000".into(), String::new());
    }
    let text = String::from_utf8_lossy(&printed.stdout).into_owned();
    let (body, code) = text.split_at(text.len().saturating_sub(3));
    (code.to_owned(), body.to_owned())
}

/// The namespace `name`, new: one a test left behind is deleted first (and waited for, so that
/// nothing of it is deleted under this test). Its pods are deleted at once: with no kubelet (a
/// failed test's kwok is gone) a bound pod would stay Terminating, and the namespace too.
pub async fn fresh_namespace(admin: &Path, name: &str) {
    for args in namespace_removal(name) {
        kubectl(admin, &args).await;
    }
    let namespace = format!("namespace/{name}");
    kubectl(admin, &["wait", "--for=delete", &namespace, "--timeout=90s"]).await;
    kubectl(admin, &["create", "namespace", name]).await;
}

/// The namespace `name`, created, and its `default` ServiceAccount there: the controller manager
/// makes it, and no pod of the namespace can be created before.
pub async fn namespace_for_pods(admin: &Path, name: &str) {
    kubectl(admin, &["create", "namespace", name]).await;
    crate::support::wait::eventually(&format!("{name}'s default ServiceAccount"), 60, || async {
        let args = ["get", "serviceaccount", "default", "-n", name];
        kubectl_with(admin, &args, None).await.ok.then_some(())
    })
    .await;
}

/// The kubectl calls that remove a test's namespace without waiting: its pods deleted at once
/// (no kubelet confirms their end), then the namespace. A guard's `Drop` runs them with
/// [`kubectl_blocking`].
pub fn namespace_removal(name: &str) -> [Vec<&str>; 2] {
    let pods = words("delete pods --all --force --grace-period=0 --wait=false -n");
    let namespace = words("delete namespace --ignore-not-found --wait=false");
    [[&pods[..], &[name]].concat(), [&namespace[..], &[name]].concat()]
}

/// A command line's words: for the calls none of whose arguments holds a space.
fn words(line: &str) -> Vec<&str> {
    line.split(' ').collect()
}

/// A kubeconfig whose user is a ServiceAccount, by a token of the TokenRequest API: what a pod
/// of that ServiceAccount would hold.
pub async fn service_account_kubeconfig(admin: &Path, namespace: &str, name: &str, dir: &Path) -> PathBuf {
    let token = kubectl(admin, &["create", "token", name, "-n", namespace, "--duration", "2h"]).await;
    let args = words("config view --raw --minify -o jsonpath={.clusters[0].cluster}");
    let view = kubectl(admin, &args).await;
    let cluster: serde_json::Value = serde_json::from_str(&view).expect("the cluster of the kubeconfig");
    std::fs::create_dir_all(dir).expect("a directory for the kubeconfig");
    let file = dir.join(format!("{namespace}-{name}.kubeconfig"));
    let user = serde_json::json!({"token": token.trim()});
    crate::support::local::write_kubeconfig(&file, cluster, user, Some(namespace));
    file
}

/// kwok (`cluster/kwok-up.sh RUN_DIR --foreground`, built by `make kwok-bin`), playing the
/// kubelets of the nodes annotated for it until the process is dropped. The run directory is
/// `OME_SPREAD_E2E_RUN`, else the kubeconfig's own.
pub async fn kwok(admin: &Path) -> Process {
    let run = run_dir().unwrap_or_else(|| admin.parent().expect("the run directory").to_owned());
    let run = run.to_str().expect("a UTF-8 path");
    let kwok_up = workspace().join("cluster/kwok-up.sh");
    Process::start("kwok", &kwok_up, &[run, "--foreground"], &[], "Watch nodes")
        .await
        .0
}

/// A process a test started: killed when dropped, so that none outlives its test.
pub struct Process {
    pub name: String,
    child: Child,
}

impl Process {
    /// Starts `program ARGS` with `env`, its output appended to `log`, and waits (at most a
    /// minute) until a line of its output contains `ready`; returns that line too.
    pub async fn start(
        name: &str,
        program: &Path,
        args: &[&str],
        env: &[(&str, &Path)],
        ready: &str,
    ) -> (Process, String) {
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("{name}: {} does not start: {e}", program.display()));
        let (lines, mut seen) = tokio::sync::mpsc::unbounded_channel::<String>();
        forward(child.stdout.take().expect("stdout"), name, lines.clone());
        forward(child.stderr.take().expect("stderr"), name, lines);
        let found = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some(line) = seen.recv().await {
                if line.contains(ready) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(line)) => (
                Process {
                    name: name.to_owned(),
                    child,
                },
                line,
            ),
            Ok(None) => panic!("{name} exited before printing {ready:?}"),
            Err(_) => panic!("{name} did not print {ready:?} within a minute"),
        }
    }

    /// Stops it (SIGKILL: what a crash or a node loss does to a process).
    pub async fn kill(mut self) {
        let _ = self.child.kill().await;
    }

    /// Started as `unshare --pid --fork --kill-child PROGRAM`: the program, PID 1 of its own PID
    /// namespace as in a container, by its PID here.
    pub fn pid_one(&self) -> u32 {
        let unshare = self.child.id().expect("unshare runs");
        let children =
            std::fs::read_to_string(format!("/proc/{unshare}/task/{unshare}/children")).expect("unshare's children");
        children
            .split_whitespace()
            .next()
            .and_then(|pid| pid.parse().ok())
            .unwrap_or_else(|| panic!("{}: unshare has no child", self.name))
    }

    /// How it exited, if it did within `limit`.
    pub async fn exit_within(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()
            .map(|status| status.expect("its status"))
    }
}

/// Each line of a process's output `stream`, shown with its `name` and sent on `lines`.
fn forward(stream: impl AsyncRead + Unpin + Send + 'static, name: &str, lines: UnboundedSender<String>) {
    let prefix = name.to_owned();
    tokio::spawn(async move {
        let mut stream = BufReader::new(stream).lines();
        while let Ok(Some(line)) = stream.next_line().await {
            eprintln!("[{prefix}] {line}");
            let _ = lines.send(line);
        }
    });
}

/// The columns of a `kubectl get -o custom-columns` table, split on runs of spaces: the seed's
/// output blocks compared cell by cell, whatever width kubectl pads them to.
pub fn table(printed: &str) -> Vec<Vec<String>> {
    printed
        .lines()
        .map(|line| line.split_whitespace().map(str::to_owned).collect())
        .collect()
}
