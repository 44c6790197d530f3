//! The stand-ins: test-only fakes of components, each kept only where the real one cannot run,
//! its module's first lines saying why and which suites run the real one. kwok, not a stand-in
//! here, plays the cluster suites' kubelets; the real kube-apiserver and kube-scheduler run
//! there (cluster/up.sh).

pub mod admission_host;
pub mod fake_api;
pub mod memory;
pub mod migration;
pub mod ome;
pub mod scheduler;
