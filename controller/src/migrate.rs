//! Rebalance `migrate` (docs/rebalance.md): the plan's first move written as OME's
//! migration request on the InferenceService, one at a time cluster-wide, when no guardrail of
//! the core's [`hold`] holds it back. The request and ome-spread's ledger go in one merge patch,
//! guarded by the cached resourceVersion, so a stale cache writes nothing (409) rather than lose
//! a ledger entry. A request OME's webhook refuses is recorded in the ledger as rejected, so its
//! backoff and tries survive a restart too.

use jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use ome_spread_core::migration::{
    Entry, Hold, LEDGER, Records, Request, Requests, Situation, hold, ledger, ledger_with, request_key,
};
use ome_spread_core::rebalance::Move;
use serde_json::{Value, json};
use tracing::info;

use crate::context::{Announcement, Context, Objects, recommendation};
use crate::error::{Error, within_timeout};
use crate::reflected::key;
use ome_spread_core::ome::{InferenceReplica, InferenceService};

/// The next move of a component, and what the guardrails read of it.
pub(crate) struct Next<'a> {
    pub replica: &'a InferenceReplica,
    pub service: &'a InferenceService,
    pub step: &'a Move,
    pub objects: &'a Objects,
    /// The mode the InferenceService's annotation lowers `migrate` to, if it does.
    pub lowered_to: Option<&'a str>,
}

/// What `migrate` does with the next move, as the Event that says it.
pub(crate) async fn request(asked: &Next<'_>, ctx: &Context) -> Result<Announcement, Error> {
    let Next {
        replica,
        service,
        step: next,
        objects,
        ..
    } = *asked;
    let service_name = key(service);
    let described = objects.describe(next);
    // The gate: from here to the write, no other reconcile checks or writes.
    let mut written = ctx.migrations.lock().await;
    let now = Timestamp::now();
    written.retain(|(_, e)| now.duration_since(e.at) < ome_spread_core::migration::ACKNOWLEDGE_WITHIN);
    let held = guardrails(asked, &written, now, ctx);
    if let Err(held) = held {
        return Ok(say_held(replica, &held, described, asked.objects));
    }
    let request = Request::new(&replica.spec.component, next, now);
    let uuid = uuid::Uuid::new_v4().to_string();
    let entry = Entry::new(&uuid, &request, now);
    // The guardrails read this ledger already: it is well-formed.
    let entries = ledger(&service_name, service.annotations()).unwrap_or_default();
    let key = request_key(&uuid);
    let annotations = json!({&key: request.value(), LEDGER: ledger_with(&entries, entry.clone(), now)});
    match write(service, annotations, ctx).await {
        Ok(()) => {
            info!(service = %service_name, %key, "migration requested");
            written.push((service_name.clone(), entry));
            Ok(Announcement {
                type_: EventType::Normal,
                reason: "RebalanceRequested",
                note: format!("Requested {key} on InferenceService {service_name}: {described}"),
                regarding: replica.object_ref(&()),
            })
        }
        Err(Error::Api(kube::Error::Api(status))) if rejected(&status.message) => {
            let refused = Entry {
                rejected: Some(status.message.clone()),
                ..entry
            };
            let annotations = json!({LEDGER: ledger_with(&entries, refused.clone(), now)});
            write(service, annotations, ctx).await?;
            written.push((service_name.clone(), refused));
            Ok(Announcement {
                type_: EventType::Warning,
                reason: "RebalanceRejected",
                note: format!(
                    "OME rejected {key}: {} on InferenceService {service_name}: {}",
                    request.value(),
                    status.message
                ),
                regarding: service.object_ref(&()),
            })
        }
        Err(other) => {
            // Unless the API server refused it as stale (409), the request may have landed (a
            // timeout, a lost answer): it holds the next one back as if it had.
            if !matches!(&other, Error::Api(kube::Error::Api(status)) if status.code == 409) {
                written.push((service_name, entry));
            }
            Err(other)
        }
    }
}

/// The core's guardrails over the component's objects (its replica the freshest copy of
/// itself), and every InferenceService's requests and InferenceReplica's records as the caches
/// hold them: read here alone, for a move the plan asks for, behind the gate.
fn guardrails(asked: &Next, written: &[(String, Entry)], now: Timestamp, ctx: &Context) -> Result<(), Hold> {
    let component = asked.objects.component();
    hold(&Situation {
        component: &component,
        lowered_to: asked.lowered_to,
        next: asked.step,
        requests: &Requests::read(ctx.caches.services.state().iter().map(|s| &**s)),
        records: &Records::read(ctx.caches.replicas.state().iter().map(|r| &**r)),
        written,
        now,
        max_per_hour: ctx.max_per_hour,
    })
}

/// A held request: the recommendation when the InferenceService lowers the mode, else why it
/// waits and the move it waits to request (a Warning when something is wrong: OME's caps unset
/// among them, which only the operator can fix).
fn say_held(replica: &InferenceReplica, held: &Hold, described: String, objects: &Objects) -> Announcement {
    let (type_, reason, note) = match held {
        Hold::ModeLowered { .. } => (
            EventType::Normal,
            "RebalanceRecommended",
            recommendation(described, objects),
        ),
        held if held.is_warning() => (
            EventType::Warning,
            "RebalanceHeld",
            format!("{held}. Next: {described}"),
        ),
        held => (EventType::Normal, "RebalanceHeld", format!("{held}. Next: {described}")),
    };
    Announcement {
        type_,
        reason,
        note,
        regarding: replica.object_ref(&()),
    }
}

/// A merge patch of the InferenceService's annotations, only if the cache saw its latest version.
async fn write(service: &InferenceService, annotations: Value, ctx: &Context) -> Result<(), Error> {
    let api: Api<InferenceService> = Api::namespaced(ctx.client.clone(), &service.namespace().unwrap_or_default());
    let mut patch = json!({"metadata": {"annotations": annotations}});
    if let Some(version) = service.resource_version() {
        patch["metadata"]["resourceVersion"] = version.into();
    }
    within_timeout(
        "the migration request",
        api.patch(&service.name_any(), &PatchParams::default(), &Patch::Merge(&patch)),
    )
    .await
    .map(drop)
}

/// OME's webhook refuses a malformed request with a message starting `migration request`; the
/// API server puts its own words before it.
fn rejected(message: &str) -> bool {
    message.starts_with("migration request") || message.contains("denied the request: migration request")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn omes_refusal_is_told_from_other_errors() {
        assert!(rejected(
            "migration request: from_node gpu-node-9 hosts no pod of Instance 2"
        ));
        assert!(rejected(
            r#"admission webhook "inferenceservice.ome.io" denied the request: migration request: instance 7 does not exist"#
        ));
        assert!(!rejected(
            "the object has been modified; please apply your changes to the latest version"
        ));
        assert!(!rejected(
            r#"admission webhook "x" denied the request: spec.engine is immutable"#
        ));
    }
}
