//! The world around ome-spread's rebalance, for its tests (issue 11), with no cluster: OME's side
//! of a surge migration ([`ome`]) and the scheduler that places the surge's pods
//! ([`scheduler`]). Both are written from their upstream contracts (OME v1.3's migration
//! records, Kubernetes' scheduling documentation), apart from the core, so that what the core
//! plans is checked against what the cluster would do with it.

pub mod ome;
pub mod scheduler;
