//! Tables as kubectl's custom columns print them, for the seed's Step 2 views.

/// Left-aligned columns, three spaces apart, each line ending with a newline.
pub fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .map(|r| r.get(i).map_or(0, |c| c.chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        text.push_str(cells.join("   ").trim_end());
        text.push('\n');
    }
    text
}

/// A list's values joined as kubectl joins `[*]`, or `<none>`.
pub fn joined<T>(items: &[T], value: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        "<none>".into()
    } else {
        items.iter().map(value).collect::<Vec<_>>().join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_padded_to_the_widest_cell() {
        let rows = vec![
            vec!["NAME".to_owned(), "ZONE".to_owned()],
            vec!["gpu-node-1".to_owned(), "zone-a".to_owned()],
        ];
        assert_eq!(table(&rows), "NAME         ZONE\ngpu-node-1   zone-a\n");
        assert_eq!(joined::<&str>(&[], |s| s.to_string()), "<none>");
        assert_eq!(joined(&["a", "b"], |s| s.to_string()), "a,b");
    }
}
