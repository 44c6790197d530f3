//! `ome-spread`: says whether the spread of an OMENative component holds, and if not, why.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use ome_spread_controller::context::Mode;
use ome_spread_controller::controller::{self, Options};
use ome_spread_controller::policy::{self, Source};
use ome_spread_controller::report::{Format, Reports};
use ome_spread_controller::serve::Health;
use ome_spread_controller::{explain, resources, serve};
use ome_spread_core::explain::{Objects, namespace_of_service};
use ome_spread_core::settings::Settings;
use serde_json::Value;
use tracing::{error, info};

// A reconcile builds and drops many small maps, where jemalloc costs the controller less CPU than
// glibc's malloc (make bench-churn, BENCHMARKS.md).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Fault-domain spread of OME's OMENative Instances
#[derive(Parser)]
#[command(name = "ome-spread", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show where an InferenceService's Instances landed, whether the spread holds, and what to do.
    ///
    /// Prints the tables of OME's how-to (the replica, its pods, their nodes), then the reason.
    /// Reads the cluster of the current kubeconfig context, or saved objects with --from.
    /// The policy's settings: --settings, else (live) the cluster's ClusterAdmissionPolicy.
    /// Exits 0 when the spread holds, 1 when it does not, 2 on bad input.
    Explain(ExplainArgs),
    /// Keep the `Spread` condition, Events and metrics of every OMENative InferenceReplica up to date.
    ///
    /// Runs in the cluster (deploy/controller.yaml), one replica leading on a Lease.
    Controller(ControllerArgs),
    /// Print the subsets of OME's CRDs that ome-spread reads
    /// (deploy/without-ome/ome-crd-subsets.yaml), for trying the controller on a cluster WITHOUT
    /// OME only: they carry OME's CRD names, and applied where OME runs they would replace OME's
    /// CRDs and prune its objects.
    Crd,
}

#[derive(clap::Args)]
struct ExplainArgs {
    /// The InferenceService's name.
    service: String,
    /// Its namespace: by default the kubeconfig context's, or with --from the one the saved
    /// InferenceService names.
    #[arg(short = 'n', long)]
    namespace: Option<String>,
    /// Only this component.
    #[arg(long, value_parser = ["engine", "decoder"])]
    component: Option<String>,
    /// Saved objects instead of the cluster (`kubectl get -o yaml` output, lists included): a
    /// file, or a directory of .yaml/.yml/.json files.
    #[arg(long)]
    from: Option<PathBuf>,
    /// The policy's settings: policy.yaml as it is (its ClusterAdmissionPolicy's
    /// spec.settings), or the settings alone (YAML or JSON). Without it, live explain reads
    /// the cluster's ClusterAdmissionPolicy (--policy), and --from uses the defaults.
    #[arg(long)]
    settings: Option<PathBuf>,
    /// The ClusterAdmissionPolicy whose settings live explain reads.
    #[arg(long, default_value = policy::DEFAULT_NAME, conflicts_with = "settings")]
    policy: String,
    /// List every node; by default more than 20 are summed up, a line per domain.
    #[arg(long)]
    nodes: bool,
}

#[derive(clap::Args)]
struct ControllerArgs {
    /// Read the policy's settings from this ClusterAdmissionPolicy and follow their changes.
    #[arg(long, env = "OME_SPREAD_POLICY", conflicts_with = "settings")]
    policy: Option<String>,
    /// Without --policy: the policy's settings, read once (policy.yaml as it is, or the
    /// settings alone), if they are not the defaults.
    #[arg(long, env = "OME_SPREAD_SETTINGS")]
    settings: Option<PathBuf>,
    /// Where /metrics, /healthz and /readyz listen.
    #[arg(long, default_value = "0.0.0.0:8080")]
    listen: SocketAddr,
    /// The namespace of the leader-election Lease `ome-spread-controller`.
    #[arg(long, env = "POD_NAMESPACE", default_value = "ome-spread")]
    lease_namespace: String,
    /// This replica's name in the election (the pod's name).
    #[arg(long, env = "POD_NAME")]
    identity: String,
    /// /healthz fails after this many seconds without an event of the Lease's watch, or with
    /// a reconcile running this long.
    #[arg(long, default_value_t = serve::STALLED_AFTER.as_secs(), value_name = "SECONDS")]
    stalled_after: u64,
    /// Log one JSON object per line.
    #[arg(long)]
    log_json: bool,
    /// What to do about a skew a migration can fix: nothing, recommend the moves (an Event and
    /// a metric), or request them of OME one at a time (needs
    /// deploy/controller-rbac-rebalance.yaml). An InferenceService's
    /// `spread.ome.io/rebalance` annotation can only lower it.
    #[arg(long, value_enum, default_value = "recommend", env = "OME_SPREAD_REBALANCE")]
    rebalance: Mode,
    /// In `migrate`: at most this many migration requests of ome-spread start in an hour,
    /// cluster-wide (OME's Alfred keeps the same default).
    #[arg(long, default_value_t = 10, env = "OME_SPREAD_REBALANCE_MAX_PER_HOUR")]
    rebalance_max_per_hour: usize,
    /// The policy report each diagnosed InferenceReplica gets, owned by it: OpenReports'
    /// Report (Kubewarden 1.33 and later), wgpolicyk8s.io's PolicyReport (older Kubewarden),
    /// or none.
    #[arg(long, value_enum, default_value = "openreports", env = "OME_SPREAD_REPORTS")]
    reports: Format,
}

