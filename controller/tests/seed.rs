//! The seed's how-to (spread-instances-across-fault-domains.md), run as written against a live
//! control plane: the real kube-apiserver and kube-scheduler (`make e2e-cluster` starts them with
//! cluster/up.sh), the policy behind a real mutating webhook (the test-only admission host, or
//! policy-server), kwok in place of kubelets and `sim/`'s OME stand-in in place of OME. Each
//! command's output is compared with the seed's output block, written here by hand; where the
//! seed's output depends on the scheduler's choice (which Instance lands on which node), the test
//! checks what the seed says of it (two nodes, in different zones).
//!
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/e2e/kubeconfig cargo test -p ome-spread-controller --test seed -- --ignored

use ome_spread_sim::support::{live, local, wait::eventually};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ome_spread_controller::context::Mode;
use ome_spread_controller::controller::{self, Options};
use ome_spread_controller::policy::Source;
use ome_spread_controller::report::{Format, Reports};
use ome_spread_core::settings::Settings;
use ome_spread_sim::support::live::{Process, kubectl, table};
use ome_spread_sim::support::nodes::{self, NodeShape};
use ome_spread_sim::support::objects::Pod;
use serde_json::{Value, json};

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
    controller: Option<tokio::task::JoinHandle<Result<(), String>>>,
}

impl World {
    /// The seed's prerequisites for `model` (its ClusterBaseModel, Ready, and the runtime
    /// `srt-<model>`) on `nodes`, OME's CRDs, kwok and the OME stand-in, the policy behind its
    /// webhook and, when asked, the controller (its Lease's namespace, its rebalance mode).
    async fn start(admin: PathBuf, model: &str, nodes: &[NodeShape], controller: Option<(&str, Mode)>) -> World {
        live::logs();
        let scratch = local::workspace().join(format!("target/e2e-cluster/{}", std::process::id()));
        std::fs::create_dir_all(&scratch).expect("a scratch directory");
        live::install(&admin, live::OME_CRDS).await;
        live::install(&admin, live::OPENREPORTS_CRD).await;
        live::apply(&admin, &PREREQUISITES.replace("qwen3-0-6b", model)).await;
        kubectl(
            &admin,
            &[
                "patch",
                "clusterbasemodel",
                model,
                "--subresource=status",
                "--type=merge",
                "-p",
                r#"{"status":{"state":"Ready"}}"#,
            ],
        )
        .await;
        let client = live::client_of(&admin).await;
        let mut processes = vec![live::kwok(&admin).await];
        nodes::create_nodes(&client, nodes).await.expect("the nodes");
        let env = [("KUBECONFIG", admin.as_path())];
        let stand_in = local::binary("stand-in");
        let (ome, _) = Process::start("ome", &stand_in, &["ome", "--no-in-tree-terms"], &env, "ome: ready").await;
        processes.push(ome);
        processes.push(admission_host(&admin, &scratch).await);
        let controller = controller.map(|(namespace, rebalance)| {
            tokio::spawn(controller::run(
                client,
                Options {
                    settings: Source::Fixed(Settings::default()),
                    lease_namespace: namespace.into(),
                    identity: "e2e".into(),
                    health: Arc::default(),
                    metrics: Arc::default(),
                    rebalance,
                    max_per_hour: 10,
                    reports: Reports::new(Format::OpenReports, "ome-spread", Arc::default()),
                },
            ))
        });
        World {
            admin,
            scratch,
            processes,
            controller,
        }
    }

    async fn kubectl(&self, args: &[&str]) -> String {
        kubectl(&self.admin, args).await
    }

    /// The seed's `kubectl wait --for=condition=Ready inferenceservice/qwen3-0-6b` in `namespace`,
    /// within `timeout`: the condition met.
    async fn service_ready(&self, namespace: &str, timeout: &str) {
        let timeout = format!("--timeout={timeout}");
        let args = [
            "wait",
            "--for=condition=Ready",
            "inferenceservice/qwen3-0-6b",
            "-n",
            namespace,
            &timeout,
        ];
        assert_eq!(
            self.kubectl(&args).await,
            "inferenceservice.ome.io/qwen3-0-6b condition met\n"
        );
    }

