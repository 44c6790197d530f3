//! kwok and the OME stand-in across a kube-apiserver restart (cluster/restart.sh, so only on a
//! control plane cluster/up.sh started, named by `OME_SPREAD_E2E_RUN`): their watches resume, and
//! a repair after the restart (an Instance's pod deleted) is done as before it. Ignored unless a
//! cluster is named:
//!
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/run/kubeconfig OME_SPREAD_E2E_RUN=target/cluster/run \
//!     cargo test -p ome-spread-sim --test cluster_restart -- --ignored

mod support;

use std::path::Path;
use std::time::Duration;

use kube::api::DeleteParams;
use ome_spread_sim::stand_in::ome::Terms;
use ome_spread_sim::support::api::{self, INFERENCE_SERVICE, NODE, POD};
use ome_spread_sim::support::nodes::layout;
use support::{NAMESPACE, eventually, row, seed_service};

#[tokio::test]
#[ignore = "needs a control plane of cluster/up.sh and kwok (make kwok-bin): set OME_SPREAD_E2E_KUBECONFIG and OME_SPREAD_E2E_RUN, and run with --ignored"]
async fn kwok_and_the_ome_stand_in_resume_after_a_kube_apiserver_restart() {
    let Some(run) = std::env::var_os("OME_SPREAD_E2E_RUN") else {
        eprintln!("skipped: OME_SPREAD_E2E_RUN names no cluster/up.sh run directory to restart kube-apiserver in");
        return;
    };
    let test = async {
        let cluster = support::cluster(&layout("two-zones").expect("a layout"), Terms::InTree).await;
        cluster.apply(INFERENCE_SERVICE, &seed_service()).await;
        cluster.wait_ready(90).await;
        let before: Vec<_> = cluster.pods().await.iter().map(row).collect();

        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let (script, run) = (workspace.join("cluster/restart.sh"), workspace.join(&run));
        let restarted = tokio::task::spawn_blocking(move || {
            std::process::Command::new(script)
                .arg(run)
                .arg("kube-apiserver")
                .status()
        })
        .await
        .expect("joined")
        .expect("cluster/restart.sh runs");
        assert!(restarted.success(), "cluster/restart.sh: {restarted}");
        eventually("kube-apiserver back", 90, || async {
            api::list(&cluster.client, NODE).await.ok().map(|_| ())
        })
        .await;

        let repaired = cluster.pods().await[1]["metadata"]["uid"].clone();
        POD.within(&cluster.client, NAMESPACE)
            .delete("qwen3-0-6b-engine-1-default-0", &DeleteParams::default())
            .await
            .expect("a pod deleted");
        let after = eventually("Instance 1 back, Running and Ready", 60, || async {
            let pods = cluster.pods().await;
            let back = pods.len() == 2 && pods[1]["metadata"]["uid"] != repaired && row(&pods[1]).5;
            back.then(|| pods.iter().map(row).collect::<Vec<_>>())
        })
        .await;
        // The repaired Instance goes back to the node it left: the only one with room.
        assert_eq!(after, before);
        cluster.wait_ready(30).await;
        cluster.clean_up().await;
    };
    tokio::time::timeout(Duration::from_secs(300), test)
        .await
        .expect("the restart within 5 minutes");
}
