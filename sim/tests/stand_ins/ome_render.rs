use ome_spread_core::pod::Pod;
use ome_spread_sim::stand_in::ome::render::{self, *};
use ome_spread_sim::support::objects::{name, read};
use serde_json::{Value, json};

/// The seed's InferenceService, as the API server returns it (a uid), and its runtime, with
/// the seed's engine shape (1 GPU, 10 CPUs, 30 GiB).
fn seed() -> (Value, Value) {
    let service = json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "qwen3-0-6b", "namespace": "spread-demo", "uid": "isvc-uid"},
        "spec": {"deploymentMode": "OMENative", "model": {"name": "qwen3-0-6b"}, "runtime": {"name": "srt-qwen3-0-6b"},
            "engine": {"minReplicas": 2, "maxReplicas": 2, "topologySpread": "Required",
                "topologySpreadKey": "topology.kubernetes.io/zone"}}});
    let runtime = json!({"apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime",
        "metadata": {"name": "srt-qwen3-0-6b"},
        "spec": {"engineConfig": {"runner": {"name": "engine", "image": "docker.io/lmsysorg/sglang:v0.5.5",
            "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi"},
                "limits": {"nvidia.com/gpu": "1"}}}}}});
    (service, runtime)
}

fn seed_template() -> Value {
    json!({"metadata": {"labels": {"ome.io/managed-by": "OMENative", "ome.io/inferenceservice": "qwen3-0-6b",
            "component": "engine", "ome.io/runner": "default"}},
        "spec": {"containers": [{"name": "engine", "image": "docker.io/lmsysorg/sglang:v0.5.5",
                "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi"},
                    "limits": {"nvidia.com/gpu": "1"}}}],
            "nodeSelector": {"models.ome.io/clusterbasemodel.qwen3-0-6b": "Ready"},
            "readinessGates": [{"conditionType": "ome.io/serving"}]}})
}

#[test]
fn the_seeds_replica_carries_the_settings_in_effect_and_one_default_runner() {
    let (service, runtime) = seed();
    let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
    assert_eq!(
        replica,
        json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": "qwen3-0-6b-engine", "namespace": "spread-demo",
                "labels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine"},
                "ownerReferences": [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceService", "name": "qwen3-0-6b",
                    "uid": "isvc-uid", "controller": true, "blockOwnerDeletion": true}]},
            "spec": {"parentRef": {"name": "qwen3-0-6b"}, "component": "engine", "replicas": 2,
                "topologySpread": "Required", "topologySpreadKey": "topology.kubernetes.io/zone",
                "runners": [{"name": "default", "size": 1, "template": seed_template()}]}})
    );
}

#[test]
fn a_decoder_takes_its_runtimes_decoder_config_and_a_namespaced_base_model() {
    let service = json!({"metadata": {"name": "pd", "namespace": "llm", "uid": "u"},
        "spec": {"deploymentMode": "OMENative", "model": {"name": "llama", "kind": "BaseModel"},
            "runtime": {"name": "srt", "kind": "ServingRuntime"},
            "decoder": {"minReplicas": 3, "topologySpreadKey": "rack"}}});
    let runtime = json!({"kind": "ServingRuntime", "metadata": {"name": "srt", "namespace": "llm"},
        "spec": {"decoderConfig": {"topologySpread": "Preferred", "runner": {"image": "decoder:1"},
            "nodeSelector": {"pool": "gpu"}, "tolerations": [{"key": "gpu", "operator": "Exists"}]},
            "engineConfig": {"topologySpread": "Required", "runner": {"image": "engine:1"}}}});
    let replica = replica(&service, Some(&runtime), "decoder").expect("a replica");
    assert_eq!(
        (
            &replica["metadata"]["name"],
            &replica["spec"]["replicas"],
            &replica["spec"]["topologySpread"],
            &replica["spec"]["topologySpreadKey"]
        ),
        (&json!("pd-decoder"), &json!(3), &json!("Preferred"), &json!("rack"))
    );
    assert_eq!(
        replica["spec"]["runners"][0]["template"]["spec"],
        json!({"containers": [{"image": "decoder:1", "name": "ome-container"}],
            "nodeSelector": {"pool": "gpu", "models.ome.io/llm.basemodel.llama": "Ready"},
            "readinessGates": [{"conditionType": "ome.io/serving"}],
            "tolerations": [{"key": "gpu", "operator": "Exists"}]})
    );
}

