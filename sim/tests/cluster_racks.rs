//! The seed's leader-and-workers example on a real kube-apiserver and kube-scheduler, with the
//! kwok's nodes and the OME stand-in (OME's in-tree terms on): `topologyKey` on the rack label keeps each
//! Instance's worker in its leader's rack, `topologySpreadKey` on the zone spreads the Instances
//! across zones. The `racks` layout: 2 zones x 2 racks x 2 nodes of 1 GPU. Ignored unless a
//! cluster is named:
//!
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/run/kubeconfig cargo test -p ome-spread-sim --test cluster_racks -- --ignored

mod support;

use std::time::Duration;

use ome_spread_sim::stand_in::ome::Terms;
use ome_spread_sim::support::api::{self, INFERENCE_SERVICE, NODE};
use ome_spread_sim::support::nodes::{RACK, layout};
use serde_json::json;
use support::{ZONE, row, seed_service};

#[tokio::test]
#[ignore = "needs a cluster without OME (cluster/up.sh prints one) and kwok (make kwok-bin): set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn each_instance_keeps_to_one_rack_and_the_instances_spread_across_zones() {
    let run = async {
        let cluster = support::cluster(&layout("racks").expect("a layout"), Terms::InTree).await;
        let mut service = seed_service();
        service["spec"]["engine"]["topologyKey"] = json!(RACK);
        // A leader and a worker make each Instance two pods (OME's `components/engine.go`).
        service["spec"]["engine"]["leader"] = json!({});
        service["spec"]["engine"]["worker"] = json!({"size": 1});
        cluster.apply(INFERENCE_SERVICE, &service).await;
        cluster.wait_ready(120).await;

        let pods = cluster.pods().await;
        let rows: Vec<_> = pods.iter().map(row).collect();
        let shown: Vec<(&str, &str, &str, &str, bool)> = rows
            .iter()
            .map(|r| (r.0.as_str(), r.1.as_str(), r.2.as_str(), r.4.as_str(), r.5))
            .collect();
        assert_eq!(
            shown,
            [
                ("qwen3-0-6b-engine-0-leader-0", ZONE, "DoNotSchedule", "Running", true),
                ("qwen3-0-6b-engine-0-worker-0", "<none>", "<none>", "Running", true),
                ("qwen3-0-6b-engine-1-leader-0", ZONE, "DoNotSchedule", "Running", true),
                ("qwen3-0-6b-engine-1-worker-0", "<none>", "<none>", "Running", true)
            ]
        );
        // (zone, rack) of each pod's node.
        let mut places = Vec::new();
        for r in &rows {
            let node = api::get(&cluster.client, NODE, "", &r.3)
                .await
                .expect("a node")
                .expect("there");
            let labels = &node["metadata"]["labels"];
            places.push((
                labels[ZONE].as_str().unwrap_or_default().to_owned(),
                labels[RACK].as_str().unwrap_or_default().to_owned(),
            ));
        }
        assert_eq!(places[0], places[1], "Instance 0's worker in its leader's rack");
        assert_eq!(places[2], places[3], "Instance 1's worker in its leader's rack");
        let mut zones = vec![places[0].0.clone(), places[2].0.clone()];
        zones.sort();
        assert_eq!(zones, ["zone-a", "zone-b"]);
        let mut nodes: Vec<&str> = rows.iter().map(|r| r.3.as_str()).collect();
        nodes.sort();
        nodes.dedup();
        assert_eq!(nodes.len(), 4, "one pod a node (1 GPU each)");
        cluster.clean_up().await;
    };
    tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the leaders and workers within 5 minutes");
}
