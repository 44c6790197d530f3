//! The large cluster of the benchmarks (`make bench`): 1,000 InferenceServices in namespace
//! `serving`, each with its engine's InferenceReplica, 10,000 pods and 5,000 nodes. Half the
//! replicas run 10 single-pod Instances, half 2 Instances of a leader and 4 workers; each
//! component's pods select the nodes that hold its model (a tenth of the cluster), some tainted,
//! across 3 zones, and every spread holds. Shared by the core's benchmarks, the controller's and the
//! playground's browser benchmark; the controller's take the pods shaped and sized as OME v1.3
//! creates them ([`ome_pods`]), beside other workloads' ([`other_pods`]).

use ome_spread_core::instance::{InstanceLabels, Runner};
use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService};
use ome_spread_core::rules::spread_constraint;
use ome_spread_core::settings::Settings;
use ome_spread_core::spread::Spread;
use serde_json::{Value, json};

use crate::policy::review;
use crate::support::objects::{Node, Pod, replica};

pub const REPLICAS: usize = 1_000;
/// Nodes `gpu-node-0` to `gpu-node-4999`.
pub const NODES: usize = 5_000;
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

/// OME's objects and the pods of a [`Cluster`] read into the core's model, as the controller's caches
/// hold them.
pub struct Typed {
    pub runtime: ClusterServingRuntime,
    pub services: Vec<InferenceService>,
    pub replicas: Vec<InferenceReplica>,
    pub pods: Vec<ome_spread_core::pod::Pod>,
}

pub fn typed(cluster: &Cluster) -> Typed {
    fn read<K: serde::de::DeserializeOwned>(object: &Value) -> K {
        serde_json::from_value(object.clone()).expect("an object of the model")
    }
    Typed {
        runtime: read(&cluster.runtime),
        services: cluster.services.iter().map(read).collect(),
        replicas: cluster.replicas.iter().map(read).collect(),
        pods: cluster.pods.iter().map(read).collect(),
    }
}

fn model_label(model: usize) -> String {
    format!("models.ome.io/clusterbasemodel.model-{model}")
}