    /// Stops kwok, the OME stand-in and the admission host, and takes the webhook away with the
    /// host (left behind, it would send every OMENative pod of the next test to a host that is
    /// gone).
    async fn stop(self) {
        if let Some(controller) = self.controller {
            controller.abort();
        }
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
    let token = live::policy_server(admin, scratch).await;
    let pki = live::run_dir()
        .expect("OME_SPREAD_E2E_RUN: cluster/up.sh's run directory")
        .join("pki");
    let (cert, key, ca) = (pki.join("webhook.crt"), pki.join("webhook.key"), pki.join("ca.crt"));
    let wasm = local::workspace().join("policy.wasm");
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
    let host = local::binary("admission-host");
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
        return;
    };
    let layout = nodes::layout("two-zones").expect("the seed's nodes");
    let world = World::start(admin, "qwen3-0-6b", &layout, None).await;

    step_1(&world).await;

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
    let sorted = step_2_pods(&world).await;

    // The nodes' zones, from the NODE column.
    let zones = world
        .kubectl(&[
            "get",
            "nodes",
            &sorted[0],
            &sorted[1],
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

/// One row of the seed's troubleshooting tables, produced for real: its nodes (each scenario has
/// a model of its own, Ready only on its own nodes, so that the nodes of other rows are not
/// selected), the engine's fields, and what the controller and `explain` must say, written by
/// hand from docs/controller.md and the seed's tables.
struct Row {
    /// The namespace and the model.
    name: &'static str,
    nodes: Vec<NodeShape>,
    /// The engine's fields in the InferenceService, as YAML.
    engine: &'static str,
    status: &'static str,
    reason: &'static str,
    /// `explain`'s Why and What to do lines.
    why: String,
    what: &'static str,
}

/// A node of `row`'s model with room for `gpus` of the seed's engine pods.
fn node(row: &str, name: &str, zone: Option<&str>, gpus: u32) -> NodeShape {
    let mut shape = NodeShape::gpu(&format!("{row}-{name}"), "", &format!("{row}-rack"));
    shape.zone = zone.map(str::to_owned);
    shape.models = vec![row.to_owned()];
    shape.gpus = gpus;
    shape.cpus = 10 * gpus + 6;
    shape.memory = format!("{}Gi", 30 * gpus + 34);
    shape
}

async fn troubleshoot(row: Row) {
    let Some(admin) = live::kubeconfig() else {
        return;
    };
    let world = start_row(admin, &row).await;
    diagnosed_as_the_row_says(&world, &row).await;
    end_row(world, &row).await;
}

/// `row`'s world, with the controller, and its InferenceService applied.
async fn start_row(admin: PathBuf, row: &Row) -> World {
    let namespace = row.name;
    live::fresh_namespace(&admin, namespace).await;
    let world = World::start(admin, row.name, &row.nodes, Some((namespace, Mode::Recommend))).await;
    let service = format!(
        "apiVersion: ome.io/v1beta1\nkind: InferenceService\nmetadata: {{name: qwen3-0-6b, namespace: {namespace}}}\n\
         spec:\n  deploymentMode: OMENative\n  model: {{name: {}}}\n  runtime: {{name: srt-{}}}\n  engine:\n{}",
        row.name, row.name, row.engine
    );
    live::apply(&world.admin, &service).await;
    world
}

/// The `Spread` condition as the API server stores it, the Event, and `explain` against the live
/// API server, each as `row` says.
async fn diagnosed_as_the_row_says(world: &World, row: &Row) {
    let namespace = row.name;
    let condition = eventually(&format!("Spread {} ({})", row.status, row.reason), 120, || async {
        let replica = live::replica(&world.admin, namespace).await?;
        live::spread(&replica).filter(|c| c["reason"] == row.reason).cloned()
    })
    .await;
    let message = format!("{} {}", row.why, row.what);
    assert_eq!(
        (condition["status"].as_str(), condition["message"].as_str()),
        (Some(row.status), Some(message.as_str())),
        "the Spread condition as the API server stores it: {condition}"
    );
    reported_as_the_condition_says(&world.admin, namespace, &condition).await;
    let events = world
        .kubectl(&[
            "get",
            "events.events.k8s.io",
            "-n",
            namespace,
            "--field-selector",
            &format!("reason={}", row.reason),
            "-o",
            "jsonpath={range .items[*]}{.type} {.regarding.kind}/{.regarding.name}: {.note}{\"\\n\"}{end}",
        ])
        .await;
    let kind = if row.status == "True" { "Normal" } else { "Warning" };
    let regarding = format!("{kind} InferenceReplica/qwen3-0-6b-engine: ");
    assert_eq!(events.lines().count(), 1, "one Event of the reason: {events}");
    assert!(events.starts_with(&regarding), "{events}");
    // An Event is recorded when the reason changes, with the message of that moment: a first
    // Satisfied may come while OME is still making the pods, counting fewer Instances than the
    // condition does now; a first Skewed while a pod is still binding, its What to do reading the
    // room as it was. The condition and explain above are compared whole.
    if row.reason != "Satisfied" {
        assert!(events.starts_with(&format!("{regarding}{}", row.why)), "{events}");
    }

    let explain = tokio::process::Command::new(local::binary("ome-spread"))
        .args(["explain", "qwen3-0-6b", "-n", namespace])
        .env("KUBECONFIG", &world.admin)
        .output()
        .await
        .expect("explain runs");
    let printed = String::from_utf8_lossy(&explain.stdout);
    let tail: Vec<&str> = printed
        .lines()
        .skip_while(|l| !l.starts_with("Spread: "))
        .take(3)
        .collect();
    assert_eq!(
        tail,
        [
            format!("Spread: {} ({})", row.status, row.reason),
            format!("Why: {}", row.why),
            format!("What to do: {}", row.what),
        ],
        "{printed}"
    );
    assert_eq!(explain.status.code(), Some(if row.status == "True" { 0 } else { 1 }));
}

/// The reports in `namespace`, as the API server stores them.
async fn reports(admin: &Path, namespace: &str) -> Vec<Value> {
    let printed = live::kubectl_with(
        admin,
        &["get", "reports.openreports.io", "-n", namespace, "-o", "json"],
        None,
    )
    .await;
    let list: Value = serde_json::from_str(&printed.stdout).unwrap_or_default();
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The replica's one report, within seconds of its `Spread` condition: its spread result says
/// what the condition says, under the source Policy Reporter lists it by.
async fn reported_as_the_condition_says(admin: &Path, namespace: &str, condition: &Value) {
    let started = std::time::Instant::now();
    let report = eventually("the report of the condition's message", 10, || async {
        let reports = reports(admin, namespace).await;
        assert!(reports.len() <= 1, "one report: {reports:?}");
        reports
            .into_iter()
            .find(|r| r["results"][0]["message"] == condition["message"])
    })
    .await;
    eprintln!("the report followed the condition within {:?}", started.elapsed());
    let name = report["metadata"]["name"].as_str().unwrap_or_default();
    let args = ["get", "reports.openreports.io", name, "-n", namespace, "-o", "yaml"];
    eprintln!(
        "the report as stored:\n{}",
        live::kubectl_with(admin, &args, None).await.stdout
    );
    let spread = &report["results"][0];
    let outcome = if condition["status"] == "True" { "pass" } else { "fail" };
    assert_eq!(
        (
            (
                &report["source"],
                &report["metadata"]["labels"]["app.kubernetes.io/managed-by"]
            ),
            (&report["scope"]["kind"], &report["scope"]["name"]),
            (
                &spread["policy"],
                &spread["rule"],
                &spread["result"],
                &spread["message"]
            ),
        ),
        (
            (&json!("ome-spread"), &json!("ome-spread")),
            (&json!("InferenceReplica"), &json!("qwen3-0-6b-engine")),
            (
                &json!("clusterwide-ome-spread"),
                &json!("spread"),
                &json!(outcome),
                &condition["message"]
            ),
        ),
        "{report:#}"
    );
    let results = report["results"].as_array().expect("results");
    let count = |outcome: &str| results.iter().filter(|r| r["result"] == outcome).count();
    for outcome in ["pass", "fail", "warn", "error", "skip"] {
        assert_eq!(report["summary"][outcome], count(outcome), "{outcome}: {report:#}");
    }
    assert_eq!(results[1]["rule"], "domain-loss", "{report:#}");
}

/// `row`'s namespace and nodes deleted, the world stopped; the report goes with its replica.
async fn end_row(world: World, row: &Row) {
    world
        .kubectl(&["delete", "inferenceservice", "qwen3-0-6b", "-n", row.name])
        .await;
    eventually("the report gone with its replica", 60, || async {
        reports(&world.admin, row.name).await.is_empty().then_some(())
    })
    .await;
    world.kubectl(&["delete", "namespace", row.name, "--timeout=60s"]).await;
    let names: Vec<&str> = row.nodes.iter().map(|n| n.name.as_str()).collect();
    world.kubectl(&[&["delete", "node"][..], &names].concat()).await;
    world.stop().await;
}

/// "An Instance stays Pending", the count has no suffix: the domain with the fewest Instances
/// (zone-b) is full, zone-a has room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn a_full_domain_keeps_an_instance_pending_domains_full() {
    troubleshoot(Row {
        name: "full",
        nodes: vec![
            node("full", "a1", Some("zone-a"), 1),
            node("full", "a2", Some("zone-a"), 1),
            node("full", "a3", Some("zone-a"), 1),
            node("full", "b1", Some("zone-b"), 1),
        ],
        engine: "    minReplicas: 4\n    maxReplicas: 4\n    topologySpread: Required\n    topologySpreadKey: topology.kubernetes.io/zone\n",
        status: "False",
        reason: "DomainsFull",
        why: "qwen3-0-6b-engine-3-default-0 stays Pending: the domains with the fewest of the component's Instances are full.".into(),
        what: "Free room in one of them, or run fewer Instances.",
    })
    .await;
}

/// "An Instance stays Pending", the count ends in `(missing required label)`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn nodes_without_the_key_keep_an_instance_pending_missing_label() {
    troubleshoot(Row {
        name: "unlabelled",
        nodes: vec![
            node("unlabelled", "a1", Some("zone-a"), 1),
            node("unlabelled", "x1", None, 1),
        ],
        engine: "    minReplicas: 2\n    maxReplicas: 2\n    topologySpread: Required\n    topologySpreadKey: topology.kubernetes.io/zone\n",
        status: "False",
        reason: "MissingLabel",
        why: "the nodes unlabelled-x1 lack the label topology.kubernetes.io/zone, so Required skips them.".into(),
        what: "Label the nodes, or correct topologySpreadKey.",
    })
    .await;
}

/// "The Instances landed in one domain", all the values right: the model is Ready in one zone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn the_model_in_one_zone_puts_every_instance_there_single_domain() {
    troubleshoot(Row {
        name: "single",
        nodes: vec![node("single", "a1", Some("zone-a"), 1), node("single", "a2", Some("zone-a"), 1)],
        engine: "    minReplicas: 2\n    maxReplicas: 2\n    topologySpread: Required\n    topologySpreadKey: topology.kubernetes.io/zone\n",
        status: "False",
        reason: "SingleDomain",
        why: "only one domain (zone-a) has a node the pods select.".into(),
        what: "Put the model on nodes in a second domain, as Choose the nodes shows.",
    })
    .await;
}

/// "The Instances landed in one domain", SPREAD-KEY and TOPOLOGY-KEY both `<none>`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn a_spread_without_a_key_no_key() {
    troubleshoot(Row {
        name: "nokey",
        nodes: vec![
            node("nokey", "a1", Some("zone-a"), 1),
            node("nokey", "b1", Some("zone-b"), 1),
        ],
        engine: "    minReplicas: 2\n    maxReplicas: 2\n    topologySpread: Required\n",
        status: "False",
        reason: "NoKey",
        why: "SPREAD-KEY and TOPOLOGY-KEY are both <none>: OME has no key to spread on.".into(),
        what: "Set topologySpreadKey.",
    })
    .await;
}

