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

use ome_spread_sim::support::{live, local, wait::eventually};

use std::sync::Arc;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};

use ome_spread_controller::context::Mode;
use ome_spread_controller::controller::{self, Options};
use ome_spread_controller::policy::{DEFAULT_NAME, Source};
use ome_spread_controller::report::{Format, Reports};
use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService};
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
    let Some(kubeconfig) = live::with_crds().await else {
        return;
    };
    live::logs();
    let client = live::client_of(&kubeconfig).await;
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
        {"type": "Ready", "status": "True", "reason": "AllInstancesReady", "message": "2/2 Instances Ready", "lastTransitionTime": "2026-11-30T00:00:00Z"}]}});
    replicas
        .patch_status(
            REPLICA,
            &PatchParams::apply("ome").force(),
            &Patch::Apply(&ome_condition),
        )
        .await
        .expect("OME's condition");

    let controller = tokio::spawn(controller::run(client.clone(), options(NAMESPACE, Arc::default())));

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
    event_on_the_replica(&client, "NoKey").await;

    controller.abort();
    let _ = runtimes.delete("srt-e2e", &DeleteParams::default()).await;
    live::kubectl(&kubeconfig, &["delete", "namespace", NAMESPACE, "--timeout=90s"]).await;
}

/// On OME's minimal InferenceReplica CRD (status atomic) a server-side apply of the one `Spread`
/// condition, forced as the controller forces it, replaces OME's whole status: shown here on the
/// real API server. The controller therefore writes no condition there, reading the schema this
/// API server serves for that CRD (`controller/tests/data/openapi/minimal.json`, and
/// `controller.rs`'s `on_omes_minimal_crd_no_condition_is_written`): run here on it, it leaves
/// OME's status whole, and writes its condition once the full CRD is served again.
#[tokio::test]
#[ignore = "needs a cluster without OME: make e2e-cluster, or set OME_SPREAD_E2E_KUBECONFIG"]
async fn on_omes_minimal_crd_an_applied_condition_replaces_omes_whole_status() {
    let Some(kubeconfig) = live::kubeconfig() else {
        return;
    };
    live::logs();
    let namespace = "ome-spread-minimal";
    let workspace = local::workspace();
    let crd = |file: &str| std::fs::read_to_string(workspace.join("cluster").join(file)).expect("a CRD");
    live::apply(&kubeconfig, &crd("ome-crds.yaml")).await;
    live::kubectl_with(
        &kubeconfig,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&crd("ome-crd-inferencereplica-minimal.yaml")),
    )
    .await;
    served_status_atomic(&kubeconfig, true).await;
    live::fresh_namespace(&kubeconfig, namespace).await;
    let objects = format!(
        "apiVersion: ome.io/v1beta1\nkind: ClusterServingRuntime\nmetadata: {{name: srt-minimal}}\nspec: {{engineConfig: {{}}}}\n---\n\
         apiVersion: ome.io/v1beta1\nkind: InferenceService\nmetadata: {{name: qwen3-0-6b, namespace: {namespace}}}\n\
         spec: {{deploymentMode: OMENative, runtime: {{name: srt-minimal}}, engine: {{minReplicas: 2}}}}\n---\n\
         apiVersion: ome.io/v1beta1\nkind: InferenceReplica\nmetadata: {{name: {REPLICA}, namespace: {namespace}}}\n\
         spec: {{parentRef: {{name: qwen3-0-6b}}, component: engine, replicas: 2}}\n"
    );
    live::apply(&kubeconfig, &objects).await;
    let omes = json!({"replicas": 2, "readyReplicas": 2, "conditions": [
        {"type": "Ready", "status": "True", "reason": "AllInstancesReady", "message": "2/2 Instances Ready", "lastTransitionTime": "2026-12-01T00:00:00Z"}]});
    let status = || status_of(&kubeconfig, namespace);
    write_status(&kubeconfig, namespace, &omes).await;

    // The controller's own body and field manager, forced: OME's status is gone.
    apply_condition_forced(&kubeconfig, namespace).await;

    // The controller on that CRD: it diagnoses the replica (its metric) and writes nothing, so
    // OME's status stays whole; once the full CRD is served again it writes the condition beside
    // OME's (it asks the served schema again every 15 s while it refuses).
    write_status(&kubeconfig, namespace, &omes).await;
    let metrics = Arc::new(ome_spread_controller::metrics::Metrics::default());
    let client = live::client_of(&kubeconfig).await;
    let controller = tokio::spawn(controller::run(client, options(namespace, metrics.clone())));
    let series = format!(r#"ome_spread_reason{{namespace="{namespace}",replica="{REPLICA}",reason="NotRequested"}} 1"#);
    eventually("the replica diagnosed", 60, || async {
        metrics.encode().contains(&series).then_some(())
    })
    .await;
    assert_eq!(status().await, omes, "OME's status, and no Spread condition");
    live::kubectl_with(
        &kubeconfig,
        &["apply", "--server-side", "--force-conflicts", "-f", "-"],
        Some(&crd("ome-crds.yaml")),
    )
    .await;
    served_status_atomic(&kubeconfig, false).await;
    let both = eventually("the Spread condition beside OME's", 60, || async {
        let status = status().await;
        let types: Vec<&str> = status["conditions"]
            .as_array()?
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        (types == ["Ready", "Spread"]).then_some(status)
    })
    .await;
    assert_eq!(
        (&both["replicas"], &both["readyReplicas"], &both["conditions"][0]),
        (&omes["replicas"], &omes["readyReplicas"], &omes["conditions"][0]),
        "OME's fields kept: {both}"
    );
    assert_eq!(
        (&both["conditions"][1]["status"], &both["conditions"][1]["reason"]),
        (&json!("True"), &json!("NotRequested"))
    );
    controller.abort();

    live::kubectl(&kubeconfig, &["delete", "namespace", namespace, "--timeout=90s"]).await;
    live::kubectl(&kubeconfig, &["delete", "clusterservingruntime", "srt-minimal"]).await;
}

