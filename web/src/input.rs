//! What the user pasted: YAML documents, the pod, the settings. Each error names what was pasted
//! and, from the YAML reader, the line and column.

use ome_spread_core::explain::Objects;
use ome_spread_core::settings::Settings;
use serde_json::{Map, Value};

/// The pasted objects, read as `explain --from` reads saved ones: a quantity the API server
/// would refuse is named, never counted as nothing.
pub fn objects(text: &str) -> Result<Objects, String> {
    read(documents(text, "objects")?)
}

/// The pasted objects' documents, read as [`objects`] reads them.
pub fn read(documents: Vec<Value>) -> Result<Objects, String> {
    Objects::new(documents).map_err(|e| format!("objects: {e}"))
}

/// The documents of `text` (`---` between them; empty ones dropped). The reader's budget is
/// raised for a large cluster's objects (10,000 pods are some 3 million YAML nodes); its caps on
/// aliases, which guard against a small text that expands without end, stay as they are.
pub fn documents(text: &str, what: &str) -> Result<Vec<Value>, String> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_documents: 100_000,
            max_nodes: 50_000_000,
            max_events: 100_000_000,
            max_total_scalar_bytes: 1 << 30,
        },
    };
    let documents: Vec<Value> = serde_saphyr::from_multiple_with_options(text, options).map_err(|e| {
        let message = e.to_string();
        // The reader's own "error: " prefix, said once: the box names the error already.
        format!("{what}: {}", message.strip_prefix("error: ").unwrap_or(&message))
    })?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

/// The one object of `text`.
pub fn object(text: &str, what: &str) -> Result<Value, String> {
    let mut documents = documents(text, what)?;
    match (documents.pop(), documents.is_empty()) {
        (None, _) => Err(format!("{what}: nothing pasted")),
        (Some(object @ Value::Object(_)), true) => Ok(object),
        (Some(_), false) => Err(format!("{what}: one object is expected, not several documents")),
        (Some(other), true) => Err(format!("{what}: an object is expected, not {}", kind_of(&other))),
    }
}

/// The policy's settings, as the policy-server checks them before the first request; empty
/// text is no settings (the defaults).
pub fn settings(text: &str) -> Result<(Value, Settings), String> {
    let value = if text.trim().is_empty() {
        Value::Object(Map::new())
    } else {
        object(text, "settings")?
    };
    let settings = Settings::from_json(&value).map_err(|e| format!("settings: {e}"))?;
    Ok((value, settings))
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}
