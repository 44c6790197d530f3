//! Test support: what the suites share, none of it standing in for a component.

pub mod api;
pub mod live;
pub mod local;
pub mod nodes;
pub mod objects;
pub mod wait;
