//! Does the spread of a component hold, and if not, why: the seed's troubleshooting tables,
//! computed from the InferenceService, its runtime, the InferenceReplica, its pods and the nodes
//! (docs/controller.md). The first reason from the top that applies is the one reported.

use std::collections::{BTreeMap, BTreeSet};

use itertools::Itertools;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::instance::{self, anchor_labels, members};
use crate::labels;
use crate::nodes::{Node, Nodes, Selected, Selection};
use crate::ome::{InferenceReplica, InferenceService, Runtime, named};
use crate::pod::Pod;
use crate::rules::{completion, spread_constraint};
use crate::settings::Settings;
use crate::spread::{BadField, Spread, SpreadFields, SpreadSettings};

/// The objects of one component, as the API server (or `kubectl get -o yaml`) gives them.
pub struct Component<'a> {
    pub service: &'a InferenceService,
    /// The ServingRuntime or ClusterServingRuntime the service names, if it exists.
    pub runtime: Option<Runtime<'a>>,
    pub replica: &'a InferenceReplica,
    /// Its pods, borrowed from wherever the caller keeps them (a list of objects, an index).
    pub pods: Vec<&'a Pod>,
    pub nodes: &'a Nodes,
    /// Its Instances' anchors, one per Instance ([`instance::anchors`]), found once as it is built.
    pub anchors: Vec<&'a Pod>,
    /// The nodes its anchors select, taints ignored and honoured, selected once as it is built:
    /// the diagnosis, the plan and the losses each read them.
    selected: Selected<'a>,
}

impl<'a> Component<'a> {
    pub fn new(
        service: &'a InferenceService,
        runtime: Option<Runtime<'a>>,
        replica: &'a InferenceReplica,
        pods: impl IntoIterator<Item = &'a Pod>,
        nodes: &'a Nodes,
    ) -> Self {
        let pods: Vec<&Pod> = pods.into_iter().collect();
        let name = service.meta().name.as_deref().unwrap_or_default();
        let anchors = instance::anchors(&pods, name, &replica.spec.component);
        let selected = nodes.selected(&selections(&anchors));
        Self {
            service,
            runtime,
            replica,
            pods,
            nodes,
            anchors,
            selected,
        }
    }

    /// `engine` or `decoder`: the replica's component.
    pub fn kind(&self) -> &'a str {
        &self.replica.spec.component
    }

    pub(crate) fn service_name(&self) -> &'a str {
        self.service.meta().name.as_deref().unwrap_or_default()
    }

    /// The nodes the anchors select, and under `honor_taints` only those they tolerate.
    pub(crate) fn selected(&self, honor_taints: bool) -> &[&'a Node] {
        if honor_taints {
            &self.selected.tolerated
        } else {
            &self.selected.any
        }
    }

    /// The nodes whose domains count, by Kubernetes' rules: those the anchors select, and under
    /// their constraint's `nodeTaintsPolicy: Honor` only those they tolerate.
    pub(crate) fn eligible(&self, key: &str) -> &[&'a Node] {
        self.selected(self.honors_taints(key))
    }

    /// Does the anchors' constraint on `key` say `nodeTaintsPolicy: Honor`?
    pub(crate) fn honors_taints(&self, key: &str) -> bool {
        let honors = |c: &Value| c["topologyKey"] == key && c["nodeTaintsPolicy"] == "Honor";
        self.anchors.iter().any(|pod| pod.constraints().iter().any(honors))
    }
}

/// Why the spread holds or not, named as the `Spread` condition's reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, strum::IntoStaticStr, strum::VariantArray)]
pub enum Reason {
    SettingsNotProjected,
    InstanceSplit,
    NotRequested,
    NoKey,
    #[strum(serialize = "PreferredUnderOMEScheduler")]
    PreferredUnderOmeScheduler,
    PodsPredateChange,
    ConflictingConstraint,
    MissingLabel,
    DomainsFull,
    SingleDomain,
    Skewed,
    #[default]
    Satisfied,
}

