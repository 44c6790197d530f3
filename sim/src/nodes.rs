//! The node stand-in, test-only, as kwok plays nodes: it creates Nodes from a layout (their zone,
//! rack and model labels, GPUs, CPUs, memory and pods, Ready), keeps them Ready, and plays their
//! kubelets: a pod the real kube-scheduler bound to one of them is marked Running and Ready (with
//! a pod IP and every readiness gate's condition True), and a pod being deleted is deleted at once,
//! since no kubelet will confirm its end.
//!
//! Simpler than a kubelet or kwok, on purpose: no containers run, so a pod goes from bound to
//! Ready in one write, and never fails or restarts; pod IPs come from one range for every node;
//! the Ready condition and the node's Lease are renewed on a timer, and nothing else of a node's
//! status changes. It also does two jobs of controllers cluster/up.sh does not run: it takes the
//! `node.kubernetes.io/not-ready` taint the API server puts on a new node off (the node lifecycle
//! controller's), and deletes the pods of a node that is gone (the pod garbage collector's).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::Client;
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::{Value, json};

use crate::api::{self, ApiError, Kind, NODE, POD};

/// The label on every Node the stand-in plays: only their pods are its to run.
pub const STAND_IN_LABEL: &str = "stand-in.spread.ome.io/node";
pub const ZONE: &str = "topology.kubernetes.io/zone";
/// The NVLink domain of a node: its rack.
pub const RACK: &str = "nvidia.com/gpu.clique";
const HOSTNAME: &str = "kubernetes.io/hostname";
const GPU: &str = "nvidia.com/gpu";
/// The seed's model, Ready on every node of the named layouts.
pub const SEED_MODEL: &str = "qwen3-0-6b";
/// The field manager of everything the node stand-in writes.
pub const MANAGER: &str = "node-stand-in";
/// The heartbeat's own field manager: an apply of the Ready condition alone by [`MANAGER`] would
/// drop the rest of the status it applied (the nodes' room).
const HEARTBEAT: &str = "node-stand-in-heartbeat";
const WHO: &str = "node stand-in";

const LEASE: Kind = Kind {
    group: "coordination.k8s.io",
    version: "v1",
    kind: "Lease",
    plural: "leases",
    namespaced: true,
};

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
    pub pods: u32,
    /// Further labels.
    pub labels: BTreeMap<String, String>,
    /// `spec.taints`, as JSON.
    pub taints: Vec<Value>,
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
            pods: 110,
            labels: BTreeMap::new(),
            taints: Vec::new(),
            unschedulable: false,
        }
    }

    fn labels(&self) -> BTreeMap<String, String> {
        let mut labels = self.labels.clone();
        labels.insert(HOSTNAME.into(), self.name.clone());
        labels.insert(STAND_IN_LABEL.into(), "true".into());
        if let Some(zone) = &self.zone {
            labels.insert(ZONE.into(), zone.clone());
        }
        if let Some(rack) = &self.rack {
            labels.insert(RACK.into(), rack.clone());
        }
        for model in &self.models {
            labels.insert(format!("models.ome.io/clusterbasemodel.{model}"), "Ready".into());
        }
        labels
    }
}

/// The named layouts, for `stand-in nodes --layout`.
pub const LAYOUTS: [&str; 3] = ["two-zones", "three-zones", "racks"];

/// A named layout's nodes: `two-zones` (the seed's gpu-node-1 in zone-a, gpu-node-2 in zone-b),
/// `three-zones` (one more, in zone-c), `racks` (2 zones x 2 racks x 2 nodes: room for one
/// Instance of a leader and a worker in each rack).
pub fn layout(name: &str) -> Option<Vec<NodeShape>> {
    let zones = |n: usize| {
        (1..=n)
            .map(|i| {
                let zone = ["a", "b", "c"][i - 1];
                NodeShape::gpu(
                    &format!("gpu-node-{i}"),
                    &format!("zone-{zone}"),
                    &format!("rack-{zone}1"),
                )
            })
            .collect()
    };
    match name {
        "two-zones" => Some(zones(2)),
        "three-zones" => Some(zones(3)),
        "racks" => {
            let mut nodes = Vec::new();
            for zone in ["a", "b"] {
                for rack in 1..=2 {
                    for _ in 0..2 {
                        let name = format!("gpu-node-{}", nodes.len() + 1);
                        nodes.push(NodeShape::gpu(
                            &name,
                            &format!("zone-{zone}"),
                            &format!("rack-{zone}{rack}"),
                        ));
                    }
                }
            }
            Some(nodes)
        }
        _ => None,
    }
}

