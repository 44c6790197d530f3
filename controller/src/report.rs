//! The spread where platform teams already read policy results (docs/controller.md, "Reports"):
//! one report per replica the controller diagnoses, in the replica's namespace and owned by it, so
//! that it goes with the replica. OpenReports' `Report`, which Kubewarden's audit scanner writes
//! since 1.33, or wgpolicyk8s.io's `PolicyReport` for older Kubewarden. Each result reads as the
//! audit scanner writes its own (kubewarden/audit-scanner, `internal/report/report.go`): `policy`
//! the policy's unique name, severity and category from its annotations, `info` in monitor mode.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt};
use ome_spread_core::diagnosis::Report;
use ome_spread_core::loss::{Loss, sentence};
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::error::lock;
use crate::resources::FIELD_MANAGER;
use crate::serve::Health;
use ome_spread_core::ome::InferenceReplica;

/// The `source` Policy Reporter lists the reports under.
pub const SOURCE: &str = "ome-spread";
const SEVERITY: &str = "io.kubewarden.policy.severity";
const CATEGORY: &str = "io.kubewarden.policy.category";
/// After a write found no CRD for the reports, how long the writes wait before trying again: the
/// CRD installed later is found within this, and a cluster without it is not asked on every
/// reconcile.
const MISSING_RETRY: Duration = Duration::from_secs(300);

/// Which reports the controller writes (`--reports`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
#[value(rename_all = "lower")]
pub enum Format {
    /// `openreports.io/v1alpha1` `Report`: what Kubewarden 1.33 and later write.
    OpenReports,
    /// `wgpolicyk8s.io/v1alpha2` `PolicyReport`: what older Kubewarden writes.
    PolicyReport,
    Off,
}

impl Format {
    fn resource(self) -> Option<ApiResource> {
        let (group, version, kind) = match self {
            Self::OpenReports => ("openreports.io", "v1alpha1", "Report"),
            Self::PolicyReport => ("wgpolicyk8s.io", "v1alpha2", "PolicyReport"),
            Self::Off => return None,
        };
        Some(ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind)))
    }
}

/// The fields each result names the ClusterAdmissionPolicy by, as the audit scanner writes them:
/// `policy` its unique name, `clusterwide-NAME`; `severity` `info` in monitor mode, else its
/// annotation's; `category` its annotation's; each only when it has one.
fn policy_fields(policy: &Value) -> Value {
    let annotation = |key: &str| policy["metadata"]["annotations"][key].clone();
    let monitor = policy["spec"]["mode"] == "monitor";
    let mut fields = json!({
        "policy": format!("clusterwide-{}", policy["metadata"]["name"].as_str().unwrap_or_default()),
        "severity": if monitor { json!("info") } else { annotation(SEVERITY) },
        "category": annotation(CATEGORY),
    });
    if let Some(fields) = fields.as_object_mut() {
        fields.retain(|_, value| value.is_string());
    }
    fields
}

/// The reports, as `--reports` chose them, and the policy their results name.
pub struct Reports {
    format: Format,
    /// What names the policy in each result: [`policy_fields`].
    policy: Mutex<Value>,
    /// When a write last found no CRD for the format.
    missing: Mutex<Option<Instant>>,
    health: Arc<Health>,
}

impl Reports {
    /// Reports naming ClusterAdmissionPolicy `policy` until it is read; `health` tells a missing
    /// CRD.
    pub fn new(format: Format, policy: &str, health: Arc<Health>) -> Arc<Self> {
        Arc::new(Self {
            format,
            policy: Mutex::new(policy_fields(&json!({"metadata": {"name": policy}}))),
            missing: Mutex::default(),
            health,
        })
    }

    /// The ClusterAdmissionPolicy read again: its name, severity and category.
    pub fn policy_read(&self, policy: &Value) {
        *lock(&self.policy) = policy_fields(policy);
    }

    /// The results of a diagnosis, without their time: what a change is told by. `message`: the
    /// `Spread` condition's; `moves`: under `recommend`, each move that would fix the skew, with
    /// its command.
    pub fn results(&self, report: &Report, message: &str, worst_loss: Option<&Loss>, moves: &[String]) -> Vec<Value> {
        let policy = lock(&self.policy).clone();
        let result = |rule: &str, outcome: &str, message: String, properties: Value| {
            let mut result = json!({
                "source": SOURCE, "rule": rule, "result": outcome,
                "scored": true, "message": message, "properties": properties,
            });
            if let (Some(result), Some(policy)) = (result.as_object_mut(), policy.as_object()) {
                result.extend(policy.clone());
            }
            result
        };
        let mut spread = json!({"reason": report.reason.as_str()});
        // As the metrics: no counts for a reason found before the domains are counted.
        let per_domain = &report.instances_per_domain;
        if !per_domain.is_empty() {
            let counts: Vec<String> = per_domain.iter().map(|(domain, n)| format!("{domain}={n}")).collect();
            spread["instances-per-domain"] = json!(counts.join(","));
            spread["skew"] = json!(report.skew.to_string());
        }
        let outcome = if report.reason.holds() { "pass" } else { "fail" };
        let mut results = vec![result("spread", outcome, message.to_owned(), spread)];
        let (outcome, message, properties) = match worst_loss {
            Some(loss) => {
                let sentence = sentence(std::slice::from_ref(loss));
                let message = sentence.unwrap_or_else(|| format!("Losing {} takes no Instance.", loss.domain));
                let (left, instances) = (loss.left_serving.to_string(), loss.instances.to_string());
                let properties = json!({"domain": loss.domain, "left-serving": left, "instances": instances});
                (loss_outcome(loss), message, properties)
            }
            None => (
                "skip",
                "No Instance is placed in a domain of the spread key.".into(),
                json!({}),
            ),
        };
        results.push(result("domain-loss", outcome, message, properties));
        if !moves.is_empty() {
            results.push(result("rebalance", "warn", moves.join("\n"), json!({})));
        }
        results
    }

