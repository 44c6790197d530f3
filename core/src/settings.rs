//! The policy's settings (the README's Settings). With none set, the output is exactly OME's.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::shown::shown;

const NAMES: &str = "maxSkew, minDomains, nodeTaintsPolicy, onMissingReplica";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    pub max_skew: i32,
    /// Set only on `Required` constraints: Kubernetes allows it with `DoNotSchedule` only.
    pub min_domains: Option<i32>,
    pub node_taints_policy: Option<NodeTaintsPolicy>,
    pub on_missing_replica: OnMissingReplica,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeTaintsPolicy {
    Honor,
    Ignore,
}

impl NodeTaintsPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Honor => "Honor",
            Self::Ignore => "Ignore",
        }
    }
}

/// What to do with an OMENative pod whose InferenceReplica cannot be read (P3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMissingReplica {
    Reject,
    Accept,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            max_skew: 1,
            min_domains: None,
            node_taints_policy: None,
            on_missing_replica: OnMissingReplica::Reject,
        }
    }
}

impl Settings {
    /// Reads the settings as the policy-server passes them: an object, or null for none.
    /// The error names the setting and its bad value.
    pub fn from_json(settings: &Value) -> Result<Self, String> {
        match settings {
            Value::Null => Ok(Self::default()),
            Value::Object(_) => Written::deserialize(settings).map_err(|e| e.to_string())?.check(),
            other => Err(format!("settings must be an object, got {}", shown(other))),
        }
    }
}

/// The settings as written: each field as given (null kept apart from absent), and any other
/// field by its name. [`Written::check`] reads them into [`Settings`].
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Written {
    #[serde(deserialize_with = "given")]
    max_skew: Option<Value>,
    #[serde(deserialize_with = "given")]
    min_domains: Option<Value>,
    #[serde(deserialize_with = "given")]
    node_taints_policy: Option<Value>,
    #[serde(deserialize_with = "given")]
    on_missing_replica: Option<Value>,
    #[serde(flatten)]
    unknown: BTreeMap<String, Value>,
}

/// A field that is present, null included.
fn given<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl Written {
    /// The settings, or the first bad one by name, the same whichever order they came in.
    pub fn check(&self) -> Result<Settings, String> {
        let defaults = Settings::default();
        let max_skew = read(&self.max_skew, defaults.max_skew, |v| at_least_one("maxSkew", v));
        let min_domains = read(&self.min_domains, None, |v| {
            optional(v, |v| at_least_one("minDomains", v))
        });
        let node_taints_policy = read(&self.node_taints_policy, None, |v| {
            optional(v, |v| match one_of("nodeTaintsPolicy", v, &["Honor", "Ignore"])? {
                "Honor" => Ok(NodeTaintsPolicy::Honor),
                _ => Ok(NodeTaintsPolicy::Ignore),
            })
        });
        let on_missing_replica = read(&self.on_missing_replica, defaults.on_missing_replica, |v| match one_of(
            "onMissingReplica",
            v,
            &["Reject", "Accept"],
        )? {
            "Accept" => Ok(OnMissingReplica::Accept),
            _ => Ok(OnMissingReplica::Reject),
        });
        let known = [
            ("maxSkew", max_skew.as_ref().err()),
            ("minDomains", min_domains.as_ref().err()),
            ("nodeTaintsPolicy", node_taints_policy.as_ref().err()),
            ("onMissingReplica", on_missing_replica.as_ref().err()),
        ];
        let known = known.into_iter().filter_map(|(name, why)| Some((name, why?.clone())));
        let unknown = self.unknown.keys().map(|name| {
            (
                name.as_str(),
                format!("unknown setting {name:?}: the settings are {NAMES}"),
            )
        });
        if let Some((_, why)) = known.chain(unknown).min_by(|a, b| a.0.cmp(b.0)) {
            return Err(why);
        }
        Ok(Settings {
            max_skew: max_skew?,
            min_domains: min_domains?,
            node_taints_policy: node_taints_policy?,
            on_missing_replica: on_missing_replica?,
        })
    }
}

