//! Rebalance (docs/rebalance.md): the fewest Instance moves that bring every
//! eligible domain within `maxSkew`, each from a fullest domain to an emptiest one with room (for
//! a leader with workers, in one rack of `topologyKey`), with up to 8 hint nodes there.
//! [`recommend`] reads them from a diagnosed component (which reasons a move fixes, the
//! Instances, the room of [`crate::room`]); [`plan`] is the planning itself.

use std::borrow::Cow;
use std::cell::OnceCell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};

use crate::diagnosis::{Component, Reason, Report};
use crate::instance::{domain_of, members};
use crate::labels::INSTANCE_INDEX;
use crate::nodes::{Node, Selection};
use crate::pod::Pod;
use crate::room::{Requested, Resources};
use crate::settings::Settings;
use crate::shown::shown;
use crate::spread::SpreadFields;

/// One Instance of a component, as its anchor pod (leader or only pod) places it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    pub index: u32,
    pub ready: bool,
    /// The anchor pod's node; None while it is unplaced.
    pub node: Option<String>,
    /// That node's domain; None when unplaced or when the node is in no eligible domain.
    pub domain: Option<String>,
}

/// An eligible domain and the whole Instances its racks could start; its room is their sum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Domain {
    pub name: String,
    pub racks: Vec<Rack>,
}

impl Domain {
    /// The whole Instances it can still start.
    pub fn room(&self) -> usize {
        self.racks.iter().map(Vec::len).sum()
    }
}

/// Nodes that start all the pods of an Instance (for a leader with workers under `topologyKey`,
/// those of one value of it: the workers' affinity keeps them in their leader's rack; else all
/// the domain's nodes that accept the pods), as the hint nodes of each whole Instance they can
/// start, one after another.
pub type Rack = Vec<Vec<String>>;

/// One migration to request: OME's `instance`, `from_node` and `hint_target_nodes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub instance: u32,
    pub from_node: String,
    pub from_domain: String,
    pub to_domain: String,
    /// At most [`MAX_HINT_NODES`] nodes of one rack of `to_domain` with room: those that the
    /// Instance's pods take first, then the others, roomiest first, then by name.
    pub hint_nodes: Vec<String>,
}

/// The moves, in the order to request them (OME runs one at a time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub moves: Vec<Move>,
}

/// Why there is no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoPlan {
    #[error("the Instances per eligible domain already differ by at most maxSkew")]
    WithinSkew,
    #[error("no eligible domain has room for one more Instance")]
    NoRoom,
    #[error("moves into the domains with room cannot bring the Instances within maxSkew")]
    Unreachable,
    /// The reason is one a move cannot fix (the settings, the keys, the labels, the nodes).
    #[error("a migration cannot fix {}", .0.as_str())]
    NotAMove(Reason),
    #[error("the {component}'s migrationPolicy.mode is Never: OME fails every migration request")]
    MigrationNever { component: String },
    /// The pod, its index as a message shows it.
    #[error("pod {0} has {INSTANCE_INDEX} {1}: not an Instance index")]
    BadIndex(String, String),
}

/// OME's limit on `hint_target_nodes`.
pub const MAX_HINT_NODES: usize = 8;

impl Move {
    /// The move in words, then its command: as `explain` lists it and the Event says it.
    pub fn describe(&self, service: &str, component: &str, namespace: &str) -> String {
        let command = self.command(service, component, namespace);
        let (from, to) = (format!("{} ({})", self.from_node, self.from_domain), &self.to_domain);
        format!("Move Instance {} from {from} to {to}: {command}", self.instance)
    }

    /// The `kubectl ome` command that requests this move (OME's CLI takes the hints comma-separated).
    pub fn command(&self, service: &str, component: &str, namespace: &str) -> String {
        let (instance, from_node, hints) = (self.instance, &self.from_node, self.hint_nodes.join(","));
        format!(
            "kubectl ome migration start {service} --component {component} --instance {instance} --from-node {from_node} --hint-node {hints} -n {namespace}"
        )
    }
}

/// The plan for a diagnosed component, from its Instances per eligible domain and the room of
/// their nodes. Only a skew can be fixed by moves: Skewed, and PodsPredateChange when the
/// placement itself is skewed (migrated pods get the constraint too). DomainsFull waits for
/// room, which a move does not make. `requested`: the requests of the pods bound to each node.
pub fn recommend(
    component: &Component,
    report: &Report,
    requested: &Requested,
    settings: &Settings,
) -> Result<Plan, NoPlan> {
    match report.reason {
        Reason::Skewed | Reason::PodsPredateChange => {}
        Reason::NotRequested | Reason::Satisfied => return Err(NoPlan::WithinSkew),
        other => return Err(NoPlan::NotAMove(other)),
    }
    // Both are there for those two reasons: the diagnosis read them.
    let kind = component.kind();
    let key = report.in_effect.domain_key().ok_or(NoPlan::NotAMove(Reason::NoKey))?;
    if migration_policy(component, kind) == Some("Never") {
        let component = kind.to_owned();
        return Err(NoPlan::MigrationNever { component });
    }
    let instances = (component.anchors.iter())
        .map(|pod| instance(component, pod, key))
        .collect::<Result<Vec<_>, _>>()?;
    // No domain takes more Instances than there are.
    let domains = rooms(component, report, requested, instances.len());
    plan(&instances, &domains, usize::try_from(settings.max_skew).unwrap_or(1))
}

/// Each eligible domain of the spread key in effect, with the whole Instances its racks can
/// still start, at most `most` a rack (none without a key): the room a plan counts on, and
/// `explain` shows.
pub fn rooms(component: &Component, report: &Report, requested: &Requested, most: usize) -> Vec<Domain> {
    Candidates::of(component, report, requested).rooms(most)
}

/// The nodes a component's room is counted on, read once for all the counts of its losses: each
/// eligible domain's racks of the nodes that can start the Instance's pods (labelled, and
/// accepting them: the scheduler always honours taints and cordons, whatever the constraint
/// counts), what those pods request, and what the pods bound to each node already hold.
pub(crate) struct Candidates<'a, 'r> {
    domains: BTreeMap<&'a str, BTreeMap<&'a str, Vec<Candidate<'a>>>>,
    pods: Vec<Resources>,
    /// Whether the pods all request alike: every rack's count asks, so it is read once.
    alike: bool,
    requested: &'r Requested,
}

/// A node, and its slots for one of the Instance's pods when they are all alike: read at the
/// first count that needs them, then kept for the others (the losses count each domain once
/// with every node up, and again for each failure).
type Candidate<'a> = (&'a Node, OnceCell<usize>);

impl<'a, 'r> Candidates<'a, 'r> {
    /// No domain yet, for an Instance of `pods`.
    fn new(pods: Vec<Resources>, requested: &'r Requested) -> Self {
        Candidates {
            domains: BTreeMap::new(),
            alike: pods.iter().all(|pod| *pod == pods[0]),
            pods,
            requested,
        }
    }

    pub(crate) fn of(component: &Component<'a>, report: &Report, requested: &'r Requested) -> Self {
        let key = report.in_effect.domain_key();
        let anchor = component.anchors.first().filter(|_| key.is_some());
        // The requests of each pod of the anchor's Instance, its own first, then its workers' by
        // name: the order in which OME creates them and the scheduler places them. Requests that
        // cannot be read (never served: the API server refuses them; refused in explain's saved
        // objects before this) leave no room anywhere, as no key or no Instance.
        let instance = anchor.map_or_else(Vec::new, |anchor| members(&component.pods, anchor));
        let pods: Option<Vec<Resources>> = instance.into_iter().map(|pod| Resources::of_pod(pod).ok()).collect();
        let mut candidates = Candidates::new(pods.unwrap_or_default(), requested);
        let (Some(key), Some(anchor), false) = (key, anchor, candidates.pods.is_empty()) else {
            return candidates;
        };
        let selection = Selection::of_pod(anchor);
        // A single pod keeps to no rack: the domain is its one rack.
        let rack_key = (report.in_effect.topology_key.as_deref()).filter(|_| candidates.pods.len() > 1);
        for &node in component.eligible(key) {
            let Some(domain) = node.labels.get(key) else {
                continue;
            };
            let racks = candidates.domains.entry(domain).or_default();
            let rack = rack_key.map_or(Some(domain), |k| node.labels.get(k));
            if let (Some(rack), true) = (rack, selection.tolerates(node)) {
                racks.entry(rack).or_default().push((node, OnceCell::new()));
            }
        }
        candidates
    }

    /// As [`rooms`]: each domain's racks with the Instances each can start, at most `most`.
    pub(crate) fn rooms(&self, most: usize) -> Vec<Domain> {
        let rack = |nodes: &Vec<Candidate>| {
            let nodes: Vec<&Node> = nodes.iter().map(|(node, _)| *node).collect();
            starts(&nodes, self.requested, &self.pods, most)
        };
        let domain = |(name, racks): (&&str, &BTreeMap<&str, Vec<Candidate>>)| Domain {
            name: (*name).to_owned(),
            racks: racks.values().map(rack).collect(),
        };
        self.domains.iter().map(domain).collect()
    }

