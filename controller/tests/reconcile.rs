//! The reconciler against a mocked API server (tower-test), as kube-rs' own controllers are
//! tested: the caches are filled from the fixtures of every reason (tests/data/reasons), and each
//! request the reconciler makes is checked (method, path, field manager, body) and answered here.

mod harness;

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use ome_spread_controller::context::{Fill, Mode};
use ome_spread_controller::error::Error;
use ome_spread_controller::pods;
use ome_spread_controller::reconcile::{error_policy, reconcile, retry_after};
use ome_spread_controller::report::{Format, Reports};
use ome_spread_controller::serve::Health;
use ome_spread_core::diagnosis::Reason;
use ome_spread_core::ome::InferenceReplica;
use ome_spread_core::pod::Pod;
use ome_spread_sim::support::objects;
use serde_json::json;
use tokio::time::sleep;

use harness::*;

/// Every reason: one Event (Normal when the spread holds, Warning when not) then one server-side
/// apply of the `Spread` condition on the status subresource, with the fixture's reason and
/// message, and nothing else.
#[tokio::test]
async fn every_reason_is_recorded_then_applied_on_status_by_the_field_manager_ome_spread() {
    for &reason in Reason::ALL {
        let Harness {
            ctx,
            replica,
            mut server,
            _writers,
        } = harness(&fixture(reason), Mode::Off);
        let name = reason.as_str();
        let reconciling = tokio::spawn(reconcile(Arc::new(replica.clone()), ctx.clone()));

        let event = event_recorded(&mut server).await;
        let kind = if reason.holds() { "Normal" } else { "Warning" };
        assert_eq!(
            (&event["type"], &event["reason"], &event["note"], &event["action"]),
            (
                &json!(kind),
                &json!(name),
                &json!(expected_message(reason)),
                &json!("Diagnose")
            ),
            "{name}"
        );
        assert_eq!(
            event["regarding"],
            json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "qwen3-0-6b-engine", "namespace": "spread-demo"}),
            "{name}"
        );
        assert_eq!(event["reportingController"], "ome-spread", "{name}");

        let body = condition_applied(&mut server, &replica).await;
        let status = if reason.holds() { "True" } else { "False" };
        let at = body["status"]["conditions"][0]["lastTransitionTime"].clone();
        assert!(
            at.as_str()
                .is_some_and(|t| t.parse::<k8s_openapi::jiff::Timestamp>().is_ok()),
            "{name}: {at}"
        );
        let expected = json!({"type": "Spread", "status": status, "reason": name, "message": expected_message(reason),
            "observedGeneration": 3, "lastTransitionTime": at});
        assert_eq!(body, apply_body(&expected), "{name}");

        let action = reconciling.await.expect("no panic").expect("reconciled");
        assert_eq!(action, Action::requeue(Duration::from_secs(600)), "{name}");
    }
}

/// Nothing changed: no Event, no patch. Any request would go unanswered and fail the reconcile.
#[tokio::test(start_paused = true)]
async fn no_write_when_the_condition_is_already_there() {
    let Harness {
        ctx, replica, server, ..
    } = harness(&fixture(Reason::Satisfied), Mode::Off);
    let message = expected_message(Reason::Satisfied);
    let replica = with_condition(
        replica,
        condition("True", "Satisfied", &message, "2026-11-01T10:00:00Z"),
    );
    let action = reconcile(Arc::new(replica), ctx.clone()).await.expect("reconciled");
    assert_eq!(action, Action::requeue(Duration::from_secs(600)));
    drop(server);
    assert!(ctx.metrics.encode().contains("ome_spread_reconciles_total 1\n"));
}

/// What losing the worst domain leaves, per replica. The seed's example: losing
/// zone-a leaves 1 of 2, and the lost one cannot be placed again (zone-b's node is full, and
/// zone-a still counts). Skewed (Preferred, 3 in zone-a, room for one in zone-b): losing zone-a
/// leaves none, and one of the three fits in zone-b.
#[tokio::test(start_paused = true)]
async fn the_worst_domain_loss_is_exported_per_replica() {
    const LEFT: &str = "ome_spread_worst_domain_left_serving{namespace=\"spread-demo\",replica=\"qwen3-0-6b-engine\"}";
    const REPLACEABLE: &str =
        "ome_spread_worst_domain_replaceable{namespace=\"spread-demo\",replica=\"qwen3-0-6b-engine\"}";
    for (reason, status, left, replaceable) in [(Reason::Satisfied, "True", 1, 0), (Reason::Skewed, "False", 0, 1)] {
        let Harness {
            ctx, replica, server, ..
        } = harness(&fixture(reason), Mode::Off);
        let message = expected_message(reason);
        // The condition is already there: no request at all.
        let replica = with_condition(
            replica,
            condition(status, reason.as_str(), &message, "2026-11-01T10:00:00Z"),
        );
        reconcile(Arc::new(replica), ctx.clone()).await.expect("reconciled");
        drop(server);
        let metrics = ctx.metrics.encode();
        assert!(
            metrics.contains(&format!("{LEFT} {left}\n")),
            "{}: {metrics}",
            reason.as_str()
        );
        assert!(
            metrics.contains(&format!("{REPLACEABLE} {replaceable}\n")),
            "{}: {metrics}",
            reason.as_str()
        );
    }
}

