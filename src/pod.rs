//! What the rules read of a pod, straight from its JSON text: labels, the controller owner, and
//! the topology keys of the two lists a rule may append to; and the one edit a rule makes, spliced
//! into that text. Nothing else of the pod is parsed: the rest comes back byte for byte.

use std::borrow::Cow;

use serde_json::Value;
use serde_json::value::RawValue;

use ome_spread_core::instance::{InstanceLabels, Runner};
use ome_spread_core::labels;
use ome_spread_core::replica::is_controlling_replica;
use ome_spread_core::rules::List;
use ome_spread_core::shown::shown;

use crate::raw::{self, Checked, Kind};
use crate::rejection::Rejection;

/// The parts of a pod's text the rules read; `object` is the whole pod.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PodText<'a> {
    pub object: Checked<'a>,
    pub metadata: Option<Checked<'a>>,
    pub spec: Option<Checked<'a>>,
    /// The spec's lists, when it is an object.
    pub topology_spread_constraints: Option<Checked<'a>>,
    pub affinity: Option<Checked<'a>>,
}

impl<'a> PodText<'a> {
    /// Reads the parts from the pod's text alone, skipping over what lies between them.
    pub fn read(object: Checked<'a>) -> Self {
        let ([spec, metadata], [topology_spread_constraints, affinity]) =
            raw::fields_within(object, ["spec", "metadata"], ["topologySpreadConstraints", "affinity"]);
        let object_spec = spec.filter(|spec| raw::kind(*spec) == Kind::Object);
        Self {
            object,
            metadata,
            spec,
            topology_spread_constraints: object_spec.and(topology_spread_constraints),
            affinity: object_spec.and(affinity),
        }
    }
}

/// The pod's metadata fields the rules read.
#[derive(Default)]
struct Metadata<'a> {
    name: Option<Checked<'a>>,
    generate_name: Option<Checked<'a>>,
    namespace: Option<Checked<'a>>,
    labels: Option<Checked<'a>>,
    owner_references: Option<Checked<'a>>,
}

/// The pod's spec fields a rule may append to.
#[derive(Default)]
struct SpecFields<'a> {
    topology_spread_constraints: Option<Checked<'a>>,
    affinity: Option<Checked<'a>>,
}

pub struct Pod<'a> {
    /// The request's namespace; a pod created from `generateName` may carry none of its own.
    pub namespace: String,
    /// `<namespace>/<name>` for messages (`<generateName>*` before the API server names it).
    pub name: String,
    /// The pod's JSON text, checked by serde_json with the rest of the request.
    object: Checked<'a>,
    metadata: Metadata<'a>,
    spec: Option<Checked<'a>>,
    spec_fields: SpecFields<'a>,
}

/// Where a term goes: the end of an existing list, or the place where the path first stops.
enum Slot<'a> {
    List(Checked<'a>),
    /// `container` (an object) has no `path[depth]`, or has it as `null`.
    Missing {
        container: Checked<'a>,
        depth: usize,
        null: Option<Checked<'a>>,
    },
}

impl<'a> Pod<'a> {
    /// Reads a pod from its JSON text, which serde_json has checked with the rest of the request.
    pub fn new(object: Option<Checked<'a>>, request_namespace: &str) -> Result<Self, Rejection> {
        match object {
            Some(object) if raw::kind(object) == Kind::Object => {
                Self::from_parts(PodText::read(object), request_namespace)
            }
            other => Err(unnamed_bad(
                request_namespace,
                "object",
                other.map_or("null", Checked::as_str),
                "must be a Pod object",
            )),
        }
    }

