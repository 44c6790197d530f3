//! `make bench`: what a pod event costs the controller. The 10,000 OME pods of the
//! benchmarks' large cluster (`ome_spread_sim::large_cluster`), each shaped as OME v1.3 creates it
//! (the repository's fixture leader, its env, volumes and probes, with the pod's own rendered
//! terms), in the pods index and the room's. Side by side in one run: one pod's
//! status update, trimmed once and indexed in both, and a relist of all 10,000: what every pod
//! event cost before, when the pod snapshot was built anew from the whole cache. First, what each
//! index keeps of a pod (a counting allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::Criterion;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use ome_spread_controller::pods::{self, Pods};
use ome_spread_controller::room::Room;
use ome_spread_sim::large_cluster;

/// The bytes allocated and not yet freed: what an index keeps of the pods it was given.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);

// SAFETY: each call is the system allocator's own, with the caller's layout.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        HELD.fetch_add(new_size, Ordering::Relaxed);
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What an index of kind `I` keeps of `pods` after a relist of them alone, in bytes a pod.
fn bytes_a_pod<I: Default>(pods: &[Pod], apply: impl Fn(&I, &Event<Pod>)) -> usize {
    let before = HELD.load(Ordering::Relaxed);
    let index = I::default();
    apply(&index, &Event::Init);
    for pod in pods {
        let mut trimmed = pod.clone();
        pods::trim(&mut trimmed);
        apply(&index, &Event::InitApply(trimmed));
    }
    apply(&index, &Event::InitDone);
    let kept = HELD.load(Ordering::Relaxed).saturating_sub(before);
    drop(index);
    kept / pods.len()
}

/// The large cluster's pods as OME creates them.
fn pods() -> Vec<Pod> {
    let pods = large_cluster::ome_pods(&large_cluster::cluster());
    pods.into_iter()
        .map(|pod| serde_json::from_value(pod).expect("a pod"))
        .collect()
}

/// A pod event as the controller's watch of pods takes it: trimmed, then indexed in both.
fn apply(pods_index: &Pods, room_index: &Room, event: impl Fn(Pod) -> Event<Pod>, pod: &Pod) {
    let mut trimmed = pod.clone();
    pods::trim(&mut trimmed);
    let event = event(trimmed);
    room_index.apply(&event);
    pods_index.apply(&event);
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
    // The room's watch of every pod, of any workload: what it keeps of each.
    let cluster = large_cluster::cluster();
    let others: Vec<Pod> = large_cluster::other_pods(&cluster, 20_000)
        .into_iter()
        .map(|pod| serde_json::from_value(pod).expect("a pod"))
        .collect();
    let room = |index: &Room, event: &Event<Pod>| {
        index.apply(event);
    };
    println!(
        "room index: {} bytes a pod of another workload, {} bytes an OME pod",
        bytes_a_pod(&others, room),
        bytes_a_pod(&pods, room)
    );
    let kept = bytes_a_pod(&pods, |index: &Pods, event| {
        index.apply(event);
    });
    println!("pods index: {kept} bytes an OME pod");
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
