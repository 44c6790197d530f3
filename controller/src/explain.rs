//! `ome-spread explain`: reads the objects (a live cluster's, or saved ones) and prints what the
//! core's [`explain`] makes of them.

use k8s_openapi::api::core::v1::Node as KubeNode;
use kube::api::{Api, ListParams};
use ome_spread_core::explain::{Objects, explain, text};
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::labels;
use ome_spread_core::pod::Pod;
use ome_spread_core::replica::{ReplicaRef, RuntimeRef};
use ome_spread_core::settings::Settings;
use serde_json::Value;

use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};

/// What `explain` reads of a live cluster: the InferenceService, its runtime, its replicas, its
/// pods and the nodes.
pub async fn fetch(client: kube::Client, service: &str, namespace: &str) -> Result<Objects, String> {
    let failed = |what: &str| {
        let what = what.to_owned();
        move |e: kube::Error| format!("reading {what}: {e}")
    };
    let services: Api<InferenceService> = Api::namespaced(client.clone(), namespace);
    let Some(isvc) = services
        .get_opt(service)
        .await
        .map_err(failed("the InferenceService"))?
    else {
        return Err(format!("no InferenceService {namespace}/{service} in the cluster"));
    };
    let mut objects = vec![value(&isvc)?];
    match isvc.runtime() {
        Some(RuntimeRef::Namespaced(name)) => {
            let runtimes: Api<ServingRuntime> = Api::namespaced(client.clone(), namespace);
            if let Some(runtime) = runtimes.get_opt(name).await.map_err(failed("the ServingRuntime"))? {
                objects.push(value(&runtime)?);
            }
        }
        Some(RuntimeRef::Cluster(name)) => {
            let runtimes: Api<ClusterServingRuntime> = Api::all(client.clone());
            if let Some(runtime) = runtimes
                .get_opt(name)
                .await
                .map_err(failed("the ClusterServingRuntime"))?
            {
                objects.push(value(&runtime)?);
            }
        }
        None => {}
    }
    let replicas: Api<InferenceReplica> = Api::namespaced(client.clone(), namespace);
    for component in COMPONENTS {
        let name = ReplicaRef::for_component(namespace, service, component).name;
        if let Some(replica) = replicas.get_opt(&name).await.map_err(failed("the InferenceReplicas"))? {
            objects.push(value(&replica)?);
        }
    }
    let selector = format!("{}={service}", labels::INFERENCE_SERVICE);
    let own: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut pods = own
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(failed("the pods"))?
        .items;
    // The room a plan counts on: every other pod, of any workload, trimmed as the controller's
    // watch trims it. Who may not list every pod gets the room of this InferenceService's pods only.
    match Api::<Pod>::all(client.clone()).list(&ListParams::default()).await {
        Ok(everyone) => {
            for mut pod in everyone {
                let own = pod.namespace() == namespace && pod.label(labels::INFERENCE_SERVICE) == Some(service);
                if !own {
                    crate::pods::trim(&mut pod);
                    pods.push(pod);
                }
            }
        }
        Err(kube::Error::Api(status)) if status.code == 403 => eprintln!(
            "warning: listing every pod is forbidden ({}): the room counts only the pods of InferenceService {namespace}/{service}",
            status.message
        ),
        Err(e) => return Err(failed("every pod")(e)),
    }
    let nodes: Api<KubeNode> = Api::all(client);
    for node in nodes.list(&ListParams::default()).await.map_err(failed("the nodes"))? {
        objects.push(value(&node)?);
    }
    Objects::with_pods(objects, pods).map_err(|e| e.to_string())
}

fn value(object: &impl serde::Serialize) -> Result<Value, String> {
    serde_json::to_value(object).map_err(|e| e.to_string())
}

/// The text to print, and whether the spread holds for every component explained. `source` names
/// where the objects came from, for messages.
pub fn run(
    service: &str,
    namespace: &str,
    only: Option<&str>,
    objects: &Objects,
    source: &str,
    settings: &Settings,
    every_node: bool,
) -> Result<(String, bool), String> {
    let explained =
        explain(service, namespace, only, objects, source, settings, every_node).map_err(|e| e.to_string())?;
    Ok((text(&explained), explained.iter().all(|e| e.report.reason.holds())))
}
