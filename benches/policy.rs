//! `make bench`: the built policy.wasm beside the floor (a policy that parses the request as the
//! Kubewarden SDK does and accepts), both in wasmtime through waPC as the policy-server runs them.
//! The policy parses the same request with the same SDK, then decides and writes the pod back.
//! Beside them, the floor's `mutate`: the same parse, one host call answered with the replica and parsed, and the pod written back whole,
//! which any policy that reads one object and mutates the pod pays; the policy's own work is what
//! it costs beyond that.
//! With `OME_SPREAD_BASELINE_WASM` set to another build of the policy (say, main's), that module
//! runs beside them too, and the table gives the policy's time as a multiple of it: at most 1.5x.
//! They are called in turn, call by call, so that drift on a shared machine cancels out; each
//! criterion sample gives one time per call for each, and the table reports the medians.

use std::cell::RefCell;
use std::hint::black_box;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use criterion::Criterion;
use ome_spread_sim::policy::wasm::{Module, build_floor, build_policy};
use ome_spread_sim::policy::{edited, replica, review, validation_request, with_spec};
use serde_json::{Value, json};
use wapc::WapcHost;

struct Case {
    name: String,
    payload: Vec<u8>,
    replica: Vec<u8>,
}

/// The most the policy may cost, as a multiple of the baseline build.
const BASELINE_TARGET: f64 = 1.5;

/// The build of the policy named by `OME_SPREAD_BASELINE_WASM`, if any.
fn baseline() -> Option<&'static Module> {
    static COMPILED: OnceLock<Option<Module>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let path = std::env::var_os("OME_SPREAD_BASELINE_WASM")?;
            Some(Module::load(Path::new(&path), None).unwrap_or_else(|e| panic!("OME_SPREAD_BASELINE_WASM: {e}")))
        })
        .as_ref()
}

/// `review`'s pod with `containers` containers of `env_vars` environment variables each.
fn with_env(review: Value, containers: usize, env_vars: usize) -> Value {
    edited(review, |pod| {
        let template = pod["spec"]["containers"][0].clone();
        pod["spec"]["containers"] = (0..containers)
            .map(|c| {
                let mut container = template.clone();
                container["name"] = json!(format!("engine-{c}"));
                container["env"] = (0..env_vars)
                    .map(|v| json!({"name": format!("OME_SETTING_{c:02}_{v:04}"), "value": format!("{v:0>150}")}))
                    .collect();
                container
            })
            .collect();
    })
}

fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).expect("json")
}

fn cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for spread in ["Required", "Preferred"] {
        let spreading = |name: &str| bytes(&with_spec(replica(name), json!({"topologySpread": spread})));
        let (qwen, deepseek) = (spreading("qwen3-0-6b-engine"), spreading("deepseek-v3-engine"));
        let single = review("qwen3-0-6b-engine-0-default-0");
        for (kind, pod, replica) in [
            ("single", single.clone(), &qwen),
            ("leader", review("deepseek-v3-engine-0-leader-0"), &deepseek),
            ("worker", review("deepseek-v3-engine-0-worker-0"), &deepseek),
            ("1.5MB pod", with_env(single, 40, 200), &qwen),
        ] {
            cases.push(Case {
                name: format!("{kind}, {spread}"),
                payload: validation_request(&pod, json!({})),
                replica: replica.clone(),
            });
        }
    }
    cases.push(Case {
        name: "another workload".into(),
        payload: validation_request(&review("other-workload"), json!({})),
        // The policy reads no replica for it; the floor's `mutate` reads one all the same.
        replica: bytes(&replica("qwen3-0-6b-engine")),
    });
    cases
}

/// The modules run side by side, each host call answered with the same replica.
struct Instances {
    policy: WapcHost,
    floor: WapcHost,
    baseline: Option<WapcHost>,
}

fn instances(replica: &[u8]) -> Instances {
    let answer = |replica: &[u8]| {
        let replica = replica.to_vec();
        move |_: &[u8]| Ok(replica.clone())
    };
    Instances {
        policy: Module::policy().instance(answer(replica)),
        floor: Module::floor().instance(answer(replica)),
        baseline: baseline().map(|module| module.instance(answer(replica))),
    }
}

/// One sample's seconds per call: the policy, the floor, the floor's `mutate`, the baseline.
struct Sample {
    policy: f64,
    floor: f64,
    mutating: f64,
    baseline: f64,
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn micros(seconds: f64) -> String {
    format!("{:.1} µs", seconds * 1e6)
}

/// Times the policy, the floor, the floor's `mutate` and the baseline in turn on `payload`, one
/// [`Sample`] per criterion sample.
fn alternate(criterion: &mut Criterion, name: &str, payload: &[u8], hosts: &Instances) -> Vec<Sample> {
    let samples = RefCell::new(Vec::new());
    let timed = |host: &WapcHost, operation: &str, total: &mut Duration| {
        let start = Instant::now();
        black_box(host.call(operation, payload).expect(operation));
        *total += start.elapsed();
    };
    criterion.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let [mut policy_time, mut floor_time, mut mutating_time, mut baseline_time] = [Duration::ZERO; 4];
            for _ in 0..iters {
                timed(&hosts.floor, "validate", &mut floor_time);
                timed(&hosts.floor, "mutate", &mut mutating_time);
                timed(&hosts.policy, "validate", &mut policy_time);
                if let Some(baseline) = &hosts.baseline {
                    timed(baseline, "validate", &mut baseline_time);
                }
            }
            let per_call = |total: Duration| total.as_secs_f64() / iters as f64;
            samples.borrow_mut().push(Sample {
                policy: per_call(policy_time),
                floor: per_call(floor_time),
                mutating: per_call(mutating_time),
                baseline: per_call(baseline_time),
            });
            policy_time
        })
    });
    samples.into_inner()
}

