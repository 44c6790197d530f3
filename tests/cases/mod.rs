//! The rules of docs/rules.md as one table of requests and their exact answers. The same table
//! runs against the native core (`tests/rules.rs`) and the built wasm (`tests/wasm.rs`), and is
//! written out under `tests/data/cases/` for kwctl and policy-server (`tests/fixtures.rs`).

#![allow(dead_code)] // each test file uses its part

pub mod catalogue;

use ome_spread_sim::policy::{Cluster, Policy, edited, replica, review, validation_request, with_spec};
use serde_json::{Value, json};

pub const SPREAD: &[&str] = &["spec", "topologySpreadConstraints"];
pub const AFFINITY: &[&str] = &[
    "spec",
    "affinity",
    "podAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
];
const ZONE: &str = "topology.kubernetes.io/zone";
const CLIQUE: &str = "nvidia.com/gpu.clique";

pub enum Expected {
    Accepted,
    AcceptedWithWarning(&'static str),
    /// Accepted, the pod equal to what came in but for `term` appended to the list at `path`.
    Appended(&'static [&'static str], Value),
    /// Accepted, the pod equal to what came in but for `fields` added to its spread constraint
    /// at this index (P12).
    Completed(usize, Value),
    Rejected(&'static str),
}

pub struct Case {
    pub name: &'static str,
    pub review: Value,
    pub settings: Value,
    pub cluster: Cluster,
    /// The replica the one host call must read, or None for no host call at all.
    pub reads: Option<&'static str>,
    pub expected: Expected,
    /// The bytes to send, when they are not the ValidationRequest of `review` and `settings`.
    pub payload: Option<Vec<u8>>,
}

impl Case {
    pub fn payload(&self) -> Vec<u8> {
        self.payload
            .clone()
            .unwrap_or_else(|| validation_request(&self.review, self.settings.clone()))
    }
}

/// The object the policy must return: `object` with `term` appended to the list at `path`.
pub fn appended(object: &Value, path: &[&str], term: &Value) -> Value {
    let mut expected = object.clone();
    let mut at = &mut expected;
    for step in path {
        at = &mut at[*step];
    }
    if at.is_null() {
        *at = json!([]);
    }
    at.as_array_mut().expect("a list").push(term.clone());
    expected
}

pub fn constraint(service: &str, component: &str, runner: &str, key: &str, when: &str) -> Value {
    json!({
        "maxSkew": 1, "topologyKey": key, "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"ome.io/inferenceservice": service, "component": component, "ome.io/runner": runner}},
    })
}

/// `review`'s pod as OME v1.3 renders it before it creates it: `term` already in the list at
/// `path` (its `injectTopologySpread` or `injectGangDomainAffinity`).
pub fn rendered(review: Value, path: &[&str], term: Value) -> Value {
    edited(review, |pod| *pod = appended(pod, path, &term))
}

pub fn leader_term(service: &str, component: &str, index: &str, key: &str) -> Value {
    json!({
        "topologyKey": key,
        "labelSelector": {"matchLabels": {
            "ome.io/inferenceservice": service, "component": component, "ome.io/instance-index": index, "ome.io/runner": "leader",
        }},
    })
}

/// A case with no settings, against the fixtures' replicas.
pub fn case(name: &'static str, review: Value, reads: Option<&'static str>, expected: Expected) -> Case {
    Case {
        name,
        review,
        settings: json!({}),
        cluster: Cluster::with_fixtures(),
        reads,
        expected,
        payload: None,
    }
}

/// `object`'s label set to `value` (null removes it).
pub fn label(object: &mut Value, label: &str, value: Value) {
    match value {
        Value::Null => object["metadata"]["labels"]
            .as_object_mut()
            .expect("labels")
            .remove(label),
        set => object["metadata"]["labels"]
            .as_object_mut()
            .expect("labels")
            .insert(label.into(), set),
    };
}

pub const QWEN_0: &str = "qwen3-0-6b-engine-0-default-0";
const DECODER_0: &str = "qwen3-0-6b-decoder-0-default-0";
const LEADER: &str = "deepseek-v3-engine-0-leader-0";
pub const WORKER: &str = "deepseek-v3-engine-0-worker-0";
/// A key the component used before a change; OME keeps it for an Instance whose live pods carry it.
const OLD_KEY: &str = "example.com/rack";
pub const QWEN: Option<&str> = Some("qwen3-0-6b-engine");
pub const DEEPSEEK: Option<&str> = Some("deepseek-v3-engine");
/// The runtime's own words, namespace and all (policy-evaluator 0.30 prints it as an Option).
const NOT_FOUND: &str = "cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: Cannot find ome.io/v1beta1/InferenceReplica named 'qwen3-0-6b-engine' inside of namespace 'Some(\"spread-demo\")'";
/// What a real API server answers the policy-server's service account without the RBAC.
const FORBIDDEN: &str = "inferencereplicas.ome.io \"qwen3-0-6b-engine\" is forbidden: User \"system:serviceaccount:kubewarden:policy-server\" cannot get resource \"inferencereplicas\" in API group \"ome.io\" in the namespace \"spread-demo\"";

pub fn all() -> Vec<Case> {
    [p1_to_p3(), p4_and_p5(), p6_p7_and_p12(), p8_to_p11_and_bad_input()]
        .into_iter()
        .flatten()
        .collect()
}

pub fn required_zone() -> Value {
    constraint("qwen3-0-6b", "engine", "default", ZONE, "DoNotSchedule")
}

fn leader_zone() -> Value {
    constraint("deepseek-v3", "engine", "leader", ZONE, "DoNotSchedule")
}

pub fn worker_term() -> Value {
    leader_term("deepseek-v3", "engine", "0", CLIQUE)
}

/// The fixtures, with qwen3's replica given `fields`.
fn qwen_with(fields: Value) -> Cluster {
    Cluster::with_fixtures().with_replica(with_spec(replica("qwen3-0-6b-engine"), fields))
}

/// The fixtures, with deepseek-v3's replica given `fields`.
fn deepseek_with(fields: Value) -> Cluster {
    Cluster::with_fixtures().with_replica(with_spec(replica("deepseek-v3-engine"), fields))
}

/// qwen3's first pod, changed.
pub fn qwen_pod(change: impl FnOnce(&mut Value)) -> Value {
    edited(review(QWEN_0), change)
}

/// deepseek-v3's first worker, changed.
pub fn worker_pod(change: impl FnOnce(&mut Value)) -> Value {
    edited(review(WORKER), change)
}

/// P1 to P3: which pods, and which replica.
#[rustfmt::skip]
fn p1_to_p3() -> Vec<Case> {
    use Expected::*;
    vec![
        case("p1_update_of_an_ome_pod_is_accepted_unchanged", edited_request(review(QWEN_0), |r| r["operation"] = json!("UPDATE")), None, Accepted),
        case("p1_create_of_a_deployment_is_accepted_unchanged", edited_request(review(QWEN_0), |r| r["kind"] = json!({"group": "apps", "version": "v1", "kind": "Deployment"})), None, Accepted),
        case("p2_pod_of_another_workload_is_accepted_without_a_host_call", review("other-workload"), None, Accepted),
        case("p2_pod_managed_by_another_mode_is_accepted_without_a_host_call", qwen_pod(|p| label(p, "ome.io/managed-by", json!("RawDeployment"))), None, Accepted),
        case("p2_pod_without_labels_is_accepted_without_a_host_call", qwen_pod(|p| { p["metadata"].as_object_mut().expect("metadata").remove("labels"); }), None, Accepted),
        // P3: which replica, and what when it cannot be read.
        Case { cluster: Cluster::with_fixtures().with_replica(json!({"kind": "InferenceReplica", "metadata": {"name": "renamed-replica", "namespace": "spread-demo"}, "spec": {"topologySpread": "Required", "topologySpreadKey": ZONE}})),
            ..case("p3_controller_owner_reference_names_the_replica", qwen_pod(|p| p["metadata"]["ownerReferences"][0]["name"] = json!("renamed-replica")), Some("renamed-replica"), Appended(SPREAD, required_zone())) },
        case("p3_without_owner_reference_the_labels_name_the_replica", qwen_pod(|p| { p["metadata"].as_object_mut().expect("metadata").remove("ownerReferences"); }), QWEN, Appended(SPREAD, required_zone())),
        case("p3_a_non_controller_owner_reference_is_not_followed", qwen_pod(|p| p["metadata"]["ownerReferences"][0]["controller"] = json!(false)), QWEN, Appended(SPREAD, required_zone())),
        case("p3_generate_name_pod_without_namespace_uses_the_request_namespace", qwen_pod(|p| {
            let metadata = p["metadata"].as_object_mut().expect("metadata");
            metadata.remove("name");
            metadata.remove("namespace");
            metadata.insert("generateName".into(), json!("qwen3-0-6b-engine-0-default-"));
        }), QWEN, Appended(SPREAD, required_zone())),
        Case { cluster: Cluster::default(), ..case("p3_missing_replica_is_rejected_with_the_host_reason", review(QWEN_0), QWEN, Rejected(NOT_FOUND)) },
        Case { cluster: Cluster::default().forbidding(FORBIDDEN),
            ..case("p3_forbidden_read_is_rejected_with_the_host_reason", review(QWEN_0), QWEN, Rejected("cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: inferencereplicas.ome.io \"qwen3-0-6b-engine\" is forbidden: User \"system:serviceaccount:kubewarden:policy-server\" cannot get resource \"inferencereplicas\" in API group \"ome.io\" in the namespace \"spread-demo\": Forbidden")) },
        Case { cluster: Cluster::default(), settings: json!({"onMissingReplica": "Accept"}),
            ..case("p3_missing_replica_with_on_missing_replica_accept_is_accepted_with_a_warning", review(QWEN_0), QWEN, AcceptedWithWarning("cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: Cannot find ome.io/v1beta1/InferenceReplica named 'qwen3-0-6b-engine' inside of namespace 'Some(\"spread-demo\")'; admitted without spread (onMissingReplica: Accept)")) },
        Case { cluster: Cluster::default().undecodable("<html>502</html>"),
            ..case("p3_host_answer_that_is_not_json_is_rejected", review(QWEN_0), QWEN, Rejected("cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: Error deserializing response: expected value at line 1 column 1")) },
        Case { cluster: Cluster::default().with_raw_answer("spread-demo", "qwen3-0-6b-engine", br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "qwen3-0-6b-engine", "namespace": "spread-demo"}, "data": {}}"#),
            ..case("p3_host_answer_of_another_kind_is_rejected", review(QWEN_0), QWEN, Rejected("cannot read InferenceReplica spread-demo/qwen3-0-6b-engine: the host answered with kind \"ConfigMap\", not InferenceReplica")) },
    ]
}

