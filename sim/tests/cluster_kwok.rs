//! kwok on the real kube-apiserver and kube-scheduler, as the cluster benchmarks run it
//! (`cluster/kwok-up.sh`, its stages in cluster/kwok/stages.yaml): 30 nodes in 3 zones of 2 racks,
//! labelled as OME's GPU nodes (zone, NVLink clique, GPU present, the model Ready) with 8 GPUs
//! each, become Ready; kube-scheduler places 60 pods of OME's shape, each with OME's
//! `ome.io/serving` readiness gate and 4 GPUs, which fill every node exactly; kwok starts each
//! (Running, Ready, the gate True), and the one pod more finds no room. Then a pod deleted is gone
//! at once, with no kubelet to confirm it. Ignored unless a cluster is named (and kwok built by
//! `make kwok-bin`):
//!
//!   cluster/up.sh target/cluster/run
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/run/kubeconfig cargo test -p ome-spread-sim --test cluster_kwok -- --ignored
//!   cluster/down.sh target/cluster/run
//!
//! The test starts kwok itself (`kwok-up.sh --foreground`) and stops it, pass or fail; nothing
//! else may play kwok's nodes meanwhile (no `cluster/kwok-up.sh` in the background).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ome_spread_sim::stand_in::ome::render::SERVING_GATE;
use ome_spread_sim::support::live::{self, kubectl, kubectl_with};
use ome_spread_sim::support::objects::{Node, Pod};
use ome_spread_sim::support::wait::eventually;
use serde_json::{Value, json};

const NAMESPACE: &str = "kwok-smoke";
/// On the test's nodes, to find them again (and remove them, pass or fail).
const SMOKE: &str = "ome-spread.io/smoke";
const ZONES: [&str; 3] = ["zone-a", "zone-b", "zone-c"];
const RACKS_PER_ZONE: usize = 2;
const NODES_PER_RACK: usize = 5;
const NODES: usize = ZONES.len() * RACKS_PER_ZONE * NODES_PER_RACK;
const GPUS_PER_NODE: usize = 8;
const GPUS_PER_POD: usize = 4;
/// Exactly the GPUs of every node: each node holds two.
const PODS: usize = NODES * GPUS_PER_NODE / GPUS_PER_POD;
const MODEL: &str = "qwen3-0-6b";
/// The taint kwok's documentation puts on its nodes, so that only pods that tolerate it land there.
const KWOK_TAINT: &str = "kwok.x-k8s.io/node";

/// Node `index`: its zone and rack, by its place.
fn node(index: usize) -> Value {
    let zone = ZONES[index / (RACKS_PER_ZONE * NODES_PER_RACK)];
    let rack = format!("{zone}-rack-{}", index / NODES_PER_RACK % RACKS_PER_ZONE + 1);
    let name = format!("kwok-node-{index}");
    let room = json!({"nvidia.com/gpu": GPUS_PER_NODE.to_string(), "cpu": "128", "memory": "1Ti", "pods": "110"});
    let mut node = Node::named(&name)
        .labels(json!({
            "kubernetes.io/hostname": name, "type": "kwok", SMOKE: "kwok",
            "topology.kubernetes.io/zone": zone, "nvidia.com/gpu.clique": rack, "nvidia.com/gpu.present": "true",
            format!("models.ome.io/clusterbasemodel.{MODEL}"): "Ready"}))
        .spec(json!({"taints": [{"key": KWOK_TAINT, "value": "fake", "effect": "NoSchedule"}]}))
        .allocatable(room.clone())
        .json();
    // kwok plays the nodes so annotated (kwok-up.sh's selector), and keeps the room they come with.
    node["metadata"]["annotations"] = json!({KWOK_TAINT: "fake"});
    node["status"]["capacity"] = room;
    node
}

