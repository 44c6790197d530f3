//! A value as a message shows it.

use serde_json::Value;

/// A JSON value as a message shows it: strings quoted, anything long cut short.
pub fn shown(value: &Value) -> String {
    const MOST: usize = 80;
    let text = value.to_string();
    match text.char_indices().nth(MOST) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text,
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
