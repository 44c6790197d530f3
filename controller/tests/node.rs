//! The chart for real, on a live cluster with a real node (`make e2e-cluster`): the controller's
//! image as `make image` wrote it, pushed to a registry on 127.0.0.1, pulled by the kubelet of
//! cluster/node-up.sh (containerd and runc, the CNI bridge) and started by `helm install` under
//! the namespace's Pod Security `restricted`. Its pods answer their probes, one leads and writes
//! the condition, `kubectl rollout restart` hands the Lease over through the kubelet's SIGTERM,
//! `kubectl logs` shows the JSON log, and `helm test` runs `explain` in a pod of the image.
//!
//!   OME_SPREAD_E2E_KUBECONFIG=... OME_SPREAD_E2E_RUN=... cargo test -p ome-spread-controller --test node -- --ignored

mod oci;

use std::path::{Path, PathBuf};
use std::time::Duration;

use oci::{Buildah, IMAGE};
use ome_spread_sim::support::live::{self, helm, helm_with, kubectl};
use ome_spread_sim::support::local;
use ome_spread_sim::support::wait::eventually;
use serde_json::{Value, json};

const NAMESPACE: &str = "ome-spread-node";

/// A replica OME would write for an InferenceService that asks for no spread.
const OBJECTS: &str = "apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata: {name: srt-node}
spec: {engineConfig: {}}
---
apiVersion: ome.io/v1beta1
kind: InferenceService
metadata: {name: qwen3-0-6b, namespace: ome-spread-node}
spec: {deploymentMode: OMENative, runtime: {name: srt-node}, engine: {minReplicas: 2}}
---
apiVersion: ome.io/v1beta1
kind: InferenceReplica
metadata: {name: qwen3-0-6b-engine, namespace: ome-spread-node}
spec:
  parentRef: {name: qwen3-0-6b}
  component: engine
  replicas: 2
  runners: [{name: default, size: 1, template: {spec: {containers: [{name: ome-container, image: sglang}]}}}]
";

/// The node cluster/node-up.sh starts (named `localhost`, tainted and labelled
/// ome-spread.io/node=real), stopped by cluster/node-down.sh when dropped, pass or fail.
struct Node {
    dir: PathBuf,
    admin: PathBuf,
}

impl Node {
    /// The node, Ready, its containerd reaching the registry on `registry_port`.
    async fn start(run: &Path, admin: &Path, registry_port: &str) -> Node {
        let dir = run.join("node");
        let node = Node {
            dir: dir.clone(),
            admin: admin.to_owned(),
        };
        let mut command = tokio::process::Command::new(local::workspace().join("cluster/node-up.sh"));
        command
            .arg(run)
            .arg(&dir)
            .env("FORWARD_PORTS", registry_port)
            .kill_on_drop(true);
        let output = tokio::time::timeout(Duration::from_secs(180), command.output())
            .await
            .expect("cluster/node-up.sh done within 3 minutes")
            .expect("cluster/node-up.sh runs");
        assert!(
            output.status.success(),
            "cluster/node-up.sh: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        node
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = std::process::Command::new(local::workspace().join("cluster/node-down.sh"))
            .arg(&self.dir)
            .arg(&self.admin)
            .status();
    }
}

/// The controller's pods, by name, as the API server has them.
async fn controller_pods(admin: &Path) -> Vec<Value> {
    let selector = "app.kubernetes.io/instance=ome-spread,app.kubernetes.io/component=controller";
    let listed = kubectl(
        admin,
        &["get", "pods", "-n", "ome-spread", "-l", selector, "-o", "json"],
    )
    .await;
    let listed: Value = serde_json::from_str(&listed).expect("a pod list");
    listed["items"].as_array().expect("items").clone()
}

fn name(pod: &Value) -> String {
    pod["metadata"]["name"].as_str().expect("a name").to_owned()
}

fn ready(pod: &Value) -> bool {
    let conditions = pod["status"]["conditions"].as_array().into_iter().flatten();
    conditions
        .into_iter()
        .any(|c| c["type"] == "Ready" && c["status"] == "True")
}

/// The image pushed to a registry on 127.0.0.1, the node started: `helm install` of the chart
/// with that image runs both controller pods on the node, from that registry, Ready.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster, make image and make node-bin: make e2e-cluster"]
async fn the_chart_runs_the_controller_from_a_registry_on_a_real_kubelet() {
    let (Some(admin), Some(run)) = (live::kubeconfig(), live::run_dir()) else {
        eprintln!("skipped: OME_SPREAD_E2E_KUBECONFIG and OME_SPREAD_E2E_RUN name no cluster of cluster/up.sh");
        return;
    };
    let buildah = Buildah::new(&oci::scratch("node"));
    let (registry, _registry) = oci::registry(&buildah.dir).await;
    buildah.run(&["pull", "--quiet", &oci::archive()]).await;
    let local = format!("localhost/{IMAGE}");
    let remote = format!("docker://{registry}/{IMAGE}");
    buildah
        .run(&["push", "--quiet", "--tls-verify=false", &local, &remote])
        .await;
    let started = tokio::time::Instant::now();
    let port = registry.rsplit(':').next().expect("a port");
    let _node = Node::start(&run, &admin, port).await;
    eprintln!("time: the node Ready {:?} after node-up.sh started", started.elapsed());

    live::install(&admin, live::OME_CRDS).await;
    live::install(&admin, live::KUBEWARDEN_CRD).await;
    live::forget_lease(&admin).await;
    live::uninstall_chart(&admin).await;
    // Made before the chart takes it over: helm's --create-namespace and the chart's own Namespace
    // collide ("already exists") when helm makes it.
    live::fresh_namespace(&admin, "ome-spread").await;
    live::fresh_namespace(&admin, NAMESPACE).await;
    live::apply(&admin, OBJECTS).await;

    let started = tokio::time::Instant::now();
    install(&admin, &registry).await;
    eprintln!("time: helm install --wait took {:?}", started.elapsed());
    let namespace: Value =
        serde_json::from_str(&kubectl(&admin, &["get", "namespace", "ome-spread", "-o", "json"]).await)
            .expect("the namespace");
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
        "{namespace}"
    );
    let pods = controller_pods(&admin).await;
    each_runs_the_image_from_the_registry(&pods, &registry);