#[test]
fn a_malformed_runtime_field_is_left_as_it_is_not_indexed() {
    let (mut service, mut runtime) = seed();
    service["spec"]["engine"]["topologyKey"] = json!("rack");
    runtime["spec"]["engineConfig"]["leader"] = json!({});
    runtime["spec"]["engineConfig"]["worker"] = json!({"size": 1});
    runtime["spec"]["engineConfig"]["affinity"] = json!("anywhere");
    let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
    let pods = instance_pods(&replica, Instance::new(0), Terms::InTree);
    assert_eq!(
        pods[1]["spec"]["affinity"],
        json!("anywhere"),
        "no worker term, no panic"
    );
    let mut odd = json!({"metadata": {"labels": {"ome.io/runner": "default"}}, "spec": "x"});
    in_tree_terms(&mut odd, &replica);
    assert_eq!(odd["spec"], json!("x"));
}

#[test]
fn counts_beyond_a_test_clusters_are_refused() {
    let (mut service, mut runtime) = seed();
    service["spec"]["engine"]["minReplicas"] = json!(100_000);
    assert_eq!(
        replica(&service, Some(&runtime), "engine").map(|_| ()),
        Err("spec.engine.minReplicas is 100000: the stand-in runs at most 64".into())
    );
    service["spec"]["engine"]["minReplicas"] = json!(2);
    runtime["spec"]["engineConfig"]["leader"] = json!({});
    runtime["spec"]["engineConfig"]["worker"] = json!({"size": 17});
    assert_eq!(
        replica(&service, Some(&runtime), "engine").map(|_| ()),
        Err("a worker size of 17: the stand-in runs at most 16".into())
    );
}

#[test]
fn m1_the_runtime_gives_what_the_service_leaves_unset() {
    let (mut service, mut runtime) = seed();
    service["spec"]["engine"]["topologySpreadKey"] = Value::Null;
    runtime["spec"]["engineConfig"]["topologySpreadKey"] = json!("nvidia.com/gpu.clique");
    runtime["spec"]["engineConfig"]["topologySpread"] = json!("Preferred");
    let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
    let spec = &replica["spec"];
    assert_eq!(
        (
            &spec["topologySpread"],
            &spec["topologySpreadKey"],
            &spec["topologyKey"]
        ),
        (&json!("Required"), &json!("nvidia.com/gpu.clique"), &Value::Null)
    );
    service["spec"]["engine"]["topologySpread"] = json!("Sometimes");
    assert_eq!(
        render::replica(&service, Some(&runtime), "engine").map(|_| ()),
        Err("InferenceService spread-demo/qwen3-0-6b spec.engine.topologySpread: \"Sometimes\" must be Required, Preferred or unset".into())
    );
}

#[test]
fn p5_an_only_pod_is_named_labelled_and_constrained_as_ome_renders_it() {
    let (service, runtime) = seed();
    let mut replica = replica(&service, Some(&runtime), "engine").expect("a replica");
    replica["metadata"]["uid"] = json!("ir-uid");
    let pods = instance_pods(&replica, Instance::new(1), Terms::InTree);
    let mut spec = seed_template()["spec"].clone();
    spec["topologySpreadConstraints"] = json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {
            "ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}}}]);
    let revision = revision_hash(&replica);
    assert_eq!(revision.len(), 8);
    assert_eq!(
        pods,
        [json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "qwen3-0-6b-engine-1-default-0", "namespace": "spread-demo",
                "labels": {"ome.io/managed-by": "OMENative", "ome.io/inferenceservice": "qwen3-0-6b", "component": "engine",
                    "ome.io/runner": "default", "ome.io/instance-index": "1", "ome.io/instance-incarnation": "1",
                    "ome.io/pod-ordinal": "0", "ome.io/revision-hash": revision},
                "ownerReferences": [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "qwen3-0-6b-engine",
                    "uid": "ir-uid", "controller": true, "blockOwnerDeletion": true}]},
            "spec": spec})]
    );
    let bare = instance_pods(&replica, Instance::new(1), Terms::Webhook);
    assert_eq!(
        bare[0]["spec"],
        seed_template()["spec"],
        "no terms: the webhook adds them"
    );
}

