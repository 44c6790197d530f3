//! The diagnosis of each InferenceService pasted, as `ome-spread explain` prints it, the
//! picture of its spread (one column per eligible domain, one box per Instance), and what losing
//! each domain leaves.

use std::collections::BTreeMap;

use ome_spread_core::explain::{Explained, explain, text};
use ome_spread_core::labels;
use ome_spread_core::loss::{self, Loss};
use ome_spread_core::ome::namespace;
use ome_spread_core::pod::Pod;
use ome_spread_core::rebalance::Move;
use ome_spread_core::settings::Settings;
use serde_json::{Value, json};

use crate::input;

pub fn diagnose(objects: &str, settings: &str) -> Value {
    answer(objects, settings).unwrap_or_else(|error| json!({ "error": error }))
}

fn answer(objects: &str, settings: &str) -> Result<Value, String> {
    let (_, settings) = input::settings(settings)?;
    let objects = input::objects(objects)?;
    let services: Vec<Value> = (objects.parts.services.iter())
        .map(|service| {
            let name = service.metadata.name.as_deref().unwrap_or_default();
            let namespace = namespace(service);
            if name.is_empty() {
                let error = format!("an InferenceService in {namespace} has no metadata.name: give it its name");
                return json!({ "name": name, "namespace": namespace, "error": error });
            }
            match explain(name, namespace, None, &objects, "the objects", &settings, false) {
                Ok(explained) => json!({
                    "name": name,
                    "namespace": namespace,
                    "components": explained.iter().map(|e| component(e, &settings)).collect::<Vec<_>>(),
                }),
                Err(error) => json!({ "name": name, "namespace": namespace, "error": error.to_string() }),
            }
        })
        .collect();
    if services.is_empty() {
        return Err(
            "objects: no InferenceService among them: paste the InferenceService with its runtime, \
                    InferenceReplicas, pods and nodes"
                .into(),
        );
    }
    Ok(json!({ "services": services }))
}

fn component(explained: &Explained, settings: &Settings) -> Value {
    let report = &explained.report;
    json!({
        "component": explained.component,
        "replica": explained.replica.metadata.name,
        "tables": explained.tables,
        "text": text(std::slice::from_ref(explained)),
        "reason": report.reason.as_str(),
        "status": report.reason.status(),
        "why": report.message,
        "action": explained.what_to_do(),
        "key": report.in_effect.domain_key(),
        "skew": report.skew,
        "maxSkew": settings.max_skew,
        "domains": picture(explained),
        "moves": moves(explained),
        "losses": losses(explained),
    })
}

/// What losing each domain or rack leaves, as `explain` prints it: the table (header first) and
/// the sentence on the worst loss; and for the picture, each domain's lost Instances (by their
/// leader or only pod) and the zone each repair would go to. Null when nothing can be lost (no
/// key, no Instance).
fn losses(explained: &Explained) -> Value {
    if explained.losses.is_empty() {
        return Value::Null;
    }
    let lost = |l: &Loss| json!({ "domain": l.domain, "lost": l.lost, "placedAgain": l.placed_again });
    let domains: Vec<Value> = explained.losses.iter().map(lost).collect();
    json!({
        "table": loss::table(&explained.losses),
        "sentence": loss::sentence(&explained.losses),
        "domains": domains,
    })
}

/// The eligible domains in order, each with the Instances the diagnosis counts there, then
/// (under `null`) those it counts nowhere. An Instance's pods are listed leader first, each with
/// its node (`null` while Pending).
fn picture(explained: &Explained) -> Vec<Value> {
    let mut domains: BTreeMap<Option<&str>, Vec<Value>> = explained
        .report
        .instances_per_domain
        .keys()
        .map(|d| (Some(d.as_str()), Vec::new()))
        .collect();
    for instance in &explained.instances {
        let anchor = instance.pods[0];
        let pod = |p: &&Pod| json!({"name": p.metadata.name, "runner": p.label(labels::RUNNER), "node": p.node()});
        let pods: Vec<Value> = instance.pods.iter().map(pod).collect();
        let index = anchor.label(labels::INSTANCE_INDEX);
        let box_ = json!({ "index": index, "pods": pods });
        domains.entry(instance.domain.as_deref()).or_default().push(box_);
    }
    let counted_nowhere = domains.remove(&None);
    let mut columns: Vec<Value> = domains
        .into_iter()
        .map(|(domain, instances)| json!({ "domain": domain, "instances": instances }))
        .collect();
    if let Some(instances) = counted_nowhere {
        columns.push(json!({ "domain": null, "instances": instances }));
    }
    columns
}

/// The rebalance plan's moves, in order, each with the command that requests it.
fn moves(explained: &Explained) -> Vec<Value> {
    let Ok(plan) = &explained.plan else {
        return Vec::new();
    };
    let command = |m: &Move| m.command(explained.service, explained.component, explained.namespace);
    let moved = |m: &Move| {
        json!({"instance": m.instance, "fromNode": m.from_node, "fromDomain": m.from_domain,
        "toDomain": m.to_domain, "hintNodes": m.hint_nodes, "command": command(m)})
    };
    plan.moves.iter().map(moved).collect()
}
