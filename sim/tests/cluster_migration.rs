//! The seed's "Add the spread to a running InferenceService", then an Instance migration, on a
//! real kube-apiserver and kube-scheduler with kwok's nodes and the OME stand-in (OME's in-tree
//! terms on): the spread lands on the replica while the running Instances stay where they are, without
//! the constraint; a migration request moves one of them surge first: kube-scheduler places the
//! surge in the other zone by its constraint, and the source drains only once it is Ready, so
//! that two Instances serve throughout. Ignored unless a cluster is named:
//!
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/run/kubeconfig cargo test -p ome-spread-sim --test cluster_migration -- --ignored

mod support;

use std::time::Duration;

use ome_spread_sim::stand_in::ome::Terms;
use ome_spread_sim::support::api::INFERENCE_SERVICE;
use ome_spread_sim::support::nodes::{self, NodeShape};
use serde_json::{Value, json};
use support::{SERVICE, ZONE, eventually, row, seed_service};

const REQUEST: &str = "ome.io/migration-request-v1-5f0c7e36-1a2b-4c3d-8e9f-0a1b2c3d4e5f";

/// Two nodes in zone-a with the model Ready, one in zone-b; the model is Ready there only when
/// `model_in_b`.
fn layout(model_in_b: bool) -> Vec<NodeShape> {
    let mut b = NodeShape::gpu("gpu-node-3", "zone-b", "rack-b1");
    if !model_in_b {
        b.models.clear();
    }
    vec![
        NodeShape::gpu("gpu-node-1", "zone-a", "rack-a1"),
        NodeShape::gpu("gpu-node-2", "zone-a", "rack-a1"),
        b,
    ]
}

#[tokio::test]
#[ignore = "needs a cluster without OME (cluster/up.sh prints one) and kwok (make kwok-bin): set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn the_spread_added_leaves_running_instances_and_a_migration_surges_into_the_other_zone() {
    let run = async {
        // The model only in zone-a: without a spread, both Instances run there.
        let cluster = support::cluster(&layout(false), Terms::InTree).await;
        let mut service = seed_service();
        let engine = &mut service["spec"]["engine"];
        engine.as_object_mut().map(|e| e.remove("topologySpread"));
        engine.as_object_mut().map(|e| e.remove("topologySpreadKey"));
        cluster.apply(INFERENCE_SERVICE, &service).await;
        cluster.wait_ready(90).await;
        let before = cluster.pods().await;
        let uids: Vec<Value> = before.iter().map(|p| p["metadata"]["uid"].clone()).collect();
        let nodes_before: Vec<String> = before.iter().map(|p| row(p).3).collect();
        let mut sorted = nodes_before.clone();
        sorted.sort();
        assert_eq!(sorted, ["gpu-node-1", "gpu-node-2"]);

        // The spread added: the replica carries it, and once OME has acted on it (its status
        // observes the replica's generation), the running pods are as they were.
        spread_added_leaves_the_pods(&cluster, &uids, &nodes_before).await;

        // The model arrives in zone-b; Instance 1 is asked to move there.
        nodes::create_nodes(&cluster.client, &layout(true))
            .await
            .expect("the model in zone-b");
        let request = json!({"schemaVersion": "v1", "component": "engine", "instance": 1, "from_node": nodes_before[1],
            "hint_target_nodes": ["gpu-node-3"], "reason": "spread", "requested_at": "2026-12-01T10:00:00Z",
            "requested_by": "ome-spread"});
        cluster.request_migration(REQUEST, &request).await;

        // Surge, then drain: never fewer than two Instances serving.
        migration_completes_two_serving(&cluster, &nodes_before[1]).await;

        // Instance 0 stays as it was; Instance 2 carries OME's constraint, in zone-b.
        moved_into_zone_b(&cluster, &nodes_before[0]).await;
        cluster.clean_up().await;
    };
    tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the migration within 5 minutes");
}

