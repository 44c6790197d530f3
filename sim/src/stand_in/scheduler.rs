//! Why not kube-scheduler: the rebalance property (sim/tests/rebalance.rs) places the surges of 720
//! generated clusters in one test, and the controller's migrate tests run on the in-memory API
//! server under paused time; the real scheduler would need a control plane for each case. The
//! same migrations meet the real kube-scheduler in sim/tests/cluster_migration.rs,
//! cluster_migration_deadline.rs and controller/tests/seed.rs.
//!
//! kube-scheduler, as far as a surge's pods meet it: the filters (node selection, cordons and
//! taints, resources, topology spread with `DoNotSchedule`, required pod affinity) and a plain
//! score (preferred nodes first, then the fewest matching pods for `ScheduleAnyway`, then the
//! name, so that every run places the same way).

use std::collections::BTreeMap;

use ome_spread_core::nodes::{Node, Selection};
use ome_spread_core::quantity::Quantity;
use serde_json::Value;

use crate::support::objects::{name, read};

/// The node `pod` goes to, among `nodes`, beside the `pods` already bound (any namespace);
/// `preferred`: nodes to take first when they fit (OME's hint nodes). Else the scheduler's
/// reason, as its FailedScheduling Event words it: `0/3 nodes are available: 2 Insufficient
/// nvidia.com/gpu, 1 node(s) were unschedulable.`
pub fn place(pod: &Value, nodes: &[Value], pods: &[Value], preferred: &[String]) -> Result<String, String> {
    let bound: Vec<&Value> = pods.iter().filter(|p| holds_room(p)).collect();
    // The pods each constraint counts do not depend on the node asked about: counted once.
    let spreads = spreads(pod, nodes, &bound);
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    let mut fitting = Vec::new();
    for node in nodes {
        match filter(pod, node, nodes, &bound, &spreads) {
            Ok(()) => fitting.push(node),
            Err(why) => *failures.entry(why).or_default() += 1,
        }
    }
    let rank = |node: &&Value| {
        let name = name(node);
        let hint = preferred.iter().position(|p| p == name).unwrap_or(usize::MAX);
        (hint, spread_score(node, &spreads), name.to_owned())
    };
    match fitting.into_iter().min_by_key(rank) {
        Some(node) => Ok(name(node).to_owned()),
        None => {
            let reasons: Vec<String> = failures.iter().map(|(why, n)| format!("{n} {why}")).collect();
            let reasons = reasons.join(", ");
            Err(format!("0/{} nodes are available: {reasons}.", nodes.len()))
        }
    }
}

/// The first filter that turns the node down, in the scheduler's order.
fn filter(pod: &Value, node: &Value, nodes: &[Value], bound: &[&Value], spreads: &[Spread]) -> Result<(), String> {
    if !selects(pod, node) {
        return Err("node(s) didn't match Pod's node affinity/selector".into());
    }
    if let Some(taint) = untolerated(pod, node) {
        return Err(taint);
    }
    if let Some(resource) = insufficient(pod, node, bound) {
        return Err(format!("Insufficient {resource}"));
    }
    if !spread_allows(pod, node, spreads) {
        return Err("node(s) didn't match pod topology spread constraints".into());
    }
    if !affinity_allows(pod, node, nodes, bound) {
        return Err("node(s) didn't match pod affinity rules".into());
    }
    Ok(())
}

fn label<'a>(object: &'a Value, key: &str) -> Option<&'a str> {
    object["metadata"]["labels"][key].as_str()
}

/// Bound and not finished: the pods that take a node's room and count in spread and affinity.
fn holds_room(pod: &Value) -> bool {
    pod["spec"]["nodeName"].is_string() && !matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"))
}

fn node_of<'a>(pod: &Value, nodes: &'a [Value]) -> Option<&'a Value> {
    nodes.iter().find(|n| pod["spec"]["nodeName"] == n["metadata"]["name"])
}

