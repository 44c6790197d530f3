//! What a test finds on this machine: the workspace's files, the binaries cargo built, and a free
//! port on 127.0.0.1 for a process it starts.

use std::path::PathBuf;

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

/// A port free on 127.0.0.1, for a process a test starts to listen on.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}
