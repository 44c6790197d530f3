//! The parts of a pod that ome-spread reads, and nothing else: its name and OME's labels, the
//! node it is bound to and its scheduler, how it selects nodes, its spread constraints, what it
//! requests of its node, its phase and two of its conditions. Read from the pod as the API server
//! serves it (or as saved), every other field skipped on the way in: the controller keeps one for
//! each OME pod, and a pod as served is mostly env, volumes, probes and managed fields.
//!
//! The spread constraints are kept as written: the rules that read them ([`crate::rules`]) read
//! the pod the policy mutates too, which stays JSON so that nothing it carries is dropped.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeAffinity, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::replica::DEFAULT_NAMESPACE;

// The controller watches pods into this model directly, as Kubernetes' Pods.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Resource)]
#[resource(inherit = k8s_openapi::api::core::v1::Pod)]
#[serde(default)]
pub struct Pod {
    #[serde(deserialize_with = "or_default")]
    pub metadata: ObjectMeta,
    #[serde(deserialize_with = "or_default")]
    pub spec: Spec,
    #[serde(deserialize_with = "or_default")]
    pub status: Status,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Spec {
    pub node_name: Option<String>,
    pub scheduler_name: Option<String>,
    #[serde(deserialize_with = "or_default")]
    pub node_selector: BTreeMap<String, String>,
    #[serde(deserialize_with = "or_default")]
    pub affinity: Affinity,
    #[serde(deserialize_with = "or_default")]
    pub tolerations: Vec<Toleration>,
    #[serde(deserialize_with = "or_default")]
    pub topology_spread_constraints: Vec<Value>,
    #[serde(deserialize_with = "or_default")]
    pub containers: Vec<Container>,
    #[serde(deserialize_with = "or_default")]
    pub init_containers: Vec<Container>,
    /// Pod-level requests.
    #[serde(deserialize_with = "or_default")]
    pub resources: Requirements,
    /// Its RuntimeClass's overhead: quantities by resource name, as written.
    pub overhead: Value,
}

/// Of a pod's affinity, the node affinity: the nodes it selects.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Affinity {
    pub node_affinity: Option<NodeAffinity>,
}

