//! ome-spread, the Kubewarden policy: the shell around the pure core (`ome_spread_core`). A
//! request goes from the policy-server's bytes to its answer in [`admission`]: [`early`] passes
//! what is not an OMENative Pod CREATE from the start of the text; [`raw`] finds fields in JSON
//! text without parsing the rest; [`pod`] reads what the rules need and splices what they decide,
//! leaving every other byte as it came; [`rejection`] words what is refused. The wasm entry points
//! in `wasm` call the host once and answer.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod admission;
pub mod early;
mod pod;
mod raw;
mod rejection;

#[cfg(all(target_arch = "wasm32", target_os = "wasi"))]
mod wasm;
