//! Room as the controller counts it (the room watch's trim, then the core's count) against the
//! real kube-scheduler's fit, on a live cluster named by `OME_SPREAD_E2E_KUBECONFIG` (`make
//! e2e-cluster` starts one). Ignored unless asked for:
//!
//!   OME_SPREAD_E2E_KUBECONFIG=~/.kube/config cargo test -p ome-spread-controller --test room -- --ignored
//!
//! On each of four nodes (8 GPUs, 16 CPUs) a pod of another workload holds room by one of the
//! scheduler's rules beyond its containers' requests: an init container, sidecars, pod-level
//! requests, a RuntimeClass's overhead. The probes that kube-scheduler then binds there, each of
//! 1 GPU and 2 CPUs, are exactly as many as the count, and the next one is Unschedulable for want
//! of the resource the count ran out of. It works in the namespace `ome-spread-e2e-room`, on nodes
//! `room-*` and the RuntimeClass `ome-spread-e2e-overhead`, all deleted at the end, pass or fail.

use ome_spread_sim::support::{live, wait::eventually};

use std::path::Path;

use futures::FutureExt;
use kube::Client;
use ome_spread_core::pod::Pod;

use ome_spread_core::room::{self, Resources};
use ome_spread_sim::support::nodes::{self, NodeShape};
use ome_spread_sim::support::objects::read;
use serde_json::{Value, json};

const NAMESPACE: &str = "ome-spread-e2e-room";
const RUNTIME_CLASS: &str = "ome-spread-e2e-overhead";

/// A node's holder: the pod of another workload that takes room there, the probes the count
/// expects to fit beside it, and the resource the next probe lacks.
struct Case {
    node: &'static str,
    holder: Value,
    fits: usize,
    lacking: &'static str,
}

fn container(name: &str, requests: Value) -> Value {
    json!({"name": name, "image": "trainer", "resources": {"requests": requests, "limits": requests}})
}

/// Written by hand from the scheduler's rules (k8s.io/component-helpers `PodRequests`), beside
/// what the containers' requests alone would give.
fn cases() -> Vec<Case> {
    let cpu = |cpu: &str| json!({"cpu": cpu});
    let mut sidecar = container("proxy", cpu("6"));
    sidecar["restartPolicy"] = json!("Always");
    vec![
        // fetch holds 6 GPUs while it runs: 2 left (the containers alone: 6).
        Case {
            node: "room-init",
            holder: json!({"initContainers": [container("fetch", json!({"nvidia.com/gpu": "6"}))],
                "containers": [container("train", json!({"nvidia.com/gpu": "2", "cpu": "1"}))]}),
            fits: 2,
            lacking: "nvidia.com/gpu",
        },
        // 2 + the proxy's 6 = 8 CPUs, but init-2 runs beside the proxy: 3 + 6 = 9. 7 left: 3
        // probes (the containers alone: 7; with the sidecar summed and init ignored: 4).
        Case {
            node: "room-sidecars",
            holder: json!({"initContainers": [container("init-1", cpu("4")), sidecar, container("init-2", cpu("3"))],
                "containers": [container("train", cpu("2"))]}),
            fits: 3,
            lacking: "cpu",
        },
        // The pod's own 9 CPUs in place of its container's 1: 7 left, 3 probes (else 7).
        Case {
            node: "room-pod-level",
            holder: json!({"resources": {"requests": cpu("9"), "limits": cpu("9")},
                "containers": [container("train", cpu("1"))]}),
            fits: 3,
            lacking: "cpu",
        },
        // 2 CPUs and the RuntimeClass's 3 of overhead: 11 left, 5 probes (else 7).
        Case {
            node: "room-overhead",
            holder: json!({"runtimeClassName": RUNTIME_CLASS, "containers": [container("train", cpu("2"))]}),
            fits: 5,
            lacking: "cpu",
        },
    ]
}

fn probe(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
            "containers": [container("probe", json!({"nvidia.com/gpu": "1", "cpu": "2"}))]}})
}

fn shape(node: &str) -> NodeShape {
    NodeShape {
        zone: None,
        rack: None,
        models: Vec::new(),
        gpus: 8,
        cpus: 16,
        ..NodeShape::gpu(node, "", "")
    }
}

#[tokio::test]
#[ignore = "needs a cluster with kube-scheduler: make e2e-cluster, or set OME_SPREAD_E2E_KUBECONFIG"]
async fn room_is_counted_as_kube_scheduler_fits_pods() {
    let Some(kubeconfig) = live::kubeconfig() else {
        return;
    };
    let client = live::client_of(&kubeconfig).await;
    // kwok makes the nodes Ready; the pods it starts there hold no more room than bound ones.
    let _kwok = live::kwok(&kubeconfig).await;
    clean_up(&kubeconfig).await;
    // The test's own failure is raised only after its nodes and pods are gone.
    let outcome = std::panic::AssertUnwindSafe(count_against_the_scheduler(&kubeconfig, &client))
        .catch_unwind()
        .await;
    clean_up(&kubeconfig).await;
    if let Err(failure) = outcome {
        std::panic::resume_unwind(failure);
    }
}

