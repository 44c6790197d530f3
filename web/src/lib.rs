//! The playground: the policy's exact answer to a pod, and the diagnosis of an InferenceService,
//! from YAML pasted in a browser. Every rule is the policy's ([`ome_spread::admission`]) or the
//! core's ([`ome_spread_core::explain`]); this crate only reads the YAML and shapes the answers
//! as JSON for the page (`index.html`, `app.js`).

mod admit;
mod diagnose;
mod input;
mod scenarios;

use wasm_bindgen::prelude::wasm_bindgen;

pub use admit::admit;
pub use diagnose::diagnose;
pub use scenarios::scenarios;

/// The policy's answer to `pod` (YAML), given the `objects` its InferenceReplica comes from (an
/// InferenceReplica, or an InferenceService and its runtime) and the policy's `settings`: JSON
/// with `accepted`, `message`, `warnings`, `pod`, `lines` and `patch`, or with `error`.
#[wasm_bindgen(js_name = admit)]
pub fn admit_json(objects: &str, pod: &str, settings: &str) -> String {
    admit(objects, pod, settings).to_string()
}

/// The diagnosis of every InferenceService among `objects` (YAML, as `kubectl get -o yaml`
/// prints them, Lists included, nodes too): JSON with `services`, or with `error`.
#[wasm_bindgen(js_name = diagnose)]
pub fn diagnose_json(objects: &str, settings: &str) -> String {
    diagnose(objects, settings).to_string()
}

/// The menu: OME's how-to's scenarios and one example of each reason, as JSON.
#[wasm_bindgen(js_name = scenarios)]
pub fn scenarios_json() -> String {
    scenarios().to_string()
}
