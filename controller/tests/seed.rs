//! The seed's how-to (spread-instances-across-fault-domains.md), run as written against a live
//! control plane: the real kube-apiserver and kube-scheduler (`make e2e-cluster` starts them with
//! cluster/up.sh), the policy behind a real mutating webhook (the test-only admission host, or
//! policy-server), the node and OME stand-ins of `sim/` in place of kubelets and OME. Each
//! command's output is compared with the seed's output block, written here by hand; where the
//! seed's output depends on the scheduler's choice (which Instance lands on which node), the test
//! checks what the seed says of it (two nodes, in different zones).
//!
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/e2e/kubeconfig cargo test -p ome-spread-controller --test seed -- --ignored

mod live;

use std::path::{Path, PathBuf};

use live::{Process, kubectl, table};

/// The seed's prerequisites: the ClusterBaseModel `qwen3-0-6b`, Ready, and the
/// ClusterServingRuntime `srt-qwen3-0-6b`, whose engine asks for what the seed says one engine
/// pod needs (1 GPU, 10 CPUs, 30 GiB) on nodes where the model is Ready.
const PREREQUISITES: &str = r#"
apiVersion: ome.io/v1beta1
kind: ClusterBaseModel
metadata:
  name: qwen3-0-6b
spec:
  storage:
    storageUri: hf://Qwen/Qwen3-0.6B
---
apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata:
  name: srt-qwen3-0-6b
spec:
  engineConfig:
    runner:
      name: ome-container
      image: docker.io/lmsysorg/sglang:v0.5.4
      resources:
        requests: {nvidia.com/gpu: "1", cpu: "10", memory: 30Gi}
        limits: {nvidia.com/gpu: "1", cpu: "10", memory: 30Gi}
"#;

/// Step 1's InferenceService, as the seed has it.
const ISVC: &str = "apiVersion: ome.io/v1beta1
kind: InferenceService
metadata:
  name: qwen3-0-6b
  namespace: spread-demo
spec:
  deploymentMode: OMENative
  model:
    name: qwen3-0-6b
  runtime:
    name: srt-qwen3-0-6b
  engine:
    minReplicas: 2
    maxReplicas: 2
    topologySpread: Required
    topologySpreadKey: topology.kubernetes.io/zone
";

/// The world the seed's prerequisites describe, on the cluster under test: OME's CRDs, the model
/// and the runtime, nodes in two zones, OME (the stand-in) and the policy behind its webhook.
struct World {
    admin: PathBuf,
    scratch: PathBuf,
    processes: Vec<Process>,
}

impl World {
    async fn start(admin: PathBuf, layout: &str) -> World {
        let scratch = live::workspace().join(format!("target/e2e-cluster/{}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("a scratch directory");
        let crds = std::fs::read_to_string(live::workspace().join("cluster/ome-crds.yaml")).expect("the CRDs");
        live::apply(&admin, &crds).await;
        kubectl(
            &admin,
            &["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"],
        )
        .await;
        live::apply(&admin, PREREQUISITES).await;
        kubectl(
            &admin,
            &[
                "patch",
                "clusterbasemodel",
                "qwen3-0-6b",
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"state":"Ready"}}"#,
            ],
        )
        .await;
        let mut processes = Vec::new();
        let env = [("KUBECONFIG", admin.as_path())];
        let stand_in = live::binary("stand-in");
        let (nodes, _) = Process::start("nodes", &stand_in, &["nodes", "--layout", layout], &env, "nodes: ready").await;
        processes.push(nodes);
        let (ome, _) = Process::start("ome", &stand_in, &["ome", "--no-in-tree-terms"], &env, "ome: ready").await;
        processes.push(ome);
        processes.push(admission_host(&admin, &scratch).await);
        World {
            admin,
            scratch,
            processes,
        }
    }

    async fn kubectl(&self, args: &[&str]) -> String {
        kubectl(&self.admin, args).await
    }

    /// Stops the stand-ins and the admission host, and takes the webhook away with the host (its
    /// failurePolicy Fail would refuse every OMENative pod of the next test).
    async fn stop(self) {
        for process in self.processes {
            process.kill().await;
        }
        kubectl(
            &self.admin,
            &[
                "delete",
                "mutatingwebhookconfiguration",
                "clusterwide-ome-spread",
                "--ignore-not-found",
            ],
        )
        .await;
    }
}

/// The policy behind a MutatingWebhookConfiguration as the Kubewarden controller writes it for
/// policy.yaml, served by the test-only admission host with the policy-server's ServiceAccount
/// and policy.yaml's RBAC.
async fn admission_host(admin: &Path, scratch: &Path) -> Process {
    live::apply(
        admin,
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: kubewarden}\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: policy-server, namespace: kubewarden}\n",
    )
    .await;
    let policy = std::fs::read_to_string(live::workspace().join("policy.yaml")).expect("policy.yaml");
    let rbac: Vec<&str> = policy
        .split("\n---\n")
        .filter(|doc| !doc.contains("ClusterAdmissionPolicy"))
        .collect();
    live::apply(admin, &rbac.join("\n---\n")).await;
    let token = live::service_account_kubeconfig(admin, "kubewarden", "policy-server", scratch).await;
    let pki = live::run_dir()
        .expect("OME_SPREAD_E2E_RUN: cluster/up.sh's run directory")
        .join("pki");
    let (cert, key, ca) = (pki.join("webhook.crt"), pki.join("webhook.key"), pki.join("ca.crt"));
    let wasm = live::workspace().join("policy.wasm");
    let args = [
        "--wasm",
        path(&wasm),
        "--settings",
        "{}",
        "--cert",
        path(&cert),
        "--key",
        path(&key),
        "--listen",
        "127.0.0.1:0",
        "--kubeconfig",
        path(&token),
        "--ca",
        path(&ca),
        "--apply-webhook",
        "--admin-kubeconfig",
        path(admin),
    ];
    let host = live::binary("examples/admission_host");
    Process::start("admission", &host, &args, &[], "listening on").await.0
}