/// "Add the spread to a running InferenceService": two Instances run in zone-a (zone-b's node
/// cordoned); the spread is added: they stay where they are (`PodsPredateChange`); zone-b
/// opens, and the controller under `--rebalance migrate` requests one migration of OME (the
/// stand-in), whose surge the policy gives the constraint and kube-scheduler places in zone-b,
/// before the source drains: two Instances serve throughout, one request in all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn the_spread_added_to_running_instances_then_one_migration_moves_one() {
    let Some(admin) = live::kubeconfig() else {
        return;
    };
    let namespace = "added";
    live::fresh_namespace(&admin, namespace).await;
    let mut b1 = node(namespace, "b1", Some("zone-b"), 1);
    b1.unschedulable = true;
    let shapes = vec![node(namespace, "a1", Some("zone-a"), 2), b1];
    let world = World::start(admin, namespace, &shapes, Some((namespace, Mode::Migrate))).await;
    let service = |spread: &str| {
        format!(
            "apiVersion: ome.io/v1beta1\nkind: InferenceService\nmetadata: {{name: qwen3-0-6b, namespace: {namespace}}}\n\
             spec:\n  deploymentMode: OMENative\n  model: {{name: {namespace}}}\n  runtime: {{name: srt-{namespace}}}\n  \
             engine:\n    minReplicas: 2\n    maxReplicas: 2\n{spread}"
        )
    };
    live::apply(&world.admin, &service("")).await;
    world.service_ready(namespace, "120s").await;
    let pods = || added_pods(&world, namespace);
    assert_eq!(
        pods().await,
        [
            row(&["NAME", "SPREAD-KEY", "WHEN", "NODE"]),
            row(&["qwen3-0-6b-engine-0-default-0", "<none>", "<none>", "added-a1"]),
            row(&["qwen3-0-6b-engine-1-default-0", "<none>", "<none>", "added-a1"]),
        ]
    );

    // The spread added: the running Instances stay, and predate it.
    let spread = "    topologySpread: Required\n    topologySpreadKey: topology.kubernetes.io/zone\n";
    live::apply(&world.admin, &service(spread)).await;
    let reason = || async { live::spread_reason(&world.admin, namespace).await.unwrap_or_default() };
    eventually("PodsPredateChange", 60, || async {
        (reason().await == "PodsPredateChange").then_some(())
    })
    .await;
    // The report follows the change.
    let replica = live::replica(&world.admin, namespace).await.expect("the replica");
    let condition = live::spread(&replica).expect("the condition").clone();
    reported_as_the_condition_says(&world.admin, namespace, &condition).await;

    // Zone-b opens: one migration, surge first. Not before the policy reads the spread:
    // policy-server (and the admission host, as it) answers a replica's lookup from its cache for
    // 5 s, so a surge admitted sooner gets the replica's old settings (seen here: a surge without
    // constraint). A pod of a third Instance, created as a dry run, shows when it does.
    policy_reads_the_spread(&world, namespace).await;
    world.kubectl(&["uncordon", "added-b1"]).await;
    let kept = one_instance_moved_to_zone_b(&world, namespace).await;
    let source = if kept.contains("-0-") { 1 } else { 0 };
    one_migration_completed(&world, namespace, source).await;
    world
        .kubectl(&["delete", "namespace", namespace, "--timeout=60s"])
        .await;
    world.kubectl(&["delete", "node", "added-a1", "added-b1"]).await;
    world.stop().await;
}