/// Node shapes from JSON (or YAML read into JSON): a list of objects, each `name` and any of
/// `zone`, `rack`, `models` (a list), `gpus`, `cpus`, `memory`, `pods`, `labels` (a map),
/// `taints` (a list, as in `spec.taints`), `unschedulable`; what is unset is
/// [`NodeShape::gpu`]'s. A bad field is named, not guessed.
pub fn shapes_from_json(value: &Value) -> Result<Vec<NodeShape>, String> {
    let nodes = value.as_array().ok_or("the nodes must be a list")?;
    nodes
        .iter()
        .enumerate()
        .map(|(i, node)| shape_from_json(i, node))
        .collect()
}

fn shape_from_json(i: usize, node: &Value) -> Result<NodeShape, String> {
    let bad = |field: &str, want: &str| format!("node {i}: {field} must be {want}, not {}", node[field]);
    let text = |field: &str| match &node[field] {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        _ => Err(bad(field, "a string")),
    };
    let count = |field: &str, default: u32| match &node[field] {
        Value::Null => Ok(default),
        v => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| bad(field, "a whole number")),
    };
    let name = text("name")?.ok_or(format!("node {i}: a name is needed"))?;
    let mut shape = NodeShape::gpu(&name, "", "");
    shape.zone = text("zone")?;
    shape.rack = text("rack")?;
    if !node["models"].is_null() {
        let models = node["models"].as_array().ok_or_else(|| bad("models", "a list"))?;
        shape.models = models
            .iter()
            .map(|m| {
                m.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| bad("models", "a list of names"))
            })
            .collect::<Result<_, _>>()?;
    }
    shape.gpus = count("gpus", shape.gpus)?;
    shape.cpus = count("cpus", shape.cpus)?;
    shape.pods = count("pods", shape.pods)?;
    if let Some(memory) = text("memory")? {
        shape.memory = memory;
    }
    if !node["labels"].is_null() {
        let labels = node["labels"].as_object().ok_or_else(|| bad("labels", "a map"))?;
        for (key, value) in labels {
            let value = value.as_str().ok_or_else(|| bad("labels", "a map of strings"))?;
            shape.labels.insert(key.clone(), value.to_owned());
        }
    }
    if !node["taints"].is_null() {
        shape.taints = node["taints"]
            .as_array()
            .ok_or_else(|| bad("taints", "a list"))?
            .clone();
    }
    shape.unschedulable = match &node["unschedulable"] {
        Value::Null => false,
        Value::Bool(b) => *b,
        _ => return Err(bad("unschedulable", "true or false")),
    };
    Ok(shape)
}

/// The Node's metadata and spec, as the stand-in applies them.
pub fn node(shape: &NodeShape) -> Value {
    let mut spec = json!({});
    if !shape.taints.is_empty() {
        spec["taints"] = json!(shape.taints);
    }
    if shape.unschedulable {
        spec["unschedulable"] = json!(true);
    }
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": shape.name, "labels": shape.labels()}, "spec": spec})
}

/// The Node's status: its room and a Ready condition, as a kubelet reports them. The Ready
/// condition's transition is `since`, its heartbeat `now`.
pub fn node_status(shape: &NodeShape, host_ip: &str, since: Timestamp, now: Timestamp) -> Value {
    let room = json!({GPU: shape.gpus.to_string(), "cpu": shape.cpus.to_string(),
        "memory": shape.memory, "pods": shape.pods.to_string()});
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": shape.name},
        "status": {
            "capacity": room, "allocatable": room,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "the node stand-in plays this node's kubelet",
                "lastHeartbeatTime": now.to_string(), "lastTransitionTime": since.to_string()}],
            "addresses": [{"type": "InternalIP", "address": host_ip}, {"type": "Hostname", "address": shape.name}],
            "nodeInfo": {"kubeletVersion": "v1.35.4-stand-in", "kubeProxyVersion": "", "operatingSystem": "linux",
                "architecture": "amd64", "containerRuntimeVersion": "stand-in://0", "kernelVersion": "",
                "osImage": "node stand-in", "machineID": "", "systemUUID": "", "bootID": ""}}})
}

