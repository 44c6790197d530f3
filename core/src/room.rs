//! Room for one more Instance: a surge migration starts the replacement before it drains the
//! source, so a target domain needs room for one more whole Instance. The model is the
//! scheduler's own resource fit, kept plain: a node can start as many more of the Instance's
//! pods as its `status.allocatable` minus the requests of the pods bound to it allows, in every
//! resource the pod requests (each pod also takes one of the node's `pods`). A node that reports
//! no allocatable (saved objects without status) has no known room. Amounts are read as the API
//! server reads them ([`crate::quantity`]) and rounded as kube-scheduler rounds them; one that
//! the API server would refuse is an error that names it ([`Unreadable`]).

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

use crate::pod::{Container, Pod};
use crate::quantity::{Quantity, QuantityError};

/// Amounts per resource name as kube-scheduler counts them (`Resource.Add` of
/// k8s.io/kubernetes/pkg/scheduler/framework/types.go), in thousandths: CPU in milli-CPUs
/// (`MilliValue`), every other resource in whole units (`Value`), each rounded up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources(BTreeMap<String, u128>);

/// The requests of the pods bound to each node, by node name.
pub type Requested = HashMap<String, Resources>;

/// A quantity the room cannot count: where it is (`Pod ns/name: spec.overhead.cpu`) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}: {reason}")]
pub struct Unreadable {
    pub at: String,
    pub reason: QuantityError,
}

impl Unreadable {
    /// The same, inside `outer`: a field (`spec.overhead.`) or an object (`Pod ns/name: `).
    #[must_use]
    pub fn within(mut self, outer: &str) -> Self {
        self.at.insert_str(0, outer);
        self
    }
}

/// Amounts per resource name, exact to the nano-unit: `PodRequests` (k8s.io/component-helpers)
/// sums a pod's quantities exactly, and kube-scheduler rounds only the pod's totals.
#[derive(Debug, Clone, Default)]
struct Exact(BTreeMap<String, Quantity>);

impl Exact {
    /// A JSON map of quantities (`requests`, `overhead`, `allocatable`); an unreadable one is
    /// named by its resource.
    fn of_json(quantities: &Value) -> Result<Self, Unreadable> {
        let amounts = quantities.as_object().into_iter().flatten();
        let read = amounts.map(|(name, value)| match amount(value) {
            Ok(quantity) => Ok((name.clone(), quantity)),
            Err(reason) => Err(Unreadable {
                at: name.clone(),
                reason,
            }),
        });
        read.collect::<Result<_, _>>().map(Self)
    }

    /// Each resource `with` its amount and `other`'s: their sum, or the larger of the two.
    fn merge(&mut self, other: &Exact, with: fn(Quantity, Quantity) -> Quantity) {
        for (name, amount) in &other.0 {
            let mine = self.0.entry(name.clone()).or_default();
            *mine = with(*mine, *amount);
        }
    }

    /// Rounded as kube-scheduler counts them; a zero left out (it holds nothing), so that equal
    /// amounts are equal maps.
    fn counted(self) -> Resources {
        let counted = self.0.into_iter().map(|(name, quantity)| {
            let amount = if name == "cpu" {
                quantity.milli_value()
            } else {
                quantity.value() * 1000
            };
            (name, amount.unsigned_abs())
        });
        Resources(counted.filter(|(_, amount)| *amount > 0).collect())
    }
}

/// A quantity in JSON, as the API server reads it (`Quantity.UnmarshalJSON`): a string, spaces
/// around it ignored, or a number; null is nothing.
fn amount(value: &Value) -> Result<Quantity, QuantityError> {
    match value {
        Value::String(text) => Quantity::amount(text.trim()),
        Value::Number(number) => Quantity::amount(&number.to_string()),
        Value::Null => Ok(Quantity::default()),
        other => Err(QuantityError::Malformed(other.to_string())),
    }
}

