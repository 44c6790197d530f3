//! The policy against a plain reference written here (the term pushed or completed by hand), on
//! generated pods shaped as OME v1.3 creates them, some with OME's own terms already rendered on
//! the key in effect or an older one: the answer must be the same value, a pod OME rendered gets
//! no second term (P6, P9, P12), a second evaluation must change nothing (lossless), and a pod the
//! API server would accept stays one it accepts. And P1 and P2 on generated requests of every
//! kind: what is not ours passes unchanged, with no host call.

use ome_spread_core::labels;
use ome_spread_core::rules::Unchanged;
mod cases;

use cases::{AFFINITY, SPREAD, appended, constraint, leader_term};
use ome_spread_sim::policy::{Cluster, Native, Policy, edited, replica, review, with_spec};
use proptest::prelude::*;
use serde_json::{Value, json};

const KEYS: [&str; 3] = [
    "topology.kubernetes.io/zone",
    "nvidia.com/gpu.clique",
    "kubernetes.io/hostname",
];

/// Any JSON a pod might carry in fields the rules do not read, including odd strings.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        (-1e9f64..1e9).prop_map(Value::from),
        "[ -~\u{e9}\u{4e2d}\\\\\"\\{\\}\\[\\]]{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z{}\"\\[\\]]{1,6}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// A key OME rendered an Instance's terms on before a change.
const OLD_KEY: &str = "example.com/rack";

/// The shapes a list on a rule's path may take: absent, null, empty, or terms on some keys,
/// each the operator's or OME's own.
fn terms_on(term: impl Strategy<Value = Value> + 'static) -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        prop::collection::vec(term, 0..3).prop_map(|terms| Some(Value::from(terms))),
    ]
}

fn any_key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![KEYS[0], KEYS[1], KEYS[2], OLD_KEY])
}

/// A spread constraint: an operator's, or OME's own for a runner (completed or not).
fn any_constraint() -> impl Strategy<Value = Value> {
    let settings_fields = prop::sample::select(vec![
        json!({}),
        json!({"minDomains": 2}),
        json!({"nodeTaintsPolicy": "Ignore"}),
    ]);
    prop_oneof![
        any_key().prop_map(operator_constraint),
        (
            any_key(),
            prop::sample::select(vec!["default", "leader"]),
            prop::sample::select(vec!["DoNotSchedule", "ScheduleAnyway"]),
            settings_fields
        )
            .prop_map(|(key, runner, when, fields)| {
                let mut own = constraint("deepseek-v3", "engine", runner, key, when);
                if when == "DoNotSchedule" || fields.get("minDomains").is_none() {
                    own.as_object_mut()
                        .expect("constraint")
                        .extend(fields.as_object().expect("fields").clone());
                }
                own
            }),
    ]
}

/// A required pod-affinity term: an operator's, or OME's own for an Instance's leader.
fn any_term() -> impl Strategy<Value = Value> {
    prop_oneof![
        any_key().prop_map(operator_term),
        (any_key(), prop::sample::select(vec!["0", "1"])).prop_map(|(key, index)| leader_term(
            "deepseek-v3",
            "engine",
            index,
            key
        )),
    ]
}

fn operator_constraint(key: &str) -> Value {
    json!({"maxSkew": 2, "topologyKey": key, "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": {"app": "x"}}})
}

fn operator_term(key: &str) -> Value {
    json!({"topologyKey": key, "labelSelector": {"matchLabels": {"gang": "g"}}})
}

#[derive(Debug, Clone)]
struct Generated {
    runner: &'static str,
    spread: &'static str,
    constraints: Option<Value>,
    affinity: Option<Value>,
    settings: Value,
    incarnation: u32,
    extra: Value,
    pretty: bool,
}

fn generated() -> impl Strategy<Value = Generated> {
    let affinity = prop_oneof![
        Just(None),
        Just(Some(Value::Null)),
        Just(Some(
            json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}})
        )),
        Just(Some(json!({"podAffinity": null}))),
        terms_on(any_term()).prop_map(|terms| Some(match terms {
            None => json!({"podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}),
            Some(terms) => json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": terms}}),
        })),
    ];
    let settings = prop::sample::select(vec![
        json!({}),
        json!({"minDomains": 3}),
        json!({"nodeTaintsPolicy": "Honor"}),
        json!({"minDomains": 3, "nodeTaintsPolicy": "Honor"}),
    ]);
    (
        prop::sample::select(vec!["default", "leader", "worker"]),
        prop::sample::select(vec!["Required", "Preferred"]),
        terms_on(any_constraint()),
        affinity,
        settings,
        1..6u32,
        any_json(),
        any::<bool>(),
    )
        .prop_map(
            |(runner, spread, constraints, affinity, settings, incarnation, extra, pretty)| Generated {
                runner,
                spread,
                constraints,
                affinity,
                settings,
                incarnation,
                extra,
                pretty,
            },
        )
}