/// The node's address, from its place in the layout (10.0.0.1 onwards).
fn host_ip(index: usize) -> String {
    let index = u32::try_from(index).unwrap_or(0);
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 1)) + index).to_string()
}

/// Creates (or brings back to their shape) the nodes, Ready, each with its Lease.
pub async fn create_nodes(client: &Client, shapes: &[NodeShape]) -> Result<(), ApiError> {
    let now = api::now();
    for (index, shape) in shapes.iter().enumerate() {
        api::apply(client, NODE, &node(shape), MANAGER).await?;
        // The API server's TaintNodesByCondition admission taints a new node
        // `node.kubernetes.io/not-ready:NoSchedule`; the node lifecycle controller takes the
        // taint off once the node is Ready, and cluster/up.sh runs none: the taints are set
        // back to the shape's.
        let taints =
            json!({"spec": {"taints": if shape.taints.is_empty() { Value::Null } else { json!(shape.taints) }}});
        api::merge(client, NODE, ("", &shape.name), &taints, MANAGER, false).await?;
        api::apply_status(client, NODE, &node_status(shape, &host_ip(index), now, now), MANAGER).await?;
        renew_lease(client, &shape.name, now).await?;
        let zone = shape.zone.as_deref().unwrap_or("<none>");
        let rack = shape.rack.as_deref().unwrap_or("<none>");
        api::log(WHO, format!("node {} Ready (zone {zone}, rack {rack})", shape.name));
    }
    Ok(())
}

/// The node's heartbeat, which a node lifecycle controller (on a cluster that runs one) reads.
async fn renew_lease(client: &Client, node: &str, now: Timestamp) -> Result<(), ApiError> {
    let lease = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()}});
    api::apply(client, LEASE, &lease, MANAGER).await
}

/// What the stand-in does about a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wanted {
    Nothing,
    /// Bound to a node it plays, not yet Running with every condition True.
    Start,
    /// Being deleted: no kubelet will confirm it, so it goes at once.
    Delete,
}

/// The conditions a pod starts with True: the kubelet's, then each readiness gate's (OME's
/// `ome.io/serving`, which upstream OME sets itself; here the pod simply serves from the start).
fn conditions_wanted(pod: &Value) -> Vec<&str> {
    let mut wanted = vec![
        "PodReadyToStartContainers",
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
    ];
    let gates = pod["spec"]["readinessGates"].as_array().into_iter().flatten();
    wanted.extend(gates.filter_map(|g| g["conditionType"].as_str()));
    wanted
}

/// What the stand-in does about `pod`, given whether its node is one the stand-in plays.
pub fn wanted(pod: &Value, on_its_node: bool) -> Wanted {
    if !on_its_node {
        return Wanted::Nothing;
    }
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        return Wanted::Delete;
    }
    // Started once, the pod is left to whoever owns its gates (OME flips `ome.io/serving`
    // during a drain); a kubelet would recompute Ready from them, the stand-in does not.
    let status = &pod["status"];
    let started = status["phase"] == "Running" && status["podIP"].is_string();
    if started { Wanted::Nothing } else { Wanted::Start }
}

/// The status of `pod` started on its node: Running, its IP, each container running and ready
/// (each init container done), every condition True, as a server-side apply of the status.
pub fn started(pod: &Value, pod_ip: &str, host_ip: &str, now: Timestamp) -> Value {
    let (namespace, name) = api::identity(pod);
    let now = now.to_string();
    let containers = |key: &str| pod["spec"][key].as_array().cloned().unwrap_or_default();
    let uid = pod["metadata"]["uid"].as_str().unwrap_or_default();
    let status_of = |container: &Value, state: Value, ready: bool| {
        let container_name = container["name"].as_str().unwrap_or_default();
        json!({"name": container_name, "image": container["image"], "imageID": "",
            "containerID": format!("stand-in://{uid}/{container_name}"),
            "ready": ready, "started": ready, "restartCount": 0, "state": state})
    };
    let running: Vec<Value> = containers("containers")
        .iter()
        .map(|c| status_of(c, json!({"running": {"startedAt": now}}), true))
        .collect();
    let done: Vec<Value> = containers("initContainers")
        .iter()
        .map(|c| {
            let terminated =
                json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}});
            status_of(c, terminated, false)
        })
        .collect();
    let conditions: Vec<Value> = conditions_wanted(pod)
        .into_iter()
        .map(|kind| json!({"type": kind, "status": "True", "lastTransitionTime": now}))
        .collect();
    let mut status = json!({"phase": "Running", "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
        "hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "startTime": now,
        "conditions": conditions, "containerStatuses": running});
    if !done.is_empty() {
        status["initContainerStatuses"] = json!(done);
    }
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "status": status})
}