/// "An Instance stays Pending", every node of one domain cordoned: that domain still counts (the
/// default nodeTaintsPolicy), and its count of 0 holds the third Instance back from the others,
/// which have room.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn a_cordoned_domain_holds_the_others_back_domains_full() {
    let mut a1 = node("cordoned", "a1", Some("zone-a"), 3);
    a1.unschedulable = true;
    troubleshoot(Row {
        name: "cordoned",
        nodes: vec![
            a1,
            node("cordoned", "b1", Some("zone-b"), 3),
            node("cordoned", "c1", Some("zone-c"), 3),
        ],
        engine: "    minReplicas: 3\n    maxReplicas: 3\n    topologySpread: Required\n    topologySpreadKey: topology.kubernetes.io/zone\n",
        status: "False",
        reason: "DomainsFull",
        why: "qwen3-0-6b-engine-2-default-0 stays Pending: the domains with the fewest of the component's Instances are full.".into(),
        what: "Free room in one of them, or run fewer Instances.",
    })
    .await;
}

/// "The Instances landed in one domain", WHEN `ScheduleAnyway`: Preferred used zone-a while
/// zone-b, with the fewest Instances, was full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn preferred_piles_into_the_domain_with_room_skewed() {
    troubleshoot(Row {
        name: "preferred",
        nodes: vec![
            node("preferred", "a1", Some("zone-a"), 2),
            node("preferred", "b1", Some("zone-b"), 0),
        ],
        engine: "    minReplicas: 2\n    maxReplicas: 2\n    topologySpread: Preferred\n    topologySpreadKey: topology.kubernetes.io/zone\n",
        status: "False",
        reason: "Skewed",
        why: "Instances per domain (zone-a: 2, zone-b: 0) differ by 2, more than maxSkew 1.".into(),
        what: "No migration can fix it now: no eligible domain has room for one more Instance. Free room for one more Instance in zone-b.",
    })
    .await;
}

