//! Rebalance in the controller (docs/rebalance.md): the mode in effect for an
//! InferenceService and, from `recommend` up, the plan's first move as an Event and the moves
//! still needed as a metric; in `migrate`, the move requested of OME or why it is held back.
//!
//! `migrate` writes the plan's first move as OME's migration request on the InferenceService,
//! one at a time cluster-wide, when no guardrail of the core's [`hold`] holds it back. The
//! request and ome-spread's ledger go in one merge patch, guarded by the cached resourceVersion,
//! so a stale cache writes nothing (409) rather than lose a ledger entry. A request OME's webhook
//! refuses is recorded in the ledger as rejected, so its backoff and tries survive a restart too.

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType, EventType::Normal, EventType::Warning};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use ome_spread_core::migration::{
    ACKNOWLEDGE_WITHIN, Entry, Hold, LEDGER, Records, Request, Requests, Situation, Unconfigured, hold, ledger,
    ledger_with, request_key,
};
use ome_spread_core::rebalance::{Move, NoPlan, Plan};
use serde_json::{Value, json};
use tracing::info;

use crate::context::{ANNOTATION, Context, Mode, Objects, event};
use crate::error::{Error, within_timeout};
use ome_spread_core::ome::{InferenceService, namespaced_name};

/// Shows the plan as far as the mode allows: the moves still needed as a metric, and the first
/// move as an Event `RebalanceRecommended` when the recommendation changes (not on every
/// resync); in `migrate`, the move requested or why it is held, said once per change. An
/// unknown mode annotation gets a Warning Event naming it, and counts as off; a pod whose
/// Instance index is not a number, a Warning Event naming the pod and the value.
pub async fn recommend(plan: &Result<Plan, NoPlan>, objects: &Objects, ctx: &Context) -> Result<(), Error> {
    let (replica, service) = (&objects.replica, &*objects.service);
    let (namespace, name) = (replica.namespace().unwrap_or_default(), replica.name_any());
    let mode = ctx.rebalance.for_service(service);
    let on = mode.as_ref().is_ok_and(|mode| *mode != Mode::Off);
    let moves = on.then(|| plan.as_ref().map_or(0, |p| p.moves.len()));
    ctx.metrics.rebalance_moves(&namespace, &name, moves);
    let announcement = match (mode, plan.as_ref().map(|plan| plan.moves.first())) {
        (Err(value), _) => {
            let service_name = service.name_any();
            let note = format!(
                "InferenceService {namespace}/{service_name} has {ANNOTATION}: {value:?}, not off, recommend or migrate: rebalance is off for it"
            );
            Some(announcement(Warning, "RebalanceModeUnknown", note, service))
        }
        (Ok(Mode::Off), _) | (_, Ok(None)) => None,
        // A pod OME would not have labelled so: named, as the diagnosis names a bad field.
        (_, Err(bad @ NoPlan::BadIndex { .. })) => {
            Some(announcement(Warning, "RebalanceBadInput", bad.to_string(), replica))
        }
        (_, Err(_)) => None,
        (Ok(mode), Ok(Some(next))) if ctx.rebalance == Mode::Migrate => Some(migrate(next, mode, objects, ctx).await?),
        (Ok(_), Ok(Some(next))) => Some(recommended(objects.describe(next), objects)),
    };
    // Published unless it is the one last published for the replica.
    let key = ObjectRef::from_obj(replica);
    let last = ctx.replicas.with(&key, |kept| kept.announced.clone());
    if let Some((event, regarding)) = announcement.as_ref().filter(|(event, _)| last != event.note) {
        within_timeout("the rebalance Event", ctx.recorder.publish(event, regarding)).await?;
    }
    let note = announcement.and_then(|(event, _)| event.note);
    ctx.replicas.with(&key, |kept| kept.announced = note);
    Ok(())
}