/// `spec.nodeSelector` and the required node affinity, as the core reads Kubernetes' rules.
fn selects(pod: &Value, node: &Value) -> bool {
    let node = Node::from_json(node).expect("a node the core reads");
    Selection::of_pod(&read(pod)).selects(&node)
}

/// A cordon is the taint `node.kubernetes.io/unschedulable:NoSchedule`; the first NoSchedule or
/// NoExecute taint no toleration of the pod matches.
fn untolerated(pod: &Value, node: &Value) -> Option<String> {
    let tolerations = pod["spec"]["tolerations"].as_array().cloned().unwrap_or_default();
    let tolerated = |key: &str, value: &str, effect: &str| {
        tolerations.iter().any(|t| {
            let key_matches = t["key"].as_str().is_none_or(|k| k.is_empty() || k == key);
            let value_matches = t["operator"] == "Exists" || t["value"].as_str().unwrap_or_default() == value;
            let effect_matches = t["effect"].as_str().is_none_or(|e| e.is_empty() || e == effect);
            key_matches && value_matches && effect_matches
        })
    };
    if node["spec"]["unschedulable"] == true && !tolerated("node.kubernetes.io/unschedulable", "", "NoSchedule") {
        return Some("node(s) were unschedulable".into());
    }
    let taints = node["spec"]["taints"].as_array().into_iter().flatten();
    taints.into_iter().find_map(|taint| {
        let [key, value, effect] = ["key", "value", "effect"].map(|field| taint[field].as_str().unwrap_or_default());
        let blocks = matches!(effect, "NoSchedule" | "NoExecute") && !tolerated(key, value, effect);
        blocks.then(|| format!("node(s) had untolerated taint {{{key}: {value}}}"))
    })
}

/// The first resource the pod requests that the node's allocatable, less the requests of its
/// pods, cannot give; `pods` counts one per pod. A node without allocatable has room for none.
fn insufficient(pod: &Value, node: &Value, bound: &[&Value]) -> Option<String> {
    let allocatable = &node["status"]["allocatable"];
    let on_node = bound
        .iter()
        .filter(|p| p["spec"]["nodeName"] == node["metadata"]["name"]);
    let mut used = BTreeMap::new();
    for other in on_node {
        for (resource, amount) in requests(other) {
            *used.entry(resource).or_insert(0) += amount;
        }
    }
    requests(pod).into_iter().find_map(|(resource, amount)| {
        let free = allocatable[&resource].as_str().map_or(0, amount_of);
        (used.get(&resource).copied().unwrap_or(0) + amount > free).then_some(resource)
    })
}

/// A pod's requests summed over its containers, and one `pods`, in thousandths.
fn requests(pod: &Value) -> BTreeMap<String, u128> {
    let mut sum = BTreeMap::from([("pods".to_owned(), 1000)]);
    for container in pod["spec"]["containers"].as_array().into_iter().flatten() {
        for (resource, quantity) in container["resources"]["requests"].as_object().into_iter().flatten() {
            let amount = quantity.as_str().map_or(0, amount_of);
            *sum.entry(resource.clone()).or_insert(0) += amount;
        }
    }
    sum
}

/// A quantity in thousandths, read as the API server reads it; one it would refuse is a mistake
/// in a test, said at once rather than counted as free.
fn amount_of(quantity: &str) -> u128 {
    let amount = Quantity::amount(quantity).unwrap_or_else(|e| panic!("a quantity this model does not read: {e}"));
    amount.milli_value().unsigned_abs()
}

/// The pod's labels match `matchLabels` (the only form OME's terms use).
fn matches(selector: &Value, pod: &Value) -> bool {
    let wanted = selector["matchLabels"].as_object().into_iter().flatten();
    wanted.into_iter().all(|(k, v)| pod["metadata"]["labels"][k] == *v)
}

/// One topology spread constraint as the scheduler counts it: the matching pods of the
/// namespace per domain, over the nodes its policies let count.
struct Spread<'a> {
    constraint: &'a Value,
    key: &'a str,
    counts: BTreeMap<&'a str, usize>,
}