/// Instance `index` of the engine, one pod, as OME renders it: its readiness gate, its GPUs, and
/// the toleration of kwok's nodes.
fn pod(index: usize) -> Value {
    let gpus = GPUS_PER_POD.to_string();
    let resources = json!({"nvidia.com/gpu": gpus, "cpu": "4", "memory": "32Gi"});
    Pod::instance(NAMESPACE, MODEL, "engine", index, "default", 0)
        .with(
            "containers",
            json!([{"name": "ome-container", "image": "docker.io/lmsysorg/sglang:v0.5.5",
                "resources": {"requests": resources, "limits": resources}}]),
        )
        .with("readinessGates", json!([{"conditionType": SERVING_GATE}]))
        .with(
            "tolerations",
            json!([{"key": KWOK_TAINT, "operator": "Exists", "effect": "NoSchedule"}]),
        )
        .json()
}

fn list(items: Vec<Value>) -> String {
    json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string()
}

async fn get(admin: &Path, args: &[&str]) -> Vec<Value> {
    let printed = kubectl(admin, &[args, &["-o", "json"]].concat()).await;
    let list: Value = serde_json::from_str(&printed).expect("kubectl's JSON");
    list["items"].as_array().cloned().unwrap_or_default()
}

fn condition<'a>(object: &'a Value, kind: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn is_true(object: &Value, kind: &str) -> bool {
    condition(object, kind).is_some_and(|c| c["status"] == "True")
}

/// Started by kwok: Running with one IP, Ready, the gate True, and placed (PodScheduled).
fn started(pod: &Value) -> bool {
    pod["status"]["phase"] == "Running"
        && pod["status"]["podIP"].is_string()
        && pod["status"]["podIPs"] == json!([{"ip": pod["status"]["podIP"]}])
        && ["PodScheduled", "Ready", SERVING_GATE]
            .iter()
            .all(|kind| is_true(pod, kind))
}

/// The test's nodes and namespace removed: an earlier run's first, and this run's when it ends,
/// pass or fail (the other cluster suites must not see 30 more nodes).
struct Leftovers(PathBuf);

impl Leftovers {
    fn remove(&self) {
        let selector = format!("{SMOKE}=kwok");
        // Not waited for: none has a finalizer, so each DELETE removes it (kubectl's wait would
        // poll for seconds).
        let nodes = ["delete", "nodes", "-l", &selector, "--ignore-not-found", "--wait=false"];
        let namespace = live::namespace_removal(NAMESPACE);
        for args in namespace.iter().map(Vec::as_slice).chain([&nodes[..]]) {
            let printed = live::kubectl_blocking(&self.0, args, None);
            if !printed.ok && !printed.stderr.contains("NotFound") {
                eprintln!("kubectl {}: {}", args.join(" "), printed.stderr);
            }
        }
    }
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        self.remove();
    }
}

#[tokio::test]
#[ignore = "needs a cluster (cluster/up.sh) and kwok (make kwok-bin): set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn kwoks_nodes_are_ready_and_the_pods_kube_scheduler_places_on_them_run_ready_with_omes_gate() {
    let Some(admin) = live::kubeconfig() else {
        return;
    };
    let whole = Instant::now();
    let leftovers = Leftovers(admin.clone());
    leftovers.remove();
    let test = async {
        let _kwok = live::kwok(&admin).await;
        eprintln!("time: kwok watching after {:.1} s", whole.elapsed().as_secs_f64());
        live::fresh_namespace(&admin, NAMESPACE).await;

        let nodes = nodes_ready(&admin).await;
        // No node Leases: kwok-up.sh turns them off.
        let leases = kubectl(&admin, &["get", "leases", "-n", "kube-node-lease", "-o", "name"]).await;
        assert!(!leases.contains("kwok-node-"), "node Leases: {leases}");

        // One pod more than the nodes hold.
        let start = Instant::now();
        let created = kubectl_with(
            &admin,
            &["create", "-f", "-"],
            Some(&list((0..=PODS).map(pod).collect())),
        )
        .await;
        assert!(created.ok, "the pods: {}", created.stderr);
        let pods = eventually(
            &format!("{PODS} pods Running and Ready, one Unschedulable"),
            120,
            || async {
                let pods = get(&admin, &["get", "pods", "-n", NAMESPACE]).await;
                let running = pods.iter().filter(|p| started(p)).count();
                let unschedulable = pods
                    .iter()
                    .filter(|p| condition(p, "PodScheduled").is_some_and(|c| c["reason"] == "Unschedulable"))
                    .count();
                (running == PODS && unschedulable == 1).then_some(pods)
            },
        )
        .await;
        eprintln!(
            "time: {PODS} pods placed and Running, Ready after {:.1} s",
            start.elapsed().as_secs_f64()
        );

        // Every node full, two pods each; each zone 20.
        every_node_full(&nodes, &pods);

        // A pod deleted is gone, kwok confirming it as a kubelet would.
        let start = Instant::now();
        let first = format!("{MODEL}-engine-0-default-0");
        kubectl(&admin, &["delete", "pod", &first, "-n", NAMESPACE, "--wait=false"]).await;
        eventually(&format!("{first} gone"), 60, || async {
            let printed = kubectl_with(&admin, &["get", "pod", &first, "-n", NAMESPACE], None).await;
            (!printed.ok && printed.stderr.contains("NotFound")).then_some(())
        })
        .await;
        eprintln!("time: a pod deleted gone after {:.1} s", start.elapsed().as_secs_f64());
        eprintln!("time: whole {:.1} s", whole.elapsed().as_secs_f64());
    };
    tokio::time::timeout(Duration::from_secs(300), test)
        .await
        .expect("the smoke test within 5 minutes");
}