impl Resources {
    /// A JSON map of quantities (`allocatable`, `requests`).
    pub fn from_quantities(quantities: &Value) -> Result<Self, Unreadable> {
        Exact::of_json(quantities).map(Exact::counted)
    }

    /// What one pod requests of its node, as kube-scheduler counts it (`PodRequests` of
    /// k8s.io/component-helpers, from the spec): its containers' and sidecars' (init containers
    /// that restart `Always`) requests summed; of each resource at least what an init container
    /// takes while it runs, beside the sidecars started before it; its pod-level requests of CPU,
    /// memory and hugepages in place of its containers'; its RuntimeClass's overhead; and one of
    /// the node's pods. A training job's init container that holds every GPU of a node while it
    /// runs holds them for the scheduler as long as the pod is bound. Summed exactly, then
    /// rounded up once, as kube-scheduler rounds the pod's total.
    pub fn of_pod(pod: &Pod) -> Result<Self, Unreadable> {
        let spec = &pod.spec;
        let requests = |field: &str, i: usize, container: &Container| {
            let within = format!("spec.{field}[{i}].resources.requests.");
            Exact::of_json(&container.resources.requests).map_err(|e| e.within(&within))
        };
        let mut total = Exact::default();
        for (i, container) in spec.containers.iter().enumerate() {
            total.merge(&requests("containers", i, container)?, Quantity::saturating_add);
        }
        let (mut sidecars, mut init) = (Exact::default(), Exact::default());
        for (i, container) in spec.init_containers.iter().enumerate() {
            let mut running = requests("initContainers", i, container)?;
            if container.restart_policy.as_deref() == Some("Always") {
                total.merge(&running, Quantity::saturating_add);
                sidecars.merge(&running, Quantity::saturating_add);
                running = sidecars.clone();
            } else {
                running.merge(&sidecars, Quantity::saturating_add);
            }
            init.merge(&running, Ord::max);
        }
        total.merge(&init, Ord::max);
        let pod_level = Exact::of_json(&spec.resources.requests).map_err(|e| e.within("spec.resources.requests."))?;
        let pod_level = pod_level.0.into_iter().filter(|(name, _)| is_pod_level(name));
        total.0.extend(pod_level);
        let overhead = Exact::of_json(&spec.overhead).map_err(|e| e.within("spec.overhead."))?;
        total.merge(&overhead, Quantity::saturating_add);
        let mut counted = total.counted();
        // One of the node's `pods`, in thousandths.
        counted.add(&Self([("pods".to_owned(), 1000)].into()));
        Ok(counted)
    }

    pub fn add(&mut self, other: &Resources) {
        for (name, amount) in &other.0 {
            *self.0.entry(name.clone()).or_default() += amount;
        }
    }

