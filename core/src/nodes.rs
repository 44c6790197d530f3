//! The parts of a node read ([`Served`], made into a [`Node`]), and which nodes a pod selects, by
//! Kubernetes' own rules: its `nodeSelector` and its required node
//! affinity (`nodeAffinityPolicy: Honor`), and, under `nodeTaintsPolicy: Honor`, the taints it
//! tolerates (a cordoned node counts as tainted `node.kubernetes.io/unschedulable:NoSchedule`).

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use k8s_openapi::api::core::v1::{Node as KubeNode, NodeSelectorRequirement, NodeSelectorTerm, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::pod::{Pod, or_default};
use crate::read::{self, Unusable};
use crate::room::{Resources, Unreadable};

/// What the diagnosis and the rebalance plan need of a node.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    pub labels: Labels,
    pub taints: Vec<Taint>,
    /// `status.allocatable`: what the node can give its pods in all.
    pub allocatable: Resources,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Taint {
    pub key: String,
    #[serde(default, deserialize_with = "or_default")]
    pub value: String,
    pub effect: String,
}

/// A node as the API server serves it (or as saved), only the parts a [`Node`] is made of: every
/// other field (images, conditions, annotations, managed fields) is skipped as it is read. The
/// controller watches nodes into it, and `explain` reads saved nodes into it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Resource)]
#[resource(inherit = KubeNode)]
#[serde(default)]
pub struct Served {
    #[serde(deserialize_with = "read_metadata")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "or_default")]
    pub spec: ServedSpec,
    #[serde(deserialize_with = "or_default")]
    pub status: ServedStatus,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ServedSpec {
    #[serde(deserialize_with = "or_default")]
    pub taints: Vec<Taint>,
    #[serde(deserialize_with = "or_default")]
    pub unschedulable: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ServedStatus {
    /// Quantities by resource name, as written (a saved file may hold a number), read by
    /// [`Served::allocatable`]: one the API server would refuse costs the controller a node's
    /// room, never the node (nor the watch's whole list, as a failed read would).
    pub allocatable: Value,
}

/// Of a node's metadata, its name and labels, and the uid and resourceVersion a watch keeps.
fn read_metadata<'de, D: Deserializer<'de>>(deserializer: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Default, Deserialize)]
    #[serde(default, rename_all = "camelCase")]
    struct Read {
        name: Option<String>,
        labels: Option<BTreeMap<String, String>>,
        uid: Option<String>,
        resource_version: Option<String>,
    }
    let read: Read = or_default(deserializer)?;
    Ok(ObjectMeta {
        name: read.name,
        labels: read.labels,
        uid: read.uid,
        resource_version: read.resource_version,
        ..ObjectMeta::default()
    })
}

impl Served {
    /// Its `status.allocatable`, or the quantity that cannot be read, named
    /// (`Node n: status.allocatable.cpu`).
    pub fn allocatable(&self) -> Result<Resources, Unreadable> {
        let name = self.metadata.name.as_deref().unwrap_or_default();
        Resources::from_quantities(&self.status.allocatable)
            .map_err(|e| e.within(&format!("Node {name}: status.allocatable.")))
    }
}

/// The nodes some selections select: taints ignored (`nodeTaintsPolicy: Ignore`) and honoured.
#[derive(Debug, Default, PartialEq)]
pub struct Selected<'a> {
    pub any: Vec<&'a Node>,
    /// Those of `any` that a selection selecting them also tolerates.
    pub tolerated: Vec<&'a Node>,
}

/// A pod's node selection: its `nodeSelector`, required node-affinity terms and tolerations.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    node_selector: BTreeMap<String, String>,
    /// ORed; within a term, every expression must match. None: no required node affinity.
    terms: Option<Vec<NodeSelectorTerm>>,
    tolerations: Vec<Toleration>,
}

/// A node's labels, by key. Hashed: a reconcile looks up a few keys on each of many nodes, and
/// comparing a key with a node's others (a tree's search) cost more than hashing it.
pub type Labels = HashMap<String, String, foldhash::fast::FixedState>;

