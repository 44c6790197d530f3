//! What ships in deploy/: the CRD subset is what the Rust types generate, and the Deployment runs
//! the controller the way its flags and probes expect.

use std::path::{Path, PathBuf};

use serde_json::Value;

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(file)
}

fn documents(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(deploy(file)).expect(file);
    serde_saphyr::from_multiple(&text).expect("yaml")
}

/// `BLESS=1 cargo test -p ome-spread-controller --test deploy` rewrites the file from the types.
#[test]
fn the_crd_subset_is_generated_from_the_rust_types() {
    let generated = ome_spread_controller::resources::crd_yaml().expect("a CRD");
    let path = deploy("crds.yaml");
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &generated).expect("written");
    }
    let shipped = std::fs::read_to_string(&path).expect("deploy/crds.yaml");
    assert!(
        shipped == generated,
        "deploy/crds.yaml differs from `ome-spread crd`: run BLESS=1 cargo test -p ome-spread-controller --test deploy"
    );
    let crds: Vec<Value> = serde_saphyr::from_multiple(&shipped).expect("yaml");
    let kinds: Vec<&str> = crds
        .iter()
        .map(|c| c["spec"]["names"]["kind"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        kinds,
        [
            "InferenceReplica",
            "InferenceService",
            "ServingRuntime",
            "ClusterServingRuntime"
        ]
    );
    for crd in &crds {
        let spec = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            spec["x-kubernetes-preserve-unknown-fields"], true,
            "OME's own objects apply: {}",
            crd["metadata"]["name"]
        );
    }
    let version = &crds[0]["spec"]["versions"][0];
    assert_eq!(version["subresources"]["status"], serde_json::json!({}));
    let conditions = &version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]["conditions"];
    assert_eq!(
        conditions["x-kubernetes-list-type"], "map",
        "one owner per condition type under server-side apply"
    );
    assert_eq!(conditions["x-kubernetes-list-map-keys"], serde_json::json!(["type"]));
}

#[test]
fn the_deployment_runs_the_controller_with_its_probes_metrics_and_identity() {
    let objects = documents("controller.yaml");
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .expect("a Deployment");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "ome-spread-controller");
    let container = &pod["containers"][0];
    assert_eq!(container["args"][0], "controller");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    let env: Vec<(&str, &str)> = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap_or_default(),
                e["valueFrom"]["fieldRef"]["fieldPath"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert!(env.contains(&("POD_NAME", "metadata.name")), "{env:?}");
    assert!(env.contains(&("POD_NAMESPACE", "metadata.namespace")), "{env:?}");
    let service = objects.iter().find(|o| o["kind"] == "Service").expect("a Service");
    assert_eq!(
        service["spec"]["selector"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(service["spec"]["ports"][0]["name"], "metrics");
    assert_eq!(service["spec"]["ports"][0]["targetPort"], container["ports"][0]["name"]);
}
