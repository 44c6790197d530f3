//! The rules of docs/rules.md, P5 to P10 and P12: which term, if any, an OMENative pod gets.
//! The leader (or only pod) of an Instance carries the spread constraint; a worker carries the
//! pod affinity that keeps it in its leader's domain. OME v1.3 renders these same terms itself,
//! on an Instance's older key while its live pods carry one: a term that selects exactly what
//! ours would is OME's, on whatever key, and a pod never gets a second.

use serde::Serialize;
use serde_json::Value;

use crate::instance::{InstanceLabels, Runner};
use crate::settings::{NodeTaintsPolicy, Settings};
use crate::spread::{Spread, SpreadSettings};

/// What the rules do to an OMENative pod, given the terms already in the list they read.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<'a> {
    Unchanged(Unchanged),
    /// Append the term to its list.
    Append(Term<'a>),
    /// P12: add `fields` to OME's own constraint, the list's term at `index`.
    Complete {
        index: usize,
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
    node_taints_policy: Option<NodeTaintsPolicy>,
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
    pub(crate) when_unsatisfiable: &'static str,
    pub(crate) label_selector: Selector<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_domains: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    node_taints_policy: Option<NodeTaintsPolicy>,
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
        let expressions = &selector["matchExpressions"];
        let no_expressions = expressions.is_null() || expressions.as_array().is_some_and(Vec::is_empty);
        // JSON objects are equal whatever the order of their fields.
        no_expressions && serde_json::to_value(&self.match_labels).is_ok_and(|ours| selector["matchLabels"] == ours)
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

/// P5, P7, P8, P10: the term a pod's runner and its replica's settings in effect call for, or why
/// there is none. The pod's own terms are read next, from the term's list, for [`decide`].
pub fn wanted<'a>(
    instance: &'a InstanceLabels,
    replica: &'a SpreadSettings,
    settings: &Settings,
) -> Result<Term<'a>, Unchanged> {
    match &instance.runner {
        Runner::Default | Runner::Leader => match (replica.spread, replica.domain_key()) {
            (Some(spread), Some(key)) => Ok(Term::Spread(spread_constraint(instance, spread, key, settings))),
            _ => Err(Unchanged::NoSpread),
        },
        Runner::Worker { instance_index } => match replica.topology_key.as_deref() {
            Some(key) => Ok(Term::Affinity(leader_affinity(instance, instance_index, key))),
            None => Err(Unchanged::NoTopologyKey),
        },
    }
}

/// P6, P9, P12: what becomes of the wanted `term` beside the terms `present` in its list (each
/// with a string `topologyKey`). A term on the same key is kept, whoever wrote it; so is OME's own
/// (the same selector exactly) on any key; OME's own constraint on the key is completed.
pub fn decide<'a>(term: Term<'a>, present: &[&Value], settings: &Settings) -> Decision<'a> {
    let (key, ours, kept) = match &term {
        Term::Spread(term) => (term.topology_key, &term.label_selector, Unchanged::SpreadConstraintKept),
        Term::Affinity(term) => (term.topology_key, &term.label_selector, Unchanged::PodAffinityKept),
    };
    let on_key = |t: &Value| t["topologyKey"] == key;
    if let Term::Spread(_) = term
        && let Some(index) = present.iter().position(|c| on_key(c) && ours.is_exactly_in(c))
    {
        return match completion(present[index], settings) {
            Some(fields) => Decision::Complete { index, fields },
            None => Decision::Unchanged(kept),
        };
    }
    if present.iter().any(|t| on_key(t) || ours.is_exactly_in(t)) {
        return Decision::Unchanged(kept);
    }
    Decision::Append(term)
}

impl Term<'_> {
    /// Where the list the term goes into stands in a pod: the list whose terms [`decide`] reads.
    pub fn path(&self) -> &'static [&'static str] {
        match self {
            Self::Spread(_) => &["spec", "topologySpreadConstraints"],
            Self::Affinity(_) => &[
                "spec",
                "affinity",
                "podAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
            ],
        }
    }
}

/// P12: the settings' `nodeTaintsPolicy` where OME's own `constraint` has none, and `minDomains`
/// where it has none and is `DoNotSchedule`; None when there is nothing to add. A field present
/// (even as null) is never written again.
pub fn completion(constraint: &Value, settings: &Settings) -> Option<Completion> {
    let lacks = |field: &str| constraint.get(field).is_none();
    let do_not_schedule = constraint["whenUnsatisfiable"] == "DoNotSchedule";
    let min_domains = settings.min_domains.filter(|_| lacks("minDomains") && do_not_schedule);
    let node_taints_policy = settings.node_taints_policy.filter(|_| lacks("nodeTaintsPolicy"));
    (min_domains.is_some() || node_taints_policy.is_some()).then_some(Completion {
        min_domains,
        node_taints_policy,
    })
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
        label_selector: spread_selector(instance),
        min_domains: settings.min_domains.filter(|_| spread == Spread::Required),
        node_taints_policy: settings.node_taints_policy,
    }
}

