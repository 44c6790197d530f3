//! The built `policy.wasm`, run through waPC in wasmtime as the Kubewarden policy-server runs it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;
use wapc::WapcHost;
use wasmtime_provider::{WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre};

use super::{Cluster, Policy};

/// Where `make policy.wasm` and these tests build the policy.
pub fn built_wasm_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/wasm/wasm32-wasip1/release/ome_spread.wasm")
}

/// Builds the policy for wasm32-wasip1 once per test binary. Cargo makes this a no-op when the
/// build is current; a separate target dir keeps it clear of the running `cargo test`'s lock.
pub fn build_policy() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let manifest_dir = env!("CARGO_MANIFEST_DIR");
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--release",
                "--lib",
                "--target",
                "wasm32-wasip1",
                "--target-dir",
            ])
            .arg(Path::new(manifest_dir).join("target/wasm"))
            .current_dir(manifest_dir)
            .status()
            .expect("run cargo");
        assert!(
            status.success(),
            "building policy.wasm failed; is the target installed? `rustup target add wasm32-wasip1`"
        );
        built_wasm_path()
    })
}

fn compiled() -> &'static WasmtimeEngineProviderPre {
    static PRE: OnceLock<WasmtimeEngineProviderPre> = OnceLock::new();
    PRE.get_or_init(|| {
        let bytes = std::fs::read(build_policy()).expect("read policy.wasm");
        WasmtimeEngineProviderBuilder::new()
            .module_bytes(&bytes)
            .build_pre()
            .expect("compile policy.wasm")
    })
}

/// One fresh instance of the policy, whose host calls `cluster` answers.
pub fn instance(cluster: &Cluster) -> WapcHost {
    let engine = compiled().rehydrate(None).expect("instantiate policy.wasm");
    let cluster = cluster.clone();
    let host_call = move |_id: u64, binding: &str, namespace: &str, operation: &str, payload: &[u8]| match (
        binding, namespace, operation,
    ) {
        ("kubewarden", "kubernetes", "get_resource") => cluster.get_resource(payload).map_err(Into::into),
        other => Err(format!("unexpected host call {other:?}").into()),
    };
    WapcHost::new(Box::new(engine), Some(Box::new(host_call))).expect("waPC host")
}

pub fn call(host: &WapcHost, operation: &str, payload: &[u8]) -> Value {
    let answer = host
        .call(operation, payload)
        .unwrap_or_else(|e| panic!("{operation} trapped: {e}"));
    serde_json::from_slice(&answer).expect("the policy answers JSON")
}

pub struct Wasm;

impl Policy for Wasm {
    fn validate(&self, payload: &[u8], cluster: &Cluster) -> Value {
        call(&instance(cluster), "validate", payload)
    }
}
