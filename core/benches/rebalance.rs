//! `make bench`: the rebalance plan beside the diagnosis, on the benchmarks' large
//! cluster (1,000 replicas, 10,000 pods, 5,000 nodes) skewed: every pod moved to a node of its
//! model in zone-0, and every node given room, so that each replica is Skewed and planned
//! (10,0,0 takes 6 moves, 2,0,0 one). Measures the diagnosis pass alone and with a plan per
//! replica, so that the plan's cost shows against the pass's budget; and with `migrate`'s
//! guardrails after each plan, which read every InferenceService's ledger and every replica's
//! records (three each here: a day's migrations) on each call.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use jiff::{SignedDuration, Timestamp};
use ome_spread_core::diagnosis::{Component, Reason, diagnose};
use ome_spread_core::labels;
use ome_spread_core::migration::{BadLedger, BadRecord, Entry, LEDGER, Records, Request, Requests, Situation, hold};
use ome_spread_core::nodes::Nodes;
use ome_spread_core::ome::Runtime;
use ome_spread_core::pod::Pod;
use ome_spread_core::rebalance::recommend;
use ome_spread_core::room::requested;
use ome_spread_core::settings::Settings;
use serde_json::{Value, json};

use ome_spread_sim::bench::large_cluster::{Cluster, REPLICAS, Typed, cluster, typed};

/// The large cluster with every pod Ready on a node of its model in zone-0, and room on every node.
fn skewed() -> Cluster {
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
    cluster
}

/// How far a pass goes for each replica.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Stage {
    Diagnosis,
    Plan,
    Guardrails,
}

/// What every InferenceService and replica carry after a day of migrations: three entries in our
/// ledger, three Completed records.
struct History {
    annotations: Vec<BTreeMap<String, String>>,
    records: Vec<Value>,
    now: Timestamp,
}

fn history(cluster: &Cluster) -> History {
    let now: Timestamp = "2026-11-30T12:00:00Z".parse().expect("a time");
    let (mut annotations, mut records) = (Vec::new(), Vec::new());
    for (i, _) in cluster.services.iter().enumerate() {
        let entries: Vec<Entry> = (0..3)
            .map(|k| {
                let at = now - SignedDuration::from_hours(2 + 3 * k);
                let step = ome_spread_core::rebalance::Move {
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
        annotations.push(BTreeMap::from([(LEDGER.to_owned(), ledger)]));
        records.push(Value::from(
            (0..3)
                .map(|k| {
                    json!({"requestUUID": format!("{i}-{k}"), "trigger": "Manual", "sourceInstance": k,
                    "phase": "Completed", "completedAt": (now - SignedDuration::from_hours(1 + 3 * k)).to_string()})
                })
                .collect::<Vec<_>>(),
        ));
    }
    History {
        annotations,
        records,
        now,
    }
}

/// The cluster with its history: each InferenceService's ledger, each replica's records.
fn with_history(mut typed: Typed, history: &History) -> Typed {
    for (service, annotations) in typed.services.iter_mut().zip(&history.annotations) {
        service.metadata.annotations = Some(annotations.clone());
    }
    for (replica, records) in typed.replicas.iter_mut().zip(&history.records) {
        replica.status.get_or_insert_default().migrations = Some(records.clone());
    }
    typed
}

/// The cluster's migration requests (the services' annotations) and records (the replicas'), read.
fn read_history(typed: &Typed) -> (Result<Requests, BadLedger>, Result<Records, BadRecord>) {
    (Requests::read(&typed.services), Records::read(&typed.replicas))
}

/// The controller's pass (as the diagnosis benchmark's), up to `stage` for each replica: the
/// reasons, the moves planned in all, and the requests the guardrails let go.
fn pass(
    cluster: &Cluster,
    typed: &Typed,
    history: &History,
    settings: &Settings,
    stage: Stage,
) -> (BTreeMap<Reason, usize>, usize, usize) {
    let nodes = Nodes::from_json(&cluster.nodes).expect("the generated nodes are readable");
    let mut pods_of: HashMap<&str, Vec<&Pod>> = HashMap::new();
    for pod in &typed.pods {
        let service = pod.label(labels::INFERENCE_SERVICE).unwrap_or_default();
        pods_of.entry(service).or_default().push(pod);
    }
    let requested = if stage >= Stage::Plan {
        requested(&typed.pods).expect("the generated pods are readable")
    } else {
        Default::default()
    };
    let (mut reasons, mut moves, mut requests) = (BTreeMap::new(), 0, 0);
    // The cluster's requests and records, read once (the controller: once per change of them),
    // and only by the pass that asks the guardrails.
    let (requests_read, records_read) = if stage == Stage::Guardrails {
        read_history(typed)
    } else {
        (Ok(Requests::default()), Ok(Records::default()))
    };
    let runtime = Some(Runtime::Cluster(&typed.runtime));
    for (service, replica) in typed.services.iter().zip(&typed.replicas) {
        let name = service.metadata.name.as_deref().unwrap_or_default();
        let component = Component::new(
            service,
            runtime,
            replica,
            pods_of.get(name).into_iter().flatten().copied(),
            &nodes,
        );
        let report = diagnose(&component, settings).expect("a report");
        *reasons.entry(report.reason).or_insert(0) += 1;
        if stage < Stage::Plan {
            continue;
        }
        let Ok(plan) = recommend(&component, &report, &requested, settings) else {
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
            now: history.now,
            max_per_hour: 10,
        });
        requests += usize::from(held.is_ok());
    }
    (reasons, moves, requests)
}

fn main() {
    let cluster = skewed();
    let history = history(&cluster);
    let typed = with_history(typed(&cluster), &history);
    let settings = Settings::default();
    let (reasons, moves, requests) = pass(&cluster, &typed, &history, &settings, Stage::Guardrails);
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
    criterion.bench_function("rebalance/diagnosis of 1000 skewed replicas", |b| {
        b.iter(|| black_box(pass(black_box(&cluster), &typed, &history, &settings, Stage::Diagnosis)))
    });
    criterion.bench_function("rebalance/diagnosis and a plan for each", |b| {
        b.iter(|| black_box(pass(black_box(&cluster), &typed, &history, &settings, Stage::Plan)))
    });
    criterion.bench_function("rebalance/diagnosis, a plan and the guardrails for each", |b| {
        b.iter(|| {
            black_box(pass(
                black_box(&cluster),
                &typed,
                &history,
                &settings,
                Stage::Guardrails,
            ))
        })
    });
    criterion.final_summary();
}
