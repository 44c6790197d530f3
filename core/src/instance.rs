//! A pod's Instance, as OME's labels name it: its InferenceService, its component, and the pod's
//! place in it (the runner); the Instances of a component (their anchors, the leaders and only
//! pods), each Instance's workers, and the domain an Instance runs in.

use std::collections::HashMap;

use serde_json::Value;
use thiserror::Error;

use crate::labels;
use crate::nodes::Nodes;
use crate::pod::Pod;
use crate::shown::shown;

/// The components that get an InferenceReplica and may spread; the router has no spread fields.
pub const COMPONENTS: [&str; 2] = ["engine", "decoder"];

/// A pod's place in its Instance, from its OME labels.
#[derive(Debug, Clone, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "lowercase")]
pub enum Runner {
    /// The only pod of a single-pod Instance.
    Default,
    Leader,
    Worker {
        instance_index: String,
    },
}

impl Runner {
    pub fn as_str(&self) -> &'static str {
        self.into()
    }
}

/// The labels that name the pod's Instance: its InferenceService, component and runner (P11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceLabels<'a> {
    pub service: &'a str,
    pub component: &'a str,
    pub runner: Runner,
}

/// Why a pod's labels name no Instance (P11).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum BadLabel {
    #[error("label {0} is missing")]
    Missing(&'static str),
    /// `value` as a message shows it.
    #[error("label {label} is {value}: {why}")]
    Invalid {
        label: &'static str,
        value: String,
        why: &'static str,
    },
}

impl<'a> InstanceLabels<'a> {
    /// P11: the labels a rule needs, present and well formed. `label` gives a label's value, None
    /// where the pod has none, or why it cannot be read; each label is asked for only when needed.
    pub fn read(label: impl Fn(&'static str) -> Result<Option<&'a str>, BadLabel>) -> Result<Self, BadLabel> {
        let required = |name| label(name)?.ok_or(BadLabel::Missing(name));
        let invalid = |label, value: &str, why| BadLabel::Invalid {
            label,
            value: shown(&Value::from(value)),
            why,
        };
        let runner = match required(labels::RUNNER)? {
            "default" => Runner::Default,
            "leader" => Runner::Leader,
            "worker" => match required(labels::INSTANCE_INDEX)? {
                index if (1..=63).contains(&index.len()) && index.bytes().all(|b| b.is_ascii_digit()) => {
                    let instance_index = index.to_owned();
                    Runner::Worker { instance_index }
                }
                index => return Err(invalid(labels::INSTANCE_INDEX, index, "must be a whole number")),
            },
            other => return Err(invalid(labels::RUNNER, other, "must be default, leader or worker")),
        };
        // A value that goes into a selector: a valid label value, not empty.
        let selector_value = |name| match required(name)? {
            "" => Err(invalid(name, "", "must not be empty")),
            value => labels::check_value(value)
                .map(|()| value)
                .map_err(|why| invalid(name, value, why)),
        };
        Ok(Self {
            service: selector_value(labels::INFERENCE_SERVICE)?,
            component: selector_value(labels::COMPONENT)?,
            runner,
        })
    }
}

/// The component a pod belongs to, by OME's labels: (namespace, InferenceService, component);
/// None for a pod without them. A pod saved without a namespace is in `default`, as kubectl
/// reads it.
pub fn component_of(pod: &Pod) -> Option<(&str, &str, &str)> {
    let (service, component) = (pod.label(labels::INFERENCE_SERVICE)?, pod.label(labels::COMPONENT)?);
    Some((pod.namespace(), service, component))
}

/// The leaders and only pods of the `kind` component of `service` among `pods`, one per Instance: the pods the spread counts, in the
/// pods' order. During a SurgeThenDrain update an Instance has an anchor on each of its two slots
/// (`-default-0` and `-default-1`, one Instance index): it is one Instance, counted where its
/// newer slot's pod runs once that is placed (the older one is being drained), else where the
/// older one runs.
pub(crate) fn anchors<'a>(pods: &[&'a Pod], service: &str, kind: &str) -> Vec<&'a Pod> {
    // Each Instance index's place among the anchors.
    let (mut anchors, mut at) = (Vec::new(), HashMap::new());
    let is_anchor = |pod: &&Pod| {
        pod.label(labels::INFERENCE_SERVICE) == Some(service)
            && pod.label(labels::COMPONENT) == Some(kind)
            && matches!(pod.label(labels::RUNNER), Some("default" | "leader"))
    };
    for pod in pods.iter().copied().filter(is_anchor) {
        // A pod without an index is an Instance of its own: nothing says which it shares.
        let Some(index) = pod.label(labels::INSTANCE_INDEX) else {
            anchors.push(pod);
            continue;
        };
        let slot = *at.entry(index).or_insert_with(|| {
            anchors.push(pod);
            anchors.len() - 1
        });
        if counted_before(pod, anchors[slot]) {
            anchors[slot] = pod;
        }
    }
    anchors
}

/// Of two anchors of one Instance, is `pod` the one counted rather than `other`: placed before
/// Pending, then the newer slot (the greater `ome.io/pod-ordinal`).
fn counted_before(pod: &Pod, other: &Pod) -> bool {
    let rank = |pod: &Pod| {
        let slot = pod.label(labels::POD_ORDINAL).and_then(|s| s.parse::<u64>().ok());
        (pod.node().is_some(), slot.unwrap_or(0))
    };
    rank(pod) > rank(other)
}