impl Reason {
    /// Every reason, in the order the diagnosis tries them.
    pub const ALL: &[Reason] = <Self as strum::VariantArray>::VARIANTS;

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    /// Does the spread hold (or was none asked for)?
    pub fn holds(self) -> bool {
        matches!(self, Self::NotRequested | Self::Satisfied)
    }

    /// The `Spread` condition's status, as [`Self::holds`] says.
    pub fn status(self) -> &'static str {
        if self.holds() { "True" } else { "False" }
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Report {
    pub reason: Reason,
    /// What is the matter, naming the pods or nodes that cause it.
    pub message: String,
    /// What to do about it.
    pub action: &'static str,
    /// The replica's three fields, as OME reads them (an empty key is unset).
    pub projected: SpreadSettings,
    pub in_effect: SpreadSettings,
    /// Placed Instances (leaders or only pods) per eligible domain, empty domains included.
    pub instances_per_domain: BTreeMap<String, usize>,
    pub skew: usize,
}

/// Why a component cannot be diagnosed: a field whose value OME would not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DiagnosisError {
    /// `object` names where the three fields sit.
    #[error("{object}.{}: {} {}", .bad.field, .bad.value, .bad.why)]
    BadField { object: String, bad: BadField },
    /// Only an empty one: the diagnosis reads any other as a component of its own.
    #[error("InferenceReplica {replica} spec.component is \"\": must be engine or decoder")]
    NoComponent { replica: String },
}

/// A reason, what is the matter, and what to do.
type Finding = (Reason, String, &'static str);

/// Computes the report of one component: the first reason, in docs/controller.md's order, that
/// applies.
pub fn diagnose(component: &Component, settings: &Settings) -> Result<Report, DiagnosisError> {
    let replica = component.replica.name_any();
    let kind = component.kind();
    if kind.is_empty() {
        return Err(DiagnosisError::NoComponent { replica });
    }
    let in_replica = || format!("InferenceReplica {replica} spec");
    let projected = checked(component.replica.spec.spread.clone(), in_replica)?;
    let in_effect = settings_in_effect(component.service, component.runtime, kind)?;
    let mut report = Report {
        projected: projected.clone(),
        in_effect: in_effect.clone(),
        ..Report::default()
    };
    let split = || instance_split(component, in_effect.topology_key.as_deref()?);
    let finding = if projected != in_effect {
        let (projected, in_effect) = (describe(&projected), describe(&in_effect));
        (
            Reason::SettingsNotProjected,
            format!("the replica carries {projected} but the settings in effect are {in_effect}"),
            "Check that OME v1.3 or later runs the component on OMENative; it projects the settings in effect onto the InferenceReplica.",
        )
    } else if let Some(split) = split() {
        split
    } else {
        match (in_effect.spread, in_effect.domain_key()) {
            (None, _) => (
                Reason::NotRequested,
                "SPREAD is <none>: nothing sets topologySpread".into(),
                "Set topologySpread on the engine or decoder, or in its runtime, to spread its Instances.",
            ),
            (Some(_), None) => (
                Reason::NoKey,
                "SPREAD-KEY and TOPOLOGY-KEY are both <none>: OME has no key to spread on".into(),
                "Set topologySpreadKey.",
            ),
            (Some(spread), Some(key)) => preferred_under_ome_scheduler(&component.anchors, spread)
                .or_else(|| pods_predate_or_conflict(component, spread, key, settings))
                .unwrap_or_else(|| placement(component, key, settings, &mut report)),
        }
    };
    (report.reason, report.message, report.action) = finding;
    Ok(report)
}

/// The three fields checked (P4), a bad one named with its `object`.
fn checked(fields: SpreadFields, object: impl Fn() -> String) -> Result<SpreadSettings, DiagnosisError> {
    SpreadSettings::from_fields(fields).map_err(|bad| DiagnosisError::BadField { object: object(), bad })
}

/// M1: the settings in effect for the `kind` component: the InferenceService's values over its
/// runtime's, field by field, as OME merges them (an InferenceService's `""` key replaces the
/// runtime's). Each object's fields are checked first, so that a bad one is named with its object.
pub fn settings_in_effect(
    service: &InferenceService,
    runtime: Option<Runtime>,
    kind: &str,
) -> Result<SpreadSettings, DiagnosisError> {
    let in_service = || format!("{} spec.{kind}", named(service));
    let from_service = service.component(kind).cloned().unwrap_or_default();
    checked(from_service.clone(), in_service)?;
    let from_runtime = runtime.and_then(|r| r.config(kind)).cloned().unwrap_or_default();
    if let Some(runtime) = runtime {
        let in_runtime = || format!("{} spec.{kind}Config", runtime.named());
        checked(from_runtime.clone(), in_runtime)?;
    }
    checked(from_service.over(from_runtime), in_service)
}

fn names<'a>(pods: impl IntoIterator<Item = &'a &'a Pod>) -> String {
    pods.into_iter().map(|p| p.name()).join(", ")
}

