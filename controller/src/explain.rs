//! `ome-spread explain`: reads the objects (a live cluster's, or saved ones) and prints what the
//! core's [`explain`] makes of them.

use kube::api::{Api, ListParams};
use ome_spread_core::explain::{Objects, Parts, explain, text};
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::labels;
use ome_spread_core::nodes::Served;
use ome_spread_core::pod::Pod;
use ome_spread_core::replica::{ReplicaRef, RuntimeRef};
use ome_spread_core::settings::Settings;

use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};

/// What `explain` reads of a live cluster: the InferenceService, its runtime, its replicas, its
/// pods and the nodes, each listed as its model.
pub async fn fetch(client: kube::Client, service: &str, namespace: &str) -> Result<Objects, String> {
    let services: Api<InferenceService> = Api::namespaced(client.clone(), namespace);
    let isvc = (services.get_opt(service).await)
        .map_err(failed("the InferenceService"))?
        .ok_or_else(|| format!("no InferenceService {namespace}/{service} in the cluster"))?;
    let mut parts = Parts::default();
    match isvc.runtime() {
        Some(RuntimeRef::Namespaced(name)) => {
            let api: Api<ServingRuntime> = Api::namespaced(client.clone(), namespace);
            let runtime = api.get_opt(name).await.map_err(failed("the ServingRuntime"))?;
            parts.runtimes.extend(runtime);
        }
        Some(RuntimeRef::Cluster(name)) => {
            let api: Api<ClusterServingRuntime> = Api::all(client.clone());
            let runtime = api.get_opt(name).await.map_err(failed("the ClusterServingRuntime"))?;
            parts.cluster_runtimes.extend(runtime);
        }
        None => {}
    }
    parts.services.push(isvc);
    let replicas: Api<InferenceReplica> = Api::namespaced(client.clone(), namespace);
    for component in COMPONENTS {
        let name = ReplicaRef::for_component(namespace, service, component).name;
        let replica = replicas.get_opt(&name).await.map_err(failed("the InferenceReplicas"))?;
        parts.replicas.extend(replica);
    }
    parts.pods = pods(&client, service, namespace).await?;
    let nodes: Api<Served> = Api::all(client);
    let listed = nodes.list(&ListParams::default()).await.map_err(failed("the nodes"))?;
    Objects::of(parts, listed.iter().map(crate::nodes::node).collect()).map_err(|e| e.to_string())
}

/// What went wrong reading `what` from the cluster.
fn failed(what: &str) -> impl Fn(kube::Error) -> String + '_ {
    move |e| format!("reading {what}: {e}")
}

/// The pods of InferenceService `namespace/service`, and every other pod, of any workload, trimmed
/// as the controller's watch trims it: the room a plan counts on. Who may not list every pod gets
/// the room of this InferenceService's pods only.
async fn pods(client: &kube::Client, service: &str, namespace: &str) -> Result<Vec<Pod>, String> {
    let selector = format!("{}={service}", labels::INFERENCE_SERVICE);
    let own: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let mut pods = (own.list(&ListParams::default().labels(&selector)).await)
        .map_err(failed("the pods"))?
        .items;
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
    Ok(pods)
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