/// The same reason with another message (an Instance moved): the condition is applied again,
/// keeping its transition time since its status did not change, and no Event is recorded.
#[tokio::test]
async fn a_new_message_under_the_same_reason_is_applied_without_an_event() {
    let Harness {
        ctx,
        replica,
        mut server,
        ..
    } = harness(&fixture(Reason::Skewed), Mode::Off);
    let replica = with_condition(
        replica,
        condition("False", "Skewed", "an older count", "2026-11-01T10:00:00Z"),
    );
    let reconciling = tokio::spawn(reconcile(Arc::new(replica.clone()), ctx));
    let body = condition_applied(&mut server, &replica).await;
    let expected = json!({"type": "Spread", "status": "False", "reason": "Skewed", "message": expected_message(Reason::Skewed),
        "observedGeneration": 3, "lastTransitionTime": "2026-11-01T10:00:00Z"});
    assert_eq!(body, apply_body(&expected));
    reconciling.await.expect("no panic").expect("reconciled");
}

/// A status that flips (Satisfied to Skewed) moves the transition time and records a Warning.
#[tokio::test]
async fn a_reason_change_records_a_warning_and_moves_the_transition_time() {
    let Harness {
        ctx,
        replica,
        mut server,
        ..
    } = harness(&fixture(Reason::Skewed), Mode::Off);
    let replica = with_condition(
        replica,
        condition(
            "True",
            "Satisfied",
            "the 2 Instances run in 2 different domains",
            "2026-11-01T10:00:00Z",
        ),
    );
    let reconciling = tokio::spawn(reconcile(Arc::new(replica.clone()), ctx));
    let event = event_recorded(&mut server).await;
    assert_eq!(
        (&event["type"], &event["reason"]),
        (&json!("Warning"), &json!("Skewed"))
    );
    let body = condition_applied(&mut server, &replica).await;
    let condition = &body["status"]["conditions"][0];
    assert_eq!(
        (&condition["status"], &condition["reason"]),
        (&json!("False"), &json!("Skewed"))
    );
    assert_ne!(condition["lastTransitionTime"], "2026-11-01T10:00:00Z");
    reconciling.await.expect("no panic").expect("reconciled");
}

/// API errors (a conflict, a server error, no answer) fail the reconcile without a panic; the
/// controller retries after 5 s, then 10 s, ...; the next try applies the same condition, so no
/// condition is lost, and a success resets the backoff.
#[tokio::test(start_paused = true)]
async fn api_errors_are_retried_with_backoff_and_the_condition_is_not_lost() {
    let Harness {
        ctx,
        replica,
        mut server,
        ..
    } = harness(&fixture(Reason::Skewed), Mode::Off);
    let message = expected_message(Reason::Skewed);
    // The Event went out before; only the condition is missing.
    let replica = Arc::new(with_condition(
        replica,
        condition("False", "Skewed", "an older count", "2026-11-01T10:00:00Z"),
    ));

    for (attempt, answer_with) in [Some(409), Some(500), None].into_iter().enumerate() {
        let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
        let (method, uri, body, respond) = next(&mut server).await;
        assert_eq!(
            (method.as_str(), uri.as_str()),
            ("PATCH", &*format!("{STATUS_PATH}{APPLY_QUERY}"))
        );
        assert_eq!(body["status"]["conditions"][0]["message"], message.as_str());
        let error = match answer_with {
            Some(code) => {
                let status = StatusCode::from_u16(code).expect("a code");
                answer(
                    respond,
                    status,
                    &failure(code, status.canonical_reason().unwrap_or_default()),
                );
                reconciling.await.expect("no panic").expect_err("an API error")
            }
            None => {
                // No answer: the paused clock runs to the reconcile's timeout.
                let error = reconciling.await.expect("no panic").expect_err("a timeout");
                drop(respond);
                error
            }
        };
        let kind = ["api_409", "api_500", "timeout"][attempt];
        assert_eq!(error.kind(), kind);
        let action = error_policy(replica.clone(), &error, ctx.clone());
        assert_eq!(action, Action::requeue(retry_after(attempt as u32 + 1)));
    }
    assert_eq!(
        [1, 2, 3, 4, 7, 8, 100].map(retry_after),
        [5, 10, 20, 40, 300, 300, 300].map(Duration::from_secs)
    );
    let metrics = ctx.metrics.encode();
    for kind in ["api_409", "api_500", "timeout"] {
        assert!(
            metrics.contains(&format!("ome_spread_reconcile_errors_total{{error=\"{kind}\"}} 1\n")),
            "{metrics}"
        );
    }

    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let (_, _, body, respond) = next(&mut server).await;
    assert_eq!(body["status"]["conditions"][0]["message"], message.as_str());
    answer(respond, StatusCode::OK, &serde_json::to_value(&*replica).expect("json"));
    reconciling.await.expect("no panic").expect("reconciled");
    assert_eq!(
        ctx.replicas.with(&ObjectRef::from_obj(&*replica), |kept| kept.failures),
        0,
        "a success resets the backoff"
    );
}

