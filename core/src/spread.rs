//! The three spread fields of an engine or decoder: `topologySpread`, `topologySpreadKey`,
//! `topologyKey`. The same fields sit on an InferenceService's component, on a runtime's
//! `engineConfig`/`decoderConfig`, and (as the settings in effect) on the InferenceReplica.

use serde::Deserialize;
use serde_json::Value;

use crate::labels;
use crate::shown::shown;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spread {
    Required,
    Preferred,
}

impl Spread {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Required => "Required",
            Self::Preferred => "Preferred",
        }
    }

    pub fn when_unsatisfiable(self) -> &'static str {
        match self {
            Self::Required => "DoNotSchedule",
            Self::Preferred => "ScheduleAnyway",
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpreadSettings {
    pub spread: Option<Spread>,
    pub spread_key: Option<String>,
    pub topology_key: Option<String>,
}

/// The three fields as they stand in JSON, before they are checked.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SpreadFields {
    #[serde(default)]
    pub topology_spread: Option<Value>,
    #[serde(default)]
    pub topology_spread_key: Option<Value>,
    #[serde(default)]
    pub topology_key: Option<Value>,
}

/// A field of the three that holds a value OME would not accept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadField {
    pub field: &'static str,
    pub value: String,
    pub why: String,
}

impl SpreadSettings {
    /// Checks the three fields of a spec, a component or a runtime config. Absent, null and, for
    /// a key, `""` are unset, as OME reads them; anything else must be valid (P4).
    pub fn from_fields(fields: SpreadFields) -> Result<Self, BadField> {
        let spread = match &fields.topology_spread {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) if s == "Required" => Some(Spread::Required),
            Some(Value::String(s)) if s == "Preferred" => Some(Spread::Preferred),
            Some(other) => {
                return Err(BadField {
                    field: "topologySpread",
                    value: shown(other),
                    why: "must be Required, Preferred or unset".into(),
                });
            }
        };
        Ok(Self {
            spread,
            spread_key: label_key(fields.topology_spread_key, "topologySpreadKey")?,
            topology_key: label_key(fields.topology_key, "topologyKey")?,
        })
    }

    /// The node label whose values are the domains: `topologySpreadKey`, else `topologyKey`.
    pub fn domain_key(&self) -> Option<&str> {
        self.spread_key.as_deref().or(self.topology_key.as_deref())
    }

    /// The settings in effect (M1): field by field, this component's value if set, else the
    /// runtime's default.
    pub fn over(self, runtime: &SpreadSettings) -> SpreadSettings {
        SpreadSettings {
            spread: self.spread.or(runtime.spread),
            spread_key: self.spread_key.or_else(|| runtime.spread_key.clone()),
            topology_key: self.topology_key.or_else(|| runtime.topology_key.clone()),
        }
    }
}

fn label_key(value: Option<Value>, field: &'static str) -> Result<Option<String>, BadField> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(key)) if key.is_empty() => Ok(None),
        Some(Value::String(key)) => match labels::check_key(&key) {
            Ok(()) => Ok(Some(key)),
            Err(why) => Err(BadField {
                field,
                value: shown(&Value::String(key)),
                why: format!("not a valid label key: {why}"),
            }),
        },
        Some(other) => Err(BadField {
            field,
            value: shown(&other),
            why: "must be a label key (a string)".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(spread: Option<Spread>, spread_key: Option<&str>, topology_key: Option<&str>) -> SpreadSettings {
        SpreadSettings {
            spread,
            spread_key: spread_key.map(Into::into),
            topology_key: topology_key.map(Into::into),
        }
    }

    #[test]
    fn p4_fields_are_read_and_checked() {
        let cases = [
            (json!({}), Ok(SpreadSettings::default())),
            (
                json!({"topologySpread": "Required", "topologySpreadKey": "topology.kubernetes.io/zone"}),
                Ok(settings(
                    Some(Spread::Required),
                    Some("topology.kubernetes.io/zone"),
                    None,
                )),
            ),
            (
                json!({"topologySpread": "Preferred", "topologyKey": "nvidia.com/gpu.clique", "topologySpreadKey": null}),
                Ok(settings(Some(Spread::Preferred), None, Some("nvidia.com/gpu.clique"))),
            ),
            (
                json!({"topologySpread": "Always"}),
                Err(("topologySpread", r#""Always""#, "must be Required, Preferred or unset")),
            ),
            (
                json!({"topologySpread": "required"}),
                Err((
                    "topologySpread",
                    r#""required""#,
                    "must be Required, Preferred or unset",
                )),
            ),
            (
                json!({"topologySpread": 1}),
                Err(("topologySpread", "1", "must be Required, Preferred or unset")),
            ),
            (
                json!({"topologySpreadKey": "my zone"}),
                Err((
                    "topologySpreadKey",
                    r#""my zone""#,
                    "not a valid label key: a name must be alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character",
                )),
            ),
            (
                json!({"topologySpread": "Required", "topologySpreadKey": "", "topologyKey": ""}),
                Ok(settings(Some(Spread::Required), None, None)),
            ),
            (
                json!({"topologyKey": "/rack"}),
                Err((
                    "topologyKey",
                    r#""/rack""#,
                    "not a valid label key: the prefix must be a DNS subdomain of 1 to 253 characters",
                )),
            ),
            (
                json!({"topologyKey": ["rack"]}),
                Err(("topologyKey", r#"["rack"]"#, "must be a label key (a string)")),
            ),
        ];
        for (fields, expected) in cases {
            let expected = expected.map_err(|(field, value, why)| BadField {
                field,
                value: value.into(),
                why: why.into(),
            });
            let parsed = serde_json::from_value(fields.clone()).expect("three fields");
            assert_eq!(SpreadSettings::from_fields(parsed), expected, "{fields}");
        }
    }

    #[test]
    fn the_domain_key_falls_back_to_the_topology_key() {
        assert_eq!(settings(None, Some("zone"), Some("rack")).domain_key(), Some("zone"));
        assert_eq!(settings(None, None, Some("rack")).domain_key(), Some("rack"));
        assert_eq!(settings(None, None, None).domain_key(), None);
    }

    #[test]
    fn m1_settings_in_effect_merge_field_by_field() {
        let runtime = settings(Some(Spread::Preferred), Some("zone"), Some("rack"));
        let service = settings(Some(Spread::Required), None, None);
        assert_eq!(
            service.over(&runtime),
            settings(Some(Spread::Required), Some("zone"), Some("rack"))
        );
        assert_eq!(SpreadSettings::default().over(&runtime), runtime);
        let unset_runtime = SpreadSettings::default();
        let only_key = settings(None, Some("zone"), None);
        assert_eq!(only_key.clone().over(&unset_runtime), only_key);
        // An empty key on the InferenceService is unset (P4): the runtime's key stays in effect.
        let empty: SpreadSettings = SpreadSettings::from_fields(
            serde_json::from_value(json!({"topologySpread": "Required", "topologySpreadKey": "", "topologyKey": ""}))
                .expect("three fields"),
        )
        .expect("valid");
        assert_eq!(
            empty.over(&runtime),
            settings(Some(Spread::Required), Some("zone"), Some("rack"))
        );
    }
}