/// A field's value: `parse`d where given, else `default`.
fn read<T>(given: &Option<Value>, default: T, parse: impl FnOnce(&Value) -> Result<T, String>) -> Result<T, String> {
    given.as_ref().map_or(Ok(default), parse)
}

fn optional<T>(value: &Value, parse: impl FnOnce(&Value) -> Result<T, String>) -> Result<Option<T>, String> {
    match value {
        Value::Null => Ok(None),
        set => parse(set).map(Some),
    }
}

fn at_least_one(name: &str, value: &Value) -> Result<i32, String> {
    value
        .as_i64()
        .filter(|n| (1..=i64::from(i32::MAX)).contains(n))
        .map(|n| n as i32)
        .ok_or_else(|| format!("{name} must be a whole number of at least 1, got {}", shown(value)))
}

fn one_of<'a>(name: &str, value: &Value, allowed: &[&'a str]) -> Result<&'a str, String> {
    let given = value.as_str();
    allowed
        .iter()
        .find(|a| Some(**a) == given)
        .copied()
        .ok_or_else(|| format!("{name} must be {}, got {}", allowed.join(" or "), shown(value)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn none_set_gives_omes_output() {
        assert_eq!(Settings::from_json(&Value::Null), Ok(Settings::default()));
        assert_eq!(Settings::from_json(&json!({})), Ok(Settings::default()));
    }

    #[test]
    fn every_setting_is_read() {
        let settings = json!({
            "maxSkew": 2, "minDomains": 3, "nodeTaintsPolicy": "Honor", "onMissingReplica": "Accept"
        });
        assert_eq!(
            Settings::from_json(&settings),
            Ok(Settings {
                max_skew: 2,
                min_domains: Some(3),
                node_taints_policy: Some(NodeTaintsPolicy::Honor),
                on_missing_replica: OnMissingReplica::Accept,
            })
        );
    }

    #[test]
    fn the_first_bad_setting_named_is_the_same_in_any_order() {
        let message =
            r#"unknown setting "maxskew": the settings are maxSkew, minDomains, nodeTaintsPolicy, onMissingReplica"#;
        for text in [r#"{"zoneSkew": 1, "maxskew": 2}"#, r#"{"maxskew": 2, "zoneSkew": 1}"#] {
            let settings: Value = serde_json::from_str(text).expect("json");
            assert_eq!(Settings::from_json(&settings), Err(message.to_owned()), "{text}");
        }
    }

    #[test]
    fn bad_values_are_named() {
        let cases = [
            (
                json!({"maxSkew": 0}),
                "maxSkew must be a whole number of at least 1, got 0",
            ),
            (
                json!({"maxSkew": "2"}),
                r#"maxSkew must be a whole number of at least 1, got "2""#,
            ),
            (
                json!({"maxSkew": 1.5}),
                "maxSkew must be a whole number of at least 1, got 1.5",
            ),
            (
                json!({"maxSkew": 4294967296u64}),
                "maxSkew must be a whole number of at least 1, got 4294967296",
            ),
            (
                json!({"minDomains": -1}),
                "minDomains must be a whole number of at least 1, got -1",
            ),
            (
                json!({"nodeTaintsPolicy": "honor"}),
                r#"nodeTaintsPolicy must be Honor or Ignore, got "honor""#,
            ),
            (
                json!({"onMissingReplica": null}),
                "onMissingReplica must be Reject or Accept, got null",
            ),
            (
                json!({"maxskew": 2}),
                r#"unknown setting "maxskew": the settings are maxSkew, minDomains, nodeTaintsPolicy, onMissingReplica"#,
            ),
            (json!([1]), "settings must be an object, got [1]"),
        ];
        for (settings, message) in cases {
            assert_eq!(Settings::from_json(&settings), Err(message.to_string()), "{settings}");
        }
    }
}
