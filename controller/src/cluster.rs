//! `ome-spread controller`: the caches (one watch per kind, shared by the reconciler and the
//! triggers), what change reconciles which replica, and leader election.

use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt, TryStreamExt, future};
use k8s_openapi::api::core::v1::{Node as KubeNode, Pod};
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use kube_lease_manager::LeaseManagerBuilder;
use ome_spread::labels;
use ome_spread::nodes::{Node, Nodes, Taint};
use ome_spread::settings::Settings;
use serde::de::DeserializeOwned;
use tracing::{error, info, warn};

use crate::metrics::Metrics;
use crate::reconcile::{Context, error_policy, reconcile};
use crate::resources::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};
use crate::serve::Health;

/// What the diagnosis reads of a cache (the nodes indexed, the pods grouped by component), built
/// from it only after it changed: a burst of reconciles (every replica, after a node change)
/// shares one build instead of reading the whole cache each.
pub struct Snapshot<K: 'static + Resource, T>
where
    K::DynamicType: Eq + Hash,
{
    store: Store<K>,
    version: Arc<AtomicU64>,
    build: fn(&[Arc<K>]) -> T,
    built: Mutex<Option<(u64, Arc<T>)>>,
}

impl<K, T> Snapshot<K, T>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    /// `version` must move after every change of the store that `build` reads.
    pub fn new(store: Store<K>, version: Arc<AtomicU64>, build: fn(&[Arc<K>]) -> T) -> Self {
        Self {
            store,
            version,
            build,
            built: Mutex::default(),
        }
    }

    pub async fn wait_until_ready(&self) -> Result<(), reflector::store::WriterDropped> {
        self.store.wait_until_ready().await
    }

    pub fn current(&self) -> Arc<T> {
        let version = self.version.load(Ordering::Acquire);
        let mut built = self.built.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match &*built {
            Some((at, snapshot)) if *at == version => snapshot.clone(),
            _ => {
                let snapshot = Arc::new((self.build)(&self.store.state()));
                *built = Some((version, snapshot.clone()));
                snapshot
            }
        }
    }
}

pub type NodeSnapshot = Snapshot<KubeNode, Nodes>;

pub fn nodes(nodes: &[Arc<KubeNode>]) -> Nodes {
    Nodes::new(nodes.iter().map(|n| node(n)).collect())
}

/// Pods by (namespace, InferenceService, component), from their OME labels.
pub type PodsByComponent = HashMap<(String, String, String), Vec<Arc<Pod>>>;
pub type PodSnapshot = Snapshot<Pod, PodsByComponent>;

pub fn pods_by_component(pods: &[Arc<Pod>]) -> PodsByComponent {
    let mut grouped = PodsByComponent::new();
    for pod in pods {
        let labels = pod.labels();
        if let (Some(namespace), Some(service), Some(component)) = (
            pod.namespace(),
            labels.get(labels::INFERENCE_SERVICE),
            labels.get(labels::COMPONENT),
        ) {
            grouped
                .entry((namespace, service.clone(), component.clone()))
                .or_default()
                .push(pod.clone());
        }
    }
    grouped
}

/// Which node events change what the diagnosis reads: labels, taints or cordon changed, a node
/// deleted, or a relist done (which may drop nodes). A heartbeat or an image pulled does not.
#[derive(Default)]
pub struct NodeChanges {
    seen: HashMap<String, u64>,
    /// During a relist: the nodes listed so far, which replace `seen` when it is done.
    relisting: Option<HashMap<String, u64>>,
}

impl NodeChanges {
    pub fn changed(&mut self, event: &watcher::Event<KubeNode>) -> bool {
        match event {
            watcher::Event::Apply(node) => {
                self.seen.insert(node.name_any(), node_fingerprint(node)) != Some(node_fingerprint(node))
            }
            watcher::Event::Delete(node) => {
                self.seen.remove(&node.name_any());
                true
            }
            watcher::Event::Init => {
                self.relisting = Some(HashMap::new());
                false
            }
            watcher::Event::InitApply(node) => {
                self.relisting
                    .get_or_insert_default()
                    .insert(node.name_any(), node_fingerprint(node));
                false
            }
            watcher::Event::InitDone => {
                self.seen = self.relisting.take().unwrap_or_default();
                true
            }
        }
    }
}

