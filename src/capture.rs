//! The pod's parts, found in the same serde_json pass that checks the request: the text of the
//! pod, of its metadata and spec, and of the two lists a rule may append to, each a slice of the
//! request's text. The pod's containers are read once, not once to check them and again to find
//! what follows them.
//!
//! An object's text is placed from its first key and its last value. When it cannot be (an empty
//! pod or spec, a spec that is no object, a key with escapes), the caller reads the pod's text on
//! its own ([`PodText::read`]).

use std::fmt;

use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::raw::{self, Kind};

/// The parts of a pod's text the rules read; `object` is the whole pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodText<'a> {
    pub object: &'a str,
    pub metadata: Option<&'a str>,
    pub spec: Option<&'a str>,
    /// The spec's lists, when it is an object.
    pub topology_spread_constraints: Option<&'a str>,
    pub affinity: Option<&'a str>,
}

impl<'a> PodText<'a> {
    /// Reads the parts from the pod's text alone, skipping over what lies between them.
    pub fn read(object: &'a str) -> Self {
        let ([spec, metadata], [topology_spread_constraints, affinity]) =
            raw::fields_within(object, ["spec", "metadata"], ["topologySpreadConstraints", "affinity"]);
        let object_spec = spec.filter(|spec| raw::kind(spec) == Kind::Object);
        Self {
            object,
            metadata,
            spec,
            topology_spread_constraints: object_spec.and(topology_spread_constraints),
            affinity: object_spec.and(affinity),
        }
    }
}

/// The request's `object`, as the serde pass found it.
#[derive(Debug, Default)]
pub enum Captured<'a> {
    /// Absent or `null`.
    #[default]
    Absent,
    Pod(Parts<'a>),
    /// Something the pass could not place: the caller reads the text again.
    Unplaced,
}

/// A pod's parts, to be placed in the request's text.
#[derive(Debug)]
pub struct Parts<'a> {
    object: Bounds<'a>,
    /// The pod's last value, or None when it is the spec (whose end is found when it is placed).
    last_value: Option<&'a str>,
    metadata: Option<&'a str>,
    spec: Option<SpecParts<'a>>,
}

#[derive(Debug)]
struct SpecParts<'a> {
    bounds: Bounds<'a>,
    last_value: &'a str,
    topology_spread_constraints: Option<&'a str>,
    affinity: Option<&'a str>,
}

impl<'a> Parts<'a> {
    /// The parts as slices of `text`, the request they were read from; None if they cannot be placed.
    pub fn place(&self, text: &'a str) -> Option<PodText<'a>> {
        let spec = match &self.spec {
            Some(spec) => Some(spec.bounds.place(text, spec.last_value)?),
            None => None,
        };
        let last_value = self.last_value.or(spec)?;
        Some(PodText {
            object: self.object.place(text, last_value)?,
            metadata: self.metadata,
            spec,
            topology_spread_constraints: self.spec.as_ref().and_then(|s| s.topology_spread_constraints),
            affinity: self.spec.as_ref().and_then(|s| s.affinity),
        })
    }
}

/// An object's first key, a slice of the request's text, and whether any key has escapes.
#[derive(Debug, Default)]
struct Bounds<'a> {
    first_key: Option<&'a str>,
    escaped_key: bool,
}

impl<'a> Bounds<'a> {
    fn key(&mut self, key: Key<'a>) -> Option<&'a str> {
        match key.0 {
            Some(key) => {
                self.first_key.get_or_insert(key);
                Some(key)
            }
            None => {
                self.escaped_key = true;
                None
            }
        }
    }

    /// The object's text: back from its first key to `{`, on from its last value to `}`.
    fn place(&self, text: &'a str, last_value: &'a str) -> Option<&'a str> {
        let first_key = self.first_key.filter(|_| !self.escaped_key)?;
        let bytes = text.as_bytes();
        let quote = raw::offset(first_key, text).checked_sub(1)?;
        let start = bytes.get(..quote)?.iter().rposition(|b| !b.is_ascii_whitespace())?;
        let after = raw::offset(last_value, text) + last_value.len();
        let end = after + bytes.get(after..)?.iter().position(|b| !b.is_ascii_whitespace())?;
        (bytes[start] == b'{' && bytes[end] == b'}').then(|| &text[start..=end])
    }
}

/// A key, borrowed from the text when it has no escapes (and so can be placed in it).
struct Key<'a>(Option<&'a str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl<'de> Visitor<'de> for KeyVisitor {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
                Ok(Key(Some(key)))
            }
            fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
                Ok(Key(None))
            }
        }
        deserializer.deserialize_str(KeyVisitor)
    }
}

