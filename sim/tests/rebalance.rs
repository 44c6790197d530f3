//! The rebalance's property, on objects: 720 generated clusters (2-6 zones of 1-3 nodes in 1-2
//! racks with 0-8 free GPUs each, some cordoned or tainted against the pods; 2-40 Instances,
//! single-pod or a leader with 1-2 workers, `topologyKey` on the rack, admitted by the policy and
//! placed skewed, each whole in one rack). The core decides as the controller's `migrate` does
//! (diagnosis, plan, guardrails), and OME and the scheduler of this crate carry each request out.
//! Whenever a spread within maxSkew is reachable it is reached, in exactly the fewest moves
//! (counted apart, by search over Instances per zone, the room counted by hand in whole Instances
//! per rack on the nodes that accept the pods); no request while another is pending or under way;
//! every migration completes (the plan only sends what the scheduler takes), its surge whole in one
//! rack of its hint nodes (a leader and workers' hints all lie in that rack); serving Instances
//! never drop below the start (which OME's surge-then-drain order keeps, whatever the controller
//! asks). Three clusters in ten (216) are under migrationPolicy Never, paused, or have an Instance
//! not Ready: no request at all; the other 504 migrate. In three of those seven in ten, OME starts
//! without its migration caps: it holds the first request in Accepted with its message and sets
//! `MigrationPolicyUnconfigured`; the core then holds every further request for that reason, the
//! plan still there, until the caps are set, and the spread is reached all the same (65 clusters).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use jiff::{SignedDuration, Timestamp};
use ome_spread_core::diagnosis::{Component, diagnose};
use ome_spread_core::explain::Objects;
use ome_spread_core::migration::{
    Entry, Hold, LEDGER, Records, Request, Requests, Situation, Unconfigured, hold, ledger, ledger_with, request_key,
};
use ome_spread_core::nodes::Nodes;
use ome_spread_core::rebalance::{Move, NoPlan, recommend};
use ome_spread_core::room::requested;
use ome_spread_core::settings::Settings;
use ome_spread_sim::stand_in::migration::{Ome, admitted, apply};
use ome_spread_sim::support::nodes::RACK;
use ome_spread_sim::support::objects::{self, Node, Pod};
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";
const SERVICE: &str = "qwen3";
const NAMESPACE: &str = "spread-demo";

/// The fewest moves, by breadth-first search over the Instances per zone: a move takes one from
/// a zone to another below its capacity; done when every zone is within `max_skew`.
fn fewest_moves(counts: &[usize], capacities: &[usize], max_skew: usize) -> Option<usize> {
    let within = |c: &[usize]| c.iter().max().unwrap_or(&0) - c.iter().min().unwrap_or(&0) <= max_skew;
    let mut seen = HashSet::from([counts.to_vec()]);
    let mut frontier = vec![counts.to_vec()];
    for moves in 0.. {
        if frontier.is_empty() {
            return None;
        }
        if frontier.iter().any(|c| within(c)) {
            return Some(moves);
        }
        let mut next = Vec::new();
        for c in &frontier {
            for from in 0..c.len() {
                for to in 0..c.len() {
                    if from != to && c[from] > 0 && c[to] < capacities[to] {
                        let mut moved = c.clone();
                        moved[from] -= 1;
                        moved[to] += 1;
                        if seen.insert(moved.clone()) {
                            next.push(moved);
                        }
                    }
                }
            }
        }
        frontier = next;
    }
    None
}

fn spread_fields() -> Value {
    json!({"topologySpread": "Required", "topologySpreadKey": ZONE, "topologyKey": RACK})
}

fn service() -> Value {
    json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": SERVICE, "namespace": NAMESPACE, "annotations": {}},
        "spec": {"deploymentMode": "OMENative", "engine": spread_fields()}})
}

fn replica() -> Value {
    objects::replica(NAMESPACE, SERVICE, "engine", &spread_fields())
}

/// A pod of Instance `index` as OME creates it, before the policy: one GPU.
fn bare_pod(index: usize, runner: &str, ordinal: usize) -> Value {
    Pod::instance(NAMESPACE, SERVICE, "engine", index, runner, ordinal)
        .with("nodeSelector", json!({"gpu": "true"}))
        .container("engine", json!({"nvidia.com/gpu": "1", "cpu": "4"}))
        .json()
}

