//! What to do about a component's spread, as its `Spread` condition, its Event, `explain` and
//! the playground say it: the diagnosis' action, or, when a skew has no migration, why and what
//! would make one possible.

use crate::diagnosis::Report;
use crate::migration::Unconfigured;
use crate::ome::InferenceReplica;
use crate::rebalance::{Domain, NoPlan, Plan};

/// Why a skew gets no migration, when that is worth saying: not when there is no skew to fix or
/// the reason's own action is what to do.
pub fn no_move(plan: &Result<Plan, NoPlan>) -> Option<String> {
    match plan {
        Ok(_) | Err(NoPlan::WithinSkew | NoPlan::NotAMove(_)) => None,
        Err(no_plan) => Some(no_plan.to_string()),
    }
}

/// What to do, as `explain`, the condition and the Event say it: the reason's action, or, when a
/// skew has no migration, why and what would make one possible. `rooms`: the eligible domains,
/// for those where no node takes the pods ([`crate::rebalance::rooms`], any `most`). A plan that OME
/// would hold for its caps (the `replica`'s [`Unconfigured`]) is still shown, with what to set.
pub fn what_to_do(
    report: &Report,
    plan: &Result<Plan, NoPlan>,
    rooms: &[Domain],
    replica: &InferenceReplica,
) -> String {
    match (no_move(plan), plan) {
        (Some(why), _) => format!("No migration can fix it now: {why}. {}", unblock(report, plan, rooms)),
        (None, Ok(_)) if let Some(unconfigured) = Unconfigured::of(replica) => {
            format!("{} {unconfigured}.", report.action)
        }
        (None, _) => report.action.to_owned(),
    }
}

/// What would make a migration possible.
fn unblock(report: &Report, plan: &Result<Plan, NoPlan>, rooms: &[Domain]) -> String {
    match plan {
        Err(NoPlan::MigrationNever { component }) => {
            format!("Change the {component}'s migrationPolicy.mode to one that lets OME migrate its Instances.")
        }
        Err(NoPlan::BadIndex { .. }) => {
            "Check that OME made the pod: it labels each pod with its Instance's index.".into()
        }
        _ => {
            // Room in a domain with the fewest Instances; one whose nodes all refuse the pods
            // (cordoned or tainted) only stops holding the others back when it stops counting.
            let per_domain = &report.instances_per_domain;
            let fewest = per_domain.values().min();
            let closed = |domain: &str| rooms.iter().any(|d| d.name == domain && d.racks.is_empty());
            let (closed, open): (Vec<&str>, Vec<&str>) = per_domain
                .iter()
                .filter(|(_, count)| Some(*count) == fewest)
                .map(|(domain, _)| domain.as_str())
                .partition(|domain| closed(domain));
            let free = format!("Free room for one more Instance in {}", open.join(" or "));
            let closed_ones = closed.join(" and ");
            let honor = format!(
                "set nodeTaintsPolicy: Honor in the policy's settings, so that {closed_ones}, where no node takes the pods, stops counting"
            );
            match (open.is_empty(), closed.is_empty()) {
                (_, true) => format!("{free}."),
                (true, false) => format!(
                    "Let the nodes of {closed_ones} take the pods (uncordon them, or tolerate their taints), or {honor}."
                ),
                (false, false) => format!("{free}, or {honor}."),
            }
        }
    }
}
