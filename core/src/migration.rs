//! Migration requests (docs/rebalance.md): OME's request annotation on the
//! InferenceService, the records OME keeps of it in the InferenceReplica's `status.migrations`,
//! ome-spread's own ledger of the requests it wrote, and [`hold`]: the first guardrail that holds
//! the next request back. [`unconfigured`] reads OME's own hold: without its migration caps
//! (`lifecycle.audit`) OME keeps every request in Accepted.
//!
//! The ledger (`spread.ome.io/rebalance-requests`, a JSON list on the InferenceService) is written
//! in the same merge patch as OME's request, so a request and its count land together or not at
//! all. The hourly limit, the tries of a move and the backoff are counted from it and from OME's
//! records, never from memory: a restart or a new leader counts the same. (OME's records alone
//! cannot say which requests were ome-spread's, and it prunes them after its rate window; Events
//! expire and would need one more read permission.)

use std::collections::BTreeMap;

use indexmap::IndexMap;

use jiff::{SignedDuration, Timestamp};
use kube::ResourceExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::diagnosis::Component;
use crate::ome::{InferenceReplica, InferenceService, namespaced_name};
use crate::rebalance::Move;
use crate::shown::shown;

/// OME's request annotation: this prefix, then the request's UUID.
pub const REQUEST_PREFIX: &str = "ome.io/migration-request-v1-";
/// ome-spread's ledger of the requests it wrote, on the InferenceService.
pub const LEDGER: &str = "spread.ome.io/rebalance-requests";
pub const REQUESTED_BY: &str = "ome-spread";
/// The same move is requested at most this many times (while the ledger keeps it).
pub const MAX_TRIES: usize = 3;
/// How long a request of ours may go unseen in OME's records (and the caches catch up) before
/// it no longer holds the next one back.
pub const ACKNOWLEDGE_WITHIN: SignedDuration = SignedDuration::from_mins(10);
/// The ledger keeps a day of requests: the hourly count, the tries and the backoff fit in it.
pub const LEDGER_KEEPS: SignedDuration = SignedDuration::from_hours(24);
/// After a request fails, the component waits this long, doubled per failure in the ledger.
pub const BACKOFF: SignedDuration = SignedDuration::from_mins(5);
pub const MAX_BACKOFF: SignedDuration = SignedDuration::from_hours(1);
/// The condition OME v1.3 sets `True` on an InferenceReplica while a migration request of it
/// waits for caps the operator has not configured (upstream `workload/types/conditions.go`).
pub const POLICY_UNCONFIGURED: &str = "MigrationPolicyUnconfigured";
/// The message OME keeps on each record it holds in Accepted for that reason (upstream
/// `migrationCapacityUnconfiguredMessage`).
pub const HELD_FOR_CAPS: &str = "waiting for migration capacity policy (no lifecycle.audit configured)";

/// OME's request, field for field as its `kubectl ome migration start` and Alfred write it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    #[serde(rename = "schemaVersion")]
    pub schema_version: String,
    pub component: String,
    pub instance: u32,
    pub from_node: String,
    pub hint_target_nodes: Vec<String>,
    pub reason: String,
    pub requested_at: String,
    pub requested_by: String,
}

impl Request {
    /// The request for a planned move of a component, made at `now`.
    pub fn new(component: &str, next: &Move, now: Timestamp) -> Self {
        Self {
            schema_version: "v1".into(),
            component: component.into(),
            instance: next.instance,
            from_node: next.from_node.clone(),
            hint_target_nodes: next.hint_nodes.clone(),
            reason: format!(
                "Skewed: the {component}'s Instances per domain differ by more than maxSkew; ome-spread moves Instance {} from {} to {}",
                next.instance, next.from_domain, next.to_domain
            ),
            requested_at: now.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
            requested_by: REQUESTED_BY.into(),
        }
    }

