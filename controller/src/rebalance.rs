//! Rebalance in the controller (docs/rebalance.md): the mode in effect for an
//! InferenceService and, from `recommend` up, the plan's first move as an Event and the moves
//! still needed as a metric; in `migrate`, the move requested of OME ([`crate::migrate`]) or
//! why it is held back.

use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use ome_spread_core::rebalance::{NoPlan, Plan};

use crate::context::{ANNOTATION, Announcement, Context, Mode, Objects, recommendation};
use crate::error::{Error, within_timeout};
use crate::migrate;
use ome_spread_core::ome::{InferenceReplica, InferenceService};

/// Shows the plan as far as the mode allows: the moves still needed as a metric, and the first
/// move as an Event `RebalanceRecommended` when the recommendation changes (not on every
/// resync); in `migrate`, the move requested or why it is held, said once per change. An
/// unknown mode annotation gets a Warning Event naming it, and counts as off; a pod whose
/// Instance index is not a number, a Warning Event naming the pod and the value.
pub async fn recommend(
    replica: &InferenceReplica,
    service: &InferenceService,
    plan: &Result<Plan, NoPlan>,
    objects: &Objects,
    ctx: &Context,
) -> Result<(), Error> {
    let (namespace, name) = (replica.namespace().unwrap_or_default(), replica.name_any());
    let mode = ctx.rebalance.for_service(service);
    let moves = match (&mode, plan) {
        (Ok(Mode::Off) | Err(_), _) => None,
        (Ok(_), plan) => Some(plan.as_ref().map_or(0, |p| p.moves.len())),
    };
    ctx.metrics.rebalance_moves(&namespace, &name, moves);
    let announcement = match (mode, plan) {
        (Err(value), _) => Some(Announcement {
            type_: EventType::Warning,
            reason: "RebalanceModeUnknown",
            note: format!(
                "InferenceService {namespace}/{} has {ANNOTATION}: {value:?}, not off, recommend or migrate: rebalance is off for it",
                service.name_any()
            ),
            regarding: service.object_ref(&()),
        }),
        (Ok(Mode::Off), _) => None,
        // A pod OME would not have labelled so: named, as the diagnosis names a bad field.
        (_, Err(bad @ NoPlan::BadIndex { .. })) => Some(Announcement {
            type_: EventType::Warning,
            reason: "RebalanceBadInput",
            note: bad.to_string(),
            regarding: replica.object_ref(&()),
        }),
        (_, Err(_)) => None,
        (Ok(mode), Ok(plan)) if ctx.rebalance == Mode::Migrate => match plan.moves.first() {
            Some(next) => {
                let asked = migrate::Next {
                    replica,
                    service,
                    step: next,
                    objects,
                    lowered_to: (mode < Mode::Migrate).then(|| mode.name()),
                };
                Some(migrate::request(&asked, ctx).await?)
            }
            None => None,
        },
        (Ok(_), Ok(plan)) => plan.moves.first().map(|first| Announcement {
            type_: EventType::Normal,
            reason: "RebalanceRecommended",
            note: recommendation(objects.describe(first), objects),
            regarding: replica.object_ref(&()),
        }),
    };
    announce(replica, announcement, ctx).await
}

/// Publishes an announcement unless it is the one last published for the replica.
async fn announce(replica: &InferenceReplica, announcement: Option<Announcement>, ctx: &Context) -> Result<(), Error> {
    let key = ObjectRef::from_obj(replica);
    let last = ctx.replicas.with(&key, |kept| kept.announced.clone());
    let Some(announcement) = announcement else {
        ctx.replicas.with(&key, |kept| kept.announced = None);
        return Ok(());
    };
    if last.as_ref() == Some(&announcement.note) {
        return Ok(());
    }
    let event = Event {
        type_: announcement.type_,
        reason: announcement.reason.into(),
        note: Some(announcement.note.clone()),
        action: "Rebalance".into(),
        secondary: None,
    };
    within_timeout(
        "the rebalance Event",
        ctx.recorder.publish(&event, &announcement.regarding),
    )
    .await?;
    ctx.replicas.with(&key, |kept| kept.announced = Some(announcement.note));
    Ok(())
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
                <Mode as clap::ValueEnum>::from_str(mode.name(), false),
                Ok(mode),
                "the flag's spelling"
            );
        }
    }
}
