//! What ships in deploy/: the CRD subsets are what the Rust types generate, only for clusters
//! without OME and saying so, and agree with OME's CRD where they keep a field; the Deployment
//! runs the controller the way its flags and probes expect.

use std::path::{Path, PathBuf};

use ome_spread_controller::context::Mode;
use serde_json::{Value, json};

fn deploy(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy").join(file)
}

fn documents(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(deploy(file)).expect(file);
    serde_saphyr::from_multiple(&text).expect("yaml")
}

const CRD_SUBSETS: &str = "without-ome/ome-crd-subsets.yaml";

/// `BLESS=1 cargo test -p ome-spread-controller --test deploy` rewrites the file from the types.
#[test]
fn the_crd_subset_is_generated_from_the_rust_types() {
    let generated = ome_spread_controller::resources::crd_yaml().expect("a CRD");
    let path = deploy(CRD_SUBSETS);
    if std::env::var_os("BLESS").is_some() {
        std::fs::write(&path, &generated).expect("written");
    }
    let shipped = std::fs::read_to_string(&path).expect(CRD_SUBSETS);
    assert!(
        shipped == generated,
        "deploy/{CRD_SUBSETS} differs from `ome-spread crd`: run BLESS=1 cargo test -p ome-spread-controller --test deploy"
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

/// Applied where OME runs, the subsets would replace OME's CRDs: the file's name, its directory
/// and its first lines say it is for clusters without OME, and nothing is left at the old path.
#[test]
fn the_crd_subsets_say_they_are_only_for_clusters_without_ome() {
    let shipped = std::fs::read_to_string(deploy(CRD_SUBSETS)).expect(CRD_SUBSETS);
    let head: Vec<&str> = shipped.lines().take(2).collect();
    assert_eq!(
        head,
        [
            "# WARNING: ONLY FOR A CLUSTER WITHOUT OME. NEVER APPLY THIS WHERE OME RUNS.",
            "# These are cut-down copies of OME v1.3's CRDs under OME's own names (inferencereplicas.ome.io,",
        ]
    );
    assert!(
        shipped.contains("they replace OME's CRDs"),
        "the warning says what happens"
    );
    assert!(!deploy("crds.yaml").exists(), "the old, unmarked path is gone");
}

/// Where the InferenceReplica subset keeps a field, it agrees with OME v1.3's CRD
/// (config/crd/full/ome.io_inferencereplicas.yaml, from the kubebuilder markers of
/// pkg/apis/ome/v1beta1/inferencereplica_types.go).
#[test]
fn the_inference_replica_subset_agrees_with_omes_crd() {
    let crds = documents(CRD_SUBSETS);
    let replica = crds
        .iter()
        .find(|c| c["metadata"]["name"] == "inferencereplicas.ome.io")
        .expect("the InferenceReplica CRD");
    assert_eq!(replica["spec"]["names"]["shortNames"], json!(["irep"]));
    let version = &replica["spec"]["versions"][0];
    assert_eq!(version["name"], "v1beta1");
    assert_eq!(
        version["subresources"]["scale"],
        json!({
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.labelSelector",
        })
    );
    let columns: Vec<(&str, &str, &str)> = version["additionalPrinterColumns"]
        .as_array()
        .expect("printer columns")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().unwrap_or_default(),
                c["type"].as_str().unwrap_or_default(),
                c["jsonPath"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        columns,
        [
            ("Component", "string", ".spec.component"),
            ("Desired", "integer", ".spec.replicas"),
            ("Current", "integer", ".status.replicas"),
            ("Ready", "integer", ".status.readyReplicas"),
            ("Available", "integer", ".status.availableReplicas"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]
    );
    let spec = &version["schema"]["openAPIV3Schema"]["properties"]["spec"];
    let spread = &spec["properties"]["topologySpread"];
    assert_eq!(spread["type"], "string");
    assert_eq!(spread["enum"], json!(["Preferred", "Required"]));
    assert_eq!(spread.get("nullable"), None, "OME's CRD does not take null");
    assert_eq!(
        spec["required"],
        json!(["component"]),
        "parentRef is optional: a standalone replica has none"
    );
    assert_eq!(spec["properties"]["parentRef"]["required"], json!(["name"]));
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
    // The shipped rebalance mode writes nothing to OME's objects: migrate is opted into, with
    // its own RBAC (controller-rbac-rebalance.yaml).
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let mode = args
        .windows(2)
        .find(|w| w[0] == "--rebalance")
        .map(|w| w[1])
        .expect("--rebalance");
    assert_eq!(<Mode as clap::ValueEnum>::from_str(mode, false), Ok(Mode::Recommend));
    // The settings are the policy's own: its ClusterAdmissionPolicy in policy.yaml, by name.
    let policy = args.windows(2).find(|w| w[0] == "--policy").map(|w| w[1]);
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../policy.yaml")).expect("policy.yaml");
    let shipped: Vec<Value> = serde_saphyr::from_multiple(&text).expect("policy.yaml");
    let shipped = shipped
        .iter()
        .find(|d| d["kind"] == "ClusterAdmissionPolicy")
        .expect("the policy");
    assert_eq!(policy, shipped["metadata"]["name"].as_str());
    assert!(!args.contains(&"--settings"), "{args:?}");
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

/// The rules of the ClusterRoles in `file`, each as (apiGroup, resource, verb), and the
/// ServiceAccounts they are bound to.
fn rules(file: &str) -> (Vec<(String, String, String)>, Vec<Value>) {
    let objects = documents(file);
    let mut rules = Vec::new();
    for role in objects.iter().filter(|o| o["kind"] == "ClusterRole") {
        for rule in role["rules"].as_array().expect("rules") {
            for group in rule["apiGroups"].as_array().expect("apiGroups") {
                for resource in rule["resources"].as_array().expect("resources") {
                    for verb in rule["verbs"].as_array().expect("verbs") {
                        let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
                        rules.push((text(group), text(resource), text(verb)));
                    }
                }
            }
        }
    }
    let subjects = objects
        .iter()
        .filter(|o| o["kind"] == "ClusterRoleBinding")
        .flat_map(|b| b["subjects"].as_array().cloned().unwrap_or_default())
        .collect();
    (rules, subjects)
}

/// docs/rebalance.md: `patch` on inferenceservices only in a separate manifest, so that `off` and
/// `recommend` keep least privilege; that manifest grants it and nothing else, to the
/// controller's own ServiceAccount.
#[test]
fn migrate_alone_may_patch_inferenceservices_in_its_own_manifest() {
    let (default, default_subjects) = rules("controller-rbac.yaml");
    let writes: Vec<&(String, String, String)> = default
        .iter()
        .filter(|(_, _, verb)| !["get", "list", "watch"].contains(&verb.as_str()))
        .collect();
    let expected_writes = [
        ("ome.io", "inferencereplicas/status", "patch"),
        ("events.k8s.io", "events", "create"),
        ("events.k8s.io", "events", "patch"),
        ("openreports.io", "reports", "create"),
        ("openreports.io", "reports", "patch"),
        ("openreports.io", "reports", "delete"),
    ];
    assert_eq!(
        writes
            .iter()
            .map(|(g, r, v)| (g.as_str(), r.as_str(), v.as_str()))
            .collect::<Vec<_>>(),
        expected_writes,
        "the default RBAC writes only the condition, Events and reports"
    );
    let (rebalance, rebalance_subjects) = rules("controller-rbac-rebalance.yaml");
    assert_eq!(
        rebalance,
        [("ome.io".to_owned(), "inferenceservices".to_owned(), "patch".to_owned())]
    );
    assert_eq!(
        rebalance_subjects,
        [json!({"kind": "ServiceAccount", "name": "ome-spread-controller", "namespace": "ome-spread"})]
    );
    assert_eq!(rebalance_subjects, default_subjects, "the same controller");
}

/// The user of the image's final stage (deploy/Dockerfile's last `USER` after its last `FROM`).
fn image_user() -> String {
    let dockerfile = std::fs::read_to_string(deploy("Dockerfile")).expect("deploy/Dockerfile");
    let last_stage = dockerfile
        .rsplit_once("\nFROM ")
        .map(|(_, stage)| stage)
        .expect("a FROM");
    last_stage
        .lines()
        .filter_map(|line| line.strip_prefix("USER "))
        .next_back()
        .expect("the final stage sets USER")
        .trim()
        .to_owned()
}

/// The kubelet enforces `runAsNonRoot` only against a numeric user: an image whose USER is a name
/// (distroless's `nonroot`) and a pod without `runAsUser` is refused (CreateContainerConfigError).
/// So the image's user is a number, not root, and every pod template deploy/ ships says so, by the
/// same number.
#[test]
fn the_image_and_every_pod_template_run_as_a_numeric_non_root_user() {
    let user = image_user();
    let (uid, gid) = user.split_once(':').unwrap_or((&user, ""));
    assert_eq!((uid, gid), ("65532", "65532"), "USER {user}");

    let mut templates = Vec::new();
    for file in [
        "controller.yaml",
        "controller-rbac.yaml",
        "controller-rbac-rebalance.yaml",
    ] {
        for object in documents(file) {
            let pod = &object["spec"]["template"]["spec"];
            if pod.is_object() {
                templates.push(format!("{file}: {} {}", object["kind"], object["metadata"]["name"]));
                let context = &pod["securityContext"];
                assert_eq!(context["runAsNonRoot"], true, "{file}: {}", object["metadata"]["name"]);
                assert_eq!(
                    (context["runAsUser"].as_u64(), context["runAsGroup"].as_u64()),
                    (Some(65532), Some(65532)),
                    "{file}: the image's user"
                );
                for container in pod["containers"].as_array().expect("containers") {
                    let own = &container["securityContext"];
                    assert_eq!(own.get("runAsUser"), None, "{file}: {}", container["name"]);
                    assert_eq!(own.get("runAsNonRoot"), None, "{file}: {}", container["name"]);
                }
            }
        }
    }
    assert_eq!(
        templates,
        [r#"controller.yaml: "Deployment" "ome-spread-controller""#],
        "every pod template deploy/ ships"
    );
}