    /// A pod from its parts, found in its text (the text of a JSON object).
    pub fn from_parts(parts: PodText<'a>, request_namespace: &str) -> Result<Self, Rejection> {
        let bad = |field: &str, value: &str, why: &str| unnamed_bad(request_namespace, field, value, why);
        let PodText {
            object,
            metadata,
            spec,
            topology_spread_constraints,
            affinity,
        } = parts;
        let spec_fields = SpecFields {
            topology_spread_constraints,
            affinity,
        };
        let metadata = match metadata {
            None => Metadata::default(),
            Some(metadata) if raw::kind(metadata) == Kind::Null => Metadata::default(),
            Some(metadata) if raw::kind(metadata) == Kind::Object => {
                let [name, generate_name, namespace, labels, owner_references] = raw::fields(
                    metadata,
                    ["name", "generateName", "namespace", "labels", "ownerReferences"],
                );
                Metadata {
                    name,
                    generate_name,
                    namespace,
                    labels,
                    owner_references,
                }
            }
            Some(other) => return Err(bad("metadata", &other, "must be an object")),
        };
        let text_of = |field: Option<Checked<'a>>| field.and_then(raw::text).unwrap_or_default();
        let namespace = match request_namespace {
            "" => text_of(metadata.namespace).into_owned(),
            namespace => namespace.to_owned(),
        };
        let name = match (text_of(metadata.name), text_of(metadata.generate_name)) {
            (name, prefix) if name.is_empty() && prefix.is_empty() => format!("{namespace}/(unnamed)"),
            (name, prefix) if name.is_empty() => format!("{namespace}/{prefix}*"),
            (name, _) => format!("{namespace}/{name}"),
        };
        let pod = Self {
            namespace,
            name,
            object,
            metadata,
            spec,
            spec_fields,
        };
        match pod.metadata.labels {
            Some(labels) if !matches!(raw::kind(labels), Kind::Object | Kind::Null) => {
                Err(pod.bad("metadata.labels", &labels, "must be an object"))
            }
            _ => Ok(pod),
        }
    }

