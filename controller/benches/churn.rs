//! `make bench-churn`: the controller as built (`ome-spread controller`, its own
//! process) against the in-memory API server (`ome_spread_sim::memory`, over HTTP on 127.0.0.1) holding the
//! benchmarks' large cluster: 1,000 replicas, their 10,000 pods as OME creates them, 20,000 pods
//! of other workloads and 5,000 nodes. Then CHURN_SECONDS of churn at 1,000 pod events a second
//! over random components: a third status updates that change no condition, the rest an
//! Instance's pod deleted, then put back (each changes the component's `Spread` condition, and is
//! timed to it), while every node's GPU Feature Discovery timestamp label is rewritten once a
//! minute. Each node has room left (64 GPUs), so that the room count runs in full.
//! Measured: the delay from each pod event
//! to the condition written after it (an event with none within 10 s is counted apart, and
//! whether its condition came later), reconciles per second, the policy reports written, the
//! controller's CPU and its peak resident memory. Side by side in the same run: the controller as it was at an earlier commit
//! (OME_SPREAD_CHURN_BASELINE, built by the Makefile from the commit OME_SPREAD_CHURN_BASELINE_REV
//! names: the last one measured).
//!
//! One event in flight per component: the next event of a component waits for the condition
//! that reflects the last, so each write is matched to one event.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

use ome_spread_sim::large_cluster;
use ome_spread_sim::local::free_port;
use ome_spread_sim::memory::{self, ApiServer};

const RATE: u64 = 1_000;
const OTHER_PODS: usize = 20_000;
/// How long the controller may take to write its first condition on every replica.
const SETTLE: Duration = Duration::from_secs(600);
/// An event whose condition has not come by then is counted at this delay, as a lower bound.
const UNREFLECTED: Duration = Duration::from_secs(10);
const GFD_TIMESTAMP: &str = "nvidia.com/gfd.timestamp";

/// One component's Instance pods, the one its churn deleted, and the event in flight.
struct Component {
    status_path: String,
    /// The pods that make an Instance count (single pods and leaders), as first created.
    anchors: Vec<Value>,
    /// The anchor deleted, whose pod comes back next.
    deleted: Option<usize>,
    /// When the event in flight was written.
    pending: Option<Instant>,
    /// When the event written last was, if its condition did not come within 10 s: no event is
    /// written to the component after it, so that a condition that comes later is that event's.
    unreflected: Option<Instant>,
}

struct Measured {
    /// Deletions and replacements, each timed to its condition.
    events: u64,
    /// Status updates that change no condition.
    updates: u64,
    skipped: u64,
    unreflected: u64,
    /// Of those, the events whose condition came later, during the run.
    late: u64,
    /// Policy reports written, during the churn.
    reports: u64,
    delays: Histogram<u64>,
    reconciles_per_second: f64,
    cores: f64,
    peak_mib: u64,
    settled: Duration,
}

fn objects() -> Vec<Value> {
    let cluster = large_cluster::cluster();
    let mut objects = vec![cluster.runtime.clone()];
    objects.extend(cluster.services.iter().cloned());
    objects.extend(cluster.replicas.iter().cloned());
    objects.extend(large_cluster::ome_pods(&cluster));
    objects.extend(large_cluster::other_pods(&cluster, OTHER_PODS));
    // Every node with room left beside the pods above (two of OME's 8-GPU pods and four trainers
    // on each, on average): so that the room count runs in full, as on a cluster with free GPUs.
    // The benchmarks' nodes have no allocatable, which is no room, and a count that ends at once.
    objects.extend(cluster.nodes.iter().cloned().map(|mut node| {
        node["status"] = json!({"allocatable": {"nvidia.com/gpu": "64", "cpu": "224", "memory": "2Ti", "pods": "110"}});
        node
    }));
    objects
}

