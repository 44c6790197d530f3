//! The large cluster of the benchmarks (`make bench`): 1,000 InferenceServices in namespace
//! `serving`, each with its engine's InferenceReplica, 10,000 pods and 5,000 nodes. Half the
//! replicas run 10 single-pod Instances, half 2 Instances of a leader and 4 workers; each
//! component's pods select the nodes that hold its model (a tenth of the cluster), some tainted,
//! across 3 zones, and every spread holds. Shared by the core's diagnosis benchmark and the
//! playground's browser benchmark.

use ome_spread_core::instance::{InstanceLabels, Runner};
use ome_spread_core::rules::spread_constraint;
use ome_spread_core::settings::Settings;
use ome_spread_core::spread::Spread;
use serde_json::{Value, json};

pub const REPLICAS: usize = 1_000;
const NODES: usize = 5_000;
const MODELS: usize = 50;
const ZONE: &str = "topology.kubernetes.io/zone";
const CLIQUE: &str = "nvidia.com/gpu.clique";

pub struct Cluster {
    /// The ClusterServingRuntime every InferenceService names: no spread fields of its own.
    pub runtime: Value,
    pub services: Vec<Value>,
    pub replicas: Vec<Value>,
    pub pods: Vec<Value>,
    pub nodes: Vec<Value>,
}

fn model_label(model: usize) -> String {
    format!("models.ome.io/clusterbasemodel.model-{model}")
}

pub fn cluster() -> Cluster {
    let nodes = (0..NODES)
        .map(|n| {
            let mut labels = json!({"kubernetes.io/hostname": format!("gpu-node-{n}"), ZONE: format!("zone-{}", n % 3),
                CLIQUE: format!("clique-{}", n / 18), "nvidia.com/gpu.product": "H100"});
            // Each node holds 5 of the 50 models: every model is on a tenth of the nodes.
            for m in 0..5 {
                labels[model_label((n + m * 10) % MODELS)] = json!("Ready");
            }
            let taints = if n % 10 == 0 {
                json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
            } else {
                json!([])
            };
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": format!("gpu-node-{n}"), "labels": labels},
                "spec": {"taints": taints}})
        })
        .collect();
    let (mut services, mut replicas, mut pods) = (Vec::new(), Vec::new(), Vec::new());
    let settings = Settings::default();
    for r in 0..REPLICAS {
        let service = format!("model-{r}");
        let multi_node = r % 2 == 1;
        let spread = json!({"topologySpread": "Required", "topologySpreadKey": ZONE, "topologyKey": CLIQUE});
        services.push(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": service, "namespace": "serving"},
            "spec": {"deploymentMode": "OMENative", "runtime": {"name": "srt"}, "engine": spread}}));
        let mut replica_spec = spread.clone();
        replica_spec["parentRef"] = json!({"name": service});
        replica_spec["component"] = json!("engine");
        replicas.push(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": format!("{service}-engine"), "namespace": "serving"}, "spec": replica_spec}));
        let (instances, size) = if multi_node { (2, 5) } else { (10, 1) };
        for instance in 0..instances {
            for ordinal in 0..size {
                let runner_name = match (multi_node, ordinal) {
                    (false, _) => "default",
                    (true, 0) => "leader",
                    (true, _) => "worker",
                };
                let constraints = match runner_name {
                    "worker" => json!([]),
                    _ => {
                        let labels = InstanceLabels {
                            service: service.as_str().into(),
                            component: "engine".into(),
                            runner: if multi_node { Runner::Leader } else { Runner::Default },
                        };
                        json!([spread_constraint(&labels, Spread::Required, ZONE, &settings)])
                    }
                };
                // Instances land round-robin over the model's nodes, so zones stay balanced; an
                // Instance's workers beside its leader, on its node, so that it is in one rack.
                let model = r % MODELS;
                let node = (model + instance * size * 10) % NODES;
                pods.push(json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("{service}-engine-{instance}-{runner_name}-{ordinal}"), "namespace": "serving",
                        "labels": {"ome.io/managed-by": "OMENative", "ome.io/inferenceservice": service, "component": "engine",
                            "ome.io/runner": runner_name, "ome.io/instance-index": instance.to_string()}},
                    "spec": {"nodeName": format!("gpu-node-{node}"), "schedulerName": "default-scheduler",
                        "nodeSelector": {model_label(model): "Ready"},
                        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                        "topologySpreadConstraints": constraints}}));
            }
        }
    }
    Cluster {
        runtime: json!({"apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime", "metadata": {"name": "srt"},
            "spec": {"engineConfig": {}}}),
        services,
        replicas,
        pods,
        nodes,
    }
}
