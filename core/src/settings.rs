//! The policy's settings (the README's Settings). With none set, the output is exactly OME's.

use itertools::Itertools;
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

/// Written into a constraint by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, strum::IntoStaticStr, strum::VariantArray)]
pub enum NodeTaintsPolicy {
    Honor,
    Ignore,
}

/// What to do with an OMENative pod whose InferenceReplica cannot be read (P3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr, strum::VariantArray)]
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
    /// The error names the setting and its bad value: the first bad one by name, the same
    /// whichever order they came in.
    pub fn from_json(settings: &Value) -> Result<Self, String> {
        let given = match settings {
            Value::Null => return Ok(Self::default()),
            Value::Object(given) => given,
            other => return Err(format!("settings must be an object, got {}", shown(other))),
        };
        let mut settings = Self::default();
        for (name, value) in given.iter().sorted_by_key(|(name, _)| *name) {
            match name.as_str() {
                "maxSkew" => settings.max_skew = at_least_one(name, value)?,
                // Null leaves them unset, as by default.
                "minDomains" | "nodeTaintsPolicy" if value.is_null() => {}
                "minDomains" => settings.min_domains = Some(at_least_one(name, value)?),
                "nodeTaintsPolicy" => settings.node_taints_policy = Some(one_of(name, value)?),
                "onMissingReplica" => settings.on_missing_replica = one_of(name, value)?,
                _ => return Err(format!("unknown setting {name:?}: the settings are {NAMES}")),
            }
        }
        Ok(settings)
    }
}

fn at_least_one(name: &str, value: &Value) -> Result<i32, String> {
    let n = value.as_i64().and_then(|n| i32::try_from(n).ok());
    n.filter(|n| *n >= 1)
        .ok_or_else(|| format!("{name} must be a whole number of at least 1, got {}", shown(value)))
}

/// The variant of `T` that `value` names; the error names the setting and every variant.
fn one_of<T: strum::VariantArray + Copy + Into<&'static str>>(name: &str, value: &Value) -> Result<T, String> {
    let named = |variant: &&T| Some((**variant).into()) == value.as_str();
    T::VARIANTS.iter().find(named).copied().ok_or_else(|| {
        let names: Vec<&str> = T::VARIANTS.iter().map(|variant| (*variant).into()).collect();
        format!("{name} must be {}, got {}", names.join(" or "), shown(value))
    })
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