    /// The annotation's value.
    pub fn value(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// One request of ours, as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub uuid: String,
    pub component: String,
    pub instance: u32,
    pub from_node: String,
    pub at: Timestamp,
    /// OME's webhook refused it (its message): it never started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejected: Option<String>,
}

impl Entry {
    pub fn new(uuid: &str, request: &Request, at: Timestamp) -> Self {
        Self {
            uuid: uuid.into(),
            component: request.component.clone(),
            instance: request.instance,
            from_node: request.from_node.clone(),
            at,
            rejected: None,
        }
    }
}

/// The annotation key of a request.
pub fn request_key(uuid: &str) -> String {
    format!("{REQUEST_PREFIX}{uuid}")
}

/// The ledger's value after `entry`: the service's entries of the last [`LEDGER_KEEPS`], then it.
pub fn ledger_with(entries: &[Entry], entry: Entry, now: Timestamp) -> String {
    let kept = entries.iter().filter(|e| now.duration_since(e.at) < LEDGER_KEEPS);
    let all: Vec<&Entry> = kept.chain(std::iter::once(&entry)).collect();
    serde_json::to_string(&all).unwrap_or_default()
}

/// A ledger that is not ome-spread's JSON: nothing can be counted, so nothing is requested.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("InferenceService {service} has {LEDGER} {value}: {error}")]
pub struct BadLedger {
    pub service: String,
    /// The ledger, as a message shows it.
    pub value: String,
    pub error: String,
}

/// An InferenceService's ledger; none when it has no annotation.
pub fn ledger(service: &str, annotations: &BTreeMap<String, String>) -> Result<Vec<Entry>, BadLedger> {
    let Some(value) = annotations.get(LEDGER) else {
        return Ok(Vec::new());
    };
    let bad = |e: serde_json::Error| BadLedger {
        service: service.into(),
        value: shown(&Value::String(value.clone())),
        error: e.to_string(),
    };
    serde_json::from_str(value).map_err(bad)
}

/// A migration's phase (OME v1.3's `MigrationPhase`). Pending and InProgress are OME's legacy
/// values: read, and active.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Phase {
    Accepted,
    SurgePending,
    SurgeReady,
    Draining,
    Completed,
    Failed,
    Relocated,
    Pending,
    InProgress,
}

impl Phase {
    /// Waiting or running: not Completed, Failed or Relocated.
    pub fn active(self) -> bool {
        !matches!(self, Self::Completed | Self::Failed | Self::Relocated)
    }

    /// How far along a migration is (upstream's `migrationPhaseRank`): OME only moves a record
    /// forward, so of two copies of one record the further one is the newer.
    fn progress(self) -> u8 {
        match self {
            Self::Accepted | Self::Pending => 0,
            Self::SurgePending | Self::InProgress => 1,
            Self::SurgeReady => 2,
            Self::Draining => 3,
            Self::Completed | Self::Failed | Self::Relocated => 4,
        }
    }
}

/// One record of `status.migrations`, the fields ome-spread reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub uuid: String,
    pub phase: Phase,
    pub message: String,
    /// When it reached a terminal phase (`completedAt`).
    pub completed_at: Option<Timestamp>,
}

impl Record {
    /// OME holds it in Accepted for caps nobody configured, and says so in its message.
    pub fn held_for_caps(&self) -> bool {
        self.phase == Phase::Accepted && self.message == HELD_FOR_CAPS
    }

    /// Under way, or waiting its turn. A record held for caps is neither: OME allocates it no
    /// surge and runs nothing for it until the operator configures the caps ("queued Accepted
    /// records ... hold nothing"), so it does not hold other components' requests back; its own
    /// component is held by [`unconfigured`] instead.
    fn in_flight(&self) -> bool {
        self.phase.active() && !self.held_for_caps()
    }
}

/// OME holds every migration request of a component until its caps are configured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "OME holds every migration request of InferenceReplica {replica} in Accepted{held}: {HELD_FOR_CAPS}. Set ome.controller.lifecycle.audit (maxInFlightMigrations, maxMigrationsPerWindow and window, each above zero) in OME's chart values, or the same audit block under lifecycle in its inferenceservice-config ConfigMap",
    held = .held.as_ref().map(|uuid| format!(" (migration {uuid} among them)")).unwrap_or_default()
)]
pub struct Unconfigured {
    /// `namespace/name`.
    pub replica: String,
    /// The first record of it that OME holds, if one does.
    pub held: Option<String>,
}

/// Whether OME holds the component's migration requests for caps: its replica's
/// `MigrationPolicyUnconfigured` condition is `True`, or one of `records` (the replica's) is held
/// for them. OME sets the condition only when it judges a request, so a record can say it first.
fn unconfigured<'a>(replica: &InferenceReplica, records: impl IntoIterator<Item = &'a Record>) -> Option<Unconfigured> {
    let mut conditions = replica.status.iter().flat_map(|status| &status.conditions);
    let condition = conditions.any(|c| c.type_ == POLICY_UNCONFIGURED && c.status == "True");
    let held = records.into_iter().find(|r| r.held_for_caps()).map(|r| r.uuid.clone());
    // Named only when held: most calls find nothing held.
    (condition || held.is_some()).then(|| Unconfigured {
        replica: namespaced_name(replica),
        held,
    })
}

