//! `make bench`: the controller's whole pass, in the pure core, on the benchmarks' large cluster
//! (`ome_spread_sim::bench::large_cluster`): its nodes read once, then one report per replica.
//!
//! As it stands, every spread holding: measured alone and, as the controller's reconcile does,
//! with the worst of what losing each zone and rack leaves (`worst`), each node's room as in `make
//! bench-churn` (64 GPUs, OME's pods and 20,000 trainers of 8 GPUs on them): a rack holds one node
//! of a model, too few GPUs for a multi-node Instance, so that those Instances' room counts read
//! every node, as on a full cluster.
//!
//! Skewed (every pod moved to a node of its model in zone-0, and every node given room), so that
//! each replica is Skewed and planned (10,0,0 takes 6 moves, 2,0,0 one): the pass alone, with a
//! plan per replica, and with `migrate`'s guardrails after each plan, which read every
//! InferenceService's ledger and every replica's records (three each here: a day's migrations).

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use jiff::{SignedDuration, Timestamp};
use ome_spread_core::diagnosis::{Component, Reason, diagnose};
use ome_spread_core::labels;
use ome_spread_core::loss::worst;
use ome_spread_core::migration::{Entry, LEDGER, Records, Request, Requests, Situation, hold};
use ome_spread_core::nodes::Nodes;
use ome_spread_core::ome::Runtime;
use ome_spread_core::pod::Pod;
use ome_spread_core::rebalance::{Move, recommend};
use ome_spread_core::room::{Requested, requested};
use ome_spread_core::settings::Settings;
use serde_json::json;

use ome_spread_sim::bench::churn::{OTHER_PODS, room};
use ome_spread_sim::bench::large_cluster::{Cluster, REPLICAS, Typed, cluster, ome_pods, other_pods, typed};
use ome_spread_sim::support::objects::read;

/// How far a pass goes for each replica.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Stage {
    Diagnosis,
    /// The diagnosis and its worst loss.
    Worst,
    Plan,
    Guardrails,
}

/// A cluster as the pass reads it: its objects, typed, with the migration requests and records
/// the guardrails read (each InferenceService's ledger, each replica's records), the room its pods
/// take, and the time the guardrails are asked at.
struct Bench {
    cluster: Cluster,
    typed: Typed,
    requested: Requested,
    now: Timestamp,
}

impl Bench {
    /// The cluster with what every InferenceService and replica carry after a day of migrations:
    /// three entries in our ledger, three Completed records.
    fn new(cluster: Cluster, mut typed: Typed, requested: Requested) -> Bench {
        let now: Timestamp = "2026-11-30T12:00:00Z".parse().expect("a time");
        for (i, (service, replica)) in typed.services.iter_mut().zip(&mut typed.replicas).enumerate() {
            let entries: Vec<Entry> = (0..3)
                .map(|k| {
                    let at = now - SignedDuration::from_hours(2 + 3 * k);
                    let step = Move {
                        instance: k as u32,
                        from_node: format!("gpu-node-{i}"),
                        from_domain: "zone-0".into(),
                        to_domain: "zone-1".into(),
                        hint_nodes: vec![format!("gpu-node-{}", i + 1)],
                    };
                    Entry::new(&format!("{i}-{k}"), &Request::new("engine", &step, at), at)
                })
                .collect();
            let ledger = serde_json::to_string(&entries).expect("a ledger");
            service.metadata.annotations = Some(BTreeMap::from([(LEDGER.to_owned(), ledger)]));
            let completed = |k: i64| {
                json!({"requestUUID": format!("{i}-{k}"), "trigger": "Manual", "sourceInstance": k,
                    "phase": "Completed", "completedAt": (now - SignedDuration::from_hours(1 + 3 * k)).to_string()})
            };
            replica.status.get_or_insert_default().migrations = Some((0..3).map(completed).collect());
        }
        Bench {
            cluster,
            typed,
            requested,
            now,
        }
    }
}

/// The controller's pass, up to `stage` for each replica: nodes read once, pods grouped by
/// replica once, one report per replica; the reasons, the moves planned in all, and the requests
/// the guardrails let go.
fn pass(bench: &Bench, settings: &Settings, stage: Stage) -> (BTreeMap<Reason, usize>, usize, usize) {
    let typed = &bench.typed;
    let nodes = Nodes::from_json(&bench.cluster.nodes).expect("the generated nodes are readable");
    let mut pods_of: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for pod in &typed.pods {
        let service = pod.label(labels::INFERENCE_SERVICE).unwrap_or_default();
        pods_of.entry(service).or_default().push(pod);
    }
    // The cluster's requests and records, read once (the controller: once per change of them),
    // and only by the pass that asks the guardrails.
    let (requests_read, records_read) = match stage {
        Stage::Guardrails => (Requests::read(&typed.services), Records::read(&typed.replicas)),
        _ => (Ok(Requests::default()), Ok(Records::default())),
    };
    let (mut reasons, mut moves, mut requests) = (BTreeMap::new(), 0, 0);
    let runtime = Some(Runtime::Cluster(&typed.runtime));
    for (service, replica) in typed.services.iter().zip(&typed.replicas) {
        let name = service.metadata.name.as_deref().unwrap_or_default();
        let pods = pods_of.get(name).into_iter().flatten().copied();
        let component = Component::new(service, runtime, replica, pods, &nodes);
        let report = diagnose(&component, settings).expect("a report");
        *reasons.entry(report.reason).or_insert(0) += 1;
        if stage == Stage::Worst {
            black_box(worst(&component, &report, &bench.requested, settings));
        }
        if stage < Stage::Plan {
            continue;
        }
        let Ok(plan) = recommend(&component, &report, &bench.requested, settings) else {
            continue;
        };
        moves += plan.moves.len();
        if stage < Stage::Guardrails {
            continue;
        }
        // As the controller does: the component's own records read afresh, from its replica.
        let held = hold(&Situation {
            component: &component,
            lowered_to: None,
            next: &plan.moves[0],
            requests: &requests_read,
            records: &records_read,
            written: &[],
            now: bench.now,
            max_per_hour: 10,
        });
        requests += usize::from(held.is_ok());
    }
    (reasons, moves, requests)
}

