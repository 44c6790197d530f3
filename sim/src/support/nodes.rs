//! The cluster suites' nodes, for kwok to play (`cluster/kwok-up.sh`, its stages in
//! cluster/kwok/stages.yaml): each node's shape (zone, rack, the models Ready on it, GPUs, CPUs,
//! memory and pods), the named layouts of OME's how-to, and the Nodes made from them, annotated for
//! kwok, their room in their status. kwok makes each Ready (lifting the API server's not-ready
//! taint), starts the pods kube-scheduler binds there, Running and Ready with every readiness gate
//! True, and ends a pod being deleted at once.

use kube::Client;
use serde_json::{Value, json};

use crate::policy::without_nulls;
use crate::support::api::{self, ApiError, NODE};
use crate::support::wait::eventually;

/// The label on every node of the cluster suites, so that an earlier run's are found again.
pub const SUITE_NODE: &str = "e2e.spread.ome.io/node";
/// The annotation kwok-up.sh selects the nodes kwok plays by.
pub const KWOK_NODE: &str = "kwok.x-k8s.io/node";
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// The NVLink domain of a node: its rack.
pub const RACK: &str = "nvidia.com/gpu.clique";
const HOSTNAME: &str = "kubernetes.io/hostname";
const GPU: &str = "nvidia.com/gpu";
/// The seed's model, Ready on every node of the named layouts.
pub const SEED_MODEL: &str = "qwen3-0-6b";
/// The field manager of what the suites write of their nodes.
const MANAGER: &str = "ome-spread-e2e-nodes";

/// One node of a layout. A missing zone or rack is a node without that label (the seed's
/// `MissingLabel` row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeShape {
    pub name: String,
    pub zone: Option<String>,
    pub rack: Option<String>,
    /// The ClusterBaseModels Ready on the node (`models.ome.io/clusterbasemodel.<model>=Ready`).
    pub models: Vec<String>,
    pub gpus: u32,
    pub cpus: u32,
    /// A Kubernetes quantity, such as `64Gi`.
    pub memory: String,
    /// Cordoned.
    pub unschedulable: bool,
}

impl NodeShape {
    /// A GPU node with room for exactly one of the seed's engine pods (1 GPU, 10 CPUs, 30 GiB),
    /// the seed's model Ready on it.
    pub fn gpu(name: &str, zone: &str, rack: &str) -> Self {
        Self {
            name: name.into(),
            zone: Some(zone.into()),
            rack: Some(rack.into()),
            models: vec![SEED_MODEL.into()],
            gpus: 1,
            cpus: 16,
            memory: "64Gi".into(),
            unschedulable: false,
        }
    }

    fn labels(&self) -> Value {
        let mut labels = json!({HOSTNAME: self.name, SUITE_NODE: "true", ZONE: self.zone, RACK: self.rack});
        for model in &self.models {
            labels[format!("models.ome.io/clusterbasemodel.{model}")] = json!("Ready");
        }
        without_nulls(labels)
    }
}

/// The named layouts, for `stand-in nodes --layout`.
pub const LAYOUTS: [&str; 3] = ["two-zones", "three-zones", "racks"];

/// A named layout's nodes: `two-zones` (the seed's gpu-node-1 in zone-a, gpu-node-2 in zone-b),
/// `three-zones` (one more, in zone-c), `racks` (2 zones x 2 racks x 2 nodes: room for one
/// Instance of a leader and a worker in each rack).
pub fn layout(name: &str) -> Option<Vec<NodeShape>> {
    // Each node's rack, in order; its zone is the rack's letter.
    let racks = match name {
        "two-zones" => "a1 b1",
        "three-zones" => "a1 b1 c1",
        "racks" => "a1 a1 a2 a2 b1 b1 b2 b2",
        _ => return None,
    };
    let shape = |(i, rack): (usize, &str)| {
        let zone = format!("zone-{}", &rack[..1]);
        NodeShape::gpu(&format!("gpu-node-{}", i + 1), &zone, &format!("rack-{rack}"))
    };
    Some(racks.split(' ').enumerate().map(shape).collect())
}

/// The Node, its room in `status` (capacity and allocatable, which kwok keeps), annotated for kwok.
pub fn node(shape: &NodeShape) -> Value {
    let spec = if shape.unschedulable {
        json!({"unschedulable": true})
    } else {
        json!({})
    };
    let room =
        json!({GPU: shape.gpus.to_string(), "cpu": shape.cpus.to_string(), "memory": shape.memory, "pods": "110"});
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": shape.name, "labels": shape.labels(), "annotations": {KWOK_NODE: "fake"}},
        "spec": spec, "status": {"capacity": room, "allocatable": room}})
}

/// Creates (or brings back to their shape) the nodes, and waits until kwok has made each Ready,
/// without the not-ready taint. kwok must be running (`live::kwok`).
pub async fn create_nodes(client: &Client, shapes: &[NodeShape]) -> Result<(), ApiError> {
    for shape in shapes {
        let node = node(shape);
        api::apply(client, NODE, &node, MANAGER, false).await?;
        // The room through the status subresource: an update of the Node leaves its status as it was.
        let status = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": shape.name},
            "status": node["status"]});
        api::apply(client, NODE, &status, MANAGER, true).await?;
    }
    for shape in shapes {
        eventually(&format!("kwok's node {} Ready", shape.name), 60, || async {
            let node = api::get(client, NODE, "", &shape.name).await.ok()??;
            let ready = node["status"]["conditions"]
                .as_array()?
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            let taints = node["spec"]["taints"].as_array().cloned().unwrap_or_default();
            let tainted = taints.iter().any(|t| t["key"] == "node.kubernetes.io/not-ready");
            (ready && !tainted).then_some(())
        })
        .await;
    }
    Ok(())
}
