//! Does the spread of a component hold, and if not, why: the seed's troubleshooting tables,
//! computed from the InferenceService, its runtime, the InferenceReplica, its pods and the nodes
//! (SPEC section 4). The first reason from the top that applies is the one reported.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::instance::{InstanceLabels, Runner};
use crate::labels;
use crate::nodes::{Nodes, Selection};
use crate::rules::{completion, spread_constraint};
use crate::settings::Settings;
use crate::shown::shown;
use crate::spread::{Spread, SpreadFields, SpreadSettings};

/// The objects of one component, as the API server (or `kubectl get -o yaml`) gives them.
pub struct Component<'a> {
    pub service: &'a Value,
    /// The ServingRuntime or ClusterServingRuntime the service names, if it exists.
    pub runtime: Option<&'a Value>,
    pub replica: &'a Value,
    pub pods: &'a [Value],
    pub nodes: &'a Nodes,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reason {
    SettingsNotProjected,
    NotRequested,
    NoKey,
    PreferredUnderOmeScheduler,
    PodsPredateChange,
    ConflictingConstraint,
    MissingLabel,
    DomainsFull,
    SingleDomain,
    Skewed,
    Satisfied,
}

impl Reason {
    pub const ALL: [Reason; 11] = [
        Self::SettingsNotProjected,
        Self::NotRequested,
        Self::NoKey,
        Self::PreferredUnderOmeScheduler,
        Self::PodsPredateChange,
        Self::ConflictingConstraint,
        Self::MissingLabel,
        Self::DomainsFull,
        Self::SingleDomain,
        Self::Skewed,
        Self::Satisfied,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::SettingsNotProjected => "SettingsNotProjected",
            Self::NotRequested => "NotRequested",
            Self::NoKey => "NoKey",
            Self::PreferredUnderOmeScheduler => "PreferredUnderOMEScheduler",
            Self::PodsPredateChange => "PodsPredateChange",
            Self::ConflictingConstraint => "ConflictingConstraint",
            Self::MissingLabel => "MissingLabel",
            Self::DomainsFull => "DomainsFull",
            Self::SingleDomain => "SingleDomain",
            Self::Skewed => "Skewed",
            Self::Satisfied => "Satisfied",
        }
    }

    /// The `Spread` condition's status: does the spread hold (or was none asked for)?
    pub fn holds(self) -> bool {
        matches!(self, Self::NotRequested | Self::Satisfied)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub reason: Reason,
    /// What is the matter, naming the pods or nodes that cause it.
    pub message: String,
    /// What to do about it.
    pub action: &'static str,
    pub in_effect: SpreadSettings,
    /// Placed Instances (leaders or only pods) per eligible domain, empty domains included.
    pub instances_per_domain: BTreeMap<String, usize>,
    pub skew: usize,
}

