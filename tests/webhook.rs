//! The policy behind a real mutating webhook: the built `policy.wasm` served by the test-only
//! admission host (`ome_spread_sim::stand_in::admission_host`, run in this process), called by a real
//! kube-apiserver through the MutatingWebhookConfiguration kubewarden-controller writes for
//! `policy.yaml`, reading InferenceReplicas with the policy-server ServiceAccount's token, so that
//! `policy.yaml`'s RBAC is what is tested.
//!
//! The rendering tests need nothing. The cluster tests are ignored unless asked for, and need an
//! API server on this machine (the webhook's `url` is on 127.0.0.1) with cluster/up.sh's run
//! directory: `OME_SPREAD_E2E_RUN`, else the kubeconfig's own directory, holding `pki/ca.crt`
//! and `pki/webhook.{crt,key}`:
//!
//!   cluster/up.sh target/cluster/run
//!   OME_SPREAD_E2E_KUBECONFIG=target/cluster/run/kubeconfig \
//!     cargo test --test webhook -- --ignored --test-threads 1
//!
//! Each cluster test works in a namespace of its own, removes that namespace, the webhook
//! configuration and the host when it ends, pass or fail, and restores policy.yaml's RBAC; the
//! tests take turns (the webhook configuration is cluster-wide). Each is bounded to two minutes.
//! Expected values are written by hand from docs/rules.md and the API server's behaviour.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use ome_spread_sim::policy::wasm::{Module, build_policy};
use ome_spread_sim::stand_in::admission_host::webhook::{self, Naming};
use ome_spread_sim::stand_in::admission_host::{self, Options, Running};
use ome_spread_sim::support::live::{self, kubectl_blocking};
use ome_spread_sim::support::local::workspace;
use ome_spread_sim::support::objects;
use ome_spread_sim::support::wait::eventually;
use serde_json::{Value, json};

fn policy_yaml() -> Value {
    webhook::read_policy(&workspace().join("policy.yaml")).expect("policy.yaml's ClusterAdmissionPolicy")
}

/// policy.yaml's policy with `failurePolicy: Fail` (`policy.failurePolicy=Fail` in the chart): a
/// pod waits for a host that cannot answer.
fn fail_closed() -> Value {
    let mut policy = policy_yaml();
    policy["spec"]["failurePolicy"] = json!("Fail");
    policy
}

// ---------------------------------------------------------------------------------------------
// The webhook configuration, without a cluster.

/// The caBundle of the rendering tests: any bytes; the configuration carries them as they are.
const CA: &[u8] = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

/// Each field of `rendered` at `path` equals `expected`, said one field at a time.
fn assert_fields(rendered: &Value, expected: &[(&str, Value)]) {
    for (path, want) in expected {
        let got = rendered.pointer(path).unwrap_or(&Value::Null);
        assert_eq!(got, want, "{path}");
    }
}

#[test]
fn the_webhook_is_what_kubewarden_controller_writes_for_policy_yaml() {
    let rendered =
        webhook::render(&policy_yaml(), "https://127.0.0.1:8443", CA, Naming::Clusterwide).expect("rendered");
    let rendered = serde_json::to_value(&rendered).expect("serialisable");
    // From kubewarden-controller's reconcileMutatingWebhookConfiguration and policy.yaml.
    assert_fields(
        &rendered,
        &[
            ("/apiVersion", json!("admissionregistration.k8s.io/v1")),
            ("/kind", json!("MutatingWebhookConfiguration")),
            (
                "/metadata",
                json!({
                    "name": "clusterwide-ome-spread",
                    "labels": {"app.kubernetes.io/part-of": "kubewarden", "kubewardenPolicyScope": "cluster"},
                    "annotations": {"kubewardenPolicyName": "ome-spread", "kubewardenPolicyNamespace": ""},
                }),
            ),
            ("/webhooks/0/name", json!("clusterwide-ome-spread.kubewarden.admission")),
            (
                "/webhooks/0/clientConfig",
                json!({
                    "url": "https://127.0.0.1:8443/validate/clusterwide-ome-spread",
                    // base64 of the PEM, as every caBundle is written
                    "caBundle": "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo=",
                }),
            ),
            (
                "/webhooks/0/rules",
                json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"]}]),
            ),
            ("/webhooks/0/failurePolicy", json!("Ignore")),
            ("/webhooks/0/matchPolicy", Value::Null),
            (
                "/webhooks/0/namespaceSelector",
                json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kubewarden"]}]}),
            ),
            (
                "/webhooks/0/objectSelector",
                json!({"matchExpressions": [{"key": "ome.io/managed-by", "operator": "In", "values": ["OMENative"]}]}),
            ),
            ("/webhooks/0/sideEffects", json!("None")),
            ("/webhooks/0/timeoutSeconds", json!(10)),
            ("/webhooks/0/admissionReviewVersions", json!(["v1"])),
            ("/webhooks/0/matchConditions", Value::Null),
            ("/webhooks/0/reinvocationPolicy", Value::Null),
        ],
    );
    // Nothing else: one webhook, and no field beyond those above.
    assert_eq!(rendered["webhooks"].as_array().map(Vec::len), Some(1));
    let mut fields: Vec<&str> = rendered["webhooks"][0]
        .as_object()
        .expect("a webhook")
        .keys()
        .map(String::as_str)
        .collect();
    fields.sort_unstable();
    assert_eq!(
        fields,
        [
            "admissionReviewVersions",
            "clientConfig",
            "failurePolicy",
            "name",
            "namespaceSelector",
            "objectSelector",
            "rules",
            "sideEffects",
            "timeoutSeconds"
        ]
    );
}

