//! What `ome-spread explain` and the playground show of an InferenceService: for each component,
//! the seed's Step 2 tables, then the diagnosis' reason, why, and what to do. From saved objects
//! (`kubectl get -o yaml`, Lists included) or a live cluster's, the same way.

use std::collections::HashMap;
use std::fmt::Write;
use std::ptr;

use itertools::Itertools;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use crate::action;
use crate::alfred;
use crate::columns;
use crate::diagnosis::{self, Component, DiagnosisError, Report};
use crate::instance::{COMPONENTS, component_of, domain_of, same_instance};
use crate::loss::{self, Loss};
use crate::nodes::{Node, Nodes, Selection};
use crate::ome::{ClusterServingRuntime, InferenceReplica, InferenceService, Runtime, ServingRuntime, namespace};
use crate::pod::Pod;
use crate::read::{Unusable, typed};
use crate::rebalance::{self, Domain, NoPlan, Plan};
use crate::replica::{ReplicaRef, RuntimeRef};
use crate::room::{self, Requested, Unreadable};
use crate::settings::Settings;
use crate::spread::Spread;

/// Kubernetes objects, with every List's items taken out of it; read once: OME's objects into
/// their model, the nodes, the requests per node, and the pods by component, so that explaining
/// every InferenceService of a large cluster never scans every object for each. Objects of other
/// kinds take no part.
pub struct Objects {
    pub parts: Parts,
    pub nodes: Nodes,
    requested: Requested,
    /// (namespace, InferenceService, component) -> its pods, in order, from OME's labels.
    by_component: HashMap<(String, String, String), Vec<usize>>,
}

/// OME's objects and the pods, each read into its model.
#[derive(Default)]
pub struct Parts {
    pub services: Vec<InferenceService>,
    pub runtimes: Vec<ServingRuntime>,
    pub cluster_runtimes: Vec<ClusterServingRuntime>,
    pub replicas: Vec<InferenceReplica>,
    pub pods: Vec<Pod>,
}

impl Objects {
    /// The objects, or the first that cannot be read, named.
    pub fn new(documents: Vec<Value>) -> Result<Self, Unusable> {
        let (mut parts, mut nodes) = (Parts::default(), Vec::new());
        for object in documents.into_iter().flat_map(items) {
            match object["kind"].as_str().unwrap_or_default() {
                "InferenceService" => parts.services.push(typed(&object)?),
                "ServingRuntime" => parts.runtimes.push(typed(&object)?),
                "ClusterServingRuntime" => parts.cluster_runtimes.push(typed(&object)?),
                "InferenceReplica" => parts.replicas.push(typed(&object)?),
                "Node" => nodes.push(Node::from_json(&object)?),
                "Pod" => parts.pods.push(typed(&object)?),
                _ => {}
            }
        }
        Ok(Self::of(parts, nodes)?)
    }

    /// Objects already read (a live cluster's, listed as their models), or a pod's requests that
    /// cannot be counted, named.
    pub fn of(parts: Parts, nodes: Vec<Node>) -> Result<Self, Unreadable> {
        let by_component = (parts.pods.iter().enumerate())
            .filter_map(|(i, pod)| Some((key(component_of(pod)?), i)))
            .into_group_map();
        // The room a plan counts on is taken by every pod bound to a node, of any workload.
        let requested = room::requested(&parts.pods)?;
        Ok(Self {
            nodes: Nodes::new(nodes),
            parts,
            requested,
            by_component,
        })
    }

    pub fn service(&self, namespace: &str, name: &str) -> Option<&InferenceService> {
        named_in(&self.parts.services, namespace, name)
    }

    /// The pods of an InferenceService's component, by OME's labels.
    pub fn pods_of(&self, namespace: &str, service: &str, component: &str) -> Vec<&Pod> {
        let pods = self.by_component.get(&key((namespace, service, component)));
        pods.into_iter().flatten().map(|&i| &self.parts.pods[i]).collect()
    }

    /// The ServingRuntime or ClusterServingRuntime that `service` names, if it is among them.
    pub fn runtime_of(&self, service: &InferenceService) -> Option<Runtime<'_>> {
        match service.runtime()? {
            RuntimeRef::Namespaced(name) => {
                named_in(&self.parts.runtimes, namespace(service), name).map(Runtime::Namespaced)
            }
            RuntimeRef::Cluster(name) => (self.parts.cluster_runtimes.iter())
                .find(|r| r.name_any() == name)
                .map(Runtime::Cluster),
        }
    }
}

