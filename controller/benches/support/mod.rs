//! The benchmarks' cluster (core/benches/support/cluster.rs), its pods shaped and sized as OME
//! v1.3 creates them: the repository's fixture leader (env, volumes, probes, readiness gates)
//! with each pod's own name, labels, owner, node, node selection and rendered terms.

#![allow(dead_code)] // each benchmark takes its part

use serde_json::{Value, json};

#[path = "../../../core/benches/support/cluster.rs"]
#[allow(dead_code)] // the core's benchmarks read the rest of it
pub mod cluster;

/// The cluster's pods as OME creates them, Running where they are placed.
pub fn ome_pods(cluster: &cluster::Cluster) -> Vec<Value> {
    let request = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/data/requests/deepseek-v3-engine-0-leader-0.json"
    ))
    .expect("the fixture");
    let request: Value = serde_json::from_str(&request).expect("JSON");
    let fixture = &request["request"]["object"];
    cluster
        .pods
        .iter()
        .map(|shape| {
            let mut pod = fixture.clone();
            pod["metadata"]["name"] = shape["metadata"]["name"].clone();
            pod["metadata"]["namespace"] = shape["metadata"]["namespace"].clone();
            pod["metadata"]["labels"] = shape["metadata"]["labels"].clone();
            for field in ["nodeName", "nodeSelector", "tolerations", "topologySpreadConstraints"] {
                pod["spec"][field] = shape["spec"][field].clone();
            }
            // Its controller is its own component's replica, as OME sets it.
            let service = shape["metadata"]["labels"]["ome.io/inferenceservice"]
                .as_str()
                .unwrap_or_default();
            pod["metadata"]["ownerReferences"][0]["name"] = json!(format!("{service}-engine"));
            pod["status"] = json!({"phase": "Running"});
            pod
        })
        .collect()
}

/// `count` pods of training jobs, eight GPUs each, on the cluster's nodes (the models' too).
pub fn other_pods(cluster: &cluster::Cluster, count: usize) -> Vec<Value> {
    let pod = |p: usize| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("trainer-{p}"), "namespace": "training", "labels": {"job-name": format!("job-{}", p / 8)}},
            "spec": {"nodeName": format!("gpu-node-{}", p % cluster.nodes.len()),
                "containers": [{"name": "trainer", "image": "trainer", "resources": {"requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Running"}})
    };
    (0..count).map(pod).collect()
}
