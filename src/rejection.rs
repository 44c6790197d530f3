//! Why a request is rejected. Every message names the object, the field and the bad value.

use ome_spread_core::instance::BadLabel;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Rejection {
    #[error("malformed ValidationRequest: {0}")]
    MalformedRequest(String),
    #[error("invalid policy settings: {0}")]
    BadSettings(String),
    #[error("pod {pod}: {field} is {value}: {why}")]
    BadPod {
        pod: String,
        field: String,
        value: String,
        why: String,
    },
    /// P11: the pod, and what is wrong with its labels.
    #[error("pod {0}: {1}")]
    Label(String, BadLabel),
    #[error("cannot read InferenceReplica {namespace}/{name}: {reason}")]
    ReplicaUnreadable {
        namespace: String,
        name: String,
        reason: String,
    },
    #[error("InferenceReplica {namespace}/{name}: {field} is {value}: {why}")]
    BadReplica {
        namespace: String,
        name: String,
        field: String,
        value: String,
        why: String,
    },
    /// What cannot happen, if it ever did: said, never passed over.
    #[error("pod {pod}: internal error: {what}")]
    Internal { pod: String, what: String },
}