async fn count_against_the_scheduler(kubeconfig: &Path, client: &Client) {
    live::fresh_namespace(kubeconfig, NAMESPACE).await;
    let runtime_class = json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": RUNTIME_CLASS}, "handler": "runc", "overhead": {"podFixed": {"cpu": "3"}}});
    live::apply(kubeconfig, &runtime_class.to_string()).await;
    let cases = cases();
    let shapes: Vec<NodeShape> = cases.iter().map(|case| shape(case.node)).collect();
    nodes::create_nodes(client, &shapes).await.expect("the nodes");
    for case in &cases {
        let mut holder = probe(&format!("holder-{}", case.node), case.node);
        holder["spec"]
            .as_object_mut()
            .expect("spec")
            .extend(case.holder.as_object().cloned().expect("a spec"));
        live::apply(kubeconfig, &holder.to_string()).await;
    }
    let pods = eventually("every holder bound by kube-scheduler", 60, || async {
        let pods = listed(kubeconfig).await;
        (pods.len() == cases.len() && pods.iter().all(|pod| pod["spec"]["nodeName"].is_string())).then_some(pods)
    })
    .await;
    // Not vacuous: the API server kept the pod-level requests, and set the RuntimeClass's overhead.
    let holder = |node: &str| {
        pods.iter()
            .find(|pod| pod["spec"]["nodeName"] == node)
            .expect("its holder")
    };
    assert_eq!(
        holder("room-pod-level")["spec"]["resources"]["requests"],
        json!({"cpu": "9"})
    );
    assert_eq!(holder("room-overhead")["spec"]["overhead"], json!({"cpu": "3"}));

    let requested = room::requested(&trimmed(&pods)).expect("the API server's pods are readable");
    let probe_requests = Resources::of_pod(&read(&probe("probe", ""))).expect("a readable probe");
    for case in &cases {
        let node = live::kubectl(kubeconfig, &["get", "node", case.node, "-o", "json"]).await;
        let node: Value = serde_json::from_str(&node).expect("a node");
        let allocatable = Resources::from_quantities(&node["status"]["allocatable"])
            .expect("the API server's allocatable is readable");
        let counted = allocatable.slots(&requested[case.node], &probe_requests);
        assert_eq!(counted, case.fits, "the probes counted to fit on {}", case.node);
    }

    scheduler_agrees(kubeconfig, &cases).await;
}

/// As many probes as were counted to fit, and one more, on each case's node: kube-scheduler binds
/// the counted and refuses the one more, for the resource the case lacks.
async fn scheduler_agrees(kubeconfig: &Path, cases: &[Case]) {
    for case in cases {
        for index in 0..=case.fits {
            live::apply(
                kubeconfig,
                &probe(&format!("probe-{}-{index}", case.node), case.node).to_string(),
            )
            .await;
        }
    }
    for case in cases {
        let (bound, refused) = eventually(
            &format!("the probes on {} placed or refused", case.node),
            90,
            || async {
                let probes: Vec<Value> = listed(kubeconfig)
                    .await
                    .into_iter()
                    .filter(|pod| {
                        pod["metadata"]["name"]
                            .as_str()
                            .is_some_and(|n| n.starts_with(&format!("probe-{}-", case.node)))
                    })
                    .collect();
                let bound = probes.iter().filter(|pod| pod["spec"]["nodeName"] == case.node).count();
                let refused: Vec<String> = probes.iter().filter_map(unschedulable).collect();
                (bound + refused.len() == case.fits + 1).then_some((bound, refused))
            },
        )
        .await;
        assert_eq!(bound, case.fits, "the probes kube-scheduler bound to {}", case.node);
        let lacking = format!("1 Insufficient {}", case.lacking);
        assert!(
            refused[0].contains(&lacking),
            "on {}: {lacking} in {refused:?}",
            case.node
        );
    }
}

/// The message of a pod kube-scheduler found no room for.
fn unschedulable(pod: &Value) -> Option<String> {
    let conditions = pod["status"]["conditions"].as_array()?;
    let scheduled = conditions.iter().find(|c| c["type"] == "PodScheduled")?;
    (scheduled["status"] == "False" && scheduled["reason"] == "Unschedulable")
        .then(|| scheduled["message"].as_str().unwrap_or_default().to_owned())
}

async fn listed(kubeconfig: &Path) -> Vec<Value> {
    let list = live::kubectl(kubeconfig, &["get", "pods", "-n", NAMESPACE, "-o", "json"]).await;
    let list: Value = serde_json::from_str(&list).expect("a pod list");
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The pods as the controller's watch of pods trims them.
fn trimmed(pods: &[Value]) -> Vec<Pod> {
    pods.iter()
        .map(|pod| {
            let mut pod = read(pod);
            ome_spread_controller::pods::trim(&mut pod);
            pod
        })
        .collect()
}

/// The namespace (its pods deleted at once), the nodes and the RuntimeClass, gone.
async fn clean_up(kubeconfig: &Path) {
    for args in live::namespace_removal(NAMESPACE) {
        live::kubectl(kubeconfig, &args).await;
    }
    let nodes: Vec<&str> = cases().iter().map(|case| case.node).collect();
    let runtime_class = format!("runtimeclass/{RUNTIME_CLASS}");
    let nodes_named: Vec<String> = nodes.iter().map(|node| format!("node/{node}")).collect();
    let mut args = vec!["delete", "--ignore-not-found", &runtime_class];
    args.extend(nodes_named.iter().map(String::as_str));
    live::kubectl(kubeconfig, &args).await;
}
