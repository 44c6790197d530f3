//! The controller's caches: one watch per kind fills each, into kube-runtime's stores.
//! InferenceServices, runtimes and InferenceReplicas are read by key; the OMENative pods and the
//! nodes also keep plain maps derived from their store ([`Reflected`]). A reconcile waits until all
//! are filled.

use std::hash::Hash;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt, future};
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use ome_spread_core::nodes::Served;
use ome_spread_core::settings::Settings;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tracing::warn;

use crate::error::Error;
use crate::nodes::NodeSet;
use crate::pods::Pods;
use crate::state::lock;
use ome_spread_core::ome::{ClusterServingRuntime, InferenceReplica, InferenceService, ServingRuntime};

/// What the reconciles read.
pub struct Caches {
    pub services: Store<InferenceService>,
    pub runtimes: Store<ServingRuntime>,
    pub cluster_runtimes: Store<ClusterServingRuntime>,
    /// Filled by the controller's own watch of them.
    pub replicas: Store<InferenceReplica>,
    /// The OMENative pods of each component, and the room every pod holds.
    pub pods: Arc<Pods>,
    pub nodes: Arc<Reflected<Served, NodeSet>>,
    /// The policy's settings, as last read (`--settings`, or the ClusterAdmissionPolicy followed).
    pub settings: watch::Receiver<Settings>,
    /// Whether every cache the diagnosis reads is filled: the readiness tells it
    /// ([`Self::all_filled`]), and the reconciles wait on it.
    pub filled: watch::Sender<Fill>,
    /// The caches [`Self::all_filled`] has seen filled, by name: what [`Self::unfilled`] reads.
    seen_filled: Mutex<Vec<&'static str>>,
}

/// Whether the reconciles can read the caches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fill {
    Filling,
    Filled,
    /// Asked to stop before they were filled: the watches that fill them end first.
    Stopping,
}

/// The watch of every object of `api`, trimmed, with no managed fields.
fn watched<K>(api: Api<K>, trim: fn(&mut K)) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(move |object: &mut K| {
            object.meta_mut().managed_fields = None;
            trim(object);
        })
}

/// A cache of `K`, and the stream of its watch's events that fills it.
pub fn reflected<K>(api: Api<K>) -> (Store<K>, impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>)
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
{
    let (store, writer) = reflector::store();
    (store, watched(api, |_| {}).reflect(writer))
}

/// What is derived of a store's objects, kept in step with it, event by event.
pub trait Derived<K>: Default {
    /// What a change asks for (the replicas to reconcile).
    type Output: Default;
    /// An object came (`old` None), changed, or went (`new` None).
    fn changed(&mut self, old: Option<Arc<K>>, new: Option<Arc<K>>) -> Self::Output;
    /// A list replaced the store's objects with `all`.
    fn relisted(&mut self, all: Vec<Arc<K>>) -> Self::Output;
}

/// A kube-runtime store and what is derived of it, written under one lock: a reader never sees
/// the one without the other.
pub struct Reflected<K: Resource + Clone + 'static, D>
where
    K::DynamicType: Eq + Hash + Clone,
{
    pub store: Store<K>,
    written: Mutex<(Writer<K>, D)>,
}

impl<K, D> Default for Reflected<K, D>
where
    K: Resource + Clone + PartialEq + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
    D: Derived<K>,
{
    fn default() -> Self {
        let (store, writer) = reflector::store();
        Self {
            store,
            written: Mutex::new((writer, D::default())),
        }
    }
}

