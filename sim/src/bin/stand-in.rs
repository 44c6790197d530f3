//! `stand-in`: the test-only stand-in for OME, beside a real control plane (cluster/up.sh: etcd,
//! kube-apiserver, kube-scheduler) whose nodes kwok plays (cluster/kwok-up.sh). It runs until
//! interrupted (or `--exit-after`), against the cluster of `--kubeconfig` or `KUBECONFIG`, says
//! `ome: ready` on a line of its own once it is (the tests wait for it), then logs one line per
//! action. `stand-in nodes` prints a named layout's Nodes, annotated for kwok, for `kubectl create`:
//!
//!   target/debug/stand-in nodes --layout two-zones | kubectl create -f -
//!   target/debug/stand-in ome [--no-in-tree-terms]

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ome_spread_sim::stand_in::ome::{self, Terms};
use ome_spread_sim::support::{api, nodes};

#[derive(Parser)]
#[command(
    name = "stand-in",
    about = "A test-only stand-in for OME, beside a real kube-apiserver and kube-scheduler, and the nodes kwok plays"
)]
struct Cli {
    /// The cluster's kubeconfig (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
    /// Stop after this many seconds.
    #[arg(long, global = true)]
    exit_after: Option<u64>,
    /// Stop when the API server has not answered for this many seconds (0: never).
    #[arg(long, global = true, default_value_t = 300)]
    give_up: u64,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the Nodes of a layout, annotated for kwok to play, as a List for `kubectl create -f -`.
    Nodes {
        /// two-zones, three-zones or racks.
        #[arg(long)]
        layout: String,
    },
    /// Do what OME v1.3 does for OMENative InferenceServices: their InferenceReplicas, their
    /// Instances' pods, statuses, and migration requests (surge, then drain).
    Ome {
        /// Leave the spread constraint and the workers' affinity to the ome-spread policy (its
        /// webhook) rather than render OME's own.
        #[arg(long)]
        no_in_tree_terms: bool,
        /// How long a migration may take before OME fails it, in seconds.
        #[arg(long, default_value_t = 600)]
        migration_deadline: i64,
        /// Run as OME without its migration caps (`lifecycle.audit`, as its kustomize manifests
        /// leave them out): every migration request is held in Accepted.
        #[arg(long)]
        no_lifecycle_audit: bool,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Nodes { layout } => print_nodes(&layout),
        Command::Ome {
            no_in_tree_terms,
            migration_deadline,
            no_lifecycle_audit,
        } => {
            let options = ome::Options {
                terms: if no_in_tree_terms {
                    Terms::Webhook
                } else {
                    Terms::InTree
                },
                deadline: jiff::SignedDuration::from_secs(migration_deadline),
                caps: !no_lifecycle_audit,
                exit_after: cli.exit_after.map(Duration::from_secs),
                give_up: Some(Duration::from_secs(cli.give_up)).filter(|d| !d.is_zero()),
                ..ome::Options::default()
            };
            run_ome(cli.kubeconfig.as_deref(), options).await
        }
    }
}

async fn run_ome(kubeconfig: Option<&Path>, options: ome::Options) -> ExitCode {
    let client = match api::client(kubeconfig).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("stand-in: no cluster: {e}");
            return ExitCode::from(2);
        }
    };
    // Ready: each pass reads the cluster afresh, the first one included.
    println!("ome: ready");
    tokio::select! {
        () = ome::run(client, options) => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    ExitCode::SUCCESS
}

/// The layout's Nodes, as a List.
fn print_nodes(layout: &str) -> ExitCode {
    let Some(shapes) = nodes::layout(layout) else {
        eprintln!("stand-in: no layout {layout}: one of {}", nodes::LAYOUTS.join(", "));
        return ExitCode::from(2);
    };
    let items: Vec<serde_json::Value> = shapes.iter().map(nodes::node).collect();
    println!(
        "{}",
        serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items})
    );
    ExitCode::SUCCESS
}
