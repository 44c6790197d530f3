//! What a test finds on this machine: the workspace's files, the binaries cargo built, a free
//! port on 127.0.0.1 for a process it starts, and a kubeconfig for it.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The workspace's root (this crate is one of its members).
pub fn workspace() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// A built binary of the workspace (`make e2e-cluster` builds them first), where cargo put it:
/// under `CARGO_TARGET_DIR` when it is set.
pub fn binary(path: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| workspace().join("target"), PathBuf::from);
    let file = target.join("debug").join(path);
    assert!(
        file.is_file(),
        "{} not built: make e2e-cluster builds it",
        file.display()
    );
    file
}

/// A kubeconfig in `file` (JSON, which is YAML too) of one `cluster` (its server, and its CA where
/// it has one) and one `user` (a token, or none), in `namespace` where given.
pub fn write_kubeconfig(file: &Path, cluster: Value, user: Value, namespace: Option<&str>) {
    let config = json!({"apiVersion": "v1", "kind": "Config", "current-context": "test",
        "clusters": [{"name": "test", "cluster": cluster}], "users": [{"name": "test", "user": user}],
        "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test", "namespace": namespace}}]});
    std::fs::write(file, config.to_string()).expect("the kubeconfig written");
}

/// A port free on 127.0.0.1, for a process a test starts to listen on.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