/// A value that is no object: read, to be checked, and not placed.
macro_rules! not_an_object {
    ($value:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($value)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            Ok($value)
        }
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("any value")
        }
    };
}

impl<'de> Deserialize<'de> for Captured<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PodVisitor;
        impl<'de> Visitor<'de> for PodVisitor {
            type Value = Captured<'de>;

            not_an_object!(Captured::Unplaced);

            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Captured::Absent)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut parts = Parts {
                    object: Bounds::default(),
                    last_value: None,
                    metadata: None,
                    spec: None,
                };
                while let Some(key) = map.next_key::<Key>()? {
                    parts.last_value = match parts.object.key(key) {
                        Some("spec") => {
                            let Spec(Some(spec)) = map.next_value::<Spec>()? else {
                                // Not an object: the pod is read again, once this pass has checked it.
                                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                                return Ok(Captured::Unplaced);
                            };
                            parts.spec = Some(spec);
                            None
                        }
                        Some("metadata") => {
                            let metadata = map.next_value::<&RawValue>()?.get();
                            parts.metadata = Some(metadata);
                            Some(metadata)
                        }
                        _ => Some(map.next_value::<&RawValue>()?.get()),
                    };
                }
                Ok(Captured::Pod(parts))
            }
        }
        deserializer.deserialize_any(PodVisitor)
    }
}

/// A spec: its parts when it is an object with fields, None otherwise.
struct Spec<'a>(Option<SpecParts<'a>>);

impl<'de> Deserialize<'de> for Spec<'de> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SpecVisitor;
        impl<'de> Visitor<'de> for SpecVisitor {
            type Value = Spec<'de>;

            not_an_object!(Spec(None));

            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(Spec(None))
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut bounds = Bounds::default();
                let (mut last_value, mut topology_spread_constraints, mut affinity) = (None, None, None);
                while let Some(key) = map.next_key::<Key>()? {
                    let key = bounds.key(key);
                    let value = map.next_value::<&RawValue>()?.get();
                    last_value = Some(value);
                    match key {
                        Some("topologySpreadConstraints") => topology_spread_constraints = Some(value),
                        Some("affinity") => affinity = Some(value),
                        _ => {}
                    }
                }
                Ok(Spec(last_value.map(|last_value| SpecParts {
                    bounds,
                    last_value,
                    topology_spread_constraints,
                    affinity,
                })))
            }
        }
        deserializer.deserialize_any(SpecVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placed(text: &str) -> Option<PodText<'_>> {
        match serde_json::from_str::<Captured>(text).expect("json") {
            Captured::Pod(parts) => parts.place(text),
            _ => None,
        }
    }

    #[test]
    fn the_parts_are_slices_of_the_text() {
        let text = r#" { "apiVersion":"v1", "metadata" : {"name": "p"},
            "spec": { "containers": [{"name": "x", "args": ["}"]}], "topologySpreadConstraints": [], "affinity": null } ,
            "status": {} } "#;
        let pod = placed(text).expect("placed");
        assert_eq!(pod, PodText::read(text.trim()));
        assert_eq!(pod.object, text.trim());
        assert_eq!(pod.metadata, Some(r#"{"name": "p"}"#));
        assert!(
            pod.spec
                .is_some_and(|spec| spec.starts_with("{ \"containers\"") && spec.ends_with("null }"))
        );
        assert_eq!(
            (pod.topology_spread_constraints, pod.affinity),
            (Some("[]"), Some("null"))
        );
        let spec_last = r#"{"metadata": {}, "spec": {"a": 1}}"#;
        assert_eq!(
            placed(spec_last).map(|p| (p.object, p.spec)),
            Some((spec_last, Some(r#"{"a": 1}"#)))
        );
    }

    #[test]
    fn what_cannot_be_placed_is_left_to_a_read_of_the_text() {
        for text in [
            r#"{}"#,
            r#"{"spec": {}}"#,
            r#"{"spec": "x", "metadata": {}}"#,
            r#"{"spec": [1], "metadata": {}}"#,
            r#"{"spec": null}"#,
            r#"{"sp\u0065c": {"a": 1}}"#,
            r#"{"spec": {"affinit\u0079": {}}}"#,
        ] {
            assert_eq!(placed(text), None, "{text}");
        }
        assert!(matches!(serde_json::from_str::<Captured>("null"), Ok(Captured::Absent)));
        assert!(matches!(
            serde_json::from_str::<Captured>(r#""pod""#),
            Ok(Captured::Unplaced)
        ));
    }
}
