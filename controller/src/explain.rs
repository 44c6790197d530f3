//! `ome-spread explain`: the seed's Step 2 tables for each component of an InferenceService,
//! then the diagnosis' reason and what to do.

use std::fmt::Write;
use std::path::Path;

use ome_spread::columns;
use ome_spread::diagnosis::{Component, Report, diagnose};
use ome_spread::nodes::{Node, Selection};
use ome_spread::settings::Settings;
use serde_json::Value;

use crate::objects::Objects;

const COMPONENTS: [&str; 2] = ["engine", "decoder"];

/// The text to print, and whether the spread holds for every component explained.
pub fn run(
    service: &str,
    namespace: &str,
    only: Option<&str>,
    from: &Path,
    settings: Option<&Path>,
) -> Result<(String, bool), String> {
    let settings = match settings {
        None => Settings::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let value: Value = serde_saphyr::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
            Settings::from_json(&value).map_err(|e| format!("{}: {e}", path.display()))?
        }
    };
    let objects = Objects::load(from)?;
    let isvc = objects
        .named("InferenceService", Some(namespace), service)
        .ok_or_else(|| format!("no InferenceService {namespace}/{service} in {}", from.display()))?;
    if isvc["spec"]["deploymentMode"] != "OMENative" {
        return Err(format!(
            "InferenceService {namespace}/{service} does not run on OMENative: nothing spreads its Instances"
        ));
    }
    let runtime_name = isvc["spec"]["runtime"]["name"].as_str().unwrap_or_default();
    let runtime = match isvc["spec"]["runtime"]["kind"].as_str() {
        Some("ServingRuntime") => objects.named("ServingRuntime", Some(namespace), runtime_name),
        _ => objects.named("ClusterServingRuntime", None, runtime_name),
    };
    let nodes: Vec<Value> = objects.of_kind("Node", None).cloned().collect();
    let mut text = String::new();
    let mut holds = true;
    let mut explained = 0;
    for component in COMPONENTS.iter().filter(|c| only.is_none_or(|o| o == **c)) {
        let Some(replica) = objects.named("InferenceReplica", Some(namespace), &format!("{service}-{component}"))
        else {
            continue;
        };
        let pods: Vec<Value> = objects
            .of_kind("Pod", Some(namespace))
            .filter(|p| {
                let labels = &p["metadata"]["labels"];
                labels["ome.io/inferenceservice"] == service && labels["component"] == *component
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
            &settings,
        )?;
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

fn write_component(text: &mut String, replica: &Value, pods: &[Value], nodes: &[Value], report: &Report) {
    let field = |name: &str| replica["spec"][name].as_str().unwrap_or("<none>").to_owned();
    table(
        text,
        vec![
            row(["NAME", "SPREAD", "SPREAD-KEY", "TOPOLOGY-KEY"]),
            vec![
                replica["metadata"]["name"].as_str().unwrap_or_default().to_owned(),
                field("topologySpread"),
                field("topologySpreadKey"),
                field("topologyKey"),
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
        for node in nodes.iter().map(Node::from_json) {
            if used.contains(&node.name.as_str()) || selections.iter().any(|s| s.selects(&node)) {
                let domain = node.labels.get(key).cloned().unwrap_or_else(|| "<none>".into());
                rows.push(vec![node.name, domain]);
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
