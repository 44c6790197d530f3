//! Part of the OME stand-in, which says why OME itself cannot serve here ([`super`]).
//!
//! [`crate::stand_in::migration`]'s surge migration on a real cluster: the surge's pods rendered as OME renders
//! them and created through the API server (admission applies), placed by the real
//! kube-scheduler (the stand-in waits for `spec.nodeName`), Ready by kwok; and the
//! model's changes written as OME writes them.

use kube::Client;
use ome_spread_core::labels::{REVISION_HASH, RUNNER};
use serde_json::{Value, json};

use super::render::{self, Terms};
use super::{MANAGER, WHO};
use crate::stand_in::migration::{Change, Event, Placement, World, with_condition};
use crate::support::api::{self, INFERENCE_REPLICA, INFERENCE_SERVICE, POD};
use crate::support::objects::{self, read};

const PREFERRED: &str = "preferredDuringSchedulingIgnoredDuringExecution";

/// The cluster as the surge's world.
pub struct Cluster {
    pub terms: Terms,
}

impl World for Cluster {
    /// The surge's pod from its replica's template for its runner (as upstream renders an
    /// Instance), under the name and labels the model gave it; OME's terms when they are on; the
    /// hint nodes preferred, as upstream weights them. The API server's admission does the rest
    /// when the pod is created.
    fn admit(&self, mut pod: Value, replica: &Value, hints: &[String]) -> Result<Value, String> {
        let runner = pod["metadata"]["labels"][RUNNER].clone();
        let runners = replica["spec"]["runners"].as_array().cloned().unwrap_or_default();
        let template = runners
            .iter()
            .find(|r| r["name"] == runner && r["template"]["spec"].is_object());
        if let Some(template) = template {
            pod["spec"] = template["template"]["spec"].clone();
            pod["metadata"]["labels"][REVISION_HASH] = json!(render::revision_hash(replica));
        }
        pod["apiVersion"] = json!("v1");
        pod["kind"] = json!("Pod");
        pod.as_object_mut().map(|p| p.remove("status"));
        if self.terms == Terms::InTree {
            render::in_tree_terms(&mut pod, replica);
        }
        if !hints.is_empty() {
            let preferred = json!({"weight": 100, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": hints}]}});
            let path = ["spec", "affinity", "nodeAffinity", PREFERRED];
            match render::slot(&mut pod, &path) {
                Some(Value::Array(terms)) => terms.push(preferred),
                Some(terms) => *terms = json!([preferred]),
                // A malformed affinity is the API server's to refuse.
                None => {}
            }
        }
        Ok(pod)
    }

    /// Placed when kube-scheduler has bound every pod, Ready when kwok has started them; until then, what the scheduler said of the first pod it has not placed.
    fn place(&self, surge: &[&Value], _: &[Value], _: &[String]) -> Placement {
        let waiting = |why: String| Placement::Waiting { why, bound: Vec::new() };
        if surge.is_empty() {
            return waiting("its pods were not created".into());
        }
        for pod in surge {
            let name = objects::name(pod);
            if pod["spec"]["nodeName"].is_null() {
                let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
                let scheduled = conditions.iter().find(|c| c["type"] == "PodScheduled");
                let why = scheduled
                    .and_then(|c| c["message"].as_str())
                    .map_or_else(|| format!("pod {name} not placed yet"), str::to_owned);
                return waiting(why);
            }
            if !read(pod).is_ready() {
                let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
                return waiting(format!("pod {name} on {node} not Ready yet"));
            }
        }
        Placement::Ready(Vec::new())
    }
}

/// The model's changes, written as OME writes them, each logged; a failure is logged and the
/// model, reading the cluster again, asks again. The records first: a stand-in stopped between
/// two writes leaves a record that says what it was doing (a surge whose pods it never created
/// fails at its deadline), never a surge pod that no record names (a restart would surge again).
pub async fn apply(client: &Client, changes: Vec<Change>) {
    let (mut changes, rest): (Vec<Change>, Vec<Change>) =
        changes.into_iter().partition(|c| matches!(c, Change::Records(..)));
    changes.extend(rest);
    for change in changes {
        let outcome = match &change {
            Change::Unannotated((namespace, service), key) => {
                let patch = json!({"metadata": {"annotations": {key: null}}});
                api::merge(client, INFERENCE_SERVICE, (namespace, service), &patch, MANAGER, false)
                    .await
                    .map(|()| format!("InferenceService {namespace}/{service}: request {key} taken"))
            }
            Change::Records((namespace, replica), migrations) => {
                let patch = json!({"status": {"migrations": migrations}});
                let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
                let records = migrations.as_array().into_iter().flatten();
                let phases: Vec<String> = records
                    .map(|r| format!("{} {}", text(&r["requestUUID"]), text(&r["phase"])))
                    .collect();
                let phases = phases.join(", ");
                let said = format!("InferenceReplica {namespace}/{replica} migrations: {phases}");
                let merged = api::merge(client, INFERENCE_REPLICA, (namespace, replica), &patch, MANAGER, true).await;
                merged.map(|()| said)
            }
            Change::Condition((namespace, replica), condition) => {
                write_condition(client, namespace, replica, condition).await
            }
            Change::Pod(pod) => {
                let (namespace, name) = api::identity(pod);
                match api::create(client, POD, pod).await {
                    Err(e) if e.code() == Some(409) => Ok(format!("surge pod {namespace}/{name} is there already")),
                    created => created.map(|()| format!("surge pod {namespace}/{name} created")),
                }
            }
            Change::PodDeleted((namespace, name)) => api::delete(client, POD, (namespace, name), None)
                .await
                .map(|()| format!("pod {namespace}/{name} drained (deleted)")),
        };
        match outcome {
            Ok(line) => api::log(WHO, line),
            Err(e) => api::log(WHO, format!("{change:?} failed: {e}")),
        }
    }
}

/// One condition of a replica, in its type's place among those stored (the ome-spread
/// controller's `Spread` kept), guarded by the resourceVersion read: a conflict is logged, and
/// the model, reading the cluster again, asks again.
async fn write_condition(
    client: &Client,
    namespace: &str,
    replica: &str,
    condition: &Value,
) -> Result<String, api::ApiError> {
    let Some(stored) = api::get(client, INFERENCE_REPLICA, namespace, replica).await? else {
        return Ok(format!("InferenceReplica {namespace}/{replica} is gone: no condition"));
    };
    let conditions = with_condition(&stored["status"]["conditions"], condition.clone());
    let patch = json!({"metadata": {"resourceVersion": stored["metadata"]["resourceVersion"]},
        "status": {"conditions": conditions}});
    let kind = condition["type"].as_str().unwrap_or_default();
    let status = condition["status"].as_str().unwrap_or_default();
    let said = format!("InferenceReplica {namespace}/{replica} {kind}: {status}");
    let merged = api::merge(client, INFERENCE_REPLICA, (namespace, replica), &patch, MANAGER, true).await;
    merged.map(|()| said)
}

/// An Event OME records on the InferenceService, as a core/v1 Event.
pub async fn record_event(client: &Client, event: &Event, objects: &[Value]) {
    let service = objects
        .iter()
        .find(|o| o["kind"] == "InferenceService" && o["metadata"]["name"] == event.service);
    let Some(service) = service else {
        let said = format!("event {} {}: {}", event.reason, event.service, event.message);
        return api::log(WHO, said);
    };
    let (namespace, name) = api::identity(service);
    let now = api::now();
    let warning = matches!(event.reason, "MigrationFailed" | "MigrationPolicyUnconfigured");
    let kind = if warning { "Warning" } else { "Normal" };
    let record = json!({"apiVersion": "v1", "kind": "Event",
        "metadata": {"name": format!("{name}.{:x}", jiff::Timestamp::now().as_nanosecond()), "namespace": namespace},
        "involvedObject": {"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": name,
            "namespace": namespace, "uid": service["metadata"]["uid"]},
        "reason": event.reason, "message": event.message, "type": kind,
        "source": {"component": MANAGER}, "reportingComponent": MANAGER, "reportingInstance": MANAGER,
        "firstTimestamp": now.to_string(), "lastTimestamp": now.to_string(), "count": 1});
    let said = match api::create(client, api::EVENT, &record).await {
        Ok(()) => format!("event {} on {namespace}/{name}: {}", event.reason, event.message),
        Err(e) => format!("event {} on {namespace}/{name} not recorded: {e}", event.reason),
    };
    api::log(WHO, said);
}
