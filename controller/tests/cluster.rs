//! The controller against a real cluster, named by `OME_SPREAD_E2E_KUBECONFIG` (a kubeconfig
//! file; kind or k3d will do, never a cluster that runs OME). Ignored unless asked for. It installs the
//! CRD subsets (deploy/without-ome/ome-crd-subsets.yaml), works in the namespace `ome-spread-e2e`
//! (deleted at the end, with the ClusterServingRuntime it creates), and runs the controller in
//! this process:
//!
//!   OME_SPREAD_E2E_KUBECONFIG=~/.kube/config cargo test -p ome-spread-controller --test cluster -- --ignored
//!
//! It checks what only a real API server can: the `Spread` condition lands by server-side apply
//! next to a condition of another field manager (OME's) without removing it, and changes with the
//! InferenceService, with an Event.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use ome_spread_controller::controller::{self, Options};
use ome_spread_controller::rebalance::Mode;
use ome_spread_controller::resources::{ClusterServingRuntime, InferenceReplica, InferenceService};
use ome_spread_core::settings::Settings;
use serde_json::{Value, json};

const NAMESPACE: &str = "ome-spread-e2e";
const REPLICA: &str = "qwen3-0-6b-engine";

async fn client() -> Client {
    let path = std::env::var_os("OME_SPREAD_E2E_KUBECONFIG").expect("OME_SPREAD_E2E_KUBECONFIG names a kubeconfig");
    let kubeconfig = Kubeconfig::read_from(&path).expect("OME_SPREAD_E2E_KUBECONFIG: a kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("a cluster in the kubeconfig");
    Client::try_from(config).expect("a client")
}

/// Polls `check` every second for up to a minute.
async fn eventually<T, F: Future<Output = Option<T>>>(what: &str, mut check: impl FnMut() -> F) -> T {
    for _ in 0..60 {
        if let Some(found) = check().await {
            return found;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("timed out waiting for {what}");
}

fn apply() -> PatchParams {
    PatchParams::apply("ome-spread-e2e").force()
}

async fn spread_condition(replicas: &Api<InferenceReplica>) -> Option<(String, String)> {
    let replica = replicas.get(REPLICA).await.ok()?;
    let condition = replica.status?.conditions.into_iter().find(|c| c.type_ == "Spread")?;
    Some((condition.status, condition.reason))
}

#[tokio::test]
#[ignore = "needs a cluster without OME: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn the_controller_applies_its_condition_beside_omes_and_follows_the_inference_service() {
    let client = client().await;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let yaml = ome_spread_controller::resources::crd_yaml().expect("the CRDs");
    for crd in serde_saphyr::from_multiple::<Value>(&yaml).expect("yaml") {
        let name = crd["metadata"]["name"].as_str().expect("a name").to_owned();
        crds.patch(&name, &apply(), &Patch::Apply(&crd))
            .await
            .expect("CRD applied");
        eventually(&format!("{name} established"), || async {
            let crd = crds.get(&name).await.ok()?;
            let established = crd
                .status?
                .conditions?
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            established.then_some(())
        })
        .await;
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    namespaces
        .patch(NAMESPACE, &apply(), &Patch::Apply(&namespace))
        .await
        .expect("namespace");

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
        let mut spec = json!({"parentRef": {"name": "qwen3-0-6b"}, "component": "engine", "replicas": 2});
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
    eventually("Spread True (NotRequested)", || async {
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
    eventually("Spread False (NoKey)", || async {
        spread_condition(&replicas).await.filter(|c| *c == expected)
    })
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    eventually("a NoKey Event on the replica", || async {
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
    let _ = namespaces.delete(NAMESPACE, &DeleteParams::default()).await;
}