#[test]
fn from_kubewarden_1_37_2_the_policy_is_named_kw_cap() {
    let rendered = webhook::render(&policy_yaml(), "https://127.0.0.1:8443", CA, Naming::Kw).expect("rendered");
    let rendered = serde_json::to_value(&rendered).expect("serialisable");
    assert_fields(
        &rendered,
        &[
            ("/metadata/name", json!("kw.cap.ome-spread")),
            ("/webhooks/0/name", json!("kw.cap.ome-spread.kubewarden.admission")),
            (
                "/webhooks/0/clientConfig/url",
                json!("https://127.0.0.1:8443/validate/kw.cap.ome-spread"),
            ),
        ],
    );
}

#[test]
fn a_policys_own_namespace_expressions_follow_the_deployments_namespace_and_its_labels_are_dropped() {
    let mut policy = policy_yaml();
    policy["spec"]["namespaceSelector"] = json!({
        "matchLabels": {"team": "ml"},
        "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}],
    });
    policy["spec"]["timeoutSeconds"] = Value::Null;
    policy["spec"]["sideEffects"] = json!("NoneOnDryRun");
    let rendered = webhook::render(&policy, "https://127.0.0.1:1", CA, Naming::Clusterwide).expect("rendered");
    let rendered = serde_json::to_value(&rendered).expect("serialisable");
    assert_fields(
        &rendered,
        &[
            (
                "/webhooks/0/namespaceSelector",
                json!({"matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kubewarden"]},
                    {"key": "env", "operator": "In", "values": ["prod"]},
                ]}),
            ),
            // The ClusterAdmissionPolicy CRD's default.
            ("/webhooks/0/timeoutSeconds", json!(10)),
            ("/webhooks/0/sideEffects", json!("NoneOnDryRun")),
        ],
    );
}

#[test]
fn a_validating_policy_is_not_rendered_as_a_mutating_webhook() {
    let mut policy = policy_yaml();
    policy["spec"]["mutating"] = json!(false);
    let error = webhook::render(&policy, "https://127.0.0.1:1", CA, Naming::Clusterwide).expect_err("refused");
    assert_eq!(
        error.to_string(),
        "ClusterAdmissionPolicy: spec.mutating is not true: kubewarden-controller would write a ValidatingWebhookConfiguration, which this host does not render"
    );
}

#[test]
fn the_host_serves_policy_yamls_settings_under_the_controllers_path() {
    let policy = policy_yaml();
    assert_eq!(webhook::settings(&policy), json!({"onMissingReplica": "Reject"}));
    assert_eq!(
        webhook::policy_id(&policy, Naming::Clusterwide).expect("an id"),
        "clusterwide-ome-spread"
    );
}

/// The policy as the host runs it, with a client that would fail if it were used: these
/// reviews never reach a host call.
fn offline_policy() -> admission_host::policy::Policy {
    let module = Module::load(build_policy(), None).expect("the policy compiles");
    let config = kube::Config::new("https://127.0.0.1:1".parse().expect("a url"));
    let client = kube::Client::try_from(config).expect("a client");
    admission_host::policy::Policy {
        module: Arc::new(module),
        settings: json!({}),
        reader: Arc::new(admission_host::lookup::Reader::new(client)),
    }
}

#[tokio::test]
async fn an_admission_review_the_host_cannot_read_is_refused_with_the_reason() {
    let policy = offline_policy();
    for (body, reason) in [
        (
            &b"{\"request\": "[..],
            "cannot read the AdmissionReview: EOF while parsing a value at line 1 column 12",
        ),
        (b"[]", "cannot read the AdmissionReview: no `request` object"),
        (
            b"{\"request\": {\"uid\": 7}}",
            "cannot read the AdmissionReview: `request.uid` is not a string",
        ),
        (
            b"\xff",
            "cannot read the AdmissionReview: expected value at line 1 column 1",
        ),
    ] {
        let error = policy.review(body).await.expect_err("unreadable");
        assert_eq!(error.to_string(), reason, "{:?}", String::from_utf8_lossy(body));
    }
}