/// A cache whose first list the API server never answers: the reconcile fails after 30 s naming
/// it (and is retried), rather than wait unseen and hold a graceful shutdown forever.
#[tokio::test(start_paused = true)]
async fn a_cache_never_filled_fails_the_reconcile_naming_it() {
    let Harness {
        ctx, replica, server, ..
    } = harness(&fixture(Reason::Satisfied), Mode::Off);
    let mut ctx = Arc::try_unwrap(ctx).unwrap_or_else(|_| panic!("the one context"));
    let (unfilled, _writer) = kube::runtime::reflector::store();
    ctx.caches.runtimes = unfilled;
    ctx.caches.filled.send_replace(Fill::Filling);
    let ctx = Arc::new(ctx);
    // The readiness waits on the caches meanwhile, as the controller's does.
    let readiness = tokio::spawn({
        let ctx = ctx.clone();
        async move { ctx.caches.all_filled().await }
    });
    let started = tokio::time::Instant::now();
    let error = reconcile(Arc::new(replica), ctx.clone()).await.expect_err("not filled");
    assert_eq!(started.elapsed(), Duration::from_secs(30));
    assert_eq!(
        error.to_string(),
        "the caches of ServingRuntimes are not filled after 30s: their first list has not been answered"
    );
    assert_eq!(error.kind(), "cache");
    readiness.abort();
    drop(server);
}

/// A reconcile that names the caches not filled does not keep the readiness from seeing them
/// filled: the readiness is told the moment the last list is in, not after its own 30 s.
#[tokio::test(start_paused = true)]
async fn the_readiness_sees_the_last_cache_filled_after_a_reconcile_named_it_unfilled() {
    let Harness { ctx, server, .. } = harness(&fixture(Reason::Satisfied), Mode::Off);
    let mut ctx = Arc::try_unwrap(ctx).unwrap_or_else(|_| panic!("the one context"));
    let (unfilled, mut writer) = kube::runtime::reflector::store();
    ctx.caches.runtimes = unfilled;
    let ctx = Arc::new(ctx);
    let readiness = tokio::spawn({
        let ctx = ctx.clone();
        async move { ctx.caches.all_filled().await }
    });
    tokio::task::yield_now().await;
    assert_eq!(
        ctx.caches.unfilled().to_string(),
        "the caches of ServingRuntimes are not filled after 30s: their first list has not been answered"
    );
    writer.apply_watcher_event(&watcher::Event::InitDone);
    let filled = tokio::time::timeout(Duration::from_secs(1), readiness).await;
    assert!(
        matches!(filled, Ok(Ok(Ok(())))),
        "the readiness saw the caches filled within a second: {filled:?}"
    );
    drop(server);
}

/// The condition waits on no Event: it is applied while the Event is unanswered. An Event that
/// fails fails the reconcile, and the retry tells it, though the condition was written.
#[tokio::test(start_paused = true)]
async fn a_failed_event_is_told_at_the_retry_though_the_condition_was_written() {
    let Harness {
        ctx,
        replica,
        mut server,
        ..
    } = harness(&fixture(Reason::Satisfied), Mode::Off);
    let reconciling = tokio::spawn(reconcile(Arc::new(replica.clone()), ctx.clone()));
    let (method, uri, _, unanswered) = next(&mut server).await;
    assert_eq!((method.as_str(), uri.as_str()), ("POST", &*format!("{EVENTS_PATH}?")));
    condition_applied(&mut server, &replica).await;
    answer(unanswered, StatusCode::FORBIDDEN, &failure(403, "Forbidden"));
    let error = reconciling.await.expect("no panic").expect_err("an API error");
    assert_eq!(error.kind(), "api_403");

    // The Event again, and no second write: a request not answered here would fail the reconcile.
    let reconciling = tokio::spawn(reconcile(Arc::new(replica), ctx));
    let event = event_recorded(&mut server).await;
    assert_eq!(
        (&event["type"], &event["reason"]),
        (&json!("Normal"), &json!("Satisfied"))
    );
    reconciling.await.expect("no panic").expect("reconciled");
}

