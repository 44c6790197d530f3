//! The benchmarks' support: the large cluster (`make bench`) and the controller's churn on it
//! (`make bench-churn`, `make bench-cluster`).

pub mod churn;
pub mod large_cluster;