/// What the diagnosis needs of a Kubernetes node.
pub fn node(node: &KubeNode) -> Node {
    let spec = node.spec.as_ref();
    let taints = spec
        .and_then(|s| s.taints.as_ref())
        .map(|taints| {
            taints
                .iter()
                .map(|t| Taint {
                    key: t.key.clone(),
                    value: t.value.clone().unwrap_or_default(),
                    effect: t.effect.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    Node::new(
        node.name_any(),
        node.labels().clone(),
        taints,
        spec.and_then(|s| s.unschedulable) == Some(true),
    )
}

/// Only what the diagnosis reads of a node.
fn node_fingerprint(node: &KubeNode) -> u64 {
    let mut hasher = DefaultHasher::new();
    node.labels().hash(&mut hasher);
    let spec = node.spec.as_ref();
    spec.and_then(|s| s.unschedulable).hash(&mut hasher);
    for taint in spec.and_then(|s| s.taints.as_ref()).into_iter().flatten() {
        (&taint.key, &taint.value, &taint.effect).hash(&mut hasher);
    }
    hasher.finish()
}

/// A cache of `K`, and the stream of its changes that fills it; `version` moves with every change.
fn cached<K>(
    api: Api<K>,
    config: watcher::Config,
    version: Arc<AtomicU64>,
) -> (Store<K>, impl Stream<Item = Result<K, watcher::Error>>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|object: &mut K| object.meta_mut().managed_fields = None)
        .reflect(writer)
        .inspect_ok(move |_| {
            version.fetch_add(1, Ordering::AcqRel);
        })
        .touched_objects();
    (store, stream)
}

/// The replica of a pod: its controller owner, else the one its OME labels name.
pub fn replica_of_pod(pod: &Pod) -> Option<ObjectRef<InferenceReplica>> {
    let namespace = pod.namespace()?;
    let owner = pod
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true) && o.kind == "InferenceReplica")
        .map(|o| o.name.clone());
    let name = owner.or_else(|| {
        let labels = pod.labels();
        Some(format!(
            "{}-{}",
            labels.get(labels::INFERENCE_SERVICE)?,
            labels.get(labels::COMPONENT)?
        ))
    })?;
    Some(ObjectRef::new(&name).within(&namespace))
}

/// The replicas of an InferenceService: one per component, named `<isvc>-<component>`.
pub fn replicas_of_service(service: &InferenceService) -> Vec<ObjectRef<InferenceReplica>> {
    let namespace = service.namespace().unwrap_or_default();
    ["engine", "decoder"]
        .iter()
        .map(|component| ObjectRef::new(&format!("{}-{component}", service.name_any())).within(&namespace))
        .collect()
}

/// The replicas of every InferenceService that uses the runtime.
fn replicas_using(
    services: &Store<InferenceService>,
    namespaced: bool,
    namespace: Option<String>,
    runtime: &str,
) -> Vec<ObjectRef<InferenceReplica>> {
    services
        .state()
        .iter()
        .filter(|s| s.runtime() == Some((namespaced, runtime)) && (!namespaced || s.namespace() == namespace))
        .flat_map(|s| replicas_of_service(s))
        .collect()
}

pub struct Options {
    pub settings: Settings,
    pub lease_namespace: String,
    pub identity: String,
    pub health: Arc<Health>,
    pub metrics: Arc<Metrics>,
}

/// Runs the controller while this process holds the Lease; returns when asked to stop, or fails
/// when the Lease is lost (the Deployment restarts the process, which stands by again).
pub async fn run(client: Client, options: Options) -> Result<(), String> {
    let lease = LeaseManagerBuilder::new(client.clone(), "ome-spread-controller")
        .with_namespace(&options.lease_namespace)
        .with_identity(&options.identity)
        .with_field_manager(format!("ome-spread/{}", options.identity))
        .build()
        .await
        .map_err(|e| format!("leader election: {e}"))?;
    let (mut leading, lease_task) = lease.watch().await;
    info!(identity = %options.identity, "standing by for the Lease ome-spread-controller");
    options.health.set_ready(true);
    let stop = tokio::signal::ctrl_c();
    tokio::pin!(stop);
    loop {
        if *leading.borrow_and_update() {
            break;
        }
        tokio::select! {
            changed = leading.changed() => changed.map_err(|_| "leader election stopped".to_owned())?,
            _ = &mut stop => return Ok(()),
        }
    }
    info!("leading: watching InferenceReplicas");
    options.health.set_ready(false);
    let health = options.health.clone();
    let controller = reconcile_all(client, options);
    let lost = async {
        while leading.changed().await.is_ok() {
            if !*leading.borrow_and_update() {
                break;
            }
        }
    };
    let outcome = tokio::select! {
        () = controller => Ok(()),
        () = lost => Err("lost the Lease: another replica leads now".to_owned()),
    };
    health.set_ready(false);
    drop(leading);
    if let Ok(Err(e)) = lease_task.await {
        warn!(error = %e, "releasing the Lease");
    }
    outcome
}

async fn reconcile_all(client: Client, options: Options) {
    let unversioned = Arc::<AtomicU64>::default;
    let (services, service_changes) = cached(
        Api::<InferenceService>::all(client.clone()),
        watcher::Config::default(),
        unversioned(),
    );
    let (runtimes, runtime_changes) = cached(
        Api::<ServingRuntime>::all(client.clone()),
        watcher::Config::default(),
        unversioned(),
    );
    let (cluster_runtimes, cluster_runtime_changes) = cached(
        Api::<ClusterServingRuntime>::all(client.clone()),
        watcher::Config::default(),
        unversioned(),
    );
    let omenative = watcher::Config::default().labels(&format!("{}=OMENative", labels::MANAGED_BY));
    let pod_version = Arc::new(AtomicU64::new(0));
    let (pods, pod_changes) = cached(Api::<Pod>::all(client.clone()), omenative, pod_version.clone());
    let (node_store, node_writer) = reflector::store();
    let node_version = Arc::new(AtomicU64::new(0));
    let bump = node_version.clone();
    let mut changes = NodeChanges::default();
    let node_changes = watcher(Api::<KubeNode>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|node: &mut KubeNode| {
            // The diagnosis reads labels and spec; a node's status (its images) is most of its size.
            node.metadata.managed_fields = None;
            node.status = None;
        })
        .reflect(node_writer)
        .filter_map(move |event| {
            let changed = match &event {
                Ok(event) => changes.changed(event),
                Err(e) => {
                    warn!(error = %e, "watching nodes");
                    false
                }
            };
            if changed {
                bump.fetch_add(1, Ordering::AcqRel);
            }
            future::ready(changed.then_some(()))
        });

    let health = options.health.clone();
    let context = Arc::new(Context {
        recorder: Recorder::new(
            client.clone(),
            Reporter {
                controller: "ome-spread".into(),
                instance: Some(options.identity.clone()),
            },
        ),
        client: client.clone(),
        services: services.clone(),
        runtimes,
        cluster_runtimes,
        pods: PodSnapshot::new(pods, pod_version, pods_by_component),
        nodes: NodeSnapshot::new(node_store, node_version, nodes),
        settings: options.settings,
        metrics: options.metrics,
        failures: Mutex::default(),
    });
    let ready = context.clone();
    tokio::spawn(async move {
        if futures::try_join!(
            ready.services.wait_until_ready(),
            ready.pods.wait_until_ready(),
            ready.nodes.wait_until_ready(),
        )
        .is_ok()
        {
            info!("caches filled");
            health.set_ready(true);
        }
    });
    // The replicas' own watch, so that a deleted replica's metrics go with it.
    let (replicas, replica_writer) = reflector::store();
    let metrics = context.metrics.clone();
    let replica_changes = watcher(Api::<InferenceReplica>::all(client), watcher::Config::default())
        .default_backoff()
        .modify(|replica: &mut InferenceReplica| replica.metadata.managed_fields = None)
        .reflect(replica_writer)
        .inspect_ok(move |event| {
            if let watcher::Event::Delete(replica) = event {
                metrics.forget(&replica.namespace().unwrap_or_default(), &replica.name_any());
            }
        })
        .touched_objects();
    let (for_runtimes, for_cluster_runtimes) = (services.clone(), services);
    Controller::for_stream(replica_changes, replicas)
        .watches_stream(pod_changes, |pod| replica_of_pod(&pod))
        .watches_stream(service_changes, |service| replicas_of_service(&service))
        .watches_stream(runtime_changes, move |runtime| {
            replicas_using(&for_runtimes, true, runtime.namespace(), &runtime.name_any())
        })
        .watches_stream(cluster_runtime_changes, move |runtime| {
            replicas_using(&for_cluster_runtimes, false, None, &runtime.name_any())
        })
        .reconcile_all_on(node_changes)
        .shutdown_on_signal()
        .run(reconcile, error_policy, context)
        .for_each(|result| {
            if let Err(e) = result {
                error!(error = %e, "controller");
            }
            future::ready(())
        })
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kube_node(value: serde_json::Value) -> KubeNode {
        serde_json::from_value(value).expect("a node")
    }

    #[test]
    fn a_pod_maps_to_its_controller_replica_else_to_the_one_its_labels_name() {
        let owned: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns",
            "labels": {"ome.io/inferenceservice": "m", "component": "engine"},
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "ConfigMap", "name": "other", "uid": "1"},
                {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "m-decoder", "uid": "2", "controller": true}]}}))
        .expect("a pod");
        assert_eq!(replica_of_pod(&owned), Some(ObjectRef::new("m-decoder").within("ns")));
        let labelled: Pod = serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns",
            "labels": {"ome.io/inferenceservice": "m", "component": "engine"}}}))
        .expect("a pod");
        assert_eq!(replica_of_pod(&labelled), Some(ObjectRef::new("m-engine").within("ns")));
        let neither: Pod =
            serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}})).expect("a pod");
        assert_eq!(replica_of_pod(&neither), None);
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
            names(replicas_using(&store, false, None, "srt")),
            ["ns1/a-decoder", "ns1/a-engine", "ns2/b-decoder", "ns2/b-engine"]
        );
        assert_eq!(
            names(replicas_using(&store, true, Some("ns1".into()), "srt")),
            ["ns1/c-decoder", "ns1/c-engine"]
        );
    }

    #[test]
    fn label_taint_cordon_changes_deletions_and_relists_are_node_changes_heartbeats_are_not() {
        let base = json!({"metadata": {"name": "n", "labels": {"zone": "a"}}, "spec": {}});
        let event = |value: &serde_json::Value| watcher::Event::Apply(kube_node(value.clone()));
        let mut changes = NodeChanges::default();
        assert!(changes.changed(&event(&base)), "a new node");
        let mut heartbeat = base.clone();
        heartbeat["status"] = json!({"conditions": [{"type": "Ready", "status": "True"}]});
        heartbeat["metadata"]["resourceVersion"] = json!("42");
        assert!(!changes.changed(&event(&heartbeat)));
        let mut relabelled = base.clone();
        relabelled["metadata"]["labels"]["zone"] = json!("b");
        let mut tainted = base.clone();
        tainted["spec"]["taints"] = json!([{"key": "k", "effect": "NoSchedule"}]);
        let mut cordoned = base.clone();
        cordoned["spec"]["unschedulable"] = json!(true);
        for changed in [relabelled, tainted, cordoned, base.clone()] {
            assert!(changes.changed(&event(&changed)), "{changed}");
        }
        assert!(changes.changed(&watcher::Event::Delete(kube_node(base.clone()))));
        // A relist: one change when it is done, none per node listed; then it is what was seen.
        assert!(!changes.changed(&watcher::Event::Init));
        assert!(!changes.changed(&watcher::Event::InitApply(kube_node(base.clone()))));
        assert!(changes.changed(&watcher::Event::InitDone));
        assert!(!changes.changed(&event(&heartbeat)));
    }

    #[test]
    fn the_node_snapshot_is_rebuilt_only_after_a_node_change() {
        let (store, mut writer) = reflector::store();
        let version = Arc::new(AtomicU64::new(0));
        let snapshot = NodeSnapshot::new(store, version.clone(), nodes);
        writer.apply_watcher_event(&watcher::Event::Apply(kube_node(
            json!({"metadata": {"name": "n1", "labels": {"zone": "a"}}, "spec": {"unschedulable": true,
                "taints": [{"key": "gpu", "value": "yes", "effect": "NoSchedule"}]}}),
        )));
        let first = snapshot.current();
        assert_eq!(
            first.get("n1"),
            Some(&Node::new(
                "n1".into(),
                [("zone".to_owned(), "a".to_owned())].into(),
                vec![Taint {
                    key: "gpu".into(),
                    value: "yes".into(),
                    effect: "NoSchedule".into()
                }],
                true
            ))
        );
        writer.apply_watcher_event(&watcher::Event::Apply(kube_node(json!({"metadata": {"name": "n2"}}))));
        assert!(
            Arc::ptr_eq(&first, &snapshot.current()),
            "no change announced: the same snapshot"
        );
        version.fetch_add(1, Ordering::AcqRel);
        let second = snapshot.current();
        assert_eq!(second.len(), 2);
        assert!(Arc::ptr_eq(&second, &snapshot.current()));
    }
}
