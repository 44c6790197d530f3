//! The rules of SPEC section 3, P5 to P10: which term, if any, an OMENative pod gets.
//! The leader (or only pod) of an Instance carries the spread constraint; a worker carries the
//! pod affinity that keeps it in its leader's domain.

use serde::Serialize;
use serde_json::Value;

use crate::pod::{InstanceLabels, Pod, REQUIRED_POD_AFFINITY, Runner, SPREAD_CONSTRAINTS};
use crate::rejection::Rejection;
use crate::settings::Settings;
use crate::spread::{Spread, SpreadSettings};

/// What the rules do to an OMENative pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<'a> {
    Unchanged(Unchanged),
    /// Append `term` to the pod's list at `path`.
    Append {
        path: &'static [&'static str],
        term: Term<'a>,
    },
}

/// A term a rule appends, as it is written into the pod.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Term<'a> {
    Spread(SpreadConstraint<'a>),
    Affinity(LeaderAffinity<'a>),
}

/// P5's topology spread constraint.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpreadConstraint<'a> {
    max_skew: i32,
    topology_key: &'a str,
    when_unsatisfiable: &'static str,
    label_selector: Selector<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_domains: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node_taints_policy: Option<&'static str>,
}

/// P8's required pod-affinity term.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LeaderAffinity<'a> {
    topology_key: &'a str,
    label_selector: Selector<'a>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
struct Selector<'a> {
    match_labels: MatchLabels<'a>,
}

/// The labels a term selects, in the order OME writes them.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct MatchLabels<'a> {
    #[serde(rename = "ome.io/inferenceservice")]
    service: &'a str,
    component: &'a str,
    #[serde(rename = "ome.io/instance-index", skip_serializing_if = "Option::is_none")]
    instance_index: Option<&'a str>,
    #[serde(rename = "ome.io/runner")]
    runner: &'static str,
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
pub fn decide<'a>(
    pod: &Pod,
    instance: &'a InstanceLabels,
    replica: &'a SpreadSettings,
    settings: &Settings,
) -> Result<Decision<'a>, Rejection> {
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
                term: Term::Spread(spread_constraint(instance, spread, key, settings)),
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
                term: Term::Affinity(leader_affinity(instance, instance_index, key)),
            })
        }
    }
}

/// P5: counts one pod per Instance (its leader or only pod), of every revision, per component.
pub fn spread_constraint<'a>(
    instance: &'a InstanceLabels,
    spread: Spread,
    key: &'a str,
    settings: &Settings,
) -> SpreadConstraint<'a> {
    SpreadConstraint {
        max_skew: settings.max_skew,
        topology_key: key,
        when_unsatisfiable: spread.when_unsatisfiable(),
        label_selector: Selector {
            match_labels: MatchLabels {
                service: &instance.service,
                component: &instance.component,
                instance_index: None,
                runner: instance.runner.as_str(),
            },
        },
        min_domains: settings.min_domains.filter(|_| spread == Spread::Required),
        node_taints_policy: settings.node_taints_policy.map(|policy| policy.as_str()),
    }
}

/// P8: keeps a worker in the domain of its own Instance's leader.
pub fn leader_affinity<'a>(instance: &'a InstanceLabels, instance_index: &'a str, key: &'a str) -> LeaderAffinity<'a> {
    LeaderAffinity {
        topology_key: key,
        label_selector: Selector {
            match_labels: MatchLabels {
                service: &instance.service,
                component: &instance.component,
                instance_index: Some(instance_index),
                runner: "leader",
            },
        },
    }
}

impl SpreadConstraint<'_> {
    /// As JSON, for the diagnosis to compare with what a pod carries.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels;
    use serde_json::json;

    #[test]
    fn terms_are_written_with_omes_label_keys_in_omes_order() {
        let instance = InstanceLabels {
            service: "m".into(),
            component: "engine".into(),
            runner: Runner::Leader,
        };
        let settings = Settings {
            min_domains: Some(2),
            ..Settings::default()
        };
        let constraint = spread_constraint(&instance, Spread::Required, "zone", &settings);
        assert_eq!(
            serde_json::to_string(&constraint).expect("json"),
            format!(
                r#"{{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{{"matchLabels":{{"{}":"m","{}":"engine","{}":"leader"}}}},"minDomains":2}}"#,
                labels::INFERENCE_SERVICE,
                labels::COMPONENT,
                labels::RUNNER
            )
        );
        let preferred = spread_constraint(&instance, Spread::Preferred, "zone", &settings).to_value();
        assert_eq!(preferred.get("minDomains"), None, "minDomains only with DoNotSchedule");
        assert_eq!(
            serde_json::to_value(leader_affinity(&instance, "3", "rack")).expect("json"),
            json!({"topologyKey": "rack", "labelSelector": {"matchLabels": {
                labels::INFERENCE_SERVICE: "m", labels::COMPONENT: "engine", labels::INSTANCE_INDEX: "3", labels::RUNNER: "leader"}}})
        );
    }
}
