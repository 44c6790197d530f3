//! The controller's churn, as `make bench-churn` runs it on the in-memory API server and
//! `make bench-cluster` on a real kube-apiserver: the controller as built, its own process, then
//! a number of seconds of churn at a rate of pod events a second ([`RATE`] in memory) over random
//! components. A third of the events are status updates that change no condition; the rest an
//! Instance's pod deleted, then put back, each of which changes the component's `Spread`
//! condition and is timed to it.
//! Meanwhile every node's GPU Feature Discovery timestamp label is rewritten once a minute where
//! the rate allows (one a tick at most: at 50 ticks a second, each of 5,000 nodes every 100 s).
//!
//! Measured: the delay from each pod event to the condition written after it (an event with none
//! within [`UNREFLECTED`] is counted apart, and whether its condition came later), the
//! controller's own share of it as it exports it (`ome_spread_event_to_condition_seconds`:
//! from the event's arrival at its watch to its write's answer, without the API server's
//! queue), reconciles per second, the policy reports written, the controller's CPU and its peak
//! resident memory. Where the churn has a disruption (`make bench-cluster` restarts
//! kube-apiserver halfway), both delays are the steady churn's before it, and the recovery is
//! timed apart: from the restart to the first condition of an event the restarted server took.
//!
//! One event in flight per component: the next event of a component waits for the condition
//! that reflects the last, so each write is matched to one event. The writes run as tasks, at
//! most [`IN_FLIGHT`] at once: a real API server takes milliseconds for each, and a tick that
//! finds them all busy is counted, not waited for.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::task::JoinSet;

use crate::bench::histogram::Buckets;
use crate::bench::large_cluster;
use crate::stand_in::memory::{self, ApiServer};
use crate::support::{local, objects};

/// Pod events a second on the in-memory API server.
pub const RATE: u64 = 1_000;
/// Pods of other workloads beside OME's (`make bench-churn`).
pub const OTHER_PODS: usize = 20_000;
/// How long the controller may take to write its first condition on every replica.
const SETTLE: Duration = Duration::from_secs(600);
/// An event whose condition has not come by then is counted at this delay, as a lower bound.
pub const UNREFLECTED: Duration = Duration::from_secs(10);
/// Writes under way at once, at most.
pub const IN_FLIGHT: usize = 256;
pub const GFD_TIMESTAMP: &str = "nvidia.com/gfd.timestamp";
/// The namespace of the large cluster's InferenceServices.
pub const NAMESPACE: &str = "serving";

/// A write's outcome: an API server's refusal or silence, in its words.
pub type Written = Result<(), Box<dyn std::error::Error + Send + Sync>>;

/// Where the churn writes, and where it sees the controller's conditions.
pub trait Server: Send + Sync + 'static {
    fn delete_pod(&self, name: String) -> impl Future<Output = Written> + Send;
    /// The pod put back as it was first created, on the node it was placed on.
    fn create_pod(&self, pod: Value) -> impl Future<Output = Written> + Send;
    /// A container of the pod restarted: nothing the diagnosis reads.
    fn restart_container(&self, name: String, count: u64) -> impl Future<Output = Written> + Send;
    fn label_node(&self, name: String, label: &'static str, value: String) -> impl Future<Output = Written> + Send;
    /// What the controller wrote since `cursor` (which it moves on): the replicas whose
    /// condition was written, when, and the policy reports written.
    fn seen(&self, cursor: &mut usize) -> Seen;
}

#[derive(Default)]
pub struct Seen {
    pub conditions: Vec<(String, Instant)>,
    pub reports: u64,
}