#[tokio::test]
async fn a_pod_of_another_workload_is_admitted_unchanged_without_a_patch() {
    let review = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "3f1c", "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE", "namespace": "default", "name": "web",
            "object": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "default"},
                       "spec": {"containers": [{"name": "web", "image": "nginx"}]}},
        },
    });
    let answer = offline_policy()
        .review(review.to_string().as_bytes())
        .await
        .expect("readable");
    assert_eq!(
        answer,
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {"uid": "3f1c", "allowed": true}})
    );
}

// ---------------------------------------------------------------------------------------------
// Against a real API server.

const WEBHOOK: &str = "clusterwide-ome-spread";
const REPLICA: &str = "qwen3-0-6b-engine";

/// A namespace of this run's: a namespace still terminating from an earlier run cannot be reused.
fn namespace(scenario: &str) -> String {
    format!("webhook-e2e-{scenario}-{}", std::process::id())
}

/// The cluster tests take turns: one webhook configuration serves the whole cluster.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// policy.yaml's ClusterRole and ClusterRoleBinding, as a user applies them.
fn rbac() -> String {
    let text = std::fs::read_to_string(workspace().join("policy.yaml")).expect("policy.yaml");
    let documents = serde_saphyr::from_multiple::<Value>(&text).expect("policy.yaml is YAML");
    let rbac: Vec<String> = documents
        .iter()
        .filter(|d| d["apiVersion"] == "rbac.authorization.k8s.io/v1")
        .map(Value::to_string)
        .collect();
    assert_eq!(rbac.len(), 2, "policy.yaml has a ClusterRole and a ClusterRoleBinding");
    rbac.join("\n---\n")
}

/// The cluster under test, set up as a user would for the policy: OME's CRDs (the subsets, unless
/// some are installed already), Kubewarden's namespace and the policy-server ServiceAccount,
/// policy.yaml's RBAC, and a kubeconfig holding that ServiceAccount's token.
struct Cluster {
    kubeconfig: PathBuf,
    pki: PathBuf,
    admin: kube::Client,
    policy_server: PathBuf,
}

impl Cluster {
    async fn set_up() -> Cluster {
        let kubeconfig = PathBuf::from(
            std::env::var_os("OME_SPREAD_E2E_KUBECONFIG").expect("OME_SPREAD_E2E_KUBECONFIG names a kubeconfig"),
        );
        let run = std::env::var_os("OME_SPREAD_E2E_RUN")
            .map(PathBuf::from)
            .unwrap_or_else(|| kubeconfig.parent().expect("the kubeconfig's directory").to_owned());
        let pki = run.join("pki");
        assert!(
            pki.join("webhook.crt").is_file(),
            "{}: no webhook.crt: the cluster tests need cluster/up.sh's run directory",
            pki.display()
        );
        let admin = admission_host::client(&kubeconfig).await.expect("the admin kubeconfig");
        let crd = "crd/inferencereplicas.ome.io";
        if !live::kubectl_with(&kubeconfig, &["get", crd], None).await.ok {
            let crds = workspace().join("deploy/without-ome/ome-crd-subsets.yaml");
            live::kubectl(&kubeconfig, &["apply", "--server-side", "-f", &crds.to_string_lossy()]).await;
        }
        live::kubectl(
            &kubeconfig,
            &["wait", "--for=condition=Established", crd, "--timeout=60s"],
        )
        .await;
        let kubewarden = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubewarden"}});
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "policy-server", "namespace": "kubewarden"}});
        live::apply(&kubeconfig, &format!("{kubewarden}\n---\n{account}")).await;
        live::apply(&kubeconfig, &rbac()).await;
        let dir = std::env::temp_dir().join(format!("ome-spread-webhook-{}", std::process::id()));
        let policy_server = live::service_account_kubeconfig(&kubeconfig, "kubewarden", "policy-server", &dir).await;
        Cluster {
            kubeconfig,
            pki,
            admin,
            policy_server,
        }
    }

    /// The admission host, serving policy.yaml's policy and settings, its reads as the
    /// policy-server ServiceAccount. `listen`'s port 0 takes a free one.
    async fn host(&self, listen: std::net::SocketAddr) -> Running {
        self.host_with(listen, webhook::settings(&policy_yaml())).await
    }

    async fn host_with(&self, listen: std::net::SocketAddr, settings: Value) -> Running {
        admission_host::start(Options {
            wasm: build_policy().to_owned(),
            settings,
            cert: self.pki.join("webhook.crt"),
            key: self.pki.join("webhook.key"),
            listen,
            kubeconfig: self.policy_server.clone(),
            policy_id: WEBHOOK.into(),
        })
        .await
        .expect("the admission host starts")
    }

    /// A namespace of the test's, and the guard that removes it with the webhook configuration.
    async fn scenario(&self, namespace: &str) -> Scenario {
        let scenario = Scenario {
            kubeconfig: self.kubeconfig.clone(),
            namespace: namespace.to_owned(),
            restore_rbac: false,
        };
        live::namespace_for_pods(&self.kubeconfig, namespace).await;
        scenario
    }

    /// Applies the webhook configuration of policy.yaml for `host`, and waits until the API
    /// server calls it.
    async fn apply_webhook(&self, host: &Running, namespace: &str) -> MutatingWebhookConfiguration {
        self.apply_webhook_of(&policy_yaml(), host, namespace).await
    }

    async fn apply_webhook_of(&self, policy: &Value, host: &Running, namespace: &str) -> MutatingWebhookConfiguration {
        let ca = std::fs::read(self.pki.join("ca.crt")).expect("the CA");
        let config = webhook::render(policy, &host.url(), &ca, Naming::Clusterwide).expect("rendered");
        let stored = webhook::apply(&self.admin, &config).await.expect("applied");
        webhook::await_in_effect(&self.admin, policy, namespace, &host.reviews, Duration::from_secs(30))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        stored
    }

    async fn create_replica(&self, namespace: &str) -> DynamicObject {
        let default = json!([{"name": "default", "size": 1, "template": {"spec": {"containers": [{"name": "ome-container", "image": "sglang"}]}}}]);
        self.create_replica_of(namespace, default).await
    }

    async fn create_replica_of(&self, namespace: &str, runners: Value) -> DynamicObject {
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("ome.io", "v1beta1", "InferenceReplica"),
            "inferencereplicas",
        );
        let replicas: Api<DynamicObject> = Api::namespaced_with(self.admin.clone(), namespace, &resource);
        let replica: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
            "metadata": {"name": REPLICA, "namespace": namespace},
            "spec": {
                "parentRef": {"name": "qwen3-0-6b"}, "component": "engine", "replicas": 2,
                "topologySpread": "Required", "topologySpreadKey": "topology.kubernetes.io/zone",
                "topologyKey": "nvidia.com/gpu.clique",
                "runners": runners,
            },
        }))
        .expect("a replica");
        replicas
            .create(&PostParams::default(), &replica)
            .await
            .expect("replica created")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(dir) = self.policy_server.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// What a cluster test leaves: removed when it ends, pass or fail.