impl Node {
    /// A cordoned (`unschedulable`) node counts as tainted `node.kubernetes.io/unschedulable:NoSchedule`,
    /// as the scheduler's own filter treats it.
    pub fn new(
        name: String,
        labels: Labels,
        mut taints: Vec<Taint>,
        unschedulable: bool,
        allocatable: Resources,
    ) -> Self {
        if unschedulable {
            taints.push(Taint {
                key: "node.kubernetes.io/unschedulable".into(),
                value: String::new(),
                effect: "NoSchedule".into(),
            });
        }
        Self {
            name,
            labels,
            taints,
            allocatable,
        }
    }

    /// A node as served, with its allocatable as read of it ([`Served::allocatable`]).
    pub fn of(node: &Served, allocatable: Resources) -> Self {
        Self::new(
            node.metadata.name.clone().unwrap_or_default(),
            node.metadata.labels.clone().unwrap_or_default().into_iter().collect(),
            node.spec.taints.clone(),
            node.spec.unschedulable,
            allocatable,
        )
    }

    /// A node as saved (`kubectl get node -o yaml`), or what of it cannot be read, named.
    pub fn from_json(node: &Value) -> Result<Self, Unusable> {
        let node: Served = read::typed(node)?;
        Ok(Self::of(&node, node.allocatable()?))
    }
}

/// The cluster's nodes, read once per pass and indexed by name and by label, so that diagnosing
/// many replicas neither re-reads every node nor scans them all for each nodeSelector.
#[derive(Debug, Default)]
pub struct Nodes {
    nodes: Vec<Node>,
    by_name: HashMap<String, usize>,
    /// label key -> label value -> the nodes that carry it, in order.
    by_label: HashMap<String, HashMap<String, Vec<usize>>>,
    /// What each node selection chose of these nodes ([`Self::chosen`]), kept while they stand:
    /// the replicas of one model select alike, and a reconcile for each of their pod events
    /// reads the same choice again.
    choices: Mutex<HashMap<Vec<Selection>, Arc<Choice>>>,
}

/// The indexes of the nodes some selections select, and of those they tolerate.
type Choice = [Vec<usize>; 2];

/// The choices [`Nodes`] keeps at most: a model's replicas share one, and a cluster serves far
/// fewer models.
const MOST_CHOICES_KEPT: usize = 256;

impl Nodes {
    pub fn new(nodes: Vec<Node>) -> Self {
        let by_name = nodes.iter().enumerate().map(|(i, n)| (n.name.clone(), i)).collect();
        let mut by_label: HashMap<String, HashMap<String, Vec<usize>>> = HashMap::new();
        for (i, node) in nodes.iter().enumerate() {
            for (key, value) in &node.labels {
                let values = by_label.entry(key.clone()).or_default();
                values.entry(value.clone()).or_default().push(i);
            }
        }
        Self {
            nodes,
            by_name,
            by_label,
            choices: Mutex::default(),
        }
    }

    pub fn from_json(nodes: &[Value]) -> Result<Self, Unusable> {
        let nodes = nodes.iter().map(Node::from_json).collect::<Result<_, _>>()?;
        Ok(Self::new(nodes))
    }

    pub fn get(&self, name: &str) -> Option<&Node> {
        self.by_name.get(name).map(|&i| &self.nodes[i])
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Node> {
        self.nodes.iter()
    }

    /// The nodes that any of the selections selects, and of those the nodes that a selection
    /// selecting them also tolerates, each in the nodes' order: one pass for both. A selection
    /// with a nodeSelector reads only the nodes of its rarest label.
    pub fn selected(&self, selections: &[Selection]) -> Selected<'_> {
        // The lock is let go while a choice is made, so that other reconciles read theirs.
        let chosen = self.kept().get(selections).cloned();
        let chosen = chosen.unwrap_or_else(|| {
            let chosen = Arc::new(self.chosen(selections).map(in_order));
            let mut kept = self.kept();
            // Pods that each select nodes of their own would keep a choice each until the nodes
            // change: the kept ones are dropped first at this many.
            if kept.len() == MOST_CHOICES_KEPT {
                kept.clear();
            }
            kept.insert(selections.to_vec(), chosen.clone());
            chosen
        });
        let [any, tolerated] = [&chosen[0], &chosen[1]].map(|chosen| chosen.iter().map(|&i| &self.nodes[i]).collect());
        Selected { any, tolerated }
    }