fn pod_of(case: &Generated) -> Value {
    let base = if case.runner == "worker" {
        "deepseek-v3-engine-0-worker-0"
    } else {
        "deepseek-v3-engine-0-leader-0"
    };
    let mut review = edited(review(base), |pod| {
        pod["metadata"]["labels"]["ome.io/runner"] = json!(case.runner);
        pod["metadata"]["labels"]["ome.io/instance-incarnation"] = json!(case.incarnation.to_string());
        let spec = pod["spec"].as_object_mut().expect("spec");
        spec.remove("affinity");
        for (field, value) in [
            ("topologySpreadConstraints", &case.constraints),
            ("affinity", &case.affinity),
        ] {
            if let Some(value) = value {
                spec.insert(field.into(), value.clone());
            }
        }
        spec.insert("futureField".into(), case.extra.clone());
    });
    review["request"]["object"]["metadata"]["annotations"]["x"] = json!(case.extra.to_string());
    review
}

/// The plain path: what the policy must answer, computed on the parsed pod from P5 to P12
/// (docs/rules.md).
fn reference(case: &Generated, pod: &Value) -> Value {
    let (path, mut term) = if case.runner == "worker" {
        (AFFINITY, leader_term("deepseek-v3", "engine", "0", KEYS[1]))
    } else {
        let when = if case.spread == "Required" {
            "DoNotSchedule"
        } else {
            "ScheduleAnyway"
        };
        (SPREAD, constraint("deepseek-v3", "engine", case.runner, KEYS[0], when))
    };
    let key = term["topologyKey"].clone();
    let selects_exactly = |t: &Value| {
        t["labelSelector"]["matchLabels"] == term["labelSelector"]["matchLabels"]
            && t["labelSelector"]["matchExpressions"]
                .as_array()
                .is_none_or(Vec::is_empty)
    };
    let list = path
        .iter()
        .fold(pod, |at, step| &at[*step])
        .as_array()
        .cloned()
        .unwrap_or_default();
    let settings = &case.settings;
    if path == SPREAD
        && let Some(at) = list.iter().position(|c| c["topologyKey"] == key && selects_exactly(c))
    {
        let own = &list[at];
        let mut completed = own.clone();
        if settings.get("minDomains").is_some()
            && own.get("minDomains").is_none()
            && own["whenUnsatisfiable"] == "DoNotSchedule"
        {
            completed["minDomains"] = settings["minDomains"].clone();
        }
        if settings.get("nodeTaintsPolicy").is_some() && own.get("nodeTaintsPolicy").is_none() {
            completed["nodeTaintsPolicy"] = settings["nodeTaintsPolicy"].clone();
        }
        if completed == *own {
            return json!({"accepted": true});
        }
        let mut mutated = pod.clone();
        mutated["spec"]["topologySpreadConstraints"][at] = completed;
        return json!({"accepted": true, "mutated_object": mutated});
    }
    if list.iter().any(|t| t["topologyKey"] == key || selects_exactly(t)) {
        return json!({"accepted": true});
    }
    if path == SPREAD {
        if case.spread == "Required" && settings.get("minDomains").is_some() {
            term["minDomains"] = settings["minDomains"].clone();
        }
        if settings.get("nodeTaintsPolicy").is_some() {
            term["nodeTaintsPolicy"] = settings["nodeTaintsPolicy"].clone();
        }
    }
    json!({"accepted": true, "mutated_object": appended(pod, path, &term)})
}

/// Whether OME rendered this pod's own term already, on any key.
fn rendered_by_ome(case: &Generated, pod: &Value) -> bool {
    let (path, labels) = if case.runner == "worker" {
        (
            AFFINITY,
            json!({"ome.io/inferenceservice": "deepseek-v3", "component": "engine", "ome.io/instance-index": "0", "ome.io/runner": "leader"}),
        )
    } else {
        (
            SPREAD,
            json!({"ome.io/inferenceservice": "deepseek-v3", "component": "engine", "ome.io/runner": case.runner}),
        )
    };
    let list = path.iter().fold(pod, |at, step| &at[*step]);
    list.as_array()
        .is_some_and(|terms| terms.iter().any(|t| t["labelSelector"]["matchLabels"] == labels))
}

