//! The Helm chart (charts/ome-spread) under the helm `make cluster-bin` builds: deploy/ and
//! policy.yaml are what it renders, its required values say which to set, one `settings` value
//! reaches the policy and, through it, the controller; then installed on a live cluster (`make
//! e2e-cluster`), the controller started exactly as its Deployment says leads and writes the
//! Spread condition.
//!
//!   OME_SPREAD_E2E_KUBECONFIG=... cargo test -p ome-spread-controller --test chart -- --ignored

use ome_spread_sim::support::{live, local, wait::eventually};

use std::path::{Path, PathBuf};
use std::process::Command;

use k8s_openapi::api::core::v1::Pod;
use ome_spread_core::ome::InferenceService;
use ome_spread_core::settings::Settings;
use ome_spread_sim::stand_in::admission_host::webhook;
use ome_spread_sim::stand_in::ome::Terms;
use ome_spread_sim::stand_in::ome::render::{self, Instance};
use ome_spread_sim::support::live::{Process, cluster_bin, helm, kubectl};
use serde_json::{Value, json};

const NAMESPACE: &str = "ome-spread-chart";

/// The values a user must set, as deploy/ is rendered with them (charts/manifests.sh).
const REQUIRED: [&str; 4] = [
    "--set",
    "policy.module=registry://YOUR_REGISTRY/ome-spread:v0.1.0",
    "--set",
    "controller.image.repository=YOUR_REGISTRY/ome-spread-controller",
];

fn chart() -> PathBuf {
    local::workspace().join("charts/ome-spread")
}

/// `helm template` of the chart in namespace ome-spread with `args`: its output, or its error.
fn template(args: &[&str]) -> Result<String, String> {
    let output = Command::new(cluster_bin("helm"))
        .args(["template", "ome-spread"])
        .arg(chart())
        .args(["--namespace", "ome-spread"])
        .args(args)
        .output()
        .expect("helm runs");
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).trim().to_owned())
    }
}

fn objects(yaml: &str) -> Vec<Value> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).expect("the render is YAML");
    documents.into_iter().filter(|d| !d.is_null()).collect()
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind)
}

#[test]
#[ignore = "needs helm: make cluster-bin"]
fn deploy_is_what_the_chart_renders() {
    let dir = local::workspace().join(format!("target/chart-render/{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory for the render");
    let rendered = Command::new(local::workspace().join("charts/manifests.sh"))
        .arg(cluster_bin("helm"))
        .arg(&dir)
        .status()
        .expect("charts/manifests.sh runs");
    assert!(rendered.success(), "charts/manifests.sh");
    for file in [
        "controller.yaml",
        "controller-rbac.yaml",
        "controller-rbac-rebalance.yaml",
    ] {
        let shipped = std::fs::read_to_string(local::workspace().join("deploy").join(file)).expect(file);
        let render = std::fs::read_to_string(dir.join(file)).expect(file);
        assert!(
            shipped == render,
            "deploy/{file} is not the chart's render: run make manifests"
        );
    }
    std::fs::remove_dir_all(&dir).expect("the render removed");
}

/// policy.yaml, the file a user applies without Helm, is the chart's policy with its module and
/// its labels, but for those only helm sets (the release's name, helm itself, the chart).
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn policy_yaml_is_the_charts_policy_and_its_rbac() {
    let shipped = objects(&std::fs::read_to_string(local::workspace().join("policy.yaml")).expect("policy.yaml"));
    let module = shipped[0]["spec"]["module"].as_str().expect("policy.yaml's module");
    let render = template(&[
        "--show-only",
        "templates/policy.yaml",
        "--set",
        &format!("policy.module={module}"),
        "--set",
        "controller.enabled=false",
    ])
    .expect("rendered");
    let mut render = objects(&render);
    for object in &mut render {
        let labels = object["metadata"]["labels"].as_object_mut().expect("labels");
        for helm_only in [
            "app.kubernetes.io/instance",
            "app.kubernetes.io/managed-by",
            "helm.sh/chart",
        ] {
            labels.remove(helm_only).expect(helm_only);
        }
    }
    // helm orders objects by kind.
    let sorted = |mut objects: Vec<Value>| {
        objects.sort_by_key(|o| (o["kind"].to_string(), o["metadata"]["name"].to_string()));
        objects
    };
    assert_eq!(sorted(render), sorted(shipped));
}

/// Where `helm template` stops, and why: the template file and the message, from its
/// "Error: execution error at (FILE:LINE:COLUMN): MESSAGE".
fn refusal(args: &[&str]) -> (String, String) {
    let error = template(args).expect_err("refused");
    let first = error.lines().next().unwrap_or_default();
    let (place, message) = first
        .strip_prefix("Error: execution error at (")
        .and_then(|rest| rest.split_once("): "))
        .unwrap_or_else(|| panic!("not a template's refusal: {error}"));
    let file = place.split(':').next().unwrap_or_default();
    (file.to_owned(), message.to_owned())
}

/// What the chart's values.schema.json refuses, a line each: "- at '/PATH': WHY".
fn schema_refusal(args: &[&str]) -> Vec<String> {
    let error = template(args).expect_err("refused");
    let header =
        "Error: values don't meet the specifications of the schema(s) in the following chart(s):\nome-spread:\n";
    let lines = error
        .strip_prefix(header)
        .unwrap_or_else(|| panic!("not the schema's refusal: {error}"));
    lines.lines().map(str::to_owned).collect()
}

#[test]
#[ignore = "needs helm: make cluster-bin"]
fn the_chart_names_the_value_a_user_must_set_or_got_wrong() {
    let owned = |file: &str, message: &str| (file.to_owned(), message.to_owned());
    assert_eq!(
        refusal(&[]),
        owned(
            "ome-spread/templates/policy.yaml",
            "policy.module is required: push the annotated policy (kwctl push annotated-policy.wasm YOUR_REGISTRY/ome-spread:v0.1.0) and set policy.module=registry://YOUR_REGISTRY/ome-spread:v0.1.0"
        )
    );
    assert_eq!(
        refusal(&["--set", "policy.module=registry://r/p:v1"]),
        owned(
            "ome-spread/templates/controller.yaml",
            "controller.image.repository is required: the image built from deploy/Dockerfile, pushed (e.g. YOUR_REGISTRY/ome-spread-controller)"
        )
    );
    let mut bad_mode = REQUIRED.to_vec();
    bad_mode.extend(["--set", "controller.rebalance=auto"]);
    assert_eq!(
        schema_refusal(&bad_mode),
        ["- at '/controller/rebalance': value must be one of 'off', 'recommend', 'migrate'"]
    );
    // The policy alone needs no image.
    assert!(
        template(&[
            "--set",
            "policy.module=registry://r/p:v1",
            "--set",
            "controller.enabled=false"
        ])
        .is_ok()
    );
}

/// `settings` is rendered into the ClusterAdmissionPolicy, which the controller is told to read;
/// `patch` on InferenceServices comes with `migrate` only.
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn one_settings_value_reaches_the_policy_and_the_controller_reads_that_policy() {
    let mut args = REQUIRED.to_vec();
    args.extend(["--set", "settings.maxSkew=2", "--set", "policy.name=spread"]);
    let render = objects(&template(&args).expect("rendered"));
    let policy = find(&render, "ClusterAdmissionPolicy").expect("the policy");
    assert_eq!(policy["metadata"]["name"], "spread");
    assert_eq!(
        policy["spec"]["settings"],
        json!({"onMissingReplica": "Reject", "maxSkew": 2})
    );
    let deployment = find(&render, "Deployment").expect("the Deployment");
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["args"],
        json!([
            "controller",
            "--policy",
            "spread",
            "--log-json",
            "--rebalance",
            "recommend",
            "--rebalance-max-per-hour",
            "10",
            "--reports",
            "openreports",
            "--stalled-after",
            "600",
            "--listen",
            "0.0.0.0:8080"
        ])
    );
    let migrate_role = |render: &[Value]| {
        render
            .iter()
            .any(|o| o["metadata"]["name"] == "ome-spread-controller-rebalance")
    };
    assert!(!migrate_role(&render), "recommend: no patch of InferenceServices");
    args.extend(["--set", "controller.rebalance=migrate"]);
    let migrate = objects(&template(&args).expect("rendered"));
    assert!(migrate_role(&migrate), "migrate: its RBAC");
    assert_eq!(
        find(&migrate, "Deployment").expect("the Deployment")["spec"]["template"]["spec"]["containers"][0]["args"][5],
        "migrate"
    );
}

