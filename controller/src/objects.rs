//! Saved Kubernetes objects: `kubectl get -o yaml` output (single objects or Lists, several
//! documents per file), from a file or a directory.

use std::path::Path;

use serde_json::Value;

pub struct Objects(Vec<Value>);

impl Objects {
    pub fn new(objects: Vec<Value>) -> Self {
        Self(objects)
    }

    pub fn load(path: &Path) -> Result<Self, String> {
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
        let mut objects = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            let documents: Vec<Value> =
                serde_saphyr::from_multiple(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            for document in documents {
                match document["items"].as_array() {
                    Some(items) if document["kind"].as_str().is_some_and(|k| k.ends_with("List")) => {
                        objects.extend(items.iter().cloned())
                    }
                    _ => objects.push(document),
                }
            }
        }
        Ok(Self::new(objects))
    }

    /// The objects of `kind`, in `namespace` (None: cluster-scoped, or any).
    pub fn of_kind<'a>(&'a self, kind: &'a str, namespace: Option<&'a str>) -> impl Iterator<Item = &'a Value> + 'a {
        self.0.iter().filter(move |o| {
            o["kind"] == kind
                && namespace.is_none_or(|ns| o["metadata"]["namespace"].as_str().unwrap_or("default") == ns)
        })
    }

    pub fn named(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<&Value> {
        self.0.iter().find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"] == name
                && namespace.is_none_or(|ns| o["metadata"]["namespace"].as_str().unwrap_or("default") == ns)
        })
    }
}
