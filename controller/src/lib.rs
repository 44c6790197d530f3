//! The native side of ome-spread: `ome-spread controller` sets the `Spread` condition, Events and
//! metrics on every InferenceReplica of an OMENative InferenceService; `ome-spread explain` prints
//! the same diagnosis for one InferenceService. Both are shells around `ome_spread_core::diagnosis`.

pub mod context;
pub mod controller;
pub mod error;
pub mod explain;
pub mod metrics;
pub mod nodes;
pub mod pods;
pub mod policy;
pub mod rebalance;
pub mod reconcile;
pub mod reflected;
pub mod report;
pub mod resources;
pub mod serve;