    let names: Vec<String> = pods.iter().map(name).collect();
    let leader = eventually("a pod on the Lease", 60, || async {
        live::lease_holder(&admin).await.filter(|h| names.contains(h))
    })
    .await;
    condition_written_by_the_pod(&admin).await;
    the_log_is_json(&admin, &leader).await;
    a_rollout_restart_moves_the_lease(&admin, &names, &leader).await;
    helm_test_passes_while_the_spread_holds(&admin).await;

    helm(&admin, &["uninstall", "ome-spread", "-n", "ome-spread", "--wait"]).await;
    kubectl(&admin, &["delete", "namespace", NAMESPACE, "--timeout=90s"]).await;
    kubectl(&admin, &["delete", "clusterservingruntime", "srt-node"]).await;
}

/// The Deployment's two pods on the node, Ready, never restarted, each running the image pulled
/// from `registry`.
fn each_runs_the_image_from_the_registry(pods: &[Value], registry: &str) {
    assert_eq!(pods.len(), 2, "the Deployment's two replicas");
    for pod in pods {
        assert_eq!(pod["spec"]["nodeName"], "localhost", "{}", name(pod));
        assert!(
            ready(pod),
            "{}: its readiness probe answered: {}",
            name(pod),
            pod["status"]
        );
        let status = &pod["status"]["containerStatuses"][0];
        assert_eq!(status["image"], format!("{registry}/{IMAGE}"));
        let pulled = status["imageID"].as_str().expect("an imageID");
        assert!(
            pulled.starts_with(&format!("{registry}/ome-spread-controller@sha256:")),
            "pulled from the registry: {pulled}"
        );
        assert_eq!(status["restartCount"], 0, "its liveness probe answered: {}", name(pod));
    }
}

/// `helm install --wait` of the chart, the image from `registry`, the controller's pods (and
/// helm test's) on the real node alone, helm test naming the replica's InferenceService.
async fn install(admin: &Path, registry: &str) {
    let chart = local::workspace().join("charts/ome-spread");
    let module = format!("policy.module=registry://{registry}/ome-spread:v0.1.0");
    let repository = format!("controller.image.repository={registry}/ome-spread-controller");
    let tolerations =
        json!([{"key": "ome-spread.io/node", "operator": "Equal", "value": "real", "effect": "NoSchedule"}]);
    let tolerations = format!("controller.tolerations={tolerations}");
    let test_namespace = format!("tests.namespace={NAMESPACE}");
    let args = [
        "install",
        "ome-spread",
        chart.to_str().expect("a path"),
        "-n",
        "ome-spread",
        "--take-ownership",
        "--wait",
        "--timeout",
        "3m",
        "--set",
        &module,
        "--set",
        &repository,
        "--set-json",
        &tolerations,
        "--set",
        "controller.nodeSelector.ome-spread\\.io/node=real",
        "--set",
        "tests.inferenceService=qwen3-0-6b",
        "--set",
        &test_namespace,
    ];
    helm(admin, &args).await;
}

