//! What the OME stand-in's cluster tests share: the cluster `OME_SPREAD_E2E_KUBECONFIG` names (a
//! real kube-apiserver and kube-scheduler, such as cluster/up.sh's; never one that runs OME),
//! OME's CRDs on it, the seed's runtime and InferenceService, kwok playing the nodes' kubelets,
//! and the OME stand-in run in this process.

#![allow(dead_code)] // each test file uses its part

use std::time::Duration;

use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use ome_spread_sim::stand_in::ome::{self, Terms};
use ome_spread_sim::support::api::{
    self, CLUSTER_SERVING_RUNTIME, INFERENCE_REPLICA, INFERENCE_SERVICE, Kind, NODE, POD,
};
use ome_spread_sim::support::live::{self, Process};
use ome_spread_sim::support::nodes::{self, NodeShape, SUITE_NODE};
use ome_spread_sim::support::objects;
use serde_json::{Value, json};

pub const NAMESPACE: &str = "spread-demo";
pub const SERVICE: &str = "qwen3-0-6b";
pub const REPLICA: &str = "qwen3-0-6b-engine";
pub const ZONE: &str = "topology.kubernetes.io/zone";

/// The seed's ClusterServingRuntime: its engine asks for what the seed says one engine pod needs
/// (1 GPU, 10 CPUs, 30 GiB); OME selects the nodes where the model is Ready.
pub fn runtime() -> Value {
    json!({"apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime", "metadata": {"name": "srt-qwen3-0-6b"},
        "spec": {"engineConfig": {"runner": {"name": "ome-container", "image": "docker.io/lmsysorg/sglang:v0.5.5",
            "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi"},
                "limits": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi"}}}}}})
}

/// Step 1's InferenceService, as the seed writes it.
pub fn seed_service() -> Value {
    json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE},
        "spec": {"deploymentMode": "OMENative", "model": {"name": "qwen3-0-6b"}, "runtime": {"name": "srt-qwen3-0-6b"},
            "engine": {"minReplicas": 2, "maxReplicas": 2, "topologySpread": "Required", "topologySpreadKey": ZONE}}})
}

pub use ome_spread_sim::support::wait::eventually;

/// The cluster under test, with kwok and the OME stand-in running until it is dropped.
pub struct Cluster {
    pub client: Client,
    ome: tokio::task::JoinHandle<()>,
    _kwok: Process,
    nodes: Vec<String>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.ome.abort();
    }
}

/// The cluster of `OME_SPREAD_E2E_KUBECONFIG`, cleaned of an earlier run's seed namespace and
/// nodes, with OME's CRDs, the seed's runtime, the `layout`'s nodes, kwok and the OME stand-in
/// running (OME's in-tree terms as `terms` says).
pub async fn cluster(layout: &[NodeShape], terms: Terms) -> Cluster {
    let options = ome::Options {
        terms,
        interval: Duration::from_millis(500),
        ..ome::Options::default()
    };
    cluster_with(layout, options).await
}

/// [`cluster`], the OME stand-in run with `ome_options`.
pub async fn cluster_with(layout: &[NodeShape], ome_options: ome::Options) -> Cluster {
    let path = live::kubeconfig().expect("OME_SPREAD_E2E_KUBECONFIG names a kubeconfig");
    let client = api::client(Some(&path)).await.expect("a cluster in the kubeconfig");
    live::install(&path, live::OME_CRDS).await;
    // kwok first: an earlier run's pods, being deleted with their namespace, need it to go.
    let kwok = live::kwok(&path).await;
    remove_namespace(&client).await;
    let wanted: Vec<&str> = layout.iter().map(|n| n.name.as_str()).collect();
    for node in api::list(&client, NODE).await.expect("the nodes") {
        let name = objects::name(&node);
        if node["metadata"]["labels"][SUITE_NODE] == "true" && !wanted.contains(&name) {
            api::delete(&client, NODE, ("", name), Some(0))
                .await
                .expect("an old node deleted");
        }
    }
    nodes::create_nodes(&client, layout).await.expect("the nodes");
    api::apply(
        &client,
        CLUSTER_SERVING_RUNTIME,
        &runtime(),
        "ome-spread-sim-e2e",
        false,
    )
    .await
    .expect("the runtime");
    let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    api::apply(&client, api::NAMESPACE, &namespace, "ome-spread-sim-e2e", false)
        .await
        .expect("the namespace");
    let ome = tokio::spawn(ome::run(client.clone(), ome_options));
    Cluster {
        client,
        ome,
        _kwok: kwok,
        nodes: wanted.iter().map(|n| (*n).to_owned()).collect(),
    }
}

/// The seed's namespace gone (its InferenceService first, so that the stand-in's pods go with
/// their owners), waited for.
async fn remove_namespace(client: &Client) {
    let _ = INFERENCE_SERVICE
        .within(client, NAMESPACE)
        .delete(SERVICE, &DeleteParams::default())
        .await;
    let _ = api::NAMESPACE
        .all(client)
        .delete(NAMESPACE, &DeleteParams::default())
        .await;
    eventually("the namespace spread-demo gone", 90, || async {
        api::get(client, api::NAMESPACE, "", NAMESPACE)
            .await
            .ok()
            .filter(Option::is_none)
            .map(|_| ())
    })
    .await;
}