fn node(name: &str, zone: usize, rack: &str, gpus: usize, spec: Value) -> Value {
    Node::named(name)
        .label(ZONE, &format!("zone-{zone}"))
        .label(RACK, rack)
        .label("gpu", "true")
        .spec(spec)
        .allocatable(json!({"nvidia.com/gpu": gpus.to_string(), "cpu": "64", "pods": "110"}))
        .json()
}

fn of_kind<'a>(objects: &'a [Value], kind: &str) -> impl Iterator<Item = &'a Value> {
    objects.iter().filter(move |o| o["kind"] == kind)
}

fn annotations(object: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(object["metadata"]["annotations"].clone()).unwrap_or_default()
}

/// What `migrate` decides on the objects, as the controller's reconcile asks the core: the plan's
/// first move, and whether the guardrails hold it back.
fn decide(objects: &[Value], settings: &Settings, now: Timestamp) -> Result<(Move, Result<(), Hold>), NoPlan> {
    let pods: Vec<_> = of_kind(objects, "Pod")
        .map(ome_spread_sim::support::objects::read)
        .collect();
    let nodes = Nodes::from_json(&of_kind(objects, "Node").cloned().collect::<Vec<_>>()).expect("readable nodes");
    let read = Objects::new(objects.to_vec()).expect("readable objects");
    let service = read.service(NAMESPACE, SERVICE).expect("the service");
    let engine = format!("{SERVICE}-engine");
    let replica = (read.parts.replicas.iter())
        .find(|r| r.metadata.name.as_deref() == Some(engine.as_str()))
        .expect("the replica");
    let component = Component::new(service, None, replica, &pods, &nodes);
    let report = diagnose(&component, settings).expect("a report");
    let next = recommend(&component, &report, &requested(&pods).expect("readable pods"), settings)?.moves[0].clone();
    let held = hold(&Situation {
        component: &component,
        lowered_to: None,
        next: &next,
        requests: &Requests::read([service]),
        // The one replica is the component's own.
        records: &Ok(Records::default()),
        written: &[],
        now,
        max_per_hour: 10,
    });
    Ok((next, held))
}

/// The Instances whose pods are all placed and Ready.
fn serving(objects: &[Value], size: usize) -> usize {
    let mut ready: BTreeMap<&str, usize> = BTreeMap::new();
    for pod in of_kind(objects, "Pod") {
        let placed = pod["spec"]["nodeName"].is_string();
        let is_ready = pod["status"]["conditions"][0]["status"] == "True";
        if placed && is_ready {
            *ready
                .entry(
                    pod["metadata"]["labels"]["ome.io/instance-index"]
                        .as_str()
                        .unwrap_or_default(),
                )
                .or_default() += 1;
        }
    }
    ready.values().filter(|n| **n == size).count()
}

/// Per node: its zone, its rack, whether it accepts the pods, its GPUs.
type Layout = Vec<(usize, String, bool, usize)>;