    /// Each domain's room as [`Self::rooms`] counts it, but at most `most` a domain: its racks
    /// are counted, by name, only until they start that many. All a count of Instances to place
    /// needs (no domain takes more than there are), without the hints. Only the domains `of`
    /// names are counted, on the nodes `up` keeps: a failed domain's nodes stay in their domain,
    /// but take no pod.
    pub(crate) fn room_up_to(
        &self,
        most: usize,
        up: &dyn Fn(&Node) -> bool,
        of: &dyn Fn(&str) -> bool,
    ) -> BTreeMap<&'a str, usize> {
        let room = |racks: &BTreeMap<&str, Vec<Candidate>>| {
            let mut room = 0;
            for nodes in racks.values() {
                if room == most {
                    break;
                }
                room += self.start_count(nodes, up, most - room);
            }
            room
        };
        self.domains
            .iter()
            .filter(|(name, _)| of(name))
            .map(|(name, racks)| (*name, room(racks)))
            .collect()
    }

    /// How many whole Instances [`starts`] counts on the rack's nodes that `up` keeps, without
    /// their hints. Pods all alike take a node's room one slot at a time, wherever the room is,
    /// so they start as many as the slots hold: each node's slots, read once, not a start after
    /// another (most racks of a busy cluster start none), and only until they hold `most`.
    fn start_count(&self, nodes: &[Candidate<'a>], up: &dyn Fn(&Node) -> bool, most: usize) -> usize {
        let up_nodes = nodes.iter().filter(|(node, _)| up(node));
        match self.pods.as_slice() {
            [pod, ..] if self.alike => {
                let none = Resources::default();
                let slots = |(node, slots): &Candidate| {
                    let used = || self.requested.get(&node.name).unwrap_or(&none);
                    *slots.get_or_init(|| node.allocatable.slots(used(), pod))
                };
                let enough = most.saturating_mul(self.pods.len());
                let mut held = 0;
                for node in up_nodes {
                    if held >= enough {
                        break;
                    }
                    held = usize::saturating_add(held, slots(node));
                }
                (held / self.pods.len()).min(most)
            }
            _ => {
                let nodes: Vec<&Node> = up_nodes.map(|(node, _)| *node).collect();
                starts(&nodes, self.requested, &self.pods, most).len()
            }
        }
    }
}

/// `spec.<component>.lifecycle.migrationPolicy.mode`: the InferenceService's, else its runtime's.
fn migration_policy<'a>(component: &Component<'a>, kind: &str) -> Option<&'a str> {
    let mode = |config: Option<&'a SpreadFields>| config?.lifecycle.as_ref()?["migrationPolicy"]["mode"].as_str();
    mode(component.service.component(kind)).or_else(|| mode(component.runtime?.config(kind)))
}

fn instance(component: &Component, pod: &Pod, key: &str) -> Result<Instance, NoPlan> {
    let index = pod.label(INSTANCE_INDEX);
    let bad = || NoPlan::BadIndex(pod.name().to_owned(), shown(&index.into()));
    Ok(Instance {
        index: index.and_then(|i| i.parse().ok()).ok_or_else(bad)?,
        ready: pod.is_ready(),
        node: pod.node().map(str::to_owned),
        domain: domain_of(component.nodes, pod, key).cloned(),
    })
}

/// The whole Instances (the requests of their `pods`) that `nodes` can start one after another,
/// at most `most`, each as its hint nodes. Each pod takes the first node with room for it, the
/// nodes ordered roomiest first for the leader, then by name: as the scheduler model takes the
/// first hint node that fits, and kube-scheduler's default score prefers the least allocated.
/// The nodes an Instance takes lead its hints, in that order, so that a scheduler taking the
/// first hint that fits places it as counted here.
fn starts(nodes: &[&Node], requested: &Requested, pods: &[Resources], most: usize) -> Vec<Vec<String>> {
    // Asked for none (only which racks there are): no node is read.
    if most == 0 {
        return Vec::new();
    }
    // Borrowed until a start takes a node: most nodes are only read.
    let mut used: Vec<Cow<Resources>> = nodes
        .iter()
        .map(|n| requested.get(&n.name).map_or_else(Cow::default, Cow::Borrowed))
        .collect();
    let room = |used: &[Cow<Resources>], at: usize, pod: &Resources| nodes[at].allocatable.slots(&used[at], pod);
    // A node with room for one of the pods, with its room for the leader: the order's key.
    let placeable = |used: &[Cow<Resources>], at: usize| {
        let leader = pods.first().map_or(0, |pod| room(used, at, pod));
        (leader > 0 || pods.iter().skip(1).any(|pod| room(used, at, pod) > 0)).then_some((at, leader))
    };
    let roomiest_first = |&(at, leader): &(usize, usize)| (Reverse(leader), &nodes[at].name);
    // Each node's room is read once: a start changes only the nodes it takes, which alone are read
    // again (on nodes with room, reading every node at every start would be most of a reconcile).
    let mut order: Vec<(usize, usize)> = (0..nodes.len()).filter_map(|at| placeable(&used, at)).collect();
    order.sort_by_key(roomiest_first);
    let mut starts = Vec::new();
    while starts.len() < most {
        let mut taken = BTreeSet::new();
        for pod in pods {
            let Some(&(at, _)) = order.iter().find(|&&(at, _)| room(&used, at, pod) > 0) else {
                return starts;
            };
            used[at].to_mut().add(pod);
            taken.insert(at);
        }
        // The nodes the start took first, in the order's order, then the others: so that a first
        // fit over the hints takes them.
        let (took, others): (Vec<usize>, Vec<usize>) =
            order.iter().map(|&(at, _)| at).partition(|at| taken.contains(at));
        let hints = took.into_iter().chain(others).take(MAX_HINT_NODES);
        starts.push(hints.map(|at| nodes[at].name.clone()).collect());
        order.retain(|(at, _)| !taken.contains(at));
        order.extend(taken.iter().filter_map(|&at| placeable(&used, at)));
        order.sort_by_key(roomiest_first);
    }
    starts
}

/// A domain while the plan is made.
struct Working<'a> {
    name: &'a str,
    count: usize,
    /// The Instances that may leave, the next one last: Ready ones after the others, then by
    /// index, so a Ready Instance with the highest index leaves first. Arrivals never leave.
    leaving: Vec<(&'a Instance, &'a str)>,
    /// The hint nodes of the Instances each rack can still start, the racks by name.
    racks: Vec<&'a [Vec<String>]>,
}

impl<'a> Working<'a> {
    /// The domain (by name as [`rooms`] gives them, so that ties break the same way on every
    /// pass) with its placed Instances and its racks. An Instance unplaced, or outside the
    /// eligible domains, is not counted and never moved.
    fn of(domain: &'a Domain, instances: &'a [Instance]) -> Self {
        let placed = instances.iter().filter_map(|i| Some((i, i.node.as_deref()?)));
        let mut leaving: Vec<_> = placed
            .filter(|(i, _)| i.domain.as_ref() == Some(&domain.name))
            .collect();
        leaving.sort_by_key(|(i, _)| (i.ready, i.index));
        let racks = domain.racks.iter().map(Vec::as_slice).collect();
        Working {
            name: &domain.name,
            count: leaving.len(),
            leaving,
            racks,
        }
    }

    fn room(&self) -> usize {
        self.racks.iter().map(|starts| starts.len()).sum()
    }

    /// The hint nodes of the next Instance it starts, in its roomiest rack (the first by name
    /// among equals).
    fn start(&mut self) -> Option<Vec<String>> {
        let rack = self.racks.iter_mut().min_by_key(|starts| Reverse(starts.len()))?;
        let (next, rest) = rack.split_first()?;
        *rack = rest;
        Some(next.clone())
    }
}

