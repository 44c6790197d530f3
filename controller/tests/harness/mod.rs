//! The reconciler's tests' API server and caches (tower-test, as kube-rs' own controllers are
//! tested): the caches filled from fixtures, and each request the reconciler makes read here.

#![allow(dead_code)] // each test file uses its part

use std::path::Path;
use std::sync::Arc;

use http::{Request, Response, StatusCode};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, store::Writer};
use kube::runtime::watcher;
use kube::{Client, Resource};
use ome_spread_controller::context::{Caches, Context, Fill, Mode, ReplicaStates};
use ome_spread_controller::metrics::Metrics;
use ome_spread_controller::pods;
use ome_spread_controller::policy::DEFAULT_NAME;
use ome_spread_controller::report::{Format, Reports};
use ome_spread_core::diagnosis::Reason;
use ome_spread_core::nodes::Served;
use ome_spread_core::ome::{
    ClusterServingRuntime, InferenceReplica, InferenceReplicaStatus, InferenceService, ServingRuntime,
};
use ome_spread_core::pod::Pod;
use ome_spread_core::settings::Settings;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tower_test::mock::{self, Handle};

pub type ApiServer = Handle<Request<Body>, Response<Body>>;

pub const STATUS_PATH: &str = "/apis/ome.io/v1beta1/namespaces/spread-demo/inferencereplicas/qwen3-0-6b-engine/status";
pub const EVENTS_PATH: &str = "/apis/events.k8s.io/v1/namespaces/spread-demo/events";

/// The objects of one reason's fixture.
pub fn fixture(reason: Reason) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/reasons/{}.yaml", reason.as_str()));
    let list: Value = serde_saphyr::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("yaml");
    list["items"].as_array().expect("a List").clone()
}

/// The fixture's expected `Why:` and `What to do:` lines, as the condition's message.
pub fn expected_message(reason: Reason) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/reasons/{}.txt", reason.as_str()));
    let text = std::fs::read_to_string(path).expect("expected output");
    let line = |prefix: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(prefix))
            .expect(prefix)
            .to_owned()
    };
    format!("{} {}", line("Why: "), line("What to do: "))
}

pub fn of_kind<K: DeserializeOwned>(objects: &[Value], kind: &str) -> Vec<K> {
    objects
        .iter()
        .filter(|o| o["kind"] == kind)
        .map(|o| serde_json::from_value(o.clone()).expect(kind))
        .collect()
}

pub fn cache<K>(objects: Vec<K>) -> (reflector::Store<K>, Writer<K>)
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (store, mut writer) = reflector::store();
    writer.apply_watcher_event(&watcher::Event::Init);
    for object in objects {
        writer.apply_watcher_event(&watcher::Event::InitApply(object));
    }
    writer.apply_watcher_event(&watcher::Event::InitDone);
    (store, writer)
}

/// The caches stay filled while their writers live.
pub type Writers = (
    Writer<InferenceService>,
    Writer<ServingRuntime>,
    Writer<ClusterServingRuntime>,
    Writer<InferenceReplica>,
);

pub struct Harness {
    pub ctx: Arc<Context>,
    pub replica: InferenceReplica,
    pub server: ApiServer,
    pub _writers: Writers,
}

/// The caches filled with `objects`; rebalance in `rebalance` mode (off for the condition's own
/// scenarios, so that a plan's Event does not interleave with theirs).
pub fn harness(objects: &[Value], rebalance: Mode) -> Harness {
    harness_reporting(
        objects,
        rebalance,
        Reports::new(Format::Off, DEFAULT_NAME, Arc::default()),
    )
}

