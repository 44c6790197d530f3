//! What losing a domain leaves (docs/controller.md): for each domain of the spread key, and
//! each rack of `topologyKey`, the Instances lost if it fails, those left serving, and how many
//! of the lost ones kube-scheduler could place again, whole, under the constraint a repaired pod
//! gets. A failed domain's nodes stay, tainted `node.kubernetes.io/unreachable` (NoSchedule,
//! NoExecute), which repaired pods do not tolerate: they take no pod, and under
//! `nodeTaintsPolicy: Ignore` (Kubernetes' default) they still count for the spread.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use crate::diagnosis::{Component, Report};
use crate::instance::{domain_of, members};
use crate::nodes::Node;
use crate::pod::Pod;
use crate::rebalance::Candidates;
use crate::room::Requested;
use crate::settings::{NodeTaintsPolicy, Settings};
use crate::spread::Spread;

/// One domain's failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loss {
    /// A value of the spread key, or of `topologyKey` (a rack).
    pub domain: String,
    /// The Instances with a pod there (leader, only pod or worker), by their leader or only pod.
    pub lost: Vec<String>,
    /// The Instances with no pod there and none Pending.
    pub left_serving: usize,
    /// Every Instance of the component.
    pub instances: usize,
    /// The spread domain each lost Instance the scheduler could place again, whole, would go to,
    /// in the order it would place them: re-placeable are as many as these.
    pub placed_again: Vec<String>,
    /// Under a Required spread and `nodeTaintsPolicy: Ignore`, the spread domains the failure
    /// takes whole, which still count with none of the Instances.
    pub still_counts: Option<StillCounts>,
}

/// Spread domains a failure takes whole that still count (`nodeTaintsPolicy: Ignore`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StillCounts {
    /// The failed zone itself, or the zone a failed rack was all of.
    pub domains: Vec<String>,
    /// How many lost Instances `Honor`, which stops them counting, would place again.
    pub with_honor: usize,
}

impl StillCounts {
    /// `zone-a still counts`, `zone-a and zone-b still count`.
    fn still_count(&self) -> String {
        let verb = if self.domains.len() == 1 { "counts" } else { "count" };
        format!("{} still {verb}", self.domains.join(" and "))
    }
}

impl Loss {
    /// RE-PLACEABLE as `explain` shows it: `-` when nothing is lost.
    pub fn replaceable_cell(&self) -> String {
        let (replaceable, lost) = (self.placed_again.len(), self.lost.len());
        if lost == 0 {
            return "-".into();
        }
        let still = self.still_counts.as_ref();
        let honor =
            still.map(|still| format!(" ({}; with Honor: {} of {lost})", still.still_count(), still.with_honor));
        format!("{replaceable} of {lost}{}", honor.unwrap_or_default())
    }
}

/// The table `explain` and the playground show, header first, worst loss first.
pub fn table(losses: &[Loss]) -> Vec<Vec<String>> {
    let header = ["IF LOST", "INSTANCES LOST", "LEFT SERVING", "RE-PLACEABLE"].map(String::from);
    let rows = losses.iter().map(|loss| {
        vec![
            loss.domain.clone(),
            loss.lost.len().to_string(),
            format!("{} of {}", loss.left_serving, loss.instances),
            loss.replaceable_cell(),
        ]
    });
    std::iter::once(header.to_vec()).chain(rows).collect()
}

/// The worst single-domain loss in one sentence: absorbed (Instances left serving, and every lost
/// one placed again), not absorbed, or an outage (none left serving); None when no domain holds
/// an Instance.
pub fn sentence(losses: &[Loss]) -> Option<String> {
    let worst = losses.first().filter(|loss| !loss.lost.is_empty())?;
    let (replaceable, lost) = (worst.placed_again.len(), worst.lost.len());
    let (domain, left_serving, instances) = (&worst.domain, worst.left_serving, worst.instances);
    let left = format!("Losing {domain} leaves {left_serving} of {instances} Instances serving");
    // Absorbed only while Instances stay serving: with none left, nothing serves until the lost
    // ones have started again elsewhere (a model's load takes minutes).
    let verdict = match (replaceable == lost, left_serving > 0) {
        (true, true) => "the loss is absorbed",
        (true, false) => "an outage until they have started there",
        (false, true) => "the loss is not absorbed",
        (false, false) => "an outage",
    };
    let placed = if replaceable == lost {
        format!("every lost Instance ({lost})")
    } else {
        format!("{replaceable} of the {lost} lost")
    };
    // Say so only when Honor would change the answer: it is the reason to set it.
    let honor = match &worst.still_counts {
        Some(still) if replaceable != lost && still.with_honor != replaceable => format!(
            " ({} for the spread, so Required keeps the repairs Pending; \
             with nodeTaintsPolicy: Honor in the policy's settings, {} of {lost} could be)",
            still.still_count(),
            still.with_honor
        ),
        _ => String::new(),
    };
    Some(format!(
        "{left}, and {placed} can be placed again elsewhere: {verdict}{honor}."
    ))
}

/// The constraint a repaired pod gets: OME's, completed by the policy's settings (P5, P12).
struct Repair {
    required: bool,
    max_skew: usize,
    min_domains: usize,
}

impl Repair {
    /// Can a domain the spread counts, with `count` of the Instances, take one more? Required:
    /// only while it stays within maxSkew of the fewest; else always.
    fn allows(&self, count: Option<usize>, fewest: usize) -> bool {
        !self.required || count.is_some_and(|count| count < fewest + self.max_skew)
    }

