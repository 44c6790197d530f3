//! `make bench`: what a pod event costs the controller. The 10,000 OME pods of the
//! benchmarks' large cluster (`ome_spread_sim::bench::large_cluster`), each shaped as OME v1.3 creates it
//! (the repository's fixture leader, its env, volumes and probes, with the pod's own rendered
//! terms), in the pods index and the room's. Side by side in one run: one pod's
//! status update, read from its JSON as the watch reads it, trimmed and indexed in both, and a
//! relist of all 10,000: what every pod event would cost if the pod snapshot were built anew
//! from the whole cache. First, what each index keeps of a pod (a counting allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::Criterion;
use kube::runtime::watcher::Event;
use ome_spread_controller::pods::{self, Pods};
use ome_spread_controller::room::Room;
use ome_spread_core::pod::Pod;
use ome_spread_sim::bench::large_cluster;

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

/// What an index of kind `I` keeps of `pods` (as served) after a relist of them alone, in bytes a
/// pod.
fn bytes_a_pod<I: Default>(pods: &[Vec<u8>], apply: impl Fn(&I, &Event<Pod>)) -> usize {
    let before = HELD.load(Ordering::Relaxed);
    let index = I::default();
    apply(&index, &Event::Init);
    for pod in pods {
        apply(&index, &Event::InitApply(watched(pod)));
    }
    apply(&index, &Event::InitDone);
    let kept = HELD.load(Ordering::Relaxed).saturating_sub(before);
    drop(index);
    kept / pods.len()
}

/// Pods as the API server serves them: their JSON.
fn served(pods: Vec<serde_json::Value>) -> Vec<Vec<u8>> {
    pods.iter().map(|pod| serde_json::to_vec(pod).expect("json")).collect()
}

/// A pod as the controller's watch takes it: read from its JSON into the core's model, trimmed.
fn watched(pod: &[u8]) -> Pod {
    let mut pod: Pod = serde_json::from_slice(pod).expect("a pod");
    pods::trim(&mut pod);
    pod
}

/// A pod event as the controller's watch of pods takes it: read, trimmed, then indexed in both.
fn apply(pods_index: &Pods, room_index: &Room, event: impl Fn(Pod) -> Event<Pod>, pod: &[u8]) {
    let event = event(watched(pod));
    room_index.apply(&event);
    pods_index.apply(&event);
}

/// Both indexes after a relist of `pods`.
fn relisted(pods_index: &Pods, room_index: &Room, pods: &[Vec<u8>]) {
    pods_index.apply(&Event::Init);
    room_index.apply(&Event::Init);
    for pod in pods {
        apply(pods_index, room_index, Event::InitApply, pod);
    }
    pods_index.apply(&Event::InitDone);
    room_index.apply(&Event::InitDone);
}

fn main() {
    let cluster = large_cluster::cluster();
    let pods = served(large_cluster::ome_pods(&cluster));
    println!("pod index: {} pods of {} bytes as JSON", pods.len(), pods[0].len());
    // The room's watch of every pod, of any workload: what it keeps of each.
    let others = served(large_cluster::other_pods(&cluster, 20_000));
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
    let updated = &pods[5][..];
    criterion.bench_function("pods/one pod event, trimmed and indexed in both", |b| {
        b.iter(|| apply(&pods_index, &room_index, Event::Apply, black_box(updated)))
    });
    criterion.bench_function("pods/a relist of all 10000 (each pod event, before)", |b| {
        b.iter(|| relisted(&pods_index, &room_index, black_box(&pods)))
    });
}