impl Cluster {
    /// Writes a migration request as OME's CLI (or ome-spread's migrate) does: one annotation on
    /// the InferenceService, merged.
    pub async fn request_migration(&self, key: &str, request: &Value) {
        let annotation = json!({"metadata": {"annotations": {key: request.to_string()}}});
        api::merge(
            &self.client,
            INFERENCE_SERVICE,
            (NAMESPACE, SERVICE),
            &annotation,
            "ome-spread",
            false,
        )
        .await
        .expect("the request");
    }

    /// Removes what the test made: the namespace (and with it the InferenceService, its
    /// replicas and pods), the runtime and the nodes.
    pub async fn clean_up(self) {
        remove_namespace(&self.client).await;
        let _ = api::delete(&self.client, CLUSTER_SERVING_RUNTIME, ("", "srt-qwen3-0-6b"), Some(0)).await;
        for node in &self.nodes {
            let _ = api::delete(&self.client, NODE, ("", node), Some(0)).await;
        }
    }

    pub async fn apply(&self, kind: Kind, object: &Value) {
        api::apply(&self.client, kind, object, "ome-spread-sim-e2e", false)
            .await
            .unwrap_or_else(|e| panic!("{} applied: {e}", kind.kind));
    }

    pub async fn service(&self) -> Value {
        api::get(&self.client, INFERENCE_SERVICE, NAMESPACE, SERVICE)
            .await
            .expect("the InferenceService")
            .expect("there")
    }

    pub async fn replica(&self) -> Option<Value> {
        api::get(&self.client, INFERENCE_REPLICA, NAMESPACE, REPLICA)
            .await
            .expect("the replica")
    }

    /// `kubectl wait --for=condition=Ready inferenceservice/qwen3-0-6b`, for up to `seconds`.
    pub async fn wait_ready(&self, seconds: u64) {
        eventually("the InferenceService Ready", seconds, || async {
            let service = api::get(&self.client, INFERENCE_SERVICE, NAMESPACE, SERVICE)
                .await
                .ok()??;
            let conditions = service["status"]["conditions"].as_array()?.clone();
            conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
                .then_some(())
        })
        .await;
    }

    /// The pods `kubectl get pods -l ome.io/inferenceservice=qwen3-0-6b` lists, by name.
    pub async fn pods(&self) -> Vec<Value> {
        let params = ListParams::default().labels(&format!("ome.io/inferenceservice={SERVICE}"));
        let listed = POD
            .within(&self.client, NAMESPACE)
            .list(&params)
            .await
            .expect("the pods");
        let mut pods: Vec<Value> = listed
            .items
            .into_iter()
            .map(|p| serde_json::to_value(p).expect("json"))
            .collect();
        pods.sort_by(|a, b| a["metadata"]["name"].as_str().cmp(&b["metadata"]["name"].as_str()));
        pods
    }

    /// The node's zone label.
    pub async fn zone_of(&self, node: &str) -> String {
        let node = api::get(&self.client, NODE, "", node)
            .await
            .expect("a node")
            .expect("there");
        node["metadata"]["labels"][ZONE].as_str().unwrap_or("<none>").to_owned()
    }

    /// The Events of the namespace: (involved object's name, reason, reporting component, message).
    pub async fn events(&self) -> Vec<(String, String, String, String)> {
        let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(self.client.clone(), NAMESPACE);
        let listed = events.list(&ListParams::default()).await.expect("the events");
        listed
            .items
            .into_iter()
            .map(|e| {
                let reporter = e
                    .reporting_component
                    .filter(|r| !r.is_empty())
                    .or_else(|| e.source.and_then(|s| s.component))
                    .unwrap_or_default();
                (
                    e.involved_object.name.unwrap_or_default(),
                    e.reason.unwrap_or_default(),
                    reporter,
                    e.message.unwrap_or_default(),
                )
            })
            .collect()
    }
}

/// A pod as Step 2's table shows it, with its phase and Ready: (NAME, SPREAD-KEY, WHEN, NODE,
/// phase, Ready).
pub fn row(pod: &Value) -> (String, String, String, String, String, bool) {
    let constraints = pod["spec"]["topologySpreadConstraints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let joined = |field: &str| {
        let values: Vec<&str> = constraints.iter().filter_map(|c| c[field].as_str()).collect();
        if values.is_empty() {
            "<none>".to_owned()
        } else {
            values.join(",")
        }
    };
    (
        objects::name(pod).to_owned(),
        joined("topologyKey"),
        joined("whenUnsatisfiable"),
        pod["spec"]["nodeName"].as_str().unwrap_or("<none>").to_owned(),
        pod["status"]["phase"].as_str().unwrap_or_default().to_owned(),
        ome_spread_sim::support::objects::read(pod).is_ready(),
    )
}
