//! `make bench`, its last part (an example, not a cargo bench: a bench target would be built with
//! the package's binary, which cargo fails to link under the release profile's `panic = "abort"`):
//! the annotated policy and the SDK floor (a policy that only parses
//! the request as the SDK does, then accepts) side by side in one real `policy-server`, its
//! replica lookups answered by a fake API server, under an open-loop load of OME's how-to's OMENative
//! pods: a request goes out on schedule whether or not the earlier ones have been answered, as
//! the API server's admission calls do.
//!
//! First `LOAD_RATE` (1,000) AdmissionReviews/s for `LOAD_SECONDS` (60) each, policy and floor
//! alternating second by second so that drift on a shared machine hits both alike; then a stepped
//! search, `STEP_SECONDS` (10) each per step, for the highest rate each sustains with p99 under
//! 10 ms. Prints markdown tables for BENCHMARKS.md.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use ome_spread_sim::policy_server::{self, Case, Client, Policy, PolicyServer, Tools};
use ome_spread_sim::stand_in::fake_api::FakeApi;
use serde_json::{Value, json};

/// The pods of OME's how-to: its two single-pod Instances, and a leader and a worker of a multi-node one.
const PODS: [&str; 4] = [
    "p5_seed_instance_0_gets_the_required_zone_constraint",
    "p5_seed_instance_1_gets_the_required_zone_constraint",
    "p5_leader_gets_the_zone_constraint_for_its_runner",
    "p8_worker_without_affinity_gets_one",
];
const RATES: [u64; 8] = [1_000, 1_500, 2_000, 2_500, 3_000, 4_000, 5_000, 6_000];
const P99_LIMIT: Duration = Duration::from_millis(10);

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// One policy of the server, the requests sent to it and the answer each must get.
struct Target {
    policy: &'static str,
    requests: Vec<Request>,
}

struct Request {
    body: Bytes,
    review: Value,
    expected: Value,
    /// An answer already found right, byte for byte: the same answer again needs no second
    /// check, which keeps the client's share of the two cores small.
    right: OnceLock<Bytes>,
}

impl Request {
    fn new(case: &Case, expected: Value) -> Self {
        Request {
            body: case.body(),
            review: case.request.clone(),
            expected,
            right: OnceLock::new(),
        }
    }

    fn is_right(&self, answer: &Bytes) -> bool {
        if self.right.get() == Some(answer) {
            return true;
        }
        let right = serde_json::from_slice(answer)
            .is_ok_and(|review| policy_server::differences(&self.review, &self.expected, &review).is_empty());
        if right {
            let _ = self.right.set(answer.clone());
        }
        right
    }
}

#[derive(Default)]
struct Outcome {
    latencies: Option<Histogram<u64>>,
    sent: u64,
    errors: u64,
    wrong: u64,
    /// How far the sender fell behind its schedule: the load asked for was not the load sent.
    lag: Duration,
    api_gets: usize,
    /// The policy-server's CPU time while it ran.
    cpu: Duration,
}

impl Outcome {
    fn add(&mut self, other: Outcome) {
        match (&mut self.latencies, other.latencies) {
            (Some(mine), Some(theirs)) => mine.add(theirs).expect("same bounds"),
            (mine, theirs) => *mine = mine.take().or(theirs),
        }
        self.sent += other.sent;
        self.errors += other.errors;
        self.wrong += other.wrong;
        self.lag = self.lag.max(other.lag);
        self.api_gets += other.api_gets;
        self.cpu += other.cpu;
    }

    fn quantile(&self, q: f64) -> Duration {
        Duration::from_micros(self.latencies.as_ref().map_or(0, |h| h.value_at_quantile(q)))
    }

    /// p99 under the limit, every answer right, and the rate actually sent.
    fn sustained(&self) -> bool {
        self.quantile(0.99) < P99_LIMIT && self.errors == 0 && self.wrong == 0 && self.lag < P99_LIMIT
    }
}

