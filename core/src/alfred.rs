//! What OME's caretaker Alfred refuses (docs/rules.md, on `maxSkew` and Alfred). Its
//! `validateObservedTopology` (OME v1.3, `pkg/alfred/scheduling/input/relocation.go`) takes every
//! spread constraint whose selector is exactly OME's three labels for OME's own, and refuses to
//! simulate or relocate an Instance whose anchor pod carries one with a `maxSkew` other than 1
//! ("configured topology spread does not match observed Pod constraints"). The policy writes its
//! constraint with that very selector, so a `maxSkew` setting other than 1, on the pods it
//! reaches, takes their Instances out of Alfred's hands.

use itertools::Itertools;
use serde_json::Value;

use crate::diagnosis::Component;
use crate::instance::anchor_labels;
use crate::labels;
use crate::ome::InferenceReplica;
use crate::pod::Pod;
use crate::rules::spread_selector;
use crate::shown::shown;

/// What `explain` notes of Alfred for the component: an empty key on its replica first (it refuses
/// every Instance), then the Instances it refuses for their `maxSkew`.
pub fn remarks(component: &Component) -> Vec<String> {
    let remarks = [empty_key(component.replica), refused(component)];
    remarks.into_iter().flatten().collect()
}

/// Alfred's checks of the replica's keys, in its order: a `topologyKey` of `""` ("configured
/// topology key is empty"); a `topologySpreadKey` of `""` with `topologySpread` set, which
/// Alfred reads as no spread key where OME's render falls back to `topologyKey` (docs/rules.md,
/// Empty keys).
fn empty_key(replica: &InferenceReplica) -> Option<String> {
    let spread = &replica.spec.spread;
    let empty = |key: &Option<Value>| key.as_ref().is_some_and(|key| key == "");
    let why = if empty(&spread.topology_key) {
        "its replica's topologyKey is \"\" (\"configured topology key is empty\")"
    } else if empty(&spread.topology_spread_key) && spread.topology_spread.as_ref().is_some_and(|s| !s.is_null()) {
        "its replica's topologySpreadKey is \"\", which Alfred, unlike OME's render, does not take for topologyKey"
    } else {
        return None;
    };
    Some(format!(
        "Alfred will not simulate or relocate any Instance of this component: {why}."
    ))
}

/// What `explain` says of the component's anchor pods, in the pods' order, that carry a
/// constraint with OME's selector for their runner and a `maxSkew` other than 1; None when Alfred
/// refuses none.
fn refused(component: &Component) -> Option<String> {
    let refused = |pod: &&Pod| {
        let instance = anchor_labels(pod, component.service_name(), component.kind());
        let omes = spread_selector(&instance);
        let other = (pod.constraints().iter()).find(|c| omes.is_exactly_in(c) && c["maxSkew"] != 1)?;
        let index = pod.label(labels::INSTANCE_INDEX).unwrap_or_default();
        let max_skew = shown(&other["maxSkew"]);
        Some(format!("Instance {index} (pod {}, maxSkew {max_skew})", pod.name()))
    };
    let named = component.anchors.iter().filter_map(refused).join(", ");
    (!named.is_empty()).then(|| {
        format!(
            "Alfred will not simulate or relocate {named}: the anchor pod of each carries a spread constraint with OME's selector and a maxSkew other than 1 (\"configured topology spread does not match observed Pod constraints\")."
        )
    })
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::nodes::Nodes;
    use crate::ome::typed;

    fn pod(index: u32, runner: &str, constraints: Value) -> Pod {
        typed(&json!({"metadata": {"name": format!("s-engine-{index}-{runner}-0"),
            "labels": {"ome.io/inferenceservice": "s", "component": "engine", "ome.io/runner": runner,
                "ome.io/instance-index": index.to_string()}},
            "spec": {"topologySpreadConstraints": constraints}}))
    }

    fn constraint(max_skew: Value, labels: Value) -> Value {
        json!({"maxSkew": max_skew, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": labels}})
    }

    /// Alfred's test: the selector exactly OME's three labels for the pod's own runner, then
    /// maxSkew other than 1. An operator's selector, a worker, and maxSkew 1 are not refused.
    #[test]
    fn the_instances_alfred_refuses_are_those_whose_anchor_has_omes_selector_with_another_max_skew() {
        let omes =
            |runner: &str| json!({"ome.io/inferenceservice": "s", "component": "engine", "ome.io/runner": runner});
        let mut operators = omes("default");
        operators["team"] = json!("a");
        let pods = vec![
            pod(0, "default", json!([constraint(json!(1), omes("default"))])),
            pod(1, "default", json!([constraint(json!(2), omes("default"))])),
            pod(2, "default", json!([constraint(json!(2), operators)])),
            pod(3, "leader", json!([constraint(json!(3), omes("leader"))])),
            pod(3, "worker", json!([constraint(json!(2), omes("worker"))])),
            // OME's selector for another runner is not this pod's.
            pod(4, "default", json!([constraint(json!(2), omes("leader"))])),
        ];
        let (service, replica) = (
            json!({"metadata": {"name": "s"}, "spec": {}}),
            json!({"metadata": {"name": "s-engine"}, "spec": {"component": "engine"}}),
        );
        let nodes = Nodes::from_json(&[]).expect("readable");
        let (service, replica) = (typed(&service), typed(&replica));
        let component = Component::new(&service, None, &replica, &pods, &nodes);
        assert_eq!(
            refused(&component).as_deref(),
            Some(
                "Alfred will not simulate or relocate Instance 1 (pod s-engine-1-default-0, maxSkew 2), Instance 3 (pod s-engine-3-leader-0, maxSkew 3): the anchor pod of each carries a spread constraint with OME's selector and a maxSkew other than 1 (\"configured topology spread does not match observed Pod constraints\")."
            )
        );
        let none_refused = Component::new(&service, None, &replica, &pods[..1], &nodes);
        assert_eq!(refused(&none_refused), None);
    }

    /// Alfred's checks of the keys, in its order; `""` on a key OME's render reads as unset.
    #[test]
    fn an_empty_key_on_the_replica_takes_every_instance_out_of_alfreds_hands() {
        let refuses = "Alfred will not simulate or relocate any Instance of this component: ";
        let key_empty = format!("{refuses}its replica's topologyKey is \"\" (\"configured topology key is empty\").");
        let spread_key_empty = format!(
            "{refuses}its replica's topologySpreadKey is \"\", which Alfred, unlike OME's render, does not take for topologyKey."
        );
        for (spec, expected) in [
            (json!({"topologyKey": ""}), Some(key_empty.clone())),
            (
                json!({"topologyKey": "", "topologySpreadKey": "", "topologySpread": "Required"}),
                Some(key_empty),
            ),
            (
                json!({"topologySpreadKey": "", "topologySpread": "Preferred"}),
                Some(spread_key_empty.clone()),
            ),
            (
                json!({"topologyKey": "rack", "topologySpreadKey": "", "topologySpread": "Required"}),
                Some(spread_key_empty),
            ),
            // No spread asked: Alfred reads no spread key, and has nothing to refuse.
            (json!({"topologySpreadKey": ""}), None),
            (
                json!({"topologyKey": "rack", "topologySpreadKey": "zone", "topologySpread": "Required"}),
                None,
            ),
            (json!({}), None),
        ] {
            let mut replica = json!({"metadata": {"name": "r"}, "spec": spec});
            replica["spec"]["component"] = json!("engine");
            assert_eq!(empty_key(&typed(&replica)), expected, "{spec}");
        }
    }
}