/// Replicas of an InferenceService not on OMENative, or whose InferenceService is gone, or with
/// no parentRef at all (OME's standalone form), get no condition and no request.
#[tokio::test(start_paused = true)]
async fn replicas_off_omenative_are_left_alone() {
    let mut objects = fixture(Reason::Satisfied);
    for object in &mut objects {
        if object["kind"] == "InferenceService" {
            object["spec"]["deploymentMode"] = json!("RawDeployment");
        }
    }
    let Harness { ctx, replica, .. } = harness(&objects, Mode::Off);
    let action = reconcile(Arc::new(replica), ctx.clone()).await.expect("reconciled");
    assert_eq!(action, Action::await_change());

    objects.retain(|o| o["kind"] != "InferenceService");
    let Harness { ctx, replica, .. } = harness(&objects, Mode::Off);
    let action = reconcile(Arc::new(replica), ctx).await.expect("reconciled");
    assert_eq!(action, Action::await_change());

    let mut objects = fixture(Reason::Satisfied);
    for object in &mut objects {
        if object["kind"] == "InferenceReplica" {
            object["spec"].as_object_mut().expect("a spec").remove("parentRef");
        }
    }
    let Harness { ctx, replica, .. } = harness(&objects, Mode::Off);
    assert!(replica.spec.parent_ref.is_none());
    let action = reconcile(Arc::new(replica), ctx).await.expect("reconciled");
    assert_eq!(action, Action::await_change());
}

/// A spread field OME would refuse fails the reconcile, naming the object, field and value.
#[tokio::test]
async fn a_bad_spread_value_is_named() {
    let mut objects = fixture(Reason::Satisfied);
    for object in &mut objects {
        if object["kind"] == "InferenceReplica" {
            object["spec"]["topologySpread"] = json!("Sometimes");
        }
    }
    let Harness { ctx, replica, .. } = harness(&objects, Mode::Off);
    let error = reconcile(Arc::new(replica), ctx).await.expect_err("a bad value");
    assert!(matches!(error, Error::BadObject(_)));
    assert!(
        error
            .to_string()
            .contains("InferenceReplica qwen3-0-6b-engine spec.topologySpread"),
        "{error}"
    );
    assert!(error.to_string().contains("Sometimes"), "{error}");
}

/// The Skewed fixture's plan (zone-a: 3, zone-b: 0, gpu-node-2 free): one move, the Instance
/// with the highest index first (none is Ready), hinted to zone-b's node with room.
const FIRST_MOVE: &str = "Move Instance 2 from gpu-node-1 (zone-a) to zone-b: kubectl ome migration start qwen3-0-6b --component engine --instance 2 --from-node gpu-node-1 --hint-node gpu-node-2 -n spread-demo";
const MOVES_SERIES: &str = "ome_spread_rebalance_moves{namespace=\"spread-demo\",replica=\"qwen3-0-6b-engine\"}";

/// Rebalance `recommend` (docs/rebalance.md): the plan's first move, with its exact command, as an
/// Event RebalanceRecommended on the InferenceReplica, and the moves still needed as a metric;
/// a resync with nothing changed records no second Event.
#[tokio::test(start_paused = true)]
async fn recommend_records_the_first_move_once_and_the_moves_still_needed() {
    let Harness {
        ctx,
        replica,
        mut server,
        ..
    } = harness(&fixture(Reason::Skewed), Mode::Recommend);
    let message = expected_message(Reason::Skewed);
    // The condition is already there: the only request is the recommendation.
    let replica = Arc::new(with_condition(
        replica,
        condition("False", "Skewed", &message, "2026-11-01T10:00:00Z"),
    ));
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let event = event_recorded(&mut server).await;
    assert_eq!(
        (&event["type"], &event["reason"], &event["note"], &event["action"]),
        (
            &json!("Normal"),
            &json!("RebalanceRecommended"),
            &json!(FIRST_MOVE),
            &json!("Rebalance")
        )
    );
    assert_eq!(
        event["regarding"],
        json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "qwen3-0-6b-engine", "namespace": "spread-demo"})
    );
    reconciling.await.expect("no panic").expect("reconciled");
    assert!(
        ctx.metrics.encode().contains(&format!("{MOVES_SERIES} 1\n")),
        "{}",
        ctx.metrics.encode()
    );

    // The resync: the same recommendation, no request (one would go unanswered and time out).
    reconcile(replica, ctx.clone())
        .await
        .expect("reconciled without a request");
    drop(server);
}