    /// The choices kept; a panic elsewhere while they were locked leaves them as they were.
    fn kept(&self) -> MutexGuard<'_, HashMap<Vec<Selection>, Arc<Choice>>> {
        self.choices.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The nodes that any of the selections selects, and the nodes named in `used`, in the
    /// nodes' order: the nodes a component's pods run on or select.
    pub fn selected_or_used(&self, selections: &[Selection], used: &[&str]) -> Vec<&Node> {
        let [mut chosen, _] = self.chosen(selections);
        chosen.extend(used.iter().filter_map(|name| self.by_name.get(*name)));
        in_order(chosen).into_iter().map(|i| &self.nodes[i]).collect()
    }

    fn chosen(&self, selections: &[Selection]) -> Choice {
        let (mut selected, mut tolerated) = (Vec::new(), Vec::new());
        for selection in selections {
            let rarest = selection.node_selector.iter().map(|(key, value)| {
                let values = self.by_label.get(key);
                values.and_then(|v| v.get(value)).map_or(&[][..], Vec::as_slice)
            });
            let candidates: Box<dyn Iterator<Item = usize>> = match rarest.min_by_key(|nodes| nodes.len()) {
                Some(nodes) => Box::new(nodes.iter().copied()),
                None => Box::new(0..self.nodes.len()),
            };
            for i in candidates.filter(|&i| selection.selects(&self.nodes[i])) {
                selected.push(i);
                if selection.tolerates(&self.nodes[i]) {
                    tolerated.push(i);
                }
            }
        }
        [selected, tolerated]
    }
}

/// Node indexes in the nodes' order, each once.
fn in_order(mut chosen: Vec<usize>) -> Vec<usize> {
    chosen.sort_unstable();
    chosen.dedup();
    chosen
}

// A key of the choices kept (`Nodes::choices`): hashed on every field its equality compares.
impl Eq for Selection {}

impl Hash for Selection {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.node_selector.hash(state);
        for term in self.terms.iter().flatten() {
            for e in term.match_expressions.iter().chain(&term.match_fields).flatten() {
                (&e.key, &e.operator, &e.values).hash(state);
            }
        }
        for t in &self.tolerations {
            (&t.key, &t.operator, &t.value, &t.effect, t.toleration_seconds).hash(state);
        }
    }
}

impl Selection {
    /// The node labels it reads: its node selector's keys and its node affinity's.
    pub fn label_keys(&self) -> impl Iterator<Item = &str> {
        let terms = self.terms.iter().flatten();
        let affinity = terms.flat_map(|term| term.match_expressions.iter().flatten());
        let keys = self.node_selector.keys().chain(affinity.map(|e| &e.key));
        keys.map(String::as_str)
    }

    pub fn of_pod(pod: &Pod) -> Self {
        let affinity = pod.spec.affinity.node_affinity.as_ref();
        let required = affinity.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref());
        Self {
            node_selector: pod.spec.node_selector.clone(),
            terms: required.map(|required| required.node_selector_terms.clone()),
            tolerations: pod.spec.tolerations.clone(),
        }
    }

    /// Does the pod select `node` (nodeSelector and required node affinity; an empty term
    /// selects no node, as in Kubernetes)?
    pub fn selects(&self, node: &Node) -> bool {
        let by_affinity = |terms: &Vec<NodeSelectorTerm>| terms.iter().any(|term| selects(term, node));
        self.node_selector.iter().all(|(k, v)| node.labels.get(k) == Some(v))
            && self.terms.as_ref().is_none_or(by_affinity)
    }

    /// Does the pod tolerate every NoSchedule and NoExecute taint of `node`?
    pub fn tolerates(&self, node: &Node) -> bool {
        let keeps_pods_off = |t: &&Taint| t.effect == "NoSchedule" || t.effect == "NoExecute";
        let tolerated = |taint: &Taint| self.tolerations.iter().any(|toleration| tolerates(toleration, taint));
        node.taints.iter().filter(keeps_pods_off).all(tolerated)
    }
}

fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    let key = toleration.key.as_deref().unwrap_or_default();
    let key_matches = key.is_empty() || key == taint.key;
    // `Equal` unless it says `Exists`.
    let value = toleration.value.as_deref().unwrap_or_default();
    let value_matches = toleration.operator.as_deref() == Some("Exists") || value == taint.value;
    (effect.is_empty() || effect == taint.effect) && key_matches && value_matches
}