fn key((namespace, service, component): (&str, &str, &str)) -> (String, String, String) {
    (namespace.to_owned(), service.to_owned(), component.to_owned())
}

/// A document's objects: a List's items, or the document itself.
pub fn items(mut document: Value) -> Vec<Value> {
    if document["kind"].as_str().is_some_and(|k| k.ends_with("List"))
        && let Some(Value::Array(items)) = document.get_mut("items")
    {
        return std::mem::take(items);
    }
    vec![document]
}

fn named_in<'a, K: Resource>(objects: &'a [K], namespace: &str, name: &str) -> Option<&'a K> {
    (objects.iter()).find(|o| crate::ome::namespace(*o) == namespace && o.name_any() == name)
}

/// Why nothing can be explained. The InferenceService is named `namespace/name`, or by its name
/// alone where no namespace was given; the origin is where the objects came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExplainError {
    /// The InferenceService, the origin.
    #[error("no InferenceService {0} in {1}")]
    NoService(String, String),
    #[error("InferenceService {service} is in more than one namespace in {origin} ({namespaces}): name one with -n")]
    SeveralNamespaces {
        service: String,
        origin: String,
        namespaces: String,
    },
    /// `runtime`: its kind and name, as kubectl names it.
    #[error("{runtime} is not in {origin}: InferenceService {service} runs on it")]
    NoRuntime {
        runtime: String,
        service: String,
        origin: String,
    },
    #[error("InferenceService {0} does not run on OMENative: nothing spreads its Instances")]
    NotOmeNative(String),
    /// The InferenceService, and ` for its engine` when one component was asked for, else empty.
    #[error("InferenceService {0} has no InferenceReplica{1}: the component doesn't run on OMENative")]
    NoReplica(String, String),
    #[error(transparent)]
    Diagnosis(#[from] DiagnosisError),
}

/// The namespace of the InferenceService `service` among saved objects that name no namespace
/// to look in: the one the objects give it, when only one does.
pub fn namespace_of_service(objects: &Objects, service: &str, origin: &str) -> Result<String, ExplainError> {
    let named = objects.parts.services.iter().filter(|o| o.name_any() == service);
    let namespaces: Vec<&str> = named.map(namespace).sorted().dedup().collect();
    let (service, origin) = (service.to_owned(), origin.to_owned());
    match namespaces[..] {
        [namespace] => Ok(namespace.to_owned()),
        [] => Err(ExplainError::NoService(service, origin)),
        _ => Err(ExplainError::SeveralNamespaces {
            service,
            origin,
            namespaces: namespaces.join(", "),
        }),
    }
}

/// One component explained: the seed's Step 2 tables (header row first), the diagnosis, and
/// the rebalance plan (docs/rebalance.md).
pub struct Explained<'a> {
    pub service: &'a str,
    pub namespace: &'a str,
    pub component: &'static str,
    pub replica: &'a InferenceReplica,
    pub tables: Vec<Table>,
    pub report: Report,
    pub plan: Result<Plan, NoPlan>,
    /// The eligible domains and the whole Instances each can still start.
    pub rooms: Vec<Domain>,
    /// What losing each domain or rack leaves, worst first.
    pub losses: Vec<Loss>,
    /// The Instances as the diagnosis counts them, for the playground's picture.
    pub instances: Vec<Drawn<'a>>,
    /// What OME's caretaker Alfred refuses to relocate, a note each ([`alfred::remarks`]).
    pub alfred: Vec<String>,
}

/// A table's rows, header first, each its cells.
pub type Table = Vec<Vec<String>>;

/// An Instance as the playground draws it: its leader or only pod first, then its workers, and
/// the eligible domain the diagnosis counts it in (None: counted in none, such as while its
/// leader is Pending, or workers whose leader is not there).
#[derive(Debug, PartialEq)]
pub struct Drawn<'a> {
    pub pods: Vec<&'a Pod>,
    pub domain: Option<String>,
}