/// The smoke test's nodes created: Ready and schedulable within a minute, their room and kwok's
/// taint kept (the API server's not-ready taint off). The nodes.
async fn nodes_ready(admin: &std::path::Path) -> Vec<Value> {
    let start = Instant::now();
    let created = kubectl_with(
        admin,
        &["create", "-f", "-"],
        Some(&list((0..NODES).map(node).collect())),
    )
    .await;
    assert!(created.ok, "the nodes: {}", created.stderr);
    let selector = format!("{SMOKE}=kwok");
    let nodes = eventually(&format!("{NODES} kwok nodes Ready and schedulable"), 60, || async {
        let nodes = get(admin, &["get", "nodes", "-l", &selector]).await;
        let schedulable = |node: &Value| {
            is_true(node, "Ready")
                && node["spec"]["taints"]
                    .as_array()
                    .is_some_and(|taints| taints.iter().all(|t| t["key"] == KWOK_TAINT))
        };
        (nodes.len() == NODES && nodes.iter().all(schedulable)).then_some(nodes)
    })
    .await;
    eprintln!("time: {NODES} nodes Ready after {:.1} s", start.elapsed().as_secs_f64());
    for node in &nodes {
        let name = &node["metadata"]["name"];
        assert_eq!(
            node["status"]["allocatable"]["nvidia.com/gpu"], "8",
            "{name}: its room kept"
        );
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": KWOK_TAINT, "value": "fake", "effect": "NoSchedule"}]),
            "{name}: kwok's taint kept, the API server's not-ready taint off"
        );
    }
    nodes
}

/// Every node full, two pods each; each zone 20; the one pod more Pending, for want of a GPU.
fn every_node_full(nodes: &[Value], pods: &[Value]) {
    let zone_of: BTreeMap<&str, &str> = nodes
        .iter()
        .map(|n| {
            let labels = &n["metadata"]["labels"];
            (
                labels["kubernetes.io/hostname"].as_str().unwrap_or_default(),
                labels["topology.kubernetes.io/zone"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    let mut per_node: BTreeMap<&str, usize> = BTreeMap::new();
    let mut per_zone: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in pods.iter().filter(|p| started(p)) {
        let node = pod["spec"]["nodeName"].as_str().expect("bound");
        *per_node.entry(node).or_default() += 1;
        *per_zone.entry(zone_of[node]).or_default() += 1;
    }
    assert_eq!(per_node.len(), NODES, "{per_node:?}");
    assert!(per_node.values().all(|&n| n == 2), "{per_node:?}");
    assert_eq!(per_zone, ZONES.iter().map(|&z| (z, PODS / ZONES.len())).collect());
    let pending: Vec<&Value> = pods.iter().filter(|p| !started(p)).collect();
    let message = condition(pending[0], "PodScheduled").expect("the scheduler's word")["message"].to_string();
    assert!(
        pending[0]["status"]["phase"] == "Pending" && message.contains("Insufficient nvidia.com/gpu"),
        "{message}"
    );
}
