//! `admission-host`: test-only, the built policy behind a real API server's mutating webhook
//! ([`ome_spread_sim::stand_in::admission_host`] says what it does as policy-server does).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ome_spread_sim::stand_in::admission_host::{Options, client, start, webhook};
use serde_json::{Value, json};

#[derive(Parser)]
#[command(about = "Test-only: the built policy.wasm behind a real API server's mutating webhook")]
struct Args {
    /// The built policy (`make policy.wasm`).
    #[arg(long)]
    wasm: PathBuf,
    /// The policy's settings: JSON text, or a JSON or YAML file; policy.yaml's by default.
    #[arg(long)]
    settings: Option<String>,
    /// The serving certificate (PEM), for 127.0.0.1.
    #[arg(long)]
    cert: PathBuf,
    /// The serving certificate's key (PEM).
    #[arg(long)]
    key: PathBuf,
    /// Where to listen: 127.0.0.1 only; port 0 takes a free one.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: SocketAddr,
    /// The identity `get_resource` reads as: the policy-server ServiceAccount's token.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The ClusterAdmissionPolicy the host serves, and the webhook is rendered from.
    #[arg(long, default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/../policy.yaml"))]
    policy: PathBuf,
    /// How kubewarden-controller names the policy: `clusterwide` up to Kubewarden 1.37.1, `kw`
    /// from 1.37.2.
    #[arg(long, value_enum, default_value_t = webhook::Naming::Clusterwide)]
    naming: webhook::Naming,
    /// The CA that signed `--cert`: the webhook's caBundle.
    #[arg(long, requires = "apply_webhook")]
    ca: Option<PathBuf>,
    /// Write the MutatingWebhookConfiguration, pointing at this host, before saying it is ready.
    #[arg(long, requires_all = ["ca", "admin_kubeconfig"])]
    apply_webhook: bool,
    /// Who writes the webhook configuration (the policy-server's identity may not).
    #[arg(long, requires = "apply_webhook")]
    admin_kubeconfig: Option<PathBuf>,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("admission host: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> Result<(), String> {
    let policy = webhook::read_policy(&args.policy)?;
    let settings = match &args.settings {
        Some(arg) => read_settings(arg)?,
        None => webhook::settings(&policy),
    };
    let policy_id = webhook::policy_id(&policy, args.naming)?;
    let running = start(Options {
        wasm: args.wasm,
        settings,
        cert: args.cert,
        key: args.key,
        listen: args.listen,
        kubeconfig: args.kubeconfig,
        policy_id,
    })
    .await?;
    if let (true, Some(ca), Some(admin)) = (args.apply_webhook, &args.ca, &args.admin_kubeconfig) {
        let ca = std::fs::read(ca).map_err(|e| format!("TLS: {}: {e}", ca.display()))?;
        let config = webhook::render(&policy, &running.url(), &ca, args.naming)?;
        let admin = client(admin).await?;
        let applied = webhook::apply(&admin, &config).await;
        applied.map_err(|e| format!("cannot apply the MutatingWebhookConfiguration: {e}"))?;
        // Ready means the API server calls the host: pods created before then pass without it.
        webhook::await_in_effect(&admin, &policy, "default", &running.reviews, IN_EFFECT_WITHIN).await?;
        let name = config.metadata.name.unwrap_or_default();
        eprintln!("admission host: applied MutatingWebhookConfiguration {name}, and the API server calls it");
    }
    println!("admission host: listening on {}", running.url());
    // Serves until a signal (SIGINT, SIGTERM) ends the process: nothing to clean up, and the
    // webhook configuration stays.
    std::future::pending::<()>().await;
    Ok(())
}

/// How long the API server may take to call a webhook configuration just applied.
const IN_EFFECT_WITHIN: std::time::Duration = std::time::Duration::from_secs(30);

/// `--settings`: JSON text if it looks like an object, else a file (JSON is YAML too).
fn read_settings(arg: &str) -> Result<Value, String> {
    let settings: Value = if arg.trim_start().starts_with('{') {
        serde_json::from_str(arg).map_err(|e| format!("Policy settings are invalid: --settings is not JSON: {e}"))?
    } else {
        let invalid = |e: &dyn std::fmt::Display| format!("Policy settings are invalid: {arg}: {e}");
        let text = std::fs::read_to_string(arg).map_err(|e| invalid(&e))?;
        serde_saphyr::from_str(&text).map_err(|e| invalid(&e))?
    };
    // A `settings:` key with only comments under it is null; policy-server then passes `{}`.
    Ok(if settings.is_null() { json!({}) } else { settings })
}