struct Scenario {
    kubeconfig: PathBuf,
    namespace: String,
    restore_rbac: bool,
}

impl Drop for Scenario {
    fn drop(&mut self) {
        let config = &self.kubeconfig;
        kubectl_blocking(
            config,
            &["delete", "mutatingwebhookconfiguration", WEBHOOK, "--ignore-not-found"],
            None,
        );
        for args in live::namespace_removal(&self.namespace) {
            kubectl_blocking(config, &args, None);
        }
        if self.restore_rbac {
            kubectl_blocking(config, &["apply", "--server-side", "-f", "-"], Some(&rbac()));
        }
    }
}

fn dry_run() -> PostParams {
    PostParams {
        dry_run: true,
        ..PostParams::default()
    }
}

/// Pod `ordinal` of `runner` in Instance `index` of the replica, as OME v1.3 names and labels it,
/// owned by the replica `owner` (its uid) where given; without one, its labels name the replica.
fn ome_pod(namespace: &str, index: usize, runner: &str, ordinal: usize, owner: Option<&str>) -> Pod {
    let mut pod = objects::Pod::instance(namespace, "qwen3-0-6b", "engine", index, runner, ordinal)
        .with("containers", json!([{"name": "ome-container", "image": "sglang"}]))
        .json();
    if let Some(uid) = owner {
        pod["metadata"]["ownerReferences"] = json!([{"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
                                                     "name": REPLICA, "uid": uid, "controller": true}]);
    }
    serde_json::from_value(pod).expect("a pod")
}

/// A single-pod Instance's pod, as [`ome_pod`].
fn omenative_pod(namespace: &str, index: usize, owner: Option<&str>) -> Pod {
    ome_pod(namespace, index, "default", 0, owner)
}

fn affinity(pod: &Pod) -> Value {
    serde_json::to_value(pod)
        .expect("serialisable")
        .pointer("/spec/affinity")
        .cloned()
        .unwrap_or(Value::Null)
}

/// The P5 constraint (docs/rules.md) for qwen3-0-6b's engine, Required on the zone.
fn p5_zone_constraint() -> Value {
    json!([{
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}},
    }])
}

/// The API server's refusal of a create: its code, reason and message.
async fn refusal(pods: &Api<Pod>, pod: &Pod) -> (u16, String, String) {
    match pods.create(&PostParams::default(), pod).await {
        Err(kube::Error::Api(status)) => (status.code, status.reason, status.message),
        Err(other) => panic!("not the API server's refusal: {other}"),
        Ok(created) => panic!("admitted: {:?}", created.metadata.name),
    }
}

fn constraints(pod: &Pod) -> Value {
    serde_json::to_value(pod)
        .expect("serialisable")
        .pointer("/spec/topologySpreadConstraints")
        .cloned()
        .unwrap_or(Value::Null)
}