/// The seed's leader-and-workers example: `topologyKey` on the rack label keeps each Instance's
/// worker in its leader's rack (the worker's term from the policy behind the webhook),
/// `topologySpreadKey` on the zone spreads the Instances across zones. Two zones of two racks of
/// two 1-GPU nodes: the scheduler picks the racks, never a worker apart from its leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn a_leader_and_workers_each_instance_in_one_rack_the_instances_across_zones() {
    let Some(admin) = live::kubeconfig() else {
        return;
    };
    let racks = racks_row();
    let world = start_row(admin, &racks).await;
    world.service_ready("racks", "120s").await;

    let replica = world
        .kubectl(&[
            "get", "inferencereplica", "qwen3-0-6b-engine", "-n", "racks", "-o",
            "custom-columns=NAME:.metadata.name,SPREAD:.spec.topologySpread,SPREAD-KEY:.spec.topologySpreadKey,TOPOLOGY-KEY:.spec.topologyKey",
        ])
        .await;
    assert_eq!(
        table(&replica)[1],
        row(&[
            "qwen3-0-6b-engine",
            "Required",
            "topology.kubernetes.io/zone",
            "nvidia.com/gpu.clique"
        ]),
        "{replica}"
    );
    instances_each_in_one_rack_across_zones(&world, &racks).await;

    diagnosed_as_the_row_says(&world, &racks).await;
    end_row(world, &racks).await;
}

