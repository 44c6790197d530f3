//! The policy's answer to one pod, as the policy-server would give it: the request is built as
//! the API server sends a Pod CREATE, and the one host call is answered from the pasted objects.

use ome_spread::admission;
use ome_spread_core::diagnosis::settings_in_effect;
use ome_spread_core::explain::{Objects, namespace_of};
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::replica::ReplicaRef;
use serde_json::{Map, Value, json};
use similar::{ChangeTag, TextDiff};

use crate::input;

pub fn admit(objects: &str, pod: &str, settings: &str) -> Value {
    answer(objects, pod, settings).unwrap_or_else(|error| json!({ "error": error }))
}

fn answer(objects: &str, pod: &str, settings: &str) -> Result<Value, String> {
    let (settings, _) = input::settings(settings)?;
    let pod = input::object(pod, "pod")?;
    if pod["kind"] != "Pod" {
        return Err(format!(
            "pod: kind is {}: the policy sees Pods only; paste a Pod",
            pod["kind"]
        ));
    }
    let objects = Objects::new(input::documents(objects, "objects")?);
    let replicas = replicas(&objects)?;
    // A pod without a namespace (generateName) is created in the namespace of its objects.
    let namespace = pod["metadata"]["namespace"]
        .as_str()
        .or_else(|| replicas.first().map(namespace_of))
        .unwrap_or("default");
    let request = json!({
        "settings": settings,
        "request": {
            "uid": "playground",
            "kind": { "group": "", "version": "v1", "kind": "Pod" },
            "operation": "CREATE",
            "namespace": namespace,
            "object": pod,
        },
    });
    let payload = serde_json::to_vec(&request).map_err(|e| format!("the request: {e}"))?;
    let evaluation = admission::evaluate(&payload, |wanted| host(&replicas, wanted));
    let response: Value =
        serde_json::from_slice(&evaluation.response()).map_err(|e| format!("the policy's response: {e}"))?;
    let after = response.get("mutated_object").unwrap_or(&pod);
    let patch = json_patch::diff(&pod, after);
    Ok(json!({
        "accepted": response["accepted"],
        "message": response["message"],
        "warnings": response.get("warnings").cloned().unwrap_or_else(|| json!([])),
        "mutated": response.get("mutated_object").is_some(),
        "pod": after,
        "lines": lines(&pod, after)?,
        "patch": patch,
    }))
}

/// The host call `get_resource` for the pod's InferenceReplica, worded as kwctl's host words
/// its answers: the replica's JSON, or why there is none.
fn host(replicas: &[Value], wanted: &ReplicaRef) -> Result<Vec<u8>, String> {
    replicas
        .iter()
        .find(|r| r["metadata"]["name"] == wanted.name.as_str() && namespace_of(r) == wanted.namespace)
        .map(|replica| replica.to_string().into_bytes())
        .ok_or_else(|| {
            format!(
                "Cannot find ome.io/v1beta1/InferenceReplica named '{}' inside of namespace 'Some(\"{}\")'",
                wanted.name, wanted.namespace
            )
        })
}

/// The InferenceReplicas pasted, and for each OMENative InferenceService's engine and decoder
/// without one, the replica OME would make: the settings in effect projected onto its spec (M1).
fn replicas(objects: &Objects) -> Result<Vec<Value>, String> {
    let mut replicas: Vec<Value> = objects.of_kind("InferenceReplica", None).cloned().collect();
    for service in objects.of_kind("InferenceService", None) {
        if service["spec"]["deploymentMode"] != "OMENative" {
            continue;
        }
        let runtime = objects.runtime_of(service);
        let namespace = namespace_of(service);
        let name = service["metadata"]["name"].as_str().unwrap_or_default();
        for component in COMPONENTS {
            let configured = !service["spec"][component].is_null()
                || runtime.is_some_and(|r| !r["spec"][format!("{component}Config")].is_null());
            let replica = ReplicaRef::for_component(namespace, name, component).name;
            if !configured || objects.named("InferenceReplica", Some(namespace), &replica).is_some() {
                continue;
            }
            let in_effect = settings_in_effect(service, runtime, component).map_err(|e| e.to_string())?;
            let mut spec = Map::new();
            spec.insert("component".into(), component.into());
            let fields = [
                ("topologySpread", in_effect.spread.map(|s| s.as_str().to_owned())),
                ("topologySpreadKey", in_effect.spread_key),
                ("topologyKey", in_effect.topology_key),
            ];
            for (field, value) in fields {
                if let Some(value) = value {
                    spec.insert(field.into(), value.into());
                }
            }
            replicas.push(json!({
                "apiVersion": "ome.io/v1beta1",
                "kind": "InferenceReplica",
                "metadata": { "name": replica, "namespace": namespace },
                "spec": spec,
            }));
        }
    }
    Ok(replicas)
}

/// The pod after the policy, as YAML lines, each marked when the policy added or changed it.
fn lines(before: &Value, after: &Value) -> Result<Vec<Value>, String> {
    let yaml = |pod: &Value| serde_saphyr::to_string(pod).map_err(|e| format!("the pod as YAML: {e}"));
    let (before, after) = (yaml(before)?, yaml(after)?);
    Ok(TextDiff::from_lines(&before, &after)
        .iter_all_changes()
        .filter(|change| change.tag() != ChangeTag::Delete)
        .map(|change| {
            json!({
                "text": change.value().trim_end_matches('\n'),
                "added": change.tag() == ChangeTag::Insert,
            })
        })
        .collect())
}
