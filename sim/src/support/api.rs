//! The API server as the OME stand-in, the cluster suites and `bench-cluster` reach it: the kinds
//! they read and write, objects as JSON (each with its `kind`, as the pure models of this crate and
//! the core read them), and one log line per action.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersion;
use kube::{Config, Error};
use serde_json::Value;

use crate::support::objects::{name, namespace_of};

/// A kind they use, with what its URL needs.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// As its objects' `apiVersion` gives it: `v1`, or `group/version`.
    pub api_version: &'static str,
    pub kind: &'static str,
    pub plural: &'static str,
    pub namespaced: bool,
}

const OME: &str = "ome.io/v1beta1";
pub const POD: Kind = Kind::new("v1", "Pod", "pods", true);
pub const NODE: Kind = Kind::new("v1", "Node", "nodes", false);
pub const EVENT: Kind = Kind::new("v1", "Event", "events", true);
pub const NAMESPACE: Kind = Kind::new("v1", "Namespace", "namespaces", false);
pub const INFERENCE_SERVICE: Kind = Kind::new(OME, "InferenceService", "inferenceservices", true);
pub const INFERENCE_REPLICA: Kind = Kind::new(OME, "InferenceReplica", "inferencereplicas", true);
pub const CLUSTER_SERVING_RUNTIME: Kind = Kind::new(OME, "ClusterServingRuntime", "clusterservingruntimes", false);
pub const SERVING_RUNTIME: Kind = Kind::new(OME, "ServingRuntime", "servingruntimes", true);

/// Every call to the API server gives up after this long: the loops stay bounded when the API
/// server stalls, and try again on their next pass.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

impl Kind {
    const fn new(api_version: &'static str, kind: &'static str, plural: &'static str, namespaced: bool) -> Kind {
        Kind {
            api_version,
            kind,
            plural,
            namespaced,
        }
    }

    fn resource(&self) -> ApiResource {
        let group_version: GroupVersion = self.api_version.parse().expect("an apiVersion");
        ApiResource::from_gvk_with_plural(&group_version.with_kind(self.kind), self.plural)
    }

    /// An object of the kind as JSON, with the `apiVersion` and `kind` a list's items lack.
    fn json(&self, object: DynamicObject) -> Result<Value, ApiError> {
        let mut object = serde_json::to_value(object)?;
        object["apiVersion"] = self.api_version.into();
        object["kind"] = self.kind.into();
        Ok(object)
    }

    /// The kind's objects across namespaces (or cluster-scoped).
    pub fn all(&self, client: &Client) -> Api<DynamicObject> {
        Api::all_with(client.clone(), &self.resource())
    }

    /// The kind's objects in `namespace`; a cluster-scoped kind ignores it.
    pub fn within(&self, client: &Client, namespace: &str) -> Api<DynamicObject> {
        if self.namespaced {
            Api::namespaced_with(client.clone(), namespace, &self.resource())
        } else {
            self.all(client)
        }
    }
}

/// What a call to the API server can fail with.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The API server's own message, with its code, else the client's error.
    #[error("{}", said(.0))]
    Kube(#[from] kube::Error),
    #[error("no answer within {CALL_TIMEOUT:?}")]
    Timeout,
    #[error("not an object of its kind: {0}")]
    Shape(#[from] serde_json::Error),
}

fn said(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => format!("{} ({} {})", status.message, status.code, status.reason),
        other => other.to_string(),
    }
}

impl ApiError {
    /// The API server's HTTP status, when it answered with one.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Kube(kube::Error::Api(status)) => Some(status.code),
            _ => None,
        }
    }
}

async fn bounded<T>(call: impl Future<Output = Result<T, kube::Error>>) -> Result<T, ApiError> {
    match tokio::time::timeout(CALL_TIMEOUT, call).await {
        Ok(answer) => Ok(answer?),
        Err(_) => Err(ApiError::Timeout),
    }
}