/// The node stand-in's state: the nodes it plays (name -> address) and the pod IPs in use.
struct Kubelets {
    client: Client,
    nodes: HashMap<String, String>,
    /// Pod uid -> IP, of every pod seen with one or started here. A watch event or a list
    /// can be older than the stand-in's own write: a pod started here is not started twice.
    ips: HashMap<String, Ipv4Addr>,
    /// The uids of the pods deleted here, for the same reason.
    deleted: HashSet<String>,
    /// Nodes seen that it does not play, until the next heartbeat.
    others: HashSet<String>,
}

impl Kubelets {
    /// The nodes it plays, read again: those with its label.
    async fn refresh_nodes(&mut self) -> Result<(), ApiError> {
        let params = ListParams::default().labels(&format!("{STAND_IN_LABEL}=true"));
        let listed = tokio::time::timeout(api::CALL_TIMEOUT, NODE.all(&self.client).list(&params))
            .await
            .map_err(|_| ApiError::Timeout)??;
        self.nodes = listed
            .items
            .iter()
            .map(|node| {
                let name = node.metadata.name.clone().unwrap_or_default();
                let ip = node.data["status"]["addresses"]
                    .as_array()
                    .and_then(|a| a.iter().find(|a| a["type"] == "InternalIP"))
                    .and_then(|a| a["address"].as_str())
                    .unwrap_or("10.0.0.1")
                    .to_owned();
                (name, ip)
            })
            .collect();
        Ok(())
    }