/// InstanceSplit, live: an Instance whose pods predate `topologyKey` runs in two racks (each rack
/// here has one node, and no worker term kept the worker beside its leader); once the
/// InferenceService sets `topologyKey`, the controller names the Instance, its pods and racks.
/// (OME itself then rolls the component onto a new revision; the stand-in does not, so the split
/// pods stay for the diagnosis to name.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn an_instance_in_two_racks_instance_split() {
    let Some(admin) = live::kubeconfig() else {
        return;
    };
    let nodes: Vec<NodeShape> = ["r1", "r2"]
        .into_iter()
        .map(|rack| {
            let mut shape = node("split", rack, Some("zone-a"), 1);
            shape.rack = Some(format!("rack-{rack}"));
            shape
        })
        .collect();
    let mut split = Row {
        name: "split",
        nodes,
        engine: "    minReplicas: 1\n    maxReplicas: 1\n    leader: {}\n    worker: {size: 1}\n",
        status: "False",
        reason: "InstanceSplit",
        why: String::new(),
        what: "Request an Instance migration of each split Instance: OME makes it anew, its workers in its leader's rack.",
    };
    let world = start_row(admin, &split).await;
    world.service_ready("split", "120s").await;
    let node_of = |pod: &'static str| {
        let world = &world;
        async move {
            let args = ["get", "pod", pod, "-n", "split", "-o", "jsonpath={.spec.nodeName}"];
            world.kubectl(&args).await
        }
    };
    let (leader, worker) = (
        node_of("qwen3-0-6b-engine-0-leader-0").await,
        node_of("qwen3-0-6b-engine-0-worker-0").await,
    );
    let rack = |node: &str| node.replace("split-", "rack-");
    split.why = format!(
        "the pods of an Instance run in more than one rack of nvidia.com/gpu.clique, or on a node without it: \
         Instance 0: qwen3-0-6b-engine-0-leader-0 on {leader} ({}), qwen3-0-6b-engine-0-worker-0 on {worker} ({}).",
        rack(&leader),
        rack(&worker)
    );
    world
        .kubectl(&[
            "patch",
            "inferenceservice",
            "qwen3-0-6b",
            "-n",
            "split",
            "--type=merge",
            "-p",
            r#"{"spec":{"engine":{"topologyKey":"nvidia.com/gpu.clique"}}}"#,
        ])
        .await;
    diagnosed_as_the_row_says(&world, &split).await;
    end_row(world, &split).await;
}