/// InstanceSplit: an Instance whose placed pods run on nodes of more than one rack (value of
/// `rack`, the `topologyKey`), or on a node without it, so that it is not inside one NVLink
/// domain. Its pods from before `topologyKey` was set, or a leader placed apart from workers that
/// stayed, keep running there; a migration makes the Instance anew, its workers beside its leader.
fn instance_split(component: &Component, rack: &str) -> Option<Finding> {
    let mut split = Vec::new();
    for anchor in &component.anchors {
        // The anchor counted and its workers (the other slot's anchor is being drained), in the
        // same words whatever order the pods come in. Pods on a node the objects do not hold are
        // left out: their rack is not known.
        let placed: Vec<(&str, &str, Option<&String>)> = (members(&component.pods, anchor).into_iter())
            .filter_map(|pod| {
                let node = component.nodes.get(pod.node()?)?;
                Some((pod.name(), node.name.as_str(), node.labels.get(rack)))
            })
            .collect();
        let one_rack = placed.iter().all(|(_, _, r)| r.is_some() && *r == placed[0].2);
        if placed.len() > 1 && !one_rack {
            let index = anchor.label(labels::INSTANCE_INDEX).unwrap_or_default();
            let pods = (placed.iter())
                .map(|(pod, node, rack)| format!("{pod} on {node} ({})", rack.map_or("<none>", String::as_str)))
                .join(", ");
            split.push((index.parse().unwrap_or(u32::MAX), format!("Instance {index}: {pods}")));
        }
    }
    let split = split.into_iter().sorted().map(|(_, instance)| instance).join("; ");
    (!split.is_empty()).then(|| {
        (
            Reason::InstanceSplit,
            format!("the pods of an Instance run in more than one rack of {rack}, or on a node without it: {split}"),
            "Request an Instance migration of each split Instance: OME makes it anew, its workers in its leader's rack.",
        )
    })
}

fn preferred_under_ome_scheduler(anchors: &[&Pod], spread: Spread) -> Option<Finding> {
    let under_ome = |pod: &&Pod| pod.spec.scheduler_name.as_deref() == Some("ome-scheduler");
    (spread == Spread::Preferred && anchors.iter().any(under_ome)).then(|| {
        (
            Reason::PreferredUnderOmeScheduler,
            "WHEN is ScheduleAnyway on pods that the OME scheduler places: under its defaults, Preferred has no effect"
                .into(),
            "Use Required.",
        )
    })
}