/// Stage 1 of docs/operations.md: the controller alone. The values a user sets then: the image,
/// and no policy (`policy.module` not required).
const CONTROLLER_ALONE: [&str; 4] = [
    "--set",
    "policy.enabled=false",
    "--set",
    "controller.image.repository=YOUR_REGISTRY/ome-spread-controller",
];

/// Without the policy nothing of it is rendered (no ClusterAdmissionPolicy, no policy-server
/// RBAC, no read of the policy by the controller); the controller reads `settings` from a
/// ConfigMap it mounts, and a change of them, only of them, rolls its pods.
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn without_the_policy_the_controller_alone_reads_the_settings_from_a_config_map() {
    let render_with = |extra: &[&str]| objects(&template(&[&CONTROLLER_ALONE[..], extra].concat()).expect("rendered"));
    let render = render_with(&["--set", "settings.maxSkew=2"]);
    let names = |kind: &str| -> Vec<&str> {
        let of_kind = render.iter().filter(|o| o["kind"] == kind);
        of_kind
            .map(|o| o["metadata"]["name"].as_str().expect("a name"))
            .collect()
    };
    assert_eq!(names("ClusterAdmissionPolicy"), Vec::<&str>::new());
    assert_eq!(names("ClusterRole"), ["ome-spread-controller"]);
    assert_eq!(names("ClusterRoleBinding"), ["ome-spread-controller"]);
    let role = find(&render, "ClusterRole").expect("the controller's ClusterRole");
    let groups: Vec<&Value> = role["rules"]
        .as_array()
        .expect("rules")
        .iter()
        .map(|r| &r["apiGroups"])
        .collect();
    assert!(!groups.contains(&&json!(["policies.kubewarden.io"])), "{groups:?}");
    let config_map = find(&render, "ConfigMap").expect("the settings' ConfigMap");
    assert_eq!(config_map["metadata"]["name"], "ome-spread-settings");
    assert_eq!(
        config_map["data"],
        json!({"settings.yaml": "maxSkew: 2\nonMissingReplica: Reject"})
    );
    let pod = |render: &[Value]| find(render, "Deployment").expect("the Deployment")["spec"]["template"].clone();
    let template = pod(&render);
    let container = &template["spec"]["containers"][0];
    assert_eq!(
        container["args"].as_array().expect("args")[..3],
        [
            json!("controller"),
            json!("--settings"),
            json!("/etc/ome-spread/settings.yaml")
        ]
    );
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "settings", "mountPath": "/etc/ome-spread", "readOnly": true}])
    );
    assert_eq!(
        template["spec"]["volumes"],
        json!([{"name": "settings", "configMap": {"name": "ome-spread-settings"}}])
    );
    let checksum = |template: &Value| template["metadata"]["annotations"]["checksum/settings"].clone();
    assert!(checksum(&template).is_string(), "{template}");
    let other_settings = pod(&render_with(&["--set", "settings.maxSkew=3"]));
    assert_ne!(checksum(&other_settings), checksum(&template));
    let other_log_level = pod(&render_with(&[
        "--set",
        "settings.maxSkew=2",
        "--set",
        "controller.logLevel=debug",
    ]));
    assert_eq!(checksum(&other_log_level), checksum(&template));
}