    /// Labels' values, read in one pass; a label that is not a string is an error, not a miss.
    fn labels<const N: usize>(&self, names: [&'static str; N]) -> Result<[Option<Cow<'a, str>>; N], Rejection> {
        let mut values = std::array::from_fn(|_| None);
        let Some(labels) = self.metadata.labels.filter(|l| raw::kind(*l) == Kind::Object) else {
            return Ok(values);
        };
        let found = raw::fields(labels, names);
        for ((value, name), raw_value) in values.iter_mut().zip(names).zip(found) {
            *value = match raw_value {
                None => None,
                Some(raw_value) => match raw::text(raw_value) {
                    Some(text) => Some(text),
                    None if raw::kind(raw_value) == Kind::Null => None,
                    None => return Err(self.bad_label(name, &shown_raw(&raw_value), "must be a string")),
                },
            };
        }
        Ok(values)
    }

    /// P2: `ome.io/managed-by: OMENative` is what makes a pod OMENative.
    pub fn is_ome_native(&self) -> Result<bool, Rejection> {
        let [managed_by] = self.labels([labels::MANAGED_BY])?;
        Ok(managed_by.as_deref() == Some(labels::OME_NATIVE))
    }

    /// P11: the labels a rule needs, present and well formed.
    pub fn instance_labels(&self) -> Result<InstanceLabels<'a>, Rejection> {
        let [runner, index, service, component] = self.labels([
            labels::RUNNER,
            labels::INSTANCE_INDEX,
            labels::INFERENCE_SERVICE,
            labels::COMPONENT,
        ])?;
        let runner = match self.required(labels::RUNNER, runner)?.as_ref() {
            "default" => Runner::Default,
            "leader" => Runner::Leader,
            "worker" => {
                let index = self.required(labels::INSTANCE_INDEX, index)?;
                if index.is_empty() || index.len() > 63 || !index.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(self.bad_label(labels::INSTANCE_INDEX, &quoted(&index), "must be a whole number"));
                }
                Runner::Worker {
                    instance_index: index.into_owned(),
                }
            }
            other => {
                return Err(self.bad_label(labels::RUNNER, &quoted(other), "must be default, leader or worker"));
            }
        };
        Ok(InstanceLabels {
            service: self.selector_value(labels::INFERENCE_SERVICE, service)?,
            component: self.selector_value(labels::COMPONENT, component)?,
            runner,
        })
    }

    /// The name of the InferenceReplica that controls this pod, if an ownerReference says so (P3).
    pub fn controller_replica(&self) -> Result<Option<String>, Rejection> {
        let Some(references) = self.metadata.owner_references else {
            return Ok(None);
        };
        // The usual list of objects is read without building a tree; anything else, again.
        if let Ok(references) = serde_json::from_str::<Option<Vec<OwnerReference>>>(references.as_str()) {
            let replica = references.unwrap_or_default().into_iter().find(|r| r.is_replica());
            match replica.map(|r| r.name.and_then(raw::text)) {
                None => return Ok(None),
                Some(Some(name)) if !name.is_empty() => return Ok(Some(name.into_owned())),
                Some(_) => {}
            }
        }
        let references: Value = serde_json::from_str(&references).map_err(|e| malformed(self.name.clone(), e))?;
        let references = match references {
            Value::Null => return Ok(None),
            Value::Array(references) => references,
            other => return Err(self.bad_value("metadata.ownerReferences", &other, "must be a list")),
        };
        let is_replica = |r: &&Value| {
            let text = |field: &str| r.get(field).and_then(Value::as_str).unwrap_or_default();
            let controller = r.get("controller") == Some(&Value::Bool(true));
            is_controlling_replica(text("apiVersion"), text("kind"), controller)
        };
        match references.iter().find(is_replica).map(|r| r.get("name")) {
            None => Ok(None),
            Some(Some(Value::String(name))) if !name.is_empty() => Ok(Some(name.clone())),
            Some(other) => Err(self.bad_value(
                "metadata.ownerReferences[InferenceReplica].name",
                other.unwrap_or(&Value::Null),
                "must be the replica's name",
            )),
        }
    }

    /// The pod's JSON text with `fields` added to the object `term` (a slice of that text, one
    /// of its [`Listed`] terms), after its last field (P12).
    pub fn with_fields_added(
        &self,
        term: Checked<'a>,
        fields: &impl serde::Serialize,
    ) -> Result<Splice<'a>, Rejection> {
        let fields = checked_json(fields, &self.name)?;
        let inner = fields
            .strip_prefix('{')
            .and_then(|f| f.strip_suffix('}'))
            .unwrap_or_default();
        if inner.is_empty() {
            return Err(Rejection::Internal {
                pod: self.name.clone(),
                what: "no field to add to a constraint".into(),
            });
        }
        Ok(self.last_member(term, inner))
    }

    /// The pod's JSON text with `term` appended to the list at `path`; the list and the objects
    /// above it are created where they are absent or null. Every other byte is the pod's own.
    pub fn with_appended(&self, path: &[&str], term: &impl serde::Serialize) -> Result<Splice<'a>, Rejection> {
        let term = checked_json(term, &self.name)?;
        Ok(match self.slot(path)? {
            Slot::List(list) => self.last_member(list, &term),
            Slot::Missing {
                null: Some(null),
                depth,
                ..
            } => Splice {
                text: self.object.as_str(),
                at: raw::offset(&null, &self.object),
                replaced: null.len(),
                insert: nested(&path[depth + 1..], &term),
            },
            Slot::Missing {
                container,
                depth,
                null: None,
            } => {
                let field = format!("\"{}\":{}", path[depth], nested(&path[depth + 1..], &term));
                self.last_member(container, &field)
            }
        })
    }

    /// The pod's text with `member` (an element, or `"key":value`) added after the last member
    /// of `container`, a list or object of the pod.
    fn last_member(&self, container: Checked<'a>, member: &str) -> Splice<'a> {
        let comma = if raw::is_empty_container(container) { "" } else { "," };
        Splice {
            text: self.object.as_str(),
            at: raw::offset(&container, &self.object) + container.len() - 1,
            replaced: 0,
            insert: format!("{comma}{member}"),
        }
    }

    /// The terms of `list`, each with its text; every term must name its topologyKey.
    pub fn listed(&self, list: List) -> Result<Vec<Listed<'a>>, Rejection> {
        let path = list.path();
        let Slot::List(list) = self.slot(path)? else {
            return Ok(Vec::new());
        };
        let terms: Vec<&'a RawValue> =
            serde_json::from_str(list.as_str()).map_err(|e| malformed(self.name.clone(), e))?;
        let mut listed = Vec::with_capacity(terms.len());
        for (i, term) in terms.into_iter().enumerate() {
            let value: Value = serde_json::from_str(term.get()).map_err(|e| malformed(self.name.clone(), e))?;
            match value.get("topologyKey") {
                Some(Value::String(_)) => listed.push(Listed {
                    text: Checked::of(term),
                    value,
                }),
                other => {
                    let field = format!("{}[{i}].topologyKey", path.join("."));
                    return Err(self.bad_value(&field, other.unwrap_or(&Value::Null), "must be a string"));
                }
            }
        }
        Ok(listed)
    }

    /// Follows `path` down the pod: absent or null along the way is a missing slot; any other
    /// non-object on the way, or a non-list at the end, is an error naming the field.
    fn slot(&self, path: &[&str]) -> Result<Slot<'a>, Rejection> {
        let mut container = self.object;
        for (depth, step) in path.iter().enumerate() {
            let last = depth + 1 == path.len();
            let Some(value) = self.child(container, depth, step) else {
                return Ok(Slot::Missing {
                    container,
                    depth,
                    null: None,
                });
            };
            match raw::kind(value) {
                Kind::Null => {
                    return Ok(Slot::Missing {
                        container,
                        depth,
                        null: Some(value),
                    });
                }
                Kind::List if last => return Ok(Slot::List(value)),
                Kind::Object if !last => container = value,
                _ => {
                    let why = if last { "must be a list" } else { "must be an object" };
                    return Err(self.bad(&path[..=depth].join("."), &value, why));
                }
            }
        }
        Err(self.bad("(no field)", &self.object, "a rule named no list to append to"))
    }

    /// The field `step` at `depth` of a path: `spec` and its two lists were found with the pod.
    fn child(&self, container: Checked<'a>, depth: usize, step: &str) -> Option<Checked<'a>> {
        match (depth, step) {
            (0, "spec") => self.spec,
            (1, "topologySpreadConstraints") => self.spec_fields.topology_spread_constraints,
            (1, "affinity") => self.spec_fields.affinity,
            _ => {
                let [value] = raw::fields(container, [step]);
                value
            }
        }
    }

    fn required(&self, label: &'static str, value: Option<Cow<'a, str>>) -> Result<Cow<'a, str>, Rejection> {
        value.ok_or_else(|| Rejection::MissingLabel {
            pod: self.name.clone(),
            label,
        })
    }

    /// A label whose value goes into a selector: present and a valid label value.
    fn selector_value(&self, label: &'static str, value: Option<Cow<'a, str>>) -> Result<Cow<'a, str>, Rejection> {
        let value = self.required(label, value)?;
        match labels::check_value(&value) {
            Ok(()) if !value.is_empty() => Ok(value),
            Ok(()) => Err(self.bad_label(label, &quoted(&value), "must not be empty")),
            Err(why) => Err(self.bad_label(label, &quoted(&value), why)),
        }
    }

    fn bad(&self, field: &str, value: &str, why: &str) -> Rejection {
        Rejection::BadPod {
            pod: self.name.clone(),
            field: field.into(),
            value: shown_raw(value),
            why: why.into(),
        }
    }

    fn bad_value(&self, field: &str, value: &Value, why: &str) -> Rejection {
        Rejection::BadPod {
            pod: self.name.clone(),
            field: field.into(),
            value: shown(value),
            why: why.into(),
        }
    }

    fn bad_label(&self, label: &'static str, value: &str, why: &str) -> Rejection {
        Rejection::BadLabel {
            pod: self.name.clone(),
            label,
            value: value.into(),
            why: why.into(),
        }
    }
}

