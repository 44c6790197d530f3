//! `ome-spread explain`: the seed's Step 2 tables for each component of an InferenceService,
//! then the diagnosis' reason and what to do.

use std::fmt::Write;
use std::path::Path;

use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use kube::api::{Api, ListParams};
use ome_spread_core::columns;
use ome_spread_core::diagnosis::{Component, Report, diagnose};
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::labels;
use ome_spread_core::nodes::{Node, Nodes, Selection};
use ome_spread_core::replica::{ReplicaRef, RuntimeRef};
use ome_spread_core::settings::Settings;
use ome_spread_core::spread::Spread;
use serde_json::Value;

use crate::objects::Objects;
use crate::resources::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};

/// The policy's settings from a file (YAML or JSON, as in policy.yaml), else the defaults.
pub fn read_settings(path: Option<&Path>) -> Result<Settings, String> {
    let Some(path) = path else {
        return Ok(Settings::default());
    };
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let value: Value = serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    Settings::from_json(&value).map_err(|e| format!("{}: {e}", path.display()))
}

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
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    for pod in pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(failed("the pods"))?
    {
        objects.push(value(&pod)?);
    }
    let nodes: Api<KubeNode> = Api::all(client);
    for node in nodes.list(&ListParams::default()).await.map_err(failed("the nodes"))? {
        objects.push(value(&node)?);
    }
    Ok(Objects::new(objects))
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
) -> Result<(String, bool), String> {
    let isvc = objects
        .named("InferenceService", Some(namespace), service)
        .ok_or_else(|| format!("no InferenceService {namespace}/{service} in {source}"))?;
    if isvc["spec"]["deploymentMode"] != "OMENative" {
        return Err(format!(
            "InferenceService {namespace}/{service} does not run on OMENative: nothing spreads its Instances"
        ));
    }
    let runtime = RuntimeRef::of(
        isvc["spec"]["runtime"]["kind"].as_str(),
        isvc["spec"]["runtime"]["name"].as_str(),
    )
    .and_then(|runtime| match runtime {
        RuntimeRef::Namespaced(name) => objects.named(runtime.kind(), Some(namespace), name),
        RuntimeRef::Cluster(name) => objects.named(runtime.kind(), None, name),
    });
    let nodes = Nodes::new(objects.of_kind("Node", None).map(Node::from_json).collect());
    let mut text = String::new();
    let mut holds = true;
    let mut explained = 0;
    for component in COMPONENTS.iter().filter(|c| only.is_none_or(|o| o == **c)) {
        let name = ReplicaRef::for_component(namespace, service, component).name;
        let Some(replica) = objects.named("InferenceReplica", Some(namespace), &name) else {
            continue;
        };
        let pods: Vec<Value> = objects
            .of_kind("Pod", Some(namespace))
            .filter(|p| {
                let labels = &p["metadata"]["labels"];
                labels[labels::INFERENCE_SERVICE] == service && labels[labels::COMPONENT] == *component
            })
            .cloned()
            .collect();
        let report = diagnose(
            &Component {
                service: isvc,
                runtime,
                replica,
                pods: &pods,
                nodes: &nodes,
            },
            settings,
        )
        .map_err(|e| e.to_string())?;
        if explained > 0 {
            text.push('\n');
        }
        write_component(&mut text, replica, &pods, &nodes, &report);
        holds &= report.reason.holds();
        explained += 1;
    }
    if explained == 0 {
        return Err(format!(
            "InferenceService {namespace}/{service} has no InferenceReplica{}: the component doesn't run on OMENative",
            only.map(|c| format!(" for its {c}")).unwrap_or_default()
        ));
    }
    Ok((text, holds))
}

fn write_component(text: &mut String, replica: &Value, pods: &[Value], nodes: &Nodes, report: &Report) {
    // An empty key is unset, as OME reads it (SPEC P4).
    // The replica's fields as the core read them: an empty key is unset (SPEC P4).
    let projected = &report.projected;
    let shown = |key: &Option<String>| key.as_deref().unwrap_or("<none>").to_owned();
    table(
        text,
        vec![
            row(["NAME", "SPREAD", "SPREAD-KEY", "TOPOLOGY-KEY"]),
            vec![
                replica["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                projected.spread.map_or("<none>", Spread::as_str).to_owned(),
                shown(&projected.spread_key),
                shown(&projected.topology_key),
            ],
        ],
    );
    let mut rows = vec![row(["NAME", "SPREAD-KEY", "WHEN", "NODE"])];
    for pod in pods {
        let constraints = pod["spec"]["topologySpreadConstraints"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let joined = |field: &str| columns::joined(&constraints, |c| c[field].as_str().unwrap_or_default().to_owned());
        rows.push(vec![
            pod["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
            joined("topologyKey"),
            joined("whenUnsatisfiable"),
            pod["spec"]["nodeName"].as_str().unwrap_or("<none>").to_owned(),
        ]);
    }
    table(text, rows);
    if let Some(key) = report.in_effect.domain_key() {
        // The nodes the pods run on or select, with their domain, as the seed's third command.
        let selections: Vec<Selection> = pods.iter().map(Selection::of_pod).collect();
        let used: Vec<&str> = pods.iter().filter_map(|p| p["spec"]["nodeName"].as_str()).collect();
        let header = key.rsplit('/').next().unwrap_or(key).to_uppercase();
        let mut rows = vec![vec!["NAME".to_owned(), header]];
        for node in nodes.iter() {
            if used.contains(&node.name.as_str()) || selections.iter().any(|s| s.selects(node)) {
                let domain = node.labels.get(key).cloned().unwrap_or_else(|| "<none>".into());
                rows.push(vec![node.name.clone(), domain]);
            }
        }
        if rows.len() > 1 {
            table(text, rows);
        }
    }
    let status = if report.reason.holds() { "True" } else { "False" };
    let _ = writeln!(text, "Spread: {status} ({})", report.reason.as_str());
    let _ = writeln!(text, "Why: {}.", report.message);
    let _ = writeln!(text, "What to do: {}", report.action);
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.map(String::from).to_vec()
}

fn table(text: &mut String, rows: Vec<Vec<String>>) {
    text.push_str(&columns::table(&rows));
    text.push('\n');
}
