//! ome-spread's pure core: every rule of docs/rules.md and every relation between OME's objects,
//! with no I/O and no JSON text. The policy (the crate at the root) reads a request and splices
//! what [`rules`] decides; the controller (`controller/`) reads the cluster and writes what
//! [`diagnosis`] reports.
//!
//! - [`ome`]: OME's objects, the one model of them; [`pod`]: the parts of a pod read, and
//!   [`nodes`] of a node; [`read`]: saved objects read into them, what cannot be read named;
//!   [`instance`]: a pod's Instance from OME's labels, a component's Instances, their workers
//!   and domains; [`replica`]: which InferenceReplica and runtime belong to what;
//! - [`spread`]: the three spread fields and the settings in effect (M1); [`settings`]: the
//!   policy's settings;
//! - [`rules`]: P5 to P12, what a pod gets; [`diagnosis`] and [`nodes`]: whether the spread
//!   holds, and why not; [`action`]: what to do about it, as the condition says it; [`explain`]:
//!   what `explain` and the playground show of a service;
//!   [`rebalance`]: the fewest Instance moves that fix a skew, into the [`room`] nodes have,
//!   its amounts read as Kubernetes reads a [`quantity`];
//!   [`loss`]: what losing one domain leaves serving, and which lost Instances fit elsewhere;
//!   [`migration`]: OME's migration request, its records, and the guardrails before one;
//!   [`alfred`]: the Instances OME's caretaker refuses; [`columns`]: the seed's tables.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]

pub mod action;
pub mod alfred;
pub mod columns;
pub mod diagnosis;
pub mod explain;
pub mod instance;
pub mod labels;
pub mod loss;
pub mod migration;
pub mod nodes;
pub mod ome;
pub mod pod;
pub mod quantity;
pub mod read;
pub mod rebalance;
pub mod replica;
pub mod room;
pub mod rules;
pub mod settings;
pub mod shown;
pub mod spread;