impl Unconfigured {
    /// Whether OME holds the replica's requests for caps, by its condition or its own
    /// `status.migrations` (a malformed list counts as none here: the guardrails name it).
    pub fn of(replica: &InferenceReplica) -> Option<Self> {
        unconfigured(replica, &records_of(replica).unwrap_or_default())
    }
}

/// A record OME would not have written: named by replica, place, field and value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("InferenceReplica {replica} has status.migrations{at} {value}: {expected}")]
pub struct BadRecord {
    pub replica: String,
    /// `[i].field`, or empty for the list itself.
    pub at: String,
    pub value: String,
    pub expected: &'static str,
}

/// A replica's `status.migrations` (absent: none).
pub fn records(replica: &str, migrations: Option<&Value>) -> Result<Vec<Record>, BadRecord> {
    let bad = |at: String, value: &Value, expected| BadRecord {
        replica: replica.into(),
        at,
        value: shown(value),
        expected,
    };
    let list = match migrations {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Array(list)) => list,
        Some(other) => return Err(bad(String::new(), other, "not a list")),
    };
    let record = |(i, record): (usize, &Value)| {
        let bad = |name: &str, expected| bad(format!("[{i}].{name}"), &record[name], expected);
        let phases = "not Accepted, SurgePending, SurgeReady, Draining, Completed, Failed or Relocated";
        let uuid = record["requestUUID"].as_str().filter(|u| !u.is_empty());
        Ok(Record {
            uuid: uuid.ok_or_else(|| bad("requestUUID", "not a request UUID"))?.to_owned(),
            phase: Phase::deserialize(&record["phase"]).map_err(|_| bad("phase", phases))?,
            message: record["message"].as_str().unwrap_or_default().to_owned(),
            completed_at: Option::deserialize(&record["completedAt"])
                .map_err(|_| bad("completedAt", "not an RFC 3339 time"))?,
        })
    };
    list.iter().enumerate().map(record).collect()
}

/// [`records`] of a replica's own `status.migrations`.
fn records_of(replica: &InferenceReplica) -> Result<Vec<Record>, BadRecord> {
    let migrations = replica.status.as_ref().and_then(|status| status.migrations.as_ref());
    records(&namespaced_name(replica), migrations)
}

/// Every InferenceService's requests as the guardrails read them: the whole cluster's, read
/// from the controller's cache for the move a component's plan asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requests {
    /// The first InferenceService with a request annotation pending: (service, key).
    pending: Option<(String, String)>,
    /// Our ledgers' entries, with their InferenceService.
    ours: Vec<(String, Entry)>,
}

impl Requests {
    pub fn read<'a>(services: impl IntoIterator<Item = &'a InferenceService>) -> Result<Self, BadLedger> {
        let mut requests = Self::default();
        for service in services {
            let (name, annotations) = (namespaced_name(service), service.annotations());
            let pending = annotations.keys().find(|k| k.starts_with(REQUEST_PREFIX));
            requests.pending = requests.pending.or(pending.map(|key| (name.clone(), key.clone())));
            let ours = ledger(&name, annotations)?.into_iter();
            requests.ours.extend(ours.map(|entry| (name.clone(), entry)));
        }
        Ok(requests)
    }
}

/// Every InferenceReplica's migration records by request UUID, in the order first read, each with
/// the replica it was first read of and the furthest copy of it (OME only moves a record forward,
/// so the further copy is the newer; the first of equals).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Records(IndexMap<String, (String, Record)>);

impl Records {
    pub fn read<'a>(replicas: impl IntoIterator<Item = &'a InferenceReplica>) -> Result<Self, BadRecord> {
        let mut records = Self::default();
        for replica in replicas {
            records.add(&namespaced_name(replica), records_of(replica)?);
        }
        Ok(records)
    }

    fn add(&mut self, replica: &str, records: impl IntoIterator<Item = Record>) {
        for record in records {
            if let Some((_, kept)) = self.0.get_mut(&record.uuid) {
                if kept.phase.progress() < record.phase.progress() {
                    *kept = record;
                }
            } else {
                self.0.insert(record.uuid.clone(), (replica.into(), record));
            }
        }
    }

    fn get(&self, uuid: &str) -> Option<&Record> {
        self.0.get(uuid).map(|(_, record)| record)
    }
}