/// The seed's Step 1: the namespace, the InferenceService applied, and Ready.
async fn step_1(world: &World) {
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
    world.service_ready("spread-demo", "30m").await;
}

/// The seed's Step 2, the pods: one an Instance, OME's constraint on each, on two nodes (which on
/// which is the scheduler's choice). Those nodes, sorted.
async fn step_2_pods(world: &World) -> Vec<String> {
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
    let mut sorted: Vec<String> = nodes.iter().map(|n| (*n).to_owned()).collect();
    sorted.sort();
    assert_eq!(
        sorted,
        ["gpu-node-1", "gpu-node-2"],
        "the scheduler's choice, one Instance a node"
    );
    sorted
}

/// Two zones of two racks of two nodes, one GPU each; the engine two Instances of a leader and a
/// worker, spread across the zones, each inside one rack.
fn racks_row() -> Row {
    let mut nodes = Vec::new();
    for (zone, racks) in [("zone-a", ["a1", "a2"]), ("zone-b", ["b1", "b2"])] {
        for rack in racks {
            for n in 1..=2 {
                let mut shape = node("racks", &format!("{rack}-{n}"), Some(zone), 1);
                shape.rack = Some(format!("rack-{rack}"));
                nodes.push(shape);
            }
        }
    }
    Row {
        name: "racks",
        nodes,
        engine: "    minReplicas: 2\n    maxReplicas: 2\n    leader: {}\n    worker: {size: 1}\n    topologyKey: nvidia.com/gpu.clique\n    topologySpread: Required\n    topologySpreadKey: topology.kubernetes.io/zone\n",
        status: "True",
        reason: "Satisfied",
        why: "the 2 Instances run in 2 different domains of topology.kubernetes.io/zone.".into(),
        what: "Nothing: losing one domain leaves the Instances in the others serving.",
    }
}

/// The row's pods: the leaders with OME's constraint, the workers with the term beside their
/// leader; each Instance inside one rack, the two in different zones.
async fn instances_each_in_one_rack_across_zones(world: &World, racks: &Row) {
    let pods = world
        .kubectl(&[
            "get", "pods", "-n", "racks", "-l", "ome.io/inferenceservice=qwen3-0-6b", "--sort-by=.metadata.name", "-o",
            "custom-columns=NAME:.metadata.name,SPREAD-KEY:.spec.topologySpreadConstraints[*].topologyKey,WHEN:.spec.topologySpreadConstraints[*].whenUnsatisfiable,AFFINITY-KEY:.spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[*].topologyKey,NODE:.spec.nodeName",
        ])
        .await;
    let pods = table(&pods);
    let terms: Vec<&[String]> = pods.iter().map(|p| &p[..4]).collect();
    assert_eq!(
        terms,
        [
            &row(&["NAME", "SPREAD-KEY", "WHEN", "AFFINITY-KEY"])[..],
            &row(&[
                "qwen3-0-6b-engine-0-leader-0",
                "topology.kubernetes.io/zone",
                "DoNotSchedule",
                "<none>"
            ]),
            &row(&[
                "qwen3-0-6b-engine-0-worker-0",
                "<none>",
                "<none>",
                "nvidia.com/gpu.clique"
            ]),
            &row(&[
                "qwen3-0-6b-engine-1-leader-0",
                "topology.kubernetes.io/zone",
                "DoNotSchedule",
                "<none>"
            ]),
            &row(&[
                "qwen3-0-6b-engine-1-worker-0",
                "<none>",
                "<none>",
                "nvidia.com/gpu.clique"
            ]),
        ],
        "{pods:?}"
    );
    // Where they run: each Instance inside one rack, the two Instances in different zones.
    let placed = |pod: &[String]| {
        let shape = racks
            .nodes
            .iter()
            .find(|n| n.name == pod[4])
            .expect("one of the row's nodes");
        (shape.zone.clone().expect("a zone"), shape.rack.clone().expect("a rack"))
    };
    let (zone_0, rack_0) = placed(&pods[1]);
    let (zone_1, rack_1) = placed(&pods[3]);
    assert_eq!(
        placed(&pods[2]).1,
        rack_0,
        "Instance 0's worker in its leader's rack: {pods:?}"
    );
    assert_eq!(
        placed(&pods[4]).1,
        rack_1,
        "Instance 1's worker in its leader's rack: {pods:?}"
    );
    assert_ne!(zone_0, zone_1, "the Instances in different zones: {pods:?}");
}