/// The Instances P5's constraint counts: OME's own selector for them, exactly.
pub fn spread_selector<'a>(instance: &'a InstanceLabels) -> Selector<'a> {
    selector(instance, None, instance.runner.as_str())
}

/// P8: keeps a worker in the domain of its own Instance's leader.
pub fn leader_affinity<'a>(instance: &'a InstanceLabels, instance_index: &'a str, key: &'a str) -> LeaderAffinity<'a> {
    let label_selector = selector(instance, Some(instance_index), "leader");
    LeaderAffinity {
        topology_key: key,
        label_selector,
    }
}

/// OME's selector of the Instance's `runner` pods, or of one Instance's.
fn selector<'a>(instance: &'a InstanceLabels, instance_index: Option<&'a str>, runner: &'static str) -> Selector<'a> {
    let (service, component) = (instance.service, instance.component);
    let match_labels = MatchLabels {
        service,
        component,
        instance_index,
        runner,
    };
    Selector { match_labels }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn instance(runner: Runner) -> InstanceLabels<'static> {
        InstanceLabels {
            service: "m",
            component: "engine",
            runner,
        }
    }

    fn replica(spread: Option<Spread>, spread_key: Option<&str>, topology_key: Option<&str>) -> SpreadSettings {
        SpreadSettings {
            spread,
            spread_key: spread_key.map(Into::into),
            topology_key: topology_key.map(Into::into),
        }
    }

    /// OME's own constraint for runner `runner` of `m`'s engine, on `key`.
    fn omes(runner: &str, key: &str, when: &str) -> Value {
        json!({"maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "m", "component": "engine", "ome.io/runner": runner}}})
    }

    fn leader_of(index: &str, key: &str) -> Value {
        json!({"topologyKey": key, "labelSelector": {"matchLabels": {
            "ome.io/inferenceservice": "m", "component": "engine", "ome.io/instance-index": index, "ome.io/runner": "leader"}}})
    }

    /// The decision as JSON: `{"unchanged": why}`, `{"append": term}` or `{"complete": [index, fields]}`.
    fn decided(runner: Runner, replica: &SpreadSettings, settings: &Settings, present: &[Value]) -> Value {
        let instance = instance(runner);
        let term = match wanted(&instance, replica, settings) {
            Ok(term) => term,
            Err(why) => return json!({"unchanged": format!("{why:?}")}),
        };
        let present: Vec<&Value> = present.iter().collect();
        match decide(term, &present, settings) {
            Decision::Unchanged(why) => json!({"unchanged": format!("{why:?}")}),
            Decision::Append(term) => json!({"append": term}),
            Decision::Complete { index, fields } => json!({"complete": [index, fields]}),
        }
    }

    #[test]
    fn terms_are_written_with_omes_label_keys_in_omes_order() {
        let settings = Settings {
            min_domains: Some(2),
            ..Settings::default()
        };
        let leader = instance(Runner::Leader);
        let constraint = spread_constraint(&leader, Spread::Required, "zone", &settings);
        assert_eq!(
            serde_json::to_string(&constraint).expect("json"),
            r#"{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"ome.io/inferenceservice":"m","component":"engine","ome.io/runner":"leader"}},"minDomains":2}"#
        );
        assert_eq!(
            serde_json::to_string(&leader_affinity(&leader, "3", "rack")).expect("json"),
            r#"{"topologyKey":"rack","labelSelector":{"matchLabels":{"ome.io/inferenceservice":"m","component":"engine","ome.io/instance-index":"3","ome.io/runner":"leader"}}}"#
        );
    }

    type Case<'s> = (&'s str, Runner, SpreadSettings, &'s Settings, Vec<Value>, Value);

    fn check(cases: Vec<Case>) {
        for (name, runner, replica, settings, present, expected) in cases {
            assert_eq!(decided(runner, &replica, settings, &present), expected, "{name}");
        }
    }

    /// Settings that complete a constraint: minDomains and nodeTaintsPolicy.
    fn completing() -> Settings {
        Settings {
            min_domains: Some(3),
            node_taints_policy: Some(crate::settings::NodeTaintsPolicy::Honor),
            ..Settings::default()
        }
    }

    fn zone() -> SpreadSettings {
        replica(Some(Spread::Required), Some("zone"), Some("rack"))
    }

    fn worker() -> Runner {
        Runner::Worker {
            instance_index: "0".into(),
        }
    }

    #[test]
    fn p5_and_p7_a_pod_gets_omes_constraint_when_a_spread_and_a_key_are_set() {
        let none = Settings::default();
        let completing = completing();
        check(vec![
            (
                "p5 leader gets the constraint",
                Runner::Leader,
                zone(),
                &none,
                vec![],
                json!({"append": omes("leader", "zone", "DoNotSchedule")}),
            ),
            (
                "p5 settings shape it",
                Runner::Default,
                zone(),
                &completing,
                vec![],
                json!({"append": {
                "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "m", "component": "engine", "ome.io/runner": "default"}},
                "minDomains": 3, "nodeTaintsPolicy": "Honor"}}),
            ),
            (
                "p5 preferred, spread key from the topology key",
                Runner::Default,
                replica(Some(Spread::Preferred), None, Some("rack")),
                &none,
                vec![],
                json!({"append": omes("default", "rack", "ScheduleAnyway")}),
            ),
            (
                "p7 no spread",
                Runner::Leader,
                replica(None, Some("zone"), None),
                &none,
                vec![],
                json!({"unchanged": "NoSpread"}),
            ),
            (
                "p7 no key",
                Runner::Default,
                replica(Some(Spread::Required), None, None),
                &none,
                vec![],
                json!({"unchanged": "NoSpread"}),
            ),
        ]);
    }

    #[test]
    fn p6_a_constraint_on_the_key_is_kept() {
        let none = Settings::default();
        let completing = completing();
        check(vec![
            (
                "p6 anyone's constraint on the key",
                Runner::Leader,
                zone(),
                &completing,
                vec![json!({"topologyKey": "zone", "labelSelector": {"matchLabels": {"app": "x"}}})],
                json!({"unchanged": "SpreadConstraintKept"}),
            ),
            (
                "p6 OME's own on an older key",
                Runner::Leader,
                zone(),
                &completing,
                vec![omes("leader", "old", "DoNotSchedule")],
                json!({"unchanged": "SpreadConstraintKept"}),
            ),
            (
                "p6 another runner's is not this pod's",
                Runner::Leader,
                zone(),
                &none,
                vec![omes("default", "old", "DoNotSchedule")],
                json!({"append": omes("leader", "zone", "DoNotSchedule")}),
            ),
        ]);
    }

    #[test]
    fn p8_to_p10_a_worker_gets_its_leaders_rack() {
        let none = Settings::default();
        let completing = completing();
        check(vec![
            (
                "p8 worker gets its leader's term",
                worker(),
                zone(),
                &completing,
                vec![],
                json!({"append": leader_of("0", "rack")}),
            ),
            (
                "p9 anyone's term on the key",
                worker(),
                zone(),
                &none,
                vec![json!({"topologyKey": "rack"})],
                json!({"unchanged": "PodAffinityKept"}),
            ),
            (
                "p9 OME's own on an older key",
                worker(),
                zone(),
                &none,
                vec![leader_of("0", "old")],
                json!({"unchanged": "PodAffinityKept"}),
            ),
            (
                "p9 another Instance's leader does not count",
                worker(),
                zone(),
                &none,
                vec![leader_of("1", "old")],
                json!({"append": leader_of("0", "rack")}),
            ),
            (
                "p10 worker without topologyKey",
                worker(),
                replica(Some(Spread::Required), Some("zone"), None),
                &none,
                vec![],
                json!({"unchanged": "NoTopologyKey"}),
            ),
        ]);
    }

    #[test]
    fn p12_omes_own_constraint_is_completed_never_rewritten() {
        let none = Settings::default();
        let completing = completing();
        check(vec![
            (
                "p12 completes OME's own on the key",
                Runner::Leader,
                zone(),
                &completing,
                vec![json!({"topologyKey": "a"}), omes("leader", "zone", "DoNotSchedule")],
                json!({"complete": [1, {"minDomains": 3, "nodeTaintsPolicy": "Honor"}]}),
            ),
            (
                "p12 never minDomains on ScheduleAnyway",
                Runner::Leader,
                zone(),
                &completing,
                vec![omes("leader", "zone", "ScheduleAnyway")],
                json!({"complete": [0, {"nodeTaintsPolicy": "Honor"}]}),
            ),
            (
                "p12 nothing it sets is rewritten",
                Runner::Leader,
                zone(),
                &completing,
                vec![{
                    let mut set = omes("leader", "zone", "DoNotSchedule");
                    set["minDomains"] = json!(null);
                    set["nodeTaintsPolicy"] = json!("Ignore");
                    set
                }],
                json!({"unchanged": "SpreadConstraintKept"}),
            ),
            (
                "p12 without settings, OME's own is kept",
                Runner::Leader,
                zone(),
                &none,
                vec![omes("leader", "zone", "DoNotSchedule")],
                json!({"unchanged": "SpreadConstraintKept"}),
            ),
        ]);
    }
}