/// Runs a cluster test in its turn, bounded to two minutes.
async fn in_turn(test: impl std::future::Future<Output = ()>) {
    let _turn = TURN.lock().await;
    tokio::time::timeout(Duration::from_secs(120), test)
        .await
        .expect("the test finished within two minutes");
}

const ANY_PORT: &str = "127.0.0.1:0";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn an_omenative_pod_is_stored_with_the_p5_constraint_and_the_webhook_as_the_api_server_defaults_it() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let ns = namespace("p5");
        let _scenario = cluster.scenario(&ns).await;
        let host = cluster.host(ANY_PORT.parse().expect("an address")).await;
        let stored = cluster.apply_webhook(&host, &ns).await;
        // What the API server keeps of the rendered configuration: the defaults it fills in
        // (matchPolicy, reinvocationPolicy, the rules' scope) beside what was written.
        let stored = serde_json::to_value(&stored).expect("serialisable");
        assert_fields(
            &stored,
            &[
                ("/webhooks/0/matchPolicy", json!("Equivalent")),
                ("/webhooks/0/reinvocationPolicy", json!("Never")),
                (
                    "/webhooks/0/rules",
                    json!([{"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"], "operations": ["CREATE"], "scope": "*"}]),
                ),
                ("/webhooks/0/failurePolicy", json!("Ignore")),
                ("/webhooks/0/timeoutSeconds", json!(10)),
                ("/webhooks/0/sideEffects", json!("None")),
                ("/webhooks/0/clientConfig/url", json!(format!("{}/validate/clusterwide-ome-spread", host.url()))),
            ],
        );

        let replica = cluster.create_replica(&ns).await;
        let uid = replica.metadata.uid.as_deref().expect("a uid");
        let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), &ns);
        let pod = omenative_pod(&ns, 0, Some(uid));
        // The pod as the API server stored it at CREATE: once a scheduler binds it, kube-apiserver
        // 1.35 copies its node's topology labels onto it (PodTopologyLabels admission).
        let stored = pods.create(&PostParams::default(), &pod).await.expect("admitted");
        assert_eq!(constraints(&stored), p5_zone_constraint());
        assert_eq!(stored.metadata.labels, pod.metadata.labels, "labels kept");
        host.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn a_pod_whose_replica_is_missing_is_refused_with_the_api_servers_message() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let ns = namespace("missing");
        let _scenario = cluster.scenario(&ns).await;
        let host = cluster.host(ANY_PORT.parse().expect("an address")).await;
        cluster.apply_webhook(&host, &ns).await;
        let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), &ns);
        let pod = omenative_pod(&ns, 0, None);
        // The API server's wording of a webhook's denial (`admission webhook %q denied the
        // request: %s`), code 400 where the webhook gives none, and no reason.
        assert_eq!(
            refusal(&pods, &pod).await,
            (
                400,
                String::new(),
                format!(
                    "admission webhook \"clusterwide-ome-spread.kubewarden.admission\" denied the request: \
                     cannot read InferenceReplica {ns}/qwen3-0-6b-engine: Cannot find \
                     ome.io/v1beta1/InferenceReplica named 'qwen3-0-6b-engine' inside of namespace \
                     'Some(\"{ns}\")'"
                )
            )
        );
        host.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn without_policy_yamls_cluster_role_binding_the_read_is_forbidden_and_the_message_says_so() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let ns = namespace("rbac");
        let mut scenario = cluster.scenario(&ns).await;
        cluster.create_replica(&ns).await;
        scenario.restore_rbac = true;
        live::kubectl(
            &cluster.kubeconfig,
            &["delete", "clusterrolebinding", "ome-spread-policy-server"],
        )
        .await;
        let host = cluster.host(ANY_PORT.parse().expect("an address")).await;
        cluster.apply_webhook(&host, &ns).await;
        let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), &ns);
        let pod = omenative_pod(&ns, 0, None);
        let forbidden = format!(
            "admission webhook \"clusterwide-ome-spread.kubewarden.admission\" denied the request: \
             cannot read InferenceReplica {ns}/qwen3-0-6b-engine: inferencereplicas.ome.io \
             \"qwen3-0-6b-engine\" is forbidden: User \"system:serviceaccount:kubewarden:policy-server\" \
             cannot get resource \"inferencereplicas\" in API group \"ome.io\" in the namespace \
             \"{ns}\": Forbidden"
        );
        // The API server's authorizer follows RBAC objects through a watch: a moment.
        eventually("the binding's removal in effect", 30, || async {
            match pods.create(&dry_run(), &pod).await {
                Err(kube::Error::Api(status)) if status.message == forbidden => Some(()),
                _ => None,
            }
        })
        .await;
        assert_eq!(refusal(&pods, &pod).await, (400, String::new(), forbidden.clone()));

        // With the binding back, the same pod is admitted with its constraint.
        live::apply(&cluster.kubeconfig, &rbac()).await;
        let created = eventually("the binding in effect", 30, || async {
            pods.create(&PostParams::default(), &pod).await.ok()
        })
        .await;
        assert_eq!(constraints(&created), p5_zone_constraint());
        host.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn a_pod_without_the_omenative_label_or_in_kubewardens_namespace_never_reaches_the_host() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let ns = namespace("selector");
        let _scenario = cluster.scenario(&ns).await;
        cluster.create_replica(&ns).await;
        let host = cluster.host(ANY_PORT.parse().expect("an address")).await;
        cluster.apply_webhook(&host, &ns).await;
        let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), &ns);
        let before = host.reviews.load(Ordering::SeqCst);

        // OME's labels all but `ome.io/managed-by`, and one whose value is another mode's (objectSelector).
        let mut unlabelled = omenative_pod(&ns, 0, None);
        let labels = unlabelled.metadata.labels.as_mut().expect("labels");
        labels.remove("ome.io/managed-by");
        let mut raw = omenative_pod(&ns, 1, None);
        let labels = raw.metadata.labels.as_mut().expect("labels");
        labels.insert("ome.io/managed-by".into(), "RawDeployment".into());
        for pod in [unlabelled, raw] {
            let created = pods.create(&PostParams::default(), &pod).await.expect("admitted");
            assert_eq!(constraints(&created), Value::Null, "{:?} unchanged", pod.metadata.name);
        }
        // An OMENative pod in Kubewarden's own namespace: the controller's namespaceSelector
        // keeps it away (the pod is removed at once: no kubelet holds a pod never scheduled).
        let kubewarden: Api<Pod> = Api::namespaced(cluster.admin.clone(), webhook::DEPLOYMENTS_NAMESPACE);
        // One a failed run left behind goes first, at once (no kubelet ends its grace period).
        let now = DeleteParams {
            grace_period_seconds: Some(0),
            ..DeleteParams::default()
        };
        let _ = kubewarden.delete("webhook-e2e-inside-kubewarden", &now).await;
        eventually("the pod an earlier run left gone", 30, || async {
            matches!(kubewarden.get_opt("webhook-e2e-inside-kubewarden").await, Ok(None)).then_some(())
        })
        .await;
        let mut inside = omenative_pod(webhook::DEPLOYMENTS_NAMESPACE, 0, None);
        inside.metadata.name = Some("webhook-e2e-inside-kubewarden".into());
        let created = kubewarden
            .create(&PostParams::default(), &inside)
            .await
            .expect("admitted");
        let _ = kubewarden.delete("webhook-e2e-inside-kubewarden", &now).await;
        assert_eq!(
            constraints(&created),
            Value::Null,
            "unchanged in {}",
            webhook::DEPLOYMENTS_NAMESPACE
        );
        assert_eq!(
            host.reviews.load(Ordering::SeqCst),
            before,
            "no review reached the host"
        );

        // The same pod with the label reaches it: the count above could move.
        let pod = omenative_pod(&ns, 2, None);
        let created = pods.create(&PostParams::default(), &pod).await.expect("admitted");
        assert_eq!(constraints(&created), p5_zone_constraint());
        assert_eq!(host.reviews.load(Ordering::SeqCst), before + 1);
        host.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn with_the_host_stopped_failure_policy_fail_refuses_the_pod_and_once_back_it_gets_its_terms() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let ns = namespace("down");
        let _scenario = cluster.scenario(&ns).await;
        cluster.create_replica(&ns).await;
        let host = cluster.host(ANY_PORT.parse().expect("an address")).await;
        let addr = host.addr;
        cluster.apply_webhook_of(&fail_closed(), &host, &ns).await;
        host.stop().await;

        let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), &ns);
        let pod = omenative_pod(&ns, 0, None);
        // The API server's words when it cannot reach a webhook whose failurePolicy is Fail:
        // an internal error naming the webhook, the POST with its `timeout` query, and the
        // dialer's error.
        let port = addr.port();
        let call = format!(
            "Internal error occurred: failed calling webhook \"clusterwide-ome-spread.kubewarden.admission\": \
             failed to call webhook: Post \"https://127.0.0.1:{port}/validate/clusterwide-ome-spread?timeout=10s\": "
        );
        let expected = (
            500,
            "InternalError".to_owned(),
            format!("{call}dial tcp 127.0.0.1:{port}: connect: connection refused"),
        );
        // A connection the API server still kept to the stopped host fails first on its own
        // error (a broken pipe, a reset: seen once in CI); the calls after it dial, refused.
        let mut refused = refusal(&pods, &pod).await;
        for _ in 0..3 {
            if refused == expected {
                break;
            }
            assert!(
                (refused.0, refused.1.as_str()) == (500, "InternalError") && refused.2.starts_with(&call),
                "{refused:?}"
            );
            refused = refusal(&pods, &pod).await;
        }
        assert_eq!(refused, expected);

        // Back on the same address, the configuration unchanged: the recreated pod has its terms.
        let host = cluster.host(addr).await;
        let created = pods.create(&PostParams::default(), &pod).await.expect("admitted");
        assert_eq!(constraints(&created), p5_zone_constraint());
        host.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn over_https_the_host_answers_readiness_and_refuses_what_it_cannot_read() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let host = cluster.host(ANY_PORT.parse().expect("an address")).await;
        let ca = cluster.pki.join("ca.crt");
        let addr = host.addr;
        let exchange = move |request: String| {
            let ca = ca.clone();
            tokio::task::spawn_blocking(move || https(addr, &ca, &request))
        };
        let head = |answer: &str| answer.lines().next().unwrap_or_default().to_owned();
        let post = |path: &str, body: &str| {
            format!(
                "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
        };

        let ready = exchange("GET /readiness HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".into())
            .await
            .expect("joined");
        assert_eq!(head(&ready), "HTTP/1.1 200 OK");
        let bad = exchange(post("/validate/clusterwide-ome-spread", "{\"request\": {}}"))
            .await
            .expect("joined");
        assert_eq!(head(&bad), "HTTP/1.1 400 Bad Request");
        assert!(
            bad.ends_with("\r\n\r\ncannot read the AdmissionReview: `request.uid` is not a string\n"),
            "{bad}"
        );
        let other = exchange(post("/validate/clusterwide-other", "{}")).await.expect("joined");
        assert_eq!(head(&other), "HTTP/1.1 404 Not Found");
        assert_eq!(host.reviews.load(Ordering::SeqCst), 1, "the unreadable review counted, not the 404");
        host.stop().await;
    })
    .await;
}

