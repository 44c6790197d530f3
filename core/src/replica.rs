//! Which InferenceReplica and which runtime belong to what: the relations between OME's objects,
//! each decided here once, for the policy and the controller alike.

use serde_json::Value;

/// The namespace of an object whose metadata names none, as kubectl reads a file.
pub const DEFAULT_NAMESPACE: &str = "default";

/// An object's namespace (as JSON), [`DEFAULT_NAMESPACE`] when its metadata names none.
pub fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or(DEFAULT_NAMESPACE)
}

/// An InferenceReplica, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplicaRef {
    pub namespace: String,
    pub name: String,
}

impl ReplicaRef {
    /// The replica OME writes for a component of an InferenceService: `<isvc>-<component>` (P3,
    /// where the pod names no controlling replica).
    pub fn for_component(namespace: &str, service: &str, component: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: format!("{service}-{component}"),
        }
    }
}

/// P3: an ownerReference names the pod's InferenceReplica when it is the controller reference of
/// kind `InferenceReplica` in `ome.io/v1beta1`.
pub fn is_controlling_replica(api_version: &str, kind: &str, controller: bool) -> bool {
    controller && api_version == "ome.io/v1beta1" && kind == "InferenceReplica"
}

/// The runtime an InferenceService names: a namespaced ServingRuntime when its kind says so,
/// else (the default) a ClusterServingRuntime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeRef<'a> {
    Namespaced(&'a str),
    Cluster(&'a str),
}

impl<'a> RuntimeRef<'a> {
    pub fn kind(self) -> &'static str {
        match self {
            Self::Namespaced(_) => "ServingRuntime",
            Self::Cluster(_) => "ClusterServingRuntime",
        }
    }

    pub fn name(self) -> &'a str {
        match self {
            Self::Namespaced(name) | Self::Cluster(name) => name,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p3_a_replica_is_named_by_its_component_or_owned_as_controller() {
        assert_eq!(
            ReplicaRef::for_component("spread-demo", "qwen3-0-6b", "engine"),
            ReplicaRef {
                namespace: "spread-demo".into(),
                name: "qwen3-0-6b-engine".into()
            }
        );
        assert!(is_controlling_replica("ome.io/v1beta1", "InferenceReplica", true));
        assert!(!is_controlling_replica("ome.io/v1beta1", "InferenceReplica", false));
        assert!(!is_controlling_replica("ome.io/v1alpha1", "InferenceReplica", true));
        assert!(!is_controlling_replica("ome.io/v1beta1", "ReplicaSet", true));
    }
}