/// P4 and P5: the replica's fields, and the constraint the leader or only pod gets.
#[rustfmt::skip]
fn p4_and_p5() -> Vec<Case> {
    use Expected::*;
    vec![
        // P4: the replica's fields.
        Case { cluster: qwen_with(json!({"topologySpread": "Always"})),
            ..case("p4_unknown_topology_spread_is_rejected", review(QWEN_0), QWEN, Rejected("InferenceReplica spread-demo/qwen3-0-6b-engine: spec.topologySpread is \"Always\": must be Required, Preferred or unset")) },
        Case { cluster: qwen_with(json!({"topologySpread": "required"})),
            ..case("p4_lower_case_topology_spread_is_rejected", review(QWEN_0), QWEN, Rejected("InferenceReplica spread-demo/qwen3-0-6b-engine: spec.topologySpread is \"required\": must be Required, Preferred or unset")) },
        Case { cluster: qwen_with(json!({"topologySpreadKey": "topology zone"})),
            ..case("p4_spread_key_that_is_not_a_label_key_is_rejected", review(QWEN_0), QWEN, Rejected("InferenceReplica spread-demo/qwen3-0-6b-engine: spec.topologySpreadKey is \"topology zone\": not a valid label key: a name must be alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character")) },
        Case { cluster: deepseek_with(json!({"topologyKey": 7})),
            ..case("p4_topology_key_of_the_wrong_type_is_rejected_even_for_a_worker", review("deepseek-v3-engine-0-worker-0"), DEEPSEEK, Rejected("InferenceReplica spread-demo/deepseek-v3-engine: spec.topologyKey is 7: must be a label key (a string)")) },
        Case { cluster: Cluster::default().with_raw_answer("spread-demo", "qwen3-0-6b-engine", br#"{"kind": "InferenceReplica", "spec": "Required"}"#),
            ..case("p4_replica_spec_that_is_not_an_object_is_rejected", review(QWEN_0), QWEN, Rejected("InferenceReplica spread-demo/qwen3-0-6b-engine: spec is \"Required\": must be an object")) },
        // P5: the leader or only pod gets the constraint.
        case("p5_seed_instance_0_gets_the_required_zone_constraint", review(QWEN_0), QWEN, Appended(SPREAD, required_zone())),
        case("p5_seed_instance_1_gets_the_required_zone_constraint", review("qwen3-0-6b-engine-1-default-0"), QWEN, Appended(SPREAD, required_zone())),
        case("p5_preferred_gets_schedule_anyway", review("qwen3-8b-engine-0-default-0"), Some("qwen3-8b-engine"), Appended(SPREAD, constraint("qwen3-8b", "engine", "default", ZONE, "ScheduleAnyway"))),
        case("p5_leader_gets_the_zone_constraint_for_its_runner", review("deepseek-v3-engine-0-leader-0"), DEEPSEEK, Appended(SPREAD, leader_zone())),
        Case { cluster: deepseek_with(json!({"topologySpreadKey": null})),
            ..case("p5_without_spread_key_the_leader_spreads_on_the_topology_key", review("deepseek-v3-engine-0-leader-0"), DEEPSEEK, Appended(SPREAD, constraint("deepseek-v3", "engine", "leader", CLIQUE, "DoNotSchedule"))) },
        Case { cluster: Cluster::with_fixtures().with_replica(with_spec(json!({"kind": "InferenceReplica", "metadata": {"name": "qwen3-0-6b-decoder", "namespace": "spread-demo"}, "spec": {}}), json!({"topologySpread": "Required", "topologySpreadKey": "rack"}))),
            ..case("p5_decoder_spreads_separately_from_the_engine", edited_request(qwen_pod(|p| {
                label(p, "component", json!("decoder"));
                p["metadata"]["name"] = json!(DECODER_0);
                p["spec"]["hostname"] = json!(DECODER_0);
                p["spec"]["subdomain"] = json!("qwen3-0-6b-decoder-headless");
                p["metadata"]["ownerReferences"][0]["name"] = json!("qwen3-0-6b-decoder");
                // The decoder's own `OME_*` environment (`render.go` `buildOMENativeEnv`).
                for var in p["spec"]["containers"][0]["env"].as_array_mut().expect("env") {
                    match var["name"].as_str() {
                        Some("OME_COMPONENT") => var["value"] = json!("decoder"),
                        Some("OME_INSTANCE_SUBDOMAIN") => var["value"] = json!("qwen3-0-6b-decoder-0"),
                        _ => {}
                    }
                }
            }), |r| r["name"] = json!(DECODER_0)), Some("qwen3-0-6b-decoder"), Appended(SPREAD, constraint("qwen3-0-6b", "decoder", "default", "rack", "DoNotSchedule"))) },
        Case { settings: json!({"maxSkew": 2, "minDomains": 3, "nodeTaintsPolicy": "Honor"}),
            ..case("p5_settings_shape_a_required_constraint", review(QWEN_0), QWEN, Appended(SPREAD, json!({
                "maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}},
                "minDomains": 3, "nodeTaintsPolicy": "Honor",
            }))) },
        Case { settings: json!({"minDomains": 3, "nodeTaintsPolicy": "Ignore"}),
            ..case("p5_min_domains_is_never_set_on_a_preferred_constraint", review("qwen3-8b-engine-0-default-0"), Some("qwen3-8b-engine"), Appended(SPREAD, json!({
                "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-8b", "component": "engine", "ome.io/runner": "default"}},
                "nodeTaintsPolicy": "Ignore",
            }))) },
        case("p5_constraint_is_appended_after_one_on_another_key", qwen_pod(|p| p["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "x"}}}])), QWEN, Appended(SPREAD, required_zone())),
        case("p5_null_constraint_list_is_replaced_by_a_list", qwen_pod(|p| p["spec"]["topologySpreadConstraints"] = Value::Null), QWEN, Appended(SPREAD, required_zone())),
        // P4: an empty key is unset, as OME reads it.
        Case { cluster: deepseek_with(json!({"topologySpreadKey": ""})),
            ..case("p4_empty_spread_key_falls_back_to_the_topology_key", review(LEADER), DEEPSEEK, Appended(SPREAD, constraint("deepseek-v3", "engine", "leader", CLIQUE, "DoNotSchedule"))) },
        Case { cluster: deepseek_with(json!({"topologyKey": ""})),
            ..case("p4_empty_topology_key_gives_the_worker_nothing", review(WORKER), DEEPSEEK, Accepted) },
        Case { cluster: deepseek_with(json!({"topologyKey": ""})),
            ..case("p4_empty_topology_key_leaves_the_leader_its_spread_key", review(LEADER), DEEPSEEK, Appended(SPREAD, leader_zone())) },
        Case { cluster: qwen_with(json!({"topologySpreadKey": "", "topologyKey": ""})),
            ..case("p4_both_keys_empty_is_no_key", review(QWEN_0), QWEN, Accepted) },
    ]
}

/// P6, P7, P10 and P12: the constraints OME rendered itself, completed or left as they are; an
/// Instance on its second slot (P5) beside OME's constraint on its older key.
#[rustfmt::skip]
fn p6_p7_and_p12() -> Vec<Case> {
    use Expected::*;
    vec![
        // P6: OME rendered the constraint itself, on the key in effect or on the Instance's older key.
        case("p6_ome_constraint_on_the_spread_key_is_kept", rendered(review(QWEN_0), SPREAD, required_zone()), QWEN, Accepted),
        Case { cluster: deepseek_with(json!({"topologySpreadKey": null})),
            ..case("p6_ome_constraint_on_an_older_key_is_kept", rendered(review(LEADER), SPREAD, constraint("deepseek-v3", "engine", "leader", OLD_KEY, "DoNotSchedule")), DEEPSEEK, Accepted) },
        // An Instance on its second slot is the same Instance: its anchor is spread, and OME's own
        // constraint on its older key kept, as on its first.
        case("p5_an_instance_on_its_second_slot_gets_the_constraint", on_second_slot(review(QWEN_0)), QWEN, Appended(SPREAD, required_zone())),
        Case { cluster: deepseek_with(json!({"topologySpreadKey": null})),
            ..case("p6_ome_constraint_on_an_older_key_is_kept_on_the_second_slot", rendered(on_second_slot(review(LEADER)), SPREAD, constraint("deepseek-v3", "engine", "leader", OLD_KEY, "DoNotSchedule")), DEEPSEEK, Accepted) },
        case("p6_a_constraint_for_another_runner_is_not_omes_for_this_pod", rendered(review(LEADER), SPREAD, constraint("deepseek-v3", "engine", "default", OLD_KEY, "DoNotSchedule")), DEEPSEEK, Appended(SPREAD, leader_zone())),
        case("p6_a_selector_with_match_expressions_is_not_omes", rendered(review(QWEN_0), SPREAD, json!({
            "maxSkew": 1, "topologyKey": OLD_KEY, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"},
                              "matchExpressions": [{"key": "ome.io/revision-hash", "operator": "In", "values": ["6b9f7c8d4"]}]},
        })), QWEN, Appended(SPREAD, required_zone())),
        case("p6_a_selector_with_another_label_is_not_omes", rendered(review(QWEN_0), SPREAD, json!({
            "maxSkew": 1, "topologyKey": OLD_KEY, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default", "ome.io/instance-index": "0"}},
        })), QWEN, Appended(SPREAD, required_zone())),
        // P12: the settings complete OME's own constraint on the spread key, and nothing else.
        Case { settings: json!({"minDomains": 3, "nodeTaintsPolicy": "Honor"}),
            ..case("p12_settings_complete_omes_constraint_in_place", rendered(review(QWEN_0), SPREAD, required_zone()), QWEN, Completed(0, json!({"minDomains": 3, "nodeTaintsPolicy": "Honor"}))) },
        Case { settings: json!({"maxSkew": 2, "nodeTaintsPolicy": "Ignore"}),
            ..case("p12_completion_finds_omes_constraint_after_an_operators", rendered(rendered(review(LEADER), SPREAD, json!({"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "x"}}})), SPREAD, leader_zone()),
                DEEPSEEK, Completed(1, json!({"nodeTaintsPolicy": "Ignore"}))) },
        Case { settings: json!({"minDomains": 3, "nodeTaintsPolicy": "Honor"}),
            ..case("p12_a_preferred_constraint_never_gets_min_domains", rendered(review("qwen3-8b-engine-0-default-0"), SPREAD, constraint("qwen3-8b", "engine", "default", ZONE, "ScheduleAnyway")), Some("qwen3-8b-engine"), Completed(0, json!({"nodeTaintsPolicy": "Honor"}))) },
        Case { settings: json!({"minDomains": 3}),
            ..case("p12_nothing_to_add_to_a_preferred_constraint_leaves_it", rendered(review("qwen3-8b-engine-0-default-0"), SPREAD, constraint("qwen3-8b", "engine", "default", ZONE, "ScheduleAnyway")), Some("qwen3-8b-engine"), Accepted) },
        Case { settings: json!({"minDomains": 3, "nodeTaintsPolicy": "Honor"}),
            ..case("p12_fields_the_constraint_sets_are_never_rewritten", rendered(review(QWEN_0), SPREAD, json!({
                "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}},
                "minDomains": 2, "nodeTaintsPolicy": "Ignore",
            })), QWEN, Accepted) },
        Case { settings: json!({"minDomains": 3, "nodeTaintsPolicy": "Honor"}),
            ..case("p12_an_operator_constraint_is_never_completed", rendered(review(QWEN_0), SPREAD, json!({"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "mine"}}})), QWEN, Accepted) },
        Case { settings: json!({"minDomains": 3, "nodeTaintsPolicy": "Honor"}), cluster: deepseek_with(json!({"topologySpreadKey": null})),
            ..case("p12_omes_constraint_on_an_older_key_is_not_completed", rendered(review(LEADER), SPREAD, constraint("deepseek-v3", "engine", "leader", OLD_KEY, "DoNotSchedule")), DEEPSEEK, Accepted) },
        // P7, P10 on pods OME rendered before the spread was turned off: left as they are.
        Case { cluster: qwen_with(json!({"topologySpread": null})),
            ..case("p7_unset_spread_leaves_an_ome_rendered_pod_as_it_is", rendered(review(QWEN_0), SPREAD, required_zone()), QWEN, Accepted) },
        Case { cluster: deepseek_with(json!({"topologyKey": null})),
            ..case("p10_a_worker_ome_rendered_keeps_its_term_and_gets_no_constraint", rendered(review(WORKER), AFFINITY, leader_term("deepseek-v3", "engine", "0", OLD_KEY)), DEEPSEEK, Accepted) },
        // P6, P7: unchanged.
        case("p6_operator_constraint_on_the_spread_key_wins", qwen_pod(|p| p["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 3, "topologyKey": ZONE, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "mine"}}}])), QWEN, Accepted),
        Case { cluster: qwen_with(json!({"topologySpread": null})),
            ..case("p7_unset_topology_spread_leaves_the_pod_unchanged", review(QWEN_0), QWEN, Accepted) },
        Case { cluster: qwen_with(json!({"topologySpreadKey": null, "topologyKey": null})),
            ..case("p7_no_key_leaves_the_pod_unchanged", review(QWEN_0), QWEN, Accepted) },
    ]
}

/// P8 to P11, the worker and the labels a rule needs, and bad input.
#[rustfmt::skip]
fn p8_to_p11_and_bad_input() -> Vec<Case> {
    use Expected::*;
    vec![
        // P8 to P10: the worker.
        case("p8_worker_gets_the_leader_affinity_and_keeps_its_other_affinity", review("deepseek-v3-engine-0-worker-0"), DEEPSEEK, Appended(AFFINITY, worker_term())),
        case("p8_worker_term_is_appended_after_a_term_on_another_key", worker_pod(|p| p["spec"]["affinity"]["podAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "kubernetes.io/hostname", "labelSelector": {"matchLabels": {"cache": "warm"}}}], "preferredDuringSchedulingIgnoredDuringExecution": []})), DEEPSEEK, Appended(AFFINITY, worker_term())),
        case("p8_worker_without_affinity_gets_one", worker_pod(|p| { p["spec"].as_object_mut().expect("spec").remove("affinity"); }), DEEPSEEK, Appended(AFFINITY, worker_term())),
        case("p9_worker_with_a_required_term_on_the_topology_key_is_unchanged", worker_pod(|p| p["spec"]["affinity"]["podAffinity"] = json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": CLIQUE, "labelSelector": {"matchLabels": {"gang": "g1"}}}]})), DEEPSEEK, Accepted),
        case("p9_ome_term_on_the_topology_key_is_kept", rendered(review(WORKER), AFFINITY, worker_term()), DEEPSEEK, Accepted),
        case("p9_ome_term_on_the_instances_older_key_is_kept", rendered(review(WORKER), AFFINITY, leader_term("deepseek-v3", "engine", "0", OLD_KEY)), DEEPSEEK, Accepted),
        case("p9_a_term_for_another_instances_leader_does_not_count", rendered(review(WORKER), AFFINITY, leader_term("deepseek-v3", "engine", "1", OLD_KEY)), DEEPSEEK, Appended(AFFINITY, worker_term())),
        Case { cluster: deepseek_with(json!({"topologyKey": null})),
            ..case("p10_worker_never_gets_a_spread_constraint", review("deepseek-v3-engine-0-worker-0"), DEEPSEEK, Accepted) },
        // P11: labels a rule needs.
        case("p11_missing_runner_is_rejected", qwen_pod(|p| label(p, "ome.io/runner", Value::Null)), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label ome.io/runner is missing")),
        case("p11_unknown_runner_is_rejected", qwen_pod(|p| label(p, "ome.io/runner", json!("coordinator"))), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label ome.io/runner is \"coordinator\": must be default, leader or worker")),
        case("p11_missing_inference_service_is_rejected", qwen_pod(|p| label(p, "ome.io/inferenceservice", Value::Null)), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label ome.io/inferenceservice is missing")),
        case("p11_missing_component_is_rejected", qwen_pod(|p| label(p, "component", Value::Null)), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label component is missing")),
        case("p11_label_that_is_not_a_string_is_rejected", qwen_pod(|p| label(p, "ome.io/runner", json!(1))), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: label ome.io/runner is 1: must be a string")),
        case("p11_worker_index_that_is_not_a_whole_number_is_rejected", worker_pod(|p| label(p, "ome.io/instance-index", json!("-1"))), None, Rejected("pod spread-demo/deepseek-v3-engine-0-worker-0: label ome.io/instance-index is \"-1\": must be a whole number")),
        case("p11_worker_without_index_is_rejected", worker_pod(|p| label(p, "ome.io/instance-index", Value::Null)), None, Rejected("pod spread-demo/deepseek-v3-engine-0-worker-0: label ome.io/instance-index is missing")),
        // Bad input: a clear answer naming the field and the value, never a trap.
        Case { settings: json!({"maxskew": 2}),
            ..case("bad_settings_reach_validate_as_a_rejection", review(QWEN_0), None, Rejected("invalid policy settings: unknown setting \"maxskew\": the settings are maxSkew, minDomains, nodeTaintsPolicy, onMissingReplica")) },
        case("bad_pod_labels_that_are_a_list_are_rejected", qwen_pod(|p| p["metadata"]["labels"] = json!(["ome.io/managed-by"])), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: metadata.labels is [\"ome.io/managed-by\"]: must be an object")),
        case("bad_pod_constraint_list_of_the_wrong_type_is_rejected", qwen_pod(|p| p["spec"]["topologySpreadConstraints"] = json!("zone")), QWEN, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: spec.topologySpreadConstraints is \"zone\": must be a list")),
        case("bad_pod_affinity_of_the_wrong_type_is_rejected", worker_pod(|p| p["spec"]["affinity"] = json!(true)), DEEPSEEK, Rejected("pod spread-demo/deepseek-v3-engine-0-worker-0: spec.affinity is true: must be an object")),
        case("bad_pod_constraint_without_topology_key_is_rejected", qwen_pod(|p| p["spec"]["topologySpreadConstraints"] = json!([{"maxSkew": 1}])), QWEN, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: spec.topologySpreadConstraints[0].topologyKey is null: must be a string")),
        case("bad_request_with_a_null_object_is_rejected", edited_request(review(QWEN_0), |r| r["object"] = Value::Null), None, Rejected("pod spread-demo/(unnamed): object is null: must be a Pod object")),
        case("bad_owner_references_of_the_wrong_type_are_rejected", qwen_pod(|p| p["metadata"]["ownerReferences"] = json!({"name": "x"})), None, Rejected("pod spread-demo/qwen3-0-6b-engine-0-default-0: metadata.ownerReferences is {\"name\":\"x\"}: must be a list")),
    ]
}

/// The pod of a one-pod runner on its Instance's second slot, after a SurgeThenDrain update: OME
/// names and labels it with ordinal 1 (`workload/ops/create.go` `expectedPodNamesForInstance`),
/// its `OME_RUNNER_INDEX` still 0 (`render.go` `buildOMENativeEnv`).
fn on_second_slot(review: Value) -> Value {
    let name = review["request"]["name"].as_str().unwrap_or_default();
    let second = format!("{}1", name.strip_suffix('0').unwrap_or(name));
    let review = edited(review, |pod| {
        pod["metadata"]["name"] = json!(second);
        pod["spec"]["hostname"] = json!(second);
        label(pod, "ome.io/pod-ordinal", json!("1"));
    });
    edited_request(review, |request| request["name"] = json!(second))
}

pub fn edited_request(mut review: Value, change: impl FnOnce(&mut Value)) -> Value {
    change(&mut review["request"]);
    review
}

/// The exact ValidationResponse a case must get.
pub fn expected_response(case: &Case) -> Value {
    match &case.expected {
        Expected::Accepted => json!({"accepted": true}),
        Expected::AcceptedWithWarning(warning) => json!({"accepted": true, "warnings": [warning]}),
        Expected::Appended(path, term) => {
            json!({"accepted": true, "mutated_object": appended(&case.review["request"]["object"], path, term)})
        }
        Expected::Completed(index, fields) => {
            let mut pod = case.review["request"]["object"].clone();
            let constraint = pod["spec"]["topologySpreadConstraints"][index]
                .as_object_mut()
                .expect("a constraint");
            constraint.extend(fields.as_object().expect("fields").clone());
            json!({"accepted": true, "mutated_object": pod})
        }
        Expected::Rejected(message) => json!({"accepted": false, "message": message}),
    }
}

/// Runs every case of the rule table through `policy`.
pub fn check_all(policy: &dyn Policy) {
    check(policy, all());
}

/// Runs `cases` through `policy`, and lists every case whose answer or host calls differ.
pub fn check(policy: &dyn Policy, cases: Vec<Case>) {
    let count = cases.len();
    let mut failures = Vec::new();
    for case in cases {
        let response = policy.validate(&case.payload(), &case.cluster);
        let expected = expected_response(&case);
        if response != expected {
            failures.push(format!("{}:\n  got      {response}\n  expected {expected}", case.name));
        }
        let reads: Vec<String> = case
            .cluster
            .calls()
            .iter()
            .map(|call| {
                format!(
                    "{}/{}",
                    call["namespace"].as_str().unwrap_or("?"),
                    call["name"].as_str().unwrap_or("?")
                )
            })
            .collect();
        let expected_reads: Vec<String> = case.reads.iter().map(|name| format!("spread-demo/{name}")).collect();
        if reads != expected_reads {
            failures.push(format!(
                "{}: host calls {reads:?}, expected {expected_reads:?}",
                case.name
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