/// The name kubectl runs a plugin by: `kubectl ome-spread ...` runs `kubectl-ome_spread ...`.
const PLUGIN: &str = "kubectl-ome_spread";
/// The command as its help and errors name it when run as the plugin.
const AS_PLUGIN: &str = "kubectl ome-spread";

/// The command line, its help and errors naming the command as it was run: `kubectl ome-spread`
/// when run as the kubectl plugin.
fn cli() -> Cli {
    let run_as = std::env::args_os().next().map(PathBuf::from);
    let plugin = run_as.as_deref().and_then(Path::file_name) == Some(PLUGIN.as_ref());
    let mut command = Cli::command();
    if plugin {
        command = command.bin_name(AS_PLUGIN).display_name(AS_PLUGIN);
    }
    Cli::from_arg_matches(&command.get_matches()).unwrap_or_else(|e| e.exit())
}

fn main() -> ExitCode {
    // What to print and the exit code, or the error and its exit code.
    let (printed, failed) = match cli().command {
        Command::Explain(args) => (explain(args).map(|(text, holds)| (text, if holds { 0 } else { 1 })), 2),
        Command::Controller(args) => return controller(args),
        Command::Crd => (resources::crd_yaml().map(|yaml| (yaml, 0)), 1),
    };
    match printed {
        Ok((text, code)) => {
            print!("{text}");
            ExitCode::from(code)
        }
        Err(message) => {
            eprintln!("error: {message}");
            ExitCode::from(failed)
        }
    }
}

/// `explain`: the text, and whether the spread holds.
fn explain(args: ExplainArgs) -> Result<(String, bool), String> {
    let service = &args.service;
    let (objects, namespace, source, settings) = match &args.from {
        Some(path) => {
            let (objects, source) = (saved(path)?, path.display().to_string());
            let namespace = match args.namespace {
                Some(namespace) => namespace,
                None => namespace_of_service(&objects, service, &source).map_err(|e| e.to_string())?,
            };
            let settings = policy::read_settings(args.settings.as_deref())?;
            (objects, namespace, source, settings)
        }
        None => {
            let (objects, namespace, settings) = runtime()?.block_on(fetch(&args))?;
            (objects, namespace, "the cluster".into(), settings)
        }
    };
    let only = args.component.as_deref();
    explain::run(service, &namespace, only, &objects, &source, &settings, args.nodes)
}

/// `controller`: serves and leads until asked to stop.
fn controller(args: ControllerArgs) -> ExitCode {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into());
    let logs = tracing_subscriber::fmt().with_env_filter(filter);
    if args.log_json {
        logs.json().init()
    } else {
        logs.init()
    }
    let health = Arc::new(Health::new(Duration::from_secs(args.stalled_after)));
    let named = args.policy.as_deref().unwrap_or(policy::DEFAULT_NAME);
    let reports = Reports::new(args.reports, named, health.clone());
    let source = match args.policy {
        Some(name) => Ok(Source::Policy(name)),
        None => policy::read_settings(args.settings.as_deref()).map(Source::Fixed),
    };
    let run = source.and_then(|settings| {
        let options = controller::Options {
            settings,
            lease_namespace: args.lease_namespace,
            identity: args.identity,
            health,
            metrics: Arc::default(),
            rebalance: args.rebalance,
            max_per_hour: args.rebalance_max_per_hour,
            reports,
        };
        runtime()?.block_on(serve_and_lead(options, args.listen))
    });
    match run {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            error!("{message}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Runtime::new().map_err(|e| format!("starting the async runtime: {e}"))
}

/// The objects `explain` reads, in `--namespace` or else the kubeconfig context's, as kubectl does,
/// and the settings: from `--settings`, else of the cluster's ClusterAdmissionPolicy `--policy`.
async fn fetch(args: &ExplainArgs) -> Result<(Objects, String, Settings), String> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("connecting to the cluster of the kubeconfig: {e}"))?;
    let settings = match &args.settings {
        Some(path) => policy::read_settings(Some(path))?,
        None => policy::fetch_settings(client.clone(), &args.policy).await?,
    };
    let namespace = (args.namespace.clone()).unwrap_or_else(|| client.default_namespace().to_owned());
    let objects = explain::fetch(client, &args.service, &namespace).await?;
    Ok((objects, namespace, settings))
}

/// Saved Kubernetes objects: `kubectl get -o yaml` output (single objects or Lists, several
/// documents per file), from a file or a directory.
fn saved(path: &Path) -> Result<Objects, String> {
    let files = if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut documents = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let parsed: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        documents.extend(parsed);
    }
    Objects::new(documents).map_err(|e| format!("{}: {e}", path.display()))
}

async fn serve_and_lead(options: Options, listen: SocketAddr) -> Result<(), String> {
    let client = kube::Client::try_default()
        .await
        .map_err(|e| format!("connecting to the cluster: {e}"))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| format!("listening on {listen}: {e}"))?;
    info!(%listen, "serving /metrics, /healthz and /readyz");
    let router = serve::router(options.metrics.clone(), options.health.clone());
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, router).await {
            error!(error = %e, "serving metrics");
        }
    });
    controller::run(client, options).await
}
