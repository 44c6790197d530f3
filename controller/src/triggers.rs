//! What change re-diagnoses which InferenceReplica: a pod its replica ([`crate::pods`]), an
//! InferenceService its engine and decoder, a runtime the services that use it, a node every
//! replica (only when what the diagnosis reads of it changed, [`crate::nodes`]).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use ome_spread_core::instance::COMPONENTS;
use ome_spread_core::replica::RuntimeRef;

use crate::pods::replica_of_component;
use crate::resources::CONDITION;
use ome_spread_core::ome::{InferenceReplica, InferenceService};

/// A replica as a trigger reads it: all but its resourceVersion and the `Spread` condition, so
/// that the condition a reconcile writes does not reconcile the replica again (kube-runtime's
/// predicate filter drops an event whose value is the one seen last).
pub fn all_but_the_condition(replica: &InferenceReplica) -> Option<u64> {
    let mut hasher = DefaultHasher::new();
    let meta = &replica.metadata;
    (&meta.uid, meta.generation, &meta.labels, &meta.annotations).hash(&mut hasher);
    serde_json::to_string(&replica.spec).ok()?.hash(&mut hasher);
    if let Some(status) = &replica.status {
        let others = status.conditions.iter().filter(|c| c.type_ != CONDITION);
        for c in others {
            (&c.type_, &c.status, &c.reason, &c.message, c.observed_generation).hash(&mut hasher);
        }
        serde_json::to_string(&status.migrations).ok()?.hash(&mut hasher);
    }
    Some(hasher.finish())
}

/// The replicas of an InferenceService: one per component.
pub fn replicas_of_service(service: &InferenceService) -> Vec<ObjectRef<InferenceReplica>> {
    let (namespace, name) = (service.namespace().unwrap_or_default(), service.name_any());
    Vec::from(COMPONENTS.map(|component| replica_of_component(&namespace, &name, component)))
}

/// The replicas of every InferenceService that uses the runtime (a namespaced one only in its
/// own namespace).
pub fn replicas_using(
    services: &Store<InferenceService>,
    runtime: RuntimeRef,
    namespace: Option<String>,
) -> Vec<ObjectRef<InferenceReplica>> {
    let namespaced = matches!(runtime, RuntimeRef::Namespaced(_));
    services
        .state()
        .iter()
        .filter(|s| s.runtime() == Some(runtime) && (!namespaced || s.namespace() == namespace))
        .flat_map(|s| replicas_of_service(s))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::{reflector, watcher};
    use serde_json::json;

    #[test]
    fn the_spread_condition_written_alone_triggers_nothing_else_does() {
        let replica = |generation: i64, conditions: serde_json::Value, migrations: serde_json::Value| {
            let replica: InferenceReplica = serde_json::from_value(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                "metadata": {"name": "m-engine", "namespace": "ns", "uid": "u1", "generation": generation, "resourceVersion": "7"},
                "spec": {"parentRef": {"name": "m"}, "component": "engine", "replicas": 2},
                "status": {"conditions": conditions, "migrations": migrations}}))
            .expect("a replica");
            all_but_the_condition(&replica)
        };
        let condition = |type_: &str, reason: &str| json!({"type": type_, "status": "True", "reason": reason, "message": "", "lastTransitionTime": "2026-12-01T10:00:00Z"});
        let ready = condition("Ready", "Available");
        let before = replica(3, json!([ready]), json!(null));
        // Ours, written or changed: the same value, so the filter drops the event.
        assert_eq!(
            replica(3, json!([ready, condition("Spread", "Satisfied")]), json!(null)),
            before
        );
        assert_eq!(
            replica(3, json!([ready, condition("Spread", "Skewed")]), json!(null)),
            before
        );
        // OME's condition, its migrations, a new generation: each reconciles.
        assert_ne!(
            replica(3, json!([condition("Ready", "Progressing")]), json!(null)),
            before
        );
        assert_ne!(
            replica(3, json!([ready]), json!([{"id": "m1", "phase": "Running"}])),
            before
        );
        assert_ne!(replica(4, json!([ready]), json!(null)), before);
    }

    #[test]
    fn a_service_maps_to_its_engine_and_decoder_and_a_runtime_to_the_services_using_it() {
        let service = |name: &str, ns: &str, runtime: serde_json::Value| -> InferenceService {
            serde_json::from_value(json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
                "metadata": {"name": name, "namespace": ns}, "spec": {"runtime": runtime}}))
            .expect("a service")
        };
        let (store, mut writer) = reflector::store();
        for s in [
            service("a", "ns1", json!({"name": "srt"})),
            service("b", "ns2", json!({"name": "srt", "kind": "ClusterServingRuntime"})),
            service("c", "ns1", json!({"name": "srt", "kind": "ServingRuntime"})),
            service("d", "ns2", json!({"name": "srt", "kind": "ServingRuntime"})),
            service("e", "ns1", json!({"name": "other"})),
        ] {
            writer.apply_watcher_event(&watcher::Event::Apply(s));
        }
        let names = |refs: Vec<ObjectRef<InferenceReplica>>| {
            let mut names: Vec<String> = refs
                .iter()
                .map(|r| format!("{}/{}", r.namespace.clone().unwrap_or_default(), r.name))
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            names(replicas_of_service(&service("a", "ns1", json!(null)))),
            ["ns1/a-decoder", "ns1/a-engine"]
        );
        assert_eq!(
            names(replicas_using(&store, RuntimeRef::Cluster("srt"), None)),
            ["ns1/a-decoder", "ns1/a-engine", "ns2/b-decoder", "ns2/b-engine"]
        );
        assert_eq!(
            names(replicas_using(
                &store,
                RuntimeRef::Namespaced("srt"),
                Some("ns1".into())
            )),
            ["ns1/c-decoder", "ns1/c-engine"]
        );
    }
}