fn components(objects: &[Value]) -> Vec<Component> {
    let mut by_service: HashMap<&str, Vec<Value>> = HashMap::new();
    for pod in objects
        .iter()
        .filter(|o| o["metadata"]["labels"]["ome.io/managed-by"] == "OMENative")
    {
        if pod["metadata"]["labels"]["ome.io/runner"] != "worker" {
            let service = pod["metadata"]["labels"]["ome.io/inferenceservice"]
                .as_str()
                .unwrap_or_default();
            by_service.entry(service).or_default().push(pod.clone());
        }
    }
    let mut components: Vec<Component> = by_service
        .into_iter()
        .map(|(service, anchors)| Component {
            status_path: format!("/apis/ome.io/v1beta1/namespaces/serving/inferencereplicas/{service}-engine/status"),
            anchors,
            deleted: None,
            pending: None,
            unreflected: None,
        })
        .collect();
    components.sort_by(|a, b| a.status_path.cmp(&b.status_path));
    components
}

/// The component's next event, written to the API server: an Instance's pod deleted, or put
/// back (bound and Running, as its replacement comes once scheduled): each changes the
/// component's condition (the Instances it counts).
fn step(server: &ApiServer, component: &mut Component) {
    let anchor = component.deleted.take();
    match anchor {
        None => {
            let anchor = fastrand::usize(..component.anchors.len());
            let name = component.anchors[anchor]["metadata"]["name"]
                .as_str()
                .unwrap_or_default();
            server.delete("Pod", Some("serving"), name);
            component.deleted = Some(anchor);
        }
        Some(anchor) => {
            server.put(component.anchors[anchor].clone());
        }
    }
    component.pending = Some(Instant::now());
}

/// A status update of one of the component's pods that changes nothing the diagnosis reads (a
/// container restarted): not waited on, no condition reflects it.
fn status_update(server: &ApiServer, component: &Component, tick: u64) {
    let present: Vec<usize> = (0..component.anchors.len())
        .filter(|a| component.deleted != Some(*a))
        .collect();
    let Some(&anchor) = fastrand::choice(&present) else {
        return;
    };
    let name = component.anchors[anchor]["metadata"]["name"]
        .as_str()
        .unwrap_or_default();
    server.edit("Pod", Some("serving"), name, |pod| {
        pod["status"]["containerStatuses"] = json!([{"name": "ome-container", "restartCount": tick, "ready": true}]);
    });
}

/// CPU seconds the process has used (utime + stime, in the kernel's USER_HZ of 100).
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

async fn reconciles(metrics: &str) -> f64 {
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<bytes::Bytes>>();
    let Ok(response) = client.get(metrics.parse().expect("a URL")).await else {
        return 0.0;
    };
    let body = http_body_util::BodyExt::collect(response.into_body()).await;
    let text = body
        .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
        .unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("ome_spread_reconciles_total "))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0.0)
}

/// The controller, started on a kubeconfig for `api`, its logs to `log`.
fn controller(binary: &Path, api: u16, listen: u16, dir: &Path) -> Child {
    let kubeconfig = dir.join("kubeconfig");
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters: [{{name: churn, cluster: {{server: 'http://127.0.0.1:{api}'}}}}]\n\
         users: [{{name: churn, user: {{}}}}]\ncontexts: [{{name: churn, context: {{cluster: churn, user: churn}}}}]\n\
         current-context: churn\n"
    );
    std::fs::write(&kubeconfig, config).expect("the kubeconfig");
    let log = std::fs::File::create(dir.join("controller.log")).expect("a log");
    Command::new(binary)
        .args(["controller", "--identity", "churn", "--lease-namespace", "ome-spread"])
        .args(["--listen", &format!("127.0.0.1:{listen}")])
        .env("KUBECONFIG", kubeconfig)
        .env("RUST_LOG", std::env::var("CHURN_LOG").unwrap_or_else(|_| "warn".into()))
        .stdout(log.try_clone().expect("the log"))
        .stderr(log)
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", binary.display()))
}