/// One HTTP/1.1 exchange over TLS, the server checked against `ca` (blocking: a test helper).
fn https(addr: std::net::SocketAddr, ca: &Path, request: &str) -> String {
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{self, ClientConfig, RootCertStore};
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).expect("the CA") {
        roots.add(cert.expect("a certificate")).expect("a root");
    }
    let config = ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .expect("TLS versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let server = ServerName::IpAddress(addr.ip().into());
    let connection = rustls::ClientConnection::new(Arc::new(config), server).expect("a TLS client");
    let tcp = std::net::TcpStream::connect(addr).expect("connected");
    let mut tls = rustls::StreamOwned::new(connection, tcp);
    tls.write_all(request.as_bytes()).expect("sent");
    let mut answer = String::new();
    // The server closes (Connection: close); rustls reports a close without close_notify as
    // an error after the whole answer was read.
    let _ = tls.read_to_string(&mut answer);
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn a_leader_gets_the_spread_and_its_worker_the_leader_affinity_as_the_api_server_validates_them() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let ns = namespace("gang");
        let _scenario = cluster.scenario(&ns).await;
        let template = json!({"spec": {"containers": [{"name": "ome-container", "image": "sglang"}]}});
        let replica = cluster
            .create_replica_of(
                &ns,
                json!([{"name": "leader", "size": 1, "template": template}, {"name": "worker", "size": 2, "template": template}]),
            )
            .await;
        let uid = replica.metadata.uid.as_deref().expect("a uid");
        let host = cluster.host(ANY_PORT.parse().expect("an address")).await;
        cluster.apply_webhook(&host, &ns).await;
        let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), &ns);

        // P5 for the leader: the constraint counts leaders.
        let leader = pods
            .create(&PostParams::default(), &ome_pod(&ns, 0, "leader", 0, Some(uid)))
            .await
            .expect("admitted");
        assert_eq!(
            constraints(&leader),
            json!([{
                "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "leader"}},
            }])
        );
        assert_eq!(affinity(&leader), Value::Null);

        // P8 and P10 for a worker: its Instance's leader's rack, and no spread constraint.
        let worker = pods
            .create(&PostParams::default(), &ome_pod(&ns, 0, "worker", 0, Some(uid)))
            .await
            .expect("admitted");
        assert_eq!(constraints(&worker), Value::Null);
        assert_eq!(
            affinity(&worker),
            json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
                "topologyKey": "nvidia.com/gpu.clique",
                "labelSelector": {"matchLabels": {
                    "ome.io/inferenceservice": "qwen3-0-6b", "component": "engine",
                    "ome.io/instance-index": "0", "ome.io/runner": "leader",
                }},
            }]}})
        );
        host.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn a_pod_ome_rendered_on_an_older_key_is_stored_as_ome_wrote_it() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let ns = namespace("p6");
        let _scenario = cluster.scenario(&ns).await;
        let replica = cluster.create_replica(&ns).await;
        let uid = replica.metadata.uid.as_deref().expect("a uid");
        let host = cluster.host(ANY_PORT.parse().expect("an address")).await;
        cluster.apply_webhook(&host, &ns).await;
        let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), &ns);

        // P6: OME's own constraint (its selector exactly) on the Instance's older key, the rack.
        let omes = json!([{
            "maxSkew": 1, "topologyKey": "nvidia.com/gpu.clique", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"ome.io/inferenceservice": "qwen3-0-6b", "component": "engine", "ome.io/runner": "default"}},
        }]);
        let mut pod = serde_json::to_value(omenative_pod(&ns, 0, Some(uid)))
            .expect("serialisable");
        pod["spec"]["topologySpreadConstraints"] = omes.clone();
        let pod: Pod = serde_json::from_value(pod).expect("a pod");
        let before = host.reviews.load(Ordering::SeqCst);
        let created = pods.create(&PostParams::default(), &pod).await.expect("admitted");
        assert_eq!(constraints(&created), omes);
        assert_eq!(host.reviews.load(Ordering::SeqCst), before + 1, "the policy saw it");
        host.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn with_on_missing_replica_accept_kubectl_shows_the_policys_warning_and_the_pod_has_no_spread() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let ns = namespace("accept");
        let _scenario = cluster.scenario(&ns).await;
        let host = cluster
            .host_with(ANY_PORT.parse().expect("an address"), json!({"onMissingReplica": "Accept"}))
            .await;
        cluster.apply_webhook(&host, &ns).await;
        let pod = serde_json::to_string(&omenative_pod(&ns, 0, None))
            .expect("serialisable");
        // As a user creates it: the webhook's warning reaches kubectl, which prints it on stderr.
        let args = ["create", "-n", &ns, "-f", "-", "-o", "json"];
        let printed = live::kubectl_with(&cluster.kubeconfig, &args, Some(&pod)).await;
        assert!(printed.ok, "{}", printed.stderr);
        assert_eq!(
            printed.stderr,
            format!(
                "Warning: cannot read InferenceReplica {ns}/qwen3-0-6b-engine: Cannot find ome.io/v1beta1/InferenceReplica \
                 named 'qwen3-0-6b-engine' inside of namespace 'Some(\"{ns}\")'; admitted without spread \
                 (onMissingReplica: Accept)\n"
            )
        );
        let created: Value = serde_json::from_str(&printed.stdout).expect("the pod as JSON");
        assert_eq!(created.pointer("/spec/topologySpreadConstraints"), None);
        host.stop().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a local API server: set OME_SPREAD_E2E_KUBECONFIG and run with --ignored"]