#[test]
fn p8_a_leader_and_its_workers_from_the_runtimes_worker_size() {
    let (mut service, mut runtime) = seed();
    service["spec"]["engine"]["topologyKey"] = json!("nvidia.com/gpu.clique");
    runtime["spec"]["engineConfig"]["leader"] = json!({});
    runtime["spec"]["engineConfig"]["worker"] = json!({"size": 2});
    let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
    let runners: Vec<(&Value, &Value)> = replica["spec"]["runners"]
        .as_array()
        .expect("runners")
        .iter()
        .map(|r| (&r["name"], &r["size"]))
        .collect();
    assert_eq!(runners, [(&json!("leader"), &json!(1)), (&json!("worker"), &json!(2))]);
    let pods = instance_pods(&replica, Instance::new(0), Terms::InTree);
    let shown: Vec<(&str, &Value, &Value, usize, &Value)> = pods
        .iter()
        .map(|p| {
            let constraints = p["spec"]["topologySpreadConstraints"].as_array().map_or(0, Vec::len);
            let affinity = &p["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"];
            let labels = &p["metadata"]["labels"];
            (
                name(p),
                &labels["ome.io/pod-ordinal"],
                &labels["scheduling.x-k8s.io/pod-group"],
                constraints,
                affinity,
            )
        })
        .collect();
    let leader_term = json!([{"topologyKey": "nvidia.com/gpu.clique", "labelSelector": {"matchLabels": {
        "ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/instance-index": "0",
        "ome.io/runner": "leader"}}}]);
    // The ordinal within the runner (`podLabels`), the group of the Instance (`PodGroupName`).
    let group = json!("qwen3-0-6b-engine-0");
    assert_eq!(
        shown,
        [
            ("qwen3-0-6b-engine-0-leader-0", &json!("0"), &group, 1, &Value::Null),
            ("qwen3-0-6b-engine-0-worker-0", &json!("0"), &group, 0, &leader_term),
            ("qwen3-0-6b-engine-0-worker-1", &json!("1"), &group, 0, &leader_term)
        ]
    );
}

