//! What the user pasted: YAML documents, the pod, the settings. Each error names what was pasted
//! and, from the YAML reader, the line and column.

use ome_spread_core::settings::Settings;
use serde_json::{Map, Value};

/// The documents of `text` (`---` between them; empty ones dropped).
pub fn documents(text: &str, what: &str) -> Result<Vec<Value>, String> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| format!("{what}: {e}"))?;
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