/// One component's Instance pods, the one its churn deleted, and the event in flight.
#[derive(Default)]
pub struct Component {
    pub replica: String,
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

/// The components of the engines whose pods are `pods` (as OME creates them, each with its node):
/// the anchors of each, by its replica.
pub fn components(pods: &[Value]) -> Vec<Component> {
    let mut by_replica: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for pod in pods {
        let labels = &pod["metadata"]["labels"];
        if labels["ome.io/managed-by"] == "OMENative" && labels["ome.io/runner"] != "worker" {
            let service = labels["ome.io/inferenceservice"].as_str().unwrap_or_default();
            let replica = format!("{service}-engine");
            by_replica.entry(replica).or_default().push(pod.clone());
        }
    }
    let component = |(replica, anchors)| Component {
        replica,
        anchors,
        ..Component::default()
    };
    by_replica.into_iter().map(component).collect()
}

/// The large cluster as the in-memory churn holds it: OME's objects, its pods as OME creates them,
/// `other_pods` pods of other workloads, and the nodes with room left beside them (64 GPUs each, on average
/// two of OME's 8-GPU pods and four trainers on each), so that the room count runs in full, as on
/// a cluster with free GPUs.
pub fn objects(other_pods: usize) -> Vec<Value> {
    let cluster = large_cluster::cluster();
    let mut objects = vec![cluster.runtime.clone()];
    objects.extend(cluster.services.iter().cloned());
    objects.extend(cluster.replicas.iter().cloned());
    objects.extend(large_cluster::ome_pods(&cluster));
    objects.extend(large_cluster::other_pods(&cluster, other_pods));
    objects.extend(cluster.nodes.iter().cloned().map(|mut node| {
        node["status"] = json!({"allocatable": room()});
        node
    }));
    objects
}

/// A number the environment sets (`CHURN_SECONDS`), or `default`.
pub fn number<T: std::str::FromStr>(variable: &str, default: T) -> T {
    let set = std::env::var(variable).ok().and_then(|s| s.parse().ok());
    set.unwrap_or(default)
}

/// A path the environment must set: `make`'s `target` sets it.
pub fn required(variable: &str, target: &str) -> std::path::PathBuf {
    let set = std::env::var_os(variable).map(std::path::PathBuf::from);
    set.unwrap_or_else(|| panic!("{variable} is not set: run `make {target}`"))
}

/// What each of the churn's nodes holds.
pub fn room() -> Value {
    json!({"nvidia.com/gpu": "64", "cpu": "224", "memory": "2Ti", "pods": "110"})
}

/// The in-memory API server: each write takes effect at once, and every write is on its record.
impl Server for ApiServer {
    async fn delete_pod(&self, name: String) -> Written {
        self.delete("Pod", Some(NAMESPACE), &name);
        Ok(())
    }

    async fn create_pod(&self, pod: Value) -> Written {
        self.put(pod);
        Ok(())
    }

    /// A pod not there (its replacement not yet written) is refused, as the API server refuses it.
    async fn restart_container(&self, name: String, count: u64) -> Written {
        let mut pod = self
            .find("Pod", Some(NAMESPACE), &name)
            .ok_or_else(|| format!("pods \"{name}\" not found"))?;
        pod["status"]["containerStatuses"] = json!([{"name": "ome-container", "restartCount": count, "ready": true}]);
        self.put(pod);
        Ok(())
    }

    async fn label_node(&self, name: String, label: &'static str, value: String) -> Written {
        self.edit("Node", None, &name, |node| {
            node["metadata"]["labels"][label] = json!(value)
        });
        Ok(())
    }

