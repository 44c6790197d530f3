//! The three spread fields of an engine or decoder: `topologySpread`, `topologySpreadKey`,
//! `topologyKey`. The same fields sit on an InferenceService's component, on a runtime's
//! `engineConfig`/`decoderConfig`, and (as the settings in effect) on the InferenceReplica.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::labels;
use crate::shown::shown;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, strum::IntoStaticStr)]
pub enum Spread {
    Required,
    Preferred,
}

impl Spread {
    pub fn as_str(self) -> &'static str {
        self.into()
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

// The three as written, checked only when read (`SpreadSettings::from_fields`), and OME's
// lifecycle policies. (The doc comment is the CRD subsets' description.)
/// The spread fields of an engine or decoder, of its runtime's config, or projected on a replica.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct SpreadFields {
    /// `Required` or `Preferred`: spread the component's Instances across domains of the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "text")]
    pub topology_spread: Option<Value>,
    /// The node label whose values are the fault domains Instances spread across.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "text")]
    pub topology_spread_key: Option<Value>,
    /// The node label that keeps a multi-node Instance's workers in their leader's domain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "text")]
    pub topology_key: Option<Value>,
    /// OME's lifecycle policies, kept as written: rebalance reads `migrationPolicy.mode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("type" = "object", "x-kubernetes-preserve-unknown-fields" = true))]
    pub lifecycle: Option<Value>,
}

/// What OME's CRD says of the three fields: a string, or unset.
fn text(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "nullable": true})
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
        let spread = checked("topologySpread", fields.topology_spread, |value| {
            Spread::deserialize(value)
                .map(Some)
                .map_err(|_| "must be Required, Preferred or unset".into())
        })?;
        Ok(Self {
            spread,
            spread_key: checked("topologySpreadKey", fields.topology_spread_key, label_key)?,
            topology_key: checked("topologyKey", fields.topology_key, label_key)?,
        })
    }

    /// The node label whose values are the domains: `topologySpreadKey`, else `topologyKey`.
    pub fn domain_key(&self) -> Option<&str> {
        self.spread_key.as_deref().or(self.topology_key.as_deref())
    }
}

impl SpreadFields {
    /// The three fields in effect (M1), as OME's merge makes them: field by field, this component's
    /// value if it has one, else the runtime's default. A key set to `""` is a value there (OME
    /// merges the component's spec over the runtime's as a strategic merge patch of `*string`
    /// fields with `omitempty`: `""` is written, and replaces the runtime's key), and only then
    /// reads as unset (P4); absent or null is no value.
    pub fn over(self, runtime: SpreadFields) -> SpreadFields {
        let pick = |own: Option<Value>, default| own.filter(|own| !own.is_null()).or(default);
        SpreadFields {
            topology_spread: pick(self.topology_spread, runtime.topology_spread),
            topology_spread_key: pick(self.topology_spread_key, runtime.topology_spread_key),
            topology_key: pick(self.topology_key, runtime.topology_key),
            // Read at its own depth: rebalance::migration_mode.
            lifecycle: None,
        }
    }
}

/// One of the three fields: absent or null is unset, anything else is `read`, or named with why not.
fn checked<T>(
    field: &'static str,
    value: Option<Value>,
    read: impl FnOnce(&Value) -> Result<Option<T>, String>,
) -> Result<Option<T>, BadField> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(value) => read(&value).map_err(|why| {
            let value = shown(&value);
            BadField { field, value, why }
        }),
    }
}

fn label_key(value: &Value) -> Result<Option<String>, String> {
    match value {
        Value::String(key) if key.is_empty() => Ok(None),
        Value::String(key) => labels::check_key(key)
            .map(|()| Some(key.clone()))
            .map_err(|why| format!("not a valid label key: {why}")),
        _ => Err("must be a label key (a string)".into()),
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
        let fields = |value: Value| -> SpreadFields { serde_json::from_value(value).expect("three fields") };
        let in_effect = |service: Value, runtime: Value| {
            SpreadSettings::from_fields(fields(service).over(fields(runtime))).expect("valid")
        };
        let runtime = json!({"topologySpread": "Preferred", "topologySpreadKey": "zone", "topologyKey": "rack"});
        assert_eq!(
            in_effect(json!({"topologySpread": "Required"}), runtime.clone()),
            settings(Some(Spread::Required), Some("zone"), Some("rack"))
        );
        assert_eq!(
            in_effect(json!({}), runtime.clone()),
            settings(Some(Spread::Preferred), Some("zone"), Some("rack"))
        );
        assert_eq!(
            in_effect(json!({"topologySpreadKey": "zone"}), json!({})),
            settings(None, Some("zone"), None)
        );
        // null is no value: the runtime's stays.
        assert_eq!(
            in_effect(json!({"topologySpreadKey": null, "topologyKey": null}), runtime.clone()),
            settings(Some(Spread::Preferred), Some("zone"), Some("rack"))
        );
        // An empty key on the InferenceService replaces the runtime's, as OME's merge writes it,
        // then reads as unset.
        assert_eq!(
            in_effect(json!({"topologySpread": "Required", "topologySpreadKey": ""}), runtime),
            settings(Some(Spread::Required), None, Some("rack"))
        );
    }
}
