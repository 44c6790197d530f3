use std::path::PathBuf;

use ome_spread_sim::policy_server::{Policy, policies_file};
use serde_json::json;

/// Each entry as Kubewarden 1.36's controller writes a ClusterAdmissionPolicy's: every host
/// capability granted, and the context-aware policy's one resource, each policy its own entry.
#[test]
fn the_policies_file_grants_what_kubewarden_grants_a_cluster_wide_policy() {
    let policies = [
        Policy {
            name: "ome-spread".into(),
            module: PathBuf::from("/p/annotated-policy.wasm"),
            settings: json!({"maxSkew": 2}),
        },
        Policy {
            name: "p1".into(),
            module: PathBuf::from("/p/annotated-policy.wasm"),
            settings: json!({}),
        },
    ];
    assert_eq!(
        policies_file(&policies),
        json!({
            "ome-spread": {
                "module": "file:///p/annotated-policy.wasm",
                "settings": {"maxSkew": 2},
                "hostCapabilities": ["*"],
                "allowedToMutate": true,
                "contextAwareResources": [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica"}],
            },
            "p1": {
                "module": "file:///p/annotated-policy.wasm",
                "settings": {},
                "hostCapabilities": ["*"],
                "allowedToMutate": true,
                "contextAwareResources": [{"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica"}],
            },
        })
    );
}
