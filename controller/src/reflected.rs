//! One cache mechanism for the kinds whose objects are also kept in plain maps (the OMENative
//! pods, the room every pod holds, the nodes): kube-runtime's store and what is derived of it,
//! written under one lock, and the watch that fills them. The caches themselves are in
//! [`crate::context`].

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::{Stream, StreamExt, future};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{self, Lookup, ObjectRef, Store};
use kube::runtime::utils::ResetTimerBackoff;
use kube::runtime::watcher::{Event, ExponentialBackoff};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use tracing::warn;

use crate::error::lock;

/// The wait of every watch after an error: 0.5 s, then 1 s, each lengthened by a random part of
/// itself (at most 2 s), where kube-runtime's default (client-go's reflector's) doubles up to 30 s.
/// A kube-apiserver restart fails each watch several times in a row (refused connections, 503s
/// while it starts, then a 410 for the watch's stale resourceVersion), and each of those waits
/// would keep the watch away longer after the server is back; a retry a second from one
/// controller costs the server nothing.
pub fn backoff() -> ResetTimerBackoff<ExponentialBackoff> {
    let exponential = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(500))
        .with_max_delay(Duration::from_secs(1))
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    ResetTimerBackoff::new(exponential.into(), Duration::from_secs(120))
}

/// A kind the controller watches.
pub trait Watched: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static {}
impl<K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static> Watched for K {}

/// What a watch of `K` brings.
pub type Events<K> = Result<watcher::Event<K>, watcher::Error>;

/// The watch of the objects of `api` that `config` selects, trimmed, with no managed fields.
fn watched<K: Watched>(api: Api<K>, config: watcher::Config, trim: fn(&mut K)) -> impl Stream<Item = Events<K>> {
    watcher(api, config).backoff(backoff()).modify(move |object: &mut K| {
        object.meta_mut().managed_fields = None;
        trim(object);
    })
}

/// A cache of `K`, and the stream of its watch's events that fills it.
pub fn reflected<K: Watched>(api: Api<K>) -> (Store<K>, impl Stream<Item = Events<K>>) {
    let (store, writer) = reflector::store();
    (store, watched(api, watcher::Config::default(), |_| {}).reflect(writer))
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
pub struct Reflected<K: Lookup<DynamicType = ()> + Clone + 'static, D> {
    pub store: Store<K>,
    written: Mutex<(Writer<K>, D)>,
}

impl<K: Lookup<DynamicType = ()> + Clone + PartialEq + 'static, D: Derived<K>> Default for Reflected<K, D> {
    fn default() -> Self {
        let (store, writer) = reflector::store();
        Self {
            store,
            written: Mutex::new((writer, D::default())),
        }
    }
}

impl<K: Lookup<DynamicType = ()> + Clone + PartialEq + 'static, D: Derived<K>> Reflected<K, D> {
    /// Applies a watch event to the store, then to what is derived of it. An object that comes
    /// again unchanged changes nothing; a relist (kube-runtime's: the store is swapped when it is
    /// done) is derived anew once it is done.
    pub fn apply(&self, event: &Event<K>) -> D::Output {
        let mut written = lock(&self.written);
        let (writer, derived) = &mut *written;
        let old = match event {
            Event::Apply(object) | Event::Delete(object) => self.store.get(&ObjectRef::from_obj(object)),
            _ => None,
        };
        if matches!(event, Event::Apply(object) if old.as_deref() == Some(object)) {
            return D::Output::default();
        }
        writer.apply_watcher_event(event);
        match event {
            Event::Apply(object) => derived.changed(old, self.store.get(&ObjectRef::from_obj(object))),
            Event::Delete(_) if old.is_some() => derived.changed(old, None),
            Event::InitDone => derived.relisted(self.store.state()),
            _ => D::Output::default(),
        }
    }

    /// `read` what is derived, as it stands.
    pub fn with<T>(&self, read: impl FnOnce(&mut D) -> T) -> T {
        read(&mut lock(&self.written).1)
    }
}

/// The watch of the objects of `api` that `config` selects, trimmed, each event applied to a
/// cache: what each asks for.
pub fn changes<K: Watched, O>(
    api: Api<K>,
    config: watcher::Config,
    trim: fn(&mut K),
    apply: impl Fn(&watcher::Event<K>) -> O,
) -> impl Stream<Item = O> {
    watched(api, config, trim).filter_map(move |event| {
        future::ready(match event {
            Ok(event) => Some(apply(&event)),
            Err(e) => {
                warn!(error = %e, "watching the {}", K::plural(&()));
                None
            }
        })
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn a_failed_watch_waits_0_5_s_then_1_s_at_most_2_s_with_its_jitter() {
        let waits: Vec<Duration> = super::backoff().take(50).collect();
        let (first, last) = (waits[0], &waits[1..]);
        assert!(
            first >= Duration::from_millis(500) && first < Duration::from_secs(1),
            "{waits:?}"
        );
        let within = |w: &Duration| (Duration::from_secs(1)..=Duration::from_secs(2)).contains(w);
        assert!(last.iter().all(within), "{waits:?}");
    }
}