/// A container or init container, as the room counts it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Container {
    /// `Always` on an init container: a sidecar.
    pub restart_policy: Option<String>,
    #[serde(deserialize_with = "or_default")]
    pub resources: Requirements,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Requirements {
    /// Quantities by resource name, as written (a string or a number), read as the API server
    /// reads them ([`crate::room`]).
    pub requests: Value,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Status {
    pub phase: Option<String>,
    /// Only `Ready` and `PodScheduled` are read (the rest are skipped), without their times.
    #[serde(deserialize_with = "read_conditions")]
    pub conditions: Vec<Condition>,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct Condition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub message: Option<String>,
}

impl Pod {
    pub fn name(&self) -> &str {
        self.metadata.name.as_deref().unwrap_or_default()
    }

    /// Its namespace; [`DEFAULT_NAMESPACE`] for a pod saved without one, as kubectl reads it.
    pub fn namespace(&self) -> &str {
        self.metadata.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE)
    }

    pub fn label(&self, key: &str) -> Option<&str> {
        self.metadata.labels.as_ref()?.get(key).map(String::as_str)
    }

    /// The node it is bound to; None while it is Pending unplaced.
    pub fn node(&self) -> Option<&str> {
        self.spec.node_name.as_deref()
    }

    /// Has it run to its end (Succeeded or Failed), so that it holds nothing of its node?
    pub fn is_finished(&self) -> bool {
        matches!(self.status.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// Is its `Ready` condition `True`?
    pub fn is_ready(&self) -> bool {
        self.condition("Ready").is_some_and(|c| c.status == "True")
    }

    pub fn condition(&self, kind: &str) -> Option<&Condition> {
        self.status.conditions.iter().find(|c| c.type_ == kind)
    }

    /// Its spread constraints, as written.
    pub fn constraints(&self) -> &[Value] {
        &self.spec.topology_spread_constraints
    }
}

/// An absent field or a null reads as its default, as the API server reads it.
pub(crate) fn or_default<'de, D: Deserializer<'de>, T: Default + Deserialize<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

fn read_conditions<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Condition>, D::Error> {
    let conditions: Vec<Condition> = or_default(deserializer)?;
    let read = |c: &Condition| c.type_ == "Ready" || c.type_ == "PodScheduled";
    Ok(conditions.into_iter().filter(read).collect())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::{NodeSelector, NodeSelectorRequirement, NodeSelectorTerm};
    use serde_json::json;

    use super::*;
    use crate::ome::typed;

    fn strings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    /// A leader as the API server serves it.
    fn served() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "m-engine-0-leader-0", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "labels": {"component": "engine", "ome.io/runner": "leader"}},
            "spec": {"nodeName": "n1", "schedulerName": "default-scheduler",
                "nodeSelector": {"models.ome.io/clusterbasemodel.m": "Ready"},
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms":
                        [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]}},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
                        [{"weight": 1, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}]}},
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}],
                "containers": [{"name": "engine", "image": "sglang", "env": [{"name": "A", "value": "b"}],
                    "resources": {"requests": {"nvidia.com/gpu": "8"}, "limits": {"nvidia.com/gpu": "8"}},
                    "readinessProbe": {"httpGet": {"port": 8080}}}],
                "initContainers": [{"name": "proxy", "image": "envoy", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "1"}}}],
                "volumes": [{"name": "model", "hostPath": {"path": "/models"}}],
                "overhead": {"cpu": "250m"}},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                "conditions": [
                    {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-12-05T03:54:57Z"},
                    {"type": "Ready", "status": "True", "lastProbeTime": null, "lastTransitionTime": "2026-12-05T03:55:30Z"},
                    {"type": "ome.io/serving", "status": "True", "lastTransitionTime": "2026-12-05T03:55:31Z"},
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-05T03:54:50Z"}],
                "containerStatuses": [{"name": "engine", "ready": true, "restartCount": 0, "image": "sglang", "imageID": ""}]}})
    }

    /// Of what a served pod carries, the parts read and nothing else; of its conditions, Ready and
    /// PodScheduled, without their times.
    #[test]
    fn a_served_pod_reads_as_the_parts_read() {
        let container = |restart_policy: Option<&str>, requests| Container {
            restart_policy: restart_policy.map(Into::into),
            resources: Requirements { requests },
        };
        let condition = |kind: &str| Condition {
            type_: kind.into(),
            status: "True".into(),
            message: None,
        };
        let in_zone_a = NodeSelectorRequirement {
            key: "zone".into(),
            operator: "In".into(),
            values: Some(vec!["a".into()]),
        };
        let expected = Pod {
            metadata: ObjectMeta {
                name: Some("m-engine-0-leader-0".into()),
                namespace: Some("ns".into()),
                uid: Some("u1".into()),
                resource_version: Some("7".into()),
                labels: Some(strings(&[("component", "engine"), ("ome.io/runner", "leader")])),
                ..ObjectMeta::default()
            },
            spec: Spec {
                node_name: Some("n1".into()),
                scheduler_name: Some("default-scheduler".into()),
                node_selector: strings(&[("models.ome.io/clusterbasemodel.m", "Ready")]),
                affinity: Affinity {
                    node_affinity: Some(NodeAffinity {
                        required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                            node_selector_terms: vec![NodeSelectorTerm {
                                match_expressions: Some(vec![in_zone_a]),
                                match_fields: None,
                            }],
                        }),
                        preferred_during_scheduling_ignored_during_execution: None,
                    }),
                },
                tolerations: vec![Toleration {
                    key: Some("nvidia.com/gpu".into()),
                    operator: Some("Exists".into()),
                    effect: Some("NoSchedule".into()),
                    ..Toleration::default()
                }],
                topology_spread_constraints: vec![
                    json!({"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}),
                ],
                containers: vec![container(None, json!({"nvidia.com/gpu": "8"}))],
                init_containers: vec![container(Some("Always"), json!({"cpu": "1"}))],
                resources: Requirements::default(),
                overhead: json!({"cpu": "250m"}),
            },
            status: Status {
                phase: Some("Running".into()),
                conditions: vec![condition("Ready"), condition("PodScheduled")],
            },
        };
        assert_eq!(typed::<Pod>(&served()), expected);
    }

    /// A null reads as the field left out, as the API server reads it.
    #[test]
    fn a_null_field_reads_as_left_out() {
        let named = Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        };
        let with_nulls = json!({"metadata": {"name": "p", "labels": null},
            "spec": {"nodeName": null, "nodeSelector": null, "affinity": null, "tolerations": null,
                "topologySpreadConstraints": null, "containers": [{"name": "", "resources": null}], "initContainers": null,
                "resources": null, "overhead": null},
            "status": {"phase": null, "conditions": null}});
        let mut expected = named.clone();
        expected.spec.containers = vec![Container::default()];
        assert_eq!(typed::<Pod>(&with_nulls), expected);
        let no_spec = json!({"metadata": {"name": "p"}, "spec": null, "status": null});
        assert_eq!(typed::<Pod>(&no_spec), named);
    }

    #[test]
    fn what_a_pod_says_of_itself() {
        let pod = |status| {
            typed::<Pod>(&json!({"metadata": {"name": "p", "labels": {"component": "engine"}}, "status": status}))
        };
        let running = pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}));
        assert_eq!(
            (running.namespace(), running.label("component"), running.label("other")),
            ("default", Some("engine"), None)
        );
        assert_eq!((running.is_ready(), running.is_finished()), (true, false));
        let unready = pod(json!({"phase": "Running", "conditions": [{"type": "Ready", "status": "False"}]}));
        assert_eq!((unready.is_ready(), unready.is_finished()), (false, false));
        for phase in ["Succeeded", "Failed"] {
            assert!(pod(json!({"phase": phase})).is_finished(), "{phase}");
        }
        let pending = pod(
            json!({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
            "reason": "Unschedulable", "message": "0/3 nodes are available"}]}),
        );
        assert_eq!(
            pending.condition("PodScheduled").map(|c| c.message.as_deref()),
            Some(Some("0/3 nodes are available"))
        );
        assert_eq!(pending.condition("Ready"), None);
    }
}