async fn churn(binary: &Path, seconds: u64, dir: &Path) -> Measured {
    let server = Arc::new(ApiServer::default());
    let objects = objects();
    let mut components = components(&objects);
    for object in objects {
        server.put(object);
    }
    let nodes: Vec<String> = (0..large_cluster::cluster().nodes.len())
        .map(|n| format!("gpu-node-{n}"))
        .collect();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let api = listener.local_addr().expect("an address").port();
    let serving = tokio::spawn(memory::serve(server.clone(), listener));
    let listen = free_port();
    let mut child = controller(binary, api, listen, dir);
    let pid = child.id().expect("a running controller");
    let metrics = format!("http://127.0.0.1:{listen}/metrics");

    // Every replica's first condition.
    let started = Instant::now();
    let by_path: HashMap<String, usize> = components
        .iter()
        .enumerate()
        .map(|(i, c)| (c.status_path.clone(), i))
        .collect();
    let every_replica_written = || {
        let writes = server.writes.lock().unwrap();
        let written: HashSet<&str> = writes
            .iter()
            .map(|w| w.path.as_str())
            .filter(|p| by_path.contains_key(*p))
            .collect();
        written.len() == components.len()
    };
    while !every_replica_written() {
        assert!(
            started.elapsed() < SETTLE,
            "not every replica has a condition within {SETTLE:?}: see {}",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let settled = started.elapsed();

    let mut cursor = server.writes.lock().unwrap().len();
    let mut delays = Histogram::<u64>::new(3).expect("a histogram");
    let (mut events, mut updates, mut skipped, mut unreflected, mut late, mut reports) = (0, 0, 0, 0, 0, 0);
    let (cpu_before, reconciles_before) = (cpu_seconds(pid), reconciles(&metrics).await);
    let mut ticks = tokio::time::interval(Duration::from_micros(1_000_000 / RATE));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let churning = Instant::now();
    let node_every = (RATE * 60 / nodes.len() as u64).max(1);
    let mut tick = 0u64;
    // The churn, then until every event is reflected or counted as not.
    while churning.elapsed() < Duration::from_secs(seconds) || components.iter().any(|c| c.pending.is_some()) {
        ticks.tick().await;
        let now = Instant::now();
        let writes = server.writes.lock().unwrap();
        for w in &writes[cursor..] {
            reports += u64::from(w.path.contains("/reports/"));
            let Some(&i) = by_path.get(&w.path) else { continue };
            let c = &mut components[i];
            if let Some(at) = c.pending.filter(|at| w.at >= *at) {
                delays.record((w.at - at).as_micros() as u64).expect("in range");
                c.pending = None;
            } else if c.unreflected.is_some_and(|at| w.at >= at) {
                late += 1;
                c.unreflected = None;
            }
        }
        cursor = writes.len();
        drop(writes);
        for c in components.iter_mut() {
            if c.pending.is_some_and(|at| now - at > UNREFLECTED) {
                delays.record(UNREFLECTED.as_micros() as u64).expect("in range");
                unreflected += 1;
                c.unreflected = c.pending.take();
                // Named, so that its controller's log can be read for it.
                let what = if c.deleted.is_some() {
                    "a deletion"
                } else {
                    "a replacement"
                };
                let since = churning.elapsed().as_secs_f64() - UNREFLECTED.as_secs_f64();
                eprintln!(
                    "churn: no condition within 10 s of {what} at about {since:.1} s: {}",
                    c.status_path
                );
            }
        }
        if churning.elapsed() >= Duration::from_secs(seconds) {
            continue;
        }
        tick += 1;
        if tick.is_multiple_of(node_every) {
            let node = &nodes[(tick / node_every) as usize % nodes.len()];
            server.edit("Node", None, node, |node| {
                node["metadata"]["labels"][GFD_TIMESTAMP] = json!(tick.to_string());
            });
        }
        // A third of the events status updates, the rest a random component with none in flight.
        if tick.is_multiple_of(3) {
            status_update(&server, &components[fastrand::usize(..components.len())], tick);
            updates += 1;
            continue;
        }
        let free = (0..10)
            .map(|_| fastrand::usize(..components.len()))
            .find(|&i| components[i].pending.is_none() && components[i].unreflected.is_none());
        match free {
            Some(i) => {
                step(&server, &mut components[i]);
                events += 1;
            }
            None => skipped += 1,
        }
    }
    let elapsed = churning.elapsed().as_secs_f64();
    let (cpu_after, reconciles_after) = (cpu_seconds(pid), reconciles(&metrics).await);
    let peak_mib = peak_mib(pid);
    let _ = child.kill().await;
    serving.abort();
    Measured {
        events,
        updates,
        skipped,
        unreflected,
        late,
        reports,
        delays,
        reconciles_per_second: (reconciles_after - reconciles_before) / elapsed,
        cores: (cpu_after - cpu_before) / elapsed,
        peak_mib,
        settled,
    }
}

fn binary(variable: &str) -> PathBuf {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .unwrap_or_else(|| panic!("{variable} names no binary: run `make bench-churn`"))
}

#[tokio::main]
async fn main() {
    // `cargo bench` passes --bench; this benchmark takes nothing else.
    let seconds = std::env::var("CHURN_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let dir = std::env::temp_dir().join(format!("ome-spread-churn-{}", std::process::id()));
    let mut measured = Vec::new();
    let before = std::env::var("OME_SPREAD_CHURN_BASELINE_REV").map_or_else(
        |_| "before".to_owned(),
        |rev| format!("at {}", &rev[..rev.len().min(7)]),
    );
    for (label, variable) in [
        ("now", "OME_SPREAD_CHURN_CONTROLLER"),
        (before.as_str(), "OME_SPREAD_CHURN_BASELINE"),
    ] {
        let run = dir.join(label.replace(' ', "-"));
        std::fs::create_dir_all(&run).expect("a run directory");
        println!("churn: {label}: {} for {seconds} s ...", binary(variable).display());
        measured.push(churn(&binary(variable), seconds, &run).await);
    }
    println!("{:<34}{:>14}{:>14}", "", "now", before);
    let row = |name: &str, value: &dyn Fn(&Measured) -> String| {
        println!("{name:<34}{:>14}{:>14}", value(&measured[0]), value(&measured[1]));
    };
    row("first condition on every replica", &|m| {
        format!("{:.1} s", m.settled.as_secs_f64())
    });
    row("deletions and replacements, timed", &|m| m.events.to_string());
    row("status updates, not timed", &|m| m.updates.to_string());
    row("ticks with every picked component busy", &|m| m.skipped.to_string());
    row("events with no condition within 10 s", &|m| m.unreflected.to_string());
    row("  of them, a condition later", &|m| m.late.to_string());
    row("policy reports written", &|m| m.reports.to_string());
    row("event-to-condition p50", &|m| {
        format!("{} ms", m.delays.value_at_quantile(0.5) / 1000)
    });
    row("event-to-condition p99", &|m| {
        format!("{} ms", m.delays.value_at_quantile(0.99) / 1000)
    });
    row("reconciles per second", &|m| format!("{:.0}", m.reconciles_per_second));
    row("controller CPU", &|m| format!("{:.2} cores", m.cores));
    row("peak resident memory", &|m| format!("{} MiB", m.peak_mib));
    let (now, then) = (&measured[0], &measured[1]);
    println!(
        "churn: {RATE} events/s, p99 event-to-condition {} ms ({before} {} ms), controller CPU {:.2} cores ({before} {:.2}), peak memory {} MiB ({before} {} MiB)",
        now.delays.value_at_quantile(0.99) / 1000,
        then.delays.value_at_quantile(0.99) / 1000,
        now.cores,
        then.cores,
        now.peak_mib,
        then.peak_mib
    );
    println!("churn: the controllers' logs are in {}", dir.display());
}