/// The InferenceService's `spread.ome.io/rebalance` can only lower the mode: `off` shows no
/// plan (no Event, no series); an unknown value gets one Warning Event on the InferenceService
/// naming it, and counts as off.
#[tokio::test(start_paused = true)]
async fn the_service_annotation_lowers_the_mode_and_an_unknown_value_is_named() {
    let annotated = |value: &str| {
        let mut objects = fixture(Reason::Skewed);
        for object in &mut objects {
            if object["kind"] == "InferenceService" {
                object["metadata"]["annotations"] = json!({"spread.ome.io/rebalance": value});
            }
        }
        objects
    };
    let skewed = condition(
        "False",
        "Skewed",
        &expected_message(Reason::Skewed),
        "2026-11-01T10:00:00Z",
    );

    let Harness {
        ctx, replica, server, ..
    } = harness(&annotated("off"), Mode::Recommend);
    let replica = Arc::new(with_condition(replica, skewed.clone()));
    reconcile(replica, ctx.clone())
        .await
        .expect("reconciled without a request");
    assert!(!ctx.metrics.encode().contains(MOVES_SERIES), "{}", ctx.metrics.encode());
    drop(server);

    let Harness {
        ctx,
        replica,
        mut server,
        ..
    } = harness(&annotated("sometimes"), Mode::Recommend);
    let replica = Arc::new(with_condition(replica, skewed));
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let event = event_recorded(&mut server).await;
    assert_eq!(
        (&event["type"], &event["reason"], &event["note"]),
        (
            &json!("Warning"),
            &json!("RebalanceModeUnknown"),
            &json!(
                r#"InferenceService spread-demo/qwen3-0-6b has spread.ome.io/rebalance: "sometimes", not off, recommend or migrate: rebalance is off for it"#
            )
        )
    );
    assert_eq!(
        (&event["regarding"]["kind"], &event["regarding"]["name"]),
        (&json!("InferenceService"), &json!("qwen3-0-6b"))
    );
    reconciling.await.expect("no panic").expect("reconciled");
    assert!(!ctx.metrics.encode().contains(MOVES_SERIES));
    reconcile(replica, ctx).await.expect("named once, not on every resync");
}

/// A leader whose Instance index is not a number: no plan, and one Warning Event naming the pod
/// and the value (the diagnosis itself does not read the index).
#[tokio::test(start_paused = true)]
async fn an_instance_index_that_is_not_a_number_is_named() {
    let mut objects = fixture(Reason::Skewed);
    for object in &mut objects {
        if object["metadata"]["name"] == "qwen3-0-6b-engine-2-default-0" {
            object["metadata"]["labels"]["ome.io/instance-index"] = json!("two");
        }
    }
    let Harness {
        ctx,
        replica,
        mut server,
        ..
    } = harness(&objects, Mode::Recommend);
    // The condition already says what to do without a migration: the one request is the Event.
    let skewed = condition(
        "False",
        "Skewed",
        "Instances per domain (zone-a: 3, zone-b: 0) differ by 3, more than maxSkew 1. No migration can fix it now: \
         pod qwen3-0-6b-engine-2-default-0 has ome.io/instance-index \"two\": not an Instance index. \
         Check that OME made the pod: it labels each pod with its Instance's index.",
        "2026-11-01T10:00:00Z",
    );
    let replica = Arc::new(with_condition(replica, skewed));
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let event = event_recorded(&mut server).await;
    assert_eq!(
        (
            &event["type"],
            &event["reason"],
            &event["note"],
            &event["regarding"]["kind"]
        ),
        (
            &json!("Warning"),
            &json!("RebalanceBadInput"),
            &json!(r#"pod qwen3-0-6b-engine-2-default-0 has ome.io/instance-index "two": not an Instance index"#),
            &json!("InferenceReplica")
        )
    );
    reconciling.await.expect("no panic").expect("reconciled");
    assert!(ctx.metrics.encode().contains(&format!("{MOVES_SERIES} 0\n")));
    reconcile(replica, ctx).await.expect("named once, not on every resync");
}

/// A skew no migration can fix (zone-b's one node cordoned, counted all the same under
/// nodeTaintsPolicy Ignore): the condition and its Event say what `explain` says, why no
/// migration and what would make one possible, never "request a migration".
#[tokio::test]
async fn a_skew_without_a_migration_says_why_and_what_would_make_one_possible() {
    let mut objects = fixture(Reason::Skewed);
    for object in &mut objects {
        if object["metadata"]["name"] == "gpu-node-2" {
            object["spec"] = json!({"unschedulable": true});
        }
    }
    let expected = "Instances per domain (zone-a: 3, zone-b: 0) differ by 3, more than maxSkew 1. \
        No migration can fix it now: no eligible domain has room for one more Instance. Let the nodes of zone-b take the pods \
        (uncordon them, or tolerate their taints), or set nodeTaintsPolicy: Honor in the policy's settings, so that zone-b, \
        where no node takes the pods, stops counting.";
    assert_eq!(said(&objects).await, (expected.to_owned(), expected.to_owned()));
}

/// The Event's note and the condition's message a first reconcile of `objects` writes (Mode off).
async fn said(objects: &[serde_json::Value]) -> (String, String) {
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness(objects, Mode::Off);
    let reconciling = tokio::spawn(reconcile(Arc::new(replica.clone()), ctx.clone()));
    let event = event_recorded(&mut server).await;
    let body = condition_applied(&mut server, &replica).await;
    reconciling.await.expect("no panic").expect("reconciled");
    let text = |value: &serde_json::Value| value.as_str().unwrap_or_default().to_owned();
    (text(&event["note"]), text(&body["status"]["conditions"][0]["message"]))
}

/// Room is counted from every pod bound to a node, of any workload: a training job's pod holding
/// zone-b's only GPU leaves no room there, so no move is planned into it.
#[tokio::test]
async fn another_workloads_pod_takes_room_and_no_move_goes_into_it() {
    let mut objects = fixture(Reason::Skewed);
    objects.push(
        objects::Pod::named("batch", "train-0")
            .on("gpu-node-2")
            .container("trainer", json!({"nvidia.com/gpu": "1"}))
            .running()
            .json(),
    );
    let expected = "Instances per domain (zone-a: 3, zone-b: 0) differ by 3, more than maxSkew 1. \
        No migration can fix it now: no eligible domain has room for one more Instance. Free room for one more Instance in zone-b.";
    assert_eq!(said(&objects).await, (expected.to_owned(), expected.to_owned()));
}

/// A reconcile records the node labels its diagnosis read (the spread key, and the model label
/// its pods' node selector names), so that the node watch reconciles on those alone.
#[tokio::test(start_paused = true)]
async fn a_reconcile_records_the_node_labels_its_diagnosis_reads() {
    let Harness {
        ctx, replica, server, ..
    } = harness(&fixture(Reason::Satisfied), Mode::Off);
    let replica = with_condition(
        replica,
        condition(
            "True",
            "Satisfied",
            &expected_message(Reason::Satisfied),
            "2026-11-01T10:00:00Z",
        ),
    );
    reconcile(Arc::new(replica), ctx.clone()).await.expect("reconciled");
    drop(server);
    assert_eq!(
        ctx.caches.nodes.keys().iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "models.ome.io/clusterbasemodel.qwen3-0-6b",
            "topology.kubernetes.io/zone"
        ]
    );
}