/// The pods of the `added` row: their spread key, WHEN and node, as Step 2 shows them.
async fn added_pods(world: &World, namespace: &str) -> Vec<Vec<String>> {
    let columns = "custom-columns=NAME:.metadata.name,SPREAD-KEY:.spec.topologySpreadConstraints[*].topologyKey,\
                   WHEN:.spec.topologySpreadConstraints[*].whenUnsatisfiable,NODE:.spec.nodeName";
    table(&world.kubectl(&["get", "pods", "-n", namespace, "-o", columns]).await)
}

/// Until the policy reads the spread: policy-server (and the admission host, as it) answers a
/// replica's lookup from its cache for 5 s, so a surge admitted sooner gets the replica's old
/// settings (seen here: a surge without constraint). A pod of a third Instance, created as a dry
/// run, shows when it does.
async fn policy_reads_the_spread(world: &World, namespace: &str) {
    let probe = Pod::instance(namespace, "qwen3-0-6b", "engine", 2, "default", 0)
        .with("containers", json!([{"name": "ome-container", "image": "sglang"}]))
        .json()
        .to_string();
    eventually("the policy reading the spread", 30, || async {
        let args = ["create", "--dry-run=server", "-o", "json", "-f", "-"];
        let printed = live::kubectl_with(&world.admin, &args, Some(&probe)).await;
        let admitted: Value = serde_json::from_str(&printed.stdout).ok()?;
        admitted["spec"]["topologySpreadConstraints"].is_array().then_some(())
    })
    .await;
}

/// One Instance moved into zone-b, two serving throughout: Instance 2 replaced Instance 0 or 1
/// (the planner's choice) and carries the constraint. The Instance left in zone-a.
async fn one_instance_moved_to_zone_b(world: &World, namespace: &str) -> String {
    let serving = || async {
        let args = [
            "get",
            "pods",
            "-n",
            namespace,
            "-o",
            "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}",
        ];
        let printed = live::kubectl_with(&world.admin, &args, None).await.stdout;
        printed.lines().filter(|l| *l == "True").count()
    };
    let moved = eventually("an Instance in zone-b", 180, || async {
        let ready = serving().await;
        assert!(ready >= 2, "serving dropped to {ready}");
        let now = added_pods(world, namespace).await;
        (now.len() == 3 && now.iter().any(|p| p[3] == "added-b1")).then_some(now)
    })
    .await;
    // Instance 2 replaced Instance 0 or 1 (the planner's choice): it carries the constraint.
    let kept = moved
        .iter()
        .find(|p| p[3] == "added-a1")
        .expect("an Instance left in zone-a")[0]
        .clone();
    assert!(
        kept == "qwen3-0-6b-engine-0-default-0" || kept == "qwen3-0-6b-engine-1-default-0",
        "{moved:?}"
    );
    assert_eq!(
        moved,
        [
            row(&["NAME", "SPREAD-KEY", "WHEN", "NODE"]),
            row(&[&kept, "<none>", "<none>", "added-a1"]),
            row(&[
                "qwen3-0-6b-engine-2-default-0",
                "topology.kubernetes.io/zone",
                "DoNotSchedule",
                "added-b1"
            ]),
        ]
    );
    kept
}

/// One migration in all, of Instance `source`, completed.
async fn one_migration_completed(world: &World, namespace: &str, source: usize) {
    eventually("one migration, completed", 60, || async {
        let replica = live::replica(&world.admin, namespace).await?;
        let records = replica["status"]["migrations"].as_array().cloned().unwrap_or_default();
        assert_eq!(records.len(), 1, "one migration in all: {records:?}");
        (records[0]["phase"] == "Completed" && records[0]["sourceInstance"] == source).then_some(())
    })
    .await;
}