/// The smallest linear memory, in 64 KiB pages, in which the policy answers `payload`.
fn peak_memory_pages(payload: &[u8], replica: &[u8]) -> usize {
    const PAGE: usize = 64 * 1024;
    let answers = |pages: usize| {
        let replica = replica.to_vec();
        let policy = Module::policy_with_memory_limit(pages * PAGE).instance(move |_| Ok(replica.clone()));
        policy.call("validate", payload).is_ok()
    };
    // The fewest pages that answer (4096 at most), found by bisection.
    let pages: Vec<usize> = (1..4096).collect();
    1 + pages.partition_point(|&p| !answers(p))
}

/// OME's pods: the policy beside the floor and the floor's mutate, and beside the baseline build.
fn case_tables(criterion: &mut Criterion) -> (Vec<String>, Vec<String>) {
    let mut table = vec![
        "| case | policy | floor | ratio | floor's mutate | policy / mutate |".to_owned(),
        "| --- | ---: | ---: | ---: | ---: | ---: |".to_owned(),
    ];
    let mut against_baseline = vec![
        format!("| case | policy | baseline | policy / baseline | at most {BASELINE_TARGET:.2}x |"),
        "| --- | ---: | ---: | ---: | --- |".to_owned(),
    ];
    for case in cases() {
        let samples = alternate(criterion, &case.name, &case.payload, &instances(&case.replica));
        if samples.is_empty() {
            continue; // filtered out on the command line
        }
        let of = |time: fn(&Sample) -> f64| micros(median(samples.iter().map(time).collect()));
        let ratio = |to: fn(&Sample) -> f64| median(samples.iter().map(|s| s.policy / to(s)).collect());
        let to_baseline = ratio(|s| s.baseline);
        table.push(format!(
            "| {} | {} | {} | {:.2}x | {} | {:.2}x |",
            case.name,
            of(|s| s.policy),
            of(|s| s.floor),
            ratio(|s| s.floor),
            of(|s| s.mutating),
            ratio(|s| s.mutating),
        ));
        let met = if to_baseline <= BASELINE_TARGET {
            "met"
        } else {
            "MISSED"
        };
        let (policy, baseline) = (of(|s| s.policy), of(|s| s.baseline));
        against_baseline.push(format!(
            "| {} | {policy} | {baseline} | {to_baseline:.2}x | {met} |",
            case.name
        ));
    }
    (table, against_baseline)
}

/// The policy's time as the pod grows; and the largest request, to size its memory by.
fn scaling_table(criterion: &mut Criterion, replica: &[u8]) -> (Vec<String>, Vec<u8>) {
    let mut scaling = vec![
        "| pod | policy | per KB | floor per KB |".to_owned(),
        "| ---: | ---: | ---: | ---: |".to_owned(),
    ];
    let mut largest = Vec::new();
    for (label, containers, env_vars) in [
        ("10 KB", 1, 45),
        ("100 KB", 40, 12),
        ("1 MB", 40, 130),
        ("3 MB", 40, 390),
    ] {
        let pod = with_env(review("qwen3-0-6b-engine-0-default-0"), containers, env_vars);
        let payload = validation_request(&pod, json!({}));
        let kb = payload.len() as f64 / 1024.0;
        let samples = alternate(criterion, &format!("scaling {label}"), &payload, &instances(replica));
        largest = payload;
        if samples.is_empty() {
            continue;
        }
        let (policy_time, floor_time) = (
            median(samples.iter().map(|s| s.policy).collect()),
            median(samples.iter().map(|s| s.floor).collect()),
        );
        scaling.push(format!(
            "| {label} ({kb:.0} KB) | {} | {} | {} |",
            micros(policy_time),
            micros(policy_time / kb),
            micros(floor_time / kb)
        ));
    }
    (scaling, largest)
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    let (table, against_baseline) = case_tables(&mut criterion);
    let replica = bytes(&replica("qwen3-0-6b-engine"));
    let (scaling, largest) = scaling_table(&mut criterion, &replica);
    let pages = peak_memory_pages(&largest, &replica);

    criterion.final_summary();
    println!("\n{}\n\n{}\n", table.join("\n"), scaling.join("\n"));
    if let Some(path) = std::env::var_os("OME_SPREAD_BASELINE_WASM") {
        println!(
            "Beside the baseline {}:\n\n{}\n",
            path.display(),
            against_baseline.join("\n")
        );
    }
    let size = |path: &std::path::Path| std::fs::metadata(path).map(|m| m.len()).unwrap_or_default();
    println!(
        "Module size: policy {} bytes, floor {} bytes (the policy at most 400 KB)",
        size(build_policy()),
        size(build_floor())
    );
    if let Some(path) = std::env::var_os("OME_SPREAD_BASELINE_WASM") {
        println!("Module size: baseline {} bytes", size(Path::new(&path)));
    }
    println!(
        "Linear memory needed for the {:.1} MB request: {pages} pages of 64 KiB = {:.1} MiB",
        largest.len() as f64 / 1e6,
        pages as f64 / 16.0
    );
}
