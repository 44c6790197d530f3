use ome_spread_core::labels::REVISION_HASH;
use ome_spread_sim::stand_in::migration::{Placement, World};
use ome_spread_sim::stand_in::ome::cluster::Cluster;
use ome_spread_sim::stand_in::ome::{Terms, render};
use serde_json::{Value, json};

fn replica() -> Value {
    json!({"metadata": {"name": "qwen3-0-6b-engine", "namespace": "spread-demo"},
        "spec": {"parentRef": {"name": "qwen3-0-6b"}, "component": "engine", "topologySpread": "Required",
            "topologySpreadKey": "topology.kubernetes.io/zone",
            "runners": [{"name": "default", "size": 1, "template": {"spec": {"containers": [{"name": "ome-container"}]}}}]}})
}

/// The pod the model hands over: the source's name and labels at the surge's index.
fn surge() -> Value {
    json!({"metadata": {"name": "qwen3-0-6b-engine-2-default-0", "namespace": "spread-demo",
            "labels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default",
                "ome.io/instance-index": "2"}},
        "spec": {"containers": [{"name": "old"}], "tolerations": [{"key": "defaulted"}]},
        "status": {"phase": "Pending"}})
}

#[test]
fn the_surge_is_rendered_from_its_runners_template_with_omes_terms_and_the_hints_preferred() {
    let admitted = Cluster { terms: Terms::InTree }
        .admit(surge(), &replica(), &["gpu-node-3".to_owned()])
        .expect("admitted");
    assert_eq!(
        admitted["spec"],
        json!({"containers": [{"name": "ome-container"}],
            "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {
                    "ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}}}],
            "affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100,
                "preference": {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-node-3"]}]}}]}}})
    );
    assert_eq!(admitted["status"], Value::Null);
    assert_eq!(
        admitted["metadata"]["labels"][REVISION_HASH],
        json!(render::revision_hash(&replica()))
    );
    let bare = Cluster { terms: Terms::Webhook }
        .admit(surge(), &replica(), &[])
        .expect("admitted");
    assert_eq!(
        bare["spec"],
        json!({"containers": [{"name": "ome-container"}]}),
        "the webhook adds the terms"
    );
}

#[test]
fn the_surge_waits_with_the_schedulers_word_until_it_is_bound_and_ready() {
    let world = Cluster { terms: Terms::InTree };
    let mut pending = surge();
    pending["status"] = json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
        "reason": "Unschedulable", "message": "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]});
    let waiting = |why: &str| Placement::Waiting {
        why: why.into(),
        bound: Vec::new(),
    };
    assert_eq!(
        world.place(&[&pending], &[], &[]),
        waiting("0/2 nodes are available: 2 Insufficient nvidia.com/gpu.")
    );
    assert_eq!(
        world.place(&[&surge()], &[], &[]),
        waiting("pod qwen3-0-6b-engine-2-default-0 not placed yet")
    );
    let mut bound = surge();
    bound["spec"]["nodeName"] = json!("gpu-node-3");
    assert_eq!(
        world.place(&[&bound], &[], &[]),
        waiting("pod qwen3-0-6b-engine-2-default-0 on gpu-node-3 not Ready yet")
    );
    bound["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    assert_eq!(world.place(&[&bound], &[], &[]), Placement::Ready(Vec::new()));
    assert_eq!(world.place(&[], &[], &[]), waiting("its pods were not created"));
}
