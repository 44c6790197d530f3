//! Reading JSON text without building a tree of it. Every pod waits on the policy, and most of a
//! pod's bytes (containers, env, volumes) are nothing the rules read: they are skipped, not
//! parsed into values, and copied through to the response as the text they came in.

use std::borrow::Cow;
use std::fmt;

use serde::Deserializer;
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

/// What a raw JSON value is, from its first byte (raw values carry no leading space).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    List,
    Null,
    Other,
}

pub fn kind(value: &RawValue) -> Kind {
    match value.get().as_bytes().first() {
        Some(b'{') => Kind::Object,
        Some(b'[') => Kind::List,
        Some(b'n') => Kind::Null,
        _ => Kind::Other,
    }
}

/// A JSON string's text, borrowed when it holds no escapes; None when the value is no string.
pub fn text(value: &RawValue) -> Option<Cow<'_, str>> {
    let raw = value.get();
    match raw.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) if !inner.contains('\\') => Some(Cow::Borrowed(inner)),
        Some(_) => serde_json::from_str::<String>(raw).ok().map(Cow::Owned),
        None => None,
    }
}

/// An object's field `key` (the last one, should the key repeat, as a full parse would keep),
/// skipping the others without building them. The caller checks that `object` is an object.
pub fn field<'a>(object: &'a RawValue, key: &str) -> Result<Option<&'a RawValue>, serde_json::Error> {
    let [value] = fields(object, [key])?;
    Ok(value)
}

/// Several fields of an object, read in one pass, as [`field`] reads one.
pub fn fields<'a, const N: usize>(
    object: &'a RawValue,
    keys: [&str; N],
) -> Result<[Option<&'a RawValue>; N], serde_json::Error> {
    let mut deserializer = serde_json::Deserializer::from_str(object.get());
    FieldsSeed { keys }.deserialize(&mut deserializer)
}

/// Whether a JSON list or object has nothing between its brackets.
pub fn is_empty_container(value: &RawValue) -> bool {
    let raw = value.get();
    raw.len() < 2 || raw[1..raw.len() - 1].trim().is_empty()
}

/// Where `inner` starts within `outer`: both must borrow from the same text.
pub fn offset(inner: &RawValue, outer: &str) -> usize {
    inner.get().as_ptr() as usize - outer.as_ptr() as usize
}

struct FieldsSeed<'k, const N: usize> {
    keys: [&'k str; N],
}

impl<'de, const N: usize> DeserializeSeed<'de> for FieldsSeed<'_, N> {
    type Value = [Option<&'de RawValue>; N];

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, const N: usize> Visitor<'de> for FieldsSeed<'_, N> {
    type Value = [Option<&'de RawValue>; N];

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = [None; N];
        while let Some(wanted) = map.next_key_seed(KeyIn(&self.keys))? {
            match wanted {
                Some(i) => found[i] = Some(map.next_value::<&'de RawValue>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

/// Finds a key among the wanted ones without allocating it.
struct KeyIn<'k, 'w>(&'w [&'k str]);

impl<'de> DeserializeSeed<'de> for KeyIn<'_, '_> {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<usize>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl Visitor<'_> for KeyIn<'_, '_> {
    type Value = Option<usize>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_str<E>(self, key: &str) -> Result<Option<usize>, E> {
        Ok(self.0.iter().position(|wanted| *wanted == key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> &RawValue {
        serde_json::from_str(text).expect("json")
    }

    #[test]
    fn field_finds_the_last_of_a_key_and_skips_the_rest() {
        let object = raw(r#"{"a": {"deep": [1, {"x": "}"}]}, "b": "one", "b\u0020": 2, "b": "two"}"#);
        assert_eq!(field(object, "b").expect("ok").map(RawValue::get), Some(r#""two""#));
        assert_eq!(field(object, "b ").expect("ok").map(RawValue::get), Some("2"));
        assert!(field(object, "c").expect("ok").is_none());
        assert!(field(raw("[1]"), "a").is_err());
        let [a, c, b] = fields(object, ["a", "c", "b"]).expect("ok");
        assert_eq!(
            (a.map(RawValue::get), c.is_none(), b.map(RawValue::get)),
            (Some(r#"{"deep": [1, {"x": "}"}]}"#), true, Some(r#""two""#))
        );
    }

    #[test]
    fn text_borrows_plain_strings_and_decodes_escaped_ones() {
        assert_eq!(text(raw(r#""leader""#)), Some(Cow::Borrowed("leader")));
        assert_eq!(text(raw(r#""a\"b""#)), Some(Cow::Owned::<str>("a\"b".into())));
        assert_eq!(text(raw("1")), None);
    }

    #[test]
    fn kinds_and_emptiness() {
        assert_eq!(kind(raw("{}")), Kind::Object);
        assert_eq!(kind(raw(" [ ] ")), Kind::List);
        assert_eq!(kind(raw("null")), Kind::Null);
        assert_eq!(kind(raw("\"x\"")), Kind::Other);
        assert!(is_empty_container(raw("[ \n ]")));
        assert!(!is_empty_container(raw("[0]")));
    }

    #[test]
    fn offset_is_measured_in_the_outer_text() {
        let outer = r#"{"spec": {"a": 1}}"#;
        let spec = field(serde_json::from_str(outer).expect("json"), "spec")
            .expect("ok")
            .expect("spec");
        assert_eq!(offset(spec, outer), 9);
    }
}
