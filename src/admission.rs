//! The pod of a Pod CREATE, in the order of docs/rules.md: P2 (an OMENative pod), P11 (its
//! labels), P3 (its InferenceReplica, read through the one host call), P4 (the replica's fields),
//! then the rules of the core, and the term they decide written into the pod. Its metadata is read
//! through serde; the pod stays the `serde_json::Value` the term is written into, so every field
//! it carries comes back as it came, known or not.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

use ome_spread_core::instance::{BadLabel, InstanceLabels};
use ome_spread_core::labels;
use ome_spread_core::replica::{ReplicaRef, is_controlling_replica};
use ome_spread_core::rules::{self, Decision, Unchanged};
use ome_spread_core::settings::{OnMissingReplica, Settings};
use ome_spread_core::shown::shown;

use crate::rejection::Rejection;
use crate::replica;

/// What happens to an admission request.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Unchanged(Unchanged),
    /// Accepted with this pod: the request's pod with the one term added.
    Mutated(Value),
    Rejected(Rejection),
}

/// The outcome of one request, and a warning for the API client, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    pub outcome: Outcome,
    pub warning: Option<String>,
}

impl From<Outcome> for Admission {
    fn from(outcome: Outcome) -> Self {
        Self { outcome, warning: None }
    }
}

impl From<Rejection> for Outcome {
    fn from(rejection: Rejection) -> Self {
        Self::Rejected(rejection)
    }
}

/// P2 onwards, for the `pod` of a Pod CREATE in `namespace` with the policy's `settings`.
pub fn admit(
    namespace: &str,
    pod: Value,
    settings: &Value,
    read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>,
) -> Admission {
    mutated(namespace, pod, settings, read_replica).unwrap_or_else(Admission::from)
}

/// The pod with the term the rules decide, or the warning where P3 lets it pass without; `Err`
/// where they stop before.
fn mutated(
    namespace: &str,
    mut object: Value,
    settings: &Value,
    read_replica: impl FnOnce(&ReplicaRef) -> Result<Vec<u8>, String>,
) -> Result<Admission, Outcome> {
    let pod = Pod::read(&object, namespace)?;
    let labelled = |bad| Rejection::Label(pod.name.clone(), bad);
    if pod.label(labels::MANAGED_BY).map_err(labelled)? != Some(labels::OME_NATIVE) {
        return Err(Outcome::Unchanged(Unchanged::NotOmeNative));
    }
    let settings = Settings::from_json(settings).map_err(Rejection::BadSettings)?;
    let instance = InstanceLabels::read(|label| pod.label(label)).map_err(labelled)?;
    let replica = match pod.controller_replica()? {
        Some(name) => ReplicaRef {
            namespace: pod.namespace.clone(),
            name: name.to_owned(),
        },
        None => ReplicaRef::for_component(&pod.namespace, instance.service, instance.component),
    };
    let accept = settings.on_missing_replica == OnMissingReplica::Accept;
    let spread = match replica::settings_in_effect(&replica, read_replica(&replica)) {
        Err(unreadable @ Rejection::ReplicaUnreadable(..)) if accept => {
            let warning = Some(format!(
                "{unreadable}; admitted without spread (onMissingReplica: Accept)"
            ));
            let outcome = Outcome::Unchanged(Unchanged::ReplicaUnreadable);
            return Ok(Admission { outcome, warning });
        }
        read => read?,
    };
    let term = rules::wanted(&instance, &spread, &settings).map_err(Outcome::Unchanged)?;
    let path = term.path();
    let present = pod.listed(path)?;
    let name = pod.name.clone();
    let as_json = |e: serde_json::Error| format!("the term cannot be written as JSON: {e}");
    // Each term is JSON before the pod changes: it borrows the pod's labels.
    let written = match rules::decide(term, &present, &settings) {
        Decision::Unchanged(why) => return Err(Outcome::Unchanged(why)),
        Decision::Append(term) => serde_json::to_value(term)
            .map_err(as_json)
            .map(|term| append(&mut object, path, term)),
        Decision::Complete { index, fields } => serde_json::to_value(fields)
            .map_err(as_json)
            .and_then(|fields| complete(&mut object, path, index, fields)),
    };
    written.map_err(|what| Rejection::Internal(name, what))?;
    Ok(Outcome::Mutated(object).into())
}

/// P5, P8: `term` at the end of the list at `path`, made where it is absent or null. Indexing
/// makes each object missing on the way, and never panics: [`Pod::listed`] found every step an
/// object or absent.
fn append(pod: &mut Value, path: &[&str], term: Value) {
    match path.iter().fold(pod, |at, step| &mut at[*step]) {
        Value::Array(list) => list.push(term),
        other => *other = Value::Array(vec![term]),
    }
}

/// P12: `fields` added to the term at `index` of the list at `path`.
fn complete(pod: &mut Value, path: &[&str], index: usize, fields: Value) -> Result<(), String> {
    let own = pod.pointer_mut(&format!("/{}/{index}", path.join("/")));
    match (own.and_then(Value::as_object_mut), fields) {
        (Some(own), Value::Object(fields)) => {
            own.extend(fields);
            Ok(())
        }
        _ => Err(format!("no term {index} to complete")),
    }
}

/// A field as the API server types it, or the JSON it holds instead: named in the rejection of a
/// rule that reads it, passed by otherwise. (Absent or null is `None` around it.)
#[derive(Deserialize)]
#[serde(untagged)]
enum Field<T> {
    Typed(T),
    Other(Value),
}