    /// Keeps each node Ready (its heartbeat and Lease renewed; a Ready condition someone else
    /// set otherwise is set back).
    async fn heartbeat(&mut self) -> Result<(), ApiError> {
        self.refresh_nodes().await?;
        self.others.clear();
        let now = api::now();
        for name in self.nodes.keys() {
            let Some(node) = api::get(&self.client, NODE, "", name).await? else {
                continue;
            };
            let conditions = node["status"]["conditions"].as_array().cloned().unwrap_or_default();
            let ready = conditions.iter().find(|c| c["type"] == "Ready");
            let since = ready
                .filter(|c| c["status"] == "True")
                .and_then(|c| c["lastTransitionTime"].as_str()?.parse().ok());
            if since.is_none() {
                api::log(WHO, format!("node {name} Ready again"));
            }
            let condition = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                    "message": "the node stand-in plays this node's kubelet",
                    "lastHeartbeatTime": now.to_string(), "lastTransitionTime": since.unwrap_or(now).to_string()}]}});
            api::apply_status(&self.client, NODE, &condition, HEARTBEAT).await?;
            renew_lease(&self.client, name, now).await?;
        }
        Ok(())
    }

    /// Whether the stand-in plays `node` (asked of the API server when it is new; a node it
    /// does not play, a real kubelet's, is asked about again only after the next heartbeat).
    async fn plays(&mut self, node: &str) -> bool {
        if !self.nodes.contains_key(node) && !self.others.contains(node) {
            if let Err(e) = self.refresh_nodes().await {
                api::log(WHO, format!("reading the nodes failed: {e}"));
            }
            if !self.nodes.contains_key(node) {
                self.others.insert(node.to_owned());
            }
        }
        self.nodes.contains_key(node)
    }

    fn note_ip(&mut self, pod: &Value) {
        if let Some(ip) = pod["status"]["podIP"].as_str().and_then(|ip| ip.parse().ok()) {
            self.ips.insert(uid(pod).into(), ip);
        }
    }

    /// The pod's IP: the one it has, else the lowest free one in 10.244.0.0/16.
    fn ip_for(&self, pod: &Value) -> Ipv4Addr {
        if let Some(ip) = pod["status"]["podIP"].as_str().and_then(|ip| ip.parse().ok()) {
            return ip;
        }
        let used: HashSet<&Ipv4Addr> = self.ips.values().collect();
        let first = u32::from(Ipv4Addr::new(10, 244, 0, 2));
        (first..first + 65_000)
            .map(Ipv4Addr::from)
            .find(|ip| !used.contains(ip))
            .unwrap_or(Ipv4Addr::new(10, 244, 255, 254))
    }

    /// One pod seen: started, deleted, or left alone; a failure is logged, and the next event or
    /// pass tries again.
    async fn handle(&mut self, pod: &Value) {
        self.note_ip(pod);
        let node = pod["spec"]["nodeName"].as_str().unwrap_or_default().to_owned();
        let on_its_node = !node.is_empty() && self.plays(&node).await;
        let (namespace, name) = api::identity(pod);
        let outcome = match wanted(pod, on_its_node) {
            Wanted::Nothing => return,
            Wanted::Start if self.ips.contains_key(uid(pod)) => return,
            Wanted::Delete if !self.deleted.insert(uid(pod).to_owned()) => return,
            Wanted::Delete => api::delete_now(&self.client, POD, namespace, name)
                .await
                .map(|()| format!("pod {namespace}/{name} on {node} deleted")),
            Wanted::Start => {
                let ip = self.ip_for(pod);
                let host = self.nodes.get(&node).cloned().unwrap_or_default();
                let status = started(pod, &ip.to_string(), &host, api::now());
                let done = api::apply_status(&self.client, POD, &status, MANAGER).await;
                if done.is_ok() {
                    self.ips.insert(uid(pod).into(), ip);
                }
                done.map(|()| format!("pod {namespace}/{name} Running and Ready on {node}, IP {ip}"))
            }
        };
        match outcome {
            Ok(line) => api::log(WHO, line),
            Err(e) => api::log(WHO, format!("pod {namespace}/{name}: {e}")),
        }
    }

    /// Every pod again: whatever an event missed (a failed write) is done on this pass. A pod
    /// bound to a node that is gone is deleted, as the pod garbage collector (which
    /// cluster/up.sh does not run) deletes such orphans.
    async fn resync(&mut self) -> Result<(), ApiError> {
        // The pods before the nodes: a pod's node was there before the pod was bound to it.
        let pods = api::list(&self.client, POD).await?;
        let nodes: HashSet<String> = api::list(&self.client, NODE)
            .await?
            .iter()
            .filter_map(|n| n["metadata"]["name"].as_str().map(str::to_owned))
            .collect();
        for pod in pods {
            let node = pod["spec"]["nodeName"].as_str().unwrap_or_default();
            if !node.is_empty() && !nodes.contains(node) {
                let (namespace, name) = api::identity(&pod);
                match api::delete_now(&self.client, POD, namespace, name).await {
                    Ok(()) => api::log(WHO, format!("pod {namespace}/{name} deleted: its node {node} is gone")),
                    Err(e) => api::log(WHO, format!("pod {namespace}/{name} on the gone node {node}: {e}")),
                }
                continue;
            }
            self.handle(&pod).await;
        }
        Ok(())
    }
}

fn uid(pod: &Value) -> &str {
    pod["metadata"]["uid"].as_str().unwrap_or_default()
}

/// How the node stand-in runs.
#[derive(Debug, Clone)]
pub struct Options {
    /// How often the nodes are kept Ready and every pod looked at again.
    pub heartbeat: Duration,
    /// Stop after this long (None: until the task is dropped).
    pub exit_after: Option<Duration>,
    /// Stop when the API server has not answered for this long (see
    /// [`crate::ome_stand_in::GIVE_UP`]).
    pub give_up: Option<Duration>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            heartbeat: Duration::from_secs(10),
            exit_after: None,
            give_up: Some(crate::ome_stand_in::GIVE_UP),
        }
    }
}

