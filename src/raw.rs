//! Reading JSON text without building a tree of it. Every pod waits on the policy, and most of a
//! pod's bytes (containers, env, volumes) are nothing the rules read: serde_json checks the whole
//! request once, and then these functions find the few fields the rules read by skipping over
//! the rest of the (now known valid) text, which comes back to the API server as it came in.

use std::borrow::Cow;

use serde_json::value::RawValue;

/// JSON text that serde_json has checked: one whole value. Only checked text, and the values
/// found inside it, are `Checked`, so the walks below, which trust their input, never get other.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked<'a>(&'a str);

impl<'a> Checked<'a> {
    pub fn of(value: &'a RawValue) -> Self {
        Self(value.get())
    }

    pub fn as_str(self) -> &'a str {
        self.0
    }
}

impl std::ops::Deref for Checked<'_> {
    type Target = str;

    fn deref(&self) -> &str {
        self.0
    }
}

/// What a JSON value is, from its first byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Object,
    List,
    Null,
    Other,
}

pub fn kind(value: Checked) -> Kind {
    match value.as_bytes().first() {
        Some(b'{') => Kind::Object,
        Some(b'[') => Kind::List,
        Some(b'n') => Kind::Null,
        _ => Kind::Other,
    }
}

/// A JSON string's text, borrowed when it holds no escapes; None when the value is no string.
pub fn text(value: Checked<'_>) -> Option<Cow<'_, str>> {
    let value = value.as_str();
    match value.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) if !inner.contains('\\') => Some(Cow::Borrowed(inner)),
        Some(_) => serde_json::from_str::<String>(value).ok().map(Cow::Owned),
        None => None,
    }
}

/// The values of an object's fields `keys` (the last of a repeated key, as a full parse keeps),
/// as slices of `object`, a JSON object.
pub fn fields<'a, const N: usize>(object: Checked<'a>, keys: [&str; N]) -> [Option<Checked<'a>>; N] {
    let mut found = [None; N];
    walk(object.0, 0, &keys, &mut found, None);
    found.map(|value| value.map(Checked))
}

/// As [`fields`], and also the fields `inner_keys` of the object under `keys[0]`, found in the
/// same pass that skips over it: a large value is read once.
pub fn fields_within<'a, const N: usize, const M: usize>(
    object: Checked<'a>,
    keys: [&str; N],
    inner_keys: [&str; M],
) -> ([Option<Checked<'a>>; N], [Option<Checked<'a>>; M]) {
    let (mut found, mut inner) = ([None; N], [None; M]);
    walk(object.0, 0, &keys, &mut found, Some((&inner_keys, &mut inner)));
    (
        found.map(|value| value.map(Checked)),
        inner.map(|value| value.map(Checked)),
    )
}