/// A change that comes before the replica's cache shows the condition last written is compared
/// with that write, not with the cache: the condition never stays on a count that is gone (its
/// own write triggers no reconcile). Skewed's three Instances: one pod goes (a new
/// count written), then comes back while the cache still shows the first condition.
#[tokio::test]
async fn a_change_before_the_cache_shows_the_last_write_is_compared_with_that_write() {
    let objects = fixture(Reason::Skewed);
    let Harness {
        ctx,
        replica,
        mut server,
        ..
    } = harness(&objects, Mode::Off);
    let message = expected_message(Reason::Skewed);
    let cached = Arc::new(with_condition(
        replica,
        condition("False", "Skewed", &message, "2026-11-01T10:00:00Z"),
    ));
    let mut pod: Pod = of_kind::<Pod>(&objects, "Pod")
        .into_iter()
        .find(|p| p.metadata.name.as_deref() == Some("qwen3-0-6b-engine-2-default-0"))
        .expect("the fixture's third pod");
    pods::trim(&mut pod);
    // Gone, as both watches of pods tell it.
    let deleted = watcher::Event::Delete(pod.clone());
    ctx.caches.pods.hold(&deleted);
    ctx.caches.pods.apply(&deleted);
    let reconciling = tokio::spawn(reconcile(cached.clone(), ctx.clone()));
    let (_, _, body, respond) = next(&mut server).await;
    assert_ne!(
        body["status"]["conditions"][0]["message"],
        json!(message),
        "two Instances"
    );
    answer(respond, StatusCode::OK, &serde_json::to_value(&*cached).expect("json"));
    reconciling.await.expect("no panic").expect("reconciled");

    let back = watcher::Event::Apply(pod);
    ctx.caches.pods.hold(&back);
    ctx.caches.pods.apply(&back);
    let reconciling = tokio::spawn(reconcile(cached.clone(), ctx));
    let (method, uri, body, respond) = next(&mut server).await;
    assert_eq!(
        (method.as_str(), uri.as_str()),
        ("PATCH", &*format!("{STATUS_PATH}{APPLY_QUERY}"))
    );
    let expected = json!({"type": "Spread", "status": "False", "reason": "Skewed", "message": message,
        "observedGeneration": 3, "lastTransitionTime": "2026-11-01T10:00:00Z"});
    assert_eq!(body, apply_body(&expected));
    answer(respond, StatusCode::OK, &serde_json::to_value(&*cached).expect("json"));
    reconciling.await.expect("no panic").expect("reconciled");
}

