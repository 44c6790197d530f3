//! Tables as kubectl's custom columns print them, for the seed's Step 2 views.

/// Left-aligned columns, three spaces apart, each line ending with a newline.
pub fn table(rows: &[Vec<String>]) -> String {
    let width = |i: usize| rows.iter().filter_map(|r| r.get(i)).map(|c| c.chars().count()).max();
    let widths: Vec<usize> = (0..rows.first().map_or(0, Vec::len)).filter_map(width).collect();
    let line = |row: &Vec<String>| {
        let cells: Vec<String> = row.iter().zip(&widths).map(|(cell, w)| format!("{cell:<w$}")).collect();
        format!("{}\n", cells.join("   ").trim_end())
    };
    rows.iter().map(line).collect()
}

/// A list's values joined as kubectl joins `[*]`, or `<none>`.
pub fn joined<T>(items: &[T], value: impl Fn(&T) -> String) -> String {
    if items.is_empty() {
        return "<none>".into();
    }
    items.iter().map(value).collect::<Vec<_>>().join(",")
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