impl<K, D> Reflected<K, D>
where
    K: Resource + Clone + PartialEq + 'static,
    K::DynamicType: Default + Eq + Hash + Clone,
    D: Derived<K>,
{
    /// Applies a watch event to the store, then to what is derived of it. An object that comes
    /// again unchanged changes nothing; a relist (kube-runtime's: the store is swapped when it is
    /// done) is derived anew once it is done.
    pub fn apply(&self, event: &watcher::Event<K>) -> D::Output {
        let mut written = lock(&self.written);
        let (writer, derived) = &mut *written;
        let old = match event {
            watcher::Event::Apply(object) | watcher::Event::Delete(object) => {
                self.store.get(&ObjectRef::from_obj(object))
            }
            _ => None,
        };
        if let watcher::Event::Apply(object) = event
            && old.as_deref() == Some(object)
        {
            return D::Output::default();
        }
        writer.apply_watcher_event(event);
        match event {
            watcher::Event::Apply(object) => derived.changed(old, self.store.get(&ObjectRef::from_obj(object))),
            watcher::Event::Delete(_) if old.is_some() => derived.changed(old, None),
            watcher::Event::InitDone => derived.relisted(self.store.state()),
            _ => D::Output::default(),
        }
    }

    /// `read` what is derived, as it stands.
    pub fn with<T>(&self, read: impl FnOnce(&mut D) -> T) -> T {
        read(&mut lock(&self.written).1)
    }
}

/// The watch of every object of `api`, trimmed, each event applied to a cache: what each asks for.
pub fn changes<K, O>(api: Api<K>, trim: fn(&mut K), apply: impl Fn(&watcher::Event<K>) -> O) -> impl Stream<Item = O>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    watched(api, trim).filter_map(move |event| {
        future::ready(match event {
            Ok(event) => Some(apply(&event)),
            Err(e) => {
                warn!(error = %e, "watching the {}", K::plural(&K::DynamicType::default()));
                None
            }
        })
    })
}

pub fn key<K: ResourceExt>(object: &K) -> String {
    format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any())
}

/// Waits until the store's first list is applied (false: its watch is gone).
fn ready<K>(store: &Store<K>) -> BoxFuture<'_, bool>
where
    K: Resource + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    store.wait_until_ready().map(|r| r.is_ok()).boxed()
}

impl Caches {
    /// The stores as given, the pods and nodes empty: their watches fill them.
    pub fn new(
        services: Store<InferenceService>,
        runtimes: Store<ServingRuntime>,
        cluster_runtimes: Store<ClusterServingRuntime>,
        replicas: Store<InferenceReplica>,
        settings: watch::Receiver<Settings>,
    ) -> Self {
        Self {
            services,
            runtimes,
            cluster_runtimes,
            replicas,
            pods: Arc::default(),
            nodes: Arc::default(),
            settings,
            filled: watch::Sender::new(Fill::Filling),
            seen_filled: Mutex::default(),
        }
    }

    /// Each cache the diagnosis reads, named, and the wait until its watch's first list is
    /// applied (false: its watch is gone).
    fn fills(&self) -> [(&'static str, BoxFuture<'_, bool>); 5] {
        [
            ("InferenceServices", ready(&self.services)),
            ("ServingRuntimes", ready(&self.runtimes)),
            ("ClusterServingRuntimes", ready(&self.cluster_runtimes)),
            ("pods", ready(self.pods.store())),
            ("nodes", ready(&self.nodes.store)),
        ]
    }

    /// Waits until every cache the diagnosis reads is filled (its watch's first list applied),
    /// noting each as it fills. One task only may wait so (kube-runtime's `Store::wait_until_ready`
    /// wakes only the task that polled it last): the controller's readiness, which then tells
    /// [`Self::filled`].
    pub async fn all_filled(&self) -> Result<(), Error> {
        let waits = self.fills().map(|(name, fill)| async move {
            let filled = fill.await;
            if filled {
                lock(&self.seen_filled).push(name);
            }
            filled.then_some(()).ok_or(Error::CacheGone)
        });
        futures::future::try_join_all(waits).await.map(drop)
    }

    /// The caches not filled yet, named, as [`Self::all_filled`] saw them: without polling a
    /// store's wait, which would take the readiness's place as the task it wakes.
    pub fn unfilled(&self) -> Error {
        let seen = lock(&self.seen_filled);
        let names: Vec<&str> = self
            .fills()
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| !seen.contains(name))
            .collect();
        Error::NotFilled(names.join(", "))
    }
}
