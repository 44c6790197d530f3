//! Why a request is rejected. Every message names the object, the field and the bad value.

use ome_spread_core::instance::BadLabel;
use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum Rejection {
    #[error("malformed ValidationRequest: {0}")]
    MalformedRequest(String),
    #[error("invalid policy settings: {0}")]
    BadSettings(String),
    /// A field of the pod (`pod <namespace>/<name>`) or of its replica (`InferenceReplica
    /// <namespace>/<name>`): its value, and why it is wrong.
    #[error("{object}: {field} is {value}: {why}")]
    BadField {
        object: String,
        field: String,
        value: String,
        why: String,
    },
    /// P11: the pod, and what is wrong with its labels.
    #[error("pod {0}: {1}")]
    Label(String, BadLabel),
    /// The replica, `<namespace>/<name>`, and the reason it could not be read.
    #[error("cannot read InferenceReplica {0}: {1}")]
    ReplicaUnreadable(String, String),
    /// What cannot happen, if it ever did, and the pod: said, never passed over.
    #[error("pod {0}: internal error: {1}")]
    Internal(String, String),
}
