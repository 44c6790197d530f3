//! Saved Kubernetes objects: `kubectl get -o yaml` output (single objects or Lists, several
//! documents per file), from a file or a directory.

use std::path::Path;

use ome_spread_core::explain::Objects;
use serde_json::Value;

pub fn load(path: &Path) -> Result<Objects, String> {
    let files = if path.is_dir() {
        let mut files: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| format!("{}: {e}", path.display()))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml" || x == "json"))
            .collect();
        files.sort();
        files
    } else {
        vec![path.to_path_buf()]
    };
    let mut documents = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let parsed: Vec<Value> = serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", file.display()))?;
        documents.extend(parsed);
    }
    Objects::new(documents).map_err(|e| format!("{}: {e}", path.display()))
}
