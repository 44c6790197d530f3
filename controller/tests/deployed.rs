//! The controller as deployed, against a live cluster (`make e2e-cluster`): the `ome-spread
//! controller` binary, twice, each with a token of the ServiceAccount of
//! deploy/controller-rbac.yaml and nothing more, leading and standing by on a real Lease, its
//! `/metrics` scraped. Then the leader is killed: the other takes the Lease and goes on, no
//! condition lost or written twice; kube-apiserver restarts: the watches resume and the condition
//! follows the next change.
//!
//!   OME_SPREAD_E2E_KUBECONFIG=... cargo test -p ome-spread-controller --test deployed -- --ignored

use ome_spread_sim::support::{live, local, wait::eventually};

use std::path::Path;

use ome_spread_sim::support::live::{Process, kubectl};
use serde_json::Value;

const NAMESPACE: &str = "ome-spread-deployed";

async fn replica(admin: &Path) -> Value {
    live::replica(admin, NAMESPACE).await.expect("the replica")
}

async fn metrics(port: u16) -> Option<String> {
    let (code, body) = live::get(&format!("127.0.0.1:{port}"), "/metrics").await;
    (code == "200").then_some(body)
}

/// One controller as deployed.
struct Controller {
    identity: &'static str,
    port: u16,
    process: Process,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn two_controllers_under_their_rbac_lead_and_stand_by_and_the_survivor_takes_over() {
    let Some(admin) = live::with_crds().await else {
        return;
    };
    live::controller_namespace(&admin).await;
    let rbac = std::fs::read_to_string(local::workspace().join("deploy/controller-rbac.yaml")).expect("the RBAC");
    live::apply(&admin, &rbac).await;
    live::fresh_namespace(&admin, NAMESPACE).await;
    live::apply(&admin, &live::unspread_service(NAMESPACE, "srt-deployed")).await;
    let scratch = local::workspace().join(format!("target/e2e-cluster/{}", std::process::id()));
    let token = live::service_account_kubeconfig(&admin, "ome-spread", "ome-spread-controller", &scratch).await;

    let started = tokio::time::Instant::now();
    let mut controllers = two_controllers(&token).await;
    let leader = eventually("a leader on the Lease", 60, || live::lease_holder(&admin)).await;
    let at = controllers
        .iter()
        .position(|c| c.identity == leader)
        .unwrap_or_else(|| panic!("the Lease names {leader}, neither of ours"));
    let written = first_condition(&admin, controllers[at].port, started).await;

    // The leader dies: the other takes the Lease once it expires, and finds nothing to write.
    controllers.remove(at).process.kill().await;
    the_survivor_takes_over(&admin, &controllers[0], &written).await;
    the_survivor_follows_a_change(&admin).await;
    if let Some(run) = live::run_dir() {
        the_condition_follows_a_change_after_a_restart(&admin, &run).await;
    }
    kubectl(&admin, &["delete", "namespace", NAMESPACE, "--timeout=90s"]).await;
    kubectl(&admin, &["delete", "clusterservingruntime", "srt-deployed"]).await;
}

/// The binary twice, each under the ServiceAccount's token, each up and standing by.
async fn two_controllers(token: &Path) -> Vec<Controller> {
    let binary = local::binary("ome-spread");
    let mut controllers = Vec::new();
    for identity in ["ome-spread-controller-a", "ome-spread-controller-b"] {
        let port = local::free_port();
        let listen = format!("127.0.0.1:{port}");
        let args = ["controller", "--listen", &listen, "--identity", identity];
        let env = [("KUBECONFIG", token), ("POD_NAMESPACE", Path::new("ome-spread"))];
        let (process, _) = Process::start(identity, &binary, &args, &env, "standing by for the Lease").await;
        controllers.push(Controller {
            identity,
            port,
            process,
        });
    }
    controllers
}

/// The series the leader's `/metrics` says of the replica's condition.
fn not_requested_series() -> String {
    format!(r#"ome_spread_reason{{namespace="{NAMESPACE}",replica="qwen3-0-6b-engine",reason="NotRequested"}} 1"#)
}

/// The leader's first condition, within 20 s of the start, and its metric: the replica as written.
async fn first_condition(admin: &Path, leader_port: u16, started: tokio::time::Instant) -> Value {
    let written = eventually("the Spread condition", 60, || async {
        let replica = replica(admin).await;
        live::spread(&replica).is_some().then_some(replica)
    })
    .await;
    // The first reconciles are told when the caches fill: they waited for their 30 s to run out
    // when they waited on the caches beside the readiness.
    let first = started.elapsed();
    eprintln!("the first condition {first:?} after the controllers started");
    assert!(first < std::time::Duration::from_secs(20), "{first:?}");
    let condition = live::spread(&written).expect("the condition");
    assert_eq!(
        (&condition["status"], &condition["reason"]),
        (&Value::from("True"), &Value::from("NotRequested")),
        "{condition}"
    );
    let series = not_requested_series();
    eventually("the leader's metrics", 30, || async {
        metrics(leader_port).await.filter(|m| m.contains(&series))
    })
    .await;
    written
}

/// The survivor takes the Lease and says the condition in its metrics, writing nothing again.
async fn the_survivor_takes_over(admin: &Path, survivor: &Controller, written: &Value) {
    eventually("the survivor on the Lease", 90, || async {
        live::lease_holder(admin).await.filter(|h| h == survivor.identity)
    })
    .await;
    let series = not_requested_series();
    eventually("the survivor's metrics", 60, || async {
        metrics(survivor.port).await.filter(|m| m.contains(&series))
    })
    .await;
    let after = replica(admin).await;
    assert_eq!(
        after["metadata"]["resourceVersion"], written["metadata"]["resourceVersion"],
        "nothing written twice"
    );
    assert_eq!(
        live::spread(&after),
        live::spread(written),
        "the condition kept as it was"
    );
}

/// A merge patch of OME's InferenceService (`inferenceservice`) or its replica
/// (`inferencereplica`) of this suite.
async fn patch(admin: &Path, kind: &str, patch: &str) {
    let name = if kind == "inferenceservice" {
        "qwen3-0-6b"
    } else {
        "qwen3-0-6b-engine"
    };
    kubectl(
        admin,
        &["patch", kind, name, "-n", NAMESPACE, "--type=merge", "-p", patch],
    )
    .await;
}

/// The survivor follows a change: a spread without a key.
async fn the_survivor_follows_a_change(admin: &Path) {
    patch(admin, "inferencereplica", r#"{"spec":{"topologySpread":"Required"}}"#).await;
    patch(
        admin,
        "inferenceservice",
        r#"{"spec":{"engine":{"topologySpread":"Required"}}}"#,
    )
    .await;
    let reason = eventually("Spread False (NoKey)", 60, || async {
        let replica = replica(admin).await;
        live::spread(&replica).filter(|c| c["reason"] == "NoKey").cloned()
    })
    .await;
    assert_eq!(reason["status"], "False", "{reason}");
}

/// kube-apiserver restarts (cluster/up.sh's only): the survivor's watches resume, and it follows
/// the next change. After the restart the API server refuses the controller's ServiceAccount
/// (403) until its RBAC caches fill.
async fn the_condition_follows_a_change_after_a_restart(admin: &Path, run: &Path) {
    let restart = local::workspace().join("cluster/restart.sh");
    let restarted = tokio::process::Command::new(&restart)
        .args([run.as_os_str(), "kube-apiserver".as_ref()])
        .status()
        .await
        .expect("cluster/restart.sh runs");
    assert!(restarted.success(), "kube-apiserver restarted");
    eventually("kube-apiserver back", 60, || async {
        live::kubectl_with(admin, &["get", "--raw", "/readyz"], None)
            .await
            .ok
            .then_some(())
    })
    .await;
    // The service first: only the replica's patch, the last, brings the condition back.
    patch(
        admin,
        "inferenceservice",
        r#"{"spec":{"engine":{"topologySpread":null}}}"#,
    )
    .await;
    patch(admin, "inferencereplica", r#"{"spec":{"topologySpread":null}}"#).await;
    // Each watch comes back after its own backoff from the refused connections and a 410 for its
    // stale resourceVersion, each wait at most 2 s (docs/controller.md): well within 30 s.
    let restarted_at = tokio::time::Instant::now();
    eventually("Spread True (NotRequested) within 30 s of the restart", 30, || async {
        let replica = replica(admin).await;
        live::spread(&replica)
            .filter(|c| c["reason"] == "NotRequested")
            .map(|_| ())
    })
    .await;
    eprintln!(
        "the condition followed the change {:?} after kube-apiserver came back",
        restarted_at.elapsed()
    );
}

const SETTINGS_NAMESPACE: &str = "ome-spread-settings";
/// The policy the controller reads its settings from: policy.yaml's, the one name
/// deploy/controller-rbac.yaml lets it read (resourceNames). Deleted at the end.
const POLICY: &str = "ome-spread";

/// Two Instances of a Required spread on the zone, placed one per zone on nodes of their own (a
/// label no other test's node has), their pods as OME renders them: OME's constraint, without
/// the settings' fields.
fn placed() -> String {
    let mut objects = String::from(
        "apiVersion: ome.io/v1beta1
kind: ClusterServingRuntime
metadata: {name: srt-settings}
spec: {engineConfig: {}}
---
apiVersion: ome.io/v1beta1
kind: InferenceService
metadata: {name: qwen3-0-6b, namespace: ome-spread-settings}
spec:
  deploymentMode: OMENative
  runtime: {name: srt-settings}
  engine: {minReplicas: 2, topologySpread: Required, topologySpreadKey: topology.kubernetes.io/zone}
---
apiVersion: ome.io/v1beta1
kind: InferenceReplica
metadata: {name: qwen3-0-6b-engine, namespace: ome-spread-settings}
spec:
  parentRef: {name: qwen3-0-6b}
  component: engine
  replicas: 2
  topologySpread: Required
  topologySpreadKey: topology.kubernetes.io/zone
  runners: [{name: default, size: 1, template: {spec: {containers: [{name: ome-container, image: sglang}]}}}]
",
    );
    for (index, zone) in ["zone-a", "zone-b"].iter().enumerate() {
        objects.push_str(&format!(
            "---
apiVersion: v1
kind: Node
metadata:
  name: settings-e2e-{zone}
  labels: {{topology.kubernetes.io/zone: {zone}, e2e.ome-spread.io/settings: \"true\"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: qwen3-0-6b-engine-{index}-default-0
  namespace: ome-spread-settings
  labels:
    ome.io/managed-by: OMENative
    ome.io/inferenceservice: qwen3-0-6b
    component: engine
    ome.io/runner: default
    ome.io/instance-index: \"{index}\"
spec:
  nodeName: settings-e2e-{zone}
  nodeSelector: {{e2e.ome-spread.io/settings: \"true\"}}
  automountServiceAccountToken: false
  containers: [{{name: engine, image: sglang}}]
  topologySpreadConstraints:
    - maxSkew: 1
      topologyKey: topology.kubernetes.io/zone
      whenUnsatisfiable: DoNotSchedule
      labelSelector:
        matchLabels: {{ome.io/inferenceservice: qwen3-0-6b, component: engine, ome.io/runner: default}}
"
        ));
    }
    objects
}

fn policy(settings: &str) -> String {
    format!(
        "apiVersion: policies.kubewarden.io/v1
kind: ClusterAdmissionPolicy
metadata: {{name: {POLICY}}}
spec:
  module: registry://ghcr.io/ome-spread/policies/ome-spread:v0.1.0
  mutating: true
  rules: [{{apiGroups: [\"\"], apiVersions: [v1], resources: [pods], operations: [CREATE]}}]
  settings: {settings}
"
    )
}

/// `--policy`: the controller, under deploy/controller-rbac.yaml, reads the settings of a real
/// ClusterAdmissionPolicy (Kubewarden's CRD: cluster/kubewarden-crds.yaml) and follows a change of
/// them to the condition, with no restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn the_controller_follows_the_settings_of_the_cluster_admission_policy() {
    let Some(admin) = live::with_crds().await else {
        return;
    };
    settings_cluster(&admin).await;

    let scratch = local::workspace().join(format!("target/e2e-cluster/{}-settings", std::process::id()));
    let token = live::service_account_kubeconfig(&admin, "ome-spread", "ome-spread-controller", &scratch).await;
    let port = local::free_port();
    let listen = format!("127.0.0.1:{port}");
    let args = [
        "controller",
        "--policy",
        POLICY,
        "--listen",
        &listen,
        "--identity",
        "settings-e2e",
    ];
    let env = [
        ("KUBECONFIG", token.as_path()),
        ("POD_NAMESPACE", Path::new("ome-spread")),
    ];
    let (controller, _) = Process::start(
        "settings-e2e",
        &local::binary("ome-spread"),
        &args,
        &env,
        "settings read",
    )
    .await;

    // Its RBAC names the one policy and the one Lease it reads and writes, as the API server's
    // authorizer answers for its ServiceAccount.
    rbac_names_one_policy_and_one_lease(&token).await;

    let satisfied = || async {
        live::spread_reason(&admin, SETTINGS_NAMESPACE)
            .await
            .filter(|r| r == "Satisfied")
    };
    eventually("Spread True (Satisfied) on the policy's settings", 60, satisfied).await;
    assert_eq!(
        live::get(&format!("127.0.0.1:{port}"), "/healthz").await,
        ("200".into(), "ok".into())
    );
    ready_saying_no_reports(port).await;

    // Honor taints: the pods OME rendered without nodeTaintsPolicy predate the settings.
    live::apply(&admin, &policy("{onMissingReplica: Reject, nodeTaintsPolicy: Honor}")).await;
    eventually(
        "Spread False (PodsPredateChange) after the policy's change",
        60,
        || async {
            live::spread_reason(&admin, SETTINGS_NAMESPACE)
                .await
                .filter(|r| r == "PodsPredateChange")
        },
    )
    .await;
    // And back, still with no restart.
    live::apply(&admin, &policy("{onMissingReplica: Reject}")).await;
    eventually("Spread True (Satisfied) again", 60, satisfied).await;

    controller.kill().await;
    clean_up_settings(&admin).await;
}

/// The settings test's cluster: Kubewarden's CRD and no Report CRD (whichever suite ran before:
/// the readiness the test reads says so), the controller's namespace and RBAC, the objects placed,
/// and the policy with its settings.
async fn settings_cluster(admin: &Path) {
    live::install(admin, live::KUBEWARDEN_CRD).await;
    live::remove_openreports_crd(admin).await;
    live::controller_namespace(admin).await;
    let rbac = std::fs::read_to_string(local::workspace().join("deploy/controller-rbac.yaml")).expect("the RBAC");
    live::apply(admin, &rbac).await;
    live::fresh_namespace(admin, SETTINGS_NAMESPACE).await;
    // Pods wait for the namespace's default ServiceAccount.
    let objects = placed();
    eventually("the objects applied", 60, || async {
        let printed = live::kubectl_with(admin, &["apply", "--server-side", "-f", "-"], Some(&objects)).await;
        printed.ok.then_some(())
    })
    .await;
    live::apply(admin, &policy("{onMissingReplica: Reject}")).await;
}

/// The controller's RBAC, as the API server's authorizer answers for its ServiceAccount (`token`):
/// the one policy and the one Lease it reads and writes, nothing else.
async fn rbac_names_one_policy_and_one_lease(token: &Path) {
    for (verb, resource, allowed) in [
        (
            "watch",
            "clusteradmissionpolicies.policies.kubewarden.io/ome-spread",
            "yes",
        ),
        ("watch", "clusteradmissionpolicies.policies.kubewarden.io/another", "no"),
        ("list", "clusteradmissionpolicies.policies.kubewarden.io", "no"),
        ("patch", "leases.coordination.k8s.io/ome-spread-controller", "yes"),
        ("patch", "leases.coordination.k8s.io/another", "no"),
        ("get", "leases.coordination.k8s.io/another", "no"),
        ("create", "leases.coordination.k8s.io", "yes"),
    ] {
        let answer = live::kubectl_with(token, &["auth", "can-i", verb, resource, "-n", "ome-spread"], None).await;
        assert_eq!(answer.stdout.trim(), allowed, "{verb} {resource}: {}", answer.stderr);
    }
}

/// The settings test's objects gone: the policy, the pods, the namespace, the nodes, the runtime.
async fn clean_up_settings(admin: &Path) {
    kubectl(admin, &["delete", "clusteradmissionpolicy", POLICY]).await;
    kubectl(
        admin,
        &[
            "delete",
            "pods",
            "--all",
            "-n",
            SETTINGS_NAMESPACE,
            "--force",
            "--grace-period=0",
        ],
    )
    .await;
    kubectl(admin, &["delete", "namespace", SETTINGS_NAMESPACE, "--timeout=90s"]).await;
    kubectl(admin, &["delete", "node", "settings-e2e-zone-a", "settings-e2e-zone-b"]).await;
    kubectl(admin, &["delete", "clusterservingruntime", "srt-settings"]).await;
}

/// The controller on `port` Ready, and its leader gauge 1. Ready is set by a task of its own once
/// the caches are filled, within its bounded wait (30 s) and the next: a moment after the first
/// condition can be written, or up to half a minute. This cluster has no Report CRD: ready all the
/// same, saying so (docs/controller.md, Reports).
async fn ready_saying_no_reports(port: u16) {
    let why =
        "no Report CRD (openreports.io/v1alpha1) in the cluster: no reports are written; install it, or set --reports";
    let ready = ("200".to_owned(), format!("ok\n{why}\n"));
    eventually("/readyz ok, and why no reports", 75, || async {
        (live::get(&format!("127.0.0.1:{port}"), "/readyz").await == ready).then_some(())
    })
    .await;
    assert!(
        metrics(port)
            .await
            .is_some_and(|m| m.contains("\nome_spread_leader 1\n")),
        "the leader gauge"
    );
}