    fn seen(&self, cursor: &mut usize) -> Seen {
        let writes = self.writes.lock().unwrap();
        let prefix = format!("/apis/ome.io/v1beta1/namespaces/{NAMESPACE}/inferencereplicas/");
        let mut seen = Seen::default();
        for w in &writes[*cursor..] {
            seen.reports += u64::from(w.path.contains("/reports/"));
            if let Some(replica) = w.path.strip_prefix(&prefix).and_then(|p| p.strip_suffix("/status")) {
                seen.conditions.push((replica.to_owned(), w.at));
            }
        }
        *cursor = writes.len();
        seen
    }
}

/// CPU seconds process `pid` has used (utime + stime, in the kernel's USER_HZ of 100).
pub fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// The peak resident memory of process `pid` so far, in MiB.
fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

/// The controller as built, its own process, and what it reports of itself.
pub struct Controller {
    child: Child,
    pid: u32,
    metrics: String,
}

impl Controller {
    /// `ome-spread controller` on the cluster of `kubeconfig`, its logs in `dir/controller.log`.
    pub fn start(binary: &Path, kubeconfig: &Path, dir: &Path) -> Controller {
        let listen = local::free_port();
        let log = std::fs::File::create(dir.join("controller.log")).expect("a log");
        let child = Command::new(binary)
            .args(["controller", "--identity", "churn", "--lease-namespace", "ome-spread"])
            .args(["--listen", &format!("127.0.0.1:{listen}")])
            .env("KUBECONFIG", kubeconfig)
            .env("RUST_LOG", std::env::var("CHURN_LOG").unwrap_or_else(|_| "warn".into()))
            .stdout(log.try_clone().expect("the log"))
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", binary.display()));
        Controller {
            pid: child.id().expect("a running controller"),
            child,
            metrics: format!("http://127.0.0.1:{listen}/metrics"),
        }
    }

    /// What it exports on /metrics now: its reconciles so far, and its own event-to-condition
    /// histogram (none from a build that does not export it).
    async fn exported(&self) -> (f64, Buckets) {
        let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build_http::<http_body_util::Empty<bytes::Bytes>>();
        let Ok(response) = client.get(self.metrics.parse().expect("a URL")).await else {
            return (0.0, Buckets::default());
        };
        let body = http_body_util::BodyExt::collect(response.into_body()).await;
        let text = body
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
            .unwrap_or_default();
        let reconciles = text
            .lines()
            .find_map(|l| l.strip_prefix("ome_spread_reconciles_total "))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0.0);
        (reconciles, Buckets::read(&text, EVENT_TO_CONDITION, ""))
    }

    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// The controller's own histogram of each condition change, from its event's arrival at the
/// controller's watch to its write's answer (docs/controller.md).
const EVENT_TO_CONDITION: &str = "ome_spread_event_to_condition_seconds";

/// What one churn measured.
#[derive(Default)]
pub struct Measured {
    /// Deletions and replacements, each timed to its condition.
    pub events: u64,
    /// Status updates that change no condition.
    pub updates: u64,
    /// Ticks whose picked components all had an event in flight, or with every write slot busy.
    pub skipped: u64,
    /// Writes the API server refused or did not answer (a deletion or replacement among them is
    /// not timed).
    pub failed: u64,
    pub unreflected: u64,
    /// Of those, the events whose condition came later, during the run.
    pub late: u64,
    /// Policy reports written, during the churn.
    pub reports: u64,
    /// Each event's delay to its condition, of the events written and reflected before the
    /// disruption, if there is one.
    pub delays: Vec<Duration>,
    /// The controller's own event-to-condition times during the churn (until the disruption, if
    /// there is one), as it exports them.
    pub controller: Buckets,
    pub reconciles_per_second: f64,
    pub cores: f64,
    pub peak_mib: u64,
    /// The peak once every replica had its first condition: the first lists and reconciles.
    pub peak_settled_mib: u64,
    /// The peak when the disruption started: what the relists after it add is the difference.
    pub peak_before_disruption_mib: Option<u64>,
    pub settled: Duration,
    /// From the restart's start to the first condition of an event the restarted server took.
    pub restart_to_condition: Option<Duration>,
    /// How long the churn wrote for.
    pub seconds: u64,
}

impl Measured {
    /// Nothing counted yet, for a churn of `seconds` after the replicas `settled`, the controller
    /// at `peak_settled_mib` then.
    pub fn new(seconds: u64, settled: Duration, peak_settled_mib: u64) -> Measured {
        Measured {
            peak_settled_mib,
            settled,
            seconds,
            ..Measured::default()
        }
    }

