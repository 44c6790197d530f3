//! Objects saved as JSON (`kubectl get -o yaml`, `explain`'s files, the playground's input) read
//! into their models: where one cannot be, the object, the field and why are named.

use std::any::TypeId;
use std::borrow::Cow;

use kube::Resource;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::replica::namespace_of;
use crate::room::Unreadable;

/// Why objects cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// A quantity among the nodes' allocatable and the pods' requests that the API server would
    /// refuse.
    #[error(transparent)]
    Quantity(#[from] Unreadable),
    /// An object that the API server (or OME's CRD) would refuse, named, with the field and why.
    #[error("{object}: {why}")]
    Malformed { object: String, why: String },
}

/// An object read into its model; where it cannot be, the object (`Kind namespace/name`, or
/// `Kind name` for a cluster's), the field and why. A saved object may leave out its spec: it
/// reads as an empty one.
pub fn typed<K>(object: &Value) -> Result<K, Unusable>
where
    K: DeserializeOwned + Resource<DynamicType = (), Scope: 'static>,
{
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let object_named = if TypeId::of::<K::Scope>() == TypeId::of::<k8s_openapi::ClusterResourceScope>() {
        format!("{} {name}", K::kind(&()))
    } else {
        format!("{} {}/{name}", K::kind(&()), namespace_of(object))
    };
    let mut with_spec = Cow::Borrowed(object);
    if object.is_object() && object.get("spec").is_none() {
        with_spec.to_mut()["spec"] = json!({});
    }
    serde_path_to_error::deserialize(&*with_spec).map_err(|e| Unusable::Malformed {
        object: object_named,
        why: format!("{}: {}", e.path(), e.inner()),
    })
}