/// A term already in one of the pod's lists: its text, a slice of the pod's, and its value. Its
/// `topologyKey` is a string.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed<'a> {
    pub text: Checked<'a>,
    pub value: Value,
}

/// A JSON text with `insert` in place of `text[at..at + replaced]`, kept as pieces so that the
/// text is copied once, into the response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Splice<'a> {
    text: &'a str,
    at: usize,
    replaced: usize,
    insert: String,
}

impl Splice<'_> {
    pub fn len(&self) -> usize {
        self.text.len() - self.replaced + self.insert.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn write_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.text.as_bytes()[..self.at]);
        out.extend_from_slice(self.insert.as_bytes());
        out.extend_from_slice(&self.text.as_bytes()[self.at + self.replaced..]);
    }
}

/// `[term]`, wrapped in an object for each remaining step of the path.
fn nested(rest: &[&str], term: &str) -> String {
    match rest.split_first() {
        None => format!("[{term}]"),
        Some((step, rest)) => format!("{{\"{step}\":{}}}", nested(rest, term)),
    }
}

/// A term or fields the rules built, as JSON text. It cannot fail (strings and numbers only); if
/// it ever did, the pod is rejected with the reason rather than sent back as invalid JSON.
fn checked_json(value: &impl serde::Serialize, pod: &str) -> Result<String, Rejection> {
    serde_json::to_string(value).map_err(|e| Rejection::BadPod {
        pod: pod.to_owned(),
        field: "(the added term)".into(),
        value: String::new(),
        why: format!("cannot be written as JSON: {e}"),
    })
}

