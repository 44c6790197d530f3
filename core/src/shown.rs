//! A value as a message shows it.

use serde_json::Value;

/// A JSON value as a message shows it: strings quoted, anything long cut short.
pub fn shown(value: &Value) -> String {
    cut(&value.to_string(), 80)
}

/// `text` as a message shows it: its first `most` characters, then `...` if there were more.
pub fn cut(text: &str, most: usize) -> String {
    match text.char_indices().nth(most) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text.to_owned(),
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