/// Computes the report of one component. Errors name a field whose value OME would not accept.
pub fn diagnose(component: &Component, settings: &Settings) -> Result<Report, String> {
    let replica_spec = &component.replica["spec"];
    let name = component.replica["metadata"]["name"].as_str().unwrap_or_default();
    let kind = replica_spec["component"]
        .as_str()
        .filter(|component| !component.is_empty())
        .ok_or_else(|| {
            format!(
                "InferenceReplica {name} spec.component is {}: must be engine or decoder",
                shown(&replica_spec["component"])
            )
        })?;
    let read = |fields: &Value, what: String| {
        let parsed: SpreadFields = serde_json::from_value(fields.clone()).unwrap_or_default();
        SpreadSettings::from_fields(parsed).map_err(|b| format!("{what}.{}: {} {}", b.field, b.value, b.why))
    };
    let projected = read(replica_spec, format!("InferenceReplica {name} spec"))?;
    let from_service = read(
        &component.service["spec"][kind],
        format!("InferenceService spec.{kind}"),
    )?;
    let from_runtime = match component.runtime {
        Some(runtime) => read(
            &runtime["spec"][format!("{kind}Config")],
            format!("runtime spec.{kind}Config"),
        )?,
        None => SpreadSettings::default(),
    };
    let in_effect = from_service.over(&from_runtime);
    let mut report = Report {
        reason: Reason::Satisfied,
        message: String::new(),
        action: "",
        in_effect: in_effect.clone(),
        instances_per_domain: BTreeMap::new(),
        skew: 0,
    };

    if projected != in_effect {
        return Ok(report.because(
            Reason::SettingsNotProjected,
            format!("the replica carries {} but the settings in effect are {}", describe(&projected), describe(&in_effect)),
            "Check that OME v1.3 or later runs the component on OMENative; it projects the settings in effect onto the InferenceReplica.",
        ));
    }
    let Some(spread) = in_effect.spread else {
        return Ok(report.because(
            Reason::NotRequested,
            "SPREAD is <none>: nothing sets topologySpread".into(),
            "Set topologySpread on the engine or decoder, or in its runtime, to spread its Instances.",
        ));
    };
    let Some(key) = in_effect.domain_key() else {
        return Ok(report.because(
            Reason::NoKey,
            "SPREAD-KEY and TOPOLOGY-KEY are both <none>: OME has no key to spread on".into(),
            "Set topologySpreadKey.",
        ));
    };
    let service = component.service["metadata"]["name"].as_str().unwrap_or_default();
    let anchors: Vec<&Value> = component
        .pods
        .iter()
        .filter(|pod| {
            let labels = &pod["metadata"]["labels"];
            labels[labels::INFERENCE_SERVICE] == service
                && labels[labels::COMPONENT] == kind
                && matches!(labels[labels::RUNNER].as_str(), Some("default" | "leader"))
        })
        .collect();
    let names = |pods: &[&Value]| {
        pods.iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap_or_default())
            .collect::<Vec<_>>()
            .join(", ")
    };

    if spread == Spread::Preferred
        && anchors
            .iter()
            .any(|pod| pod["spec"]["schedulerName"] == "ome-scheduler")
    {
        return Ok(report.because(
            Reason::PreferredUnderOmeScheduler,
            "WHEN is ScheduleAnyway on pods that the OME scheduler places: under its defaults, Preferred has no effect"
                .into(),
            "Use Required.",
        ));
    }

    let (mut predating, mut conflicting) = (Vec::new(), Vec::new());
    for pod in &anchors {
        let runner = if pod["metadata"]["labels"][labels::RUNNER] == "leader" {
            Runner::Leader
        } else {
            Runner::Default
        };
        let instance = InstanceLabels {
            service: service.into(),
            component: kind.into(),
            runner,
        };
        let expected = spread_constraint(&instance, spread, key, settings);
        let constraints = pod["spec"]["topologySpreadConstraints"]
            .as_array()
            .map_or(&[][..], Vec::as_slice);
        let ours = |c: &&Value| expected.selector().is_exactly_in(c);
        let on_key = |c: &&Value| c["topologyKey"] == key;
        let when_differs = |c: &Value| c["whenUnsatisfiable"] != expected.when_unsatisfiable();
        // The constraint in effect is OME's own on the key, as P12 completes it. OME's own on
        // another key is from before a change (P6 keeps it); anyone else's on the key is kept.
        match (
            constraints.iter().find(|c| on_key(c) && ours(c)),
            constraints.iter().find(on_key),
        ) {
            (Some(own), _) if when_differs(own) || completion(own, settings).is_some() => predating.push(*pod),
            (Some(_), _) => {}
            _ if constraints.iter().any(|c| ours(&c)) => predating.push(*pod),
            (None, Some(theirs)) if when_differs(theirs) => conflicting.push(*pod),
            (None, Some(_)) => {}
            (None, None) => predating.push(*pod),
        }
    }
    if !predating.is_empty() {
        return Ok(report.because(
            Reason::PodsPredateChange,
            format!("the pods {} are older than the change: they have no SPREAD-KEY, or a SPREAD-KEY or WHEN from before it", names(&predating)),
            "Request an Instance migration to move them.",
        ));
    }
    if !conflicting.is_empty() {
        return Ok(report.because(
            Reason::ConflictingConstraint,
            format!("WHEN isn't what you set on {}: your runtime or InferenceService already sets a spread constraint on {key}, and OME keeps it", names(&conflicting)),
            "Remove that constraint.",
        ));
    }

    // The anchors of one component share a template: match each distinct selection once.
    let mut selections: Vec<Selection> = Vec::new();
    for selection in anchors.iter().map(|pod| Selection::of_pod(pod)) {
        if !selections.contains(&selection) {
            selections.push(selection);
        }
    }
    let honor_taints = anchors.iter().any(|pod| {
        pod["spec"]["topologySpreadConstraints"].as_array().is_some_and(|cs| {
            cs.iter()
                .any(|c| c["topologyKey"] == key && c["nodeTaintsPolicy"] == "Honor")
        })
    });
    let selected = component.nodes.selected(&selections, honor_taints);
    let unlabelled: Vec<&str> = selected
        .iter()
        .filter(|n| !n.labels.contains_key(key))
        .map(|n| n.name.as_str())
        .collect();
    if !unlabelled.is_empty() {
        return Ok(report.because(
            Reason::MissingLabel,
            format!(
                "the nodes {} lack the label {key}, so Required skips them",
                unlabelled.join(", ")
            ),
            "Label the nodes, or correct topologySpreadKey.",
        ));
    }

    let pending: Vec<&Value> = anchors.iter().copied().filter(|pod| held_by_spread(pod)).collect();
    if !pending.is_empty() {
        return Ok(report.because(
            Reason::DomainsFull,
            format!(
                "{} stays Pending: the domains with the fewest of the component's Instances are full",
                names(&pending)
            ),
            "Free room in one of them, or run fewer Instances.",
        ));
    }

    let domains: BTreeSet<&str> = selected
        .iter()
        .filter_map(|n| n.labels.get(key).map(String::as_str))
        .collect();
    report.instances_per_domain = domains.iter().map(|d| ((*d).to_owned(), 0)).collect();
    for pod in &anchors {
        let node = pod["spec"]["nodeName"]
            .as_str()
            .and_then(|name| component.nodes.get(name));
        let domain = node.and_then(|n| n.labels.get(key));
        if let Some(count) = domain.and_then(|d| report.instances_per_domain.get_mut(d)) {
            *count += 1;
        }
    }
    let counts = report.instances_per_domain.values();
    report.skew = counts.clone().max().unwrap_or(&0) - counts.min().unwrap_or(&0);

    if anchors.len() > 1 && domains.len() == 1 {
        let domain = domains.iter().next().copied().unwrap_or_default();
        return Ok(report.because(
            Reason::SingleDomain,
            format!("only one domain ({domain}) has a node the pods select"),
            "Put the model on nodes in a second domain, as Choose the nodes shows.",
        ));
    }
    if report.skew > settings.max_skew as usize {
        let per_domain: Vec<String> = report
            .instances_per_domain
            .iter()
            .map(|(d, n)| format!("{d}: {n}"))
            .collect();
        return Ok(report.because(
            Reason::Skewed,
            format!(
                "Instances per domain ({}) differ by {}, more than maxSkew {}",
                per_domain.join(", "),
                report.skew,
                settings.max_skew
            ),
            "Request an Instance migration to move an Instance out of the fullest domain.",
        ));
    }
    let used = report.instances_per_domain.values().filter(|n| **n > 0).count();
    Ok(report.because(
        Reason::Satisfied,
        format!(
            "the {} Instances run in {used} different domains of {key}",
            anchors.len()
        ),
        "Nothing: losing one domain leaves the Instances in the others serving.",
    ))
}

impl Report {
    fn because(&self, reason: Reason, message: String, action: &'static str) -> Report {
        Report {
            reason,
            message,
            action,
            ..self.clone()
        }
    }
}

/// A pod the scheduler holds back on its spread constraint itself: `didn't match pod topology
/// spread constraints` with no `(missing required label)` suffix.
fn held_by_spread(pod: &Value) -> bool {
    const SPREAD: &str = "didn't match pod topology spread constraints";
    pod["spec"]["nodeName"].as_str().is_none()
        && pod["status"]["conditions"].as_array().is_some_and(|conditions| {
            conditions.iter().any(|c| {
                let message = c["message"].as_str().unwrap_or_default();
                c["type"] == "PodScheduled"
                    && c["status"] == "False"
                    && message
                        .match_indices(SPREAD)
                        .any(|(at, _)| !message[at + SPREAD.len()..].starts_with(" (missing required label)"))
            })
        })
}

fn describe(settings: &SpreadSettings) -> String {
    format!(
        "topologySpread {}, topologySpreadKey {}, topologyKey {}",
        settings.spread.map_or("<none>", Spread::as_str),
        settings.spread_key.as_deref().unwrap_or("<none>"),
        settings.topology_key.as_deref().unwrap_or("<none>")
    )
}