    /// Where the scheduler places `lost` Instances again, one after another (as many as it can),
    /// each into a domain with the fewest Instances among those with room that the repair's
    /// constraint allows: as kube-scheduler's spread scoring prefers.
    fn place<'a>(&self, lost: usize, mut counts: PerDomain<'a>, room: &PerDomain<'a>) -> Vec<String> {
        let (mut room, mut placed) = (room.clone(), Vec::new());
        while placed.len() < lost {
            // The fewest Instances of a counted domain, as kube-scheduler reads them: 0 while
            // fewer domains count than `minDomains`.
            let fewest = match counts.values().min() {
                Some(fewest) if counts.len() >= self.min_domains => *fewest,
                _ => 0,
            };
            let to = room
                .iter()
                .filter(|(domain, left)| **left > 0 && self.allows(counts.get(*domain).copied(), fewest))
                .min_by_key(|(domain, _)| counts.get(*domain).copied().unwrap_or(0))
                .map(|(domain, _)| *domain);
            let Some(to) = to else { break };
            *counts.entry(to).or_default() += 1;
            room.entry(to).and_modify(|left| *left -= 1);
            placed.push(to.to_owned());
        }
        placed
    }
}

/// An Instance as a failure reads it: its anchor's domain, the nodes its placed pods run on, and
/// whether any of its pods is Pending.
struct Placed<'a> {
    /// Its leader or only pod's name.
    anchor: &'a str,
    domain: Option<&'a str>,
    nodes: Vec<&'a Node>,
    pending: bool,
}

/// The losses of every domain of the spread key and rack of `topologyKey` that holds an eligible
/// node or a node the Instances run on, worst first: fewest left serving, then fewest placed
/// again, then by name. Empty without a key or an Instance (no anchor selects a node).
pub fn losses(component: &Component, report: &Report, requested: &Requested, settings: &Settings) -> Vec<Loss> {
    let Some(failures) = Failures::of(component, report, requested, settings) else {
        return Vec::new();
    };
    let mut losses: Vec<Loss> = failures.each().into_iter().map(|f| failures.placed_again(f)).collect();
    losses.sort_by(worst_first);
    losses
}

/// The first of [`losses`], the one the `Spread` condition tells: the worst leaves the fewest
/// serving, so only the failures that leave that few are placed again. Each placing counts a
/// domain's room, and a component spread wide has many failures that lose one Instance.
pub fn worst(component: &Component, report: &Report, requested: &Requested, settings: &Settings) -> Option<Loss> {
    let failures = Failures::of(component, report, requested, settings)?;
    let each = failures.each();
    let fewest = each.iter().map(|f| f.loss.left_serving).min()?;
    let fewest_left = each.into_iter().filter(|f| f.loss.left_serving == fewest);
    fewest_left.map(|f| failures.placed_again(f)).min_by(worst_first)
}

/// Fewest left serving, then fewest placed again, then by name.
fn worst_first(a: &Loss, b: &Loss) -> Ordering {
    let worst = |loss: &Loss| (loss.left_serving, loss.placed_again.len());
    (worst(a), &a.domain).cmp(&(worst(b), &b.domain))
}

/// What every failure of one component reads, read once.
struct Failures<'a, 'r> {
    /// The spread key, and the rack key when it is another.
    key: &'r str,
    rack: Option<&'r str>,
    instances: Vec<Placed<'a>>,
    /// The nodes whose spread domains count, tallied: under Ignore, then under Honor (indexed by
    /// whether taints are honoured).
    tallies: [Tallies<'a>; 2],
    /// The anchors' own constraint honours taints: the domains counted are those under Honor.
    counted_under_honor: bool,
    /// The repaired pods' constraint honours taints (the anchors' or the settings').
    honor: bool,
    repair: Repair,
    candidates: Candidates<'a, 'r>,
    /// The room with every node up, reused for the domains a failure leaves whole: only those
    /// it touches are counted again. No domain takes more Instances than are placed again, so
    /// it is counted up to all the Instances, and a failure's touched domains up to those lost.
    whole: PerDomain<'a>,
}

/// One domain's failure, before its lost Instances are placed again.
struct Failure<'r> {
    /// The key the failed domain is a value of.
    key: &'r str,
    /// Per Instance, whether it has a pod there.
    is_lost: Vec<bool>,
    loss: Loss,
}

impl<'a, 'r> Failures<'a, 'r> {
    fn of(
        component: &Component<'a>,
        report: &'r Report,
        requested: &'r Requested,
        settings: &Settings,
    ) -> Option<Self> {
        let key = report.in_effect.domain_key()?;
        let instances: Vec<Placed> = (component.anchors.iter())
            .map(|anchor| placed(component, anchor, key))
            .collect();
        let rack = report.in_effect.topology_key.as_deref().filter(|rack| *rack != key);
        let counted_under_honor = component.honors_taints(key);
        let candidates = Candidates::of(component, report, requested);
        Some(Failures {
            key,
            rack,
            whole: candidates.room_up_to(instances.len(), &|_| true, &|_| true),
            candidates,
            tallies: [false, true].map(|honor| tallied(component.selected(honor), key, rack)),
            instances,
            counted_under_honor,
            // The settings' nodeTaintsPolicy completes a repaired pod's constraint; an operator's
            // constraint that honours taints is kept on it as it is on the anchors.
            honor: settings.node_taints_policy == Some(NodeTaintsPolicy::Honor) || counted_under_honor,
            repair: Repair {
                required: report.in_effect.spread == Some(Spread::Required),
                max_skew: usize::try_from(settings.max_skew).unwrap_or(1),
                min_domains: settings.min_domains.and_then(|n| usize::try_from(n).ok()).unwrap_or(0),
            },
        })
    }

