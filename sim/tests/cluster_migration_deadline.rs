//! A migration whose surge kube-scheduler cannot place, on a real kube-apiserver and
//! kube-scheduler with kwok's nodes and the OME stand-in (OME's in-tree terms on, a 15-second
//! deadline): the record fails at its deadline with the scheduler's own message, the surge's pod
//! is deleted, and the source keeps serving where it was. Ignored unless a cluster is named:
//!
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/run/kubeconfig cargo test -p ome-spread-sim --test cluster_migration_deadline -- --ignored

mod support;

use std::time::Duration;

use jiff::SignedDuration;
use ome_spread_sim::stand_in::ome::{self, Terms};
use ome_spread_sim::support::api::INFERENCE_SERVICE;
use ome_spread_sim::support::nodes::layout;
use serde_json::json;
use support::{SERVICE, eventually, row, seed_service};

const REQUEST: &str = "ome.io/migration-request-v1-0d1e2f3a-4b5c-4d6e-8f70-8192a3b4c5d6";

#[tokio::test]
#[ignore = "needs a cluster without OME (cluster/up.sh prints one) and kwok (make kwok-bin): set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn a_surge_kube_scheduler_cannot_place_fails_at_the_deadline_with_its_message() {
    let run = async {
        let options = ome::Options {
            terms: Terms::InTree,
            interval: Duration::from_millis(500),
            deadline: SignedDuration::from_secs(15),
            give_up: None,
        };
        let cluster = support::cluster_with(&layout("two-zones").expect("a layout"), options).await;
        cluster.apply(INFERENCE_SERVICE, &seed_service()).await;
        cluster.wait_ready(90).await;
        let before: Vec<_> = cluster.pods().await.iter().map(row).collect();

        // No room anywhere for a third engine pod.
        let request = json!({"schemaVersion": "v1", "component": "engine", "instance": 1, "from_node": before[1].3,
            "hint_target_nodes": [before[0].3], "reason": "spread", "requested_at": "2026-12-01T10:00:00Z",
            "requested_by": "ome-spread"});
        cluster.request_migration(REQUEST, &request).await;
        let record = eventually("the migration failed", 60, || async {
            let replica = cluster.replica().await?;
            let record = replica["status"]["migrations"].as_array()?.first()?.clone();
            (record["phase"] == "Failed").then_some(record)
        })
        .await;
        assert_eq!(
            (&record["sourceInstance"], &record["surgeInstance"], &record["message"]),
            (
                &json!(1),
                &json!(2),
                &json!(
                    "surge instance 2 unschedulable: 0/2 nodes are available: 2 Insufficient cpu, 2 Insufficient nvidia.com/gpu. \
                     no new claims to deallocate, preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
                )
            )
        );
        let after = eventually("the surge's pod gone", 30, || async {
            let pods = cluster.pods().await;
            (pods.len() == 2).then_some(pods)
        })
        .await;
        assert_eq!(
            after.iter().map(row).collect::<Vec<_>>(),
            before,
            "the source keeps serving where it was"
        );
        let events = cluster.events().await;
        let uuid = &REQUEST["ome.io/migration-request-v1-".len()..];
        let failed = (
            SERVICE.to_owned(),
            "MigrationFailed".to_owned(),
            "ome-stand-in".to_owned(),
            format!(
                "migration {uuid} failed: {}",
                record["message"].as_str().unwrap_or_default()
            ),
        );
        assert!(events.contains(&failed), "{failed:?} in {events:#?}");
        cluster.clean_up().await;
    };
    tokio::time::timeout(Duration::from_secs(240), run)
        .await
        .expect("the failed migration within 4 minutes");
}
