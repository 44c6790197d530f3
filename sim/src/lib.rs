//! The world around ome-spread, for its tests. With no cluster (for the rebalance): OME's side of a
//! surge migration ([`ome`]) and the scheduler that places the surge's pods ([`scheduler`]),
//! written from their upstream contracts (OME v1.3's migration records, Kubernetes' scheduling
//! documentation), apart from the core, so that what the core plans is checked against what the
//! cluster would do with it. On a real kube-apiserver and kube-scheduler (`make e2e-cluster`):
//! stand-ins, test-only, for what such a control plane lacks: the nodes' kubelets ([`nodes`]) and
//! OME ([`ome_stand_in`]), which runs [`ome`]'s migration against the API server.
//!
//! And the one home of what the workspace's tests share: the policy's fixtures, its rule table and
//! its two runners, native and the built wasm ([`policy`]), the test-only admission host that puts
//! it behind a real API server's webhook ([`admission_host`]), waiting on a condition ([`wait`]),
//! the workspace's files, built binaries and free ports ([`local`]), the live cluster of the
//! cluster suites, kubectl and the processes they start ([`live`]), the in-memory API server
//! ([`memory`]), the controller's churn on it or on a real API server ([`churn`]), a Prometheus
//! histogram's quantiles ([`histogram`]), and the real
//! Kubewarden policy-server run over the rule table's cases
//! ([`policy_server`]).

pub mod admission_host;
pub mod api;
pub mod churn;
pub mod histogram;
pub mod large_cluster;
pub mod live;
pub mod local;
pub mod memory;
pub mod nodes;
pub mod objects;
pub mod ome;
pub mod ome_stand_in;
pub mod policy;
pub mod policy_server;
pub mod scheduler;
pub mod wait;
