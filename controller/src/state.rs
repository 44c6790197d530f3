//! What the controller keeps of each replica between its reconciles, in one record: created at
//! the first event that triggers the replica or its first reconcile, dropped with the replica
//! (its watch's deletion, or a relist that no longer lists it) or when it has nothing left to
//! say, with its metric series and the node labels it read
//! ([`crate::context::Context::forget`]).

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::reflector::ObjectRef;
use tokio::time::Instant;

use ome_spread_core::ome::InferenceReplica;

/// What is kept of one replica.
#[derive(Debug, Default)]
pub struct ReplicaState {
    /// Failed reconciles in a row, for the retry's backoff.
    pub failures: u32,
    /// The rebalance Event last published, so that a resync does not repeat it.
    pub announced: Option<String>,
    /// The reason this process last told by an Event, so that it is not told again while the
    /// condition is held back or once it is written; empty when that Event failed, so that the
    /// retry tells it though the condition written beside it shows the reason.
    pub told: Option<String>,
    /// The condition this process last wrote, until the replica's cache shows it: a change that
    /// comes before the cache does is compared with what was written, not with what the cache
    /// still says (its own write triggers no reconcile).
    pub written: Option<Condition>,
    /// The results of the report last written, without their time: the report is written again
    /// only when they change.
    pub reported: Option<Vec<serde_json::Value>>,
    /// When the earliest watch event that triggered the replica and no reconcile has taken yet
    /// arrived: the event-to-condition time runs from it.
    pub arrived: Option<Instant>,
}

/// Every replica's record.
#[derive(Debug, Default)]
pub struct ReplicaStates(Mutex<HashMap<ObjectRef<InferenceReplica>, ReplicaState>>);

impl ReplicaStates {
    /// `change` the replica's record, made on first use.
    pub fn with<T>(&self, replica: &ObjectRef<InferenceReplica>, change: impl FnOnce(&mut ReplicaState) -> T) -> T {
        change(lock(&self.0).entry(replica.clone()).or_default())
    }

    /// A reconcile that succeeded: no failures in a row. A replica with no record gets none (one
    /// with nothing to say has just been forgotten).
    pub(crate) fn succeeded(&self, replica: &ObjectRef<InferenceReplica>) {
        if let Some(kept) = lock(&self.0).get_mut(replica) {
            kept.failures = 0;
        }
    }

    /// A watch event that triggers the replica arrived `at`: the earliest one not taken is kept.
    pub(crate) fn arrived(&self, replica: &ObjectRef<InferenceReplica>, at: Instant) {
        self.with(replica, |kept| {
            kept.arrived = Some(kept.arrived.map_or(at, |earliest| earliest.min(at)));
        });
    }

    /// Drops the replica's record.
    pub(crate) fn forget(&self, replica: &ObjectRef<InferenceReplica>) {
        lock(&self.0).remove(replica);
    }

    /// The replicas that have a record.
    pub(crate) fn replicas(&self) -> Vec<ObjectRef<InferenceReplica>> {
        lock(&self.0).keys().cloned().collect()
    }
}

/// The one rule for a poisoned lock: go on with what it holds. Every lock of the controller
/// guards plain records that each write leaves whole, and a reconcile that panicked fails alone
/// (kube-runtime retries it): the process must not stop for it.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