/// The cluster of the kubeconfig at `path`, or of the one `KUBECONFIG` (or `~/.kube/config`) names.
pub async fn config(path: Option<&std::path::Path>) -> Result<Config, Error> {
    let Some(path) = path else {
        return Config::infer().await.map_err(Error::InferConfig);
    };
    let kubeconfig = Kubeconfig::read_from(path).map_err(Error::InferKubeconfig)?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(Error::InferKubeconfig)
}

/// A client of [`config`]'s cluster.
pub async fn client(path: Option<&std::path::Path>) -> Result<Client, Error> {
    Client::try_from(config(path).await?)
}

/// Every object of `kind`, as JSON with its `apiVersion` and `kind` (a list's items carry
/// neither). A kind the API server does not serve (no CRD) is no objects.
pub async fn list(client: &Client, kind: Kind) -> Result<Vec<Value>, ApiError> {
    let listed = match bounded(kind.all(client).list(&ListParams::default())).await {
        Err(e) if e.code() == Some(404) => return Ok(Vec::new()),
        listed => listed?,
    };
    listed.items.into_iter().map(|item| kind.json(item)).collect()
}

pub async fn get(client: &Client, kind: Kind, namespace: &str, name: &str) -> Result<Option<Value>, ApiError> {
    let found = bounded(kind.within(client, namespace).get_opt(name)).await?;
    found.map(|found| kind.json(found)).transpose()
}

pub async fn create(client: &Client, kind: Kind, object: &Value) -> Result<(), ApiError> {
    let namespace = namespace_of(object);
    let typed: DynamicObject = serde_json::from_value(object.clone())?;
    bounded(kind.within(client, namespace).create(&PostParams::default(), &typed)).await?;
    Ok(())
}

/// A server-side apply of `object` by `manager`, forced (each writer owns what it writes), of the
/// object or (`status`) of its status subresource.
pub async fn apply(client: &Client, kind: Kind, object: &Value, manager: &str, status: bool) -> Result<(), ApiError> {
    let params = PatchParams::apply(manager).force();
    patch(client, kind, identity(object), &params, &Patch::Apply(object), status).await
}

/// A JSON merge patch by `manager`, of the object or (`status`) of its status subresource.
pub async fn merge(
    client: &Client,
    kind: Kind,
    (namespace, name): (&str, &str),
    patch: &Value,
    manager: &str,
    status: bool,
) -> Result<(), ApiError> {
    let params = PatchParams {
        field_manager: Some(manager.into()),
        ..PatchParams::default()
    };
    self::patch(client, kind, (namespace, name), &params, &Patch::Merge(patch), status).await
}

async fn patch(
    client: &Client,
    kind: Kind,
    (namespace, name): (&str, &str),
    params: &PatchParams,
    patch: &Patch<&Value>,
    status: bool,
) -> Result<(), ApiError> {
    let api = kind.within(client, namespace);
    if status {
        bounded(api.patch_status(name, params, patch)).await?;
    } else {
        bounded(api.patch(name, params, patch)).await?;
    }
    Ok(())
}

/// Deletes an object with `grace` seconds to end (`Some(0)`, at once: a pod's end waits on no
/// kubelet, nor on kwok; None: its own grace period). Gone already is done.
pub async fn delete(
    client: &Client,
    kind: Kind,
    (namespace, name): (&str, &str),
    grace: Option<u32>,
) -> Result<(), ApiError> {
    let params = DeleteParams {
        grace_period_seconds: grace,
        ..DeleteParams::default()
    };
    match bounded(kind.within(client, namespace).delete(name, &params)).await {
        Err(e) if e.code() == Some(404) => Ok(()),
        done => done.map(|_| ()),
    }
}

/// An object's namespace (empty when cluster-scoped) and name.
pub fn identity(object: &Value) -> (&str, &str) {
    (namespace_of(object), name(object))
}

/// Now, to the second, as Kubernetes writes its times (metav1.Time).
pub fn now() -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    now.round(jiff::Unit::Second).unwrap_or(now)
}

/// One line per action, with the time, as the stand-in's logs show them.
pub fn log(who: &str, line: impl std::fmt::Display) {
    let now = jiff::Timestamp::now().round(jiff::Unit::Millisecond);
    println!("{} {who}: {line}", now.unwrap_or_default());
}
