//! The policy's answer to one pod, as the policy-server would give it: the request is built as
//! the API server sends a Pod CREATE, and the one host call is answered from the pasted objects.

use std::cell::RefCell;

use ome_spread::admission::{self, Outcome};
use ome_spread_core::diagnosis::settings_in_effect;
use ome_spread_core::explain::{Objects, items};
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::ome::{InferenceService, named, namespace};
use ome_spread_core::replica::{DEFAULT_NAMESPACE, ReplicaRef, namespace_of};
use serde_json::{Value, json};
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
    // As pasted: the host answers with a replica as it stands, as the API server would.
    let objects: Vec<Value> = input::documents(objects, "objects")?
        .into_iter()
        .flat_map(items)
        .collect();
    let of_kind = |kind: &'static str| objects.iter().filter(move |o| o["kind"] == kind);
    // A pod without a namespace (generateName) is created in the namespace of its objects.
    let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_else(|| {
        let owners = of_kind("InferenceReplica").chain(of_kind("InferenceService"));
        owners.map(namespace_of).next().unwrap_or(DEFAULT_NAMESPACE)
    });
    // What the pasted objects lack to make the pod's replica is the user's to fix, not the
    // policy's answer: said instead of it.
    let unusable = RefCell::new(None);
    let admission = admission::admit(namespace, pod.clone(), &settings, |wanted| {
        host(&objects, wanted)
            .inspect_err(|why| *unusable.borrow_mut() = Some(why.clone()))?
            .map(|replica| replica.to_string().into_bytes())
            .ok_or_else(|| {
                format!(
                    "Cannot find ome.io/v1beta1/InferenceReplica named '{}' inside of namespace 'Some(\"{}\")'",
                    wanted.name, wanted.namespace
                )
            })
    });
    if let Some(why) = unusable.into_inner() {
        return Err(why);
    }
    let (accepted, message, mutated) = match &admission.outcome {
        Outcome::Unchanged(_) => (true, None, None),
        Outcome::Mutated(mutated) => (true, None, Some(mutated)),
        Outcome::Rejected(rejection) => (false, Some(rejection.to_string()), None),
    };
    let after = mutated.unwrap_or(&pod);
    let patch = json_patch::diff(&pod, after);
    Ok(json!({
        "accepted": accepted,
        "message": message,
        "warnings": admission.warning.into_iter().collect::<Vec<_>>(),
        "mutated": mutated.is_some(),
        "pod": after,
        "lines": lines(&pod, after)?,
        "patch": patch,
    }))
}

/// The host call `get_resource` for the pod's InferenceReplica: the one pasted, else the one OME
/// would make for an OMENative InferenceService pasted (M1), else none (the host's not found,
/// worded as kwctl words it, above). An error names what the pasted objects lack.
fn host(objects: &[Value], wanted: &ReplicaRef) -> Result<Option<Value>, String> {
    let pasted = objects.iter().find(|o| {
        o["kind"] == "InferenceReplica" && namespace_of(o) == wanted.namespace && o["metadata"]["name"] == *wanted.name
    });
    if let Some(replica) = pasted {
        return Ok(Some(replica.clone()));
    }
    let objects = input::read(objects.to_vec())?;
    for service in (objects.parts.services.iter()).filter(|s| namespace(*s) == wanted.namespace) {
        let name = service.metadata.name.clone().unwrap_or_default();
        let component = COMPONENTS
            .into_iter()
            .find(|c| ReplicaRef::for_component(&wanted.namespace, &name, c).name == wanted.name);
        if let (Some(component), true) = (component, service.on_omenative()) {
            return projected(&objects, service, component);
        }
    }
    Ok(None)
}

/// The replica OME makes for `component` of `service`: the settings in effect projected onto its
/// spec; None when neither the service nor its runtime configures the component.
fn projected(objects: &Objects, service: &InferenceService, component: &str) -> Result<Option<Value>, String> {
    let runtime = match service.runtime() {
        None => None,
        Some(reference) => Some(objects.runtime_of(service).ok_or_else(|| {
            let (kind, name) = (reference.kind(), reference.name());
            format!(
                "objects: {} spec.runtime names {kind} {name}, which is not among them: paste it too",
                named(service)
            )
        })?),
    };
    let configured = service.component(component).is_some() || runtime.is_some_and(|r| r.config(component).is_some());
    if !configured {
        return Ok(None);
    }
    let in_effect = settings_in_effect(service, runtime, component).map_err(|e| e.to_string())?;
    let mut spec = json!({"component": component, "topologySpread": in_effect.spread.map(|s| s.as_str()),
        "topologySpreadKey": in_effect.spread_key, "topologyKey": in_effect.topology_key});
    // A field not in effect is not projected.
    spec.as_object_mut()
        .expect("an object")
        .retain(|_, value| !value.is_null());
    let (namespace, name) = (namespace(service), service.metadata.name.clone().unwrap_or_default());
    let name = ReplicaRef::for_component(namespace, &name, component).name;
    Ok(Some(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": name, "namespace": namespace}, "spec": spec})))
}

/// The pod after the policy, as YAML lines, each marked when the policy added or changed it.
fn lines(before: &Value, after: &Value) -> Result<Vec<Value>, String> {
    let yaml = |pod: &Value| serde_saphyr::to_string(pod).map_err(|e| format!("the pod as YAML: {e}"));
    let (before, after) = (yaml(before)?, yaml(after)?);
    Ok(TextDiff::from_lines(&before, &after)
        .iter_all_changes()
        .filter(|change| change.tag() != ChangeTag::Delete)
        .map(
            |change| json!({"text": change.value().trim_end_matches('\n'), "added": change.tag() == ChangeTag::Insert}),
        )
        .collect())
}