/// The seed's example, its condition already there: one report, applied server-side with the
/// results docs/controller.md ("Reports") gives (the condition's message, the seed's loss of
/// zone-a); the same results again write nothing.
#[tokio::test(start_paused = true)]
async fn the_report_is_applied_once_and_again_only_when_its_results_change() {
    let health = Arc::new(Health::default());
    let reports = Reports::new(Format::OpenReports, "ome-spread", health.clone());
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness_reporting(&fixture(Reason::Satisfied), Mode::Off, reports);
    let message = expected_message(Reason::Satisfied);
    let mut replica = with_condition(
        replica,
        condition("True", "Satisfied", &message, "2026-11-01T10:00:00Z"),
    );
    replica.metadata.uid = Some("7d1e-uid".into());
    let replica = Arc::new(replica);
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let (method, uri, body, respond) = next(&mut server).await;
    assert_eq!(
        (method.as_str(), uri.as_str()),
        (
            "PATCH",
            "/apis/openreports.io/v1alpha1/namespaces/spread-demo/reports/ome-spread-7d1e-uid?&force=true&fieldManager=ome-spread"
        )
    );
    let stamp = body["results"][0]["timestamp"].clone();
    assert!(stamp["seconds"].as_i64().is_some_and(|s| s > 1_700_000_000), "{stamp}");
    let result = |rule: &str, outcome: &str, message: &str, properties: serde_json::Value| {
        json!({"source": "ome-spread", "policy": "clusterwide-ome-spread", "rule": rule, "result": outcome,
            "scored": true, "message": message, "properties": properties, "timestamp": stamp})
    };
    let owner = json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "qwen3-0-6b-engine", "uid": "7d1e-uid"});
    assert_eq!(
        body,
        json!({
            "apiVersion": "openreports.io/v1alpha1", "kind": "Report", "source": "ome-spread",
            "metadata": {"name": "ome-spread-7d1e-uid", "namespace": "spread-demo",
                "labels": {"app.kubernetes.io/managed-by": "ome-spread"}, "ownerReferences": [owner]},
            "scope": {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "namespace": "spread-demo",
                "name": "qwen3-0-6b-engine", "uid": "7d1e-uid"},
            "summary": {"pass": 2, "fail": 0, "warn": 0, "error": 0, "skip": 0},
            "results": [
                result("spread", "pass", &message,
                    json!({"reason": "Satisfied", "instances-per-domain": "zone-a=1,zone-b=1", "skew": "0"})),
                result("domain-loss", "pass",
                    "Losing zone-a leaves 1 of 2 Instances serving, and 0 of the 1 lost can be placed again elsewhere: the loss is not absorbed.",
                    json!({"domain": "zone-a", "left-serving": "1", "instances": "2"})),
            ],
        })
    );
    answer(respond, StatusCode::OK, &body);
    reconciling.await.expect("no panic").expect("reconciled");
    // Any request now would go unanswered, and fail the reconcile after the API timeout.
    reconcile(replica, ctx.clone())
        .await
        .expect("reconciled without a write");
    assert_eq!(health.note_now(), None);
}

/// No Report CRD: said once (in `/readyz`, the reconcile carrying on), and not asked again on
/// the next reconcile.
#[tokio::test(start_paused = true)]
async fn without_the_crd_no_report_is_written_and_the_reconcile_carries_on() {
    let health = Arc::new(Health::default());
    let reports = Reports::new(Format::OpenReports, "ome-spread", health.clone());
    let Harness {
        ctx,
        replica,
        mut server,
        _writers,
    } = harness_reporting(&fixture(Reason::Satisfied), Mode::Off, reports);
    let message = expected_message(Reason::Satisfied);
    let replica = Arc::new(with_condition(
        replica,
        condition("True", "Satisfied", &message, "2026-11-01T10:00:00Z"),
    ));
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let (method, uri, _, respond) = next(&mut server).await;
    assert_eq!(method, "PATCH");
    assert!(uri.starts_with("/apis/openreports.io/v1alpha1/"), "{uri}");
    answer(respond, StatusCode::NOT_FOUND, &failure(404, "NotFound"));
    reconciling.await.expect("no panic").expect("reconciled");
    assert_eq!(
        health.note_now().as_deref(),
        Some(
            "no Report CRD (openreports.io/v1alpha1) in the cluster: no reports are written; install it, or set --reports"
        )
    );
    reconcile(replica, ctx.clone())
        .await
        .expect("reconciled without a write");
}

/// The histogram `ome_spread_event_to_condition_seconds`'s samples, in the order /metrics gives them.
fn event_to_condition(ctx: &ome_spread_controller::context::Context) -> Vec<String> {
    let text = ctx.metrics.encode();
    let samples = text
        .lines()
        .filter(|l| l.starts_with("ome_spread_event_to_condition_seconds"));
    samples.map(String::from).collect()
}