/// docs/operations.md, "Upgrade": the Deployment's strategy, not its PodDisruptionBudget, rolls
/// one pod at a time.
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn an_upgrade_rolls_the_controller_one_pod_at_a_time() {
    let render = objects(&template(&REQUIRED).expect("rendered"));
    assert_eq!(
        find(&render, "Deployment").expect("the Deployment")["spec"]["strategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}})
    );
}

/// A field of the chart's Chart.yaml.
fn chart_yaml(field: &str) -> String {
    let text = std::fs::read_to_string(chart().join("Chart.yaml")).expect("Chart.yaml");
    let chart: Value = serde_saphyr::from_str(&text).expect("Chart.yaml is YAML");
    chart[field]
        .as_str()
        .unwrap_or_else(|| panic!("Chart.yaml: {field}"))
        .to_owned()
}

/// The image is the chart's appVersion unless a tag is set, and a digest pins it; each value of
/// the pod reaches the Deployment where Kubernetes reads it, and `policy.mode` the policy.
/// The controller's image: the chart's appVersion, or the tag given, or the digest given.
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn the_controller_image_is_the_app_version_a_tag_or_a_digest() {
    let image = |args: &[&str]| {
        let render = objects(&template(args).expect("rendered"));
        let deployment = find(&render, "Deployment").expect("the Deployment").clone();
        deployment["spec"]["template"]["spec"]["containers"][0]["image"].clone()
    };
    let repository = "YOUR_REGISTRY/ome-spread-controller";
    let app_version = chart_yaml("appVersion");
    assert_eq!(image(&REQUIRED), format!("{repository}:{app_version}"));
    let mut tagged = REQUIRED.to_vec();
    tagged.extend(["--set", "controller.image.tag=v9.9.9-rc1"]);
    assert_eq!(image(&tagged), format!("{repository}:v9.9.9-rc1"));
    let digest = format!("sha256:{}", "0123456789abcdef".repeat(4));
    let pinned = format!("controller.image.digest={digest}");
    tagged.extend(["--set", &pinned]);
    assert_eq!(image(&tagged), format!("{repository}@{digest}"));
}

#[test]
#[ignore = "needs helm: make cluster-bin"]
fn every_controller_value_reaches_its_deployment_and_the_mode_the_policy() {
    let mut args = REQUIRED.to_vec();
    args.extend([
        "--set-json",
        r#"controller.imagePullSecrets=[{"name": "my-registry"}]"#,
        "--set-json",
        r#"controller.affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "In", "values": ["system"]}]}]}}}"#,
        "--set",
        "controller.priorityClassName=system-cluster-critical",
        "--set",
        "controller.podAnnotations.example\\.com/owner=platform",
        "--set",
        "controller.podLabels.team=platform",
        "--set",
        "controller.rebalanceMaxPerHour=3",
        "--set",
        "controller.reports=policyreport",
        "--set",
        "controller.stalledAfter=120",
        "--set",
        "controller.port=9090",
        "--set",
        "policy.mode=monitor",
    ]);
    let render = objects(&template(&args).expect("rendered"));
    assert_eq!(
        find(&render, "ClusterAdmissionPolicy").expect("the policy")["spec"]["mode"],
        "monitor"
    );
    let template = &find(&render, "Deployment").expect("the Deployment")["spec"]["template"];
    let pod = &template["spec"];
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "my-registry"}]));
    assert_eq!(
        pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"]
            [0]["key"],
        "pool"
    );
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(
        template["metadata"]["annotations"],
        json!({"example.com/owner": "platform"})
    );
    assert_eq!(template["metadata"]["labels"]["team"], "platform");
    assert_eq!(
        template["metadata"]["labels"]["app.kubernetes.io/component"], "controller",
        "the standard labels kept"
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["args"].as_array().expect("args")[6..],
        json!([
            "--rebalance-max-per-hour",
            "3",
            "--reports",
            "policyreport",
            "--stalled-after",
            "120",
            "--listen",
            "0.0.0.0:9090"
        ])
        .as_array()
        .expect("args")[..]
    );
    assert_eq!(container["ports"][0]["containerPort"], 9090);
    let service = find(&render, "Service").expect("the metrics Service");
    assert_eq!(service["spec"]["ports"][0]["port"], 9090);
}

/// The controller may write exactly the kind of report `controller.reports` chooses.
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn the_controller_may_write_only_the_reports_chosen() {
    let report_rules = |reports: &str| {
        let mut args = REQUIRED.to_vec();
        let value = format!("controller.reports={reports}");
        args.extend(["--set", &value]);
        let render = objects(&template(&args).expect("rendered"));
        let role = render
            .iter()
            .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "ome-spread-controller")
            .expect("the controller's ClusterRole")
            .clone();
        let rules = role["rules"].as_array().expect("rules").clone();
        rules
            .into_iter()
            .filter(|r| r["apiGroups"] == json!(["openreports.io"]) || r["apiGroups"] == json!(["wgpolicyk8s.io"]))
            .collect::<Vec<_>>()
    };
    let verbs = json!(["create", "patch", "delete"]);
    assert_eq!(
        report_rules("openreports"),
        [json!({"apiGroups": ["openreports.io"], "resources": ["reports"], "verbs": verbs})]
    );
    assert_eq!(
        report_rules("policyreport"),
        [json!({"apiGroups": ["wgpolicyk8s.io"], "resources": ["policyreports"], "verbs": verbs})]
    );
    assert_eq!(report_rules("off"), Vec::<Value>::new());
    let refused = schema_refusal(&[&REQUIRED[..], &["--set", "controller.reports=OpenReports"]].concat());
    assert!(
        refused
            .iter()
            .any(|line| line.starts_with("- at '/controller/reports'")),
        "{refused:?}"
    );
}

/// Kubernetes' recommended labels and helm's on every object the chart renders, each the
/// component it belongs to: the policy (with the policy-server's RBAC) or the controller.
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn every_object_carries_the_standard_labels() {
    let mut args = REQUIRED.to_vec();
    args.extend([
        "--set",
        "controller.rebalance=migrate",
        "--set",
        "serviceMonitor.enabled=true",
        "--set",
        "prometheusRule.enabled=true",
        "--set",
        "grafanaDashboard.enabled=true",
        "--set",
        "networkPolicy.enabled=true",
        "--set-json",
        r#"networkPolicy.metricsFrom=[{"podSelector":{}}]"#,
    ]);
    let render = objects(&template(&args).expect("rendered"));
    let mut components = Vec::new();
    for object in &render {
        let labels = &object["metadata"]["labels"];
        let component = labels["app.kubernetes.io/component"].as_str().unwrap_or_default();
        let kind = object["kind"].as_str().unwrap_or_default();
        let name = object["metadata"]["name"].as_str().unwrap_or_default();
        components.push(format!("{kind} {name}: {component}"));
        for (label, value) in [
            ("app.kubernetes.io/name", "ome-spread".to_owned()),
            ("app.kubernetes.io/instance", "ome-spread".to_owned()),
            ("app.kubernetes.io/version", chart_yaml("appVersion")),
            ("app.kubernetes.io/part-of", "ome-spread".to_owned()),
            ("app.kubernetes.io/managed-by", "Helm".to_owned()),
            ("helm.sh/chart", format!("ome-spread-{}", chart_yaml("version"))),
        ] {
            assert_eq!(labels[label], value.as_str(), "{kind} {name}: {label}");
        }
    }
    components.sort();
    assert_eq!(
        components,
        [
            "ClusterAdmissionPolicy ome-spread: policy",
            "ClusterRole ome-spread-controller-rebalance: controller",
            "ClusterRole ome-spread-controller: controller",
            "ClusterRole ome-spread-policy-server: policy",
            "ClusterRoleBinding ome-spread-controller-rebalance: controller",
            "ClusterRoleBinding ome-spread-controller: controller",
            "ClusterRoleBinding ome-spread-policy-server: policy",
            "ConfigMap ome-spread-dashboard: controller",
            "Deployment ome-spread-controller: controller",
            "Namespace ome-spread: controller",
            "NetworkPolicy ome-spread-controller: controller",
            "PodDisruptionBudget ome-spread-controller: controller",
            "PrometheusRule ome-spread-controller: controller",
            "Role ome-spread-controller-leader-election: controller",
            "RoleBinding ome-spread-controller-leader-election: controller",
            "Service ome-spread-controller-metrics: controller",
            "ServiceAccount ome-spread-controller: controller",
            "ServiceMonitor ome-spread-controller: controller",
            "ValidatingAdmissionPolicy ome-spread-controller-migrate-writes: controller",
            "ValidatingAdmissionPolicyBinding ome-spread-controller-migrate-writes: controller",
        ],
        "every object"
    );
}