pub fn cluster() -> Cluster {
    let nodes = (0..NODES)
        .map(|n| {
            let name = format!("gpu-node-{n}");
            let mut node = Node::named(&name)
                .label("kubernetes.io/hostname", &name)
                .label(ZONE, &format!("zone-{}", n % 3))
                .label(CLIQUE, &format!("clique-{}", n / 18))
                .label("nvidia.com/gpu.product", "H100");
            // Each node holds 5 of the 50 models: every model is on a tenth of the nodes.
            for m in 0..5 {
                node = node.label(&model_label((n + m * 10) % MODELS), "Ready");
            }
            let taints = if n % 10 == 0 {
                json!([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
            } else {
                json!([])
            };
            node.spec(json!({"taints": taints})).json()
        })
        .collect();
    let (mut services, mut replicas, mut pods) = (Vec::new(), Vec::new(), Vec::new());
    let settings = Settings::default();
    let tolerations = json!([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]);
    for r in 0..REPLICAS {
        let service = format!("model-{r}");
        let multi_node = r % 2 == 1;
        let spread = json!({"topologySpread": "Required", "topologySpreadKey": ZONE, "topologyKey": CLIQUE});
        services.push(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": service, "namespace": "serving"},
            "spec": {"deploymentMode": "OMENative", "runtime": {"name": "srt"}, "engine": spread}}));
        replicas.push(replica("serving", &service, "engine", &spread));
        let (instances, size) = if multi_node { (2, 5) } else { (10, 1) };
        for instance in 0..instances {
            for ordinal in 0..size {
                // OME numbers a runner's pods from 0: the leader, then the workers 0..N-1.
                let (runner_name, runner_ordinal) = match (multi_node, ordinal) {
                    (false, _) => ("default", 0),
                    (true, 0) => ("leader", 0),
                    (true, worker) => ("worker", worker - 1),
                };
                let constraints = match runner_name {
                    "worker" => json!([]),
                    _ => {
                        let labels = InstanceLabels {
                            service: service.as_str(),
                            component: "engine",
                            runner: if multi_node { Runner::Leader } else { Runner::Default },
                        };
                        json!([spread_constraint(&labels, Spread::Required, ZONE, &settings)])
                    }
                };
                // Instances land round-robin over the model's nodes, so zones stay balanced; an
                // Instance's workers beside its leader, on its node, so that it is in one rack.
                let model = r % MODELS;
                let node = (model + instance * size * 10) % NODES;
                let pod = Pod::instance("serving", &service, "engine", instance, runner_name, runner_ordinal)
                    .on(&format!("gpu-node-{node}"))
                    .with("schedulerName", json!("default-scheduler"))
                    .with("nodeSelector", json!({model_label(model): "Ready"}))
                    .with("tolerations", tolerations.clone())
                    .with("topologySpreadConstraints", constraints);
                pods.push(pod.json());
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

/// The cluster's pods as OME creates them: the repository's fixture leader (env, volumes,
/// probes, readiness gates) with each pod's own name, labels, owner, node, node selection and
/// rendered terms, Running where they are placed.
pub fn ome_pods(cluster: &Cluster) -> Vec<Value> {
    let request = review("deepseek-v3-engine-0-leader-0");
    let fixture = &request["request"]["object"];
    cluster
        .pods
        .iter()
        .map(|shape| {
            let mut pod = fixture.clone();
            pod["metadata"]["name"] = shape["metadata"]["name"].clone();
            pod["metadata"]["namespace"] = shape["metadata"]["namespace"].clone();
            pod["metadata"]["labels"] = shape["metadata"]["labels"].clone();
            for field in ["nodeName", "nodeSelector", "tolerations", "topologySpreadConstraints"] {
                pod["spec"][field] = shape["spec"][field].clone();
            }
            // Its controller is its own component's replica, as OME sets it.
            let service = shape["metadata"]["labels"]["ome.io/inferenceservice"]
                .as_str()
                .unwrap_or_default();
            pod["metadata"]["ownerReferences"][0]["name"] = json!(format!("{service}-engine"));
            pod["status"] = json!({"phase": "Running"});
            pod
        })
        .collect()
}

/// `count` pods of other workloads, none with OME's labels, each on its node: training jobs'
/// first, four to a node, eight GPUs each; beyond them, DaemonSets' pods, one of each DaemonSet a
/// node, three containers each with CPU and memory requests (an agent, its exporter, its log
/// shipper), as the cluster's GPU and network operators and its monitoring run them.
pub fn other_pods(cluster: &Cluster, count: usize) -> Vec<Value> {
    let nodes = cluster.nodes.len();
    let trainer = |p: usize| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("trainer-{p}"), "namespace": "training", "labels": {"job-name": format!("job-{}", p / 8)}},
            "spec": {"nodeName": format!("gpu-node-{}", p % nodes),
                "containers": [{"name": "trainer", "image": "trainer", "resources": {"requests": {"cpu": "16", "memory": "128Gi", "nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}}}]},
            "status": {"phase": "Running"}})
    };
    let container = |name: &str, cpu: &str, memory: &str| json!({"name": name, "image": format!("{name}:v1"), "resources": {"requests": {"cpu": cpu, "memory": memory}}});
    let daemon = |d: usize, node: usize| {
        let daemonset = format!("node-agent-{d}");
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{daemonset}-{node}"), "namespace": "kube-system",
                "labels": {"app.kubernetes.io/name": daemonset, "controller-revision-hash": "5d9c8b7f6", "pod-template-generation": "1"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": daemonset, "uid": format!("daemonset-{d}"), "controller": true}]},
            "spec": {"nodeName": format!("gpu-node-{node}"),
                "containers": [container("agent", "100m", "128Mi"), container("exporter", "50m", "64Mi"), container("log-shipper", "50m", "64Mi")]},
            "status": {"phase": "Running"}})
    };
    let trainers = count.min(TRAINERS_A_NODE * nodes);
    let daemons = (trainers..count).map(|p| daemon((p - trainers) / nodes, (p - trainers) % nodes));
    (0..trainers).map(trainer).chain(daemons).collect()
}

/// Training jobs' pods on each node, at most: eight GPUs each, half a node's 64.
const TRAINERS_A_NODE: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_node_instance_is_named_as_ome_names_its_leader_and_workers() {
        let cluster = cluster();
        let names: Vec<&str> = cluster
            .pods
            .iter()
            .map(|pod| pod["metadata"]["name"].as_str().expect("a name"))
            .filter(|name| name.starts_with("model-1-engine-0-"))
            .collect();
        assert_eq!(
            names,
            [
                "model-1-engine-0-leader-0",
                "model-1-engine-0-worker-0",
                "model-1-engine-0-worker-1",
                "model-1-engine-0-worker-2",
                "model-1-engine-0-worker-3",
            ]
        );
    }

    /// `make bench-churn-large`'s 90,000: 20,000 trainers, four to each of the 5,000 nodes, and
    /// fourteen DaemonSets' pods on every node; none OME's, each bound, with requests.
    #[test]
    fn other_pods_are_trainers_four_a_node_then_one_of_each_daemonset_a_node() {
        let pods = other_pods(&cluster(), 90_000);
        assert_eq!(pods.len(), 90_000);
        let name = |p: &Value| p["metadata"]["name"].as_str().unwrap().to_owned();
        let trainers = pods.iter().filter(|p| name(p).starts_with("trainer-")).count();
        let daemons: Vec<&Value> = pods.iter().filter(|p| name(p).starts_with("node-agent-")).collect();
        assert_eq!((trainers, daemons.len()), (20_000, 70_000));
        let mut daemonsets: Vec<&str> = daemons
            .iter()
            .map(|p| p["metadata"]["labels"]["app.kubernetes.io/name"].as_str().unwrap())
            .collect();
        daemonsets.sort();
        daemonsets.dedup();
        assert_eq!(daemonsets.len(), 14);
        let on = |node: &str| pods.iter().filter(|p| p["spec"]["nodeName"] == node).count();
        assert_eq!((on("gpu-node-0"), on("gpu-node-4999")), (18, 18));
        assert_eq!(pods[89_999]["metadata"]["name"], "node-agent-13-4999");
        assert_eq!(pods[89_999]["spec"]["containers"].as_array().unwrap().len(), 3);
        assert!(pods.iter().all(|p| {
            p["metadata"]["labels"]
                .as_object()
                .unwrap()
                .keys()
                .all(|k| !k.contains("ome.io"))
        }));
        assert!(
            pods.iter()
                .all(|p| p["spec"]["containers"][0]["resources"]["requests"]["cpu"].is_string())
        );
    }
}