/// Does a required node-affinity term select `node`: every expression of its labels, and every
/// field one of its name (`matchFields` reads `metadata.name` only: any other field matches no
/// node)? An empty term selects no node, as in Kubernetes.
fn selects(term: &NodeSelectorTerm, node: &Node) -> bool {
    let labels = term.match_expressions.iter().flatten();
    let fields = term.match_fields.iter().flatten();
    let labels = labels.map(|e| matches(e, node.labels.get(&e.key)));
    let fields = fields.map(|e| e.key == "metadata.name" && matches(e, Some(&node.name)));
    let mut all = labels.chain(fields).peekable();
    all.peek().is_some() && all.all(|matched| matched)
}

/// Does the expression hold of a node's `value` of its key (None: the node has none)?
fn matches(expression: &NodeSelectorRequirement, value: Option<&String>) -> bool {
    let values = expression.values.as_deref().unwrap_or_default();
    let number = |s: &String| s.parse::<i64>().ok();
    // The node's value and the expression's bound, when both are integers (Gt, Lt).
    let numbers = || value.and_then(number).zip(values.first().and_then(number));
    match expression.operator.as_str() {
        "In" => value.is_some_and(|v| values.contains(v)),
        "NotIn" => value.is_none_or(|v| !values.contains(v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => numbers().is_some_and(|(have, bound)| have > bound),
        "Lt" => numbers().is_some_and(|(have, bound)| have < bound),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ome::typed;
    use serde_json::json;

    fn node(labels: Value, spec: Value) -> Node {
        Node::from_json(&json!({"metadata": {"name": "n", "labels": labels}, "spec": spec})).expect("readable")
    }

    /// A node as the API server serves it: what the room and the diagnosis read, and what they
    /// do not (images, conditions, addresses, a taint's time).
    #[test]
    fn a_served_node_reads_as_the_parts_read() {
        let served = json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-node-7", "resourceVersion": "81", "uid": "u-7",
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"}, "managedFields": [{"manager": "kubelet"}],
                "labels": {"topology.kubernetes.io/zone": "zone-b", "nvidia.com/gpu.clique": "nvl72-b.1"}},
            "spec": {"podCIDR": "10.0.7.0/24", "unschedulable": true, "taints": [
                {"key": "nvidia.com/gpu", "value": null, "effect": "NoSchedule"},
                {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute", "timeAdded": "2026-12-05T09:00:00Z"}]},
            "status": {"allocatable": {"nvidia.com/gpu": 8, "cpu": "96", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}], "images": [{"names": ["vllm"], "sizeBytes": 1}]}});
        let taint = |key: &str, effect: &str| Taint {
            key: key.into(),
            value: String::new(),
            effect: effect.into(),
        };
        let expected = Node {
            name: "gpu-node-7".into(),
            labels: [
                ("topology.kubernetes.io/zone", "zone-b"),
                ("nvidia.com/gpu.clique", "nvl72-b.1"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into_iter()
            .collect(),
            taints: vec![
                taint("nvidia.com/gpu", "NoSchedule"),
                taint("node.kubernetes.io/not-ready", "NoExecute"),
                taint("node.kubernetes.io/unschedulable", "NoSchedule"),
            ],
            allocatable: Resources::from_quantities(&json!({"nvidia.com/gpu": "8", "cpu": "96", "pods": "110"}))
                .expect("readable"),
        };
        assert_eq!(Node::from_json(&served), Ok(expected));
        // Of its metadata, what the Node is made of and what a watch keeps; no annotations, no
        // managed fields.
        let metadata = serde_json::from_value::<Served>(served).map(|node| node.metadata);
        let labels = [
            ("topology.kubernetes.io/zone", "zone-b"),
            ("nvidia.com/gpu.clique", "nvl72-b.1"),
        ];
        let expected = ObjectMeta {
            name: Some("gpu-node-7".into()),
            labels: Some(labels.map(|(k, v)| (k.to_owned(), v.to_owned())).into()),
            uid: Some("u-7".into()),
            resource_version: Some("81".into()),
            ..ObjectMeta::default()
        };
        assert_eq!(metadata.ok(), Some(expected));
        let bare = Node::from_json(&json!({"kind": "Node", "metadata": {"name": "n", "labels": null},
            "spec": {"taints": null, "unschedulable": null}, "status": null}));
        assert_eq!(
            bare,
            Ok(Node::new(
                "n".into(),
                Labels::default(),
                Vec::new(),
                false,
                Resources::default()
            ))
        );
    }

    /// A node the API server would refuse: the node and the field, named; a cluster's object has
    /// no namespace in its name, and its kind is the model's, written or not.
    #[test]
    fn a_node_that_cannot_be_read_is_named_with_its_field() {
        let said = |node: Value| Node::from_json(&node).map_err(|e| e.to_string());
        assert_eq!(
            said(json!({"kind": "Node", "metadata": {"name": "n1", "labels": {"zone": 1}}})),
            Err("Node n1: metadata.labels.zone: invalid type: integer `1`, expected a string".into())
        );
        assert_eq!(
            said(json!({"metadata": {"name": "n1"}, "spec": {"taints": [{"key": "k"}]}})),
            Err("Node n1: spec.taints[0]: missing field `effect`".into())
        );
        assert_eq!(
            said(json!({"kind": "Node", "metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "ten"}}})),
            Err(concat!(
                "Node n1: status.allocatable.cpu: \"ten\" is not a quantity: a number with an optional ",
                "suffix (n, u, m, k, M, G, T, P, E, Ki to Ei) or exponent (e3, E-3)"
            )
            .into())
        );
    }

    fn pod_with_terms(terms: Value) -> Selection {
        Selection::of_pod(&typed(&json!({"spec": {"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}})))
    }

    #[test]
    fn every_operator() {
        let n = node(json!({"zone": "a", "gpus": "8"}), json!({}));
        let cases = [
            (json!({"key": "zone", "operator": "In", "values": ["a", "b"]}), true),
            (json!({"key": "zone", "operator": "In", "values": ["b"]}), false),
            (json!({"key": "zone", "operator": "NotIn", "values": ["b"]}), true),
            (json!({"key": "rack", "operator": "NotIn", "values": ["b"]}), true),
            (json!({"key": "zone", "operator": "NotIn", "values": ["a"]}), false),
            (json!({"key": "zone", "operator": "Exists"}), true),
            (json!({"key": "rack", "operator": "Exists"}), false),
            (json!({"key": "rack", "operator": "DoesNotExist"}), true),
            (json!({"key": "zone", "operator": "DoesNotExist"}), false),
            (json!({"key": "gpus", "operator": "Gt", "values": ["4"]}), true),
            (json!({"key": "gpus", "operator": "Gt", "values": ["8"]}), false),
            (json!({"key": "gpus", "operator": "Lt", "values": ["9"]}), true),
            (json!({"key": "zone", "operator": "Lt", "values": ["9"]}), false),
            (json!({"key": "zone", "operator": "Near", "values": ["a"]}), false),
        ];
        for (expression, selected) in cases {
            let selection = pod_with_terms(json!([{"matchExpressions": [expression.clone()]}]));
            assert_eq!(selection.selects(&n), selected, "{expression}");
        }
    }

    #[test]
    fn terms_are_ored_and_expressions_anded() {
        let n = node(json!({"zone": "a", "rack": "r1"}), json!({}));
        let in_zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
        let in_rack2 = json!({"key": "rack", "operator": "In", "values": ["r2"]});
        assert!(!pod_with_terms(json!([{"matchExpressions": [in_zone, in_rack2]}])).selects(&n));
        assert!(pod_with_terms(json!([{"matchExpressions": [in_rack2]}, {"matchExpressions": [in_zone]}])).selects(&n));
    }

    /// Kubernetes: an empty term matches no node; `matchFields` reads `metadata.name`.
    #[test]
    fn an_empty_term_selects_nothing_and_match_fields_read_the_name() {
        let n = node(json!({"zone": "a"}), json!({}));
        assert!(!pod_with_terms(json!([{}])).selects(&n));
        assert!(!pod_with_terms(json!([{"matchExpressions": []}])).selects(&n));
        let in_zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
        assert!(pod_with_terms(json!([{}, {"matchExpressions": [in_zone]}])).selects(&n));
        let named = |operator: &str, name: &str| {
            pod_with_terms(json!([{"matchFields": [{"key": "metadata.name", "operator": operator, "values": [name]}]}]))
        };
        assert!(named("In", "n").selects(&n));
        assert!(!named("In", "m").selects(&n));
        assert!(named("NotIn", "m").selects(&n));
        let other_field =
            json!([{"matchFields": [{"key": "spec.unschedulable", "operator": "In", "values": ["false"]}]}]);
        assert!(!pod_with_terms(other_field).selects(&n));
        // Any other field matches no node, even one that would hold of its name.
        let other_field_naming_it =
            json!([{"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["n"]}]}]);
        assert!(!pod_with_terms(other_field_naming_it).selects(&n));
    }

    #[test]
    fn node_selector_must_match_every_label() {
        let selection = Selection::of_pod(&typed(
            &json!({"spec": {"nodeSelector": {"model": "Ready", "zone": "a"}}}),
        ));
        assert!(selection.selects(&node(json!({"model": "Ready", "zone": "a", "x": "y"}), json!({}))));
        assert!(!selection.selects(&node(json!({"model": "Ready"}), json!({}))));
    }

    #[test]
    fn selected_nodes_come_from_the_label_index_in_the_nodes_order_once_each() {
        let nodes = Nodes::from_json(&[
            json!({"metadata": {"name": "a", "labels": {"model": "Ready", "zone": "1"}}}),
            json!({"metadata": {"name": "b", "labels": {"zone": "1"}}}),
            json!({"metadata": {"name": "c", "labels": {"model": "Ready", "zone": "2"}},
                "spec": {"taints": [{"key": "gpu", "effect": "NoSchedule"}]}}),
            json!({"metadata": {"name": "d", "labels": {"model": "Loading", "zone": "2"}}}),
        ])
        .expect("readable");
        let names = |selected: &[&Node]| selected.iter().map(|n| n.name.clone()).collect::<Vec<_>>();
        let model = Selection::of_pod(&typed(&json!({"spec": {"nodeSelector": {"model": "Ready"}}})));
        let zone_2 = Selection::of_pod(&typed(
            &json!({"spec": {"nodeSelector": {"zone": "2", "model": "Ready"}}}),
        ));
        let in_zone_2 =
            pod_with_terms(json!([{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["2"]}]}]));
        let absent = Selection::of_pod(&typed(&json!({"spec": {"nodeSelector": {"model": "Gone"}}})));
        let by_model = nodes.selected(std::slice::from_ref(&model));
        assert_eq!(names(&by_model.any), ["a", "c"]);
        assert_eq!(names(&by_model.tolerated), ["a"]);
        assert_eq!(names(&nodes.selected(std::slice::from_ref(&zone_2)).any), ["c"]);
        // Tolerated only by a selection that selects it: c, tainted, is selected by `model`, which
        // does not tolerate it, and tolerated by `zone_1`, which does not select it.
        let zone_1 = Selection::of_pod(&typed(&json!({"spec": {"nodeSelector": {"zone": "1"},
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]}})));
        let both = nodes.selected(&[model.clone(), zone_1]);
        assert_eq!(names(&both.any), ["a", "b", "c"]);
        assert_eq!(names(&both.tolerated), ["a", "b"]);
        assert_eq!(names(&nodes.selected(&[in_zone_2, model]).any), ["a", "c", "d"]);
        assert_eq!(nodes.selected(&[absent]), Selected::default());
        let every = nodes.selected(&[Selection::default()]);
        assert_eq!(names(&every.any), ["a", "b", "c", "d"]);
        assert_eq!(names(&every.tolerated), ["a", "b", "d"]);
        // explain's nodes table: the selected ones and those the pods run on, in order, once each;
        // a name that is no node is left out.
        let (absent, model_too) = (
            Selection::of_pod(&typed(&json!({"spec": {"nodeSelector": {"model": "Gone"}}}))),
            Selection::of_pod(&typed(&json!({"spec": {"nodeSelector": {"model": "Ready"}}}))),
        );
        assert_eq!(names(&nodes.selected_or_used(&[absent], &["d", "b", "e"])), ["b", "d"]);
        assert_eq!(
            names(&nodes.selected_or_used(&[model_too], &["c", "b"])),
            ["a", "b", "c"]
        );
        assert_eq!(nodes.get("d").map(|n| n.labels["model"].as_str()), Some("Loading"));
        assert_eq!((nodes.get("e"), nodes.iter().count()), (None, 4));
    }

    /// A selection of the generated ones: any of two labels' values, or none, and the gpu taint
    /// tolerated or not.
    fn generated_selection((zone, model, tolerates): (Option<u8>, Option<u8>, bool)) -> Selection {
        let mut selector = serde_json::Map::new();
        selector.extend(zone.map(|z| ("zone".to_owned(), json!(z.to_string()))));
        selector.extend(model.map(|m| ("model".to_owned(), json!(m.to_string()))));
        let tolerations = if tolerates {
            json!([{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}])
        } else {
            json!([])
        };
        Selection::of_pod(&typed(
            &json!({"spec": {"nodeSelector": selector, "tolerations": tolerations}}),
        ))
    }

    proptest::proptest! {
        /// The choices kept answer each selection as the nodes chosen afresh do, whichever came
        /// before it: every field of a selection tells it from another.
        #[test]
        fn a_kept_choice_is_the_choice_made_afresh(
            nodes in proptest::collection::vec((0u8..3, proptest::option::of(0u8..2), proptest::bool::ANY), 0..12),
            asked in proptest::collection::vec(
                proptest::collection::vec((proptest::option::of(0u8..3), proptest::option::of(0u8..2), proptest::bool::ANY), 1..3),
                1..8,
            ),
        ) {
            let nodes: Vec<Node> = nodes
                .iter()
                .enumerate()
                .map(|(i, (zone, model, tainted))| {
                    let taints = if *tainted { json!([{"key": "gpu", "effect": "NoSchedule"}]) } else { json!([]) };
                    let mut labels = json!({"zone": zone.to_string()});
                    if let Some(model) = model {
                        labels["model"] = json!(model.to_string());
                    }
                    Node::from_json(&json!({"metadata": {"name": format!("n{i}"), "labels": labels}, "spec": {"taints": taints}}))
                        .expect("readable")
                })
                .collect();
            let kept = Nodes::new(nodes.clone());
            for selections in asked {
                let selections: Vec<Selection> = selections.into_iter().map(generated_selection).collect();
                let afresh = Nodes::new(nodes.clone());
                proptest::prop_assert_eq!(kept.selected(&selections), afresh.selected(&selections));
            }
        }
    }

    #[test]
    fn the_choices_kept_are_dropped_at_their_bound_and_made_again() {
        let nodes = Nodes::from_json(&[json!({"metadata": {"name": "a", "labels": {"pool": "7"}}})]).expect("readable");
        let pool = |value: usize| {
            vec![Selection::of_pod(&typed(
                &json!({"spec": {"nodeSelector": {"pool": value.to_string()}}}),
            ))]
        };
        let kept = || nodes.choices.lock().expect("not poisoned").len();
        for value in 0..MOST_CHOICES_KEPT {
            nodes.selected(&pool(value));
        }
        assert_eq!(kept(), 256);
        assert_eq!(nodes.selected(&pool(MOST_CHOICES_KEPT)), Selected::default());
        assert_eq!(kept(), 1);
        let seven = nodes.selected(&pool(7));
        assert_eq!((seven.any.len(), seven.tolerated.len(), kept()), (1, 1, 2));
    }

    #[test]
    fn taints_and_cordons_count_only_when_not_tolerated() {
        let gpu_pod = Selection::of_pod(&typed(
            &json!({"spec": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}}),
        ));
        let tainted = node(
            json!({}),
            json!({"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]}),
        );
        let cordoned = node(json!({}), json!({"unschedulable": true}));
        let prefer = node(
            json!({}),
            json!({"taints": [{"key": "x", "effect": "PreferNoSchedule"}]}),
        );
        assert!(gpu_pod.tolerates(&tainted));
        assert!(!gpu_pod.tolerates(&cordoned));
        assert!(gpu_pod.tolerates(&prefer));
        assert!(!Selection::default().tolerates(&tainted));
    }
}
