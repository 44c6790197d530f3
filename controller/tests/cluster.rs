//! The controller against a live cluster, named by `OME_SPREAD_E2E_KUBECONFIG` (`make
//! e2e-cluster` starts one: the real kube-apiserver, with OME v1.3's CRDs from
//! cluster/ome-crds.yaml; kind or k3d will do, never a cluster that runs OME). Ignored unless asked
//! for. It works in the namespace `ome-spread-e2e` (deleted at the end, with the
//! ClusterServingRuntime it creates), and runs the controller in this process:
//!
//!   OME_SPREAD_E2E_KUBECONFIG=~/.kube/config cargo test -p ome-spread-controller --test cluster -- --ignored
//!
//! It checks what only a real API server can: the `Spread` condition lands by server-side apply
//! next to a condition of another field manager (OME's) without removing it, passes the CRD's
//! validation of a condition, and changes with the InferenceService, with an Event.

mod live;

use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use live::eventually;
use ome_spread_controller::controller::{self, Options};
use ome_spread_controller::rebalance::Mode;
use ome_spread_controller::resources::{ClusterServingRuntime, InferenceReplica, InferenceService};
use ome_spread_core::settings::Settings;
use serde_json::{Value, json};

const NAMESPACE: &str = "ome-spread-e2e";
const REPLICA: &str = "qwen3-0-6b-engine";

fn apply() -> PatchParams {
    PatchParams::apply("ome-spread-e2e").force()
}

async fn spread_condition(replicas: &Api<InferenceReplica>) -> Option<(String, String)> {
    let replica = replicas.get(REPLICA).await.ok()?;
    let condition = replica.status?.conditions.into_iter().find(|c| c.type_ == "Spread")?;
    Some((condition.status, condition.reason))
}

#[tokio::test]
#[ignore = "needs a cluster without OME: make e2e-cluster, or set OME_SPREAD_E2E_KUBECONFIG"]
async fn the_controller_applies_its_condition_beside_omes_and_follows_the_inference_service() {
    let Some(kubeconfig) = live::kubeconfig() else {
        eprintln!("skipped: OME_SPREAD_E2E_KUBECONFIG names no cluster");
        return;
    };
    let client = live::client_of(&kubeconfig).await;
    let crds = std::fs::read_to_string(live::workspace().join("cluster/ome-crds.yaml")).expect("the CRDs");
    live::apply(&kubeconfig, &crds).await;
    live::kubectl(
        &kubeconfig,
        &["wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"],
    )
    .await;
    live::fresh_namespace(&kubeconfig, NAMESPACE).await;

    let runtimes: Api<ClusterServingRuntime> = Api::all(client.clone());
    let services: Api<InferenceService> = Api::namespaced(client.clone(), NAMESPACE);
    let replicas: Api<InferenceReplica> = Api::namespaced(client.clone(), NAMESPACE);
    runtimes
        .patch(
            "srt-e2e",
            &apply(),
            &Patch::Apply(json!({"apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime",
            "metadata": {"name": "srt-e2e"}, "spec": {"engineConfig": {}}})),
        )
        .await
        .expect("runtime");
    let service = |engine: Value| {
        json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "qwen3-0-6b", "namespace": NAMESPACE},
        "spec": {"deploymentMode": "OMENative", "runtime": {"name": "srt-e2e"}, "engine": engine}})
    };
    let replica = |spread: Value| {
        // The CRD requires runners, as upstream's does.
        let runners = json!([{"name": "default", "size": 1, "template": {"spec": {"containers": [{"name": "ome-container", "image": "sglang"}]}}}]);
        let mut spec =
            json!({"parentRef": {"name": "qwen3-0-6b"}, "component": "engine", "replicas": 2, "runners": runners});
        spec.as_object_mut()
            .expect("spec")
            .extend(spread.as_object().cloned().unwrap_or_default());
        json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": REPLICA, "namespace": NAMESPACE}, "spec": spec})
    };
    services
        .patch("qwen3-0-6b", &apply(), &Patch::Apply(service(json!({}))))
        .await
        .expect("service");
    replicas
        .patch(REPLICA, &apply(), &Patch::Apply(replica(json!({}))))
        .await
        .expect("replica");
    // OME's own condition, by OME's field manager.
    let ome_condition = json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "InstancesReady", "message": "", "lastTransitionTime": "2026-11-30T00:00:00Z"}]}});
    replicas
        .patch_status(
            REPLICA,
            &PatchParams::apply("ome").force(),
            &Patch::Apply(&ome_condition),
        )
        .await
        .expect("OME's condition");

    let controller = tokio::spawn(controller::run(
        client.clone(),
        Options {
            settings: Settings::default(),
            lease_namespace: NAMESPACE.into(),
            identity: "e2e".into(),
            health: Arc::default(),
            metrics: Arc::default(),
            rebalance: Mode::Recommend,
            max_per_hour: 10,
        },
    ));

    let not_requested = ("True".to_owned(), "NotRequested".to_owned());
    eventually("Spread True (NotRequested)", 60, || async {
        spread_condition(&replicas).await.filter(|c| *c == not_requested)
    })
    .await;
    let kept = replicas
        .get(REPLICA)
        .await
        .expect("replica")
        .status
        .expect("a status")
        .conditions;
    assert!(
        kept.iter().any(|c| c.type_ == "Ready"),
        "OME's condition is kept: {kept:?}"
    );

    let no_key = json!({"topologySpread": "Required"});
    services
        .patch("qwen3-0-6b", &apply(), &Patch::Apply(service(no_key.clone())))
        .await
        .expect("service");
    replicas
        .patch(REPLICA, &apply(), &Patch::Apply(replica(no_key)))
        .await
        .expect("replica");
    let expected = ("False".to_owned(), "NoKey".to_owned());
    eventually("Spread False (NoKey)", 60, || async {
        spread_condition(&replicas).await.filter(|c| *c == expected)
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    eventually("a NoKey Event on the replica", 60, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("NoKey")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(REPLICA)
            })
            .then_some(())
    })
    .await;

    controller.abort();
    let _ = runtimes.delete("srt-e2e", &DeleteParams::default()).await;
    live::kubectl(&kubeconfig, &["delete", "namespace", NAMESPACE, "--wait=false"]).await;
}