fn quoted(text: &str) -> String {
    shown(&Value::String(text.to_owned()))
}

fn shown_raw(value: &str) -> String {
    serde_json::from_str::<Value>(value)
        .map(|v| shown(&v))
        .unwrap_or_else(|_| value.to_owned())
}

/// The fields of an ownerReference that say whether it is the pod's controlling replica, as
/// text. Only an object is one: anything else fails, and the caller reads the list as a tree.
#[derive(Default)]
struct OwnerReference<'a> {
    api_version: Option<Checked<'a>>,
    kind: Option<Checked<'a>>,
    name: Option<Checked<'a>>,
    controller: Option<Checked<'a>>,
}

impl OwnerReference<'_> {
    fn is_replica(&self) -> bool {
        let (api_version, kind) = (self.api_version.and_then(raw::text), self.kind.and_then(raw::text));
        is_controlling_replica(
            api_version.as_deref().unwrap_or_default(),
            kind.as_deref().unwrap_or_default(),
            self.controller.map(Checked::as_str) == Some("true"),
        )
    }
}

impl<'de> serde::Deserialize<'de> for OwnerReference<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = OwnerReference<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an ownerReference object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut reference = OwnerReference::default();
                // A key with escapes fails (it cannot be borrowed): the list is read as a tree.
                while let Some(key) = map.next_key::<&'de str>()? {
                    let value = Some(Checked::of(map.next_value::<&'de RawValue>()?));
                    match key {
                        "apiVersion" => reference.api_version = value,
                        "kind" => reference.kind = value,
                        "name" => reference.name = value,
                        "controller" => reference.controller = value,
                        _ => {}
                    }
                }
                Ok(reference)
            }
        }
        deserializer.deserialize_map(Fields)
    }
}

/// A rejection of a pod read before its name is.
fn unnamed_bad(request_namespace: &str, field: &str, value: &str, why: &str) -> Rejection {
    Rejection::BadPod {
        pod: format!("{request_namespace}/(unnamed)"),
        field: field.into(),
        value: shown_raw(value),
        why: why.into(),
    }
}

fn malformed(pod: String, error: serde_json::Error) -> Rejection {
    Rejection::BadPod {
        pod,
        field: "object".into(),
        value: "(the pod's JSON)".into(),
        why: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(references: &str) -> Result<Option<String>, String> {
        let text = format!(r#"{{"metadata": {{"name": "p", "ownerReferences": {references}}}, "spec": {{}}}}"#);
        let object = serde_json::from_str::<&RawValue>(&text).map_err(|e| e.to_string())?;
        let pod = Pod::new(Some(Checked::of(object)), "ns").map_err(|e| e.to_string())?;
        pod.controller_replica().map_err(|e| e.to_string())
    }

    #[test]
    fn the_controlling_replica_is_read_as_a_full_parse_reads_it() {
        let replica = |fields: &str| format!(r#"[{{"kind": "Other", "controller": true}}, {{{fields}}}]"#);
        let ok = r#""apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "r", "controller": true"#;
        assert_eq!(owner(&replica(ok)), Ok(Some("r".into())));
        let escaped_key =
            r#""api\u0056ersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "r", "controller": true"#;
        assert_eq!(owner(&replica(escaped_key)), Ok(Some("r".into())));
        let escaped_value =
            r#""apiVersion": "ome.io\/v1beta1", "kind": "InferenceReplica", "name": "r\u0031", "controller": true"#;
        assert_eq!(owner(&replica(escaped_value)), Ok(Some("r1".into())));
        let not_controller =
            r#""apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "r", "controller": "true""#;
        assert_eq!(owner(&replica(not_controller)), Ok(None));
        assert_eq!(
            owner(r#"[["ome.io/v1beta1", "InferenceReplica", "r", true]]"#),
            Ok(None)
        );
        assert_eq!(owner("null"), Ok(None));
        assert_eq!(owner("[]"), Ok(None));
        assert_eq!(
            owner(r#""x""#),
            Err(r#"pod ns/p: metadata.ownerReferences is "x": must be a list"#.into())
        );
        let unnamed = r#""apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": "", "controller": true"#;
        assert_eq!(
            owner(&replica(unnamed)),
            Err(
                r#"pod ns/p: metadata.ownerReferences[InferenceReplica].name is "": must be the replica's name"#.into()
            )
        );
    }
}
