//! The rules of SPEC section 3, P5 to P10: which term, if any, an OMENative pod gets.
//! The leader (or only pod) of an Instance carries the spread constraint; a worker carries the
//! pod affinity that keeps it in its leader's domain.

use serde_json::{Value, json};

use crate::labels;
use crate::pod::{InstanceLabels, Pod, REQUIRED_POD_AFFINITY, Runner, SPREAD_CONSTRAINTS};
use crate::rejection::Rejection;
use crate::settings::Settings;
use crate::spread::{Spread, SpreadSettings};

/// What the rules do to an OMENative pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Unchanged(Unchanged),
    /// Append `term` to the pod's list at `path`.
    Append {
        path: &'static [&'static str],
        term: Value,
    },
}

/// Why a request passes as it came.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unchanged {
    /// P1: not a CREATE of a core/v1 Pod.
    NotPodCreate,
    /// P2: no `ome.io/managed-by: OMENative`.
    NotOmeNative,
    /// P3 with `onMissingReplica: Accept`.
    ReplicaUnreadable,
    /// P7: `topologySpread` unset, or no key to spread on.
    NoSpread,
    /// P6: a constraint of the pod already uses the spread key; the operator's wins.
    SpreadConstraintKept,
    /// A worker whose replica has no `topologyKey`.
    NoTopologyKey,
    /// P9: a required pod-affinity term of the pod already uses the topology key.
    PodAffinityKept,
}

/// P5 to P10 for a pod whose labels and replica have been read and checked.
pub fn decide(
    pod: &Pod,
    instance: &InstanceLabels,
    replica: &SpreadSettings,
    settings: &Settings,
) -> Result<Decision, Rejection> {
    match &instance.runner {
        Runner::Default | Runner::Leader => {
            let (Some(spread), Some(key)) = (replica.spread, replica.domain_key()) else {
                return Ok(Decision::Unchanged(Unchanged::NoSpread));
            };
            if pod.has_spread_constraint_on(key)? {
                return Ok(Decision::Unchanged(Unchanged::SpreadConstraintKept));
            }
            Ok(Decision::Append {
                path: &SPREAD_CONSTRAINTS,
                term: spread_constraint(instance, spread, key, settings),
            })
        }
        Runner::Worker { instance_index } => {
            let Some(key) = replica.topology_key.as_deref() else {
                return Ok(Decision::Unchanged(Unchanged::NoTopologyKey));
            };
            if pod.has_required_pod_affinity_on(key)? {
                return Ok(Decision::Unchanged(Unchanged::PodAffinityKept));
            }
            Ok(Decision::Append {
                path: &REQUIRED_POD_AFFINITY,
                term: leader_affinity(instance, instance_index, key),
            })
        }
    }
}

/// P5: counts one pod per Instance (its leader or only pod), of every revision, per component.
pub fn spread_constraint(instance: &InstanceLabels, spread: Spread, key: &str, settings: &Settings) -> Value {
    let mut constraint = json!({
        "maxSkew": settings.max_skew,
        "topologyKey": key,
        "whenUnsatisfiable": spread.when_unsatisfiable(),
        "labelSelector": {"matchLabels": {
            labels::INFERENCE_SERVICE: instance.service,
            labels::COMPONENT: instance.component,
            labels::RUNNER: instance.runner.as_str(),
        }},
    });
    if let (Some(min_domains), Spread::Required) = (settings.min_domains, spread) {
        constraint["minDomains"] = json!(min_domains);
    }
    if let Some(policy) = settings.node_taints_policy {
        constraint["nodeTaintsPolicy"] = json!(policy.as_str());
    }
    constraint
}

/// P8: keeps a worker in the domain of its own Instance's leader.
pub fn leader_affinity(instance: &InstanceLabels, instance_index: &str, key: &str) -> Value {
    json!({
        "topologyKey": key,
        "labelSelector": {"matchLabels": {
            labels::INFERENCE_SERVICE: instance.service,
            labels::COMPONENT: instance.component,
            labels::INSTANCE_INDEX: instance_index,
            labels::RUNNER: "leader",
        }},
    })
}