    /// The delays' `quantile` in milliseconds, by nearest rank: 0 with none.
    pub fn p(&self, quantile: f64) -> u128 {
        let mut delays = self.delays.clone();
        delays.sort();
        let rank = (quantile * delays.len() as f64).ceil() as usize;
        delays.get(rank.saturating_sub(1)).map_or(0, Duration::as_millis)
    }

    /// [`Measured::restart_to_condition`] as the benchmarks print it: `none` without one.
    pub fn restart_shown(&self) -> String {
        let restart = self.restart_to_condition;
        restart.map_or("none".into(), |r| format!("{:.1} s", r.as_secs_f64()))
    }
}

/// Something done to the server partway through the churn: at `at`, `before` runs (what is
/// measured before it), then `disrupt` (kube-apiserver restarted), whose start the recovery is
/// timed from, to the first condition of an event written once it is done.
pub struct Disruption {
    pub at: Duration,
    pub before: Pin<Box<dyn Future<Output = ()> + Send>>,
    pub disrupt: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Disruption {
    /// `before`, then `disrupt`, noting in `restart` when `disrupt` started, with the peak memory
    /// of process `pid` (the controller) then, and when it was done.
    async fn run(self, restart: Arc<Restart>, pid: u32) {
        self.before.await;
        let started = (Instant::now(), peak_mib(pid));
        restart.started.set(started).expect("one disruption");
        self.disrupt.await;
        restart.done.set(Instant::now()).expect("one disruption");
    }
}

/// When the disruption started, with the controller's peak memory then (MiB), and was done: a
/// write after that is the restarted server's, one before may be the old one's.
#[derive(Default)]
struct Restart {
    started: OnceLock<(Instant, u64)>,
    done: OnceLock<Instant>,
}

/// The writes under way, each with the component of its event and the anchor that component had
/// deleted before it, to restore if the write fails.
type Writes = JoinSet<(Option<(usize, Option<usize>)>, Written)>;

/// Every replica's first condition: how long the controller took to write them.
async fn settle<S: Server>(server: &S, components: &[Component], cursor: &mut usize, dir: &Path) -> Duration {
    let started = Instant::now();
    let mut written = HashSet::new();
    while written.len() < components.len() {
        assert!(
            started.elapsed() < SETTLE,
            "{} of {} replicas have a condition after {SETTLE:?}: see {}",
            written.len(),
            components.len(),
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
        written.extend(server.seen(cursor).conditions.into_iter().map(|(r, _)| r));
    }
    started.elapsed()
}

/// The churn under way: the components, and what is counted so far.
struct Churning {
    components: Vec<Component>,
    by_replica: HashMap<String, usize>,
    measured: Measured,
    started: Instant,
    restart: Arc<Restart>,
}

impl Churning {
    /// Whether an event that ended `at` (its condition came, or it expired) belongs to the steady
    /// churn: there was no disruption, or it had not started. An event the restart held up is in
    /// the time to recover, not in the delays.
    fn steady(&self, at: Instant) -> bool {
        self.restart.started.get().is_none_or(|&(started, _)| at < started)
    }

    /// The churn of `components` starting now, nothing counted but `measured`.
    fn new(components: Vec<Component>, measured: Measured, restart: Arc<Restart>) -> Churning {
        Churning {
            by_replica: components
                .iter()
                .enumerate()
                .map(|(i, c)| (c.replica.clone(), i))
                .collect(),
            components,
            measured,
            started: Instant::now(),
            restart,
        }
    }

    /// The conditions the controller wrote: each the end of its component's event in flight.
    fn observe(&mut self, seen: Seen) {
        self.measured.reports += seen.reports;
        for (replica, at) in seen.conditions {
            let Some(&i) = self.by_replica.get(&replica) else {
                continue;
            };
            let c = &mut self.components[i];
            if let Some(written) = c.pending.filter(|written| at >= *written) {
                c.pending = None;
                match (self.restart.started.get(), self.restart.done.get()) {
                    (Some(&(started, _)), Some(&done)) if written >= done => {
                        self.measured.restart_to_condition.get_or_insert(at - started);
                    }
                    _ if self.steady(at) => self.measured.delays.push(at - written),
                    _ => {}
                }
            } else if c.unreflected.is_some_and(|written| at >= written) {
                self.measured.late += 1;
                c.unreflected = None;
            }
        }
    }

    /// Events with no condition within [`UNREFLECTED`]: counted at that delay, and named, so that
    /// the controller's log can be read for them.
    fn expire(&mut self, now: Instant) {
        let steady = self.steady(now);
        for c in self.components.iter_mut() {
            if c.pending.is_some_and(|at| now - at > UNREFLECTED) {
                if steady {
                    self.measured.delays.push(UNREFLECTED);
                }
                self.measured.unreflected += 1;
                c.unreflected = c.pending.take();
                let what = if c.deleted.is_some() {
                    "a deletion"
                } else {
                    "a replacement"
                };
                let since = self.started.elapsed().as_secs_f64() - UNREFLECTED.as_secs_f64();
                let replica = &c.replica;
                eprintln!("churn: no condition within 10 s of {what} at about {since:.1} s: {replica}");
            }
        }
    }

    /// A write done: a failed one counted, and its component's event undone.
    fn done(&mut self, (event, written): (Option<(usize, Option<usize>)>, Written)) {
        let Err(e) = written else { return };
        self.measured.failed += 1;
        if self.measured.failed <= 3 {
            eprintln!("churn: a write failed: {e}");
        }
        if let Some((i, deleted)) = event {
            (self.components[i].pending, self.components[i].deleted) = (None, deleted);
        }
    }

    /// A random component with no event in flight, if one of ten picked has none.
    fn free(&self) -> Option<usize> {
        (0..10)
            .map(|_| fastrand::usize(..self.components.len()))
            .find(|&i| self.components[i].pending.is_none() && self.components[i].unreflected.is_none())
    }

    /// The component's next event: an Instance's pod deleted, or put back.
    fn step<S: Server>(&mut self, server: &Arc<S>, i: usize, writes: &mut Writes) {
        let c = &mut self.components[i];
        let server = server.clone();
        c.pending = Some(Instant::now());
        match c.deleted.take() {
            None => {
                let anchor = fastrand::usize(..c.anchors.len());
                let name = objects::name(&c.anchors[anchor]).to_owned();
                c.deleted = Some(anchor);
                writes.spawn(async move { (Some((i, None)), server.delete_pod(name).await) });
            }
            Some(anchor) => {
                let pod = c.anchors[anchor].clone();
                writes.spawn(async move { (Some((i, Some(anchor))), server.create_pod(pod).await) });
            }
        }
    }

    /// A status update of one of the present pods of component `i`: not waited on.
    fn status_update<S: Server>(&self, server: &Arc<S>, i: usize, tick: u64, writes: &mut Writes) {
        let c = &self.components[i];
        let present: Vec<usize> = (0..c.anchors.len()).filter(|a| c.deleted != Some(*a)).collect();
        let Some(&anchor) = fastrand::choice(&present) else {
            return;
        };
        let (server, name) = (server.clone(), objects::name(&c.anchors[anchor]).to_owned());
        writes.spawn(async move { (None, server.restart_container(name, tick).await) });
    }
}

/// The churn: `seconds` of it at `rate` events a second on `server` (holding `components` and the
/// large cluster's nodes), the `controller` at work on it; then until every event is reflected or
/// counted as not.
pub async fn churn<S: Server>(
    server: Arc<S>,
    components: Vec<Component>,
    controller: &Controller,
    (seconds, rate): (u64, u64),
    mut disruption: Option<Disruption>,
    dir: &Path,
) -> Measured {
    let mut cursor = 0;
    let settled = settle(server.as_ref(), &components, &mut cursor, dir).await;
    let cpu_before = cpu_seconds(controller.pid);
    let (reconciles_before, controller_before) = controller.exported().await;
    let measured = Measured::new(seconds, settled, peak_mib(controller.pid));
    let mut state = Churning::new(components, measured, Arc::default());
    let mut writes = JoinSet::new();
    let mut ticks = tokio::time::interval(Duration::from_micros(1_000_000 / rate));
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let churning = Duration::from_secs(seconds);
    let node_every = (rate * 60 / large_cluster::NODES as u64).max(1);
    let mut tick = 0u64;
    // What the controller had exported when the disruption started, once the loop has seen it.
    let mut before_disruption = None;
    while state.started.elapsed() < churning || state.components.iter().any(|c| c.pending.is_some()) {
        ticks.tick().await;
        while let Some(done) = writes.try_join_next() {
            state.done(done.expect("a write task"));
        }
        state.observe(server.seen(&mut cursor));
        state.expire(Instant::now());
        if before_disruption.is_none() && state.restart.started.get().is_some() {
            before_disruption = Some(controller.exported().await.1);
        }
        if state.started.elapsed() >= churning {
            continue;
        }
        if disruption.as_ref().is_some_and(|d| state.started.elapsed() >= d.at) {
            let disruption = disruption.take().expect("a disruption");
            tokio::spawn(disruption.run(state.restart.clone(), controller.pid));
        }
        tick += 1;
        if writes.len() >= IN_FLIGHT {
            state.measured.skipped += 1;
            continue;
        }
        if tick.is_multiple_of(node_every) {
            let node = format!("gpu-node-{}", (tick / node_every) as usize % large_cluster::NODES);
            let server = server.clone();
            writes.spawn(async move { (None, server.label_node(node, GFD_TIMESTAMP, tick.to_string()).await) });
        }
        // A random component with no event in flight (none of whose pods is being put back):
        // a third of the ticks a status update of one of its pods, the rest its next event.
        match state.free() {
            Some(i) if tick.is_multiple_of(3) => {
                state.status_update(&server, i, tick, &mut writes);
                state.measured.updates += 1;
            }
            Some(i) => {
                state.step(&server, i, &mut writes);
                state.measured.events += 1;
            }
            None => state.measured.skipped += 1,
        }
    }
    while let Some(done) = writes.join_next().await {
        state.done(done.expect("a write task"));
    }
    let mut measured = state.measured;
    let elapsed = state.started.elapsed().as_secs_f64();
    measured.cores = (cpu_seconds(controller.pid) - cpu_before) / elapsed;
    let (reconciles, controller_after) = controller.exported().await;
    measured.reconciles_per_second = (reconciles - reconciles_before) / elapsed;
    measured.controller = before_disruption.unwrap_or(controller_after).since(&controller_before);
    measured.peak_mib = peak_mib(controller.pid);
    measured.peak_before_disruption_mib = state.restart.started.get().map(|&(_, peak)| peak);
    measured
}

/// The churn at [`RATE`] on a fresh in-memory API server holding `other_pods` pods of other
/// workloads, the controller `binary` on it.
pub async fn in_memory(binary: &Path, seconds: u64, other_pods: usize, dir: &Path) -> Measured {
    let objects = objects(other_pods);
    let components = components(&objects);
    let server = ApiServer::holding(objects);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a port");
    let api = listener.local_addr().expect("an address").port();
    let serving = tokio::spawn(memory::serve(server.clone(), listener));
    let (kubeconfig, address) = (dir.join("kubeconfig"), format!("http://127.0.0.1:{api}"));
    local::write_kubeconfig(&kubeconfig, json!({"server": address}), json!({}), None);
    let controller = Controller::start(binary, &kubeconfig, dir);
    let measured = churn(server, components, &controller, (seconds, RATE), None, dir).await;
    controller.stop().await;
    serving.abort();
    measured
}

/// A row of the benchmarks' tables: its name, then a cell a column.
pub fn row<T>(name: &str, columns: &[T], cell: impl Fn(&T) -> String) {
    let cells: String = columns.iter().map(|column| format!("{:>16}", cell(column))).collect();
    println!("{name:<40}{cells}");
}

/// The churns side by side, a column each.
pub fn print(columns: &[(&str, &Measured)]) {
    row("", columns, |(name, _)| name.to_string());
    let row = |name: &str, value: &dyn Fn(&Measured) -> String| row(name, columns, |(_, m)| value(m));
    row("first condition on every replica", &|m| {
        format!("{:.1} s", m.settled.as_secs_f64())
    });
    row("deletions and replacements, timed", &|m| m.events.to_string());
    row("status updates, not timed", &|m| m.updates.to_string());
    row("events a second", &|m| {
        format!("{:.0}", (m.events + m.updates) as f64 / m.seconds as f64)
    });
    row("ticks skipped, every pick or slot busy", &|m| m.skipped.to_string());
    row("writes failed", &|m| m.failed.to_string());
    row("events with no condition within 10 s", &|m| m.unreflected.to_string());
    row("  of them, a condition later", &|m| m.late.to_string());
    row("policy reports written", &|m| m.reports.to_string());
    row("event-to-condition p50", &|m| format!("{} ms", m.p(0.5)));
    row("event-to-condition p99", &|m| format!("{} ms", m.p(0.99)));
    row("  the controller's own p50", &|m| m.controller.quantile_shown(0.5));
    row("  the controller's own p99", &|m| m.controller.quantile_shown(0.99));
    row("reconciles per second", &|m| format!("{:.0}", m.reconciles_per_second));
    row("controller CPU", &|m| format!("{:.2} cores", m.cores));
    row("peak resident memory", &|m| format!("{} MiB", m.peak_mib));
    row("  of it, by every replica's first condition", &|m| {
        format!("{} MiB", m.peak_settled_mib)
    });
    if columns.iter().any(|(_, m)| m.peak_before_disruption_mib.is_some()) {
        row("  of it, before the restart", &|m| {
            m.peak_before_disruption_mib.map_or("-".into(), |p| format!("{p} MiB"))
        });
        row("restart to the next condition", &Measured::restart_shown);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Four events on four components, the restart from 10 s to 10.5 s: the one written and
    /// reflected before it is the steady churn's delay (300 ms); the one in flight across it, and
    /// the one the old server took as it stopped, are in neither figure; the one written after it
    /// times the recovery (from the restart's start to its condition, 2 s).
    #[test]
    fn the_delays_are_the_steady_churns_and_the_restart_times_the_recovery() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let component = |replica: &str, written| Component {
            replica: replica.into(),
            pending: Some(at(written)),
            ..Component::default()
        };
        // Each event's replica, when it was written and when its condition came, in ms.
        let events = [
            ("before", 1_000, 1_300),
            ("across", 9_900, 12_000),
            ("stopping", 10_100, 10_200),
            ("after", 11_000, 12_000),
        ];
        let components = events.map(|(replica, written, _)| component(replica, written)).into();
        let restart = Restart {
            started: OnceLock::from((at(10_000), 0)),
            done: OnceLock::from(at(10_500)),
        };
        let mut churning = Churning::new(components, Measured::new(60, Duration::ZERO, 0), Arc::new(restart));
        churning.started = t0;
        churning.observe(Seen {
            conditions: events.map(|(replica, _, ms)| (replica.to_owned(), at(ms))).into(),
            reports: 0,
        });
        assert_eq!(churning.measured.delays.len(), 1);
        assert_eq!(churning.measured.p(0.99), 300);
        assert_eq!(churning.measured.restart_to_condition, Some(Duration::from_secs(2)));
    }
}