fn spreads<'a>(pod: &'a Value, nodes: &'a [Value], bound: &[&'a Value]) -> Vec<Spread<'a>> {
    let constraints = pod["spec"]["topologySpreadConstraints"]
        .as_array()
        .into_iter()
        .flatten();
    constraints
        .map(|constraint| {
            let key = constraint["topologyKey"].as_str().unwrap_or_default();
            let honours_affinity = constraint["nodeAffinityPolicy"] != "Ignore";
            let honours_taints = constraint["nodeTaintsPolicy"] == "Honor";
            let counts_on = |node: &Value| {
                label(node, key).is_some()
                    && (!honours_affinity || selects(pod, node))
                    && (!honours_taints || untolerated(pod, node).is_none())
            };
            let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
            for node in nodes.iter().filter(|n| counts_on(n)) {
                counts.entry(label(node, key).unwrap_or_default()).or_default();
            }
            let same_namespace = bound
                .iter()
                .filter(|p| p["metadata"]["namespace"] == pod["metadata"]["namespace"]);
            for other in same_namespace.filter(|p| matches(&constraint["labelSelector"], p)) {
                let node = node_of(other, nodes).filter(|n| counts_on(n));
                if let Some(count) = node.and_then(|n| counts.get_mut(label(n, key).unwrap_or_default())) {
                    *count += 1;
                }
            }
            Spread {
                constraint,
                key,
                counts,
            }
        })
        .collect()
}

/// Every `DoNotSchedule` constraint: the node has the key, and the pod there leaves its domain
/// within maxSkew of the emptiest (0 while fewer than minDomains domains count).
fn spread_allows(pod: &Value, node: &Value, spreads: &[Spread]) -> bool {
    spreads
        .iter()
        .filter(|s| s.constraint["whenUnsatisfiable"] == "DoNotSchedule")
        .all(|s| {
            let Some(domain) = label(node, s.key) else { return false };
            let min_domains = s.constraint["minDomains"].as_u64().unwrap_or(1) as usize;
            let fewest = s.counts.values().copied().min().unwrap_or(0);
            let emptiest = if s.counts.len() < min_domains { 0 } else { fewest };
            let own = usize::from(matches(&s.constraint["labelSelector"], pod));
            let count = s.counts.get(domain).copied().unwrap_or(0);
            count + own <= emptiest + s.constraint["maxSkew"].as_u64().unwrap_or(1) as usize
        })
}

/// The `ScheduleAnyway` constraints' score: the matching pods already in the node's domains.
fn spread_score(node: &Value, spreads: &[Spread]) -> usize {
    spreads
        .iter()
        .filter(|s| s.constraint["whenUnsatisfiable"] == "ScheduleAnyway")
        .map(|s| label(node, s.key).and_then(|d| s.counts.get(d).copied()).unwrap_or(0))
        .sum()
}

/// Every required pod-affinity term: a matching pod of the namespace in the node's domain of
/// the term's key. The scheduler's exception: when no pod matches any of the terms and the pod
/// matches all of them, it may start the group anywhere the keys are.
fn affinity_allows(pod: &Value, node: &Value, nodes: &[Value], bound: &[&Value]) -> bool {
    let terms = &pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    let terms = terms.as_array().map_or(&[][..], Vec::as_slice);
    let namespace = &pod["metadata"]["namespace"];
    let same_namespace: Vec<&&Value> = bound
        .iter()
        .filter(|p| p["metadata"]["namespace"] == *namespace)
        .collect();
    let matched = |term: &Value| same_namespace.iter().any(|p| matches(&term["labelSelector"], p));
    let first_of_its_group =
        terms.iter().all(|term| matches(&term["labelSelector"], pod)) && !terms.iter().any(matched);
    terms.iter().all(|term| {
        let key = term["topologyKey"].as_str().unwrap_or_default();
        let Some(domain) = label(node, key) else {
            return false;
        };
        first_of_its_group
            || same_namespace.iter().any(|p| {
                matches(&term["labelSelector"], p) && node_of(p, nodes).and_then(|n| label(n, key)) == Some(domain)
            })
    })
}
