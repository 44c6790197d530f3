//! A pod's Instance, as OME's labels name it: its InferenceService, its component, and the pod's
//! place in it (the runner).

use std::borrow::Cow;

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

    /// The leader or only pod of an Instance: the one the spread constraint counts.
    pub fn is_anchor(&self) -> bool {
        !matches!(self, Self::Worker { .. })
    }
}

/// The labels that name the pod's Instance: its InferenceService, component and runner (P11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceLabels<'a> {
    pub service: Cow<'a, str>,
    pub component: Cow<'a, str>,
    pub runner: Runner,
}