/// [`harness`], writing `reports`.
pub fn harness_reporting(objects: &[Value], rebalance: Mode, reports: Arc<Reports>) -> Harness {
    let (service, server) = mock::pair::<Request<Body>, Response<Body>>();
    let client = Client::new(service, "default");
    let (services, w1) = cache(of_kind::<InferenceService>(objects, "InferenceService"));
    let (runtimes, w2) = cache(of_kind::<ServingRuntime>(objects, "ServingRuntime"));
    let (cluster_runtimes, w3) = cache(of_kind::<ClusterServingRuntime>(objects, "ClusterServingRuntime"));
    let (replicas, w6) = cache(of_kind::<InferenceReplica>(objects, "InferenceReplica"));
    let settings = tokio::sync::watch::channel(Settings::default()).1;
    let caches = Caches::new(services, runtimes, cluster_runtimes, replicas, settings);
    let pods = of_kind::<Pod>(objects, "Pod");
    listed(&pods, pods::trim, |event| {
        caches.pods.hold(event);
        caches.pods.apply(event);
    });
    listed(
        &of_kind::<Served>(objects, "Node"),
        |_| {},
        |event| {
            caches.nodes.apply(event);
        },
    );
    caches.filled.send_replace(Fill::Filled);
    let ctx = Context {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "ome-spread".into(),
                instance: Some("ome-spread-controller-0".into()),
            },
        ),
        client,
        no_condition: std::sync::Mutex::new(None),
        reports,
        caches,
        replicas: ReplicaStates::default(),
        rebalance,
        max_per_hour: 10,
        migrations: tokio::sync::Mutex::default(),
        metrics: Arc::new(Metrics::default()),
        health: Arc::default(),
    };
    let mut replica: InferenceReplica = of_kind(objects, "InferenceReplica").remove(0);
    replica.metadata.generation = Some(3);
    Harness {
        ctx: Arc::new(ctx),
        replica,
        server,
        _writers: (w1, w2, w3, w6),
    }
}

/// `objects` (every pod or node of the fixture) listed to an index, each trimmed by `trim` as its
/// watch trims it.
fn listed<K: Clone>(objects: &[K], trim: fn(&mut K), apply: impl Fn(&watcher::Event<K>)) {
    apply(&watcher::Event::Init);
    for object in objects {
        let mut object = object.clone();
        trim(&mut object);
        apply(&watcher::Event::InitApply(object));
    }
    apply(&watcher::Event::InitDone);
}

pub fn condition(status: &str, reason: &str, message: &str, at: &str) -> Condition {
    Condition {
        type_: "Spread".into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(3),
        last_transition_time: Time(at.parse().expect("a time")),
    }
}

pub fn with_condition(mut replica: InferenceReplica, condition: Condition) -> InferenceReplica {
    replica.status = Some(InferenceReplicaStatus {
        conditions: vec![condition],
        ..InferenceReplicaStatus::default()
    });
    replica
}

/// The next request: its method, path and query, and its JSON body.
pub async fn next(server: &mut ApiServer) -> (String, String, Value, mock::SendResponse<Response<Body>>) {
    // A request that never comes fails the test rather than hang it (paused time skips ahead).
    let waiting = tokio::time::timeout(std::time::Duration::from_secs(30), server.next_request());
    let (request, respond) = waiting.await.expect("a request within 30 s").expect("a request");
    let method = request.method().to_string();
    let uri = request.uri().to_string();
    let bytes = request.into_body().collect_bytes().await.expect("a body");
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    (method, uri, body, respond)
}

/// The next request is an Event recorded in the replica's namespace: answered 201, and given
/// for the test's own checks. (With [`condition_applied`], the scenarios of the API server the
/// reconciler meets, as controller-rs's `ApiServerVerifier` plays them.)
pub async fn event_recorded(server: &mut ApiServer) -> Value {
    let (method, uri, event, respond) = next(server).await;
    assert_eq!(
        (method.as_str(), uri.as_str()),
        ("POST", &*format!("{EVENTS_PATH}?")),
        "{event}"
    );
    answer(respond, StatusCode::CREATED, &event);
    event
}

/// The next request applies the `Spread` condition on the replica's status, server-side, as the
/// field manager ome-spread: answered with `replica`, and its body given.
pub async fn condition_applied(server: &mut ApiServer, replica: &InferenceReplica) -> Value {
    let (method, uri, body, respond) = next(server).await;
    assert_eq!(
        (method.as_str(), uri.as_str()),
        ("PATCH", &*format!("{STATUS_PATH}{APPLY_QUERY}")),
        "{body}"
    );
    answer(respond, StatusCode::OK, &serde_json::to_value(replica).expect("json"));
    body
}

pub fn answer(respond: mock::SendResponse<Response<Body>>, status: StatusCode, body: &Value) {
    let response = Response::builder()
        .status(status)
        .body(Body::from(serde_json::to_vec(body).expect("json")))
        .expect("a response");
    respond.send_response(response);
}

pub fn failure(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": reason, "reason": reason, "code": code})
}

/// The status patch the reconciler must send for a condition (docs/controller.md, the condition).
pub fn apply_body(condition: &Value) -> Value {
    json!({"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "status": {"conditions": [condition]}})
}

pub const APPLY_QUERY: &str = "?&force=true&fieldManager=ome-spread";