/// What the rules read of a pod's metadata, borrowed from the pod.
#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Metadata<'a> {
    name: Option<&'a str>,
    generate_name: Option<&'a str>,
    namespace: Option<&'a str>,
    #[serde(borrow)]
    labels: Option<Field<Labels<'a>>>,
    #[serde(borrow)]
    owner_references: Option<Field<Vec<Field<OwnerReference<'a>>>>>,
}

type Labels<'a> = BTreeMap<&'a str, Option<Field<&'a str>>>;

/// An owner of the pod; one of another shape is not the replica.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OwnerReference<'a> {
    api_version: &'a str,
    kind: &'a str,
    #[serde(borrow)]
    name: Option<Field<&'a str>>,
    controller: Option<bool>,
}

/// A pod as the rules read it: its metadata, and the pod itself for the lists a term joins.
struct Pod<'a> {
    object: &'a Value,
    /// The request's namespace; a pod created from `generateName` may carry none of its own.
    namespace: String,
    /// `<namespace>/<name>` for messages (`<generateName>*` before the API server names it).
    name: String,
    metadata: Metadata<'a>,
}

impl<'a> Pod<'a> {
    fn read(object: &'a Value, request_namespace: &str) -> Result<Self, Rejection> {
        let unnamed = format!("{request_namespace}/(unnamed)");
        let metadata = match &object["metadata"] {
            _ if !object.is_object() => return Err(bad(&unnamed, "object", object, "must be a Pod object")),
            Value::Null => Metadata::default(),
            metadata @ Value::Object(_) => {
                Metadata::deserialize(metadata).map_err(|e| bad(&unnamed, "metadata", metadata, &e.to_string()))?
            }
            other => return Err(bad(&unnamed, "metadata", other, "must be an object")),
        };
        let namespace = match request_namespace {
            "" => metadata.namespace.unwrap_or_default(),
            namespace => namespace,
        };
        let name = match (metadata.name, metadata.generate_name) {
            (Some(name), _) if !name.is_empty() => format!("{namespace}/{name}"),
            (_, Some(prefix)) if !prefix.is_empty() => format!("{namespace}/{prefix}*"),
            _ => format!("{namespace}/(unnamed)"),
        };
        if let Some(Field::Other(other)) = &metadata.labels {
            return Err(bad(&name, "metadata.labels", other, "must be an object"));
        }
        Ok(Self {
            object,
            namespace: namespace.to_owned(),
            name,
            metadata,
        })
    }

    /// A label's value; one that is not a string is an error, not a miss.
    fn label(&self, label: &'static str) -> Result<Option<&'a str>, BadLabel> {
        let Some(Field::Typed(labels)) = &self.metadata.labels else {
            return Ok(None);
        };
        match labels.get(label) {
            None | Some(None) => Ok(None),
            Some(Some(Field::Typed(value))) => Ok(Some(value)),
            Some(Some(Field::Other(other))) => Err(BadLabel::Invalid {
                label,
                value: shown(other),
                why: "must be a string",
            }),
        }
    }

    /// P3: the name of the InferenceReplica that controls this pod, if an ownerReference says so.
    fn controller_replica(&self) -> Result<Option<&'a str>, Rejection> {
        let references = match &self.metadata.owner_references {
            Some(Field::Typed(references)) => references.as_slice(),
            None => &[],
            Some(Field::Other(other)) => return Err(self.bad("metadata.ownerReferences", other, "must be a list")),
        };
        let owner = references.iter().find_map(|reference| match reference {
            Field::Typed(r) => {
                is_controlling_replica(r.api_version, r.kind, r.controller == Some(true)).then_some(&r.name)
            }
            Field::Other(_) => None,
        });
        let name = match owner {
            None => return Ok(None),
            Some(Some(Field::Typed(name))) if !name.is_empty() => return Ok(Some(name)),
            Some(Some(Field::Typed(empty))) => &Value::from(*empty),
            Some(Some(Field::Other(other))) => other,
            Some(None) => &Value::Null,
        };
        Err(self.bad(
            "metadata.ownerReferences[InferenceReplica].name",
            name,
            "must be the replica's name",
        ))
    }

    /// The terms of the list at `path`; every term must name its topologyKey. Absent or null
    /// along the way is an empty list; any other non-object on the way, or a non-list at the
    /// end, is an error naming the field.
    fn listed(&self, path: &[&str]) -> Result<Vec<&'a Value>, Rejection> {
        let mut at = self.object;
        for (depth, step) in path.iter().enumerate() {
            at = &at[*step];
            let last = depth + 1 == path.len();
            let why = match at {
                Value::Null => return Ok(Vec::new()),
                Value::Array(_) if last => continue,
                Value::Object(_) if !last => continue,
                _ if last => "must be a list",
                _ => "must be an object",
            };
            return Err(self.bad(&path[..=depth].join("."), at, why));
        }
        let terms = at.as_array().map(Vec::as_slice).unwrap_or_default();
        for (i, term) in terms.iter().enumerate() {
            if !term["topologyKey"].is_string() {
                let field = format!("{}[{i}].topologyKey", path.join("."));
                return Err(self.bad(&field, &term["topologyKey"], "must be a string"));
            }
        }
        Ok(terms.iter().collect())
    }

    fn bad(&self, field: &str, value: &Value, why: &str) -> Rejection {
        bad(&self.name, field, value, why)
    }
}

fn bad(pod: &str, field: &str, value: &Value, why: &str) -> Rejection {
    Rejection::BadField {
        object: format!("pod {pod}"),
        field: field.into(),
        value: shown(value),
        why: why.into(),
    }
}