/// Sends `rate` requests per second for `seconds`, round robin over the target's requests, each
/// on its own task, and waits for every answer.
async fn load(rig: &Rig, target: &Arc<Target>, rate: u64, seconds: u64) -> Outcome {
    let Rig { server, client, api } = rig;
    let (port, gets_before, cpu_before) = (server.port, api.replica_gets(), server.cpu_time());
    let (answers, mut received) = tokio::sync::mpsc::unbounded_channel();
    let start = Instant::now();
    let mut lag = Duration::ZERO;
    for i in 0..rate * seconds {
        let scheduled = start + Duration::from_secs_f64(i as f64 / rate as f64);
        tokio::time::sleep_until(scheduled.into()).await;
        lag = lag.max(scheduled.elapsed());
        let (client, target, answers) = (client.clone(), target.clone(), answers.clone());
        tokio::spawn(async move {
            let request = &target.requests[i as usize % target.requests.len()];
            let sent = Instant::now();
            let answer = policy_server::validate_bytes(&client, port, target.policy, request.body.clone()).await;
            let latency = sent.elapsed();
            let right = answer.map(|answer| request.is_right(&answer));
            let _ = answers.send((latency, right));
        });
    }
    drop(answers);
    let mut outcome = Outcome {
        latencies: Some(Histogram::new_with_bounds(1, 60_000_000, 3).expect("bounds")),
        lag,
        ..Outcome::default()
    };
    while let Some((latency, right)) = received.recv().await {
        outcome.sent += 1;
        match right {
            Ok(true) => {}
            Ok(false) => outcome.wrong += 1,
            Err(_) => outcome.errors += 1,
        }
        let micros = latency.as_micros().max(1) as u64;
        outcome.latencies.as_mut().expect("histogram").saturating_record(micros);
    }
    outcome.api_gets = api.replica_gets() - gets_before;
    outcome.cpu = server.cpu_time().saturating_sub(cpu_before);
    outcome
}

/// The policy-server under load, its client, and the fake API server behind it.
struct Rig {
    server: PolicyServer,
    client: Client,
    api: Arc<FakeApi>,
}

/// Both targets at `rate` for `seconds` each, alternating second by second.
async fn alternate(rig: &Rig, targets: [&Arc<Target>; 2], rate: u64, seconds: u64) -> [Outcome; 2] {
    let mut outcomes = [Outcome::default(), Outcome::default()];
    for _ in 0..seconds {
        for (target, outcome) in targets.iter().zip(&mut outcomes) {
            outcome.add(load(rig, target, rate, 1).await);
        }
    }
    outcomes
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn ratio(policy: Duration, floor: Duration) -> String {
    format!("{:.2}x", policy.as_secs_f64() / floor.as_secs_f64().max(1e-9))
}

fn main() {
    let Some(tools) = Tools::find(true) else {
        return;
    };
    let (rate, seconds, step_seconds) = (
        env_number("LOAD_RATE", 1_000),
        env_number("LOAD_SECONDS", 60),
        env_number("STEP_SECONDS", 10),
    );
    let cases = policy_server::cases();
    let pods = benchmark_pods(&cases);
    // The fake API server on a thread of its own, so that it answers the policy-server's lookups
    // as promptly as an API server would, however busy the load client is: while a lookup is in
    // flight, the evaluations that need it wait.
    let api_runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let api = api_runtime.block_on(FakeApi::start(pods.iter().filter_map(|c| c.replica.clone()).collect()));
    // The client on one thread: the machine's other cores are the policy-server's.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        // warn: per-request INFO logs would cost both alike and measure the logger.
        let server = PolicyServer::start(&tools.policy_server, &policies(&tools, &pods), &api, "warn")
            .unwrap_or_else(|output| panic!("policy-server did not start: {output}"));
        let [policy, floor] = targets(&pods);
        let rig = Rig {
            server,
            client: policy_server::client(),
            api,
        };

        // Warm up both (instances, connections, the lookup's cache), unmeasured.
        for target in [&policy, &floor] {
            load(&rig, target, rate, 2).await;
        }
        let outcomes = alternate(&rig, [&policy, &floor], rate, seconds).await;
        print_side_by_side(rate, seconds, &outcomes);
        stepped_search(&rig, [&policy, &floor], step_seconds).await;
        println!("API requests seen: {}", rig.api.seen().len());
    });
}

/// The cases of [`PODS`], which must agree on their replicas.
fn benchmark_pods(cases: &[Case]) -> Vec<&Case> {
    let pods: Vec<&Case> = PODS
        .iter()
        .map(|name| {
            cases
                .iter()
                .find(|c| c.name == *name)
                .unwrap_or_else(|| panic!("no case {name}"))
        })
        .collect();
    let groups = policy_server::groups(pods.iter().copied());
    assert_eq!(groups.len(), 1, "the benchmark's pods must agree on their replicas");
    pods
}