/// The service, its replica, and `zones` zones of 1 to 3 nodes in 1 or 2 racks a zone, some
/// cordoned or tainted, with 0 to 8 GPUs each; and the nodes' layout, in the objects' order.
fn generated_cluster(rng: &mut TestRng, zones: usize) -> (Vec<Value>, Layout) {
    let (mut objects, mut layout) = (vec![service(), replica()], Vec::new());
    for zone in 0..zones {
        let racks = 1 + rng.random_range(0..2);
        for n in 0..1 + rng.random_range(0..3) {
            let rack = format!("z{zone}-r{}", rng.random_range(0..racks));
            let (gpus, trait_) = (rng.random_range(0..9), rng.random_range(0..8));
            let spec = match trait_ {
                0 => json!({"unschedulable": true}),
                1 => json!({"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]}),
                _ => json!({}),
            };
            objects.push(node(&format!("z{zone}-n{n}"), zone, &rack, gpus, spec));
            layout.push((zone, rack, trait_ > 1, gpus));
        }
    }
    (objects, layout)
}

/// Instances of `size` pods, admitted by the policy, placed skewed (zones weighted), each whole in
/// one rack, on any node with a free GPU (pods may predate a cordon or a taint), at most two
/// thirds of the GPUs taken so that many clusters have room to move into: added to `objects`.
/// The GPUs taken on each node, and the Instances in each zone.
fn placed(
    rng: &mut TestRng,
    objects: &mut Vec<Value>,
    layout: &Layout,
    size: usize,
    policy_settings: &Value,
) -> (Vec<usize>, Vec<usize>) {
    let zones = 1 + layout.iter().map(|l| l.0).max().unwrap_or(0);
    let weights: Vec<usize> = (0..zones).map(|_| rng.random_range(0..4)).collect();
    let (mut used, mut counts) = (vec![0usize; layout.len()], vec![0usize; zones]);
    let free_in = |rack: &str, used: &[usize]| {
        let nodes = layout.iter().enumerate().filter(|(_, l)| l.1 == rack);
        nodes.map(|(at, l)| l.3 - used[at]).sum::<usize>()
    };
    let roomy_rack = |zone: usize, used: &[usize]| {
        let racks = layout.iter().filter(|l| l.0 == zone).map(|l| l.1.clone());
        racks.into_iter().find(|rack| free_in(rack, used) >= size)
    };
    let gpus: usize = layout.iter().map(|l| l.3).sum();
    for index in 0..(2 + rng.random_range(0..39)).min(gpus * 2 / 3 / size).max(2) {
        let zone = (0..zones)
            .filter(|&z| roomy_rack(z, &used).is_some())
            .max_by_key(|&z| (weights[z] * (1 + rng.random_range(0..3)), z));
        let Some(zone) = zone else { break };
        let rack = roomy_rack(zone, &used).expect("a rack with room");
        for p in 0..size {
            let runner = match (size, p) {
                (1, _) => "default",
                (_, 0) => "leader",
                _ => "worker",
            };
            let at = (0..layout.len())
                .find(|&at| layout[at].1 == rack && used[at] < layout[at].3)
                .expect("room");
            used[at] += 1;
            let mut pod = admitted(
                &bare_pod(index, runner, p.saturating_sub(1)),
                &replica(),
                policy_settings,
            )
            .expect("admitted");
            pod["spec"]["nodeName"] = objects[2 + at]["metadata"]["name"].clone();
            pod["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
            objects.push(pod);
        }
        counts[zone] += 1;
    }
    (used, counts)
}

/// The Instances each zone can hold: its own, and the whole Instances its racks' free GPUs on the
/// nodes that accept the pods take (each pod one GPU).
fn capacities(layout: &Layout, used: &[usize], counts: &[usize], size: usize) -> Vec<usize> {
    let mut free: BTreeMap<(usize, &str), usize> = BTreeMap::new();
    for (at, (zone, rack, accepts, gpus)) in layout.iter().enumerate() {
        if *accepts {
            *free.entry((*zone, rack)).or_default() += gpus - used[at];
        }
    }
    let mut capacities = counts.to_vec();
    for ((zone, _), gpus) in &free {
        capacities[*zone] += gpus / size;
    }
    capacities
}

/// One cluster in ten of each is stopped: migrationPolicy Never, the replica paused, an Instance
/// not Ready; whatever the skew, no request. None for a case not stopped; else whether a request
/// would go without the stop.
fn stopped(case: usize, objects: &mut [Value], settings: &Settings, now: Timestamp, why: &str) -> Option<bool> {
    let (what, at, path, value, unstopped) = match case % 10 {
        7 => (
            "Never",
            0,
            "/spec/engine/lifecycle",
            json!({"migrationPolicy": {"mode": "Never"}}),
            Value::Null,
        ),
        8 => ("paused", 1, "/spec/paused", json!(true), Value::Null),
        9 => {
            let pod = objects.iter().rposition(|o| o["kind"] == "Pod").expect("a pod");
            (
                "not Ready",
                pod,
                "/status/conditions/0/status",
                json!("False"),
                json!("True"),
            )
        }
        _ => return None,
    };
    set(&mut objects[at], path, value);
    let mut going = objects.to_vec();
    set(&mut going[at], path, unstopped);
    let decided = decide(objects, settings, now);
    assert!(!matches!(decided, Ok((_, Ok(())))), "{why}: a request while {what}");
    Some(matches!(decide(&going, settings, now), Ok((_, Ok(())))))
}

/// `value` at `path` (a JSON pointer) of `object`, the objects on the way made as needed.
fn set(object: &mut Value, path: &str, value: Value) {
    let mut at = object;
    for key in path.trim_start_matches('/').split('/') {
        at = match key.parse::<usize>() {
            Ok(i) => &mut at[i],
            Err(_) => &mut at[key],
        };
    }
    *at = value;
}

/// The request `next`, as `migrate` writes it: OME's annotation and the ledger.
fn write_request(objects: &mut [Value], next: &Move, uuid: &str, now: Timestamp) {
    let request = Request::new("engine", next, now);
    let service = &mut objects[0];
    let entries = ledger(SERVICE, &annotations(service)).expect("our ledger");
    service["metadata"]["annotations"][request_key(uuid)] = json!(request.value());
    service["metadata"]["annotations"][LEDGER] = json!(ledger_with(&entries, Entry::new(uuid, &request, now), now));
}

/// The replica's last migration record.
fn record(objects: &[Value]) -> Option<Value> {
    objects[1]["status"]["migrations"]
        .as_array()
        .and_then(|r| r.last())
        .cloned()
}

/// OME without its caps takes the request, then holds it: Accepted, in its words, its condition
/// True; the core holds the next request for that reason, the plan still there; nothing moved.
fn held_for_caps(
    objects: &mut Vec<Value>,
    ome: &mut Ome,
    now: &mut Timestamp,
    uuid: &str,
    settings: &Settings,
    why: &str,
) {
    for _ in 0..3 {
        let (changes, _) = ome.step(objects, *now);
        apply(objects, changes);
        *now += SignedDuration::from_mins(1);
    }
    let held = record(objects).expect("OME's record");
    assert_eq!(
        (&held["phase"], &held["message"]),
        (
            &json!("Accepted"),
            &json!("waiting for migration capacity policy (no lifecycle.audit configured)")
        ),
        "{why}"
    );
    let condition = &objects[1]["status"]["conditions"][0];
    assert_eq!(
        (&condition["type"], &condition["status"]),
        (&json!("MigrationPolicyUnconfigured"), &json!("True")),
        "{why}"
    );
    assert_eq!(
        decide(objects, settings, *now).map(|(_, held)| held),
        Ok(Err(Hold::Unconfigured(Unconfigured {
            replica: format!("{NAMESPACE}/{SERVICE}-engine"),
            held: Some(uuid.to_owned())
        }))),
        "{why}"
    );
}

/// OME runs the migration, ten steps at the most: no second request meanwhile, the Instances
/// serving never fewer than `start`. It completes; its record.
fn migrated(
    objects: &mut Vec<Value>,
    ome: &mut Ome,
    now: &mut Timestamp,
    start: usize,
    size: usize,
    settings: &Settings,
    why: &str,
) -> Value {
    for _ in 0..10 {
        let decided = decide(objects, settings, *now);
        assert!(
            !matches!(decided, Ok((_, Ok(())))),
            "{why}: a second request while one is in flight: {decided:?}"
        );
        let (changes, _) = ome.step(objects, *now);
        apply(objects, changes);
        *now += SignedDuration::from_mins(1);
        assert!(serving(objects, size) >= start, "{why}: serving dropped");
        if record(objects).is_some_and(|r| r["phase"] == "Completed" || r["phase"] == "Failed") {
            break;
        }
    }
    let done = record(objects).expect("OME's record");
    assert_eq!(done["phase"], "Completed", "{why}: {done}");
    done
}

/// The surge landed whole in one rack of the planned zone, a rack of its hint nodes; a leader and
/// workers' hint nodes all lie in that rack.
fn landed_as_planned(objects: &[Value], done: &Value, next: &Move, size: usize, why: &str) {
    let zone_and_rack = |node: &Value| {
        let node = of_kind(objects, "Node").find(|n| n["metadata"]["name"] == *node);
        let labels = &node.expect("a node")["metadata"]["labels"];
        let label = |key: &str| labels[key].as_str().unwrap_or_default().to_owned();
        (label(ZONE), label(RACK))
    };
    let surge = done["surgeInstance"].to_string();
    let landed: BTreeSet<_> = of_kind(objects, "Pod")
        .filter(|p| p["metadata"]["labels"]["ome.io/instance-index"] == surge.as_str())
        .map(|p| zone_and_rack(&p["spec"]["nodeName"]))
        .collect();
    let hinted: BTreeSet<_> = next.hint_nodes.iter().map(|h| zone_and_rack(&json!(h))).collect();
    assert_eq!(landed.len(), 1, "{why}: the surge in {landed:?}");
    assert!(landed.is_subset(&hinted), "{why}: {landed:?} hinted {hinted:?}");
    assert_eq!(
        landed.first().map(|l| l.0.as_str()),
        Some(next.to_domain.as_str()),
        "{why}"
    );
    if size > 1 {
        assert_eq!(hinted.len(), 1, "{why}: hint nodes {:?}", next.hint_nodes);
    }
}

#[test]
fn migrate_reaches_the_spread_in_the_fewest_moves_through_ome_and_the_scheduler() {
    // proptest's deterministic generator: the same clusters on every run.
    let mut rng = TestRng::deterministic_rng(RngAlgorithm::ChaCha);
    let (mut moved, mut reachable, mut gangs, mut stopped_clusters, mut would_go) = (0, 0, 0, 0, 0);
    let mut held = 0;
    for case in 0..720 {
        let zones = 2 + rng.random_range(0..5);
        let (mut objects, layout) = generated_cluster(&mut rng, zones);
        let size = if case % 2 == 0 { 2 + rng.random_range(0..2) } else { 1 };
        let max_skew = 1 + rng.random_range(0..2);
        let policy_settings = json!({"maxSkew": max_skew});
        let settings = Settings::from_json(&policy_settings).expect("settings");
        let (used, counts) = placed(&mut rng, &mut objects, &layout, size, &policy_settings);
        let capacities = capacities(&layout, &used, &counts, size);
        let fewest = fewest_moves(&counts, &capacities, max_skew);
        let start = serving(&objects, size);
        assert_eq!(start, counts.iter().sum::<usize>());
        let why =
            format!("case {case}: {counts:?} capacities {capacities:?} maxSkew {max_skew}, {size} pods an Instance");
        // Three in ten start as a kustomize install does, without OME's caps.
        let mut ome = Ome {
            settings: policy_settings.clone(),
            deadline: SignedDuration::from_mins(10),
            caps: case % 10 >= 3,
        };
        let mut now: Timestamp = "2026-11-30T12:00:00Z".parse().expect("a time");
        if let Some(would) = stopped(case, &mut objects, &settings, now, &why) {
            would_go += usize::from(would);
            stopped_clusters += 1;
            continue;
        }
        let mut moves = 0;
        loop {
            let (next, hold) = match decide(&objects, &settings, now) {
                Ok(decided) => decided,
                Err(NoPlan::WithinSkew) => break,
                Err(no) => {
                    assert_eq!((moves, fewest), (0, None), "{why}: {no}");
                    break;
                }
            };
            assert!(Some(moves) < fewest, "{why}: more moves than the fewest");
            if let Err(Hold::HourlyLimit { .. }) = hold {
                now += SignedDuration::from_hours(1);
            }
            assert_eq!(decide(&objects, &settings, now).map(|d| d.1), Ok(Ok(())), "{why}");
            let uuid = format!("u{moves}");
            write_request(&mut objects, &next, &uuid, now);
            if !ome.caps {
                held_for_caps(&mut objects, &mut ome, &mut now, &uuid, &settings, &why);
                assert_eq!(serving(&objects, size), start, "{why}: a held request moves nothing");
                held += 1;
                ome.caps = true;
            }
            let done = migrated(&mut objects, &mut ome, &mut now, start, size, &settings, &why);
            landed_as_planned(&objects, &done, &next, size, &why);
            gangs += usize::from(size > 1);
            moves += 1;
        }
        if fewest.is_some() {
            reachable += 1;
            assert_eq!(Some(moves), fewest, "{why}");
        }
        moved += moves;
    }
    // Not degenerate: hundreds of clusters can reach the spread, in hundreds of moves, many of
    // them leaders with workers (others have no room, by design: racks split a zone's room).
    println!(
        "{reachable} clusters reachable, {moved} moves ({gangs} of leaders with workers, {held} first ones held for OME's caps); {stopped_clusters} stopped, {would_go} of them skewed enough for a request"
    );
    assert!(
        would_go > 50,
        "{would_go} of the stopped clusters would have had a request"
    );
    assert!(held > 50, "{held} first requests held for OME's caps");
    assert!(
        reachable > 200 && moved > 400 && gangs > 100,
        "{reachable} reachable, {moved} moves, {gangs} of gangs"
    );
}
