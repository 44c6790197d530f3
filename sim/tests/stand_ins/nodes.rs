use ome_spread_sim::support::nodes::*;
use serde_json::json;

#[test]
fn the_two_zones_layout_is_the_seeds_nodes() {
    let nodes = layout("two-zones").expect("a layout");
    let shown: Vec<(&str, Option<&str>, Option<&str>)> = nodes
        .iter()
        .map(|n| (n.name.as_str(), n.zone.as_deref(), n.rack.as_deref()))
        .collect();
    assert_eq!(
        shown,
        [
            ("gpu-node-1", Some("zone-a"), Some("rack-a1")),
            ("gpu-node-2", Some("zone-b"), Some("rack-b1"))
        ]
    );
    let room = json!({"nvidia.com/gpu": "1", "cpu": "16", "memory": "64Gi", "pods": "110"});
    assert_eq!(
        node(&nodes[0]),
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1",
            "labels": {
                "kubernetes.io/hostname": "gpu-node-1", "models.ome.io/clusterbasemodel.qwen3-0-6b": "Ready",
                "nvidia.com/gpu.clique": "rack-a1", "e2e.spread.ome.io/node": "true",
                "topology.kubernetes.io/zone": "zone-a"},
            "annotations": {"kwok.x-k8s.io/node": "fake"}},
            "spec": {}, "status": {"capacity": room, "allocatable": room}})
    );
}

#[test]
fn the_racks_layout_has_two_nodes_in_each_of_two_racks_of_two_zones() {
    let nodes = layout("racks").expect("a layout");
    let shown: Vec<String> = nodes
        .iter()
        .map(|n| {
            format!(
                "{} {} {}",
                n.name,
                n.zone.as_deref().unwrap_or("-"),
                n.rack.as_deref().unwrap_or("-")
            )
        })
        .collect();
    assert_eq!(
        shown,
        [
            "gpu-node-1 zone-a rack-a1",
            "gpu-node-2 zone-a rack-a1",
            "gpu-node-3 zone-a rack-a2",
            "gpu-node-4 zone-a rack-a2",
            "gpu-node-5 zone-b rack-b1",
            "gpu-node-6 zone-b rack-b1",
            "gpu-node-7 zone-b rack-b2",
            "gpu-node-8 zone-b rack-b2"
        ]
    );
    assert_eq!(layout("three-zones").map(|n| n.len()), Some(3));
    assert_eq!(layout("one-zone"), None);
}
