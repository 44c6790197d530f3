//! What ome-spread's tests and benchmarks share, in four parts, each a folder:
//!
//! - [`support`]: what every suite uses: the objects' builders, the one bounded wait, the
//!   workspace's files and binaries, the live cluster's kubeconfig, kubectl, kwok and the processes
//!   a test starts, the API calls of the cluster suites and the Nodes kwok plays for them.
//! - [`stand_in`]: the fakes that remain, each only where nothing real can run, its module saying
//!   why and which suites run the real component instead.
//! - [`bench`]: the benchmarks' large cluster and the controller's churn.
//! - [`policy`]: the policy's fixtures and its runners, native and wasm (the rule table they run
//!   is the policy crate's tests/cases); and
//!   [`policy_server`], the real Kubewarden policy-server over that table.

pub mod bench;
pub mod policy;
pub mod policy_server;
pub mod stand_in;
pub mod support;