/// Walks the object at `text[start..]`, storing the values of `keys` in `found`, and walking into
/// the value of `keys[0]` for `inner` keys if asked. Returns the index just past the object.
fn walk<'a>(
    text: &'a str,
    start: usize,
    keys: &[&str],
    found: &mut [Option<&'a str>],
    mut inner: Option<(&[&str], &mut [Option<&'a str>])>,
) -> usize {
    let bytes = text.as_bytes();
    let mut i = skip_space(bytes, start + 1);
    while bytes.get(i) == Some(&b'"') {
        let key_end = skip_string(bytes, i);
        let key = &text[i..key_end];
        let value_start = skip_space(bytes, skip_space(bytes, key_end) + 1);
        let wanted = keys.iter().position(|wanted| key_is(key, wanted));
        let value_end = match (wanted, inner.as_mut()) {
            (Some(0), Some((inner_keys, inner_found))) if bytes.get(value_start) == Some(&b'{') => {
                inner_found.fill(None); // a repeated key: the last one counts
                walk(text, value_start, inner_keys, inner_found, None)
            }
            _ => skip_value(bytes, value_start),
        };
        if let Some(k) = wanted {
            found[k] = Some(&text[value_start..value_end]);
        }
        i = skip_space(bytes, value_end);
        if bytes.get(i) == Some(&b',') {
            i = skip_space(bytes, i + 1);
        }
    }
    (i + 1).min(bytes.len())
}

/// Checks the `\u` escapes of JSON text that serde_json has read without decoding its strings:
/// a UTF-16 surrogate must come in a pair, as a full parse requires. The pod's text goes back to
/// the API server as it came, so it must be text that a full parse accepts.
pub fn check_escapes(text: &str) -> Result<(), String> {
    let bytes = text.as_bytes();
    let hex = |at: usize| {
        let digits = bytes.get(at..at + 4).and_then(|d| std::str::from_utf8(d).ok());
        digits.and_then(|d| u16::from_str_radix(d, 16).ok())
    };
    let mut i = 0;
    while let Some(found) = bytes.get(i..).and_then(|rest| memchr::memchr(b'\\', rest)) {
        let at = i + found;
        i = at + 2; // the backslash and the character it escapes
        if bytes.get(at + 1) != Some(&b'u') {
            continue;
        }
        i = at + 6;
        match hex(at + 2) {
            Some(0xD800..=0xDBFF)
                if bytes.get(at + 6..at + 8) == Some(b"\\u") && matches!(hex(at + 8), Some(0xDC00..=0xDFFF)) =>
            {
                i = at + 12;
            }
            Some(0xD800..=0xDFFF) => return Err(format!("a lone UTF-16 surrogate escape at byte {at}")),
            Some(_) => {}
            None => return Err(format!("a \\u escape without four hex digits at byte {at}")),
        }
    }
    Ok(())
}

/// JSON's whitespace: space, tab, line feed, carriage return (not form feed, which Rust's
/// `is_ascii_whitespace` also counts).
pub fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r')
}

/// Whether a JSON list or object has nothing between its brackets.
pub fn is_empty_container(value: Checked) -> bool {
    value.len() < 2 || value[1..value.len() - 1].trim().is_empty()
}

/// Where `inner` starts within `outer`: `inner` must be a slice of `outer`.
pub fn offset(inner: &str, outer: &str) -> usize {
    inner.as_ptr() as usize - outer.as_ptr() as usize
}

/// A quoted key as it stands in the text, compared with a plain one.
pub fn key_is(quoted: &str, wanted: &str) -> bool {
    let inner = &quoted[1..quoted.len() - 1];
    if inner.contains('\\') {
        text(Checked(quoted)).is_some_and(|key| key == wanted)
    } else {
        inner == wanted
    }
}

fn skip_space(bytes: &[u8], mut i: usize) -> usize {
    while bytes.get(i).copied().is_some_and(is_space) {
        i += 1;
    }
    i
}

/// From an opening quote to just past its closing quote.
fn skip_string(bytes: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while let Some(found) = bytes.get(i..).and_then(|rest| memchr::memchr2(b'"', b'\\', rest)) {
        i += found;
        if bytes[i] == b'"' {
            return i + 1;
        }
        i += 2; // an escape: the backslash and the character it escapes
    }
    bytes.len()
}

/// From the first byte of a value to just past its last.
pub(crate) fn skip_value(bytes: &[u8], start: usize) -> usize {
    match bytes.get(start) {
        Some(b'"') => skip_string(bytes, start),
        Some(b'{' | b'[') => {
            let mut depth = 0usize;
            let mut i = start;
            while let Some(&b) = bytes.get(i) {
                match b {
                    b'"' => {
                        i = skip_string(bytes, i);
                        continue;
                    }
                    b'{' | b'[' => depth += 1,
                    b'}' | b']' => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 {
                            return i + 1;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            bytes.len()
        }
        _ => {
            let rest = bytes.get(start..).unwrap_or_default();
            start
                + rest
                    .iter()
                    .position(|b| matches!(b, b',' | b'}' | b']') || is_space(*b))
                    .unwrap_or(rest.len())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(text: &str) -> Checked<'_> {
        Checked::of(serde_json::from_str::<&RawValue>(text).expect("JSON"))
    }

    fn found<const N: usize>(values: [Option<Checked<'_>>; N]) -> [Option<&str>; N] {
        values.map(|value| value.map(Checked::as_str))
    }

    #[test]
    fn fields_finds_the_last_of_a_key_and_skips_the_rest() {
        let object =
            checked(r#"{ "a" : {"deep": [1, {"x": "}\"]"}]}, "b": "one", "b\u0020": -2.5e3, "b": "two", "n": null }"#);
        assert_eq!(found(fields(object, ["b"])), [Some(r#""two""#)]);
        assert_eq!(found(fields(object, ["b "])), [Some("-2.5e3")]);
        assert_eq!(found(fields(object, ["c", "n"])), [None, Some("null")]);
        assert_eq!(found(fields(object, ["a"])), [Some(r#"{"deep": [1, {"x": "}\"]"}]}"#)]);
        assert_eq!(found(fields(checked("{}"), ["a"])), [None]);
        assert_eq!(found(fields(checked("{ \n}"), ["a"])), [None]);
        let (outer, inner) = fields_within(
            checked(r#"{"spec": {"x": [1], "y": {}}, "z": 1, "spec": {"x": 2}}"#),
            ["spec", "z"],
            ["x", "y"],
        );
        assert_eq!(found(outer), [Some(r#"{"x": 2}"#), Some("1")]);
        assert_eq!(found(inner), [Some("2"), None]);
    }

    #[test]
    fn surrogate_escapes_must_pair() {
        assert_eq!(check_escapes(r#"{"a": "\uD83D\uDE00 \n \u00e9 \\u"}"#), Ok(()));
        assert_eq!(
            check_escapes(r#""\uDBFB\uDBFB""#),
            Err("a lone UTF-16 surrogate escape at byte 1".into())
        );
        assert_eq!(
            check_escapes(r#""x\uDE00""#),
            Err("a lone UTF-16 surrogate escape at byte 2".into())
        );
        assert_eq!(
            check_escapes(r#""\uD83D""#),
            Err("a lone UTF-16 surrogate escape at byte 1".into())
        );
    }

    #[test]
    fn text_borrows_plain_strings_and_decodes_escaped_ones() {
        assert_eq!(text(checked(r#""leader""#)), Some(Cow::Borrowed("leader")));
        assert_eq!(text(checked(r#""a\"b""#)), Some(Cow::Owned::<str>("a\"b".into())));
        assert_eq!(text(checked("1")), None);
    }

    #[test]
    fn kinds_and_emptiness() {
        assert_eq!(kind(checked("{}")), Kind::Object);
        assert_eq!(kind(checked("[ ]")), Kind::List);
        assert_eq!(kind(checked("null")), Kind::Null);
        assert_eq!(kind(checked("\"x\"")), Kind::Other);
        assert!(is_empty_container(checked("[ \n ]")));
        assert!(!is_empty_container(checked("[0]")));
    }

    #[test]
    fn offset_is_measured_in_the_outer_text() {
        let outer = checked(r#"{"spec": {"a": 1}}"#);
        let [spec] = fields(outer, ["spec"]);
        assert_eq!(spec.map(|spec| offset(&spec, &outer)), Some(9));
    }
}