/// The replica's condition, written by the controller in the pod: no other process of the test
/// writes it, and its field manager is the controller's.
async fn condition_written_by_the_pod(admin: &Path) {
    let replica = eventually("the Spread condition", 60, || async {
        let replica = live::replica(admin, NAMESPACE).await.expect("the replica");
        live::spread(&replica).is_some().then_some(replica)
    })
    .await;
    let condition = live::spread(&replica).expect("the condition");
    assert_eq!(
        (&condition["status"], &condition["reason"]),
        (&json!("True"), &json!("NotRequested")),
        "{condition}"
    );
    let args = [
        "get",
        "inferencereplica",
        "qwen3-0-6b-engine",
        "-n",
        NAMESPACE,
        "-o",
        "json",
        "--show-managed-fields",
    ];
    let replica: Value = serde_json::from_str(&kubectl(admin, &args).await).expect("the replica");
    let managers: Vec<(&Value, &Value)> = replica["metadata"]["managedFields"]
        .as_array()
        .expect("managedFields")
        .iter()
        .map(|m| (&m["manager"], &m["subresource"]))
        .collect();
    assert!(
        managers.contains(&(&json!("ome-spread"), &json!("status"))),
        "{managers:?}"
    );
}

/// `kubectl logs` of the leader: one JSON object a line (the chart's --log-json), the line of its
/// standing by naming the pod.
async fn the_log_is_json(admin: &Path, leader: &str) {
    let log = kubectl(admin, &["logs", "-n", "ome-spread", leader]).await;
    let lines: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}")))
        .collect();
    let standing_by = lines
        .iter()
        .find(|l| l["fields"]["message"] == "standing by for the Lease ome-spread-controller")
        .unwrap_or_else(|| panic!("no line standing by for the Lease: {log}"));
    assert_eq!(standing_by["level"], "INFO");
    assert_eq!(standing_by["fields"]["identity"], leader);
}

/// `kubectl rollout restart`: the kubelet sends each old pod SIGTERM; the leader releases the
/// Lease on its way out, so that another pod holds it within seconds, and at the end a new pod
/// holds it. Without the release, the Lease's 30 s term would have to run out after the SIGTERM,
/// which itself waits for a new pod to be Ready.
async fn a_rollout_restart_moves_the_lease(admin: &Path, old: &[String], leader: &str) {
    let started = tokio::time::Instant::now();
    kubectl(
        admin,
        &[
            "rollout",
            "restart",
            "deployment/ome-spread-controller",
            "-n",
            "ome-spread",
        ],
    )
    .await;
    let next = eventually("another pod on the Lease", 60, || async {
        live::lease_holder(admin).await.filter(|h| h != leader)
    })
    .await;
    let moved = started.elapsed();
    eprintln!("time: the Lease moved from {leader} to {next} {moved:?} after kubectl rollout restart");
    assert!(moved < Duration::from_secs(20), "{moved:?}: not released on SIGTERM");
    let status = [
        "rollout",
        "status",
        "deployment/ome-spread-controller",
        "-n",
        "ome-spread",
        "--timeout=120s",
    ];
    kubectl(admin, &status).await;
    let new: Vec<String> = controller_pods(admin)
        .await
        .iter()
        .filter(|pod| pod["metadata"]["deletionTimestamp"].is_null())
        .map(name)
        .collect();
    assert!(new.iter().all(|pod| !old.contains(pod)), "{new:?} replaced {old:?}");
    let holder = eventually("a new pod on the Lease", 60, || async {
        live::lease_holder(admin).await.filter(|h| new.contains(h))
    })
    .await;
    eprintln!(
        "time: the new pod {holder} held the Lease {:?} after kubectl rollout restart",
        started.elapsed()
    );
}

/// `helm test`: `explain` in a pod of the image passes while the spread holds, its reason in
/// the log, and fails once it does not (a spread asked for with no key to spread on).
async fn helm_test_passes_while_the_spread_holds(admin: &Path) {
    let test = ["test", "ome-spread", "-n", "ome-spread", "--logs", "--timeout", "2m"];
    let passed = helm_with(admin, &test).await;
    assert!(passed.ok, "helm test: {}{}", passed.stdout, passed.stderr);
    assert!(
        passed.stdout.contains("Spread: True (NotRequested)"),
        "{}",
        passed.stdout
    );
    for (kind, name, patch) in [
        (
            "inferencereplica",
            "qwen3-0-6b-engine",
            r#"{"spec":{"topologySpread":"Required"}}"#,
        ),
        (
            "inferenceservice",
            "qwen3-0-6b",
            r#"{"spec":{"engine":{"topologySpread":"Required"}}}"#,
        ),
    ] {
        kubectl(
            admin,
            &["patch", kind, name, "-n", NAMESPACE, "--type=merge", "-p", patch],
        )
        .await;
    }
    let failed = helm_with(admin, &test).await;
    assert!(!failed.ok, "helm test passed where the spread fails: {}", failed.stdout);
    assert!(failed.stdout.contains("Spread: False (NoKey)"), "{}", failed.stdout);
}
