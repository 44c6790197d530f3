//! Why a request is rejected. Every message names the object, the field and the bad value.

use serde_json::Value;
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
    #[error("pod {pod}: label {label} is missing")]
    MissingLabel { pod: String, label: &'static str },
    #[error("pod {pod}: label {label} is {value}: {why}")]
    BadLabel {
        pod: String,
        label: &'static str,
        value: String,
        why: String,
    },
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
}

/// A JSON value as a message shows it: strings quoted, anything long cut short.
pub fn shown(value: &Value) -> String {
    const MOST: usize = 80;
    let text = value.to_string();
    match text.char_indices().nth(MOST) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn shown_quotes_strings_and_cuts_long_values() {
        assert_eq!(shown(&json!("Always")), r#""Always""#);
        assert_eq!(shown(&json!(3)), "3");
        let long = shown(&json!("x".repeat(200)));
        assert_eq!(long, format!("\"{}...", "x".repeat(79)));
    }
}
