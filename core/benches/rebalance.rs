//! `make bench`: the rebalance plan beside the diagnosis (issue 11), on the benchmarks' large
//! cluster (1,000 replicas, 10,000 pods, 5,000 nodes) skewed: every pod moved to a node of its
//! model in zone-0, and every node given room, so that each replica is Skewed and planned
//! (10,0,0 takes 6 moves, 2,0,0 one). Measures the diagnosis pass alone and with a plan per
//! replica, so that the plan's cost shows against the pass's budget.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use ome_spread_core::diagnosis::{Component, Reason, diagnose};
use ome_spread_core::nodes::Nodes;
use ome_spread_core::rebalance::recommend;
use ome_spread_core::room::requested;
use ome_spread_core::settings::Settings;
use serde_json::{Value, json};

#[path = "support/cluster.rs"]
mod cluster;
use cluster::{Cluster, REPLICAS, cluster};

/// The large cluster with every pod on a node of its model in zone-0, and room on every node.
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
    }
    for node in &mut cluster.nodes {
        node["status"] = json!({"allocatable": {"nvidia.com/gpu": "8", "pods": "110"}});
    }
    cluster
}

/// The controller's pass (as the diagnosis benchmark's), and with `plan` each replica's plan:
/// the reasons, and the moves planned in all.
fn pass(cluster: &Cluster, settings: &Settings, plan: bool) -> (BTreeMap<Reason, usize>, usize) {
    let nodes = Nodes::from_json(&cluster.nodes);
    let mut pods_of: HashMap<&str, Vec<Value>> = HashMap::new();
    for pod in &cluster.pods {
        let service = pod["metadata"]["labels"]["ome.io/inferenceservice"]
            .as_str()
            .unwrap_or_default();
        pods_of.entry(service).or_default().push(pod.clone());
    }
    let requested = if plan {
        requested(&cluster.pods)
    } else {
        Default::default()
    };
    let (mut reasons, mut moves) = (BTreeMap::new(), 0);
    for (service, replica) in cluster.services.iter().zip(&cluster.replicas) {
        let name = service["metadata"]["name"].as_str().unwrap_or_default();
        let component = Component {
            service,
            runtime: None,
            replica,
            pods: pods_of.get(name).map(Vec::as_slice).unwrap_or_default(),
            nodes: &nodes,
        };
        let report = diagnose(&component, settings).expect("a report");
        if plan {
            moves += recommend(&component, &report, &requested, settings).map_or(0, |p| p.moves.len());
        }
        *reasons.entry(report.reason).or_insert(0) += 1;
    }
    (reasons, moves)
}

fn main() {
    let cluster = skewed();
    let settings = Settings::default();
    let (reasons, moves) = pass(&cluster, &settings, true);
    println!("rebalance over {REPLICAS} skewed replicas: reasons {reasons:?}, {moves} moves planned");
    assert_eq!(reasons.get(&Reason::Skewed), Some(&REPLICAS), "every replica is Skewed");
    // Half run 10 single-pod Instances (10,0,0: 6 moves), half 2 Instances (2,0,0: 1 move).
    assert_eq!(moves, REPLICAS / 2 * 6 + REPLICAS / 2);
    let mut criterion = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    criterion.bench_function("rebalance/diagnosis of 1000 skewed replicas", |b| {
        b.iter(|| black_box(pass(black_box(&cluster), &settings, false)))
    });
    criterion.bench_function("rebalance/diagnosis and a plan for each", |b| {
        b.iter(|| black_box(pass(black_box(&cluster), &settings, true)))
    });
    criterion.final_summary();
}