/// What [`hold`] reads: the component and its next move, and the whole cluster's requests.
pub struct Situation<'a> {
    /// The component as the reconcile has it: its replica's records join the cluster's read,
    /// which may be older or newer (each migration counts at its furthest phase).
    pub component: &'a Component<'a>,
    /// The mode the InferenceService's own annotation lowers `migrate` to, if it does.
    pub lowered_to: Option<&'a str>,
    pub next: &'a Move,
    /// Every InferenceService's requests and every InferenceReplica's records, as last read.
    pub requests: &'a Result<Requests, BadLedger>,
    pub records: &'a Result<Records, BadRecord>,
    /// Our requests the caches may not show yet: (InferenceService, entry).
    pub written: &'a [(String, Entry)],
    pub now: Timestamp,
    pub max_per_hour: usize,
}

/// Why the next request is held back: the first guardrail that holds, naming its object (an
/// InferenceService or InferenceReplica as `namespace/name`, a pod by its name).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Hold {
    /// The InferenceService, the mode its annotation lowers `migrate` to.
    #[error("InferenceService {0} lowers rebalance to {1} (spread.ome.io/rebalance)")]
    ModeLowered(String, String),
    #[error("InferenceReplica {0} is paused (spec.paused): OME starts no migration")]
    Paused(String),
    #[error(transparent)]
    Unconfigured(#[from] Unconfigured),
    #[error("pod {0} is Pending: every pod of the component must be placed first")]
    PodPending(String),
    #[error("pod {0} is not Ready: every Instance of the component must be Ready first")]
    NotReady(String),
    #[error(transparent)]
    BadRecord(#[from] BadRecord),
    #[error(transparent)]
    BadLedger(#[from] BadLedger),
    #[error("migration {uuid} of InferenceReplica {replica} is {phase:?}: one migration at a time")]
    Active {
        replica: String,
        uuid: String,
        phase: Phase,
    },
    /// The InferenceService, the request annotation's key.
    #[error("InferenceService {0} has {1} pending: one migration at a time")]
    Pending(String, String),
    /// The InferenceService, the request's UUID.
    #[error("request {1} on InferenceService {0} is not yet in OME's records: one migration at a time")]
    Unacknowledged(String, String),
    /// How many started, the limit.
    #[error("{0} requests of ome-spread started in the last hour: the limit is {1} (--rebalance-max-per-hour)")]
    HourlyLimit(usize, usize),
    #[error(
        "Instance {instance} of InferenceService {service}'s {component} was requested off {from_node} {tries} times: at most {MAX_TRIES}"
    )]
    Tried {
        service: String,
        component: String,
        instance: u32,
        from_node: String,
        tries: usize,
    },
    /// `outcome` says how the request ended: `failed (...)` or `was rejected (...)`.
    #[error(
        "request {uuid} on InferenceService {service} {outcome}: the {component}'s next request waits until {until}"
    )]
    Backoff {
        service: String,
        component: String,
        uuid: String,
        outcome: String,
        until: Timestamp,
    },
}

impl Hold {
    /// Whether it says something went wrong (a Warning), rather than that it waits (Normal).
    pub fn is_warning(&self) -> bool {
        matches!(
            self,
            Self::BadRecord(_) | Self::BadLedger(_) | Self::Backoff { .. } | Self::Tried { .. } | Self::Unconfigured(_)
        )
    }
}

/// The first guardrail that holds the next request back, in this order: the component's own
/// (mode, pause, its pods, OME's caps), then one migration at a time cluster-wide (records in
/// flight, requests pending, ours not yet recorded), then the pace (the hourly limit, the tries
/// of the move, the backoff after a failure). None: the request may be written. (Under
/// `migrationPolicy.mode: Never` there is no plan, so no move to hold.)
pub fn hold(situation: &Situation) -> Result<(), Hold> {
    let service = namespaced_name(situation.component.service);
    component_holds(situation, &service)?;
    // The component's own replica's records first: of two copies as far along, its own is read.
    let (replica, mut recorded) = (situation.component.replica, Records::default());
    let name = namespaced_name(replica);
    recorded.add(&name, records_of(replica)?);
    let cluster = situation.records.as_ref().map_err(Clone::clone)?;
    for (replica, record) in cluster.0.values() {
        recorded.add(replica, [record.clone()]);
    }
    let own = recorded.0.values().filter(|(replica, _)| *replica == name);
    if let Some(unconfigured) = unconfigured(replica, own.map(|(_, r)| r)) {
        return Err(unconfigured.into());
    }
    let requests = situation.requests.as_ref().map_err(Clone::clone)?;
    // Our requests: every service's ledger, and those just written that it does not show yet
    // (what the caches show wins: it may say the request was rejected since).
    let unseen = (situation.written.iter()).filter(|(_, e)| !requests.ours.iter().any(|(_, o)| o.uuid == e.uuid));
    let ours: Vec<&(String, Entry)> = requests.ours.iter().chain(unseen).collect();
    one_at_a_time(situation, &recorded, requests, &ours)?;
    pace(situation, &service, &recorded, &ours)
}

