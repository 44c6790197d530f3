//! The built `policy.wasm`, run through waPC in wasmtime as the Kubewarden policy-server runs it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;
use wapc::WapcHost;
use wasmtime_provider::{ResourceLimits, WasmtimeEngineProviderBuilder, WasmtimeEngineProviderPre};

use super::{Cluster, Policy};

/// Builds a package of the workspace for wasm32-wasip1, once per process. Cargo makes this a
/// no-op when the build is current; a target dir of its own (the Makefile's) keeps it clear of
/// the running `cargo test`'s lock.
fn build(package: &str, file: &str, built: &'static OnceLock<PathBuf>) -> &'static Path {
    built.get_or_init(|| {
        let workspace = crate::support::local::workspace();
        let target_dir = workspace.join("target/wasm");
        let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args(["build", "--quiet", "--release", "--lib"])
            .args(["--target", "wasm32-wasip1", "--package", package])
            .arg("--target-dir")
            .arg(&target_dir)
            .current_dir(&workspace)
            .status()
            .expect("run cargo");
        assert!(
            status.success(),
            "building {file} failed; is the target installed? `rustup target add wasm32-wasip1`"
        );
        target_dir.join("wasm32-wasip1/release").join(file)
    })
}

pub fn build_policy() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    build("ome-spread", "ome_spread.wasm", &BUILT)
}

/// The benchmark's floor: parses the request as the Kubewarden SDK does, and accepts.
pub fn build_floor() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    build("ome-spread-floor", "ome_spread_floor.wasm", &BUILT)
}

/// A compiled module, ready to instantiate.
pub struct Module(WasmtimeEngineProviderPre);

impl Module {
    fn compile(path: &Path, limits: Option<ResourceLimits>) -> Self {
        Self::load(path, limits).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Compiles the module at `path`, or says why not: the way in of the admission host
    /// ([`crate::stand_in::admission_host`]), which is given a file and must not panic on a bad one.
    pub fn load(path: &Path, limits: Option<ResourceLimits>) -> Result<Self, String> {
        let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut builder = WasmtimeEngineProviderBuilder::new().module_bytes(&bytes);
        if let Some(limits) = limits {
            builder = builder.enable_resource_limits(limits);
        }
        builder
            .build_pre()
            .map(Self)
            .map_err(|e| format!("{}: cannot compile the module: {e}", path.display()))
    }

    pub fn policy() -> &'static Module {
        static COMPILED: OnceLock<Module> = OnceLock::new();
        COMPILED.get_or_init(|| Module::compile(build_policy(), None))
    }

    pub fn floor() -> &'static Module {
        static COMPILED: OnceLock<Module> = OnceLock::new();
        COMPILED.get_or_init(|| Module::compile(build_floor(), None))
    }

    /// The policy with its linear memory capped at `bytes`.
    pub fn policy_with_memory_limit(bytes: usize) -> Module {
        let limits = ResourceLimits {
            max_memory_size: Some(bytes),
            ..Default::default()
        };
        Module::compile(build_policy(), Some(limits))
    }

    /// One fresh instance, whose `kubewarden/kubernetes/get_resource` calls `get_resource` answers.
    pub fn instance(
        &self,
        get_resource: impl Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync + 'static,
    ) -> WapcHost {
        self.try_instance(get_resource).unwrap_or_else(|e| panic!("{e}"))
    }

    /// As [`Module::instance`], saying why it could not instantiate rather than panicking.
    pub fn try_instance(
        &self,
        get_resource: impl Fn(&[u8]) -> Result<Vec<u8>, String> + Send + Sync + 'static,
    ) -> Result<WapcHost, String> {
        let engine = self
            .0
            .rehydrate(None)
            .map_err(|e| format!("instantiate the module: {e}"))?;
        let host_call = move |_id: u64, binding: &str, namespace: &str, operation: &str, payload: &[u8]| match (
            binding, namespace, operation,
        ) {
            ("kubewarden", "kubernetes", "get_resource") => get_resource(payload).map_err(Into::into),
            other => Err(format!("unexpected host call {other:?}").into()),
        };
        WapcHost::new(Box::new(engine), Some(Box::new(host_call))).map_err(|e| format!("waPC host: {e}"))
    }
}

/// A fresh policy instance whose host calls `cluster` answers.
pub fn instance(cluster: &Cluster) -> WapcHost {
    let cluster = cluster.clone();
    Module::policy().instance(move |payload| cluster.get_resource(payload))
}

pub fn call(host: &WapcHost, operation: &str, payload: &[u8]) -> Value {
    let answer = host
        .call(operation, payload)
        .unwrap_or_else(|e| panic!("{operation} trapped: {e}"));
    super::answer(&answer)
}

pub struct Wasm;

impl Policy for Wasm {
    fn validate(&self, payload: &[u8], cluster: &Cluster) -> Value {
        call(&instance(cluster), "validate", payload)
    }
}
