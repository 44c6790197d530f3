//! The OME stand-in's status writes beside the ome-spread controller's, on a real API server
//! with OME's full InferenceReplica CRD (conditions a list map keyed by `type`): the controller
//! applies its `Spread` condition server-side as `ome-spread`; the stand-in's own writes (here on
//! a repair: an Instance's pod deleted and created again) keep it, and each condition keeps its
//! one owner. Ignored unless a cluster is named:
//!
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/run/kubeconfig cargo test -p ome-spread-sim --test cluster_status -- --ignored

mod support;

use std::time::Duration;

use kube::api::{DeleteParams, Patch, PatchParams};
use ome_spread_sim::stand_in::ome::Terms;
use ome_spread_sim::support::api::{INFERENCE_REPLICA, INFERENCE_SERVICE, POD};
use ome_spread_sim::support::nodes::layout;
use serde_json::{Value, json};
use support::{NAMESPACE, REPLICA, eventually, row, seed_service};

/// Condition type -> the managers that own a field of it, from the replica's managedFields.
fn owners(replica: &Value, kind: &str) -> Vec<String> {
    let key = format!("k:{{\"type\":\"{kind}\"}}");
    let fields = replica["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut owners: Vec<String> = fields
        .iter()
        .filter(|m| !m["fieldsV1"]["f:status"]["f:conditions"][&key].is_null())
        .map(|m| m["manager"].as_str().unwrap_or_default().to_owned())
        .collect();
    owners.sort();
    owners
}

#[tokio::test]
#[ignore = "needs a cluster without OME (cluster/up.sh prints one) and kwok (make kwok-bin): set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn the_controllers_spread_condition_stays_beside_the_stand_ins_status_through_a_repair() {
    let run = async {
        let cluster = support::cluster(&layout("two-zones").expect("a layout"), Terms::InTree).await;
        cluster.apply(INFERENCE_SERVICE, &seed_service()).await;
        cluster.wait_ready(90).await;

        let spread = json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": REPLICA, "namespace": NAMESPACE},
            "status": {"conditions": [{"type": "Spread", "status": "True", "reason": "Satisfied",
                "message": "The Instances spread across 2 domains of topology.kubernetes.io/zone.",
                "lastTransitionTime": "2026-12-01T10:00:00Z", "observedGeneration": 1}]}});
        INFERENCE_REPLICA
            .within(&cluster.client, NAMESPACE)
            .patch_status(
                REPLICA,
                &PatchParams::apply("ome-spread").force(),
                &Patch::Apply(&spread),
            )
            .await
            .expect("the controller's condition");

        // A repair: Instance 1's pod deleted; the stand-in writes Ready False, creates it again,
        // then Ready True.
        let repaired = cluster.pods().await[1]["metadata"]["uid"].clone();
        POD.within(&cluster.client, NAMESPACE)
            .delete("qwen3-0-6b-engine-1-default-0", &DeleteParams::default())
            .await
            .expect("a pod deleted");
        let pods = eventually("Instance 1 back and Ready", 60, || async {
            let pods = cluster.pods().await;
            let back = pods.len() == 2 && pods[1]["metadata"]["uid"] != repaired && row(&pods[1]).5;
            back.then_some(pods)
        })
        .await;
        assert_eq!(
            (row(&pods[1]).0, row(&pods[1]).1, row(&pods[1]).2),
            (
                "qwen3-0-6b-engine-1-default-0".to_owned(),
                "topology.kubernetes.io/zone".to_owned(),
                "DoNotSchedule".to_owned()
            )
        );
        let replica = eventually("the replica Ready again", 30, || async {
            let replica = cluster.replica().await?;
            (replica["status"]["readyReplicas"] == 2).then_some(replica)
        })
        .await;
        let conditions: Vec<(&Value, &Value, &Value)> = replica["status"]["conditions"]
            .as_array()
            .expect("conditions")
            .iter()
            .map(|c| (&c["type"], &c["status"], &c["reason"]))
            .collect();
        assert_eq!(
            conditions,
            [
                (&json!("Ready"), &json!("True"), &json!("AllInstancesReady")),
                (&json!("Spread"), &json!("True"), &json!("Satisfied"))
            ]
        );
        assert_eq!(owners(&replica, "Spread"), ["ome-spread"]);
        assert_eq!(owners(&replica, "Ready"), ["ome-stand-in"]);
        cluster.clean_up().await;
    };
    tokio::time::timeout(Duration::from_secs(240), run)
        .await
        .expect("the repair within 4 minutes");
}
