//! The seed's Step 1 and Step 2 on a real kube-apiserver and kube-scheduler, with kwok and
//! the OME stand-in in place of kubelets and OME (OME's in-tree terms on, no webhook): the seed's
//! InferenceService becomes Ready with two Running pods on two nodes in different zones, placed
//! by kube-scheduler. Ignored unless a cluster is named:
//!
//!   cluster/up.sh target/cluster/run
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/run/kubeconfig cargo test -p ome-spread-sim --test cluster_seed -- --ignored
//!   cluster/down.sh target/cluster/run

mod support;

use std::time::Duration;

use ome_spread_sim::stand_in::ome::Terms;
use ome_spread_sim::support::api::INFERENCE_SERVICE;
use ome_spread_sim::support::nodes::layout;
use support::{row, seed_service};

#[tokio::test]
#[ignore = "needs a cluster without OME (cluster/up.sh prints one) and kwok (make kwok-bin): set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn the_seeds_service_is_ready_with_its_instances_in_two_zones_placed_by_kube_scheduler() {
    let run = async {
        let cluster = support::cluster(&layout("two-zones").expect("a layout"), Terms::InTree).await;
        cluster.apply(INFERENCE_SERVICE, &seed_service()).await;
        // Step 1: `kubectl wait --for=condition=Ready inferenceservice/qwen3-0-6b`.
        cluster.wait_ready(90).await;

        // Step 2, the replica: the settings in effect.
        let replica = cluster.replica().await.expect("the replica");
        let spec = &replica["spec"];
        assert_eq!(
            (
                &spec["topologySpread"],
                &spec["topologySpreadKey"],
                &spec["topologyKey"]
            ),
            (
                &"Required".into(),
                &"topology.kubernetes.io/zone".into(),
                &serde_json::Value::Null
            )
        );
        assert_eq!(
            (&replica["status"]["replicas"], &replica["status"]["readyReplicas"]),
            (&2.into(), &2.into())
        );

        // Step 2, the pods: one an Instance, each with OME's constraint; which Instance lands on
        // which node is the scheduler's choice.
        let pods = cluster.pods().await;
        let nodes = one_instance_a_pod_on_two_nodes(&pods);

        // Step 2, the nodes: in different zones.
        let mut zones = Vec::new();
        for node in &nodes {
            zones.push(cluster.zone_of(node).await);
        }
        zones.sort();
        assert_eq!(zones, ["zone-a", "zone-b"]);

        // kube-scheduler placed them (its Scheduled Event), not kwok or the stand-in.
        let events = cluster.events().await;
        for (pod, node) in ["qwen3-0-6b-engine-0-default-0", "qwen3-0-6b-engine-1-default-0"]
            .iter()
            .zip(&nodes)
        {
            let scheduled = (
                pod.to_string(),
                "Scheduled".to_owned(),
                "default-scheduler".to_owned(),
                format!("Successfully assigned spread-demo/{pod} to {node}"),
            );
            assert!(events.contains(&scheduled), "{scheduled:?} in {events:#?}");
        }
        cluster.clean_up().await;
    };
    tokio::time::timeout(Duration::from_secs(240), run)
        .await
        .expect("the seed within 4 minutes");
}

/// The seed's pods as Step 2 shows them: one an Instance, each with OME's constraint, Running and
/// Ready, on two nodes (which Instance on which node is the scheduler's choice): those nodes.
fn one_instance_a_pod_on_two_nodes(pods: &[serde_json::Value]) -> Vec<String> {
    let mut rows: Vec<_> = pods.iter().map(row).collect();
    let nodes: Vec<String> = rows.iter().map(|r| r.3.clone()).collect();
    for r in &mut rows {
        r.3 = "a node".into();
    }
    let pod = |name: &str| {
        (
            name.to_owned(),
            "topology.kubernetes.io/zone".to_owned(),
            "DoNotSchedule".to_owned(),
            "a node".to_owned(),
            "Running".to_owned(),
            true,
        )
    };
    assert_eq!(
        rows,
        [
            pod("qwen3-0-6b-engine-0-default-0"),
            pod("qwen3-0-6b-engine-1-default-0")
        ]
    );
    let mut sorted = nodes.clone();
    sorted.sort();
    assert_eq!(sorted, ["gpu-node-1", "gpu-node-2"]);
    nodes
}