/// The optional NetworkPolicy: only the peers named reach the controller's pods, on the port of
/// /metrics; enabled without a peer, helm refuses it (it would shut Prometheus out unseen).
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn the_network_policy_lets_only_the_peers_named_reach_metrics() {
    let mut args = REQUIRED.to_vec();
    args.extend(["--set", "networkPolicy.enabled=true"]);
    assert_eq!(
        schema_refusal(&args),
        ["- at '/networkPolicy/metricsFrom': minItems: got 0, want 1"]
    );
    let prometheus = r#"[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]"#;
    let metrics_from = format!("networkPolicy.metricsFrom={prometheus}");
    args.extend(["--set-json", &metrics_from]);
    let render = objects(&template(&args).expect("rendered"));
    let policy = find(&render, "NetworkPolicy").expect("the NetworkPolicy");
    let deployment = find(&render, "Deployment").expect("the Deployment");
    assert_eq!(
        policy["spec"]["podSelector"]["matchLabels"],
        deployment["spec"]["selector"]["matchLabels"]
    );
    assert_eq!(
        policy["spec"]["ingress"],
        json!([{"ports": [{"port": "http", "protocol": "TCP"}],
            "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]}])
    );
    assert_eq!(policy["spec"]["policyTypes"], json!(["Ingress"]));
    assert!(find(&objects(&template(&REQUIRED).expect("rendered")), "NetworkPolicy").is_none());
}

/// The PrometheusRule the chart renders with its default values.
fn prometheus_rule() -> Value {
    let mut args = REQUIRED.to_vec();
    args.extend([
        "--set",
        "prometheusRule.enabled=true",
        "--show-only",
        "templates/prometheusrule.yaml",
    ]);
    objects(&template(&args).expect("rendered")).remove(0)
}

/// The alerts under Prometheus' own rule tests (charts/alerts-test.yaml): a replica flapping
/// between two False reasons fires, a domain whose loss leaves no Instance serving fires, two
/// leaders fire, and a plain scrape config's series (no `namespace`) raise no false NoLeader.
#[test]
#[ignore = "needs helm and promtool: make cluster-bin"]
fn the_alerts_fire_when_they_should_under_promtool() {
    let dir = local::workspace().join(format!("target/chart-alerts/{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a directory for the rules");
    let rules = serde_json::to_string(&prometheus_rule()["spec"]).expect("JSON");
    std::fs::write(dir.join("rules.json"), rules).expect("rules.json written");
    std::fs::copy(
        local::workspace().join("charts/alerts-test.yaml"),
        dir.join("alerts-test.yaml"),
    )
    .expect("the rule tests copied");
    let run = Command::new(cluster_bin("promtool"))
        .args(["test", "rules", "alerts-test.yaml"])
        .current_dir(&dir)
        .output()
        .expect("promtool runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "promtool test rules:\n{said}");
    std::fs::remove_dir_all(&dir).expect("the rules removed");
}

/// Each alert's runbook_url is docs/runbook.md at the alert's own section.
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn every_alert_links_its_section_of_the_runbook() {
    let runbook = std::fs::read_to_string(local::workspace().join("docs/runbook.md")).expect("docs/runbook.md");
    let rule = prometheus_rule();
    let mut alerts = Vec::new();
    for alert in rule["spec"]["groups"][0]["rules"].as_array().expect("rules") {
        let name = alert["alert"].as_str().expect("an alert's name");
        assert_eq!(
            alert["annotations"]["runbook_url"],
            format!(
                "https://github.com/ome-spread/ome-spread/blob/main/docs/runbook.md#{}",
                name.to_lowercase()
            ),
            "{name}"
        );
        assert!(
            runbook.contains(&format!("\n## {name}\n")),
            "docs/runbook.md has no section {name}"
        );
        alerts.push(name);
    }
    assert_eq!(
        alerts,
        [
            "OmeSpreadNotSatisfied",
            "OmeSpreadDomainLossLeavesNone",
            "OmeSpreadReconcileErrors",
            "OmeSpreadNoLeader",
            "OmeSpreadSeveralLeaders"
        ]
    );
}

/// The metric names a text names: `ome_spread_` and what follows.
fn metric_names(text: &str) -> std::collections::BTreeSet<String> {
    let mut names = std::collections::BTreeSet::new();
    for (at, _) in text.match_indices("ome_spread_") {
        let name: String = text[at..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        names.insert(name);
    }
    names
}

/// Every metric the Grafana dashboard queries is one the controller exports: a sample of it in
/// /metrics's exposition once each kind of series is shown.
#[test]
fn every_metric_the_dashboard_names_is_exported() {
    use ome_spread_controller::metrics::Metrics;
    use ome_spread_core::diagnosis::{Reason, Report};
    use ome_spread_core::loss::Loss;

    let metrics = Metrics::default();
    let report = Report {
        reason: Reason::Skewed,
        message: String::new(),
        action: "",
        projected: Default::default(),
        in_effect: Default::default(),
        instances_per_domain: [("zone-a".to_owned(), 2), ("zone-b".to_owned(), 0)].into(),
        skew: 2,
    };
    let loss = Loss {
        domain: "zone-a".into(),
        lost: vec!["m-engine-0-default-0".into(), "m-engine-1-default-0".into()],
        left_serving: 0,
        instances: 2,
        placed_again: vec!["zone-b".into()],
        still_counts: None,
    };
    metrics.show("ml", "m-engine", &report, Some(&loss));
    metrics.rebalance_moves("ml", "m-engine", Some(1));
    metrics.failed("api_500", std::time::Duration::from_millis(3));
    let exposition = metrics.encode();
    let samples: std::collections::BTreeSet<&str> = exposition
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split(['{', ' ']).next())
        .collect();

    let dashboard = std::fs::read_to_string(chart().join("dashboards/ome-spread.json")).expect("the dashboard");
    let named = metric_names(&dashboard);
    assert!(named.len() >= 10, "{named:?}");
    for name in &named {
        assert!(samples.contains(name.as_str()), "{name}: not in /metrics\n{exposition}");
    }
}

/// The chart's values.schema.json.
fn schema() -> Value {
    let path = chart().join("values.schema.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("the schema is JSON")
}

/// The settings the policy knows, as its own check lists them when it refuses one it does not.
fn settings_the_policy_knows() -> Vec<String> {
    let refused = Settings::from_json(&json!({"unknown": 1})).expect_err("an unknown setting is refused");
    let (_, names) = refused
        .split_once("the settings are ")
        .unwrap_or_else(|| panic!("the refusal lists the settings: {refused}"));
    names.split(", ").map(str::to_owned).collect()
}

/// The schema's `settings` are the policy's, no more, no fewer, and nothing else is let through.
#[test]
fn the_schema_knows_exactly_the_settings_the_policy_knows() {
    let settings = &schema()["properties"]["settings"];
    assert_eq!(settings["additionalProperties"], false, "a misspelt setting is refused");
    let mut named: Vec<String> = settings["properties"]
        .as_object()
        .expect("the settings' properties")
        .keys()
        .cloned()
        .collect();
    named.sort();
    let mut known = settings_the_policy_knows();
    known.sort();
    assert_eq!(named, known);
}

/// Settings values, each given to helm (`--set-json settings=...`, over values.yaml's
/// `onMissingReplica: Reject`) and to the policy's own check: one accepts what the other accepts.
const SETTINGS_CASES: [&str; 18] = [
    r#"{"maxSkew": 1}"#,
    r#"{"maxSkew": 2147483647}"#,
    r#"{"minDomains": 3}"#,
    r#"{"nodeTaintsPolicy": "Honor"}"#,
    r#"{"nodeTaintsPolicy": "Ignore"}"#,
    r#"{"onMissingReplica": "Accept"}"#,
    r#"{"maxSkew": 2, "minDomains": 2, "nodeTaintsPolicy": "Honor"}"#,
    r#"{"maxSkew": 0}"#,
    r#"{"maxSkew": -1}"#,
    r#"{"maxSkew": "2"}"#,
    r#"{"maxSkew": 1.5}"#,
    r#"{"maxSkew": 2147483648}"#,
    r#"{"minDomains": 0}"#,
    r#"{"nodeTaintsPolicy": "honor"}"#,
    r#"{"onMissingReplica": "reject"}"#,
    r#"{"onMissingReplica": true}"#,
    r#"{"maxskew": 2}"#,
    r#"{"zones": ["a"]}"#,
];

#[test]
#[ignore = "needs helm: make cluster-bin"]
fn helm_refuses_exactly_the_settings_the_policy_refuses() {
    let mut accepted = 0;
    for case in SETTINGS_CASES {
        let given: Value = serde_json::from_str(case).expect("a case is JSON");
        let mut settings = json!({"onMissingReplica": "Reject"});
        for (name, value) in given.as_object().expect("an object") {
            settings[name] = value.clone();
        }
        let policy = Settings::from_json(&settings).map(|_| ());
        let mut args = REQUIRED.to_vec();
        let set = format!("settings={case}");
        args.extend(["--set-json", &set]);
        let helm = template(&args).map(|_| ());
        assert_eq!(
            helm.is_ok(),
            policy.is_ok(),
            "{case}: helm {helm:?}, the policy {policy:?}"
        );
        accepted += usize::from(policy.is_ok());
    }
    assert_eq!(accepted, 7, "both ways are tried");
}

/// `helm install` (its check is `helm template`'s) stops on a bad setting, naming it, before
/// anything reaches the cluster and policy-server.
#[test]
#[ignore = "needs helm: make cluster-bin"]
fn a_bad_setting_is_refused_by_helm_naming_the_field() {
    for (set, message) in [
        ("settings.maxSkew=0", "- at '/settings/maxSkew': minimum: got 0, want 1"),
        (
            "settings.maxskew=2",
            "- at '/settings': additional properties 'maxskew' not allowed",
        ),
    ] {
        let mut args = REQUIRED.to_vec();
        args.extend(["--set", set]);
        assert_eq!(schema_refusal(&args), [message], "{set}");
    }
}

/// The value of an env entry of the container as the kubelet would set it for pod `pod` in
/// namespace `namespace`: a plain value or one of the two fields the chart refers to.
fn env_value(entry: &Value, pod: &str, namespace: &str) -> String {
    if let Some(value) = entry["value"].as_str() {
        return value.to_owned();
    }
    match entry["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
        Some("metadata.name") => pod.to_owned(),
        Some("metadata.namespace") => namespace.to_owned(),
        _ => panic!("an env entry this test cannot set: {entry}"),
    }
}

/// No kubelet here (cluster/up.sh): the Deployment helm installed is read back from the API
/// server, and its container run on this host as the pod would run it: its args (its listen
/// address on 127.0.0.1), its env, a token of its ServiceAccount.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn the_chart_installs_and_the_controller_it_deploys_leads_and_writes_the_condition() {
    let Some(admin) = live::with_crds().await else {
        return;
    };
    install_as_the_readme_does(&admin, &REQUIRED).await;
    live::fresh_namespace(&admin, NAMESPACE).await;
    live::apply(&admin, &live::unspread_service(NAMESPACE, "srt-chart")).await;

    let pod = &deployment_pod(&admin).await;
    admitted_under_pod_security(&admin, pod).await;
    assert_eq!(
        pod["containers"][0]["args"].as_array().expect("args")[..3],
        [json!("controller"), json!("--policy"), json!("ome-spread")],
        "the settings are the policy's"
    );
    let identity = "ome-spread-controller-chart-0";
    let listen = format!("127.0.0.1:{}", local::free_port());
    let controller = run_as_its_pod(&admin, pod, identity, &listen).await;

    eventually("the Deployment's controller on the Lease", 60, || async {
        live::lease_holder(&admin).await.filter(|h| h == identity)
    })
    .await;
    let condition = spread_condition(&admin, NAMESPACE).await;
    let (status, reason, _) = said(&condition);
    assert_eq!((status, reason), ("True", "NotRequested"), "{condition}");
    // Its probes answer 200 where the Deployment points the kubelet, which retries them too.
    for probe in ["readinessProbe", "livenessProbe"] {
        let path = pod["containers"][0][probe]["httpGet"]["path"].as_str().expect("a path");
        eventually(&format!("{probe} {path} 200"), 60, || async {
            (live::get(&listen, path).await.0 == "200").then_some(())
        })
        .await;
    }

    controller.kill().await;
    helm(&admin, &["uninstall", "ome-spread", "-n", "ome-spread", "--wait"]).await;
    kubectl(&admin, &["delete", "namespace", NAMESPACE, "--timeout=90s"]).await;
    kubectl(&admin, &["delete", "clusterservingruntime", "srt-chart"]).await;
}

/// What docs/operations.md says removes the reports the controller wrote, which outlive the
/// release.
const REMOVE_REPORTS: &str =
    "kubectl delete reports.openreports.io --all-namespaces -l app.kubernetes.io/managed-by=ome-spread";

/// The names of the reports of the controller's label in NAMESPACE.
async fn reports(admin: &Path) -> String {
    let args = [
        "get",
        "reports.openreports.io",
        "-n",
        NAMESPACE,
        "-l",
        "app.kubernetes.io/managed-by=ome-spread",
    ];
    kubectl(admin, &[&args[..], &["-o", "name"]].concat()).await
}

/// Stage 1 of docs/operations.md on the real API server: the controller alone renders no
/// ClusterAdmissionPolicy, says so in its notes, and, run as its Deployment says with the
/// ConfigMap's settings, writes the Spread condition and its report. `helm uninstall` leaves the
/// report (owned by its InferenceReplica, not by the release), and docs/operations.md's command
/// removes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn the_controller_alone_writes_the_condition_and_its_reports_outlive_the_release_as_the_docs_say() {
    let Some(admin) = live::with_crds().await else {
        return;
    };
    live::install(&admin, live::OPENREPORTS_CRD).await;
    let notes = install_as_the_readme_does(&admin, &CONTROLLER_ALONE).await;
    let stage_one = "is installed: its controller alone, in namespace ome-spread, with\nthe settings of ConfigMap ome-spread-settings. No ClusterAdmissionPolicy: nothing is in the pod\npath";
    assert!(notes.contains(stage_one), "{notes}");
    assert_eq!(
        kubectl(&admin, &["get", "clusteradmissionpolicies", "-o", "name"]).await,
        ""
    );
    live::fresh_namespace(&admin, NAMESPACE).await;
    live::apply(&admin, &live::unspread_service(NAMESPACE, "srt-chart")).await;
    let pod = deployment_pod(&admin).await;
    let listen = format!("127.0.0.1:{}", local::free_port());
    let controller = run_as_its_pod(&admin, &pod, "ome-spread-controller-chart-0", &listen).await;
    let condition = spread_condition(&admin, NAMESPACE).await;
    let (status, reason, _) = said(&condition);
    assert_eq!((status, reason), ("True", "NotRequested"), "{condition}");
    let report = eventually("the replica's report", 60, || async {
        Some(reports(&admin).await).filter(|r| !r.is_empty())
    })
    .await;
    controller.kill().await;

    helm(&admin, &["uninstall", "ome-spread", "-n", "ome-spread", "--wait"]).await;
    assert_eq!(reports(&admin).await, report, "the report outlives the release");
    let operations = std::fs::read_to_string(local::workspace().join("docs/operations.md")).expect("operations.md");
    assert!(
        operations.contains(REMOVE_REPORTS),
        "docs/operations.md gives {REMOVE_REPORTS}"
    );
    let remove: Vec<&str> = REMOVE_REPORTS.split(' ').skip(1).collect();
    kubectl(&admin, &remove).await;
    assert_eq!(reports(&admin).await, "");
    kubectl(&admin, &["delete", "namespace", NAMESPACE, "--timeout=90s"]).await;
    kubectl(&admin, &["delete", "clusterservingruntime", "srt-chart"]).await;
}

/// The webhook kubewarden-controller writes for the chart's ClusterAdmissionPolicy as the API
/// server stores it, with no policy-server behind it: nothing serves kubewarden's Service
/// policy-server-default. Removed when dropped, pass or fail.
struct Unserved(PathBuf);

impl Unserved {
    /// Written (again) from the policy as it is now: one configuration, changed in place.
    async fn apply(&self) {
        let read = ["get", "clusteradmissionpolicy", "ome-spread", "-o", "json"];
        let policy: Value = serde_json::from_str(&kubectl(&self.0, &read).await).expect("the policy");
        // Nothing dials the Service: any CA.
        let config = webhook::render_for_policy_server(&policy, b"", webhook::Naming::Clusterwide).expect("rendered");
        live::apply(&self.0, &serde_json::to_string(&config).expect("JSON")).await;
    }
}

impl Drop for Unserved {
    fn drop(&mut self) {
        let delete = [
            "delete",
            "mutatingwebhookconfiguration",
            "clusterwide-ome-spread",
            "--ignore-not-found",
        ];
        live::kubectl_blocking(&self.0, &delete, None);
    }
}

/// The InferenceService of `namespace` that asks for its engine's Instances spread Required over
/// zones, and the InferenceReplica OME writes for it, as the API server stores it.
async fn spread_replica(admin: &Path, namespace: &str) -> Value {
    let runtime = json!({"apiVersion": "ome.io/v1beta1", "kind": "ClusterServingRuntime",
        "metadata": {"name": "srt-failure"}, "spec": {"engineConfig": {"runner": {"image": "sglang"}}}});
    let service = json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {"name": "qwen3-0-6b", "namespace": namespace},
        "spec": {"deploymentMode": "OMENative", "runtime": {"name": "srt-failure"},
                 "engine": {"minReplicas": 1, "topologySpread": "Required", "topologySpreadKey": "topology.kubernetes.io/zone"}}});
    live::apply(admin, &format!("{runtime}\n---\n{service}")).await;
    let read = |kind: &'static str, name: &'static str| async move {
        let args = ["get", kind, name, "-n", namespace, "-o", "json"];
        serde_json::from_str::<Value>(&kubectl(admin, &args).await).expect("an object")
    };
    let service = read("inferenceservice", "qwen3-0-6b").await;
    let replica = render::replica(&service, Some(&runtime), "engine").expect("the replica");
    live::apply(admin, &replica.to_string()).await;
    read("inferencereplica", "qwen3-0-6b-engine").await
}

/// `pod` created as OME creates it: the API server's refusal (code, reason, message), if refused.
async fn created(pods: &kube::Api<Pod>, pod: &Pod) -> Result<Pod, (u16, String, String)> {
    match pods.create(&kube::api::PostParams::default(), pod).await {
        Ok(created) => Ok(created),
        Err(kube::Error::Api(status)) => Err((status.code, status.reason, status.message)),
        Err(e) => panic!("the API server did not answer: {e}"),
    }
}

/// The Spread condition of qwen3-0-6b-engine in `namespace`, once written.
async fn spread_condition(admin: &Path, namespace: &str) -> Value {
    eventually("the Spread condition", 60, || async {
        live::spread(&live::replica(admin, namespace).await?).cloned()
    })
    .await
}

/// A condition's status, reason and message.
fn said(condition: &Value) -> (&str, &str, &str) {
    let field = |name: &str| condition[name].as_str().unwrap_or_default();
    (field("status"), field("reason"), field("message"))
}

/// The failure policy's trade-off, on the real API server with the policy-server unreachable
/// (docs/operations.md, "The failure policy"). Under Fail the Instance OME creates is refused with
/// the API server's message, and the controller's condition says nothing of it; under Ignore it is
/// created as OME rendered it, without the settings' completion (`nodeTaintsPolicy: Honor`), and
/// the controller names it: PodsPredateChange.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn with_no_policy_server_fail_refuses_omes_pod_and_ignore_creates_it_without_the_settings() {
    let Some(admin) = live::with_crds().await else {
        return;
    };
    let fail = [
        "--set",
        "settings.nodeTaintsPolicy=Honor",
        "--set",
        "policy.failurePolicy=Fail",
    ];
    install_as_the_readme_does(&admin, &[&REQUIRED[..], &fail].concat()).await;
    let namespace = "ome-spread-failure";
    live::fresh_namespace(&admin, namespace).await;
    let replica = spread_replica(&admin, namespace).await;
    let pod = render::instance_pods(&replica, Instance::new(0), Terms::InTree).remove(0);
    let pod: Pod = serde_json::from_value(pod).expect("a pod");
    let pods: kube::Api<Pod> = kube::Api::namespaced(live::client_of(&admin).await, namespace);
    let listen = format!("127.0.0.1:{}", local::free_port());
    let identity = "ome-spread-controller-chart-0";
    let controller = run_as_its_pod(&admin, &deployment_pod(&admin).await, identity, &listen).await;
    let webhook = Unserved(admin.clone());

    webhook.apply().await;
    refused_under_fail(&admin, &pods, &pod).await;
    let chart = chart();
    let upgrade = [
        "upgrade",
        "ome-spread",
        chart.to_str().expect("a path"),
        "-n",
        "ome-spread",
    ];
    helm(
        &admin,
        &[
            &upgrade[..],
            &["--reuse-values", "--set", "policy.failurePolicy=Ignore"],
        ]
        .concat(),
    )
    .await;
    // In place: the API server calls the webhook under Fail until it knows it under Ignore.
    webhook.apply().await;
    created_under_ignore(&admin, &pods, &pod).await;

    controller.kill().await;
    drop(webhook);
    live::uninstall_chart(&admin).await;
    kubectl(&admin, &["delete", "namespace", namespace, "--timeout=90s"]).await;
    kubectl(&admin, &["delete", "clusterservingruntime", "srt-failure"]).await;
}

/// Under Fail: OME's pod refused with the API server's message, and the controller, which sees
/// only pods, finds nothing amiss.
async fn refused_under_fail(admin: &Path, pods: &kube::Api<Pod>, pod: &Pod) {
    let namespace = pod.metadata.namespace.as_deref().expect("a namespace");
    let name = pod.metadata.name.as_deref().expect("a name");
    // Until the API server knows the configuration a pod passes: deleted, and created again.
    let refused = eventually("OME's pod refused", 60, || async {
        let refused = created(pods, pod).await.err();
        if refused.is_none() {
            let delete = ["delete", "pod", name, "-n", namespace, "--force", "--grace-period=0"];
            kubectl(admin, &delete).await;
        }
        refused
    })
    .await;
    // The API server's words for a webhook it cannot call, the Service's address in the POST,
    // and why: here no such Service (kube-apiserver's ClusterIP resolver, before any dial).
    let message = "Internal error occurred: failed calling webhook \"clusterwide-ome-spread.kubewarden.admission\": \
        failed to call webhook: Post \"https://policy-server-default.kubewarden.svc:8443/validate/clusterwide-ome-spread?timeout=10s\": \
        service \"policy-server-default\" not found";
    assert_eq!(refused, (500, "InternalError".to_owned(), message.to_owned()));
    let condition = spread_condition(admin, namespace).await;
    let nothing_yet = "no Instance has a pod yet. Nothing yet: the Instances count once they run in a domain.";
    assert_eq!(said(&condition), ("True", "Satisfied", nothing_yet));
}

/// Under Ignore: OME's pod created as OME rendered it, its own constraint (docs/rules.md, P5)
/// without the policy's `nodeTaintsPolicy: Honor`, and the controller names it.
async fn created_under_ignore(admin: &Path, pods: &kube::Api<Pod>, pod: &Pod) {
    let namespace = pod.metadata.namespace.as_deref().expect("a namespace");
    let stored = eventually("OME's pod created", 60, || async { created(pods, pod).await.ok() }).await;
    let stored = serde_json::to_value(&stored).expect("JSON");
    let ome_constraint = json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}}}]);
    assert_eq!(stored["spec"]["topologySpreadConstraints"], ome_constraint);
    let condition = eventually("PodsPredateChange", 60, || async {
        let condition = live::spread(&live::replica(admin, namespace).await?).cloned()?;
        (condition["reason"] == "PodsPredateChange").then_some(condition)
    })
    .await;
    let predates = "the pods qwen3-0-6b-engine-0-default-0 are older than the change: they have no SPREAD-KEY, \
        or a SPREAD-KEY or WHEN from before it. Request an Instance migration to move them.";
    assert_eq!(said(&condition), ("False", "PodsPredateChange", predates));
}