/// The samples of that histogram with `sum` and, per bucket, the conditions timed within it
/// (docs/controller.md: doubling from 1 ms to 16.384 s, then +Inf).
fn timed(sum: &str, within: [u32; 16]) -> Vec<String> {
    let bounds = [
        "0.001", "0.002", "0.004", "0.008", "0.016", "0.032", "0.064", "0.128", "0.256", "0.512", "1.024", "2.048",
        "4.096", "8.192", "16.384", "+Inf",
    ];
    let name = "ome_spread_event_to_condition_seconds";
    let mut samples = vec![format!("{name}_sum {sum}"), format!("{name}_count {}", within[15])];
    for (bound, count) in bounds.iter().zip(within) {
        samples.push(format!("{name}_bucket{{le=\"{bound}\"}} {count}"));
    }
    samples
}

/// The caches of `reason`'s fixture, and its replica with that reason's condition written
/// before under an older message: the Event went out then, only the condition is written.
fn with_older_message(reason: Reason) -> (Harness, Arc<InferenceReplica>) {
    let harness = harness(&fixture(reason), Mode::Off);
    let status = if reason.holds() { "True" } else { "False" };
    let older = condition(status, reason.as_str(), "an older count", "2026-11-01T10:00:00Z");
    let replica = Arc::new(with_condition(harness.replica.clone(), older));
    (harness, replica)
}

/// A condition is timed from the arrival of the first of the events its reconcile acts on (two
/// here, 100 ms apart) to the answer to its write: 150 ms, in the bucket up to 0.256 s (from the
/// second, 50 ms, it would be in the one up to 0.064 s). The events are taken.
#[tokio::test(start_paused = true)]
async fn a_condition_is_timed_from_its_first_event_to_the_answer_to_its_write() {
    let (Harness { ctx, mut server, .. }, replica) = with_older_message(Reason::Skewed);
    let key = ObjectRef::from_obj(&*replica);
    ctx.arrived(vec![key.clone()]);
    sleep(Duration::from_millis(100)).await;
    ctx.arrived(vec![key.clone()]);
    sleep(Duration::from_millis(20)).await;
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let (method, _, _, respond) = next(&mut server).await;
    assert_eq!(method, "PATCH");
    sleep(Duration::from_millis(30)).await;
    answer(respond, StatusCode::OK, &serde_json::to_value(&*replica).expect("json"));
    reconciling.await.expect("no panic").expect("reconciled");
    let once = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
    assert_eq!(event_to_condition(&ctx), timed("0.15", once));
    assert_eq!(ctx.replicas.with(&key, |kept| kept.arrived), None, "taken");
}

/// An event whose reconcile changes no condition is not timed, nor is the write of a later
/// reconcile that no event triggered (a resync).
#[tokio::test(start_paused = true)]
async fn an_event_that_changes_no_condition_is_not_timed() {
    let (Harness { ctx, mut server, .. }, older) = with_older_message(Reason::Satisfied);
    let message = expected_message(Reason::Satisfied);
    let unchanged = with_condition(
        (*older).clone(),
        condition("True", "Satisfied", &message, "2026-11-01T10:00:00Z"),
    );
    ctx.arrived(vec![ObjectRef::from_obj(&unchanged)]);
    reconcile(Arc::new(unchanged), ctx.clone()).await.expect("reconciled");

    let reconciling = tokio::spawn(reconcile(older.clone(), ctx.clone()));
    condition_applied(&mut server, &older).await;
    reconciling.await.expect("no panic").expect("reconciled");
    assert_eq!(event_to_condition(&ctx), timed("0.0", [0; 16]));
}

/// A write that fails leaves its events to the retry: the condition written 5 s later is timed
/// from the first of them.
#[tokio::test(start_paused = true)]
async fn a_failed_write_is_timed_from_the_same_event_when_retried() {
    let (Harness { ctx, mut server, .. }, replica) = with_older_message(Reason::Skewed);
    ctx.arrived(vec![ObjectRef::from_obj(&*replica)]);
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    let (_, _, _, respond) = next(&mut server).await;
    answer(
        respond,
        StatusCode::INTERNAL_SERVER_ERROR,
        &failure(500, "InternalError"),
    );
    reconciling.await.expect("no panic").expect_err("an API error");
    assert_eq!(event_to_condition(&ctx), timed("0.0", [0; 16]));

    sleep(Duration::from_secs(5)).await;
    let reconciling = tokio::spawn(reconcile(replica.clone(), ctx.clone()));
    condition_applied(&mut server, &replica).await;
    reconciling.await.expect("no panic").expect("reconciled");
    let once = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1];
    assert_eq!(event_to_condition(&ctx), timed("5.0", once));
}