async fn a_host_that_never_answers_is_given_up_after_the_policys_ten_seconds_and_the_pod_refused() {
    in_turn(async {
        let cluster = Cluster::set_up().await;
        let ns = namespace("hung");
        let _scenario = cluster.scenario(&ns).await;
        // A policy-server that accepts connections and never says a word, not even TLS.
        let hung = tokio::net::TcpListener::bind(ANY_PORT).await.expect("a port");
        let addr = hung.local_addr().expect("its address");
        let holding = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((connection, _)) = hung.accept().await {
                held.push(connection);
            }
        });
        let ca = std::fs::read(cluster.pki.join("ca.crt")).expect("the CA");
        let config = webhook::render(&fail_closed(), &format!("https://{addr}"), &ca, Naming::Clusterwide).expect("rendered");
        webhook::apply(&cluster.admin, &config).await.expect("applied");

        let pods: Api<Pod> = Api::namespaced(cluster.admin.clone(), &ns);
        let pod = omenative_pod(&ns, 0, None);
        // Until the API server knows the configuration a pod passes; once it does, the create
        // waits out the webhook's timeoutSeconds.
        let (elapsed, refused) = eventually("the webhook in effect", 60, || async {
            let started = tokio::time::Instant::now();
            match pods.create(&PostParams::default(), &pod).await {
                Err(kube::Error::Api(status)) => Some((started.elapsed(), (status.code, status.reason, status.message))),
                Err(other) => panic!("not the API server's refusal: {other}"),
                Ok(_) => {
                    let _ = pods.delete("qwen3-0-6b-engine-0-default-0", &Default::default()).await;
                    None
                }
            }
        })
        .await;
        let port = addr.port();
        let refusal = |ending: &str| {
            (
                500,
                "InternalError".to_owned(),
                format!(
                    "Internal error occurred: failed calling webhook \"clusterwide-ome-spread.kubewarden.admission\": \
                     failed to call webhook: Post \"https://127.0.0.1:{port}/validate/clusterwide-ome-spread?timeout=10s\": \
                     {ending}"
                ),
            )
        };
        // The request's 10 s deadline and Go's 10 s TLS handshake timeout race: either may end it.
        assert!(
            [refusal("context deadline exceeded"), refusal("net/http: TLS handshake timeout")].contains(&refused),
            "{refused:?}"
        );
        assert!(
            (Duration::from_secs(10)..Duration::from_secs(15)).contains(&elapsed),
            "refused after {elapsed:?}"
        );
        holding.abort();
    })
    .await;
}