fn component_holds(s: &Situation, service: &str) -> Result<(), Hold> {
    if let Some(mode) = s.lowered_to {
        return Err(Hold::ModeLowered(service.into(), mode.into()));
    }
    if s.component.replica.spec.paused == Some(true) {
        return Err(Hold::Paused(namespaced_name(s.component.replica)));
    }
    for pod in &s.component.pods {
        let name = || pod.name().to_owned();
        if pod.status.phase.as_deref() == Some("Pending") || pod.node().is_none() {
            return Err(Hold::PodPending(name()));
        }
        if !pod.is_ready() {
            return Err(Hold::NotReady(name()));
        }
    }
    Ok(())
}

fn one_at_a_time(s: &Situation, records: &Records, requests: &Requests, ours: &[&(String, Entry)]) -> Result<(), Hold> {
    if let Some((replica, record)) = records.0.values().find(|(_, r)| r.in_flight()) {
        return Err(Hold::Active {
            replica: replica.clone(),
            uuid: record.uuid.clone(),
            phase: record.phase,
        });
    }
    if let Some((service, key)) = requests.pending.clone() {
        return Err(Hold::Pending(service, key));
    }
    let unacknowledged = ours.iter().find(|(_, e)| {
        e.rejected.is_none() && s.now.duration_since(e.at) < ACKNOWLEDGE_WITHIN && records.get(&e.uuid).is_none()
    });
    unacknowledged.map_or(Ok(()), |(service, entry)| {
        Err(Hold::Unacknowledged(service.clone(), entry.uuid.clone()))
    })
}

fn pace(s: &Situation, service: &str, records: &Records, ours: &[&(String, Entry)]) -> Result<(), Hold> {
    let started = ours
        .iter()
        .filter(|(_, e)| e.rejected.is_none() && s.now.duration_since(e.at) < SignedDuration::from_hours(1));
    let (count, limit) = (started.count(), s.max_per_hour);
    if count >= limit {
        return Err(Hold::HourlyLimit(count, limit));
    }
    let kind = s.component.kind();
    let mine: Vec<&Entry> = ours
        .iter()
        .filter(|(of, e)| *of == service && e.component == kind)
        .map(|(_, e)| e)
        .collect();
    // Of the component's own: the same Instance off the same node.
    let tries = (mine.iter())
        .filter(|e| (e.instance, &e.from_node) == (s.next.instance, &s.next.from_node))
        .count();
    if tries >= MAX_TRIES {
        return Err(Hold::Tried {
            service: service.into(),
            component: kind.into(),
            instance: s.next.instance,
            from_node: s.next.from_node.clone(),
            tries,
        });
    }
    backoff(s, service, kind, &mine, records)
}

/// After a failed or rejected request of the component: [`BACKOFF`] from the last failure (a
/// record's `completedAt`, else the request's time), doubled per failure the ledger keeps, at
/// most [`MAX_BACKOFF`].
fn backoff<'a>(s: &Situation, service: &str, kind: &str, mine: &[&'a Entry], records: &Records) -> Result<(), Hold> {
    let failure = |e: &&'a Entry| match (&e.rejected, records.get(&e.uuid)) {
        (Some(message), _) => Some((*e, e.at, format!("was rejected ({message})"))),
        (None, Some(r)) if r.phase == Phase::Failed => {
            Some((*e, r.completed_at.unwrap_or(e.at), format!("failed ({})", r.message)))
        }
        _ => None,
    };
    let failures: Vec<(&Entry, Timestamp, String)> = mine.iter().filter_map(failure).collect();
    let wait = (1..failures.len()).fold(BACKOFF, |wait, _| (wait * 2).min(MAX_BACKOFF));
    let Some((last, when, outcome)) = failures.into_iter().max_by_key(|(_, when, _)| *when) else {
        return Ok(());
    };
    let until = when.checked_add(wait).unwrap_or(when);
    if s.now < until {
        return Err(Hold::Backoff {
            service: service.into(),
            component: kind.into(),
            uuid: last.uuid.clone(),
            outcome,
            until,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests;
