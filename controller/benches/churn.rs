//! `make bench-churn`: the controller as built (`ome-spread controller`, its own process) against
//! the in-memory API server (`ome_spread_sim::stand_in::memory`, over HTTP on 127.0.0.1) holding the
//! benchmarks' large cluster: 1,000 replicas, their 10,000 pods as OME creates them, 20,000 pods
//! of other workloads (CHURN_OTHER_PODS: `make bench-churn-large` sets 90,000) and 5,000 nodes,
//! under CHURN_SECONDS of the churn `ome_spread_sim::bench::churn` describes. Side by side in the same run: the controller as it was at an earlier commit
//! (OME_SPREAD_CHURN_BASELINE, built by the Makefile from the commit OME_SPREAD_CHURN_BASELINE_REV
//! names).

use ome_spread_sim::bench::churn::{self, OTHER_PODS, RATE, number};

#[tokio::main]
async fn main() {
    // `cargo bench` passes --bench; this benchmark takes nothing else.
    let seconds = number("CHURN_SECONDS", 60);
    let other_pods = number("CHURN_OTHER_PODS", OTHER_PODS);
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
        let binary = churn::required(variable, "bench-churn");
        println!(
            "churn: {label}: {} for {seconds} s, beside {other_pods} pods of other workloads ...",
            binary.display()
        );
        measured.push(churn::in_memory(&binary, seconds, other_pods, &run).await);
    }
    let (now, then) = (&measured[0], &measured[1]);
    churn::print(&[("now", now), (&before, then)]);
    println!(
        "churn: {RATE} events/s, p99 event-to-condition {} ms ({before} {} ms), controller p50 {}, p99 {} ({before} {}, {}), controller CPU {:.2} cores ({before} {:.2}), peak memory {} MiB ({before} {} MiB)",
        now.p(0.99),
        then.p(0.99),
        now.controller.quantile_shown(0.5),
        now.controller.quantile_shown(0.99),
        then.controller.quantile_shown(0.5),
        then.controller.quantile_shown(0.99),
        now.cores,
        then.cores,
        now.peak_mib,
        then.peak_mib
    );
    println!("churn: the controllers' logs are in {}", dir.display());
}