/// The Instance labels of an anchor pod (leader or only pod) of the `kind` component of `service`.
pub(crate) fn anchor_labels<'a>(pod: &Pod, service: &'a str, kind: &'a str) -> InstanceLabels<'a> {
    let runner = match pod.label(labels::RUNNER) {
        Some("leader") => Runner::Leader,
        _ => Runner::Default,
    };
    InstanceLabels {
        service,
        component: kind,
        runner,
    }
}

/// Are both pods of the same Instance (its InferenceService, component and Instance index)?
pub(crate) fn same_instance(pod: &Pod, other: &Pod) -> bool {
    [labels::INFERENCE_SERVICE, labels::COMPONENT, labels::INSTANCE_INDEX]
        .iter()
        .all(|l| pod.label(l) == other.label(l))
}

/// The pods of `anchor`'s Instance among `pods`: the anchor, then its workers by name, the order
/// in which OME creates them and the scheduler places them. Only workers join it: the leader of
/// the Instance's other slot (a SurgeThenDrain update's) is the same Instance, counted once by
/// [`anchors`].
pub(crate) fn members<'a>(pods: &[&'a Pod], anchor: &'a Pod) -> Vec<&'a Pod> {
    let is_worker = |pod: &&Pod| pod.label(labels::RUNNER) == Some("worker") && same_instance(pod, anchor);
    let mut workers: Vec<&Pod> = pods.iter().copied().filter(is_worker).collect();
    workers.sort_by_key(|pod| pod.name());
    std::iter::once(anchor).chain(workers).collect()
}

/// The domain of the node a pod runs on, if it runs on a known node with the key's label.
pub(crate) fn domain_of<'a>(nodes: &'a Nodes, pod: &Pod, key: &str) -> Option<&'a String> {
    let node = pod.node().and_then(|name| nodes.get(name))?;
    node.labels.get(key)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ome::typed;

    #[test]
    fn p11_the_labels_name_the_instance_or_say_which_is_wrong() {
        let lookup = |pairs: &[(&'static str, &'static str)], name| {
            pairs.iter().find(|(key, _)| *key == name).map(|(_, value)| *value)
        };
        let read = |pairs: &[(&'static str, &'static str)]| InstanceLabels::read(|name| Ok(lookup(pairs, name)));
        let leader = [
            ("ome.io/runner", "leader"),
            ("ome.io/inferenceservice", "ds"),
            ("component", "engine"),
        ];
        assert_eq!(
            read(&leader),
            Ok(InstanceLabels {
                service: "ds",
                component: "engine",
                runner: Runner::Leader
            })
        );
        let worker = [
            ("ome.io/runner", "worker"),
            ("ome.io/instance-index", "12"),
            ("ome.io/inferenceservice", "ds"),
            ("component", "engine"),
        ];
        assert_eq!(
            read(&worker).map(|i| i.runner),
            Ok(Runner::Worker {
                instance_index: "12".into()
            })
        );
        let invalid = |label, value: &str, why| {
            Err(BadLabel::Invalid {
                label,
                value: value.into(),
                why,
            })
        };
        for (pairs, expected) in [
            (&[][..], Err(BadLabel::Missing("ome.io/runner"))),
            (
                &[("ome.io/runner", "Leader")],
                invalid("ome.io/runner", r#""Leader""#, "must be default, leader or worker"),
            ),
            (
                &[("ome.io/runner", "worker")],
                Err(BadLabel::Missing("ome.io/instance-index")),
            ),
            (
                &[("ome.io/runner", "worker"), ("ome.io/instance-index", "-1")],
                invalid("ome.io/instance-index", r#""-1""#, "must be a whole number"),
            ),
            (
                &[("ome.io/runner", "default"), ("ome.io/inferenceservice", "")],
                invalid("ome.io/inferenceservice", r#""""#, "must not be empty"),
            ),
            (
                &[("ome.io/runner", "default"), ("ome.io/inferenceservice", "a b")],
                invalid(
                    "ome.io/inferenceservice",
                    r#""a b""#,
                    "a name must be alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character",
                ),
            ),
            (
                &[("ome.io/runner", "default"), ("ome.io/inferenceservice", "ds")],
                Err(BadLabel::Missing("component")),
            ),
        ] {
            assert_eq!(read(pairs).map(|_| ()), expected, "{pairs:?}");
        }
        // Only the labels a rule needs are asked for: a leader's index is never read.
        let never_the_index = |name| match name {
            "ome.io/instance-index" => Err(BadLabel::Missing(name)),
            _ => Ok(lookup(&leader, name)),
        };
        assert!(InstanceLabels::read(never_the_index).is_ok());
        let error = read(&[("ome.io/runner", "x")]).map(|_| ()).expect_err("rejected");
        assert_eq!(
            error.to_string(),
            r#"label ome.io/runner is "x": must be default, leader or worker"#
        );
    }

    #[test]
    fn a_pod_belongs_to_the_component_its_labels_name() {
        let pod = |labels| typed::<Pod>(&json!({"metadata": {"namespace": "spread-demo", "labels": labels}}));
        let labelled = pod(json!({"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine"}));
        assert_eq!(component_of(&labelled), Some(("spread-demo", "qwen3-0-6b", "engine")));
        assert_eq!(component_of(&pod(json!({"component": "engine"}))), None);
        assert_eq!(
            component_of(&pod(json!({"ome.io/inferenceservice": "qwen3-0-6b"}))),
            None
        );
        let saved = typed(&json!({"metadata": {"labels": {"ome.io/inferenceservice": "a", "component": "decoder"}}}));
        assert_eq!(component_of(&saved), Some(("default", "a", "decoder")));
    }
}