/// Plays the kubelets of the stand-in's nodes: watches every pod, starts those bound to its
/// nodes and deletes those being deleted; keeps its nodes Ready. Restartable: all it needs is
/// read again from the API server. Errors are logged, and the watch resumes with backoff.
pub async fn run(client: Client, options: Options) {
    let mut kubelets = Kubelets {
        client: client.clone(),
        nodes: HashMap::new(),
        ips: HashMap::new(),
        deleted: HashSet::new(),
        others: HashSet::new(),
    };
    if let Err(e) = kubelets.refresh_nodes().await {
        api::log(WHO, format!("reading the nodes failed: {e}"));
    }
    let pods = watcher(POD.all(&client), watcher::Config::default()).default_backoff();
    let mut pods = std::pin::pin!(pods);
    let mut ticks = tokio::time::interval(options.heartbeat);
    let end = async {
        match options.exit_after {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    let mut end = std::pin::pin!(end);
    api::log(WHO, format!("playing {} nodes", kubelets.nodes.len()));
    let mut answered = tokio::time::Instant::now();
    // The watch retries with backoff: an error is said when it changes, not on every retry.
    let mut watch_error: Option<String> = None;
    loop {
        tokio::select! {
            () = &mut end => break,
            _ = ticks.tick() => {
                match kubelets.heartbeat().await {
                    Ok(()) => answered = tokio::time::Instant::now(),
                    Err(e) => api::log(WHO, format!("keeping the nodes Ready failed: {e}")),
                }
                if let Some(give_up) = options.give_up.filter(|give_up| answered.elapsed() >= *give_up) {
                    api::log(WHO, format!("the API server has not answered for {} s: stopping", give_up.as_secs()));
                    break;
                }
                if let Err(e) = kubelets.resync().await {
                    api::log(WHO, format!("reading the pods failed: {e}"));
                }
            }
            event = pods.next() => match event {
                Some(Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))) => {
                    match serde_json::to_value(pod) {
                        Ok(pod) => kubelets.handle(&pod).await,
                        Err(e) => api::log(WHO, format!("a pod that is not JSON: {e}")),
                    }
                }
                Some(Ok(watcher::Event::Delete(pod))) => {
                    let uid = pod.metadata.uid.unwrap_or_default();
                    kubelets.ips.remove(&uid);
                    kubelets.deleted.remove(&uid);
                }
                Some(Ok(watcher::Event::Init | watcher::Event::InitDone)) => watch_error = None,
                Some(Err(e)) => {
                    let said = e.to_string();
                    if watch_error.as_deref() != Some(&said) {
                        api::log(WHO, format!("watching the pods: {said}"));
                        watch_error = Some(said);
                    }
                }
                None => break,
            },
        }
    }
    api::log(WHO, "stopped");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> Timestamp {
        "2026-12-01T10:00:00Z".parse().expect("a time")
    }

    #[test]
    fn the_two_zones_layout_is_the_seeds_nodes() {
        let nodes = layout("two-zones").expect("a layout");
        let shown: Vec<(&str, Option<&str>, Option<&str>)> = nodes
            .iter()
            .map(|n| (n.name.as_str(), n.zone.as_deref(), n.rack.as_deref()))
            .collect();
        assert_eq!(
            shown,
            [
                ("gpu-node-1", Some("zone-a"), Some("rack-a1")),
                ("gpu-node-2", Some("zone-b"), Some("rack-b1"))
            ]
        );
        assert_eq!(
            node(&nodes[0]),
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-node-1", "labels": {
                "kubernetes.io/hostname": "gpu-node-1", "models.ome.io/clusterbasemodel.qwen3-0-6b": "Ready",
                "nvidia.com/gpu.clique": "rack-a1", "stand-in.spread.ome.io/node": "true",
                "topology.kubernetes.io/zone": "zone-a"}}, "spec": {}})
        );
        let status = node_status(&nodes[0], "10.0.0.1", at(), at());
        assert_eq!(
            status["status"]["allocatable"],
            json!({"nvidia.com/gpu": "1", "cpu": "16", "memory": "64Gi", "pods": "110"})
        );
        assert_eq!(status["status"]["conditions"][0]["status"], "True");
    }

    #[test]
    fn the_racks_layout_has_two_nodes_in_each_of_two_racks_of_two_zones() {
        let nodes = layout("racks").expect("a layout");
        let shown: Vec<String> = nodes
            .iter()
            .map(|n| {
                format!(
                    "{} {} {}",
                    n.name,
                    n.zone.as_deref().unwrap_or("-"),
                    n.rack.as_deref().unwrap_or("-")
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                "gpu-node-1 zone-a rack-a1",
                "gpu-node-2 zone-a rack-a1",
                "gpu-node-3 zone-a rack-a2",
                "gpu-node-4 zone-a rack-a2",
                "gpu-node-5 zone-b rack-b1",
                "gpu-node-6 zone-b rack-b1",
                "gpu-node-7 zone-b rack-b2",
                "gpu-node-8 zone-b rack-b2"
            ]
        );
        assert_eq!(layout("three-zones").map(|n| n.len()), Some(3));
        assert_eq!(layout("one-zone"), None);
    }

    #[test]
    fn a_layout_file_gives_each_node_its_shape_and_names_a_bad_field() {
        let file = json!([
            {"name": "gpu-node-1", "zone": "zone-a", "rack": "rack-a1", "gpus": 2},
            {"name": "cpu-node-1", "models": [], "gpus": 0, "unschedulable": true,
                "taints": [{"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"}], "labels": {"pool": "cpu"}}
        ]);
        let shapes = shapes_from_json(&file).expect("shapes");
        let mut first = NodeShape::gpu("gpu-node-1", "zone-a", "rack-a1");
        first.gpus = 2;
        let mut second = NodeShape::gpu("cpu-node-1", "", "");
        (
            second.zone,
            second.rack,
            second.models,
            second.gpus,
            second.unschedulable,
        ) = (None, None, vec![], 0, true);
        second.taints = vec![json!({"key": "node.kubernetes.io/unreachable", "effect": "NoSchedule"})];
        second.labels.insert("pool".into(), "cpu".into());
        assert_eq!(shapes, [first, second]);
        assert_eq!(
            shapes_from_json(&json!([{"name": "n", "gpus": "two"}])),
            Err("node 0: gpus must be a whole number, not \"two\"".into())
        );
        assert_eq!(
            shapes_from_json(&json!([{"zone": "zone-a"}])),
            Err("node 0: a name is needed".into())
        );
        assert_eq!(
            shapes_from_json(&json!({"name": "n"})),
            Err("the nodes must be a list".into())
        );
    }

    fn pod() -> Value {
        json!({"metadata": {"name": "qwen3-0-6b-engine-0-default-0", "namespace": "spread-demo", "uid": "u-1"},
            "spec": {"nodeName": "gpu-node-1", "readinessGates": [{"conditionType": "ome.io/serving"}],
                "containers": [{"name": "engine", "image": "docker.io/lmsysorg/sglang:v0.5.5"}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}})
    }

    #[test]
    fn a_bound_pod_starts_with_every_condition_and_its_readiness_gate_true() {
        assert_eq!(wanted(&pod(), true), Wanted::Start);
        assert_eq!(wanted(&pod(), false), Wanted::Nothing, "not a node it plays");
        let status = started(&pod(), "10.244.0.2", "10.0.0.1", at());
        assert_eq!(
            status,
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "qwen3-0-6b-engine-0-default-0", "namespace": "spread-demo"},
                "status": {"phase": "Running", "podIP": "10.244.0.2", "podIPs": [{"ip": "10.244.0.2"}],
                    "hostIP": "10.0.0.1", "hostIPs": [{"ip": "10.0.0.1"}], "startTime": "2026-12-01T10:00:00Z",
                    "conditions": [
                        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"},
                        {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"},
                        {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"},
                        {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"},
                        {"type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"},
                        {"type": "ome.io/serving", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z"}],
                    "containerStatuses": [{"name": "engine", "image": "docker.io/lmsysorg/sglang:v0.5.5", "imageID": "",
                        "containerID": "stand-in://u-1/engine", "ready": true, "started": true, "restartCount": 0,
                        "state": {"running": {"startedAt": "2026-12-01T10:00:00Z"}}}]}})
        );
        let mut running = pod();
        running["status"] = status["status"].clone();
        assert_eq!(wanted(&running, true), Wanted::Nothing, "started already");
        running["status"]["conditions"][5]["status"] = json!("False");
        assert_eq!(wanted(&running, true), Wanted::Nothing, "its gate is OME's to flip");
    }

    #[test]
    fn a_pod_being_deleted_goes_at_once() {
        let mut deleting = pod();
        deleting["metadata"]["deletionTimestamp"] = json!("2026-12-01T10:00:00Z");
        assert_eq!(wanted(&deleting, true), Wanted::Delete);
        let mut unbound = deleting.clone();
        unbound["spec"]["nodeName"] = Value::Null;
        // The API server deletes an unbound pod at once itself; the caller passes false for it.
        assert_eq!(wanted(&unbound, false), Wanted::Nothing);
    }
}
