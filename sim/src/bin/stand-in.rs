//! `stand-in`: the test-only stand-in for OME, beside a real control plane (cluster/up.sh: etcd,
//! kube-apiserver, kube-scheduler) whose nodes kwok plays (cluster/kwok-up.sh). It runs until
//! interrupted, or until the API server has not answered for 5 minutes, against the cluster of
//! `--kubeconfig` or `KUBECONFIG`, says
//! `ome: ready` on a line of its own once it is (the tests wait for it), then logs one line per
//! action. `stand-in nodes` prints a named layout's Nodes, annotated for kwok, for `kubectl create`:
//!
//!   target/debug/stand-in nodes --layout two-zones | kubectl create -f -
//!   target/debug/stand-in ome [--no-in-tree-terms]

use std::path::PathBuf;
use std::process::ExitCode;

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
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let terms = match cli.command {
        Command::Nodes { layout } => return print_nodes(&layout),
        Command::Ome { no_in_tree_terms } if no_in_tree_terms => Terms::Webhook,
        Command::Ome { .. } => Terms::InTree,
    };
    let client = match api::client(cli.kubeconfig.as_deref()).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("stand-in: no cluster: {e}");
            return ExitCode::from(2);
        }
    };
    // Ready: each pass reads the cluster afresh, the first one included. It runs until a signal
    // ends the process, or until it gives up on an API server gone.
    println!("ome: ready");
    let options = ome::Options {
        terms,
        ..ome::Options::default()
    };
    ome::run(client, options).await;
    ExitCode::SUCCESS
}

/// The layout's Nodes, as a List.
fn print_nodes(layout: &str) -> ExitCode {
    let Some(shapes) = nodes::layout(layout) else {
        eprintln!("stand-in: no layout {layout}: one of {}", nodes::LAYOUTS.join(", "));
        return ExitCode::from(2);
    };
    let items: Vec<serde_json::Value> = shapes.iter().map(nodes::node).collect();
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    println!("{list}");
    ExitCode::SUCCESS
}