/// The number of terms in the lists a rule may append to.
fn term_count(pod: &Value) -> usize {
    [SPREAD, AFFINITY]
        .iter()
        .map(|path| {
            path.iter()
                .fold(pod, |at, step| &at[*step])
                .as_array()
                .map_or(0, Vec::len)
        })
        .sum()
}

fn payload(review: &Value, settings: &Value, pretty: bool) -> Vec<u8> {
    let request = json!({"settings": settings, "request": review["request"]});
    if pretty {
        serde_json::to_vec_pretty(&request)
    } else {
        serde_json::to_vec(&request)
    }
    .expect("json")
}

/// The API server's validation of a label selector's `matchLabels`.
fn valid_selector(selector: &Value, field: &str) -> Result<(), String> {
    for (key, value) in selector["matchLabels"].as_object().into_iter().flatten() {
        labels::check_key(key).map_err(|e| format!("{field}.matchLabels key {key}: {e}"))?;
        let value = value
            .as_str()
            .ok_or(format!("{field}.matchLabels[{key}] is not a string"))?;
        labels::check_value(value).map_err(|e| format!("{field}.matchLabels[{key}]: {e}"))?;
    }
    Ok(())
}

/// The API server's validation of `spec.topologySpreadConstraints`.
fn valid_constraints(pod: &Value) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for (i, c) in pod["spec"]["topologySpreadConstraints"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let field = format!("topologySpreadConstraints[{i}]");
        let when = c["whenUnsatisfiable"].as_str().unwrap_or_default();
        let key = c["topologyKey"].as_str().unwrap_or_default();
        if c["maxSkew"].as_i64().is_none_or(|n| n <= 0) {
            return Err(format!("{field}.maxSkew must be greater than 0"));
        }
        if !matches!(when, "DoNotSchedule" | "ScheduleAnyway") {
            return Err(format!("{field}.whenUnsatisfiable {when:?}"));
        }
        labels::check_key(key).map_err(|e| format!("{field}.topologyKey: {e}"))?;
        if !seen.insert((key, when)) {
            return Err(format!("{field}: duplicate {{{key}, {when}}}"));
        }
        if let Some(min) = c.get("minDomains")
            && (when != "DoNotSchedule" || min.as_i64().is_none_or(|n| n <= 0))
        {
            return Err(format!("{field}.minDomains {min} with {when}"));
        }
        for policy in ["nodeAffinityPolicy", "nodeTaintsPolicy"] {
            if c.get(policy).is_some_and(|p| p != "Honor" && p != "Ignore") {
                return Err(format!("{field}.{policy} {}", c[policy]));
            }
        }
        valid_selector(&c["labelSelector"], &format!("{field}.labelSelector"))?;
    }
    Ok(())
}

/// The API server's validation of required pod-affinity terms.
fn valid_affinity(pod: &Value) -> Result<(), String> {
    let terms = &pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
    for (i, term) in terms.as_array().into_iter().flatten().enumerate() {
        let field = format!("requiredDuringSchedulingIgnoredDuringExecution[{i}]");
        labels::check_key(term["topologyKey"].as_str().unwrap_or_default())
            .map_err(|e| format!("{field}.topologyKey: {e}"))?;
        valid_selector(&term["labelSelector"], &format!("{field}.labelSelector"))?;
    }
    Ok(())
}

fn valid(pod: &Value) -> Result<(), String> {
    valid_constraints(pod).and_then(|()| valid_affinity(pod))
}

