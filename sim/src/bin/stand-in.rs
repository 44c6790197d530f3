//! `stand-in`: the test-only stand-ins for what a bare control plane (cluster/up.sh:
//! etcd, kube-apiserver, kube-scheduler) lacks: the nodes' kubelets, and OME. Each runs until
//! interrupted (or `--exit-after`), against the cluster of `--kubeconfig` or `KUBECONFIG`.
//!
//!   target/debug/stand-in nodes --layout two-zones
//!   target/debug/stand-in ome [--no-in-tree-terms]
//!
//! Each says `nodes: ready` or `ome: ready` on a line of its own once it is (the tests wait for
//! it), then logs one line per action.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ome_spread_sim::ome_stand_in::{self, Terms};
use ome_spread_sim::{api, nodes};

#[derive(Parser)]
#[command(
    name = "stand-in",
    about = "Test-only stand-ins for the kubelets and OME, beside a real kube-apiserver and kube-scheduler"
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
    /// Create the nodes of a layout, then play their kubelets: bound pods Running and Ready, pods
    /// being deleted gone at once, the nodes kept Ready.
    Nodes {
        /// two-zones, three-zones or racks; none: only play the nodes already there.
        #[arg(long, conflicts_with = "layout_file")]
        layout: Option<String>,
        /// The nodes from a file instead: a JSON or YAML list of {name, zone, rack, models, gpus,
        /// cpus, memory, pods, labels, taints, unschedulable}, unset fields as a layout's.
        #[arg(long)]
        layout_file: Option<PathBuf>,
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
    let client = match api::client(cli.kubeconfig.as_deref()).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("stand-in: no cluster: {e}");
            return ExitCode::from(2);
        }
    };
    let exit_after = cli.exit_after.map(Duration::from_secs);
    let give_up = Some(Duration::from_secs(cli.give_up)).filter(|d| !d.is_zero());
    let run = async {
        match cli.command {
            Command::Nodes { layout, layout_file } => {
                let shapes = match (layout, layout_file) {
                    (Some(name), _) => match nodes::layout(&name) {
                        Some(shapes) => shapes,
                        None => {
                            eprintln!("stand-in: no layout {name}: one of {}", nodes::LAYOUTS.join(", "));
                            return ExitCode::from(2);
                        }
                    },
                    (None, Some(file)) => match read_shapes(&file) {
                        Ok(shapes) => shapes,
                        Err(e) => {
                            eprintln!("stand-in: {}: {e}", file.display());
                            return ExitCode::from(2);
                        }
                    },
                    (None, None) => Vec::new(),
                };
                if let Err(e) = nodes::create_nodes(&client, &shapes).await {
                    eprintln!("stand-in: the nodes not created: {e}");
                    return ExitCode::FAILURE;
                }
                let options = nodes::Options {
                    exit_after,
                    give_up,
                    ..nodes::Options::default()
                };
                // Ready: the nodes are there, and the watch's first list catches every pod bound
                // from now on.
                println!("nodes: ready");
                nodes::run(client, options).await;
            }
            Command::Ome {
                no_in_tree_terms,
                migration_deadline,
                no_lifecycle_audit,
            } => {
                let options = ome_stand_in::Options {
                    terms: if no_in_tree_terms {
                        Terms::Webhook
                    } else {
                        Terms::InTree
                    },
                    deadline: jiff::SignedDuration::from_secs(migration_deadline),
                    caps: !no_lifecycle_audit,
                    exit_after,
                    give_up,
                    ..ome_stand_in::Options::default()
                };
                // Ready: each pass reads the cluster afresh, the first one included.
                println!("ome: ready");
                ome_stand_in::run(client, options).await;
            }
        }
        ExitCode::SUCCESS
    };
    tokio::select! {
        code = run => code,
        _ = tokio::signal::ctrl_c() => ExitCode::SUCCESS,
    }
}

/// A layout file's node shapes.
fn read_shapes(file: &std::path::Path) -> Result<Vec<nodes::NodeShape>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
    let value: serde_json::Value = serde_saphyr::from_str(&text).map_err(|e| e.to_string())?;
    nodes::shapes_from_json(&value)
}
