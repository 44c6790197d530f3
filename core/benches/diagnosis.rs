//! `make bench`: the controller's whole pass, in the pure core: 1,000 replicas, 10,000 pods and
//! 5,000 nodes read once, then one report per replica. Half the replicas run 10 single-pod
//! Instances, half 2 Instances of a leader and 4 workers; each component's pods select the nodes
//! that hold its model (a tenth of the cluster), some tainted, across 3 zones. Measured alone and,
//! as the controller's reconcile does, with the worst of what losing each zone and rack leaves
//! (`worst`), each node's room as in `make bench-churn` (64 GPUs, OME's pods and 20,000 trainers
//! of 8 GPUs on them): a rack holds one node of a model, too few GPUs for a multi-node Instance,
//! so that those Instances' room counts read every node, as on a full cluster.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use ome_spread_core::diagnosis::{Component, Reason, diagnose};
use ome_spread_core::labels;
use ome_spread_core::loss::worst;
use ome_spread_core::nodes::Nodes;
use ome_spread_core::ome::Runtime;
use ome_spread_core::pod::Pod;
use ome_spread_core::room::{Requested, requested};
use ome_spread_core::settings::Settings;
use serde_json::json;

use ome_spread_sim::bench::churn::{OTHER_PODS, room};
use ome_spread_sim::bench::large_cluster::{Cluster, REPLICAS, Typed, cluster, ome_pods, other_pods, typed};
use ome_spread_sim::support::objects::read;

/// The controller's pass: nodes read once, pods grouped by replica once, one report per replica;
/// with `requested` (the room the controller keeps by the pods' events), each replica's worst loss
/// too, as the controller's reconcile reads it.
fn pass(
    cluster: &Cluster,
    typed: &Typed,
    settings: &Settings,
    requested: Option<&Requested>,
) -> BTreeMap<Reason, usize> {
    let nodes = Nodes::from_json(&cluster.nodes).expect("the generated nodes are readable");
    let mut pods_of: HashMap<(&str, &str), Vec<&Pod>> = HashMap::new();
    for pod in &typed.pods {
        let key = (
            pod.label(labels::INFERENCE_SERVICE).unwrap_or_default(),
            pod.label(labels::COMPONENT).unwrap_or_default(),
        );
        pods_of.entry(key).or_default().push(pod);
    }
    let mut reasons = BTreeMap::new();
    let runtime = Some(Runtime::Cluster(&typed.runtime));
    for (service, replica) in typed.services.iter().zip(&typed.replicas) {
        let name = service.metadata.name.as_deref().unwrap_or_default();
        let pods = pods_of.get(&(name, "engine")).into_iter().flatten().copied();
        let component = Component::new(service, runtime, replica, pods, &nodes);
        let report = diagnose(&component, settings).expect("a report");
        if let Some(requested) = requested {
            black_box(worst(&component, &report, requested, settings));
        }
        *reasons.entry(report.reason).or_insert(0) += 1;
    }
    reasons
}

fn main() {
    let mut cluster = cluster();
    // The nodes of `make bench-churn`: a node without allocatable has no room, and its count
    // ends at once.
    for node in &mut cluster.nodes {
        node["status"] = json!({"allocatable": room()});
    }
    let mut typed = typed(&cluster);
    // The pods as OME creates them (the fixture leader's requests: 8 GPUs each), as `make
    // bench-churn` holds them.
    typed.pods = ome_pods(&cluster).iter().map(read).collect();
    let settings = Settings::default();
    // The room as `make bench-churn` holds it: OME's pods and the 20,000 trainers beside them.
    let trainers: Vec<Pod> = other_pods(&cluster, OTHER_PODS).iter().map(read).collect();
    let requested = requested(typed.pods.iter().chain(&trainers)).expect("the generated pods are readable");
    let reasons = pass(&cluster, &typed, &settings, Some(&requested));
    println!(
        "diagnosis pass over {} replicas, {} pods, {} nodes: reasons {:?}",
        cluster.replicas.len(),
        cluster.pods.len(),
        cluster.nodes.len(),
        reasons
    );
    assert_eq!(
        reasons.get(&Reason::Satisfied),
        Some(&REPLICAS),
        "every replica goes through the whole diagnosis"
    );
    let mut criterion = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(10))
        .configure_from_args();
    criterion.bench_function("diagnosis/1000 replicas, 10000 pods, 5000 nodes", |b| {
        b.iter(|| black_box(pass(black_box(&cluster), &typed, &settings, None)))
    });
    criterion.bench_function("diagnosis/with the worst loss of each", |b| {
        b.iter(|| black_box(pass(black_box(&cluster), &typed, &settings, Some(&requested))))
    });
    criterion.bench_function("diagnosis/of which reading the 5000 nodes", |b| {
        b.iter(|| black_box(Nodes::from_json(black_box(&cluster.nodes))))
    });
    criterion.final_summary();
}