/// The chart installed as the README installs it: the namespace made first, then taken over by
/// the chart, which labels it for Pod Security `restricted`. deploy/'s objects, where the
/// deployed suite applied them, are taken over too: the same names.
async fn install_as_the_readme_does(admin: &Path, values: &[&str]) -> String {
    live::install(admin, live::KUBEWARDEN_CRD).await;
    live::forget_lease(admin).await;
    live::uninstall_chart(admin).await;
    live::apply(admin, "apiVersion: v1\nkind: Namespace\nmetadata: {name: ome-spread}").await;
    let chart = chart();
    let mut install = vec![
        "install",
        "ome-spread",
        chart.to_str().expect("a path"),
        "-n",
        "ome-spread",
        "--take-ownership",
    ];
    install.extend(values);
    let installed = live::helm_with(admin, &install).await;
    assert!(installed.ok, "helm install: {}", installed.stderr);
    let namespace = kubectl(admin, &["get", "namespace", "ome-spread", "-o", "json"]).await;
    let namespace: Value = serde_json::from_str(&namespace).expect("the namespace");
    assert_eq!(
        namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
        "{namespace}"
    );
    installed.stdout
}

/// The Deployment's pod is admitted where Pod Security `restricted` is enforced (the API
/// server's own PodSecurity admission, on a dry run: no kubelet would run it).
async fn admitted_under_pod_security(admin: &Path, pod: &Value) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "ome-spread-controller-admitted", "namespace": "ome-spread"},
        "spec": pod});
    let create = ["create", "--dry-run=server", "-f", "-"];
    let admitted = live::kubectl_with(admin, &create, Some(&pod.to_string())).await;
    assert!(admitted.ok, "Pod Security: {}", admitted.stderr);
}

