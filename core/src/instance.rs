//! A pod's Instance, as OME's labels name it: its InferenceService, its component, and the pod's
//! place in it (the runner).

use std::borrow::Cow;

use crate::labels;
use crate::pod::Pod;

/// The components that get an InferenceReplica and may spread; the router has no spread fields.
pub const COMPONENTS: [&str; 2] = ["engine", "decoder"];

/// A pod's place in its Instance, from its OME labels.
#[derive(Debug, Clone, PartialEq, Eq)]
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
        match self {
            Self::Default => "default",
            Self::Leader => "leader",
            Self::Worker { .. } => "worker",
        }
    }
}

/// The labels that name the pod's Instance: its InferenceService, component and runner (P11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceLabels<'a> {
    pub service: Cow<'a, str>,
    pub component: Cow<'a, str>,
    pub runner: Runner,
}

/// The component a pod belongs to, by OME's labels: (namespace, InferenceService, component);
/// None for a pod without them. A pod saved without a namespace is in `default`, as kubectl
/// reads it.
pub fn component_of(pod: &Pod) -> Option<(&str, &str, &str)> {
    Some((
        pod.namespace(),
        pod.label(labels::INFERENCE_SERVICE)?,
        pod.label(labels::COMPONENT)?,
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ome::typed;

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