/// What `migrate` does with the next move, as the Event that says it; `mode`: the
/// InferenceService's, lower than `migrate` when its annotation lowers it.
async fn migrate(next: &Move, mode: Mode, objects: &Objects, ctx: &Context) -> Result<Announcement, Error> {
    let (replica, service) = (&objects.replica, &*objects.service);
    let service_name = namespaced_name(service);
    let described = objects.describe(next);
    // The gate: from here to the write, no other reconcile checks or writes.
    let mut written = ctx.migrations.lock().await;
    let now = Timestamp::now();
    written.retain(|(_, e)| now.duration_since(e.at) < ACKNOWLEDGE_WITHIN);
    // The core's guardrails over the component's objects (its replica the freshest copy of
    // itself), and every InferenceService's requests and InferenceReplica's records as the caches
    // hold them: read here alone, for a move the plan asks for, behind the gate.
    let held = hold(&Situation {
        component: &objects.component(),
        lowered_to: (mode < Mode::Migrate).then(|| mode.into()),
        next,
        requests: &Requests::read(ctx.caches.services.state().iter().map(|s| &**s)),
        records: &Records::read(ctx.caches.replicas.state().iter().map(|r| &**r)),
        written: &written,
        now,
        max_per_hour: ctx.max_per_hour,
    });
    match held {
        // The InferenceService lowers the mode: it recommends.
        Err(Hold::ModeLowered { .. }) => return Ok(recommended(described, objects)),
        // A Warning when something is wrong (OME's caps unset among them, which only the operator
        // can fix), else why it waits; and the move it waits to request.
        Err(held) => {
            let note = format!("{held}. Next: {described}");
            let type_ = if held.is_warning() { Warning } else { Normal };
            return Ok(announcement(type_, "RebalanceHeld", note, replica));
        }
        Ok(()) => {}
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
            let note = format!("Requested {key} on InferenceService {service_name}: {described}");
            Ok(announcement(Normal, "RebalanceRequested", note, replica))
        }
        Err(Error::Api(kube::Error::Api(status))) if rejected(&status.message) => {
            let refused = Entry {
                rejected: Some(status.message.clone()),
                ..entry
            };
            let annotations = json!({LEDGER: ledger_with(&entries, refused.clone(), now)});
            write(service, annotations, ctx).await?;
            written.push((service_name.clone(), refused));
            let (value, message) = (request.value(), &status.message);
            let note = format!("OME rejected {key}: {value} on InferenceService {service_name}: {message}");
            Ok(announcement(Warning, "RebalanceRejected", note, service))
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

/// A merge patch of the InferenceService's annotations, only if the cache saw its latest version.
async fn write(service: &InferenceService, annotations: Value, ctx: &Context) -> Result<(), Error> {
    let api: Api<InferenceService> = Api::namespaced(ctx.client.clone(), &service.namespace().unwrap_or_default());
    // A cached object always has its resourceVersion: the patch is refused (409) if it is stale.
    let patch = json!({"metadata": {"annotations": annotations, "resourceVersion": service.resource_version()}});
    let (name, params, patch) = (service.name_any(), PatchParams::default(), Patch::Merge(patch));
    within_timeout("the migration request", api.patch(&name, &params, &patch)).await?;
    Ok(())
}

/// OME's webhook refuses a malformed request with a message starting `migration request`; the
/// API server puts its own words before it.
fn rejected(message: &str) -> bool {
    message.starts_with("migration request") || message.contains("denied the request: migration request")
}

/// What the rebalance says of a replica once: the Event, and the object it is about.
type Announcement = (Event, ObjectReference);

fn announcement(type_: EventType, reason: &str, note: String, about: &impl Resource<DynamicType = ()>) -> Announcement {
    (event(type_, reason, note, "Rebalance"), about.object_ref(&()))
}

/// The recommended move as its Event.
fn recommended(described: String, objects: &Objects) -> Announcement {
    let note = recommendation(described, objects);
    announcement(Normal, "RebalanceRecommended", note, &objects.replica)
}

/// A recommended move as its Event says it: the move and its command, then, when OME would hold
/// the request for its caps, why and what to set (as `explain`'s "What to do" says it).
pub(crate) fn recommendation(described: String, objects: &Objects) -> String {
    match Unconfigured::of(objects.component().replica) {
        Some(unconfigured) => format!("{described}. {unconfigured}"),
        None => described,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn service(annotation: Option<&str>) -> InferenceService {
        let mut value = json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "m", "namespace": "ns"}, "spec": {}});
        if let Some(mode) = annotation {
            value["metadata"]["annotations"] = json!({ANNOTATION: mode});
        }
        serde_json::from_value(value).expect("a service")
    }

    #[test]
    fn the_annotation_can_only_lower_the_controllers_mode() {
        let cases = [
            (Mode::Recommend, None, Ok(Mode::Recommend)),
            (Mode::Recommend, Some("off"), Ok(Mode::Off)),
            (Mode::Recommend, Some("migrate"), Ok(Mode::Recommend)),
            (Mode::Off, Some("recommend"), Ok(Mode::Off)),
            (Mode::Migrate, Some("recommend"), Ok(Mode::Recommend)),
            (Mode::Recommend, Some("Off"), Err("Off".to_owned())),
            (Mode::Recommend, Some(""), Err(String::new())),
        ];
        for (controller, annotation, expected) in cases {
            assert_eq!(
                controller.for_service(&service(annotation)),
                expected,
                "{controller:?} {annotation:?}"
            );
        }
        for mode in [Mode::Off, Mode::Recommend, Mode::Migrate] {
            assert_eq!(
                <Mode as clap::ValueEnum>::from_str(mode.into(), false),
                Ok(mode),
                "the flag's spelling"
            );
        }
    }

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
