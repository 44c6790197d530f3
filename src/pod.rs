//! What the rules read of a pod, straight from its JSON: labels, the controller owner, and the
//! topology keys of the two lists a rule may append to. Nothing else is looked at.

use serde_json::{Map, Value};

use crate::labels;
use crate::rejection::{Rejection, shown};

pub const SPREAD_CONSTRAINTS: [&str; 2] = ["spec", "topologySpreadConstraints"];
pub const REQUIRED_POD_AFFINITY: [&str; 4] = [
    "spec",
    "affinity",
    "podAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
];

pub struct Pod<'a> {
    /// `<namespace>/<name>` for messages (`<generateName>*` before the API server names it).
    pub name: String,
    object: &'a Value,
    labels: Option<&'a Map<String, Value>>,
}

/// A pod's place in its Instance, from its OME labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Runner {
    /// The only pod of a single-pod Instance.
    Default,
    Leader,
    Worker {
        instance_index: String,
    },
}

impl Runner {
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::Leader => "leader",
            Self::Worker { .. } => "worker",
        }
    }
}

/// The labels that name the pod's Instance: its InferenceService, component and runner (P11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstanceLabels<'a> {
    pub service: &'a str,
    pub component: &'a str,
    pub runner: Runner,
}

impl<'a> Pod<'a> {
    pub fn new(object: &'a Value, namespace: &str) -> Result<Self, Rejection> {
        let metadata = object.get("metadata");
        let text = |field: &str| {
            metadata
                .and_then(|m| m.get(field))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let name = match (text("name"), text("generateName")) {
            ("", "") => format!("{namespace}/(unnamed)"),
            ("", prefix) => format!("{namespace}/{prefix}*"),
            (name, _) => format!("{namespace}/{name}"),
        };
        let mut pod = Self {
            name,
            object,
            labels: None,
        };
        if !object.is_object() {
            return Err(pod.bad("object", object, "must be a Pod object"));
        }
        pod.labels = match metadata {
            None | Some(Value::Null) => None,
            Some(Value::Object(metadata)) => match metadata.get("labels") {
                None | Some(Value::Null) => None,
                Some(Value::Object(labels)) => Some(labels),
                Some(other) => return Err(pod.bad("metadata.labels", other, "must be an object")),
            },
            Some(other) => return Err(pod.bad("metadata", other, "must be an object")),
        };
        Ok(pod)
    }

    /// A label's value; a label that is not a string is an error, not a miss.
    pub fn label(&self, label: &'static str) -> Result<Option<&'a str>, Rejection> {
        match self.labels.and_then(|labels| labels.get(label)) {
            None => Ok(None),
            Some(Value::String(value)) => Ok(Some(value)),
            Some(other) => Err(self.bad_label(label, other, "must be a string")),
        }
    }

    /// P2: `ome.io/managed-by: OMENative` is what makes a pod OMENative.
    pub fn is_ome_native(&self) -> Result<bool, Rejection> {
        Ok(self.label(labels::MANAGED_BY)? == Some(labels::OME_NATIVE))
    }

    /// P11: the labels a rule needs, present and well formed.
    pub fn instance_labels(&self) -> Result<InstanceLabels<'a>, Rejection> {
        let runner = match self.required_label(labels::RUNNER)? {
            "default" => Runner::Default,
            "leader" => Runner::Leader,
            "worker" => {
                let index = self.required_label(labels::INSTANCE_INDEX)?;
                if index.is_empty() || index.len() > 63 || !index.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(self.bad_label(labels::INSTANCE_INDEX, &index.into(), "must be a whole number"));
                }
                Runner::Worker {
                    instance_index: index.to_owned(),
                }
            }
            other => {
                return Err(self.bad_label(labels::RUNNER, &other.into(), "must be default, leader or worker"));
            }
        };
        Ok(InstanceLabels {
            service: self.label_value(labels::INFERENCE_SERVICE)?,
            component: self.label_value(labels::COMPONENT)?,
            runner,
        })
    }

