//! The rules of SPEC section 3, P5 to P10 and P12: which term, if any, an OMENative pod gets.
//! The leader (or only pod) of an Instance carries the spread constraint; a worker carries the
//! pod affinity that keeps it in its leader's domain. OME v1.3 renders these same terms itself,
//! on an Instance's older key while its live pods carry one: a term that selects exactly what
//! ours would is OME's, on whatever key, and a pod never gets a second.

use serde::Serialize;
use serde_json::Value;

use crate::labels;
use crate::pod::{InstanceLabels, Listed, Pod, REQUIRED_POD_AFFINITY, Runner, SPREAD_CONSTRAINTS};
use crate::rejection::Rejection;
use crate::settings::Settings;
use crate::spread::{Spread, SpreadSettings};

/// What the rules do to an OMENative pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<'a, 'p> {
    Unchanged(Unchanged),
    /// Append `term` to the pod's list at `path`.
    Append {
        path: &'static [&'static str],
        term: Term<'a>,
    },
    /// P12: add `fields` to OME's own constraint, the pod's text at `constraint`.
    Complete {
        constraint: &'p str,
        fields: Completion,
    },
}

/// What the settings add to OME's own constraint where it has none (P12).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    #[serde(skip_serializing_if = "Option::is_none")]
    min_domains: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node_taints_policy: Option<&'static str>,
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
pub struct Selector<'a> {
    match_labels: MatchLabels<'a>,
}

impl Selector<'_> {
    /// Whether `term`'s labelSelector selects exactly these labels: its matchLabels are these,
    /// no more and no fewer, and it has no matchExpressions. That is how OME's own term is told
    /// from an operator's.
    pub fn is_exactly_in(&self, term: &Value) -> bool {
        let selector = &term["labelSelector"];
        let no_expressions = match selector.get("matchExpressions") {
            None | Some(Value::Null) => true,
            Some(Value::Array(expressions)) => expressions.is_empty(),
            Some(_) => false,
        };
        let ours = self.match_labels.pairs();
        let present = selector["matchLabels"].as_object();
        no_expressions
            && present.is_some_and(|labels| {
                labels.len() == ours.len()
                    && ours
                        .iter()
                        .all(|(label, value)| labels.get(*label) == Some(&Value::from(*value)))
            })
    }
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

impl MatchLabels<'_> {
    fn pairs(&self) -> Vec<(&'static str, &str)> {
        let mut pairs = vec![
            (labels::INFERENCE_SERVICE, self.service),
            (labels::COMPONENT, self.component),
        ];
        pairs.extend(self.instance_index.map(|index| (labels::INSTANCE_INDEX, index)));
        pairs.push((labels::RUNNER, self.runner));
        pairs
    }
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
    /// P6: a constraint of the pod already uses the spread key (the operator's or OME's wins),
    /// or OME's own is there on another key; P12 has nothing to add.
    SpreadConstraintKept,
    /// A worker whose replica has no `topologyKey`.
    NoTopologyKey,
    /// P9: a required pod-affinity term of the pod already uses the topology key, or OME's own
    /// term for the Instance's leader is there on another key.
    PodAffinityKept,
}

/// P5 to P10 and P12 for a pod whose labels and replica have been read and checked.
pub fn decide<'a, 'p>(
    pod: &Pod<'p>,
    instance: &'a InstanceLabels,
    replica: &'a SpreadSettings,
    settings: &Settings,
) -> Result<Decision<'a, 'p>, Rejection> {
    match &instance.runner {
        Runner::Default | Runner::Leader => {
            let (Some(spread), Some(key)) = (replica.spread, replica.domain_key()) else {
                return Ok(Decision::Unchanged(Unchanged::NoSpread));
            };
            let constraint = spread_constraint(instance, spread, key, settings);
            let present = pod.spread_constraints()?;
            let own_on_key = present
                .iter()
                .find(|c| c.topology_key() == key && constraint.label_selector.is_exactly_in(&c.value));
            if let Some(own) = own_on_key {
                return Ok(match completion(&own.value, settings) {
                    Some(fields) => Decision::Complete {
                        constraint: own.text,
                        fields,
                    },
                    None => Decision::Unchanged(Unchanged::SpreadConstraintKept),
                });
            }
            if present.iter().any(|c| is_kept(c, key, &constraint.label_selector)) {
                return Ok(Decision::Unchanged(Unchanged::SpreadConstraintKept));
            }
            Ok(Decision::Append {
                path: &SPREAD_CONSTRAINTS,
                term: Term::Spread(constraint),
            })
        }
        Runner::Worker { instance_index } => {
            let Some(key) = replica.topology_key.as_deref() else {
                return Ok(Decision::Unchanged(Unchanged::NoTopologyKey));
            };
            let term = leader_affinity(instance, instance_index, key);
            let present = pod.required_pod_affinity()?;
            if present.iter().any(|t| is_kept(t, key, &term.label_selector)) {
                return Ok(Decision::Unchanged(Unchanged::PodAffinityKept));
            }
            Ok(Decision::Append {
                path: &REQUIRED_POD_AFFINITY,
                term: Term::Affinity(term),
            })
        }
    }
}

/// P6, P9: a term present on the key (anyone's), or OME's own for this pod on any key.
fn is_kept(present: &Listed, key: &str, ours: &Selector) -> bool {
    present.topology_key() == key || ours.is_exactly_in(&present.value)
}

/// P12: the settings' `nodeTaintsPolicy` where OME's own `constraint` has none, and `minDomains`
/// where it has none and is `DoNotSchedule`; None when there is nothing to add. A field present
/// (even as null) is never written again.
pub fn completion(constraint: &Value, settings: &Settings) -> Option<Completion> {
    let lacks = |field: &str| constraint.get(field).is_none();
    let fields = Completion {
        min_domains: settings
            .min_domains
            .filter(|_| lacks("minDomains") && constraint["whenUnsatisfiable"] == "DoNotSchedule"),
        node_taints_policy: settings
            .node_taints_policy
            .filter(|_| lacks("nodeTaintsPolicy"))
            .map(|policy| policy.as_str()),
    };
    (fields.min_domains.is_some() || fields.node_taints_policy.is_some()).then_some(fields)
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

impl<'a> SpreadConstraint<'a> {
    /// The Instances it counts, which tell OME's own constraint from an operator's.
    pub fn selector(&self) -> &Selector<'a> {
        &self.label_selector
    }

    pub fn when_unsatisfiable(&self) -> &'static str {
        self.when_unsatisfiable
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
        let preferred =
            serde_json::to_value(spread_constraint(&instance, Spread::Preferred, "zone", &settings)).expect("json");
        assert_eq!(preferred.get("minDomains"), None, "minDomains only with DoNotSchedule");
        assert_eq!(
            serde_json::to_value(leader_affinity(&instance, "3", "rack")).expect("json"),
            json!({"topologyKey": "rack", "labelSelector": {"matchLabels": {
                labels::INFERENCE_SERVICE: "m", labels::COMPONENT: "engine", labels::INSTANCE_INDEX: "3", labels::RUNNER: "leader"}}})
        );
    }
}
