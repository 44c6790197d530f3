//! The benchmarks' support: the large cluster (`make bench`), the controller's churn on it
//! (`make bench-churn`, `make bench-cluster`), and a Prometheus histogram's quantiles.

pub mod churn;
pub mod histogram;
pub mod large_cluster;