/// PodsPredateChange, then ConflictingConstraint. The constraint in effect is OME's own on the
/// key, as P12 completes it. OME's own on another key is from before a change (P6 keeps it);
/// anyone else's on the key is kept, and conflicts when its WHEN differs.
fn pods_predate_or_conflict(component: &Component, spread: Spread, key: &str, settings: &Settings) -> Option<Finding> {
    let (mut predating, mut conflicting) = (Vec::new(), Vec::new());
    for pod in &component.anchors {
        let instance = anchor_labels(pod, component.service_name(), component.kind());
        let expected = spread_constraint(&instance, spread, key, settings);
        let constraints = pod.constraints();
        let ours = |c: &&Value| expected.label_selector.is_exactly_in(c);
        let on_key = |c: &&Value| c["topologyKey"] == key;
        let when_differs = |c: &Value| c["whenUnsatisfiable"] != expected.when_unsatisfiable;
        let own = constraints.iter().find(|c| on_key(c) && ours(c));
        let theirs = constraints.iter().find(on_key);
        match own {
            Some(own) if when_differs(own) || completion(own, settings).is_some() => predating.push(*pod),
            None if constraints.iter().any(|c| ours(&c)) || theirs.is_none() => predating.push(*pod),
            None if theirs.is_some_and(when_differs) => conflicting.push(*pod),
            _ => {}
        }
    }
    if !predating.is_empty() {
        return Some((
            Reason::PodsPredateChange,
            format!(
                "the pods {} are older than the change: they have no SPREAD-KEY, or a SPREAD-KEY or WHEN from before it",
                names(&predating)
            ),
            "Request an Instance migration to move them.",
        ));
    }
    (!conflicting.is_empty()).then(|| {
        (
            Reason::ConflictingConstraint,
            format!("WHEN isn't what you set on {}: your runtime or InferenceService already sets a spread constraint on {key}, and OME keeps it", names(&conflicting)),
            "Remove that constraint.",
        )
    })
}

/// MissingLabel, DomainsFull, then where the Instances run: SingleDomain, Skewed or Satisfied.
/// Counts the Instances per eligible domain into `report`.
fn placement(component: &Component, key: &str, settings: &Settings, report: &mut Report) -> Finding {
    let (anchors, selected) = (&component.anchors, component.eligible(key));
    let unlabelled = selected.iter().filter(|n| !n.labels.contains_key(key));
    let unlabelled = unlabelled.map(|n| &n.name).join(", ");
    if !unlabelled.is_empty() {
        return (
            Reason::MissingLabel,
            format!("the nodes {unlabelled} lack the label {key}, so Required skips them"),
            "Label the nodes, or correct topologySpreadKey.",
        );
    }
    let pending = names(anchors.iter().filter(|pod| held_by_spread(pod)));
    if !pending.is_empty() {
        return (
            Reason::DomainsFull,
            format!("{pending} stays Pending: the domains with the fewest of the component's Instances are full"),
            "Free room in one of them, or run fewer Instances.",
        );
    }
    report.instances_per_domain = instances_per_domain(component, key, selected);
    let counts = report.instances_per_domain.values();
    report.skew = counts.clone().max().unwrap_or(&0) - counts.min().unwrap_or(&0);
    where_instances_run(report, anchors, key, settings)
}

/// The node labels the diagnosis and the plan of a component read: its spread key and rack key,
/// and those its anchors' node selection names. A change of any other label of a node (a GPU
/// Feature Discovery timestamp) changes nothing they say.
pub fn node_keys(component: &Component, report: &Report) -> BTreeSet<String> {
    let in_effect = [&report.in_effect.spread_key, &report.in_effect.topology_key];
    let selections = selections(&component.anchors);
    let selected = selections.iter().flat_map(Selection::label_keys).map(str::to_owned);
    in_effect.into_iter().flatten().cloned().chain(selected).collect()
}

/// The anchors' node selections: those of one component share a template, so each distinct
/// one is kept once.
fn selections(anchors: &[&Pod]) -> Vec<Selection> {
    anchors.iter().map(|pod| Selection::of_pod(pod)).unique().collect()
}

