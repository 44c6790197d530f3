//! The policy's settings where the policy itself keeps them: the `spec.settings` of its
//! ClusterAdmissionPolicy (Kubewarden's `policies.kubewarden.io/v1`, cluster-scoped), read by
//! `explain` from a file or the cluster and followed by the controller, so that the controller
//! diagnoses with the very settings the policy-server gives the policy.

use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use itertools::Itertools;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::{WatchStreamExt, watcher};
use ome_spread_core::settings::Settings;
use serde_json::Value;
use tokio::sync::watch;
use tracing::{error, info, warn};

use crate::report::Reports;
use crate::serve::Health;

pub const KIND: &str = "ClusterAdmissionPolicy";
/// The name `explain` reads by default: policy.yaml's.
pub const DEFAULT_NAME: &str = "ome-spread";

/// Where the controller's settings come from.
pub enum Source {
    /// `--settings FILE`, or the defaults: read once.
    Fixed(Settings),
    /// `--policy NAME`: the ClusterAdmissionPolicy, followed.
    Policy(String),
}

fn api(client: Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("policies.kubewarden.io", "v1", KIND);
    Api::all_with(client, &ApiResource::from_gvk(&gvk))
}

/// The settings of a ClusterAdmissionPolicy (`spec.settings`, absent: the defaults), parsed as the
/// policy parses them; the error names the policy and the field.
pub fn settings_of(policy: &Value) -> Result<Settings, String> {
    let name = policy["metadata"]["name"].as_str().unwrap_or_default();
    Settings::from_json(&policy["spec"]["settings"]).map_err(|e| format!("{KIND} {name}: spec.settings: {e}"))
}

/// The settings in a file: policy.yaml as it is (the one ClusterAdmissionPolicy among its
/// documents), or the settings alone (YAML or JSON); no file, the defaults.
pub fn read_settings(path: Option<&Path>) -> Result<Settings, String> {
    let Some(path) = path else {
        return Ok(Settings::default());
    };
    let failed = |e: String| format!("{}: {e}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    let documents: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| failed(e.to_string()))?;
    let policies: Vec<&Value> = documents.iter().filter(|d| d["kind"] == KIND).collect();
    match (policies.as_slice(), documents.as_slice()) {
        ([policy], _) => settings_of(policy).map_err(failed),
        ([], []) => Ok(Settings::default()),
        // One document that is no Kubernetes object: the settings alone.
        ([], [settings]) if settings.get("kind").is_none() => Settings::from_json(settings).map_err(failed),
        ([], _) => Err(failed(format!(
            "no {KIND} among its documents ({}), nor the settings alone",
            documents
                .iter()
                .map(|d| d["kind"].as_str().unwrap_or("no kind"))
                .join(", ")
        ))),
        (several, _) => Err(failed(format!(
            "{} ClusterAdmissionPolicies ({}): keep the one whose settings to read",
            several.len(),
            several
                .iter()
                .map(|p| p["metadata"]["name"].as_str().unwrap_or_default())
                .join(", ")
        ))),
    }
}

/// The settings of the cluster's ClusterAdmissionPolicy `name`; absent or unreadable, an error
/// saying how to pass them instead (a diagnosis on settings other than the policy's is wrong).
pub async fn fetch_settings(client: Client, name: &str) -> Result<Settings, String> {
    let instead = "name it with --policy, or pass the settings with --settings policy.yaml";
    match api(client).get_opt(name).await {
        Ok(Some(policy)) => settings_of(&serde_json::to_value(&policy).map_err(|e| e.to_string())?),
        Ok(None) => Err(format!("no {KIND} {name} in the cluster: {instead}")),
        Err(kube::Error::Api(status)) if status.code == 404 => Err(format!(
            "no {KIND} {name} in the cluster (Kubewarden's CRD is not installed): {instead}"
        )),
        Err(e) => Err(format!("reading {KIND} {name}: {e}: {instead}")),
    }
}

/// Follows ClusterAdmissionPolicy `name`, sending its settings on `settings` when they are first
/// read and each time they change. Until they are first read, `health` is not ready and says why;
/// settings that do not parse, or the policy deleted, keep the last good settings and say so in
/// the log.
pub async fn follow(
    client: Client,
    name: String,
    settings: watch::Sender<Settings>,
    health: Arc<Health>,
    reports: Arc<Reports>,
) {
    health.waiting_for_settings(Some(format!("waiting for {KIND} {name}: not read yet")));
    let mut read = false;
    let mut changes = watcher::watch_object(api(client), &name)
        .backoff(crate::reflected::backoff())
        .boxed();
    while let Some(event) = changes.next().await {
        let parsed = match event {
            Ok(Some(policy)) => serde_json::to_value(&policy)
                .map_err(|e| e.to_string())
                .and_then(|policy| {
                    reports.policy_read(&policy);
                    settings_of(&policy)
                }),
            Ok(None) if read => {
                error!("no {KIND} {name} in the cluster any more: keeping the settings last read");
                continue;
            }
            Ok(None) => {
                let why = format!("no {KIND} {name} in the cluster");
                warn!("{why}: not standing for the Lease until it is created");
                health.waiting_for_settings(Some(why));
                continue;
            }
            Err(e) => {
                warn!(error = %e, "watching {KIND} {name}");
                if !read {
                    health.waiting_for_settings(Some(format!("cannot read {KIND} {name}: {e}")));
                }
                continue;
            }
        };
        match parsed {
            Ok(new) if !read => {
                info!(policy = %name, settings = ?new, "settings read");
                read = true;
                health.waiting_for_settings(None);
                // Marked as changed even when equal to the channel's first value: the first read.
                settings.send_replace(new);
            }
            // Compared before it is sent: this is the channel's one writer.
            Ok(new) if *settings.borrow() != new => {
                info!(policy = %name, settings = ?new, "settings changed: reconciling every replica");
                settings.send_replace(new);
            }
            Ok(_) => {}
            Err(why) if read => error!("{why}: keeping the settings last read"),
            Err(why) => {
                error!("{why}: not standing for the Lease until they are fixed");
                health.waiting_for_settings(Some(why));
            }
        }
    }
}