    /// The name of the InferenceReplica that controls this pod, if an ownerReference says so (P3).
    pub fn controller_replica(&self) -> Result<Option<&'a str>, Rejection> {
        let references = match self.object.pointer("/metadata/ownerReferences") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(references)) => references,
            Some(other) => return Err(self.bad("metadata.ownerReferences", other, "must be a list")),
        };
        let is_replica = |r: &&Value| {
            r.get("controller") == Some(&Value::Bool(true))
                && r.get("apiVersion").and_then(Value::as_str) == Some("ome.io/v1beta1")
                && r.get("kind").and_then(Value::as_str) == Some("InferenceReplica")
        };
        match references.iter().find(is_replica).map(|r| r.get("name")) {
            None => Ok(None),
            Some(Some(Value::String(name))) if !name.is_empty() => Ok(Some(name)),
            Some(other) => Err(self.bad(
                "metadata.ownerReferences[InferenceReplica].name",
                other.unwrap_or(&Value::Null),
                "must be the replica's name",
            )),
        }
    }

    /// P6: does a topology spread constraint of the pod already use `key`?
    pub fn has_spread_constraint_on(&self, key: &str) -> Result<bool, Rejection> {
        self.any_term_on(&SPREAD_CONSTRAINTS, key)
    }

    /// P9: does a required pod-affinity term of the pod already use `key`?
    pub fn has_required_pod_affinity_on(&self, key: &str) -> Result<bool, Rejection> {
        self.any_term_on(&REQUIRED_POD_AFFINITY, key)
    }

    fn any_term_on(&self, path: &[&str], key: &str) -> Result<bool, Rejection> {
        let Some(terms) = self.list_at(path)? else {
            return Ok(false);
        };
        for (i, term) in terms.iter().enumerate() {
            match term.get("topologyKey") {
                Some(Value::String(k)) if k == key => return Ok(true),
                Some(Value::String(_)) => {}
                _ => {
                    let field = format!("{}[{i}].topologyKey", path.join("."));
                    return Err(self.bad(
                        &field,
                        term.get("topologyKey").unwrap_or(&Value::Null),
                        "must be a string",
                    ));
                }
            }
        }
        Ok(false)
    }

    /// The list at `path`: absent or null along the way is no list; any other non-object on the
    /// way, or a non-list at the end, is an error naming the field.
    fn list_at(&self, path: &[&str]) -> Result<Option<&'a Vec<Value>>, Rejection> {
        let mut at = self.object;
        for (depth, step) in path.iter().enumerate() {
            let field = || path[..=depth].join(".");
            match at.get(step) {
                None | Some(Value::Null) => return Ok(None),
                Some(Value::Array(list)) if depth == path.len() - 1 => return Ok(Some(list)),
                Some(next @ Value::Object(_)) if depth < path.len() - 1 => at = next,
                Some(other) => {
                    let expected = if depth == path.len() - 1 {
                        "must be a list"
                    } else {
                        "must be an object"
                    };
                    return Err(self.bad(&field(), other, expected));
                }
            }
        }
        Ok(None)
    }

    fn required_label(&self, label: &'static str) -> Result<&'a str, Rejection> {
        self.label(label)?.ok_or_else(|| Rejection::MissingLabel {
            pod: self.name.clone(),
            label,
        })
    }

    /// A label whose value goes into a selector: present and a valid label value.
    fn label_value(&self, label: &'static str) -> Result<&'a str, Rejection> {
        let value = self.required_label(label)?;
        match labels::check_value(value) {
            Ok(()) if !value.is_empty() => Ok(value),
            Ok(()) => Err(self.bad_label(label, &value.into(), "must not be empty")),
            Err(why) => Err(self.bad_label(label, &value.into(), why)),
        }
    }

    fn bad(&self, field: &str, value: &Value, why: &str) -> Rejection {
        Rejection::BadPod {
            pod: self.name.clone(),
            field: field.into(),
            value: shown(value),
            why: why.into(),
        }
    }

    fn bad_label(&self, label: &'static str, value: &Value, why: &str) -> Rejection {
        Rejection::BadLabel {
            pod: self.name.clone(),
            label,
            value: shown(value),
            why: why.into(),
        }
    }
}

/// Appends `term` to the list at `path`, creating the list and the objects above it where they
/// are absent or null. The pod was read through [`Pod`] first, so the path's types are known good.
pub fn append(object: &mut Value, path: &[&str], term: Value) -> Result<(), String> {
    let (last, parents) = path.split_last().ok_or("empty path")?;
    let mut at = object;
    for step in parents {
        let fields = at
            .as_object_mut()
            .ok_or_else(|| format!("{step}'s parent is not an object"))?;
        let next = fields.entry(*step).or_insert(Value::Null);
        if next.is_null() {
            *next = Value::Object(Map::new());
        }
        at = next;
    }
    let fields = at
        .as_object_mut()
        .ok_or_else(|| format!("{last}'s parent is not an object"))?;
    let list = fields.entry(*last).or_insert(Value::Null);
    if list.is_null() {
        *list = Value::Array(Vec::new());
    }
    list.as_array_mut()
        .ok_or_else(|| format!("{last} is not a list"))?
        .push(term);
    Ok(())
}