#[test]
fn p6_a_constraint_the_runtime_sets_on_the_key_is_kept() {
    let (service, mut runtime) = seed();
    let own = json!([{"maxSkew": 2, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app": "x"}}}]);
    runtime["spec"]["engineConfig"]["topologySpreadConstraints"] = own.clone();
    let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
    let pods = instance_pods(&replica, Instance::new(0), Terms::InTree);
    assert_eq!(pods[0]["spec"]["topologySpreadConstraints"], own);
}

fn ready_pod(index: &str, ready: bool) -> Pod {
    read(&json!({"metadata": {"labels": {"ome.io/instance-index": index}},
        "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}}))
}

#[test]
fn the_replica_and_the_service_are_ready_in_omes_words() {
    let (service, runtime) = seed();
    let mut replica = replica(&service, Some(&runtime), "engine").expect("a replica");
    replica["metadata"]["generation"] = json!(1);
    replica["status"] = json!({"conditions": [{"type": "Spread", "status": "True", "reason": "Satisfied",
        "message": "", "lastTransitionTime": "2026-12-01T09:00:00Z"}]});
    let (zero, one) = (ready_pod("0", true), ready_pod("1", false));
    let status = replica_status(&replica, &[&zero, &one], "2026-12-01T10:00:00Z");
    // No lifecycle budget: the floor is every Instance (`InstanceAvailabilityFloor`).
    assert_eq!(
        status,
        json!({"observedGeneration": 1, "replicas": 2, "readyReplicas": 1, "availableReplicas": 1, "servingReplicas": 1,
            "labelSelector": "component=engine,ome.io/inferenceservice=qwen3-0-6b,ome.io/managed-by=OMENative",
            "conditions": [
                {"type": "Spread", "status": "True", "reason": "Satisfied", "message": "", "lastTransitionTime": "2026-12-01T09:00:00Z"},
                {"type": "Ready", "status": "False", "reason": "ReplicaCountMismatch",
                    "message": "1/2 Instances serving, need 2 (no rollout in flight)", "lastTransitionTime": "2026-12-01T10:00:00Z"}]})
    );
    replica["status"] = status;
    assert_eq!(
        service_conditions(&service, &[&replica], "2026-12-01T10:00:00Z"),
        json!([
            {"type": "EngineReady", "status": "False", "reason": "InsufficientAvailable",
                "message": "1/2 Instances serving, need 2", "lastTransitionTime": "2026-12-01T10:00:00Z"},
            {"type": "Ready", "status": "False", "reason": "InsufficientAvailable",
                "message": "1/2 Instances serving, need 2", "lastTransitionTime": "2026-12-01T10:00:00Z"}])
    );
    let one = ready_pod("1", true);
    let status = replica_status(&replica, &[&zero, &one], "2026-12-01T10:01:00Z");
    assert_eq!(
        (&status["readyReplicas"], &status["conditions"][1]),
        (
            &json!(2),
            &json!({"type": "Ready", "status": "True", "reason": "AllInstancesReady",
            "message": "2/2 Instances Ready", "lastTransitionTime": "2026-12-01T10:01:00Z"})
        )
    );
    replica["status"] = status;
    assert_eq!(
        service_conditions(&service, &[&replica], "2026-12-01T10:01:00Z"),
        json!([
            {"type": "EngineReady", "status": "True", "reason": "Ready", "message": "All Instances are Ready",
                "lastTransitionTime": "2026-12-01T10:01:00Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:01:00Z"}])
    );
}

#[test]
fn below_every_instance_ready_the_lifecycles_budget_keeps_the_replica_minimum_available() {
    let (service, runtime) = seed();
    let mut replica = replica(&service, Some(&runtime), "engine").expect("a replica");
    let (zero, one, two) = (ready_pod("0", true), ready_pod("1", false), ready_pod("2", true));
    // `maxUnavailable: 1` of 2 wanted: a floor of 1; `"50%"` of 3, rounded up to 2: a floor of 1.
    for (wanted, budget, pods, message) in [
        (2, json!(1), vec![&zero, &one], "1/2 Instances serving (min 1)"),
        (
            3,
            json!("50%"),
            vec![&zero, &one, &two],
            "2/3 Instances serving (min 1)",
        ),
    ] {
        replica["spec"]["replicas"] = json!(wanted);
        replica["spec"]["lifecycle"] = json!({"updateStrategy": {"rollingUpdate": {"maxUnavailable": budget}}});
        let status = replica_status(&replica, &pods, "2026-12-01T10:00:00Z");
        assert_eq!(
            (
                &status["conditions"][0]["status"],
                &status["conditions"][0]["reason"],
                &status["conditions"][0]["message"]
            ),
            (&json!("True"), &json!("MinimumAvailable"), &json!(message))
        );
    }
}

fn runners_of(service: &Value, runtime: &Value) -> Result<Vec<(String, u64)>, String> {
    let replica = replica(service, Some(runtime), "engine")?;
    let runners = replica["spec"]["runners"].as_array().cloned().unwrap_or_default();
    Ok(runners
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or_default().to_owned(),
                r["size"].as_u64().unwrap_or(0),
            )
        })
        .collect())
}

#[test]
fn a_leader_and_a_worker_make_an_instance_multi_pod_as_ome_decides_it() {
    let (mut service, mut runtime) = seed();
    let single = Ok(vec![("default".to_owned(), 1)]);
    // A worker size alone is no multi-pod shape (`components/engine.go`: a leader and a worker).
    runtime["spec"]["engineConfig"]["worker"] = json!({"size": 3});
    assert_eq!(runners_of(&service, &runtime), single);
    // A worker runner of three: the leader on the InferenceService, the worker on its runtime.
    service["spec"]["engine"]["leader"] = json!({});
    assert_eq!(
        runners_of(&service, &runtime),
        Ok(vec![("leader".to_owned(), 1), ("worker".to_owned(), 3)])
    );
    // A leader and a worker with no size: one worker.
    runtime["spec"]["engineConfig"]["worker"] = json!({});
    assert_eq!(
        runners_of(&service, &runtime),
        Ok(vec![("leader".to_owned(), 1), ("worker".to_owned(), 1)])
    );
    service["spec"]["engine"]["worker"] = json!({"size": 0});
    assert_eq!(
        runners_of(&service, &runtime),
        Err("spec.engine.worker.size is 0: OME requires a whole number above 0".to_owned())
    );
}

#[test]
fn a_worker_runner_of_three_numbers_its_pods_and_the_leader_takes_the_instances_slot() {
    let (mut service, mut runtime) = seed();
    service["spec"]["engine"]["topologyKey"] = json!("nvidia.com/gpu.clique");
    runtime["spec"]["engineConfig"]["leader"] = json!({});
    runtime["spec"]["engineConfig"]["worker"] = json!({"size": 3});
    let replica = replica(&service, Some(&runtime), "engine").expect("a replica");
    // Instance 1, repaired once, on its second slot after a SurgeThenDrain update.
    let second_slot = Instance {
        index: 1,
        incarnation: 2,
        slot: 1,
    };
    let pods = instance_pods(&replica, second_slot, Terms::InTree);
    let shown: Vec<(&str, &Value, &Value, &Value)> = pods
        .iter()
        .map(|p| {
            let labels = &p["metadata"]["labels"];
            (
                name(p),
                &labels["ome.io/pod-ordinal"],
                &labels["ome.io/instance-incarnation"],
                &labels["scheduling.x-k8s.io/pod-group"],
            )
        })
        .collect();
    let (two, group) = (json!("2"), json!("qwen3-0-6b-engine-1"));
    assert_eq!(
        shown,
        [
            ("qwen3-0-6b-engine-1-leader-1", &json!("1"), &two, &group),
            ("qwen3-0-6b-engine-1-worker-0", &json!("0"), &two, &group),
            ("qwen3-0-6b-engine-1-worker-1", &json!("1"), &two, &group),
            ("qwen3-0-6b-engine-1-worker-2", &json!("2"), &two, &group)
        ]
    );
    let (service, runtime) = seed();
    let single_pod = render::replica(&service, Some(&runtime), "engine").expect("a replica");
    let only = &instance_pods(&single_pod, second_slot, Terms::InTree)[0];
    assert_eq!(
        (
            name(only),
            &only["metadata"]["labels"]["ome.io/pod-ordinal"],
            &only["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"]
        ),
        ("qwen3-0-6b-engine-1-default-1", &json!("1"), &Value::Null)
    );
}

#[test]
fn min_replicas_0_gives_one_instance_and_unset_the_runtimes() {
    let (mut service, mut runtime) = seed();
    runtime["spec"]["engineConfig"]["minReplicas"] = json!(3);
    let count =
        |service: &Value| replica(service, Some(&runtime), "engine").expect("a replica")["spec"]["replicas"].clone();
    assert_eq!(count(&service), json!(2));
    service["spec"]["engine"]["minReplicas"] = json!(0);
    assert_eq!(count(&service), json!(1));
    service["spec"]["engine"]["minReplicas"] = Value::Null;
    assert_eq!(count(&service), json!(3));
}
