//! ome-spread: the fault-domain spread of OME's OMENative Instances.
//!
//! The pure rules of `SPEC.md` live here, with no I/O: [`admission`] takes a pod from the
//! policy-server's request to its response, [`rules`] says which term a pod gets, [`spread`]
//! reads and merges the three spread fields. The wasm entry points in `wasm` are a thin shell.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod admission;
pub mod capture;
pub mod columns;
pub mod diagnosis;
pub mod early;
pub mod labels;
pub mod nodes;
pub mod pod;
pub mod raw;
pub mod rejection;
pub mod rules;
pub mod settings;
pub mod spread;

#[cfg(target_arch = "wasm32")]
mod wasm;