/// The fewest moves that bring every eligible domain (empty ones included, by name as [`rooms`]
/// gives them, their racks too) within `max_skew`.
/// Greedy, one move at a time from a fullest domain to an emptiest one with room
/// (docs/rebalance.md); its count is the minimum, which the tests check against an exhaustive
/// search. A source's slot is not counted as freed: the source still counts until drained, and a
/// move into a domain that is also emptied would be wasted anyway.
pub fn plan(instances: &[Instance], domains: &[Domain], max_skew: usize) -> Result<Plan, NoPlan> {
    let mut working: Vec<Working> = domains.iter().map(|domain| Working::of(domain, instances)).collect();
    let most = |working: &[Working]| working.iter().map(|w| w.count).max().unwrap_or(0);
    let spread = |working: &[Working]| most(working) - working.iter().map(|w| w.count).min().unwrap_or(0);
    if spread(&working) <= max_skew {
        return Err(NoPlan::WithinSkew);
    }
    if working.iter().all(|w| w.room() == 0) {
        return Err(NoPlan::NoRoom);
    }
    let mut moves = Vec::new();
    while spread(&working) > max_skew {
        let most = most(&working);
        // The first fullest domain with an Instance that may leave, and the first emptiest with
        // room and at least two fewer: a move must narrow the spread.
        let from = working.iter().position(|w| w.count == most && !w.leaving.is_empty());
        let from = from.ok_or(NoPlan::Unreachable)?;
        let to = (0..working.len())
            .filter(|&i| working[i].room() > 0 && working[i].count + 2 <= most)
            .min_by_key(|&i| working[i].count)
            .ok_or(NoPlan::Unreachable)?;
        let hint_nodes = working[to].start().ok_or(NoPlan::Unreachable)?;
        let (instance, node) = working[from].leaving.pop().ok_or(NoPlan::Unreachable)?;
        working[to].count += 1;
        working[from].count -= 1;
        moves.push(Move {
            instance: instance.index,
            from_node: node.to_owned(),
            from_domain: working[from].name.to_owned(),
            to_domain: working[to].name.to_owned(),
            hint_nodes,
        });
    }
    Ok(Plan { moves })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ome::typed;
    use serde_json::Value;
    use std::collections::{BTreeMap, BTreeSet};

    /// The fewest moves, by another method: for every window [low, low + max_skew], search all
    /// distributions of the Instances inside it and under each domain's capacity (the most
    /// Instances it can hold), by dynamic programming over the domains; a distribution costs
    /// its arrivals (the sum of its positive differences from `counts`).
    pub(super) fn minimum_moves(counts: &[usize], capacities: &[usize], max_skew: usize) -> Option<usize> {
        let total: usize = counts.iter().sum();
        let mut best: Option<usize> = None;
        for low in 0..=total {
            // cost[k]: the fewest arrivals that place k Instances in the domains so far.
            let mut cost: Vec<Option<usize>> = vec![None; total + 1];
            cost[0] = Some(0);
            for (&count, &capacity) in counts.iter().zip(capacities) {
                let mut next = vec![None; total + 1];
                for (k, c) in cost.iter().enumerate() {
                    let Some(c) = c else { continue };
                    for f in low..=(low + max_skew).min(capacity) {
                        if k + f > total {
                            break;
                        }
                        let c = c + f.saturating_sub(count);
                        if next[k + f].is_none_or(|n| c < n) {
                            next[k + f] = Some(c);
                        }
                    }
                }
                cost = next;
            }
            if let Some(c) = cost[total] {
                best = Some(best.map_or(c, |b: usize| b.min(c)));
            }
        }
        best
    }

    fn instance(index: u32, node: &str, domain: &str) -> Instance {
        Instance {
            index,
            ready: true,
            node: Some(node.into()),
            domain: Some(domain.into()),
        }
    }

    /// A node that can give its pods `amounts` in all.
    fn node(name: &str, amounts: &[(&str, &str)]) -> Node {
        let amounts = amounts.iter().map(|&(name, amount)| (name.to_owned(), amount.into()));
        let allocatable = Resources::from_quantities(&Value::Object(amounts.collect())).expect("readable");
        Node::new(name.into(), Default::default(), Vec::new(), false, allocatable)
    }

    /// A rack for single-pod Instances (requesting nothing) whose nodes have room for `free`
    /// more pods each.
    fn rack(nodes: &[(&str, usize)]) -> Rack {
        let free: Vec<String> = nodes.iter().map(|(_, free)| free.to_string()).collect();
        let nodes: Vec<Node> = nodes
            .iter()
            .zip(&free)
            .map(|((n, _), free)| node(n, &[("pods", free)]))
            .collect();
        let pod = Resources::of_pod(&Pod::default()).expect("readable");
        starts(&nodes.iter().collect::<Vec<_>>(), &Requested::new(), &[pod], usize::MAX)
    }

    /// A domain that is one such rack.
    fn domain(name: &str, nodes: &[(&str, usize)]) -> Domain {
        Domain {
            name: name.into(),
            racks: vec![rack(nodes)],
        }
    }

    /// `per_domain` Instances in each domain, numbered from 0 in order, on node `<domain>-0`.
    fn placed(per_domain: &[(&str, usize)]) -> Vec<Instance> {
        let mut instances = Vec::new();
        for (d, n) in per_domain {
            for _ in 0..*n {
                instances.push(instance(instances.len() as u32, &format!("{d}-0"), d));
            }
        }
        instances
    }

    fn summary(plan: &Plan) -> Vec<(u32, &str, &str, &str)> {
        plan.moves
            .iter()
            .map(|m| {
                (
                    m.instance,
                    m.from_node.as_str(),
                    m.from_domain.as_str(),
                    m.to_domain.as_str(),
                )
            })
            .collect()
    }

    #[test]
    fn three_in_one_zone_of_three_take_two_moves() {
        let instances = placed(&[("a", 3)]);
        let domains = [domain("a", &[]), domain("b", &[("b-1", 1)]), domain("c", &[("c-1", 5)])];
        let plan = plan(&instances, &domains, 1).unwrap();
        // 3,0,0 -> 1,1,1; the highest index leaves first; ties go to the first domain by name.
        assert_eq!(summary(&plan), [(2, "a-0", "a", "b"), (1, "a-0", "a", "c")]);
        assert_eq!(plan.moves[0].hint_nodes, ["b-1"]);
        assert_eq!(plan.moves[1].hint_nodes, ["c-1"]);
        assert_eq!(minimum_moves(&[3, 0, 0], &[3, 1, 5], 1), Some(2));
    }

    #[test]
    fn two_in_one_zone_of_two_take_one_move() {
        let instances = placed(&[("a", 2)]);
        let domains = [domain("a", &[]), domain("b", &[("b-1", 2)])];
        assert_eq!(summary(&plan(&instances, &domains, 1).unwrap()), [(1, "a-0", "a", "b")]);
        assert_eq!(minimum_moves(&[2, 0], &[2, 2], 1), Some(1));
    }

    #[test]
    fn within_skew_no_room_or_unreachable_give_no_plan() {
        let domains = [domain("a", &[("a-1", 3)]), domain("b", &[("b-1", 3)])];
        assert_eq!(
            plan(&placed(&[("a", 2), ("b", 1)]), &domains, 1),
            Err(NoPlan::WithinSkew)
        );
        assert_eq!(plan(&placed(&[("a", 3)]), &domains, 3), Err(NoPlan::WithinSkew));
        let full = [domain("a", &[("a-1", 0)]), domain("b", &[("b-1", 0)])];
        assert_eq!(plan(&placed(&[("a", 3)]), &full, 1), Err(NoPlan::NoRoom));
        // c can take one but b stays empty: 5,0,0 cannot come within 1.
        let little = [domain("a", &[]), domain("b", &[]), domain("c", &[("c-1", 9)])];
        assert_eq!(plan(&placed(&[("a", 5)]), &little, 1), Err(NoPlan::Unreachable));
        assert_eq!(minimum_moves(&[5, 0, 0], &[5, 0, 14], 1), None);
        // Room only in the fullest domain.
        let only_a = [domain("a", &[("a-1", 4)]), domain("b", &[])];
        assert_eq!(plan(&placed(&[("a", 4)]), &only_a, 1), Err(NoPlan::Unreachable));
    }

    #[test]
    fn unplaced_and_ineligible_instances_neither_count_nor_move() {
        let mut instances = placed(&[("a", 3)]);
        instances.push(Instance {
            index: 9,
            ready: true,
            node: None,
            domain: None,
        });
        instances.push(instance(8, "x-0", "x")); // a domain that is not eligible
        let domains = [domain("a", &[]), domain("b", &[("b-1", 3)])];
        // 3,0 -> 2,1: one move, of a placed Instance in a.
        assert_eq!(summary(&plan(&instances, &domains, 1).unwrap()), [(2, "a-0", "a", "b")]);
    }

    #[test]
    fn a_ready_instance_with_the_highest_index_leaves_first() {
        let mut instances = placed(&[("a", 4)]);
        instances[3].ready = false;
        let domains = [domain("a", &[]), domain("b", &[("b-1", 3)])];
        assert_eq!(
            summary(&plan(&instances, &domains, 0).unwrap()),
            [(2, "a-0", "a", "b"), (1, "a-0", "a", "b")]
        );
    }

    #[test]
    fn hint_nodes_are_at_most_eight_with_room_roomiest_first_and_capacity_is_used_up() {
        let mut nodes: Vec<(String, usize)> = (0..12).map(|i| (format!("b-{i:02}"), 1)).collect();
        nodes[5].1 = 0;
        nodes[11].1 = 2;
        let nodes: Vec<(&str, usize)> = nodes.iter().map(|(n, f)| (n.as_str(), *f)).collect();
        let domains = [domain("a", &[]), domain("b", &nodes)];
        let plan = plan(&placed(&[("a", 6)]), &domains, 0).unwrap();
        assert_eq!(plan.moves.len(), 3);
        assert_eq!(
            plan.moves[0].hint_nodes,
            ["b-11", "b-00", "b-01", "b-02", "b-03", "b-04", "b-06", "b-07"]
        );
        // b-11 took the first surge and has one slot left; the next takes b-00's only one.
        assert_eq!(plan.moves[1].hint_nodes[..2], ["b-00", "b-01"]);
        assert_eq!(plan.moves[2].hint_nodes[..2], ["b-01", "b-02"]);
        // b-11's second slot is still free: among single slots it sorts by name, past the eighth.
        assert_eq!(
            plan.moves[2].hint_nodes,
            ["b-01", "b-02", "b-03", "b-04", "b-06", "b-07", "b-08", "b-09"]
        );
        // Capacity: a domain with room for one takes one, then the next emptiest takes the rest.
        let domains = [domain("a", &[]), domain("b", &[("b-1", 1)]), domain("c", &[("c-1", 3)])];
        let plan2 = super::plan(&placed(&[("a", 6)]), &domains, 2).unwrap();
        assert_eq!(
            summary(&plan2),
            [(5, "a-0", "a", "b"), (4, "a-0", "a", "c"), (3, "a-0", "a", "c")]
        );
    }

    #[test]
    fn minimum_moves_against_brute_force_on_small_inputs() {
        // Every distribution of up to 6 Instances over 3 domains, checked by enumeration.
        let mut rng = XorShift(0x5eed_0001);
        for _ in 0..200 {
            let counts: Vec<usize> = (0..3).map(|_| rng.below(4)).collect();
            let capacities: Vec<usize> = counts.iter().map(|c| c + rng.below(4)).collect();
            let skew = 1 + rng.below(2);
            let total: usize = counts.iter().sum();
            let mut best: Option<usize> = None;
            for x in 0..=total {
                for y in 0..=total - x {
                    let f = [x, y, total - x - y];
                    let fits = f.iter().zip(&capacities).all(|(f, c)| f <= c);
                    if fits && f.iter().max().unwrap() - f.iter().min().unwrap() <= skew {
                        let cost = f.iter().zip(&counts).map(|(f, c)| f.saturating_sub(*c)).sum();
                        best = Some(best.map_or(cost, |b: usize| b.min(cost)));
                    }
                }
            }
            assert_eq!(
                minimum_moves(&counts, &capacities, skew),
                best,
                "{counts:?} {capacities:?} {skew}"
            );
        }
    }

    /// A pod requesting `amounts`.
    fn requesting(amounts: &[(&str, &str)]) -> Resources {
        let requests: serde_json::Map<String, Value> = amounts
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
            .collect();
        Resources::of_pod(&typed(
            &serde_json::json!({"spec": {"containers": [{"resources": {"requests": requests}}]}}),
        ))
        .expect("readable")
    }

    /// Each pod takes the first node with room for it, roomiest for the leader first; the
    /// nodes an Instance takes lead its hints, so that the scheduler taking the first hint that
    /// fits places it there, even past the eighth node.
    #[test]
    fn a_rack_starts_whole_instances_each_pod_with_its_own_requests() {
        let gpus = |n| [("nvidia.com/gpu", n), ("pods", "110")];
        let one_gpu = requesting(&[("nvidia.com/gpu", "1")]);
        // Three pods of one GPU, nodes with 3 and 4 free: two Instances, on y, then on x.
        let (x, y) = (node("x", &gpus("3")), node("y", &gpus("4")));
        let three = [one_gpu.clone(), one_gpu.clone(), one_gpu];
        assert_eq!(
            starts(&[&x, &y], &Requested::new(), &three, usize::MAX),
            [["y", "x"], ["x", "y"]]
        );
        // At most as many as asked for.
        assert_eq!(starts(&[&x, &y], &Requested::new(), &three, 1), [["y", "x"]]);
        // A leader of 1 GPU and a worker of 8, on 9 and 8 free: the leader takes the roomiest,
        // the worker the rest of it; the next worker has no node.
        let (a, b) = (node("a", &gpus("9")), node("b", &gpus("8")));
        let pair = [
            requesting(&[("nvidia.com/gpu", "1")]),
            requesting(&[("nvidia.com/gpu", "8")]),
        ];
        assert_eq!(starts(&[&a, &b], &Requested::new(), &pair, usize::MAX), [["a", "b"]]);
        // What the nodes' pods request already is not free: 7 GPUs on each, no node for the worker.
        let requested = Requested::from([
            ("a".to_owned(), requesting(&[("nvidia.com/gpu", "2")])),
            ("b".to_owned(), requesting(&[("nvidia.com/gpu", "1")])),
        ]);
        assert_eq!(
            starts(&[&a, &b], &requested, &pair, usize::MAX),
            Vec::<Vec<String>>::new()
        );
        // A leader of CPU only, a worker of 8 GPUs: nine CPU nodes are roomier for the leader,
        // the worker's node g comes tenth and is hinted second.
        let cpus: Vec<Node> = (0..9)
            .map(|i| node(&format!("c-{i}"), &[("cpu", "8"), ("pods", "110")]))
            .collect();
        let g = node("g", &[("cpu", "1"), ("nvidia.com/gpu", "8"), ("pods", "110")]);
        let rack: Vec<&Node> = cpus.iter().chain([&g]).collect();
        let split = [requesting(&[("cpu", "1")]), requesting(&[("nvidia.com/gpu", "8")])];
        assert_eq!(
            starts(&rack, &Requested::new(), &split, usize::MAX),
            [["c-0", "g", "c-1", "c-2", "c-3", "c-4", "c-5", "c-6"]]
        );
    }

    /// A tiny seeded PRNG (xorshift64), so the generated clusters are the same on every run.
    pub(crate) struct XorShift(pub(crate) u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        pub(crate) fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    /// The domain that `pick` (below the weights' sum) falls in; the first when all weigh 0.
    fn weighted(weights: &[usize], mut pick: usize) -> usize {
        for (d, w) in weights.iter().enumerate() {
            if pick < *w {
                return d;
            }
            pick -= w;
        }
        0
    }

    /// The starts counted the plain way: every node read again at every start, its room for the
    /// leader at each of the sort's comparisons.
    fn starts_read_afresh(nodes: &[&Node], requested: &Requested, pods: &[Resources], most: usize) -> Vec<Vec<String>> {
        let mut used: Vec<Resources> = nodes
            .iter()
            .map(|n| requested.get(&n.name).cloned().unwrap_or_default())
            .collect();
        let mut starts = Vec::new();
        while starts.len() < most {
            let room = |used: &[Resources], at: usize, pod: &Resources| nodes[at].allocatable.slots(&used[at], pod);
            let mut order: Vec<usize> = (0..nodes.len())
                .filter(|&at| pods.iter().any(|pod| room(&used, at, pod) > 0))
                .collect();
            order.sort_by(|&a, &b| {
                let leader = |at| room(&used, at, &pods[0]);
                leader(b).cmp(&leader(a)).then(nodes[a].name.cmp(&nodes[b].name))
            });
            let mut taken = BTreeSet::new();
            for pod in pods {
                let Some(&at) = order.iter().find(|&&at| room(&used, at, pod) > 0) else {
                    return starts;
                };
                used[at].add(pod);
                taken.insert(at);
            }
            order.sort_by_key(|at| !taken.contains(at));
            starts.push(
                order
                    .iter()
                    .take(MAX_HINT_NODES)
                    .map(|&at| nodes[at].name.clone())
                    .collect(),
            );
        }
        starts
    }

    #[test]
    fn starts_equal_every_node_read_afresh_at_every_start() {
        let mut rng = XorShift(0x57a2_75ed);
        let (mut some, mut more_than_one) = (0, 0);
        for case in 0..2000 {
            let mut listed = Vec::new();
            for n in 0..rng.below(14) {
                let (gpus, pods) = (rng.below(9), 1 + rng.below(6));
                listed.push(
                    serde_json::json!({"metadata": {"name": format!("n{}-{n}", rng.below(4))},
                    "status": {"allocatable": {"nvidia.com/gpu": gpus.to_string(), "pods": pods.to_string()}}}),
                );
            }
            let all = crate::nodes::Nodes::from_json(&listed).expect("readable");
            let nodes: Vec<&Node> = all.iter().collect();
            let mut requested = Requested::new();
            for node in &nodes {
                if rng.below(2) == 0 {
                    let used = serde_json::json!({"nvidia.com/gpu": rng.below(5).to_string(), "pods": rng.below(3).to_string()});
                    requested.insert(node.name.clone(), Resources::from_quantities(&used).expect("readable"));
                }
            }
            let mut pods = Vec::new();
            for _ in 0..rng.below(4) {
                let gpus = (1 + rng.below(4)).to_string();
                let pod = serde_json::json!({"spec": {"containers": [{"resources": {"requests": {"nvidia.com/gpu": gpus}}}]}});
                pods.push(Resources::of_pod(&typed(&pod)).expect("readable"));
            }
            let most = rng.below(7);
            let got = starts(&nodes, &requested, &pods, most);
            assert_eq!(got, starts_read_afresh(&nodes, &requested, &pods, most), "case {case}");
            some += usize::from(!got.is_empty() && !pods.is_empty());
            more_than_one += usize::from(got.len() > 1 && !pods.is_empty());
        }
        // Not a vacuous agreement: many cases start Instances, and more than one.
        assert!(some > 500 && more_than_one > 300, "{some} {more_than_one}");
    }

    /// Pods all alike: the slots counted at once are the starts made one after another.
    #[test]
    fn pods_all_alike_start_as_many_as_the_slots_hold() {
        let mut rng = XorShift(0x0a11_a11e);
        let (mut alike, mut some) = (0, 0);
        for case in 0..2000 {
            let mut listed = Vec::new();
            for n in 0..rng.below(10) {
                let (gpus, pods) = (rng.below(17), 1 + rng.below(9));
                // Now and then a node that reports no allocatable: no room.
                let allocatable = match rng.below(10) {
                    0 => serde_json::json!({}),
                    _ => serde_json::json!({"nvidia.com/gpu": gpus.to_string(), "cpu": "64", "pods": pods.to_string()}),
                };
                listed.push(serde_json::json!({"metadata": {"name": format!("n{n}")},
                    "status": {"allocatable": allocatable}}));
            }
            let all = crate::nodes::Nodes::from_json(&listed).expect("readable");
            let nodes: Vec<&Node> = all.iter().collect();
            let mut requested = Requested::new();
            for node in &nodes {
                let used = serde_json::json!({"nvidia.com/gpu": rng.below(9).to_string(),
                    "cpu": rng.below(80).to_string(), "pods": rng.below(4).to_string()});
                requested.insert(node.name.clone(), Resources::from_quantities(&used).expect("readable"));
            }
            let pod = |gpus: usize, cpu: usize| {
                Resources::of_pod(&typed(
                    &serde_json::json!({"spec": {"containers": [{"resources": {"requests":
                    {"nvidia.com/gpu": gpus.to_string(), "cpu": cpu.to_string()}}}]}}),
                ))
                .expect("readable")
            };
            let first = (1 + rng.below(4), rng.below(20));
            // Mostly alike; now and then a worker unlike its leader, counted one start at a time.
            let pods: Vec<Resources> = (0..rng.below(6))
                .map(|_| match rng.below(8) {
                    0 => pod(1 + rng.below(4), rng.below(20)),
                    _ => pod(first.0, first.1),
                })
                .collect();
            let most = rng.below(8);
            let expected = starts(&nodes, &requested, &pods, most).len();
            let rack = nodes.iter().map(|&node| (node, OnceCell::new())).collect();
            let candidates = Candidates {
                domains: BTreeMap::from([("z", BTreeMap::from([("r", rack)]))]),
                ..Candidates::new(pods.clone(), &requested)
            };
            // Counted twice: the second reads the slots the first kept.
            for _ in 0..2 {
                assert_eq!(
                    candidates.room_up_to(most, &|_| true, &|_| true)["z"],
                    expected,
                    "case {case}"
                );
            }
            alike += usize::from(pods.len() > 1 && pods.iter().all(|p| *p == pods[0]));
            some += usize::from(expected > 1);
        }
        assert!(alike > 500 && some > 300, "{alike} {some}");
    }

    /// `room_up_to` is each domain's room as `rooms` counts it, capped at `most`: generated
    /// domains of racks, a node down and a domain left out.
    #[test]
    fn room_up_to_is_each_domains_room_capped() {
        let mut rng = XorShift(0x00c0_ffee);
        let (mut capped, mut under) = (0, 0);
        for case in 0..1000 {
            let mut listed = Vec::new();
            let mut place = Vec::new();
            for n in 0..rng.below(16) {
                let gpus = rng.below(9);
                listed.push(serde_json::json!({"metadata": {"name": format!("n{n}")},
                    "status": {"allocatable": {"nvidia.com/gpu": gpus.to_string(), "pods": "8"}}}));
                place.push((format!("z{}", rng.below(3)), format!("r{}", rng.below(4))));
            }
            let all = crate::nodes::Nodes::from_json(&listed).expect("readable");
            let mut requested = Requested::new();
            for node in all.iter() {
                if rng.below(2) == 0 {
                    continue;
                }
                let used = serde_json::json!({"nvidia.com/gpu": rng.below(5).to_string()});
                requested.insert(node.name.clone(), Resources::from_quantities(&used).expect("readable"));
            }
            let pods = (0..1 + rng.below(3))
                .map(|_| {
                    let gpus = (1 + rng.below(4)).to_string();
                    Resources::of_pod(&typed(&serde_json::json!({"spec": {"containers":
                        [{"resources": {"requests": {"nvidia.com/gpu": gpus}}}]}})))
                    .expect("readable")
                })
                .collect();
            let mut candidates = Candidates::new(pods, &requested);
            for (node, (zone, rack)) in all.iter().zip(&place) {
                let racks = candidates.domains.entry(zone.as_str()).or_default();
                racks.entry(rack.as_str()).or_default().push((node, OnceCell::new()));
            }
            for _ in 0..4 {
                let down = format!("n{}", rng.below(24));
                let up = |node: &Node| node.name != down;
                let skipped = format!("z{}", rng.below(4));
                let of = |domain: &str| domain != skipped;
                let most = rng.below(6);
                // The plain count over the same candidates, the node down and the domain left out.
                let mut plain = Candidates::new(candidates.pods.clone(), &requested);
                for (name, racks) in candidates.domains.iter().filter(|(name, _)| of(name)) {
                    let kept = plain.domains.entry(*name).or_default();
                    for (rack, nodes) in racks {
                        let up_nodes: Vec<Candidate> = nodes
                            .iter()
                            .filter(|(node, _)| up(node))
                            .map(|(node, _)| (*node, OnceCell::new()))
                            .collect();
                        // A rack with no node up is no rack, as `Candidates::of` makes none empty.
                        if !up_nodes.is_empty() {
                            kept.insert(*rack, up_nodes);
                        }
                    }
                }
                let rooms = plain.rooms(most);
                let expected: BTreeMap<&str, usize> =
                    rooms.iter().map(|d| (d.name.as_str(), d.room().min(most))).collect();
                let got = candidates.room_up_to(most, &up, &of);
                assert_eq!(
                    got, expected,
                    "case {case}: {down} down, of all but {skipped}, up to {most}"
                );
                capped += rooms.iter().filter(|d| d.room() > most).count();
                under += rooms.iter().filter(|d| (1..most).contains(&d.room())).count();
            }
        }
        // Both sides of the cap are met often.
        assert!(capped > 150 && under > 300, "{capped} {under}");
    }

    /// A generated cluster: 2 to 6 domains of 1 or 2 racks of nodes with room for some pods, and
    /// Instances landed unevenly across them (some Pending, some on nodes of no domain).
    struct Generated {
        names: Vec<String>,
        instances: Vec<Instance>,
        /// Per domain, its nodes: (rack, node, free).
        layout: Vec<Vec<(String, String, usize)>>,
        max_skew: usize,
    }

    impl Generated {
        fn new(rng: &mut XorShift) -> Self {
            let domain_count = 2 + rng.below(5);
            let names: Vec<String> = (0..domain_count).map(|d| format!("z{d}")).collect();
            // Uneven: each domain draws a weight, and the Instances land by weight.
            let weights: Vec<usize> = (0..domain_count).map(|_| rng.below(4) * rng.below(4)).collect();
            let weight_sum: usize = weights.iter().sum::<usize>().max(1);
            let mut instances = Vec::new();
            for index in 0..(2 + rng.below(39)) as u32 {
                let ready = rng.below(5) != 0;
                let (node, domain) = match rng.below(20) {
                    0 => (None, None),
                    1 => (Some("elsewhere".to_owned()), None),
                    _ => {
                        let d = weighted(&weights, rng.below(weight_sum));
                        (Some(format!("{}-n{}", names[d], rng.below(3))), Some(names[d].clone()))
                    }
                };
                instances.push(Instance {
                    index,
                    ready,
                    node,
                    domain,
                });
            }
            let layout = names
                .iter()
                .map(|name| {
                    let racks = 1 + rng.below(2);
                    (0..rng.below(8))
                        .map(|n| {
                            (
                                format!("{name}-r{}", rng.below(racks)),
                                format!("{name}-n{n}"),
                                rng.below(6),
                            )
                        })
                        .collect()
                })
                .collect();
            let max_skew = 1 + rng.below(3);
            Self {
                names,
                instances,
                layout,
                max_skew,
            }
        }

        fn domains(&self) -> Vec<Domain> {
            let domain = |(name, nodes): (&String, &Vec<(String, String, usize)>)| {
                let mut racks: BTreeMap<&str, Vec<(&str, usize)>> = BTreeMap::new();
                for (r, n, free) in nodes {
                    racks.entry(r).or_default().push((n, *free));
                }
                Domain {
                    name: name.clone(),
                    racks: racks.values().map(|nodes| rack(nodes)).collect(),
                }
            };
            self.names.iter().zip(&self.layout).map(domain).collect()
        }

        /// The Instances each domain counts.
        fn counts(&self) -> BTreeMap<&str, usize> {
            let mut counts: BTreeMap<&str, usize> = self.names.iter().map(|n| (n.as_str(), 0)).collect();
            for d in self.instances.iter().filter_map(|i| i.domain.as_deref()) {
                *counts.get_mut(d).unwrap() += 1;
            }
            counts
        }

        /// The pods each domain has room for.
        fn rooms(&self) -> BTreeMap<&str, usize> {
            (self.names.iter().zip(&self.layout))
                .map(|(d, nodes)| (d.as_str(), nodes.iter().map(|n| n.2).sum()))
                .collect()
        }

        /// Each move from a fullest domain to one with room, an Instance moved once, its hint
        /// nodes with room in one rack of the target; then no domain over its room, and the skew
        /// within `max_skew`.
        fn check(&self, plan: &Plan, why: &str) {
            let (counts, rooms) = (self.counts(), self.rooms());
            let mut after = counts.clone();
            let mut moved = BTreeSet::new();
            for m in &plan.moves {
                let most = *after.values().max().unwrap();
                assert_eq!(after[m.from_domain.as_str()], most, "{why}");
                let i = self.instances.iter().find(|i| i.index == m.instance).unwrap();
                assert_eq!(i.domain.as_deref(), Some(m.from_domain.as_str()), "{why}");
                assert_eq!(i.node.as_deref(), Some(m.from_node.as_str()), "{why}");
                assert!(moved.insert(m.instance), "moved twice: {why}");
                let target = &self.layout[self.names.iter().position(|d| *d == m.to_domain).unwrap()];
                assert!(
                    !m.hint_nodes.is_empty() && m.hint_nodes.len() <= MAX_HINT_NODES,
                    "{why}"
                );
                let racks: BTreeSet<&str> = m
                    .hint_nodes
                    .iter()
                    .map(|h| {
                        let (rack, _, free) = target.iter().find(|n| &n.1 == h).expect("a node of the target");
                        assert!(*free > 0, "{h} has room: {why}");
                        rack.as_str()
                    })
                    .collect();
                assert_eq!(racks.len(), 1, "{why}");
                *after.get_mut(m.from_domain.as_str()).unwrap() -= 1;
                *after.get_mut(m.to_domain.as_str()).unwrap() += 1;
            }
            let arrived = |d: &str| plan.moves.iter().filter(|m| m.to_domain == d).count();
            for (d, c) in &after {
                assert!(arrived(d) <= rooms[d], "over capacity in {d}: {why}");
                assert!(*c <= counts[d] + rooms[d], "{why}");
            }
            assert!(
                after.values().max().unwrap() - after.values().min().unwrap() <= self.max_skew,
                "{why}"
            );
        }
    }

    #[test]
    fn generated_clusters_get_the_fewest_moves_within_skew_and_capacity() {
        let mut rng = XorShift(0x0e5e_ad11);
        let (mut planned, mut unreachable, mut within) = (0, 0, 0);
        for case in 0..1000 {
            let generated = Generated::new(&mut rng);
            let (counts, rooms) = (generated.counts(), generated.rooms());
            let count_list: Vec<usize> = counts.values().copied().collect();
            let capacities: Vec<usize> = counts.iter().map(|(d, c)| c + rooms[d]).collect();
            let minimum = minimum_moves(&count_list, &capacities, generated.max_skew);
            let result = plan(&generated.instances, &generated.domains(), generated.max_skew);
            let why = format!(
                "case {case}: {counts:?} rooms {rooms:?} maxSkew {}: {result:?}",
                generated.max_skew
            );
            match result {
                Ok(plan) => {
                    planned += 1;
                    assert_eq!(Some(plan.moves.len()), minimum, "{why}");
                    generated.check(&plan, &why);
                }
                Err(NoPlan::WithinSkew) => {
                    within += 1;
                    assert_eq!(minimum, Some(0), "{why}");
                }
                Err(_) => {
                    unreachable += 1;
                    assert_eq!(minimum, None, "{why}");
                }
            }
        }
        // The generator reaches every outcome often enough to mean something.
        assert!(
            planned >= 200 && unreachable >= 50 && within >= 50,
            "{planned} {unreachable} {within}"
        );
    }
}

/// The plan read from diagnosed objects: hand-written clusters, expected moves and commands.
#[cfg(test)]
mod recommend_tests {
    use super::*;
    use crate::diagnosis::diagnose;
    use crate::nodes::Nodes;
    use crate::ome::typed;
    use crate::room::requested;
    use serde_json::Value;
    use serde_json::json;
    use std::collections::BTreeSet;

    const ZONE: &str = "topology.kubernetes.io/zone";

    fn node(name: &str, zone: &str, gpus: &str, spec: Value) -> Value {
        json!({"metadata": {"name": name, "labels": {ZONE: zone, "gpu": "true"}}, "spec": spec,
            "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "32", "memory": "256Gi", "pods": "110"}}})
    }

    /// An engine pod of Instance `index` on `node`, with OME's constraint in effect (Required).
    fn pod(index: u32, runner: &str, node: &str, ready: bool) -> Value {
        json!({"metadata": {"name": format!("qwen3-0-6b-engine-{index}-{runner}-0"), "namespace": "spread-demo",
            "labels": {"ome.io/managed-by": "OMENative", "ome.io/inferenceservice": "qwen3-0-6b", "component": "engine",
                "ome.io/runner": runner, "ome.io/instance-index": index.to_string()}},
            "spec": {"nodeName": node, "nodeSelector": {"gpu": "true"},
                "containers": [{"name": "engine", "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi"}}}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                    "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": runner}}}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    struct Cluster {
        service: Value,
        replica: Value,
        pods: Vec<Value>,
        nodes: Nodes,
        /// Pods of other workloads, holding room on their nodes.
        others: Vec<Value>,
    }

    impl Cluster {
        fn new(pods: Vec<Value>, nodes: &[Value]) -> Self {
            let fields = json!({"topologySpread": "Required", "topologySpreadKey": ZONE});
            let mut replica = json!({"metadata": {"name": "qwen3-0-6b-engine", "namespace": "spread-demo"},
                "spec": {"component": "engine", "parentRef": {"name": "qwen3-0-6b"}}});
            replica["spec"]
                .as_object_mut()
                .unwrap()
                .extend(fields.as_object().unwrap().clone());
            Self {
                service: json!({"metadata": {"name": "qwen3-0-6b", "namespace": "spread-demo"},
                    "spec": {"deploymentMode": "OMENative", "engine": fields}}),
                replica,
                pods,
                nodes: Nodes::from_json(nodes).expect("readable"),
                others: Vec::new(),
            }
        }

        fn recommend(&self) -> (Reason, Result<Plan, NoPlan>) {
            let (service, replica) = (typed(&self.service), typed(&self.replica));
            let pods: Vec<Pod> = self.pods.iter().map(typed).collect();
            let others: Vec<Pod> = self.others.iter().map(typed).collect();
            let component = Component::new(&service, None, &replica, &pods, &self.nodes);
            let settings = Settings::default();
            let report = diagnose(&component, &settings).expect("a report");
            let requested = requested(pods.iter().chain(&others)).expect("readable");
            (report.reason, recommend(&component, &report, &requested, &settings))
        }
    }

    const CLIQUE: &str = "nvidia.com/gpu.clique";

    /// A node of `zone` in NVLink clique `clique`, with `gpus` free GPUs.
    fn clique_node(name: &str, zone: &str, clique: &str, gpus: &str) -> Value {
        let mut node = node(name, zone, gpus, json!({}));
        node["metadata"]["labels"][CLIQUE] = json!(clique);
        node
    }

    /// A pod of Instance `index` requesting `gpus` GPUs.
    fn pod_of_gpus(index: u32, runner: &str, node: &str, gpus: &str) -> Value {
        let mut pod = pod(index, runner, node, true);
        pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = json!(gpus);
        pod
    }

    impl Cluster {
        /// `topologyKey` on the clique label, in the settings in effect and on the replica.
        fn in_cliques(mut self) -> Self {
            self.service["spec"]["engine"]["topologyKey"] = json!(CLIQUE);
            self.replica["spec"]["topologyKey"] = json!(CLIQUE);
            self
        }
    }

    /// A worked example: Instances of a leader and a worker of 8 GPUs each, both in
    /// us-east-1a (2,0,0), us-east-1b full, us-east-1c with two free 8-GPU nodes in two different
    /// cliques. A worker must share its leader's clique: no clique of us-east-1c holds an
    /// Instance, so no move. With a second free node in clique cc1, the move goes there, its hint
    /// nodes that clique's two nodes only.
    #[test]
    fn a_leader_and_workers_move_only_into_one_rack_with_room_for_all_of_them() {
        let pods = vec![
            pod_of_gpus(0, "leader", "gpu-ca1-00", "8"),
            pod_of_gpus(0, "worker", "gpu-ca1-01", "8"),
            pod_of_gpus(1, "leader", "gpu-ca1-02", "8"),
            pod_of_gpus(1, "worker", "gpu-ca1-03", "8"),
        ];
        let mut nodes: Vec<Value> = (0..4)
            .map(|n| clique_node(&format!("gpu-ca1-0{n}"), "us-east-1a", "ca1", "8"))
            .collect();
        nodes.push(clique_node("gpu-cb1-00", "us-east-1b", "cb1", "0"));
        nodes.push(clique_node("gpu-cc1-00", "us-east-1c", "cc1", "8"));
        nodes.push(clique_node("gpu-cc2-00", "us-east-1c", "cc2", "8"));
        let split = Cluster::new(pods.clone(), &nodes).in_cliques();
        assert_eq!(split.recommend(), (Reason::Skewed, Err(NoPlan::NoRoom)));

        nodes.push(clique_node("gpu-cc1-01", "us-east-1c", "cc1", "8"));
        let (reason, plan) = Cluster::new(pods, &nodes).in_cliques().recommend();
        assert_eq!(reason, Reason::Skewed);
        assert_eq!(
            commands(&plan.expect("a plan")),
            [
                "kubectl ome migration start qwen3-0-6b --component engine --instance 1 --from-node gpu-ca1-02 --hint-node gpu-cc1-00,gpu-cc1-01 -n spread-demo"
            ]
        );
    }

    /// A leader of 1 GPU and a worker of 8: a clique fits an Instance only with 9 GPUs free, the
    /// worker counted with its own requests, not the leader's.
    #[test]
    fn each_pod_of_an_instance_is_counted_with_its_own_requests() {
        let pods = vec![
            pod_of_gpus(0, "leader", "gpu-a1", "1"),
            pod_of_gpus(0, "worker", "gpu-a1", "8"),
            pod_of_gpus(1, "leader", "gpu-a2", "1"),
            pod_of_gpus(1, "worker", "gpu-a2", "8"),
        ];
        let with_b = |gpus: &str| {
            let nodes = [
                clique_node("gpu-a1", "zone-a", "ca", "9"),
                clique_node("gpu-a2", "zone-a", "ca", "9"),
                clique_node("gpu-b1", "zone-b", "cb", gpus),
            ];
            Cluster::new(pods.clone(), &nodes).in_cliques()
        };
        assert_eq!(with_b("8").recommend(), (Reason::Skewed, Err(NoPlan::NoRoom)));
        assert_eq!(
            commands(&with_b("9").recommend().1.expect("a plan")),
            [
                "kubectl ome migration start qwen3-0-6b --component engine --instance 1 --from-node gpu-a2 --hint-node gpu-b1 -n spread-demo"
            ]
        );
    }

    fn commands(plan: &Plan) -> Vec<String> {
        plan.moves
            .iter()
            .map(|m| m.command("qwen3-0-6b", "engine", "spread-demo"))
            .collect()
    }

    /// Three Instances in zone-a; zone-b has one free GPU on a schedulable node (its other node is
    /// cordoned); zone-c has one GPU left beside another workload's pod, and a node tainted
    /// against the pods. 3,0,0 becomes 1,1,1 in two moves, a Ready Instance with the highest
    /// index first (Instance 2 is not Ready), each hinting only the nodes that can take it.
    #[test]
    fn a_skew_is_planned_into_the_nodes_with_room_and_each_move_has_its_command() {
        let taint = json!({"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]});
        let mut cluster = Cluster::new(
            vec![
                pod(0, "default", "gpu-a1", true),
                pod(1, "default", "gpu-a2", true),
                pod(2, "default", "gpu-a1", false),
            ],
            &[
                node("gpu-a1", "zone-a", "2", json!({})),
                node("gpu-a2", "zone-a", "1", json!({})),
                node("gpu-b1", "zone-b", "1", json!({})),
                node("gpu-b2", "zone-b", "4", json!({"unschedulable": true})),
                node("gpu-c1", "zone-c", "2", json!({})),
                node("gpu-c2", "zone-c", "8", taint),
            ],
        );
        cluster.others.push(json!({"spec": {"nodeName": "gpu-c1",
            "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}));
        let (reason, plan) = cluster.recommend();
        assert_eq!(reason, Reason::Skewed);
        let plan = plan.expect("a plan");
        assert_eq!(
            commands(&plan),
            [
                "kubectl ome migration start qwen3-0-6b --component engine --instance 1 --from-node gpu-a2 --hint-node gpu-b1 -n spread-demo",
                "kubectl ome migration start qwen3-0-6b --component engine --instance 0 --from-node gpu-a1 --hint-node gpu-c1 -n spread-demo",
            ]
        );
        assert_eq!(
            (plan.moves[0].from_domain.as_str(), plan.moves[0].to_domain.as_str()),
            ("zone-a", "zone-b")
        );

        // The other workload takes zone-c's last GPU: zone-b alone cannot bring 3,0,0 within 1.
        cluster.others.push(cluster.others[0].clone());
        assert_eq!(cluster.recommend().1, Err(NoPlan::Unreachable));
        // No node reports what it can give (saved objects without status): no room is known.
        let bare: Vec<Value> = cluster
            .nodes
            .iter()
            .map(|n| json!({"metadata": {"name": n.name, "labels": n.labels}}))
            .collect();
        cluster.nodes = Nodes::from_json(&bare).expect("readable");
        assert_eq!(cluster.recommend(), (Reason::Skewed, Err(NoPlan::NoRoom)));
    }

    /// PodsPredateChange: moved only when the placement itself is skewed.
    #[test]
    fn pods_that_predate_the_change_move_only_when_the_placement_is_skewed() {
        let nodes = [
            node("gpu-a1", "zone-a", "4", json!({})),
            node("gpu-b1", "zone-b", "4", json!({})),
        ];
        let mut old = pod(1, "default", "gpu-b1", true);
        old["spec"].as_object_mut().unwrap().remove("topologySpreadConstraints");
        let spread = Cluster::new(vec![pod(0, "default", "gpu-a1", true), old.clone()], &nodes);
        assert_eq!(spread.recommend(), (Reason::PodsPredateChange, Err(NoPlan::WithinSkew)));
        old["spec"]["nodeName"] = json!("gpu-a1");
        let skewed = Cluster::new(vec![pod(0, "default", "gpu-a1", true), old], &nodes);
        let (reason, plan) = skewed.recommend();
        assert_eq!(reason, Reason::PodsPredateChange);
        assert_eq!(
            commands(&plan.expect("a plan")),
            [
                "kubectl ome migration start qwen3-0-6b --component engine --instance 1 --from-node gpu-a1 --hint-node gpu-b1 -n spread-demo"
            ]
        );
    }

    #[test]
    fn reasons_a_move_cannot_fix_never_policy_and_bad_indexes_give_no_plan() {
        let nodes = [
            node("gpu-a1", "zone-a", "4", json!({})),
            node("gpu-b1", "zone-b", "4", json!({})),
        ];
        let skewed = || {
            Cluster::new(
                vec![pod(0, "default", "gpu-a1", true), pod(1, "default", "gpu-a1", true)],
                &nodes,
            )
        };
        // A node the pods select without the key's label: MissingLabel, which no move fixes.
        let mut unlabelled = nodes.to_vec();
        unlabelled.push(json!({"metadata": {"name": "gpu-x", "labels": {"gpu": "true"}}}));
        let missing = Cluster::new(skewed().pods, &unlabelled);
        assert_eq!(
            missing.recommend(),
            (Reason::MissingLabel, Err(NoPlan::NotAMove(Reason::MissingLabel)))
        );
        assert_eq!(
            NoPlan::NotAMove(Reason::MissingLabel).to_string(),
            "a migration cannot fix MissingLabel"
        );
        // Only zone-a selected: SingleDomain.
        let single = Cluster::new(skewed().pods, &nodes[..1]);
        assert_eq!(
            single.recommend(),
            (Reason::SingleDomain, Err(NoPlan::NotAMove(Reason::SingleDomain)))
        );
        // migrationPolicy Never, on the InferenceService: OME would fail the request.
        let mut never = skewed();
        never.service["spec"]["engine"]["lifecycle"] = json!({"migrationPolicy": {"mode": "Never"}});
        let (reason, plan) = never.recommend();
        assert_eq!(reason, Reason::Skewed);
        let no = plan.expect_err("no plan under Never");
        assert_eq!(
            no.to_string(),
            "the engine's migrationPolicy.mode is Never: OME fails every migration request"
        );
        // A malformed index on an anchor: named, with the pod and the value.
        let mut bad = skewed();
        bad.pods[1]["metadata"]["labels"]["ome.io/instance-index"] = json!("one");
        assert_eq!(
            bad.recommend().1.expect_err("no plan").to_string(),
            r#"pod qwen3-0-6b-engine-1-default-0 has ome.io/instance-index "one": not an Instance index"#
        );
        // The skewed cluster itself: one move.
        assert_eq!(skewed().recommend().1.map(|p| p.moves.len()), Ok(1));
    }

    /// A leader and a worker per Instance: a domain takes as many whole Instances as its free pod
    /// slots hold pairs of pods.
    #[test]
    fn a_multi_pod_instance_needs_room_for_all_its_pods() {
        let pods = vec![
            pod(0, "leader", "gpu-a1", true),
            pod(0, "worker", "gpu-a1", true),
            pod(1, "leader", "gpu-a2", true),
            pod(1, "worker", "gpu-a2", true),
        ];
        let with_b = |gpus: &str| {
            Cluster::new(
                pods.clone(),
                &[
                    node("gpu-a1", "zone-a", "2", json!({})),
                    node("gpu-a2", "zone-a", "2", json!({})),
                    node("gpu-b1", "zone-b", gpus, json!({})),
                ],
            )
        };
        // One GPU in zone-b: half an Instance.
        assert_eq!(with_b("1").recommend(), (Reason::Skewed, Err(NoPlan::NoRoom)));
        let (_, plan) = with_b("2").recommend();
        assert_eq!(
            commands(&plan.expect("a plan")),
            [
                "kubectl ome migration start qwen3-0-6b --component engine --instance 1 --from-node gpu-a2 --hint-node gpu-b1 -n spread-demo"
            ]
        );
    }

    /// Per node: its zone, its clique, whether it can take a pod, and its GPUs.
    type Layout = Vec<(usize, String, bool, usize)>;

    /// `zones` zones of 1 to 3 nodes each, in two cliques a zone, some cordoned, tainted or
    /// without allocatable, each with 0 to 3 GPUs.
    fn generated_nodes(rng: &mut super::tests::XorShift, zones: usize) -> (Vec<Value>, Layout) {
        let (mut nodes, mut layout) = (Vec::new(), Vec::new());
        for zone in 0..zones {
            for n in 0..1 + rng.below(3) {
                let (gpus, trait_) = (rng.below(4), rng.below(8));
                let spec = match trait_ {
                    0 => json!({"unschedulable": true}),
                    1 => json!({"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}),
                    _ => json!({}),
                };
                let mut node = node(
                    &format!("z{zone}-n{n}"),
                    &format!("zone-{zone}"),
                    &gpus.to_string(),
                    spec,
                );
                if trait_ == 2 {
                    node.as_object_mut().unwrap().remove("status");
                }
                let clique = format!("z{zone}-c{}", rng.below(2));
                node["metadata"]["labels"][CLIQUE] = json!(clique);
                layout.push((zone, clique, trait_ > 2, gpus));
                nodes.push(node);
            }
        }
        (nodes, layout)
    }

    /// 2 to 8 Instances of `size` pods each on random nodes, and 0 to 2 pods of another workload
    /// holding a GPU each: those pods, the others, the pods on each node and the Instances in each
    /// zone.
    fn placed(
        rng: &mut super::tests::XorShift,
        nodes: &[Value],
        layout: &Layout,
        size: usize,
    ) -> (Vec<Value>, Vec<Value>, Vec<usize>, Vec<usize>) {
        let name = |at: usize| nodes[at]["metadata"]["name"].as_str().unwrap().to_owned();
        let mut used = vec![0usize; nodes.len()];
        let mut counts = vec![0usize; 1 + layout.iter().map(|l| l.0).max().unwrap_or(0)];
        let mut pods = Vec::new();
        for index in 0..2 + rng.below(7) {
            let at = rng.below(nodes.len());
            used[at] += size;
            counts[layout[at].0] += 1;
            let ready = rng.below(2) == 0;
            let runners: &[&str] = if size == 1 { &["default"] } else { &["leader", "worker"] };
            pods.extend(runners.iter().map(|runner| pod(index as u32, runner, &name(at), ready)));
        }
        let mut others = Vec::new();
        for _ in 0..rng.below(3) {
            let at = rng.below(nodes.len());
            used[at] += 1;
            others.push(json!({"spec": {"nodeName": name(at),
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}));
        }
        (pods, others, used, counts)
    }

    /// Free GPUs per clique (of a zone) on the nodes that take pods, and the Instances of `size`
    /// pods each zone can take: its free GPUs for single pods, its cliques' pairs of them for a
    /// leader and a worker.
    fn free_and_room<'l>(
        layout: &'l Layout,
        used: &[usize],
        zones: usize,
        size: usize,
    ) -> (BTreeMap<(usize, &'l str), usize>, Vec<usize>) {
        let mut free: BTreeMap<(usize, &str), usize> = BTreeMap::new();
        for (at, (zone, clique, accepts, gpus)) in layout.iter().enumerate() {
            if *accepts {
                *free.entry((*zone, clique)).or_default() += gpus.saturating_sub(used[at]);
            }
        }
        let mut room = vec![0usize; zones];
        for ((zone, _), gpus) in &free {
            room[*zone] += gpus / size;
        }
        (free, room)
    }

    /// The fewest moves that bring `counts` (`skewed`: beyond a skew of 1) within it with `room`,
    /// counted by the other method, or why there is no plan.
    fn fewest_moves(counts: &[usize], room: &[usize], skewed: bool) -> Result<usize, NoPlan> {
        let capacities: Vec<usize> = counts.iter().zip(room).map(|(c, r)| c + r).collect();
        match super::tests::minimum_moves(counts, &capacities, 1) {
            _ if !skewed => Err(NoPlan::WithinSkew),
            _ if room.iter().all(|r| *r == 0) => Err(NoPlan::NoRoom),
            None => Err(NoPlan::Unreachable),
            Some(moves) => Ok(moves),
        }
    }

    /// A move's hint nodes: 1 to the most, each in its target zone and able to take the surge.
    /// Their zone, and their clique if they share one.
    fn hinted<'l>(
        m: &Move,
        layout: &'l Layout,
        used: &[usize],
        at: impl Fn(&str) -> usize,
    ) -> (usize, Option<&'l str>) {
        assert!((1..=MAX_HINT_NODES).contains(&m.hint_nodes.len()));
        let mut cliques = BTreeSet::new();
        for hint in &m.hint_nodes {
            let (zone, clique, accepts, gpus) = &layout[at(hint)];
            assert_eq!(format!("zone-{zone}"), m.to_domain);
            assert!(*accepts && *gpus > used[at(hint)], "{hint} can take the surge");
            cliques.insert(clique.as_str());
        }
        let zone = m.to_domain["zone-".len()..].parse::<usize>().unwrap();
        (zone, (cliques.len() == 1).then(|| cliques.pop_first()).flatten())
    }

    /// Generated clusters (2-4 zones of 1-3 nodes in 1-2 cliques, 0-3 free GPUs each, some
    /// cordoned, tainted or without status; 2-8 Instances, single-pod or a leader and a worker,
    /// `topologyKey` on the clique, and other workloads' pods anywhere): the plan read from the
    /// objects has exactly the fewest moves, computed apart from the room model (free GPUs
    /// counted by hand on the nodes that accept the pods, per clique in pairs for a leader and a
    /// worker) and from the planner; its moves leave the Instances' nodes for hint nodes of
    /// another domain that can take them, a leader and worker's all in one clique with room left
    /// for both, and end within maxSkew.
    #[test]
    fn plans_read_from_generated_clusters_are_minimal_and_land_on_nodes_with_room() {
        let mut rng = super::tests::XorShift(0x0e5_c0de);
        let (mut planned, mut without, mut pairs) = (0, 0, 0);
        for case in 0..800 {
            let size = 1 + case % 2;
            let zones = 2 + rng.below(3);
            let (nodes, layout) = generated_nodes(&mut rng, zones);
            let (pods, others, used, counts) = placed(&mut rng, &nodes, &layout, size);
            let mut cluster = Cluster::new(pods, &nodes).in_cliques();
            cluster.others = others;
            let (mut free, room) = free_and_room(&layout, &used, zones, size);
            let skewed = counts.iter().max().unwrap() - counts.iter().min().unwrap() > 1;
            let (reason, plan) = cluster.recommend();
            assert_eq!(
                reason,
                if skewed { Reason::Skewed } else { Reason::Satisfied },
                "{counts:?}"
            );
            let expected = fewest_moves(&counts, &room, skewed);
            let plan = match (plan, expected) {
                (Ok(plan), Ok(moves)) => {
                    assert_eq!(plan.moves.len(), moves, "case {case}: {counts:?} {room:?}");
                    plan
                }
                (got, expected) => {
                    assert_eq!(got.map(|p| p.moves.len()), expected, "case {case}: {counts:?} {room:?}");
                    without += 1;
                    continue;
                }
            };
            planned += 1;
            let at = |node: &str| nodes.iter().position(|n| n["metadata"]["name"] == node).unwrap();
            let mut after = counts.clone();
            let mut moved = BTreeSet::new();
            for m in &plan.moves {
                let pod = &cluster.pods[m.instance as usize * size];
                assert_eq!(
                    pod["spec"]["nodeName"],
                    m.from_node.as_str(),
                    "from the Instance's node"
                );
                assert!(moved.insert(m.instance), "an Instance moves once");
                let (zone, clique) = hinted(m, &layout, &used, at);
                if size == 2 {
                    // One clique, with room for the leader and the worker beside earlier moves.
                    let clique =
                        clique.unwrap_or_else(|| panic!("case {case}: hints {:?} in one clique", m.hint_nodes));
                    let left = free.get_mut(&(zone, clique)).unwrap();
                    *left = left.checked_sub(2).expect("room for both pods");
                    pairs += 1;
                }
                after[layout[at(&m.from_node)].0] -= 1;
                after[zone] += 1;
            }
            assert!(
                after.iter().max().unwrap() - after.iter().min().unwrap() <= 1,
                "{after:?}"
            );
        }
        println!("{planned} planned, {without} without a plan, {pairs} moves of a leader and a worker");
        assert!(
            planned >= 100 && without >= 100 && pairs >= 50,
            "{planned} {without} {pairs}"
        );
    }
}
