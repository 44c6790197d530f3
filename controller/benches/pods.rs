//! `make bench`: what a pod event costs the controller (issue 21). The 10,000 OME pods of the
//! benchmarks' large cluster (core/benches/support/cluster.rs), each shaped as OME v1.3 creates it
//! (benches/support: the repository's fixture leader, its env, volumes and probes, with the pod's
//! own rendered terms), in the pods index
//! and the room's. Side by side in one run: one pod's status update, trimmed and indexed in both,
//! and a relist of all 10,000: what every pod event cost before, when the pod snapshot was built
//! anew from the whole cache.

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use ome_spread_controller::pods::{self, Pods};
use ome_spread_controller::room::{self, Room};

mod support;

/// The large cluster's pods as OME creates them.
fn pods() -> Vec<Pod> {
    let pods = support::ome_pods(&support::cluster::cluster());
    pods.into_iter()
        .map(|pod| serde_json::from_value(pod).expect("a pod"))
        .collect()
}

/// A pod event as the controller's two watches take it: trimmed for each, then indexed.
fn apply(pods_index: &Pods, room_index: &Room, event: impl Fn(Pod) -> Event<Pod>, pod: &Pod) {
    let (mut for_pods, mut for_room) = (pod.clone(), pod.clone());
    pods::trim(&mut for_pods);
    room::trim(&mut for_room);
    pods_index.apply(&event(for_pods));
    room_index.apply(&event(for_room));
}

/// Both indexes after a relist of `pods`.
fn relisted(pods_index: &Pods, room_index: &Room, pods: &[Pod]) {
    pods_index.apply(&Event::Init);
    room_index.apply(&Event::Init);
    for pod in pods {
        apply(pods_index, room_index, Event::InitApply, pod);
    }
    pods_index.apply(&Event::InitDone);
    room_index.apply(&Event::InitDone);
}

fn main() {
    let pods = pods();
    let size = serde_json::to_string(&pods[0]).map_or(0, |json| json.len());
    println!("pod index: {} pods of {size} bytes as JSON", pods.len());
    let (pods_index, room_index) = (Pods::default(), Room::default());
    relisted(&pods_index, &room_index, &pods);
    let mut criterion = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let updated = &pods[5];
    criterion.bench_function("pods/one pod event, trimmed and indexed in both", |b| {
        b.iter(|| apply(&pods_index, &room_index, Event::Apply, black_box(updated)))
    });
    criterion.bench_function("pods/a relist of all 10000 (each pod event, before)", |b| {
        b.iter(|| relisted(&pods_index, &room_index, black_box(&pods)))
    });
}