/// The pod of the controller's Deployment, as helm installed it.
async fn deployment_pod(admin: &Path) -> Value {
    let args = [
        "get",
        "deployment",
        "ome-spread-controller",
        "-n",
        "ome-spread",
        "-o",
        "json",
    ];
    let deployment: Value = serde_json::from_str(&kubectl(admin, &args).await).expect("the Deployment");
    deployment["spec"]["template"]["spec"].clone()
}

/// The container's args with each path under a ConfigMap volume's mountPath pointed into
/// `scratch`, where that ConfigMap's data is written as the kubelet would mount it.
async fn with_config_maps_mounted(admin: &Path, pod: &Value, scratch: &Path) -> Vec<String> {
    let container = &pod["containers"][0];
    let args = container["args"].as_array().expect("args").iter();
    let mut args: Vec<String> = args.map(|a| a.as_str().expect("a string").to_owned()).collect();
    for mount in container["volumeMounts"].as_array().into_iter().flatten() {
        let volumes = pod["volumes"].as_array().expect("the pod's volumes");
        let volume = volumes
            .iter()
            .find(|v| v["name"] == mount["name"])
            .expect("the mount's volume");
        let name = volume["configMap"]["name"].as_str().expect("a ConfigMap volume");
        let read = ["get", "configmap", name, "-n", "ome-spread", "-o", "json"];
        let config_map: Value = serde_json::from_str(&kubectl(admin, &read).await).expect("the ConfigMap");
        let dir = scratch.join(name);
        std::fs::create_dir_all(&dir).expect("the mount's directory");
        for (file, text) in config_map["data"].as_object().expect("data") {
            std::fs::write(dir.join(file), text.as_str().expect("text")).expect("written");
        }
        let mount_path = mount["mountPath"].as_str().expect("a mountPath");
        for arg in &mut args {
            if let Some(rest) = arg.strip_prefix(mount_path) {
                *arg = format!("{}{rest}", dir.display());
            }
        }
    }
    args
}