/// The cluster as it stands, its nodes' room as `make bench-churn` gives it, its pods as OME
/// creates them (the fixture leader's requests: 8 GPUs each) beside the 20,000 trainers.
fn as_it_stands() -> Bench {
    let mut cluster = cluster();
    // A node without allocatable has no room, and its count ends at once.
    for node in &mut cluster.nodes {
        node["status"] = json!({"allocatable": room()});
    }
    let mut typed = typed(&cluster);
    typed.pods = ome_pods(&cluster).iter().map(read).collect();
    let trainers: Vec<Pod> = other_pods(&cluster, OTHER_PODS).iter().map(read).collect();
    let requested = requested(typed.pods.iter().chain(&trainers)).expect("the generated pods are readable");
    Bench::new(cluster, typed, requested)
}

/// The large cluster with every pod Ready on a node of its model in zone-0, and room on every node.
fn skewed() -> Bench {
    let mut cluster = cluster();
    let nodes = cluster.nodes.len();
    for pod in &mut cluster.pods {
        let name = pod["spec"]["nodeName"].as_str().unwrap_or_default();
        let n: usize = name.trim_start_matches("gpu-node-").parse().expect("a node number");
        // n + 10k holds the same models (they repeat every 10 nodes); k makes it zone-0 (n % 3).
        let mut zone_0 = n + 10 * ((3 - n % 3) % 3);
        if zone_0 >= nodes {
            zone_0 -= 30;
        }
        pod["spec"]["nodeName"] = json!(format!("gpu-node-{zone_0}"));
        // Ready and Running, so that `migrate` could request a move.
        pod["status"] = json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]});
    }
    for node in &mut cluster.nodes {
        node["status"] = json!({"allocatable": {"nvidia.com/gpu": "8", "pods": "110"}});
    }
    let typed = typed(&cluster);
    let requested = requested(&typed.pods).expect("the generated pods are readable");
    Bench::new(cluster, typed, requested)
}

fn main() {
    let settings = Settings::default();
    let standing = as_it_stands();
    let (reasons, _, _) = pass(&standing, &settings, Stage::Worst);
    println!("diagnosis pass over {REPLICAS} replicas, 10000 pods, 5000 nodes: reasons {reasons:?}");
    assert_eq!(
        reasons.get(&Reason::Satisfied),
        Some(&REPLICAS),
        "every replica goes through the whole diagnosis"
    );
    let skewed = skewed();
    let (reasons, moves, requests) = pass(&skewed, &settings, Stage::Guardrails);
    println!(
        "rebalance over {REPLICAS} skewed replicas: reasons {reasons:?}, {moves} moves planned, {requests} let go"
    );
    assert_eq!(reasons.get(&Reason::Skewed), Some(&REPLICAS), "every replica is Skewed");
    // Half run 10 single-pod Instances (10,0,0: 6 moves), half 2 Instances (2,0,0: 1 move).
    assert_eq!(moves, REPLICAS / 2 * 6 + REPLICAS / 2);
    // Each alone would go: the guardrails hold none back (none pending, none under way, the
    // ledgers' entries over an hour old), so every call reads everything.
    assert_eq!(requests, REPLICAS);
    let mut criterion = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    let mut bench = |name: &str, bench: &Bench, stage: Stage| {
        criterion.bench_function(name, |b| b.iter(|| black_box(pass(black_box(bench), &settings, stage))));
    };
    bench(
        "diagnosis/1000 replicas, 10000 pods, 5000 nodes",
        &standing,
        Stage::Diagnosis,
    );
    bench("diagnosis/with the worst loss of each", &standing, Stage::Worst);
    bench("rebalance/diagnosis of 1000 skewed replicas", &skewed, Stage::Diagnosis);
    bench("rebalance/diagnosis and a plan for each", &skewed, Stage::Plan);
    bench(
        "rebalance/diagnosis, a plan and the guardrails for each",
        &skewed,
        Stage::Guardrails,
    );
    criterion.bench_function("diagnosis/of which reading the 5000 nodes", |b| {
        b.iter(|| black_box(Nodes::from_json(black_box(&standing.cluster.nodes))))
    });
    criterion.final_summary();
}