impl Explained<'_> {
    /// What to do: see [`action::what_to_do`].
    pub fn what_to_do(&self) -> String {
        action::what_to_do(&self.report, &self.plan, &self.rooms, self.replica)
    }

    /// What `explain` prints of it: its tables, what losing a domain leaves, then its reason, why
    /// and what to do, with the whole plan under it (a move a line, with its command) and notes.
    fn text(&self) -> String {
        let mut text: String = self.tables.iter().map(|table| columns::table(table) + "\n").collect();
        if !self.losses.is_empty() {
            text += &columns::table(&loss::table(&self.losses));
            text.extend(loss::sentence(&self.losses).map(|sentence| sentence + "\n"));
            text.push('\n');
        }
        let reason = self.report.reason;
        let _ = writeln!(text, "Spread: {} ({})", reason.status(), reason.as_str());
        let _ = writeln!(text, "Why: {}.", self.report.message);
        let _ = writeln!(text, "What to do: {}", self.what_to_do());
        let moves = self.plan.as_ref().map_or(&[][..], |plan| &plan.moves);
        for (step, m) in moves.iter().enumerate() {
            let described = m.describe(self.service, self.component, self.namespace);
            let _ = writeln!(text, "  {}. {described}", step + 1);
        }
        text.extend(self.alfred.iter().map(|alfred| format!("Note: {alfred}\n")));
        text
    }
}

/// The components of `service` (or only `only`) that have an InferenceReplica, explained.
/// `source` names where the objects came from, for messages; `every_node`: list every node, not
/// a line per domain when there are more than [`NODES_LISTED`].
pub fn explain<'a>(
    service: &'a str,
    namespace: &'a str,
    only: Option<&str>,
    objects: &'a Objects,
    source: &str,
    settings: &Settings,
    every_node: bool,
) -> Result<Vec<Explained<'a>>, ExplainError> {
    let named = format!("{namespace}/{service}");
    let Some(isvc) = objects.service(namespace, service) else {
        return Err(ExplainError::NoService(named, source.into()));
    };
    if !isvc.on_omenative() {
        return Err(ExplainError::NotOmeNative(named));
    }
    let runtime = objects.runtime_of(isvc);
    // Without the runtime the settings in effect are not known: say which object is missing.
    if let (None, Some(runtime)) = (runtime, isvc.runtime()) {
        return Err(ExplainError::NoRuntime {
            runtime: format!("{} {}", runtime.kind(), runtime.name()),
            service: named,
            origin: source.into(),
        });
    }
    let mut explained = Vec::new();
    for component in COMPONENTS.into_iter().filter(|c| only.is_none_or(|o| o == *c)) {
        let name = ReplicaRef::for_component(namespace, service, component).name;
        let Some(replica) = named_in(&objects.parts.replicas, namespace, &name) else {
            continue;
        };
        let pods = objects.pods_of(namespace, service, component);
        let diagnosed = Component::new(isvc, runtime, replica, pods, &objects.nodes);
        let (report, requested) = (diagnosis::diagnose(&diagnosed, settings)?, &objects.requested);
        let rooms = rebalance::rooms(&diagnosed, &report, requested, usize::MAX);
        // Fields are evaluated in order: the report and the rooms are read before they move in.
        explained.push(Explained {
            service,
            namespace,
            component,
            replica,
            tables: tables(&diagnosed, &report, &rooms, every_node),
            plan: rebalance::recommend(&diagnosed, &report, requested, settings),
            losses: loss::losses(&diagnosed, &report, requested, settings),
            instances: drawn(&diagnosed, &report),
            alfred: alfred::remarks(&diagnosed),
            report,
            rooms,
        });
    }
    if explained.is_empty() {
        let for_component = only.map(|c| format!(" for its {c}")).unwrap_or_default();
        return Err(ExplainError::NoReplica(named, for_component));
    }
    Ok(explained)
}

/// The text `explain` prints: each component's, a blank line between.
pub fn text(explained: &[Explained]) -> String {
    explained.iter().map(Explained::text).collect::<Vec<_>>().join("\n")
}

/// Each Instance, in the pods' order: the anchor counted, then the other pods of its Instance
/// (workers, and its other slot's anchor during a SurgeThenDrain update), drawn where the
/// counted anchor runs; then the pods no Instance here claims, one by one.
fn drawn<'a>(component: &Component<'a>, report: &Report) -> Vec<Drawn<'a>> {
    let key = report.in_effect.domain_key();
    // Each counted anchor is its own Instance's: never another's member.
    let counted = &component.anchors;
    let is_counted = |pod: &&Pod| counted.iter().any(|anchor| ptr::eq(*anchor, *pod));
    let mut unclaimed: Vec<&Pod> = component.pods.iter().copied().filter(|pod| !is_counted(pod)).collect();
    let mut instances = Vec::new();
    for &anchor in counted {
        let members: Vec<&Pod>;
        (members, unclaimed) = unclaimed.into_iter().partition(|pod| same_instance(pod, anchor));
        let domain = key
            .and_then(|key| domain_of(component.nodes, anchor, key))
            .filter(|domain| report.instances_per_domain.contains_key(*domain))
            .cloned();
        let pods = std::iter::once(anchor).chain(members).collect();
        instances.push(Drawn { pods, domain });
    }
    instances.extend(unclaimed.into_iter().map(|pod| Drawn {
        pods: vec![pod],
        domain: None,
    }));
    instances
}

