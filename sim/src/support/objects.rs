//! The tests' objects as OME v1.3 and a cluster make them, built step by step (as controller-rs's
//! fixtures are): an Instance's pod or another workload's, a node, a component's InferenceReplica. Each gives its JSON
//! with [`Pod::json`], [`Node::json`].

use ome_spread_core::labels::{
    COMPONENT, INFERENCE_SERVICE, INSTANCE_INCARNATION, INSTANCE_INDEX, MANAGED_BY, OME_NATIVE, POD_GROUP, POD_ORDINAL,
    REVISION_HASH, RUNNER,
};
use serde_json::{Value, json};

/// An object's name, or "" where it has none.
pub fn name(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

/// An object's namespace, or "" where it has none.
pub fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// A pod of an OMENative Instance, as OME v1.3 creates it: named
/// `<service>-<component>-<index>-<runner>-<ordinal>` and labelled as its render labels it (its
/// InferenceService, component, runner (`default`, `leader` or `worker`), Instance index and
/// first incarnation, ordinal, revision, and the pod group of a multi-pod Instance's pods).
/// `tests/ome_names.rs` holds it to OME's labels. Like the OME stand-in's, without OME's
/// environment or hostname, which no rule reads.
pub struct Pod(Value);

/// The revision hash of the builder's pods: any one, as long as it is one.
const REVISION: &str = "6d4f8b9c7";

impl Pod {
    /// Pod `ordinal` of `runner` in Instance `index` of the `component` of `namespace/service`,
    /// not yet placed.
    pub fn instance(
        namespace: &str,
        service: &str,
        component: &str,
        index: usize,
        runner: &str,
        ordinal: usize,
    ) -> Self {
        let mut labels = json!({MANAGED_BY: OME_NATIVE, INFERENCE_SERVICE: service, COMPONENT: component,
            RUNNER: runner, INSTANCE_INDEX: index.to_string(), INSTANCE_INCARNATION: "1",
            POD_ORDINAL: ordinal.to_string(), REVISION_HASH: REVISION});
        if runner != "default" {
            labels[POD_GROUP] = json!(format!("{service}-{component}-{index}"));
        }
        Pod(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("{service}-{component}-{index}-{runner}-{ordinal}"), "namespace": namespace,
                "labels": labels},
            "spec": {}}))
    }

    /// A pod of another workload (a training job, a batch job), not yet placed.
    pub fn named(namespace: &str, name: &str) -> Self {
        Pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace}, "spec": {}}))
    }

    /// Its labels, all of them.
    pub fn labels(mut self, labels: Value) -> Self {
        self.0["metadata"]["labels"] = labels;
        self
    }

    /// The label `key` set to `value`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["labels"][key] = json!(value);
        self
    }

    /// `spec.field` set to `value`.
    pub fn with(mut self, field: &str, value: Value) -> Self {
        self.0["spec"][field] = value;
        self
    }

    /// Placed on `node`.
    pub fn on(self, node: &str) -> Self {
        self.with("nodeName", json!(node))
    }

    /// One container, `name`, asking for `requests`.
    pub fn container(self, name: &str, requests: Value) -> Self {
        let containers = json!([{"name": name, "resources": {"requests": requests}}]);
        self.with("containers", containers)
    }

    /// Running, as its kubelet reports it once started.
    pub fn running(mut self) -> Self {
        self.0["status"] = json!({"phase": "Running"});
        self
    }

    pub fn json(self) -> Value {
        self.0
    }
}

/// A pod's JSON read into the core's model of a pod, as the controller and `explain` read it.
pub fn read(pod: &Value) -> ome_spread_core::pod::Pod {
    serde_json::from_value(pod.clone()).expect("a pod the core reads")
}

/// A node, with its labels, spec and allocatable resources.
pub struct Node(Value);

impl Node {
    pub fn named(name: &str) -> Self {
        Node(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {}}}))
    }

    /// Its labels, all of them.
    pub fn labels(mut self, labels: Value) -> Self {
        self.0["metadata"]["labels"] = labels;
        self
    }

    /// The label `key` set to `value`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.0["metadata"]["labels"][key] = json!(value);
        self
    }

    /// Its whole spec (taints, unschedulable).
    pub fn spec(mut self, spec: Value) -> Self {
        self.0["spec"] = spec;
        self
    }

    /// What it can hold, as its kubelet reports it.
    pub fn allocatable(mut self, resources: Value) -> Self {
        self.0["status"]["allocatable"] = resources;
        self
    }

    pub fn json(self) -> Value {
        self.0
    }
}

/// The InferenceReplica OME v1.3 makes for the `component` of `namespace/service`, named
/// `<service>-<component>`, its spec the component's spread fields (`topologySpread`,
/// `topologySpreadKey`, `topologyKey`) with its parent and component.
pub fn replica(namespace: &str, service: &str, component: &str, spread: &Value) -> Value {
    let mut spec = spread.clone();
    spec["parentRef"] = json!({"name": service});
    spec["component"] = json!(component);
    json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": format!("{service}-{component}"), "namespace": namespace}, "spec": spec})
}