#[test]
fn the_validation_helpers_refuse_what_the_api_server_refuses() {
    let pod = |constraints: Value| json!({"spec": {"topologySpreadConstraints": constraints}});
    let zone = constraint("s", "engine", "leader", KEYS[0], "DoNotSchedule");
    assert_eq!(valid(&pod(json!([zone.clone()]))), Ok(()));
    let with = |field: &str, value: Value| {
        let mut c = zone.clone();
        c[field] = value;
        pod(json!([c]))
    };
    assert!(valid(&with("maxSkew", json!(0))).is_err());
    assert!(valid(&with("whenUnsatisfiable", json!("Never"))).is_err());
    assert!(valid(&with("topologyKey", json!("my zone"))).is_err());
    assert!(valid(&with("nodeTaintsPolicy", json!("Always"))).is_err());
    assert!(valid(&pod(json!([zone.clone(), zone.clone()]))).is_err());
    let mut preferred = constraint("s", "engine", "leader", KEYS[0], "ScheduleAnyway");
    preferred["minDomains"] = json!(2);
    assert!(valid(&pod(json!([preferred]))).is_err());
    let bad_term = json!({"spec": {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": ""}]}}}});
    assert!(valid(&bad_term).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn answers_equal_the_reference_and_a_second_pass_adds_nothing(case in generated()) {
        let cluster = Cluster::default()
            .with_replica(with_spec(replica("deepseek-v3-engine"), json!({"topologySpread": case.spread})));
        let mut review = pod_of(&case);
        let response = Native.validate(&payload(&review, &case.settings, case.pretty), &cluster);
        prop_assert_eq!(&response, &reference(&case, &review["request"]["object"]));
        if rendered_by_ome(&case, &review["request"]["object"]) {
            let out = response.get("mutated_object").unwrap_or(&review["request"]["object"]);
            prop_assert_eq!(term_count(out), term_count(&review["request"]["object"]), "OME rendered it: never a second term");
        }
        if valid(&review["request"]["object"]).is_ok() {
            let out = response.get("mutated_object").unwrap_or(&review["request"]["object"]);
            prop_assert_eq!(valid(out), Ok(()), "a valid pod stays valid");
        }
        if let Some(mutated) = response.get("mutated_object") {
            review["request"]["object"] = mutated.clone();
            let again = Native.validate(&payload(&review, &case.settings, !case.pretty), &cluster);
            prop_assert_eq!(again, json!({"accepted": true}));
        }
    }
}

/// A request of any kind and operation, and a pod whose metadata, labels and managed-by label
/// take every shape the policy distinguishes; with the answer P1 or P2 must give, if any.
fn early_request() -> impl Strategy<Value = (Value, Option<Unchanged>)> {
    let kinds = prop::sample::select(vec![
        ("", "v1", "Pod"),
        ("apps", "v1", "Deployment"),
        ("example.com", "v1", "Pod"),
    ]);
    let operations = prop::sample::select(vec!["CREATE", "UPDATE", "DELETE", "create"]);
    let managed_by = prop::sample::select(vec![
        None,
        Some(json!("OMENative")),
        Some(json!("Helm")),
        Some(json!(1)),
        Some(Value::Null),
    ]);
    let labels_shape = prop::sample::select(vec!["object", "null", "absent", "string"]);
    (
        kinds,
        operations,
        managed_by,
        labels_shape,
        any_json(),
        any_json(),
        any::<bool>(),
    )
        .prop_map(
            |((group, version, kind), operation, managed_by, labels_shape, extra_label, spec, pretty)| {
                let mut review = review("other-workload");
                let request = &mut review["request"];
                request["kind"] = json!({"group": group, "version": version, "kind": kind});
                request["operation"] = json!(operation);
                let metadata = &mut request["object"]["metadata"];
                let mut labels = json!({"app": "web", "extra": extra_label});
                if let Some(value) = &managed_by {
                    labels[labels::MANAGED_BY] = value.clone();
                }
                match labels_shape {
                    "object" => metadata["labels"] = labels,
                    "null" => metadata["labels"] = Value::Null,
                    "string" => metadata["labels"] = json!("app=web"),
                    _ => {
                        metadata.as_object_mut().expect("metadata").remove("labels");
                    }
                }
                request["object"]["spec"]["futureField"] = spec;
                let pod_create = group.is_empty() && kind == "Pod" && operation == "CREATE";
                let plain_labels = labels_shape == "object" || labels_shape == "absent";
                let not_ome_native = labels_shape == "absent"
                    || managed_by.is_none()
                    || matches!(&managed_by, Some(Value::String(s)) if s != "OMENative");
                let expected = if !pod_create {
                    Some(Unchanged::NotPodCreate)
                } else if plain_labels && not_ome_native {
                    Some(Unchanged::NotOmeNative)
                } else {
                    None
                };
                (
                    json!({"settings": {}, "request": review["request"], "pretty": pretty}),
                    expected,
                )
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10_000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn p1_p2_requests_not_ours_pass_unchanged_without_a_host_call((request, expected) in early_request()) {
        let pretty = request["pretty"] == true;
        let review = json!({"request": request["request"]});
        let cluster = Cluster::default();
        let response = Native.validate(&payload(&review, &json!({}), pretty), &cluster);
        if expected.is_some() {
            prop_assert_eq!(response, json!({"accepted": true}));
            prop_assert_eq!(cluster.calls(), Vec::<Value>::new());
        }
    }
}