/// Placed Instances (their anchors' nodes) per eligible domain, empty domains included.
fn instances_per_domain(component: &Component, key: &str, eligible: &[&Node]) -> BTreeMap<String, usize> {
    // Inserted one by one: many nodes share few domains, and `collect` would sort every node's
    // domain, duplicates and all, before it dropped the duplicates.
    let mut domains = BTreeSet::new();
    domains.extend(eligible.iter().filter_map(|n| n.labels.get(key)));
    let mut per_domain: BTreeMap<String, usize> = domains.into_iter().map(|d| (d.clone(), 0)).collect();
    for pod in &component.anchors {
        if let Some(count) = instance::domain_of(component.nodes, pod, key).and_then(|d| per_domain.get_mut(d)) {
            *count += 1;
        }
    }
    per_domain
}

/// SingleDomain, Skewed or Satisfied, from the Instances counted per eligible domain.
fn where_instances_run(report: &Report, anchors: &[&Pod], key: &str, settings: &Settings) -> Finding {
    let per_domain = &report.instances_per_domain;
    if anchors.len() > 1 && per_domain.len() == 1 {
        let domain = per_domain.keys().next().map(String::as_str).unwrap_or_default();
        return (
            Reason::SingleDomain,
            format!("only one domain ({domain}) has a node the pods select"),
            "Put the model on nodes in a second domain, as Choose the nodes shows.",
        );
    }
    if report.skew > settings.max_skew as usize {
        let counts = per_domain.iter().map(|(domain, n)| format!("{domain}: {n}")).join(", ");
        let (skew, max_skew) = (report.skew, settings.max_skew);
        return (
            Reason::Skewed,
            format!("Instances per domain ({counts}) differ by {skew}, more than maxSkew {max_skew}"),
            "Request an Instance migration to move an Instance out of the fullest domain.",
        );
    }
    let used = per_domain.values().filter(|n| **n > 0).count();
    let placed: usize = per_domain.values().sum();
    // Only placed Instances are in a domain: those still Pending are named apart.
    let pending: Vec<&Pod> = anchors.iter().copied().filter(|pod| pod.node().is_none()).collect();
    let placed_ones = if pending.is_empty() { "" } else { " placed" };
    let run_in = match (placed, used) {
        (0, _) => format!("no Instance runs in a domain of {key}"),
        (1, _) => format!("the 1{placed_ones} Instance runs in 1 domain of {key}"),
        (n, 1) => format!("the {n}{placed_ones} Instances run in 1 domain of {key}"),
        (n, used) => format!("the {n}{placed_ones} Instances run in {used} different domains of {key}"),
    };
    let message = match pending.len() {
        // OME has not made the pods yet: nothing to count.
        _ if anchors.is_empty() => "no Instance has a pod yet".to_owned(),
        0 => run_in,
        1 => format!("{run_in}; {} is Pending", names(&pending)),
        _ => format!("{run_in}; {} are Pending", names(&pending)),
    };
    // In one domain (one Instance, or a maxSkew at least their number) the spread holds, but
    // losing that domain is not survived: the one sentence every other Satisfied says is false.
    let action = match used {
        0 => "Nothing yet: the Instances count once they run in a domain.",
        1 if !pending.is_empty() => {
            "Nothing yet: losing that domain leaves no Instance serving until the Pending ones are placed."
        }
        1 => {
            "Nothing the spread requires, but losing that domain leaves no Instance serving. To survive it, \
             run two Instances or more with a maxSkew below their number, on nodes in two domains or more."
        }
        _ => "Nothing: losing one domain leaves the Instances in the others serving.",
    };
    (Reason::Satisfied, message, action)
}

/// A pod the scheduler holds back on its spread constraint itself: `didn't match pod topology
/// spread constraints` with no `(missing required label)` suffix.
fn held_by_spread(pod: &Pod) -> bool {
    const SPREAD: &str = "didn't match pod topology spread constraints";
    pod.node().is_none()
        && pod.condition("PodScheduled").is_some_and(|c| {
            // What follows each mention of the spread constraints.
            let mut after = c.message.as_deref().unwrap_or_default().split(SPREAD).skip(1);
            c.status == "False" && after.any(|after| !after.starts_with(" (missing required label)"))
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