/// The spread added to the service: once OME has acted on it, the running pods (`uids`, on
/// `nodes_before`) are as they were, without OME's constraint.
async fn spread_added_leaves_the_pods(cluster: &support::Cluster, uids: &[Value], nodes_before: &[String]) {
    cluster.apply(INFERENCE_SERVICE, &seed_service()).await;
    eventually("OME acting on the spread", 30, || async {
        let replica = cluster.replica().await?;
        let spread = replica["spec"]["topologySpread"] == "Required" && replica["spec"]["topologySpreadKey"] == ZONE;
        let observed = replica["status"]["observedGeneration"] == replica["metadata"]["generation"];
        (spread && observed).then_some(())
    })
    .await;
    let after = cluster.pods().await;
    let kept: Vec<(String, String, String, String)> = after
        .iter()
        .map(|p| {
            let (name, key, when, node, _, _) = row(p);
            (name, key, when, node)
        })
        .collect();
    let predating = |name: &str, node: &str| {
        (
            name.to_owned(),
            "<none>".to_owned(),
            "<none>".to_owned(),
            node.to_owned(),
        )
    };
    assert_eq!(
        kept,
        [
            predating("qwen3-0-6b-engine-0-default-0", &nodes_before[0]),
            predating("qwen3-0-6b-engine-1-default-0", &nodes_before[1])
        ]
    );
    assert_eq!(
        after.iter().map(|p| p["metadata"]["uid"].clone()).collect::<Vec<_>>(),
        uids
    );
}

/// The migration of Instance 1 (on `from_node`) completes, two Instances serving throughout, and
/// its request is taken off.
async fn migration_completes_two_serving(cluster: &support::Cluster, from_node: &str) {
    let fewest = std::cell::Cell::new(usize::MAX);
    let record = eventually("the migration completed", 90, || async {
        let pods = cluster.pods().await;
        let serving = pods
            .iter()
            .filter(|p| p["metadata"]["deletionTimestamp"].is_null() && row(p).5)
            .count();
        fewest.set(fewest.get().min(serving));
        let replica = cluster.replica().await?;
        let record = replica["status"]["migrations"].as_array()?.first()?.clone();
        matches!(record["phase"].as_str(), Some("Completed" | "Failed")).then_some(record)
    })
    .await;
    assert_eq!(fewest.get(), 2, "two Instances serve throughout");
    assert_eq!(
        (
            &record["phase"],
            &record["sourceInstance"],
            &record["surgeInstance"],
            &record["fromNode"],
            &record["message"]
        ),
        (
            &json!("Completed"),
            &json!(1),
            &json!(2),
            &json!(from_node),
            &Value::Null
        )
    );
    assert_eq!(
        cluster.service().await["metadata"]["annotations"].get(REQUEST),
        None,
        "the request is taken off"
    );
}

/// Instance 0 as it was, on `first_node`; Instance 2, OME's constraint on it, in zone-b; the
/// stand-in's and the scheduler's Events.
async fn moved_into_zone_b(cluster: &support::Cluster, first_node: &str) {
    let pods = eventually("the source gone", 30, || async {
        let pods = cluster.pods().await;
        (pods.len() == 2).then_some(pods)
    })
    .await;
    let rows: Vec<_> = pods.iter().map(row).collect();
    let pod = |name: &str, key: &str, when: &str, node: &str| {
        (
            name.to_owned(),
            key.to_owned(),
            when.to_owned(),
            node.to_owned(),
            "Running".to_owned(),
            true,
        )
    };
    assert_eq!(
        rows,
        [
            pod("qwen3-0-6b-engine-0-default-0", "<none>", "<none>", first_node),
            pod("qwen3-0-6b-engine-2-default-0", ZONE, "DoNotSchedule", "gpu-node-3")
        ]
    );
    assert_eq!(cluster.zone_of("gpu-node-3").await, "zone-b");
    let events = cluster.events().await;
    let uuid = &REQUEST["ome.io/migration-request-v1-".len()..];
    for expected in [
        (
            SERVICE.to_owned(),
            "MigrationRequestAccepted".to_owned(),
            "ome-stand-in".to_owned(),
            format!("migration request {uuid} accepted"),
        ),
        (
            SERVICE.to_owned(),
            "MigrationCompleted".to_owned(),
            "ome-stand-in".to_owned(),
            format!("migration {uuid} completed"),
        ),
        (
            "qwen3-0-6b-engine-2-default-0".to_owned(),
            "Scheduled".to_owned(),
            "default-scheduler".to_owned(),
            "Successfully assigned spread-demo/qwen3-0-6b-engine-2-default-0 to gpu-node-3".to_owned(),
        ),
    ] {
        assert!(events.contains(&expected), "{expected:?} in {events:#?}");
    }
}