/// The seed's Step 2 views: the replica's fields, the pods' terms, and the nodes the pods run on
/// or select with their domain (when a domain key is in effect and any node is).
fn tables(component: &Component, report: &Report, rooms: &[Domain], every_node: bool) -> Vec<Table> {
    let (replica, pods, nodes) = (component.replica, &component.pods, component.nodes);
    let or_none = |value: Option<&str>| value.unwrap_or("<none>").to_owned();
    // The replica's fields as the core read them: an empty key is unset (P4).
    let projected = &report.projected;
    let replica_row = vec![
        replica.name_any(),
        or_none(projected.spread.map(Spread::as_str)),
        or_none(projected.spread_key.as_deref()),
        or_none(projected.topology_key.as_deref()),
    ];
    // The rack of each pod's node, when Instances are kept inside one (topologyKey).
    let rack = report.in_effect.topology_key.as_deref();
    let pod_rows = pods.iter().map(|pod| {
        let joined =
            |field: &str| columns::joined(pod.constraints(), |c| c[field].as_str().unwrap_or_default().to_owned());
        let node = pod.node();
        let mut cells = vec![
            pod.name().to_owned(),
            joined("topologyKey"),
            joined("whenUnsatisfiable"),
            or_none(node),
        ];
        cells.extend(rack.map(|rack| label(node.and_then(|n| nodes.get(n)), rack)));
        cells
    });
    let mut tables = vec![
        table(["NAME", "SPREAD", "SPREAD-KEY", "TOPOLOGY-KEY"], None, [replica_row]),
        table(["NAME", "SPREAD-KEY", "WHEN", "NODE"], rack, pod_rows),
    ];
    if let Some(key) = report.in_effect.domain_key() {
        let selections: Vec<Selection> = pods.iter().map(|p| Selection::of_pod(p)).collect();
        let used: Vec<&str> = pods.iter().filter_map(|p| p.node()).collect();
        // The rack beside the domain, unless the rack is the domain (no topologySpreadKey).
        let rack = rack.filter(|rack| *rack != key);
        let listed = nodes.selected_or_used(&selections, &used);
        if listed.len() > NODES_LISTED && !every_node {
            tables.push(per_domain(&listed, key, rooms));
        } else if !listed.is_empty() {
            let node_rows = listed.iter().map(|node| {
                let mut cells = vec![node.name.clone(), label(Some(node), key)];
                cells.extend(rack.map(|rack| label(Some(node), rack)));
                cells
            });
            tables.push(table(["NAME", &heading(key)], rack, node_rows));
        }
    }
    tables
}

/// A table: its `header`, with a column for the label `rack` where there is one, then its `rows`.
fn table<const N: usize>(header: [&str; N], rack: Option<&str>, rows: impl IntoIterator<Item = Vec<String>>) -> Table {
    let mut header = header.map(String::from).to_vec();
    header.extend(rack.map(heading));
    std::iter::once(header).chain(rows).collect()
}

/// The most nodes `explain` lists one by one (unless asked for every node): a large cluster's
/// are summed up, a line per domain.
pub const NODES_LISTED: usize = 20;

/// The nodes a line per domain (its value of `key`, `<none>` for nodes without it): how many,
/// and the whole Instances it can still start (ROOM, 0 where the domain does not count).
fn per_domain(listed: &[&Node], key: &str, rooms: &[Domain]) -> Table {
    let domains = listed.iter().map(|node| label(Some(node), key)).sorted();
    let rows = domains.dedup_with_count().map(|(count, domain)| {
        let room = rooms.iter().find(|d| d.name == domain).map_or(0, Domain::room);
        vec![domain, count.to_string(), room.to_string()]
    });
    table([&heading(key), "NODES", "ROOM"], None, rows)
}

/// A column named for a label key, as kubectl's `-L` names it: its last segment, upper case.
fn heading(key: &str) -> String {
    key.rsplit('/').next().unwrap_or(key).to_uppercase()
}

/// A node's value of the label `key`, `<none>` when it has none or there is no node.
fn label(node: Option<&Node>, key: &str) -> String {
    let value = node.and_then(|n| n.labels.get(key));
    value.map_or("<none>", String::as_str).to_owned()
}
