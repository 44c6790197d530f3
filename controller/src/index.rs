//! The controller's one cache mechanism beside kube-runtime's stores: an index kept by a watch's
//! own events, so that an event costs its own object and a relist costs what it changed. Each
//! object's entry by key (`namespace/name`), what the index derives from the entries kept in step
//! with them, and what each change of an entry triggers; shared with the reconciles
//! ([`Shared`]), which wait for its first list.

use std::collections::HashMap;
use std::sync::Mutex;

use kube::ResourceExt;
use kube::runtime::watcher;
use tokio::sync::watch;

use crate::state::lock;

/// What a watch's events are applied to, one at a time: an [`Index`], or the nodes
/// ([`crate::nodes::NodeSet`]).
pub trait Apply {
    type Object;
    /// What an event asks for (the replicas to reconcile).
    type Output;
    fn apply(&mut self, event: &watcher::Event<Self::Object>) -> Self::Output;
}

/// What an index derives from its entries, updated one entry at a time.
pub trait Derived: Default {
    type Object: ResourceExt;
    type Entry;
    /// What a change of an entry asks for (a replica to reconcile).
    type Trigger;
    /// What an object contributes (None: nothing).
    fn entry(object: &Self::Object) -> Option<Self::Entry>;
    /// What an entry's arrival, change or departure triggers (None: nothing).
    fn trigger(entry: &Self::Entry) -> Option<Self::Trigger>;
    fn insert(&mut self, entry: &Self::Entry);
    /// Takes away an entry inserted before.
    fn remove(&mut self, entry: &Self::Entry);
}

pub struct Index<D: Derived> {
    entries: HashMap<String, D::Entry>,
    derived: D,
    /// During a relist: the entries listed so far, which replace `entries` when it is done.
    relisting: Option<HashMap<String, D::Entry>>,
}

impl<D: Derived> Default for Index<D> {
    fn default() -> Self {
        Self {
            entries: HashMap::new(),
            derived: D::default(),
            relisting: None,
        }
    }
}

impl<D: Derived> Apply for Index<D>
where
    D::Entry: PartialEq,
{
    type Object = D::Object;
    type Output = Vec<D::Trigger>;

    /// Applies a watch event; returns what the entries it changed trigger, before and after
    /// (a relist: when it is done, those of every entry it added, changed or found gone).
    fn apply(&mut self, event: &watcher::Event<D::Object>) -> Vec<D::Trigger> {
        let mut triggers = Vec::new();
        match event {
            watcher::Event::Apply(object) => {
                let (key, new) = (key(object), D::entry(object));
                if self.entries.get(&key) != new.as_ref() {
                    self.take(&key, &mut triggers);
                    if let Some(new) = new {
                        self.put(key, new, &mut triggers);
                    }
                }
            }
            watcher::Event::Delete(object) => self.take(&key(object), &mut triggers),
            watcher::Event::Init => self.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                let relisting = self.relisting.get_or_insert_default();
                match D::entry(object) {
                    Some(new) => relisting.insert(key(object), new),
                    None => relisting.remove(&key(object)),
                };
            }
            watcher::Event::InitDone => {
                let listed = self.relisting.take().unwrap_or_default();
                let gone: Vec<String> = (self.entries.keys())
                    .filter(|key| !listed.contains_key(*key))
                    .cloned()
                    .collect();
                for key in gone {
                    self.take(&key, &mut triggers);
                }
                for (key, new) in listed {
                    if self.entries.get(&key) != Some(&new) {
                        self.take(&key, &mut triggers);
                        self.put(key, new, &mut triggers);
                    }
                }
            }
        }
        triggers
    }
}

impl<D: Derived> Index<D> {
    /// Takes the entry of `key` away, if any.
    fn take(&mut self, key: &str, triggers: &mut Vec<D::Trigger>) {
        if let Some(old) = self.entries.remove(key) {
            self.derived.remove(&old);
            triggers.extend(D::trigger(&old));
        }
    }

    fn put(&mut self, key: String, new: D::Entry, triggers: &mut Vec<D::Trigger>) {
        self.derived.insert(&new);
        triggers.extend(D::trigger(&new));
        self.entries.insert(key, new);
    }

    pub fn derived(&self) -> &D {
        &self.derived
    }
}

pub fn key<K: ResourceExt>(object: &K) -> String {
    format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any())
}

/// A watch's events on the objects `object` generates: applied, deleted, and relists, as a test
/// throws them at an index.
#[cfg(test)]
pub fn events_of<K: Clone + std::fmt::Debug>(
    object: impl proptest::strategy::Strategy<Value = K> + Clone,
) -> impl proptest::strategy::Strategy<Value = watcher::Event<K>> {
    use proptest::prelude::*;
    prop_oneof![
        4 => object.clone().prop_map(watcher::Event::Apply),
        2 => object.clone().prop_map(watcher::Event::Delete),
        1 => Just(watcher::Event::Init),
        2 => object.prop_map(watcher::Event::InitApply),
        1 => Just(watcher::Event::InitDone),
    ]
}

/// The objects a reflector would hold after `events`, by key: what a test rebuilds an index from.
#[cfg(test)]
pub fn reflected<K: ResourceExt + Clone>(events: &[watcher::Event<K>]) -> HashMap<String, K> {
    let (mut objects, mut relisting) = (HashMap::new(), None::<HashMap<String, K>>);
    for event in events {
        match event {
            watcher::Event::Apply(object) => {
                objects.insert(key(object), object.clone());
            }
            watcher::Event::Delete(object) => {
                objects.remove(&key(object));
            }
            watcher::Event::Init => relisting = Some(HashMap::new()),
            watcher::Event::InitApply(object) => {
                relisting.get_or_insert_default().insert(key(object), object.clone());
            }
            watcher::Event::InitDone => objects = relisting.take().unwrap_or_default(),
        }
    }
    objects
}

/// An index shared between its watch and the reconciles, and whether its first list is in.
pub struct Shared<I> {
    index: Mutex<I>,
    filled: watch::Sender<bool>,
}

impl<I: Default> Default for Shared<I> {
    fn default() -> Self {
        Self::new(I::default())
    }
}

impl<I> Shared<I> {
    pub fn new(index: I) -> Self {
        Self {
            index: Mutex::new(index),
            filled: watch::Sender::new(false),
        }
    }
}

impl<I: Apply> Shared<I> {
    /// As [`Apply::apply`]; the first relist done fills it.
    pub fn apply(&self, event: &watcher::Event<I::Object>) -> I::Output {
        let output = lock(&self.index).apply(event);
        if matches!(event, watcher::Event::InitDone) {
            self.filled.send_replace(true);
        }
        output
    }

    /// Waits until the first list is in.
    pub async fn wait_until_filled(&self) {
        let mut filled = self.filled.subscribe();
        // The sender lives as long as `self`: the wait ends only when filled.
        let _ = filled.wait_for(|filled| *filled).await;
    }

    /// `read` the index as it stands.
    pub fn with<T>(&self, read: impl FnOnce(&mut I) -> T) -> T {
        read(&mut lock(&self.index))
    }
}
