use ome_spread_sim::support::objects::*;
use serde_json::json;

#[test]
fn a_leaders_pod_is_named_and_labelled_as_ome_names_and_labels_it() {
    let pod = Pod::instance("spread-demo", "qwen3", "engine", 2, "leader", 0)
        .on("gpu-node-1")
        .container("engine", json!({"nvidia.com/gpu": "1"}))
        .json();
    assert_eq!(
        pod,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "qwen3-engine-2-leader-0", "namespace": "spread-demo",
                "labels": {"ome.io/managed-by": "OMENative", "ome.io/inferenceservice": "qwen3",
                    "component": "engine", "ome.io/runner": "leader", "ome.io/instance-index": "2",
                    "ome.io/instance-incarnation": "1", "ome.io/pod-ordinal": "0",
                    "ome.io/revision-hash": "6d4f8b9c7", "scheduling.x-k8s.io/pod-group": "qwen3-engine-2"}},
            "spec": {"nodeName": "gpu-node-1",
                "containers": [{"name": "engine", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}})
    );
}

#[test]
fn another_workloads_pod_and_a_node_carry_what_they_were_given() {
    let pod = Pod::named("batch", "train-0")
        .label("app", "train")
        .on("gpu-node-2")
        .container("trainer", json!({"nvidia.com/gpu": "1"}))
        .running()
        .json();
    assert_eq!(
        pod,
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "train-0", "namespace": "batch", "labels": {"app": "train"}},
            "spec": {"nodeName": "gpu-node-2",
                "containers": [{"name": "trainer", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running"}})
    );
    let node = Node::named("gpu-node-4")
        .label("topology.kubernetes.io/zone", "zone-c")
        .spec(json!({"unschedulable": true}))
        .allocatable(json!({"nvidia.com/gpu": "2"}))
        .json();
    assert_eq!(
        node,
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-node-4", "labels": {"topology.kubernetes.io/zone": "zone-c"}},
            "spec": {"unschedulable": true}, "status": {"allocatable": {"nvidia.com/gpu": "2"}}})
    );
}

#[test]
fn a_replica_is_named_for_its_service_and_component() {
    let spread = json!({"topologySpread": "Required", "topologySpreadKey": "topology.kubernetes.io/zone"});
    assert_eq!(
        replica("spread-demo", "qwen3", "engine", &spread),
        json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": "qwen3-engine", "namespace": "spread-demo"},
            "spec": {"topologySpread": "Required", "topologySpreadKey": "topology.kubernetes.io/zone",
                "parentRef": {"name": "qwen3"}, "component": "engine"}})
    );
}