    /// Writes the replica's report with `results`, stamped now; Ok(false) when none is written
    /// (`--reports off`, or no CRD for the format, which is said once and in `/readyz`).
    pub async fn write(
        &self,
        client: &Client,
        replica: &InferenceReplica,
        results: &[Value],
    ) -> Result<bool, kube::Error> {
        let missing = lock(&self.missing).is_some_and(|at| at.elapsed() < MISSING_RETRY);
        let Some(resource) = self.format.resource().filter(|_| !missing) else {
            return Ok(false);
        };
        let namespace = replica.namespace().unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
        let report = report(&resource, replica, results, Timestamp::now());
        let params = PatchParams::apply(FIELD_MANAGER).force();
        match api.patch(&name(replica), &params, &Patch::Apply(report)).await {
            Ok(_) => {
                if lock(&self.missing).take().is_some() {
                    info!("the {} CRD is installed: writing reports", resource.kind);
                    self.health.note(None);
                }
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 404 => {
                if lock(&self.missing).replace(Instant::now()).is_none() {
                    let why = format!(
                        "no {} CRD ({}) in the cluster: no reports are written; install it, or set --reports",
                        resource.kind, resource.api_version
                    );
                    warn!("{why}");
                    self.health.note(Some(why));
                }
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// Deletes the report of a replica with nothing left to say.
    pub async fn delete(&self, client: &Client, replica: &InferenceReplica) -> Result<(), kube::Error> {
        let Some(resource) = self.format.resource() else {
            return Ok(());
        };
        let namespace = replica.namespace().unwrap_or_default();
        let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &namespace, &resource);
        match api.delete(&name(replica), &DeleteParams::default()).await {
            Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
            deleted => deleted.map(|_| ()),
        }
    }
}

/// What losing the worst domain leaves: none serving fails; fewer than all but one warns.
fn loss_outcome(loss: &Loss) -> &'static str {
    match loss.left_serving {
        0 => "fail",
        left if left + 1 < loss.instances => "warn",
        _ => "pass",
    }
}

/// One report per replica, named after its uid as Kubewarden names its own, prefixed so that
/// it never takes the name of the audit scanner's report of the same replica.
fn name(replica: &InferenceReplica) -> String {
    format!("{SOURCE}-{}", replica.uid().unwrap_or_else(|| replica.name_any()))
}

/// The report object: its results stamped `now` and counted. The scope names no
/// resourceVersion (the audit scanner's does): the condition's own write would make it stale.
pub fn report(resource: &ApiResource, replica: &InferenceReplica, results: &[Value], now: Timestamp) -> Value {
    let stamp = json!({"seconds": now.as_second(), "nanos": now.subsec_nanosecond()});
    let mut results = results.to_vec();
    for result in &mut results {
        result["timestamp"] = stamp.clone();
    }
    let count = |outcome: &str| results.iter().filter(|r| r["result"] == outcome).count();
    let mut report = json!({
        "apiVersion": resource.api_version,
        "kind": resource.kind,
        "metadata": {
            "name": name(replica),
            "namespace": replica.namespace(),
            "labels": {"app.kubernetes.io/managed-by": SOURCE},
            "ownerReferences": replica.owner_ref(&()).as_slice(),
        },
        "scope": replica.object_ref(&()),
        "summary": {
            "pass": count("pass"), "fail": count("fail"), "warn": count("warn"),
            "error": count("error"), "skip": count("skip"),
        },
        "results": results,
    });
    // wgpolicyk8s.io's PolicyReport has `source` on its results only.
    if resource.group == "openreports.io" {
        report["source"] = json!(SOURCE);
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tests::report as diagnosis;
    use ome_spread_core::diagnosis::Reason;

    fn replica() -> InferenceReplica {
        serde_json::from_value(json!({
            "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": "qwen3-0-6b-engine", "namespace": "spread-demo", "uid": "5f0c-uid"},
            "spec": {"component": "engine", "runners": []},
        }))
        .expect("a replica")
    }

    fn loss(left_serving: usize, instances: usize) -> Loss {
        Loss {
            domain: "zone-a".into(),
            lost: vec!["qwen3-0-6b-engine-0-default-0".into(); instances - left_serving],
            left_serving,
            instances,
            placed_again: Vec::new(),
            still_counts: None,
        }
    }

    fn medium() -> Arc<Reports> {
        let reports = Reports::new(Format::OpenReports, "ome-spread", Arc::default());
        reports.policy_read(&json!({"metadata": {"name": "ome-spread", "annotations": {
            SEVERITY: "medium", CATEGORY: "Scheduling"}}, "spec": {"mode": "protect"}}));
        reports
    }

    #[test]
    fn the_policy_is_named_and_rated_as_kubewardens_audit_scanner_does() {
        let annotated = json!({"metadata": {"name": "spread", "annotations": {SEVERITY: "high", CATEGORY: "Scheduling"}},
            "spec": {"mode": "protect"}});
        let cases = [
            (
                annotated.clone(),
                json!({"policy": "clusterwide-spread", "severity": "high", "category": "Scheduling"}),
            ),
            (
                json!({"metadata": annotated["metadata"], "spec": {"mode": "monitor"}}),
                json!({"policy": "clusterwide-spread", "severity": "info", "category": "Scheduling"}),
            ),
            (
                json!({"metadata": {"name": "plain"}, "spec": {}}),
                json!({"policy": "clusterwide-plain"}),
            ),
        ];
        for (policy, named) in cases {
            assert_eq!(policy_fields(&policy), named, "{policy}");
        }
    }

    #[test]
    fn losing_the_worst_domain_fails_with_none_left_and_warns_with_fewer_than_all_but_one() {
        let cases = [
            ((0, 3), "fail"),
            ((1, 3), "warn"),
            ((2, 3), "pass"),
            ((3, 3), "pass"),
            ((0, 1), "fail"),
            ((1, 2), "pass"),
        ];
        for ((left, instances), outcome) in cases {
            assert_eq!(
                loss_outcome(&loss(left, instances)),
                outcome,
                "{left} of {instances} left"
            );
        }
    }

    #[test]
    fn a_skewed_replica_fails_warns_of_its_loss_and_lists_its_moves() {
        let report = diagnosis(Reason::Skewed, &[("zone-a", 2), ("zone-b", 0)], 2);
        let worst = loss(0, 2);
        let moves = ["Move Instance 1 ...".into(), "Move Instance 2 ...".into()];
        let shared = json!({"source": "ome-spread", "policy": "clusterwide-ome-spread", "scored": true,
            "severity": "medium", "category": "Scheduling"});
        let with = |fields: Value| {
            let mut result = shared.clone();
            result
                .as_object_mut()
                .expect("an object")
                .extend(fields.as_object().cloned().expect("fields"));
            result
        };
        assert_eq!(
            medium().results(&report, "Skewed. Move one", Some(&worst), &moves),
            [
                with(
                    json!({"rule": "spread", "result": "fail", "message": "Skewed. Move one",
                    "properties": {"reason": "Skewed", "instances-per-domain": "zone-a=2,zone-b=0", "skew": "2"}})
                ),
                with(json!({"rule": "domain-loss", "result": "fail",
                    "message": "Losing zone-a leaves 0 of 2 Instances serving, and 0 of the 2 lost can be placed again elsewhere: an outage.",
                    "properties": {"domain": "zone-a", "left-serving": "0", "instances": "2"}})),
                with(
                    json!({"rule": "rebalance", "result": "warn", "message": "Move Instance 1 ...\nMove Instance 2 ...",
                    "properties": {}})
                ),
            ]
        );
    }

    #[test]
    fn the_report_is_owned_by_its_replica_stamped_and_counted() {
        let results = [
            json!({"rule": "spread", "result": "pass"}),
            json!({"rule": "domain-loss", "result": "skip"}),
        ];
        let now: Timestamp = "2026-12-03T14:00:00.5Z".parse().expect("a time");
        let resource = Format::OpenReports.resource().expect("a resource");
        let reference = json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "name": "qwen3-0-6b-engine", "uid": "5f0c-uid"});
        let stamp = json!({"seconds": 1_796_306_400, "nanos": 500_000_000});
        let expected = json!({
            "apiVersion": "openreports.io/v1alpha1", "kind": "Report", "source": "ome-spread",
            "metadata": {"name": "ome-spread-5f0c-uid", "namespace": "spread-demo",
                "labels": {"app.kubernetes.io/managed-by": "ome-spread"}, "ownerReferences": [reference]},
            "scope": {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "namespace": "spread-demo",
                "name": "qwen3-0-6b-engine", "uid": "5f0c-uid"},
            "summary": {"pass": 1, "fail": 0, "warn": 0, "error": 0, "skip": 1},
            "results": [{"rule": "spread", "result": "pass", "timestamp": stamp},
                {"rule": "domain-loss", "result": "skip", "timestamp": stamp}],
        });
        assert_eq!(report(&resource, &replica(), &results, now), expected);
        let older = Format::PolicyReport.resource().expect("a resource");
        let policy_report = report(&older, &replica(), &results, now);
        assert_eq!(
            (
                &policy_report["apiVersion"],
                &policy_report["kind"],
                policy_report.get("source")
            ),
            (&json!("wgpolicyk8s.io/v1alpha2"), &json!("PolicyReport"), None)
        );
    }
}