fn path(file: &Path) -> &str {
    file.to_str().expect("a UTF-8 path")
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| (*c).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn step_1_and_step_2_as_the_seed_writes_them() {
    let Some(admin) = live::kubeconfig() else {
        eprintln!("skipped: OME_SPREAD_E2E_KUBECONFIG names no cluster");
        return;
    };
    let world = World::start(admin, "two-zones").await;

    // Step 1.
    assert_eq!(
        world.kubectl(&["create", "namespace", "spread-demo"]).await,
        "namespace/spread-demo created\n"
    );
    let file = world.scratch.join("qwen3-0-6b-isvc.yaml");
    std::fs::write(&file, ISVC).expect("qwen3-0-6b-isvc.yaml");
    assert_eq!(
        world.kubectl(&["apply", "-f", path(&file)]).await,
        "inferenceservice.ome.io/qwen3-0-6b created\n"
    );
    assert_eq!(
        world
            .kubectl(&[
                "wait",
                "--for=condition=Ready",
                "inferenceservice/qwen3-0-6b",
                "-n",
                "spread-demo",
                "--timeout=30m"
            ])
            .await,
        "inferenceservice.ome.io/qwen3-0-6b condition met\n"
    );

    // Step 2: the replica's settings in effect.
    let replica = world
        .kubectl(&[
            "get", "inferencereplica", "qwen3-0-6b-engine", "-n", "spread-demo", "-o",
            "custom-columns=NAME:.metadata.name,SPREAD:.spec.topologySpread,SPREAD-KEY:.spec.topologySpreadKey,TOPOLOGY-KEY:.spec.topologyKey",
        ])
        .await;
    assert_eq!(
        table(&replica),
        [
            row(&["NAME", "SPREAD", "SPREAD-KEY", "TOPOLOGY-KEY"]),
            row(&["qwen3-0-6b-engine", "Required", "topology.kubernetes.io/zone", "<none>"]),
        ],
        "{replica}"
    );

    // The pods, their constraint (added by the policy behind the webhook) and their nodes.
    let pods = world
        .kubectl(&[
            "get", "pods", "-n", "spread-demo", "-l", "ome.io/inferenceservice=qwen3-0-6b", "-o",
            "custom-columns=NAME:.metadata.name,SPREAD-KEY:.spec.topologySpreadConstraints[*].topologyKey,WHEN:.spec.topologySpreadConstraints[*].whenUnsatisfiable,NODE:.spec.nodeName",
        ])
        .await;
    let pods = table(&pods);
    assert_eq!(pods.len(), 3, "a header and two pods: {pods:?}");
    assert_eq!(pods[0], row(&["NAME", "SPREAD-KEY", "WHEN", "NODE"]));
    let nodes: Vec<&str> = pods[1..].iter().map(|p| p[3].as_str()).collect();
    for (pod, name) in pods[1..]
        .iter()
        .zip(["qwen3-0-6b-engine-0-default-0", "qwen3-0-6b-engine-1-default-0"])
    {
        assert_eq!(
            pod[..3],
            row(&[name, "topology.kubernetes.io/zone", "DoNotSchedule"])[..],
            "{pods:?}"
        );
    }
    let mut sorted = nodes.clone();
    sorted.sort();
    assert_eq!(
        sorted,
        ["gpu-node-1", "gpu-node-2"],
        "the scheduler's choice, one Instance a node"
    );

    // The nodes' zones, from the NODE column.
    let zones = world
        .kubectl(&[
            "get",
            "nodes",
            sorted[0],
            sorted[1],
            "-o",
            r"custom-columns=NAME:.metadata.name,ZONE:.metadata.labels.topology\.kubernetes\.io/zone",
        ])
        .await;
    assert_eq!(
        table(&zones),
        [
            row(&["NAME", "ZONE"]),
            row(&["gpu-node-1", "zone-a"]),
            row(&["gpu-node-2", "zone-b"]),
        ],
        "{zones}"
    );

    // Clean up.
    assert_eq!(
        world
            .kubectl(&["delete", "inferenceservice", "qwen3-0-6b", "-n", "spread-demo"])
            .await,
        "inferenceservice.ome.io \"qwen3-0-6b\" deleted from spread-demo namespace\n"
    );
    assert_eq!(
        world.kubectl(&["delete", "namespace", "spread-demo"]).await,
        "namespace \"spread-demo\" deleted\n"
    );
    world.stop().await;
}