/// The policy with the pods' settings, and the floor.
fn policies(tools: &Tools, pods: &[&Case]) -> [Policy; 2] {
    let settings = &pods[0].settings;
    assert!(
        pods.iter().all(|c| c.settings == *settings),
        "one policy, one set of settings"
    );
    [
        Policy {
            name: "ome-spread".into(),
            module: tools.policy.clone(),
            settings: settings.clone(),
            context_aware: true,
        },
        Policy {
            name: "floor".into(),
            module: tools.floor.clone(),
            settings: json!({}),
            context_aware: false,
        },
    ]
}

/// The pods sent to the policy, each to get its case's answer, and to the floor, each accepted.
fn targets(pods: &[&Case]) -> [Arc<Target>; 2] {
    let policy = Target {
        policy: "ome-spread",
        requests: pods.iter().map(|c| Request::new(c, c.expected.clone())).collect(),
    };
    let floor = Target {
        policy: "floor",
        requests: pods
            .iter()
            .map(|c| Request::new(c, json!({"accepted": true})))
            .collect(),
    };
    [Arc::new(policy), Arc::new(floor)]
}

/// The policy's and the floor's outcomes at one rate, as a table with their ratios.
fn print_side_by_side(rate: u64, seconds: u64, [on_policy, on_floor]: &[Outcome; 2]) {
    println!("\n### {rate} AdmissionReviews/s for {seconds} s each, alternating second by second\n");
    println!(
        "| module | p50 | p99 | p99.9 | max | sent | errors | wrong answers | API GETs | policy-server CPU | sender lag |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for (name, o) in [("ome-spread", on_policy), ("floor", on_floor)] {
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} | {} | {:.2} cores | {} |",
            ms(o.quantile(0.5)),
            ms(o.quantile(0.99)),
            ms(o.quantile(0.999)),
            ms(o.quantile(1.0)),
            o.sent,
            o.errors,
            o.wrong,
            o.api_gets,
            o.cpu.as_secs_f64() / seconds as f64,
            ms(o.lag)
        );
    }
    println!(
        "| policy / floor | {} | {} | {} | {} | | | | | {} | |",
        ratio(on_policy.quantile(0.5), on_floor.quantile(0.5)),
        ratio(on_policy.quantile(0.99), on_floor.quantile(0.99)),
        ratio(on_policy.quantile(0.999), on_floor.quantile(0.999)),
        ratio(on_policy.quantile(1.0), on_floor.quantile(1.0)),
        ratio(on_policy.cpu, on_floor.cpu),
    );
}

/// The stepped search, both at each step, alternating. On a shared machine one step can miss by
/// chance: the search ends when both have missed two steps in a row.
async fn stepped_search(rig: &Rig, targets: [&Arc<Target>; 2], step_seconds: u64) {
    println!("\n### The highest rate with p99 under 10 ms: {step_seconds} s per step\n");
    println!("| rate/s | ome-spread p99 (errors/wrong) | floor p99 (errors/wrong) | p99 ratio |");
    println!("| --- | --- | --- | --- |");
    let (mut best, mut misses) = ([None, None], [0, 0]);
    for step in RATES {
        let row = alternate(rig, targets, step, step_seconds).await;
        for i in 0..2 {
            if row[i].sustained() {
                (best[i], misses[i]) = (Some(step), 0);
            } else {
                misses[i] += 1;
            }
        }
        let cell = |o: &Outcome| {
            let mark = if o.sustained() { "" } else { ", missed" };
            format!("{} ({}/{}{mark})", ms(o.quantile(0.99)), o.errors, o.wrong)
        };
        let p99_ratio = ratio(row[0].quantile(0.99), row[1].quantile(0.99));
        println!("| {step} | {} | {} | {p99_ratio} |", cell(&row[0]), cell(&row[1]));
        if misses.iter().all(|m| *m >= 2) {
            break;
        }
    }
    let highest = |b: Option<u64>| b.map_or(format!("below {}/s", RATES[0]), |rate| format!("{rate}/s"));
    println!(
        "\nsustained with p99 under 10 ms: ome-spread {}, floor {} (the highest step tried: {}/s)",
        highest(best[0]),
        highest(best[1]),
        RATES[RATES.len() - 1]
    );
}