/// The pod's container run here as `identity`: its args with `listen` for its own address and
/// its ConfigMaps mounted, its env, and a token of its ServiceAccount; up and standing by.
async fn run_as_its_pod(admin: &Path, pod: &Value, identity: &str, listen: &str) -> Process {
    let container = &pod["containers"][0];
    let account = pod["serviceAccountName"].as_str().expect("a ServiceAccount");
    let scratch = local::workspace().join(format!("target/e2e-cluster/{}", std::process::id()));
    let token = live::service_account_kubeconfig(admin, "ome-spread", account, &scratch).await;
    let mut args = with_config_maps_mounted(admin, pod, &scratch).await;
    let at = args.iter().position(|a| *a == "--listen").expect("--listen");
    args[at + 1] = listen.to_owned();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let env: Vec<(String, PathBuf)> = container["env"]
        .as_array()
        .expect("env")
        .iter()
        .map(|e| {
            let name = e["name"].as_str().expect("a name").to_owned();
            (name, PathBuf::from(env_value(e, identity, "ome-spread")))
        })
        .chain([("KUBECONFIG".to_owned(), token)])
        .collect();
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (k.as_str(), v.as_path())).collect();
    let binary = local::binary("ome-spread");
    let (controller, _) = Process::start(identity, &binary, &args, &env, "standing by for the Lease").await;
    controller
}