    /// The nodes whose spread domains count, tallied: under Honor or under Ignore.
    fn tallies(&self, honor: bool) -> &Tallies<'a> {
        &self.tallies[usize::from(honor)]
    }

    /// Each domain's failure, spread domains first, then racks, each by name: the Instances it
    /// loses and leaves serving.
    fn each(&self) -> Vec<Failure<'r>> {
        let mut failures = Vec::new();
        for key in std::iter::once(self.key).chain(self.rack) {
            // Each Instance's domains of the key, read once for all the domains' failures.
            let its_domains = |i: &Placed<'a>| i.nodes.iter().filter_map(|node| label(node, key)).collect();
            let domains_of_instance: Vec<Vec<&str>> = self.instances.iter().map(its_domains).collect();
            let counted = self.tallies(self.counted_under_honor).iter();
            let mut domains = BTreeSet::new();
            if key == self.key {
                domains.extend(counted.filter_map(|(domain, _)| *domain));
            } else {
                // Each node's rack hashed, and only the few racks ordered: every node's rack put
                // in order cost more than the rest of the failures.
                let racks = counted.flat_map(|(_, racks)| racks.iter().flatten().copied());
                domains.extend(racks.collect::<HashSet<&str, foldhash::fast::FixedState>>());
            }
            domains.extend(domains_of_instance.iter().flatten().copied());
            for domain in domains {
                let is_lost: Vec<bool> = domains_of_instance.iter().map(|its| its.contains(&domain)).collect();
                let lost = self.instances.iter().zip(&is_lost).filter(|(_, lost)| **lost);
                let left = self.instances.iter().zip(&is_lost).filter(|(_, lost)| !**lost);
                let loss = Loss {
                    domain: domain.to_owned(),
                    lost: lost.map(|(i, _)| i.anchor.to_owned()).collect(),
                    left_serving: left.filter(|(i, _)| !i.pending).count(),
                    instances: self.instances.len(),
                    placed_again: Vec::new(),
                    still_counts: None,
                };
                failures.push(Failure { key, is_lost, loss });
            }
        }
        failures
    }

    /// The failure's loss with its lost Instances placed again where the scheduler would place
    /// them, and, under a Required spread that ignores taints, the domains that still count.
    fn placed_again(&self, failure: Failure) -> Loss {
        let Failure { key, is_lost, mut loss } = failure;
        let lost = loss.lost.len();
        if lost == 0 {
            return loss;
        }
        let (on_rack, domain) = (key != self.key, loss.domain.as_str());
        // Of each spread domain's tallied nodes, those the failure takes, and whether it takes
        // them all.
        let taken = |spread_domain: &str, racks: &Racks| match (on_rack, spread_domain == domain) {
            (true, _) => racks.iter().filter(|rack| **rack == Some(domain)).count(),
            (false, true) => racks.len(),
            (false, false) => 0,
        };
        let takes_all = |(spread_domain, racks): (&'a str, &Racks)| taken(spread_domain, racks) == racks.len();
        let mut room = self.whole.clone();
        if on_rack {
            // The spread domains the failed rack is in are counted again without its nodes.
            let touched: BTreeSet<&str> = domains_of(self.tallies(self.counted_under_honor))
                .filter(|(domain, racks)| taken(domain, racks) > 0)
                .map(|(domain, _)| domain)
                .collect();
            let up = |node: &Node| label(node, key) != Some(domain);
            room.extend(self.candidates.room_up_to(lost, &up, &|d| touched.contains(d)));
        } else if let Some(left) = room.get_mut(domain) {
            // A failed spread domain takes every node of its own: none is left to count.
            *left = 0;
        }
        // The domains the spread counts once `domain` fails, with the Instances left in each.
        let counts = |honor: bool| {
            let counted = domains_of(self.tallies(honor)).filter(|&domain| !(honor && takes_all(domain)));
            let mut counts: PerDomain = counted.map(|(domain, _)| (domain, 0)).collect();
            let left = self.instances.iter().zip(&is_lost).filter(|(_, lost)| !**lost);
            for domain in left.filter_map(|(i, _)| i.domain) {
                counts.entry(domain).and_modify(|count| *count += 1);
            }
            counts
        };
        let replaceable = |honor: bool| self.repair.place(lost, counts(honor), &room);
        loss.placed_again = replaceable(self.honor);
        // The spread domains the failure takes whole, which still count under Ignore.
        let emptied = domains_of(self.tallies(false)).filter(|&domain| takes_all(domain));
        let emptied: Vec<String> = emptied.map(|(domain, _)| domain.to_owned()).collect();
        if self.repair.required && !self.honor && !emptied.is_empty() {
            loss.still_counts = Some(StillCounts {
                domains: emptied,
                with_honor: replaceable(true).len(),
            });
        }
        loss
    }
}

/// Instances, or room for them, by spread domain.
type PerDomain<'a> = BTreeMap<&'a str, usize>;

/// Nodes by spread domain (None: without the spread key's label), each node as its rack: what a
/// failure takes of each domain is read off them, not off every node's labels again.
type Tallies<'a> = BTreeMap<Option<&'a str>, Racks<'a>>;

/// The rack of each node of a spread domain (None: without the rack key's label, or no rack key).
type Racks<'a> = Vec<Option<&'a str>>;

/// The nodes tallied by their spread domain (`key`) and rack (`rack`).
fn tallied<'a>(nodes: &[&'a Node], key: &str, rack: Option<&str>) -> Tallies<'a> {
    let mut tallies = Tallies::new();
    for &node in nodes {
        let rack = rack.and_then(|rack| label(node, rack));
        tallies.entry(label(node, key)).or_default().push(rack);
    }
    tallies
}

/// The node's value of the label `key`.
fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.labels.get(key).map(String::as_str)
}