    /// Takes `other` (added before) away again; a resource that comes to nothing goes, so that
    /// adding and taking away leaves the same amounts as never adding.
    pub fn take(&mut self, other: &Resources) {
        for (name, amount) in &other.0 {
            if let Some(left) = self.0.get_mut(name) {
                *left = left.saturating_sub(*amount);
                if *left == 0 {
                    self.0.remove(name);
                }
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many more pods that each request `pod` fit in `self` (allocatable) beside `used`.
    pub fn slots(&self, used: &Resources, pod: &Resources) -> usize {
        if self.0.is_empty() {
            return 0;
        }
        let amount = |of: &Resources, name: &str| of.0.get(name).copied().unwrap_or(0);
        let free = |name: &str| amount(self, name).saturating_sub(amount(used, name));
        let requested = pod.0.iter().filter(|(_, each)| **each > 0);
        let fits = requested.map(|(name, each)| usize::try_from(free(name) / each).unwrap_or(usize::MAX));
        fits.min().unwrap_or(0)
    }
}

/// The resources a pod's own `spec.resources` may request in place of its containers'
/// (Kubernetes' pod-level resources): CPU, memory and hugepages.
fn is_pod_level(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with("hugepages-")
}

/// The requests per node of the pods that hold room there: bound, and not finished. A pod with
/// a quantity the room cannot count is named (`Pod ns/name: spec...`).
pub fn requested<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> Result<Requested, Unreadable> {
    let mut requested = Requested::new();
    for pod in pods {
        let named = |e: Unreadable| e.within(&format!("Pod {}/{}: ", pod.namespace(), pod.name()));
        if let Some((node, requests)) = held(pod).map_err(named)? {
            requested.entry(node.to_owned()).or_default().add(&requests);
        }
    }
    Ok(requested)
}

/// The node a pod holds room on and what it holds there, if it holds any: bound, not finished.
pub fn held(pod: &Pod) -> Result<Option<(&str, Resources)>, Unreadable> {
    let node = pod.node().filter(|_| !pod.is_finished());
    node.map(|node| Resources::of_pod(pod).map(|requests| (node, requests)))
        .transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ome::typed;
    use serde_json::json;

    fn amounts(pairs: &[(&str, u128)]) -> BTreeMap<String, u128> {
        pairs
            .iter()
            .map(|(name, amount)| ((*name).to_owned(), *amount))
            .collect()
    }

    /// In thousandths, as kube-scheduler counts them: CPU rounded up to the milli-CPU, every
    /// other resource up to a whole unit; each read from JSON as the API server reads it.
    #[test]
    fn amounts_are_what_kube_scheduler_counts() {
        let cases = [
            (json!({"cpu": "500u"}), amounts(&[("cpu", 1)])),
            (json!({"cpu": "86000001u"}), amounts(&[("cpu", 86_001)])),
            (
                json!({"cpu": "1.5", "memory": "1.5"}),
                amounts(&[("cpu", 1_500), ("memory", 2_000)]),
            ),
            (
                json!({"memory": "30Gi"}),
                amounts(&[("memory", 30 * 1024 * 1024 * 1024 * 1000)]),
            ),
            (json!({"nvidia.com/gpu": "100m"}), amounts(&[("nvidia.com/gpu", 1_000)])),
            (
                json!({"cpu": "1e3", "pods": "110"}),
                amounts(&[("cpu", 1_000_000), ("pods", 110_000)]),
            ),
            // A YAML number; spaces around a string, which `UnmarshalJSON` trims; null and 0 hold nothing.
            (
                json!({"cpu": 2, "memory": " 1Ki ", "pods": null, "nvidia.com/gpu": "0"}),
                amounts(&[("cpu", 2_000), ("memory", 1_024_000)]),
            ),
        ];
        for (quantities, expected) in cases {
            assert_eq!(
                Resources::from_quantities(&quantities).map(|r| r.0),
                Ok(expected),
                "{quantities}"
            );
        }
    }

    /// A pod's quantities are summed exactly and rounded once, as kube-scheduler rounds the
    /// total of `PodRequests`: two containers of 500u CPU and 0.5 bytes take 1m and 1 byte.
    #[test]
    fn a_pods_requests_are_summed_before_they_are_rounded() {
        let half = json!({"resources": {"requests": {"cpu": "500u", "memory": "0.5"}}});
        let pod = json!({"spec": {"containers": [half, half]}});
        assert_eq!(
            Resources::of_pod(&typed(&pod)).map(|r| r.0),
            Ok(amounts(&[("cpu", 1), ("memory", 1_000), ("pods", 1_000)]))
        );
    }

    /// A training pod asking for 86000001u of CPU on a 96-core node leaves 9.999999 cores: no
    /// room for a 10-core engine pod, as when it asks for 86001m; 86 cores leave room for one.
    #[test]
    fn a_request_in_micro_cpus_holds_its_room() {
        let node = Resources::from_quantities(&json!({"cpu": "96", "pods": "110"})).expect("readable");
        let engine = json!({"spec": {"containers": [{"resources": {"requests": {"cpu": "10"}}}]}});
        let engine = Resources::of_pod(&typed(&engine)).expect("readable");
        for (cpu, slots) in [
            ("86000001u", 0),
            ("86001m", 0),
            ("86.000001", 0),
            ("86000000u", 1),
            ("86", 1),
        ] {
            let train = json!({"metadata": {"name": "train-0"},
                "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": cpu}}}]}});
            let used = requested([&typed(&train)]).expect("readable");
            assert_eq!(node.slots(&used["n1"], &engine), slots, "{cpu}");
        }
    }

    /// What the API server would refuse is an error naming the object, the field and the value,
    /// never a request counted as nothing.
    #[test]
    fn an_unreadable_quantity_is_named() {
        let bad = |at: &str, reason| Unreadable {
            at: at.to_owned(),
            reason,
        };
        let malformed = |text: &str| QuantityError::Malformed(text.to_owned());
        assert_eq!(
            Resources::from_quantities(&json!({"cpu": "ten"})),
            Err(bad("cpu", malformed("ten")))
        );
        assert_eq!(
            Resources::from_quantities(&json!({"cpu": true})),
            Err(bad("cpu", malformed("true")))
        );
        assert_eq!(
            Resources::from_quantities(&json!({"cpu": "-1"})),
            Err(bad("cpu", QuantityError::Negative("-1".into())))
        );
        assert_eq!(
            Resources::from_quantities(&json!({"memory": "5Xi"})),
            Err(bad("memory", malformed("5Xi")))
        );
        let pod = |field: &str, value: Value| {
            let mut pod = json!({"metadata": {"name": "train-0", "namespace": "batch"},
                "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "1"}}}]}});
            pod["spec"][field] = value;
            pod
        };
        let in_field = [
            (
                pod("containers", json!([{}, {"resources": {"requests": {"cpu": "500x"}}}])),
                "spec.containers[1].resources.requests.cpu",
            ),
            (
                pod("initContainers", json!([{"resources": {"requests": {"cpu": "500x"}}}])),
                "spec.initContainers[0].resources.requests.cpu",
            ),
            (
                pod("resources", json!({"requests": {"cpu": "500x"}})),
                "spec.resources.requests.cpu",
            ),
            (pod("overhead", json!({"cpu": "500x"})), "spec.overhead.cpu"),
        ];
        for (pod, at) in in_field {
            let at = format!("Pod batch/train-0: {at}");
            assert_eq!(requested([&typed(&pod)]), Err(bad(&at, malformed("500x"))), "{at}");
        }
        let overhead = pod("overhead", json!({"cpu": "500x"}));
        assert_eq!(
            requested([&typed(&overhead)]).map_err(|e| e.to_string()),
            Err("Pod batch/train-0: spec.overhead.cpu: \"500x\" is not a quantity: a number with an optional suffix (n, u, m, k, M, G, T, P, E, Ki to Ei) or exponent (e3, E-3)".into())
        );
    }

    /// The seed's node: room for one engine pod (1 GPU, 10 CPUs, 30 GiB).
    fn seed_pod() -> Value {
        json!({"spec": {"nodeName": "gpu-node-1", "containers": [
            {"resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi"}}}]}})
    }

    #[test]
    fn slots_are_the_fewest_pods_any_requested_resource_allows() {
        let node =
            Resources::from_quantities(&json!({"nvidia.com/gpu": "2", "cpu": "32", "memory": "64Gi", "pods": "110"}))
                .expect("readable");
        let pod = Resources::of_pod(&typed(&seed_pod())).expect("readable");
        // GPUs allow 2, CPUs 3, memory 2: two.
        assert_eq!(node.slots(&Resources::default(), &pod), 2);
        let used = &requested([&typed(&seed_pod())]).expect("readable")["gpu-node-1"];
        assert_eq!(node.slots(used, &pod), 1);
        let mut both = used.clone();
        both.add(used);
        assert_eq!(node.slots(&both, &pod), 0);
        // A resource the node does not have: no room; no allocatable known: no room.
        let cpu_only =
            Resources::from_quantities(&json!({"cpu": "32", "memory": "64Gi", "pods": "110"})).expect("readable");
        assert_eq!(cpu_only.slots(&Resources::default(), &pod), 0);
        assert_eq!(Resources::default().slots(&Resources::default(), &pod), 0);
        // A pod that requests nothing counts against the node's pods only.
        let bare = Resources::of_pod(&typed(&json!({"spec": {}}))).expect("readable");
        let few_pods = Resources::from_quantities(&json!({"pods": "3"})).expect("readable");
        assert_eq!(few_pods.slots(&Resources::default(), &bare), 3);
    }

    /// Init containers, sidecars, pod-level requests and overhead, as kube-scheduler counts
    /// them (k8s.io/component-helpers v0.35 `PodRequests`; the KEP of sidecar containers).
    #[test]
    fn a_pods_requests_are_what_kube_scheduler_counts() {
        let requests = |cpu: &str, gpus: &str| json!({"requests": {"cpu": cpu, "nvidia.com/gpu": gpus}});
        let expected = |quantities: Value| Resources::from_quantities(&quantities).expect("readable");
        // An init container that takes every GPU while it runs holds them: the larger of 8 and 4.
        let warm_up = json!({"spec": {"initContainers": [{"name": "warm-up", "resources": requests("1", "8")}],
            "containers": [{"name": "train", "resources": requests("2", "4")}]}});
        assert_eq!(
            Resources::of_pod(&typed(&warm_up)).expect("readable"),
            expected(json!({"cpu": "2", "nvidia.com/gpu": "8", "pods": "1"}))
        );
        // Sidecars add to the containers and run beside the init containers after them:
        // containers 100m + sidecars 50m + 30m = 180m; init-2 runs beside sidecar-1: 300m + 50m.
        let cpu = |cpu: &str| json!({"requests": {"cpu": cpu}});
        let sidecars = json!({"spec": {"initContainers": [
                {"name": "init-1", "resources": cpu("200m")},
                {"name": "sidecar-1", "restartPolicy": "Always", "resources": cpu("50m")},
                {"name": "init-2", "resources": cpu("300m")},
                {"name": "sidecar-2", "restartPolicy": "Always", "resources": cpu("30m")}],
            "containers": [{"name": "app", "resources": cpu("100m")}]}});
        assert_eq!(
            Resources::of_pod(&typed(&sidecars)).expect("readable"),
            expected(json!({"cpu": "350m", "pods": "1"}))
        );
        let sidecar_last = json!({"spec": {"initContainers": [
                {"name": "init-1", "resources": cpu("120m")},
                {"name": "sidecar-1", "restartPolicy": "Always", "resources": cpu("50m")}],
            "containers": [{"name": "app", "resources": cpu("100m")}]}});
        assert_eq!(
            Resources::of_pod(&typed(&sidecar_last)).expect("readable"),
            expected(json!({"cpu": "150m", "pods": "1"}))
        );
        // Pod-level requests replace the containers' CPU and memory, never their GPUs; the
        // RuntimeClass's overhead comes on top.
        let pod_level = json!({"spec": {"resources": {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "7"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "3", "memory": "1Gi", "nvidia.com/gpu": "1"}}},
                {"name": "b", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}],
            "overhead": {"cpu": "250m", "memory": "120Mi"}}});
        assert_eq!(
            Resources::of_pod(&typed(&pod_level)).expect("readable"),
            expected(
                json!({"cpu": "2250m", "memory": "4216Mi", "nvidia.com/gpu": "1", "ephemeral-storage": "1Gi", "pods": "1"})
            )
        );
    }

    #[test]
    fn finished_and_unbound_pods_hold_no_room() {
        let mut done = seed_pod();
        done["status"] = json!({"phase": "Succeeded"});
        let pending = json!({"spec": {"containers": []}});
        let requested = requested(&[typed(&seed_pod()), typed(&done), typed(&pending)]).expect("readable");
        assert_eq!(requested.len(), 1);
        assert_eq!(
            requested["gpu-node-1"],
            Resources::from_quantities(&json!({"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi", "pods": "1"}))
                .expect("readable")
        );
    }
}
