//! `make bench`: what a pod event costs the controller. The 10,000 OME pods of the
//! benchmarks' large cluster (`ome_spread_sim::bench::large_cluster`), each shaped as OME v1.3 creates it
//! (the repository's fixture leader, its env, volumes and probes, with the pod's own rendered
//! terms), in the controller's cache of pods (its store, the pods of each component and the
//! room). Side by side in one run: one pod's status update, read from its JSON as the watch reads
//! it, trimmed and applied, and a relist of all 10,000: what every pod event would cost if the
//! pods were derived anew from the whole cache. First, what the cache keeps of an OME pod and of
//! a pod of another workload (a counting allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use criterion::Criterion;
use kube::runtime::watcher::Event;
use ome_spread_controller::pods::{self, Pods};
use ome_spread_core::labels;
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

/// What the cache keeps of `pods` (as served) after a relist of them alone, in bytes a pod.
fn bytes_a_pod(pods: &[Vec<u8>]) -> usize {
    let before = HELD.load(Ordering::Relaxed);
    let cache = Pods::default();
    relisted(&cache, pods);
    let kept = HELD.load(Ordering::Relaxed).saturating_sub(before);
    drop(cache);
    kept / pods.len()
}

/// Pods as the API server serves them: their JSON.
fn served(pods: Vec<serde_json::Value>) -> Vec<Vec<u8>> {
    pods.iter().map(|pod| serde_json::to_vec(pod).expect("json")).collect()
}

/// A pod event as the controller's watches of pods take it: read from its JSON into the core's
/// model and trimmed by the watch of every pod, applied to the room; an OMENative pod's read and
/// trimmed again by their own watch, applied to its component.
fn apply(cache: &Pods, event: impl Fn(Pod) -> Event<Pod>, pod: &[u8]) {
    let read = || {
        let mut read: Pod = serde_json::from_slice(pod).expect("a pod");
        pods::trim(&mut read);
        read
    };
    let held = read();
    let omenative = held.label(labels::MANAGED_BY) == Some(labels::OME_NATIVE);
    cache.hold(&event(held));
    if omenative {
        cache.apply(&event(read()));
    }
}

/// The cache after a relist of `pods` by both watches.
fn relisted(cache: &Pods, pods: &[Vec<u8>]) {
    cache.hold(&Event::Init);
    cache.apply(&Event::Init);
    for pod in pods {
        apply(cache, Event::InitApply, pod);
    }
    cache.hold(&Event::InitDone);
    cache.apply(&Event::InitDone);
}

fn main() {
    let cluster = large_cluster::cluster();
    let pods = served(large_cluster::ome_pods(&cluster));
    println!("pods: {} OME pods of {} bytes as JSON", pods.len(), pods[0].len());
    // The watch of every pod, of any workload: what the cache keeps of each kind.
    let others = served(large_cluster::other_pods(&cluster, 20_000));
    println!(
        "pods cache: {} bytes an OME pod, {} bytes a pod of another workload",
        bytes_a_pod(&pods),
        bytes_a_pod(&others)
    );
    let cache = Pods::default();
    relisted(&cache, &pods);
    let mut criterion = Criterion::default()
        .sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .configure_from_args();
    let updated = &pods[5][..];
    criterion.bench_function("pods/one pod event, trimmed and applied", |b| {
        b.iter(|| apply(&cache, Event::Apply, black_box(updated)))
    });
    criterion.bench_function("pods/a relist of all 10000 (each pod event, before)", |b| {
        b.iter(|| relisted(&cache, black_box(&pods)))
    });
}