/// `body` merged into InferenceService qwen3-0-6b, as the controller writes it (no read first);
/// the API server's refusal, if it refuses.
async fn merged(services: kube::Api<InferenceService>, body: Value) -> Result<(), String> {
    let params = kube::api::PatchParams::default();
    match services
        .patch("qwen3-0-6b", &params, &kube::api::Patch::Merge(&body))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) => Err(status.message),
        Err(e) => panic!("the API server did not answer: {e}"),
    }
}

/// Under `migrate`, the chart's ValidatingAdmissionPolicy lets the controller's ServiceAccount
/// change nothing on an InferenceService but OME's migration request annotations and ome-spread's
/// ledger, on the real kube-apiserver: a spec change or another annotation by that ServiceAccount
/// is refused with the policy's message, the two annotations are accepted, and another user's
/// spec change goes through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn under_migrate_the_controller_may_change_only_the_migration_annotations() {
    let Some(admin) = live::with_crds().await else {
        return;
    };
    let mut args = REQUIRED.to_vec();
    args.extend([
        "--set",
        "controller.rebalance=migrate",
        "--show-only",
        "templates/rbac-migrate.yaml",
    ]);
    let render = template(&args).expect("rendered");
    live::apply(&admin, &render).await;
    let namespace = "ome-spread-migrate-writes";
    live::fresh_namespace(&admin, namespace).await;
    live::apply(
        &admin,
        &format!(
            "apiVersion: ome.io/v1beta1\nkind: InferenceService\nmetadata: {{name: qwen3-0-6b, namespace: {namespace}}}\n\
             spec: {{deploymentMode: OMENative, runtime: {{name: srt-qwen3-0-6b}}, engine: {{minReplicas: 2}}}}\n"
        ),
    )
    .await;
    // As the controller writes: a merge patch, with no read first (its RBAC grants none).
    let controller = live::client_as(&admin, "system:serviceaccount:ome-spread:ome-spread-controller").await;
    let services: kube::Api<InferenceService> = kube::Api::namespaced(controller, namespace);
    let patch = |body: Value| merged(services.clone(), body);
    // The API server enforces a new policy a moment after it is created: each try asks for
    // another spec, so that one let through before then does not make the next a no-op.
    let mut tries = 0;
    let refused = eventually("the controller's spec change refused", 30, || {
        tries += 1;
        let patched = patch(json!({"spec": {"engine": {"minReplicas": 2 + tries}}}));
        async move { patched.await.err() }
    })
    .await;
    assert!(
        refused.ends_with(
            "denied request: ome-spread's controller may change only the migration annotations of an InferenceService, not its spec"
        ),
        "{refused}"
    );
    let other = patch(json!({"metadata": {"annotations": {"example.com/owner": "me"}}})).await;
    assert!(
        other.as_ref().is_err_and(|message| message.ends_with(
            "denied request: ome-spread's controller may change only the annotations ome.io/migration-request-v1-* and spread.ome.io/rebalance-requests of an InferenceService"
        )),
        "{other:?}"
    );
    let request = json!({"metadata": {"annotations": {
        "ome.io/migration-request-v1-00000000-0000-0000-0000-000000000001": "{}",
        "spread.ome.io/rebalance-requests": "[]"}}});
    assert_eq!(patch(request).await, Ok(()));
    let admin_change = kubectl(
        &admin,
        &[
            "patch",
            "inferenceservice",
            "qwen3-0-6b",
            "-n",
            namespace,
            "--type=merge",
            "-p",
            r#"{"spec":{"engine":{"minReplicas":5}}}"#,
        ],
    )
    .await;
    assert!(admin_change.contains("patched"), "{admin_change}");
    kubectl(&admin, &["delete", "namespace", namespace, "--timeout=90s"]).await;
    let removed = live::kubectl_with(&admin, &["delete", "-f", "-"], Some(&render)).await;
    assert!(removed.ok, "{}", removed.stderr);
}
