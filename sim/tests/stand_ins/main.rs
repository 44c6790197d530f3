//! The stand-ins' and the test support's own tests, without a cluster: each module checks one
//! module of `ome_spread_sim` against what the component it stands in for does.

mod migration;
mod nodes;
mod objects;
mod ome_cluster;
mod ome_pass;
mod ome_render;
mod policy_server;
mod scheduler;