/// The tallied spread domains (nodes without the key's label have none).
fn domains_of<'t, 'a>(tallies: &'t Tallies<'a>) -> impl Iterator<Item = (&'a str, &'t Racks<'a>)> {
    tallies.iter().filter_map(|(domain, racks)| Some(((*domain)?, racks)))
}

/// The Instance of `anchor`: itself and its workers.
fn placed<'a>(component: &Component<'a>, anchor: &'a Pod, key: &str) -> Placed<'a> {
    let pods = members(&component.pods, anchor);
    Placed {
        anchor: anchor.name(),
        domain: domain_of(component.nodes, anchor, key).map(String::as_str),
        nodes: pods.iter().filter_map(|pod| component.nodes.get(pod.node()?)).collect(),
        pending: pods.iter().any(|pod| pod.node().is_none()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnosis::diagnose;
    use crate::nodes::Nodes;
    use crate::ome::typed;
    use crate::room::requested;
    use serde_json::Value;
    use serde_json::json;

    const ZONE: &str = "topology.kubernetes.io/zone";
    const CLIQUE: &str = "nvidia.com/gpu.clique";

    /// A node of `zone` in rack `clique`, that can give its pods `gpus` GPUs.
    fn node(name: &str, zone: &str, clique: &str, gpus: usize, spec: Value) -> Value {
        json!({"metadata": {"name": name, "labels": {ZONE: zone, CLIQUE: clique, "gpu": "true"}}, "spec": spec,
            "status": {"allocatable": {"nvidia.com/gpu": gpus.to_string(), "pods": "110"}}})
    }

    /// A pod of Instance `index` requesting one GPU, on `node` (None: Pending).
    fn pod(index: usize, runner: &str, node: Option<&str>) -> Value {
        let mut pod = json!({"metadata": {"name": format!("m-engine-{index}-{runner}-0"), "namespace": "ns",
            "labels": {"ome.io/managed-by": "OMENative", "ome.io/inferenceservice": "m", "component": "engine",
                "ome.io/runner": runner, "ome.io/instance-index": index.to_string()}},
            "spec": {"nodeSelector": {"gpu": "true"},
                "containers": [{"name": "engine", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]}});
        if let Some(node) = node {
            pod["spec"]["nodeName"] = json!(node);
        }
        pod
    }

    /// Instance `index` as its only pod on `node`.
    fn single(index: usize, node: &str) -> Value {
        pod(index, "default", Some(node))
    }

    struct Cluster {
        fields: Value,
        pods: Vec<Value>,
        nodes: Vec<Value>,
        settings: Settings,
    }

    impl Cluster {
        fn new(spread: &str, pods: Vec<Value>, nodes: Vec<Value>) -> Self {
            Self {
                fields: json!({"topologySpread": spread, "topologySpreadKey": ZONE}),
                pods,
                nodes,
                settings: Settings::default(),
            }
        }

        fn in_cliques(mut self) -> Self {
            self.fields["topologyKey"] = json!(CLIQUE);
            self
        }

        fn losses(&self) -> Vec<Loss> {
            let service = json!({"metadata": {"name": "m", "namespace": "ns"},
                "spec": {"deploymentMode": "OMENative", "engine": self.fields}});
            let mut replica = json!({"metadata": {"name": "m-engine", "namespace": "ns"}, "spec": self.fields});
            replica["spec"]["component"] = json!("engine");
            let nodes = Nodes::from_json(&self.nodes).expect("readable");
            let (service, replica) = (typed(&service), typed(&replica));
            let pods: Vec<Pod> = self.pods.iter().map(typed).collect();
            let component = Component::new(&service, None, &replica, &pods, &nodes);
            let report = diagnose(&component, &self.settings).expect("a report");
            let requested = requested(&pods).expect("readable");
            let losses = losses(&component, &report, &requested, &self.settings);
            // The condition's worst, counted apart, is the first of them.
            let worst = worst(&component, &report, &requested, &self.settings);
            assert_eq!(worst.as_ref(), losses.first());
            losses
        }

        fn table(&self) -> Vec<Vec<String>> {
            table(&self.losses())
        }
    }

    fn rows(rows: &[[&str; 4]]) -> Vec<Vec<String>> {
        let header = [["IF LOST", "INSTANCES LOST", "LEFT SERVING", "RE-PLACEABLE"]];
        header
            .iter()
            .chain(rows)
            .map(|r| r.map(String::from).to_vec())
            .collect()
    }

    /// The seed's example: one Instance in each of two zones, each node with room for one engine
    /// pod. Losing either zone leaves 1 of 2; the lost one waits: Required keeps it off zone-b
    /// while the failed zone-a still counts with none, and zone-b is full besides, so Honor
    /// would not place it either.
    #[test]
    fn the_seeds_example_loses_one_of_two_and_a_full_zone_takes_no_repair() {
        let nodes = vec![
            node("gpu-node-1", "zone-a", "cq-a", 1, json!({})),
            node("gpu-node-2", "zone-b", "cq-b", 1, json!({})),
        ];
        let seed = Cluster::new(
            "Required",
            vec![single(0, "gpu-node-1"), single(1, "gpu-node-2")],
            nodes,
        );
        assert_eq!(
            seed.table(),
            rows(&[
                [
                    "zone-a",
                    "1",
                    "1 of 2",
                    "0 of 1 (zone-a still counts; with Honor: 0 of 1)"
                ],
                [
                    "zone-b",
                    "1",
                    "1 of 2",
                    "0 of 1 (zone-b still counts; with Honor: 0 of 1)"
                ],
            ])
        );
        assert_eq!(
            sentence(&seed.losses()).as_deref(),
            Some(
                "Losing zone-a leaves 1 of 2 Instances serving, and 0 of the 1 lost can be placed again elsewhere: the loss is not absorbed."
            )
        );
    }

    /// zone-b with room for one more: under the default nodeTaintsPolicy the repair waits for
    /// zone-a (placing it in zone-b makes 2 against zone-a's 0), under Honor it fits.
    #[test]
    fn a_required_repair_waits_for_the_failed_zone_unless_taints_are_honoured() {
        let nodes = vec![
            node("gpu-node-1", "zone-a", "cq-a", 1, json!({})),
            node("gpu-node-2", "zone-b", "cq-b", 2, json!({})),
        ];
        let mut cluster = Cluster::new(
            "Required",
            vec![single(0, "gpu-node-1"), single(1, "gpu-node-2")],
            nodes,
        );
        assert_eq!(
            cluster.table(),
            rows(&[
                [
                    "zone-a",
                    "1",
                    "1 of 2",
                    "0 of 1 (zone-a still counts; with Honor: 1 of 1)"
                ],
                [
                    "zone-b",
                    "1",
                    "1 of 2",
                    "0 of 1 (zone-b still counts; with Honor: 0 of 1)"
                ],
            ])
        );
        assert_eq!(
            sentence(&cluster.losses()).as_deref(),
            Some(
                "Losing zone-a leaves 1 of 2 Instances serving, and 0 of the 1 lost can be placed again elsewhere: \
                 the loss is not absorbed (zone-a still counts for the spread, so Required keeps the repairs Pending; \
                 with nodeTaintsPolicy: Honor in the policy's settings, 1 of 1 could be)."
            )
        );
        cluster.settings.node_taints_policy = Some(NodeTaintsPolicy::Honor);
        assert_eq!(
            cluster.table(),
            rows(&[["zone-b", "1", "1 of 2", "0 of 1"], ["zone-a", "1", "1 of 2", "1 of 1"]])
        );
        assert_eq!(
            sentence(&cluster.losses()[1..]).as_deref(),
            Some(
                "Losing zone-a leaves 1 of 2 Instances serving, and every lost Instance (1) can be placed again elsewhere: the loss is absorbed."
            )
        );
    }

    /// minDomains 2 under Honor: with zone-a lost only zone-b counts, fewer than two domains, so
    /// kube-scheduler reads the fewest as 0 and zone-b's one Instance already reaches maxSkew.
    #[test]
    fn min_domains_keeps_the_repair_pending_when_too_few_domains_count() {
        let nodes = vec![
            node("gpu-node-1", "zone-a", "cq-a", 1, json!({})),
            node("gpu-node-2", "zone-b", "cq-b", 2, json!({})),
        ];
        let mut cluster = Cluster::new(
            "Required",
            vec![single(0, "gpu-node-1"), single(1, "gpu-node-2")],
            nodes,
        );
        cluster.settings.node_taints_policy = Some(NodeTaintsPolicy::Honor);
        let zone_a = |cluster: &Cluster| {
            let losses = cluster.losses();
            losses
                .into_iter()
                .find(|l| l.domain == "zone-a")
                .map(|l| l.placed_again)
        };
        assert_eq!(zone_a(&cluster), Some(vec!["zone-b".to_owned()]));
        cluster.settings.min_domains = Some(2);
        assert_eq!(zone_a(&cluster), Some(Vec::new()));
    }

    /// A leader and a worker per Instance, kept in one rack (clique) of a zone. A rack's failure
    /// loses the Instances with any pod there; the repair needs one rack with room for both pods.
    #[test]
    fn a_rack_failure_loses_every_instance_with_a_pod_there() {
        let nodes = vec![
            node("a1", "zone-a", "cq-a1", 2, json!({})),
            node("a2", "zone-a", "cq-a1", 2, json!({})),
            node("a3", "zone-a", "cq-a2", 2, json!({})),
            node("b1", "zone-b", "cq-b1", 2, json!({})),
            node("b2", "zone-b", "cq-b1", 2, json!({})),
        ];
        let pods = vec![
            pod(0, "leader", Some("a1")),
            pod(0, "worker", Some("a2")),
            pod(1, "leader", Some("b1")),
            pod(1, "worker", Some("b2")),
        ];
        let mut cluster = Cluster::new("Required", pods, nodes).in_cliques();
        // cq-a1 lost: zone-a still counts through cq-a2, whose a3 takes the leader and worker.
        // zone-a lost: zone-b's rack has one GPU left on each node, one pair, but zone-a still
        // counts. zone-b or cq-b1 (all of zone-b) lost: zone-a has room for two, but zone-b
        // still counts.
        assert_eq!(
            cluster.table(),
            rows(&[
                [
                    "cq-b1",
                    "1",
                    "1 of 2",
                    "0 of 1 (zone-b still counts; with Honor: 1 of 1)"
                ],
                [
                    "zone-a",
                    "1",
                    "1 of 2",
                    "0 of 1 (zone-a still counts; with Honor: 1 of 1)"
                ],
                [
                    "zone-b",
                    "1",
                    "1 of 2",
                    "0 of 1 (zone-b still counts; with Honor: 1 of 1)"
                ],
                ["cq-a1", "1", "1 of 2", "1 of 1"],
                ["cq-a2", "0", "2 of 2", "-"],
            ])
        );
        assert_eq!(
            sentence(&cluster.losses()).as_deref(),
            Some(
                "Losing cq-b1 leaves 1 of 2 Instances serving, and 0 of the 1 lost can be placed again elsewhere: \
                 the loss is not absorbed (zone-b still counts for the spread, so Required keeps the repairs Pending; \
                 with nodeTaintsPolicy: Honor in the policy's settings, 1 of 1 could be)."
            )
        );
        // Instance 0's worker in the other rack (from before topologyKey was set): losing cq-a2,
        // where only that worker runs, takes Instance 0 down whole.
        cluster.pods[1]["spec"]["nodeName"] = json!("a3");
        let cq_a2 = cluster
            .losses()
            .into_iter()
            .find(|l| l.domain == "cq-a2")
            .expect("cq-a2");
        assert_eq!(
            (cq_a2.lost, cq_a2.left_serving),
            (vec!["m-engine-0-leader-0".to_owned()], 1)
        );
    }

    /// zone-c's only node cordoned: it takes no pod, but under the default nodeTaintsPolicy it
    /// still counts with no Instance, so neither zone's loss can be repaired in the other. The
    /// same whether the cordoned node comes last or first.
    #[test]
    fn a_cordoned_zone_holds_the_repairs_back_unless_taints_are_honoured() {
        let mut nodes = vec![
            node("a1", "zone-a", "cq-a", 2, json!({})),
            node("b1", "zone-b", "cq-b", 2, json!({})),
            node("c1", "zone-c", "cq-c", 2, json!({"unschedulable": true})),
        ];
        let pods = vec![single(0, "a1"), single(1, "b1")];
        let last = Cluster::new("Required", pods.clone(), nodes.clone());
        nodes.rotate_right(1);
        let first = Cluster::new("Required", pods, nodes);
        for cluster in [last, first] {
            assert_cordoned_zone_c(&cluster);
        }
    }

    fn assert_cordoned_zone_c(cluster: &Cluster) {
        assert_eq!(
            cluster.table(),
            rows(&[
                [
                    "zone-a",
                    "1",
                    "1 of 2",
                    "0 of 1 (zone-a still counts; with Honor: 1 of 1)"
                ],
                [
                    "zone-b",
                    "1",
                    "1 of 2",
                    "0 of 1 (zone-b still counts; with Honor: 1 of 1)"
                ],
                ["zone-c", "0", "2 of 2", "-"],
            ])
        );
    }

    /// Preferred piled into zone-a: losing it leaves none; zone-b has room for two of the three.
    #[test]
    fn preferred_piled_into_one_zone_leaves_nothing_when_it_fails() {
        let nodes = vec![
            node("a1", "zone-a", "cq-a", 3, json!({})),
            node("b1", "zone-b", "cq-b", 2, json!({})),
        ];
        let pods = vec![single(0, "a1"), single(1, "a1"), single(2, "a1")];
        let cluster = Cluster::new("Preferred", pods, nodes);
        assert_eq!(
            cluster.table(),
            rows(&[["zone-a", "3", "0 of 3", "2 of 3"], ["zone-b", "0", "3 of 3", "-"]])
        );
        assert_eq!(
            sentence(&cluster.losses()).as_deref(),
            Some(
                "Losing zone-a leaves 0 of 3 Instances serving, and 2 of the 3 lost can be placed again elsewhere: an outage."
            )
        );
        // Room for all three elsewhere is still an outage: none serves until they have started.
        let mut roomy = Cluster::new("Preferred", cluster.pods.clone(), cluster.nodes.clone());
        roomy.nodes[1] = node("b1", "zone-b", "cq-b", 3, json!({}));
        assert_eq!(
            sentence(&roomy.losses()).as_deref(),
            Some(
                "Losing zone-a leaves 0 of 3 Instances serving, and every lost Instance (3) can be placed again elsewhere: an outage until they have started there."
            )
        );
        // With zone-c's room for one too, each repair goes to a zone with the fewest: zone-b
        // (first by name among 0 and 0), zone-c (0 against 1), zone-b (first among 1 and 1).
        let mut cluster = cluster;
        cluster.nodes.push(node("c1", "zone-c", "cq-c", 1, json!({})));
        let zone_a = cluster
            .losses()
            .into_iter()
            .find(|l| l.domain == "zone-a")
            .expect("zone-a");
        assert_eq!(zone_a.placed_again, ["zone-b", "zone-c", "zone-b"]);
    }

    /// A Pending Instance serves nowhere: it is never left serving, and lost nowhere.
    #[test]
    fn pending_instances_are_not_serving() {
        let nodes = vec![
            node("a1", "zone-a", "cq-a", 1, json!({})),
            node("b1", "zone-b", "cq-b", 1, json!({})),
        ];
        let pods = vec![single(0, "a1"), single(1, "b1"), pod(2, "default", None)];
        let cluster = Cluster::new("Required", pods, nodes);
        assert_eq!(
            cluster.table(),
            rows(&[
                [
                    "zone-a",
                    "1",
                    "1 of 3",
                    "0 of 1 (zone-a still counts; with Honor: 0 of 1)"
                ],
                [
                    "zone-b",
                    "1",
                    "1 of 3",
                    "0 of 1 (zone-b still counts; with Honor: 0 of 1)"
                ],
            ])
        );
        // With its worker Pending, a placed leader's Instance does not serve either: losing
        // zone-b leaves none serving, losing zone-a (where that leader is) leaves Instance 1.
        let pods = vec![pod(0, "leader", Some("a1")), pod(0, "worker", None), single(1, "b1")];
        let cluster = Cluster::new("Required", pods, cluster.nodes);
        let left: Vec<(String, usize)> = cluster
            .losses()
            .into_iter()
            .map(|l| (l.domain, l.left_serving))
            .collect();
        assert_eq!(left, [("zone-b".to_owned(), 0), ("zone-a".to_owned(), 1)]);
    }

    /// Two leaders of one Instance index are the Instance on both its slots during a
    /// SurgeThenDrain update (`-default-0`, `-default-1`): one Instance, lost with the zone its
    /// newer slot runs in, the older one being drained.
    #[test]
    fn an_instance_on_both_slots_is_lost_once_where_its_newer_slot_runs() {
        let nodes = vec![
            node("a1", "zone-a", "cq-a", 1, json!({})),
            node("b1", "zone-b", "cq-b", 1, json!({})),
        ];
        let mut second = single(0, "b1");
        second["metadata"]["name"] = json!("m-engine-0-default-1");
        second["metadata"]["labels"]["ome.io/pod-ordinal"] = json!("1");
        let cluster = Cluster::new("Required", vec![second, single(0, "a1")], nodes);
        let lost: Vec<(String, usize, usize)> = cluster
            .losses()
            .into_iter()
            .map(|l| (l.domain, l.lost.len(), l.left_serving))
            .collect();
        // The worst loss first.
        assert_eq!(lost, [("zone-b".to_owned(), 1, 0), ("zone-a".to_owned(), 0, 1)]);
    }

    /// A node without the rack label is in no rack: no rack's failure takes it, and its zone's
    /// failure does. zone-a: a1 (rack cq-a) and a2 (no rack), two GPUs each, zone-b: b1 (rack
    /// cq-b), one GPU; one Instance on each node, so one GPU free on a1 and on a2, none on b1.
    /// Preferred places what the room allows. With the rack key the spread key itself, there are
    /// no rack rows.
    #[test]
    fn a_node_without_a_rack_is_lost_only_with_its_zone() {
        let mut a2 = node("a2", "zone-a", "none", 2, json!({}));
        a2["metadata"]["labels"].as_object_mut().unwrap().remove(CLIQUE);
        let nodes = vec![
            node("a1", "zone-a", "cq-a", 2, json!({})),
            a2,
            node("b1", "zone-b", "cq-b", 1, json!({})),
        ];
        let pods = vec![single(0, "a1"), single(1, "a2"), single(2, "b1")];
        let mut cluster = Cluster::new("Preferred", pods, nodes).in_cliques();
        // zone-a loses two, and full zone-b takes none back; cq-a loses a1's only, which a2,
        // still up, takes; cq-b and zone-b lose b1's, which a1 or a2 take.
        assert_eq!(
            cluster.table(),
            rows(&[
                ["zone-a", "2", "1 of 3", "0 of 2"],
                ["cq-a", "1", "2 of 3", "1 of 1"],
                ["cq-b", "1", "2 of 3", "1 of 1"],
                ["zone-b", "1", "2 of 3", "1 of 1"],
            ])
        );
        cluster.fields["topologyKey"] = json!(ZONE);
        assert_eq!(
            cluster.table(),
            rows(&[["zone-a", "2", "1 of 3", "0 of 2"], ["zone-b", "1", "2 of 3", "1 of 1"]])
        );
    }

    /// No key, or no Instance: nothing to lose, no table and no sentence.
    #[test]
    fn without_a_key_or_an_instance_nothing_is_lost() {
        let nodes = vec![node("a1", "zone-a", "cq-a", 1, json!({}))];
        let none = Cluster::new("Required", Vec::new(), nodes.clone());
        assert_eq!(none.losses(), []);
        let mut keyless = Cluster::new("Required", vec![single(0, "a1")], nodes);
        keyless.fields = json!({"topologySpread": "Required"});
        assert_eq!(keyless.losses(), []);
        assert_eq!(sentence(&[]), None);
    }

    /// Why `losses` counts a domain's room only up to the lost Instances: placing them again
    /// reads no room beyond their number, so room capped there places them the same.
    #[test]
    fn room_beyond_the_lost_places_none_differently() {
        let mut rng = crate::rebalance::tests::XorShift(0x00ca_99ed);
        let names = ["z0", "z1", "z2", "z3"];
        let mut differs = 0;
        for case in 0..2000 {
            let lost = rng.below(6);
            let repair = Repair {
                required: rng.below(2) == 0,
                max_skew: 1 + rng.below(2),
                min_domains: rng.below(4),
            };
            let (mut counts, mut room) = (BTreeMap::new(), BTreeMap::new());
            for name in names {
                if rng.below(4) != 0 {
                    counts.insert(name, rng.below(4));
                }
                if rng.below(4) != 0 {
                    room.insert(name, rng.below(9));
                }
            }
            let capped: BTreeMap<&str, usize> = room.iter().map(|(d, r)| (*d, (*r).min(lost))).collect();
            let placed = repair.place(lost, counts.clone(), &room);
            assert_eq!(repair.place(lost, counts, &capped), placed, "case {case}");
            differs += usize::from(capped != room && !placed.is_empty());
        }
        // Not vacuous: the cap changes the room of many cases that place Instances.
        assert!(differs > 500, "{differs}");
    }

    /// Per node: its zone, its rack, whether it takes pods, and its GPUs.
    type Layout = Vec<(String, String, bool, usize)>;

    /// 2 to 4 zones of 1 to 3 nodes in 1 or 2 racks, 0 to 3 GPUs each, some cordoned or without
    /// status.
    fn generated_nodes(rng: &mut crate::rebalance::tests::XorShift) -> (Vec<Value>, Layout) {
        let (mut nodes, mut layout) = (Vec::new(), Vec::new());
        for zone in 0..2 + rng.below(3) {
            for n in 0..1 + rng.below(3) {
                let (gpus, trait_) = (rng.below(4), rng.below(6));
                let spec = if trait_ == 0 {
                    json!({"unschedulable": true})
                } else {
                    json!({})
                };
                let (zone, rack) = (format!("zone-{zone}"), format!("z{zone}-c{}", rng.below(2)));
                let mut node = node(&format!("z{zone}-n{n}"), &zone, &rack, gpus, spec);
                if trait_ == 1 {
                    node.as_object_mut().unwrap().remove("status");
                }
                layout.push((zone, rack, trait_ > 1, gpus));
                nodes.push(node);
            }
        }
        (nodes, layout)
    }

    /// 1 to 6 Instances of `size` pods, each pod on any node or Pending, and 0 to 2 pods of other
    /// workloads holding a GPU each: the pods, the nodes of each Instance's pods (None: Pending),
    /// and the pods on each node.
    fn generated_pods(
        rng: &mut crate::rebalance::tests::XorShift,
        nodes: &[Value],
        size: usize,
    ) -> (Vec<Value>, Vec<Vec<Option<usize>>>, Vec<usize>) {
        let name = |n: usize| nodes[n]["metadata"]["name"].as_str().unwrap();
        let (mut pods, mut placed, mut used) = (Vec::new(), Vec::new(), vec![0usize; nodes.len()]);
        for index in 0..1 + rng.below(6) {
            let runners: &[&str] = if size == 1 { &["default"] } else { &["leader", "worker"] };
            let mut at = Vec::new();
            for runner in runners {
                let node = (rng.below(6) != 0).then(|| rng.below(nodes.len()));
                if let Some(n) = node {
                    used[n] += 1;
                }
                pods.push(pod(index, runner, node.map(name)));
                at.push(node);
            }
            placed.push(at);
        }
        for _ in 0..rng.below(3) {
            let n = rng.below(nodes.len());
            used[n] += 1;
            pods.push(
                json!({"metadata": {"name": format!("other-{n}")}, "spec": {"nodeName": name(n),
                "containers": [{"resources": {"requests": {"nvidia.com/gpu": "1"}}}]}}),
            );
        }
        (pods, placed, used)
    }

    /// Generated clusters (2-4 zones of 1-3 nodes in 1-2 racks, 0-3 GPUs each, some cordoned or
    /// without status; 1-6 Instances of one pod or a leader and a worker, each pod on any node
    /// or Pending; other workloads' pods), Required or Preferred: every zone and rack has its
    /// row, worst first; "lost" and "left serving" are the Instances with a pod there, and those
    /// with none there and none Pending, counted by hand; "re-placeable" never exceeds the room
    /// counted by hand (free GPUs of the surviving nodes that take pods, per rack in pairs for a
    /// leader and a worker), and under Preferred is all that room can hold.
    #[test]
    fn generated_clusters_lose_the_instances_with_a_pod_there_and_replace_no_more_than_the_room() {
        let mut rng = crate::rebalance::tests::XorShift(0x1055_d0a1);
        let (mut short, mut absorbed, mut preferred, mut not_placed) = (0, 0, 0, 0);
        for case in 0..600 {
            let size = 1 + case % 2;
            let spread = if rng.below(2) == 0 { "Required" } else { "Preferred" };
            let (nodes, layout) = generated_nodes(&mut rng);
            let (pods, placed, used) = generated_pods(&mut rng, &nodes, size);
            let cluster = Cluster::new(spread, pods, nodes).in_cliques();
            let losses = cluster.losses();
            let why = format!("case {case}: {layout:?} used {used:?} Instances {placed:?} {spread}: {losses:?}");

            let mut names: Vec<&str> = layout
                .iter()
                .flat_map(|(z, r, _, _)| [z.as_str(), r.as_str()])
                .collect();
            names.sort_unstable();
            names.dedup();
            let mut rows: Vec<&str> = losses.iter().map(|l| l.domain.as_str()).collect();
            rows.sort_unstable();
            assert_eq!(rows, names, "{why}");
            let worst: Vec<(usize, usize)> = losses.iter().map(|l| (l.left_serving, l.placed_again.len())).collect();
            assert!(worst.is_sorted(), "{why}");
            // The failures the condition's worst (equal to the first, as `Cluster::losses` holds)
            // places none of again.
            let fewest = losses.first().map(|l| l.left_serving);
            not_placed += losses
                .iter()
                .filter(|l| !l.lost.is_empty() && Some(l.left_serving) > fewest)
                .count();
            for loss in &losses {
                let failed = |n: usize| layout[n].0 == loss.domain || layout[n].1 == loss.domain;
                let lost = placed
                    .iter()
                    .filter(|pods| pods.iter().flatten().any(|&n| failed(n)))
                    .count();
                let left = placed
                    .iter()
                    .filter(|pods| pods.iter().all(|n| n.is_some_and(|n| !failed(n))))
                    .count();
                assert_eq!(
                    (loss.lost.len(), loss.left_serving, loss.instances),
                    (lost, left, placed.len()),
                    "{}: {why}",
                    loss.domain
                );
                let mut free: BTreeMap<&str, usize> = BTreeMap::new();
                for (n, (_, rack, takes, gpus)) in layout.iter().enumerate() {
                    if *takes && !failed(n) {
                        *free.entry(rack).or_default() += gpus.saturating_sub(used[n]);
                    }
                }
                let room: usize = match size {
                    1 => free.values().sum(),
                    _ => free.values().map(|gpus| gpus / 2).sum(),
                };
                let replaceable = loss.placed_again.len();
                assert!(replaceable <= lost.min(room), "{}: {why}", loss.domain);
                if spread == "Preferred" {
                    assert_eq!(replaceable, lost.min(room), "{}: {why}", loss.domain);
                    preferred += 1;
                }
                match loss.lost.len() {
                    0 => {}
                    lost if replaceable == lost => absorbed += 1,
                    _ => short += 1,
                }
            }
        }
        assert!(
            short >= 200 && absorbed >= 200 && preferred >= 500 && not_placed >= 300,
            "{short} {absorbed} {preferred} {not_placed}"
        );
    }
}