/// Waits until the API server serves the InferenceReplica status as atomic or not, and lists the
/// replicas: it publishes a changed CRD's schema a moment after the CRD is Established.
async fn served_status_atomic(kubeconfig: &std::path::Path, atomic: bool) {
    eventually("the CRD's schema served", 60, || async {
        let printed = live::kubectl_with(kubeconfig, &["get", "--raw", "/openapi/v3/apis/ome.io/v1beta1"], None).await;
        let document: Value = serde_json::from_str(&printed.stdout).ok()?;
        let status = &document["components"]["schemas"]["io.ome.v1beta1.InferenceReplica"]["properties"]["status"];
        ((status["x-kubernetes-map-type"] == "atomic") == atomic).then_some(())
    })
    .await;
    // The replicas are served again (their storage is made anew with the CRD).
    eventually("the replicas listed", 60, || async {
        let args = ["get", "inferencereplicas", "--all-namespaces"];
        live::kubectl_with(kubeconfig, &args, None).await.ok.then_some(())
    })
    .await;
}

/// The controller's options for these tests: the Lease in `namespace`, recommend, no reports.
fn options(namespace: &str, metrics: Arc<ome_spread_controller::metrics::Metrics>) -> Options {
    Options {
        settings: Source::Fixed(Settings::default()),
        lease_namespace: namespace.into(),
        identity: "e2e".into(),
        health: Arc::default(),
        metrics,
        rebalance: Mode::Recommend,
        max_per_hour: 10,
        reports: Reports::new(Format::Off, DEFAULT_NAME, Arc::default()),
    }
}

/// The InferenceService of the first test, its engine's fields `engine`.
fn service(engine: Value) -> Value {
    json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
    "metadata": {"name": "qwen3-0-6b", "namespace": NAMESPACE},
    "spec": {"deploymentMode": "OMENative", "runtime": {"name": "srt-e2e"}, "engine": engine}})
}

/// Its engine's InferenceReplica, the spread fields `spread` projected.
fn replica(spread: Value) -> Value {
    // The CRD requires runners, as upstream's does.
    let runners = json!([{"name": "default", "size": 1, "template": {"spec": {"containers": [{"name": "ome-container", "image": "sglang"}]}}}]);
    let mut spec =
        json!({"parentRef": {"name": "qwen3-0-6b"}, "component": "engine", "replicas": 2, "runners": runners});
    spec.as_object_mut()
        .expect("spec")
        .extend(spread.as_object().cloned().unwrap_or_default());
    json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": REPLICA, "namespace": NAMESPACE}, "spec": spec})
}

/// An Event of `reason` on the replica, within a minute.
async fn event_on_the_replica(client: &kube::Client, reason: &str) {
    let events: Api<Event> = Api::namespaced(client.clone(), NAMESPACE);
    eventually(&format!("a {reason} Event on the replica"), 60, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(REPLICA)
            })
            .then_some(())
    })
    .await;
}

/// The replica's status in `namespace`, `status` merged into it as OME writes it.
async fn write_status(kubeconfig: &std::path::Path, namespace: &str, status: &Value) {
    let patch = json!({"status": status}).to_string();
    let args = [
        "patch",
        "inferencereplica",
        REPLICA,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        &patch,
    ];
    live::kubectl(kubeconfig, &args).await;
}

/// The replica's status in `namespace`, as served.
async fn status_of(kubeconfig: &std::path::Path, namespace: &str) -> Value {
    let args = [
        "get",
        "inferencereplica",
        REPLICA,
        "-n",
        namespace,
        "-o",
        "jsonpath={.status}",
    ];
    serde_json::from_str::<Value>(&live::kubectl(kubeconfig, &args).await).expect("a status")
}

/// The controller's own condition, by its field manager, forced, on the replica in `namespace`:
/// on the minimal CRD, OME's replicas and Ready condition are dropped.
async fn apply_condition_forced(kubeconfig: &std::path::Path, namespace: &str) {
    let condition = json!({"type": "Spread", "status": "True", "reason": "NotRequested",
        "message": "topologySpread is unset. Nothing.", "lastTransitionTime": "2026-12-01T00:00:00Z"});
    let body = json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": REPLICA, "namespace": namespace}, "status": {"conditions": [condition]}});
    let applied = live::kubectl_with(
        kubeconfig,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "--subresource=status",
            "--field-manager=ome-spread",
            "-f",
            "-",
        ],
        Some(&body.to_string()),
    )
    .await;
    assert!(applied.ok, "{}", applied.stderr);
    assert_eq!(
        status_of(kubeconfig, namespace).await,
        json!({"conditions": [condition]}),
        "OME's replicas and Ready condition dropped"
    );
}
