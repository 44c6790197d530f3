//! Room for one more Instance: a surge migration starts the replacement before it
//! drains the source, so a target domain needs room for one more whole Instance. The model is
//! the scheduler's own resource fit, kept plain: a node can start as many more of the Instance's
//! pods as its `status.allocatable` minus the requests of the pods bound to it allows, in every
//! resource the pod requests (each pod also takes one of the node's `pods`). A node that reports
//! no allocatable (saved objects without status) has no known room.

use std::collections::{BTreeMap, HashMap};

use serde_json::Value;

/// Amounts per resource name, in thousandths (so that `500m` CPU and `30Gi` are both whole).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources(BTreeMap<String, u128>);

/// The requests of the pods bound to each node, by node name.
pub type Requested = HashMap<String, Resources>;

const PODS: &str = "pods";

impl Resources {
    /// Kubernetes quantities by resource name; an unreadable one is left out, and so is a zero
    /// (it holds nothing), so that equal amounts are equal maps.
    pub fn parsed<'a>(quantities: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let amounts = quantities.into_iter();
        Self(
            amounts
                .filter_map(|(name, q)| Some((name.to_owned(), quantity(q).filter(|q| *q > 0)?)))
                .collect(),
        )
    }

    /// A JSON map of quantities (`allocatable`, `requests`).
    pub fn from_quantities(quantities: &Value) -> Self {
        let amounts = quantities.as_object().into_iter().flatten();
        Self::parsed(amounts.filter_map(|(name, q)| Some((name.as_str(), q.as_str()?))))
    }

    /// What one pod requests of its node, as kube-scheduler counts it (`PodRequests` of
    /// k8s.io/component-helpers, from the spec): its containers' and sidecars' (init containers
    /// that restart `Always`) requests summed; of each resource at least what an init container
    /// takes while it runs, beside the sidecars started before it; its pod-level requests of CPU,
    /// memory and hugepages in place of its containers'; its RuntimeClass's overhead; and one of
    /// the node's pods. A training job's init container that holds every GPU of a node while it
    /// runs holds them for the scheduler as long as the pod is bound.
    pub fn of_pod(pod: &Value) -> Self {
        let spec = &pod["spec"];
        let requests = |container: &Value| Self::from_quantities(&container["resources"]["requests"]);
        let listed = |field: &str| spec[field].as_array().into_iter().flatten();
        let mut total = Self::default();
        for container in listed("containers") {
            total.add(&requests(container));
        }
        let (mut sidecars, mut init) = (Self::default(), Self::default());
        for container in listed("initContainers") {
            let mut running = requests(container);
            if container["restartPolicy"] == "Always" {
                total.add(&running);
                sidecars.add(&running);
                running = sidecars.clone();
            } else {
                running.add(&sidecars);
            }
            init.raise(&running);
        }
        total.raise(&init);
        let pod_level = spec["resources"]["requests"].as_object().into_iter().flatten();
        for (name, quantity) in pod_level.filter(|(name, _)| is_pod_level(name)) {
            total.0.remove(name);
            total.add(&Self::parsed(quantity.as_str().map(|q| (name.as_str(), q))));
        }
        total.add(&Self::from_quantities(&spec["overhead"]));
        total.add(&Self([(PODS.to_owned(), 1000)].into()));
        total
    }

    /// Each resource the larger of the two amounts.
    fn raise(&mut self, other: &Resources) {
        for (name, amount) in &other.0 {
            let mine = self.0.entry(name.clone()).or_default();
            *mine = (*mine).max(*amount);
        }
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
        pod.0
            .iter()
            .filter(|(_, amount)| **amount > 0)
            .map(|(name, amount)| {
                let free = self.0.get(name).copied().unwrap_or(0);
                let free = free.saturating_sub(used.0.get(name).copied().unwrap_or(0));
                usize::try_from(free / amount).unwrap_or(usize::MAX)
            })
            .min()
            .unwrap_or(0)
    }
}

/// The resources a pod's own `spec.resources` may request in place of its containers'
/// (Kubernetes' pod-level resources): CPU, memory and hugepages.
fn is_pod_level(name: &str) -> bool {
    matches!(name, "cpu" | "memory") || name.starts_with("hugepages-")
}

/// The requests per node of the pods that hold room there: bound, and not finished.
pub fn requested<'a>(pods: impl IntoIterator<Item = &'a Value>) -> Requested {
    let mut requested = Requested::new();
    for (node, requests) in pods.into_iter().filter_map(held) {
        requested.entry(node.to_owned()).or_default().add(&requests);
    }
    requested
}

/// The node a pod holds room on and what it holds there, if it holds any: bound, not finished.
pub fn held(pod: &Value) -> Option<(&str, Resources)> {
    let finished = matches!(pod["status"]["phase"].as_str(), Some("Succeeded" | "Failed"));
    let node = pod["spec"]["nodeName"].as_str().filter(|_| !finished)?;
    Some((node, Resources::of_pod(pod)))
}

/// A Kubernetes quantity in thousandths: `8`, `500m`, `30Gi`, `1.5G`, `2e3`. None if unreadable.
pub fn quantity(text: &str) -> Option<u128> {
    const SUFFIXES: [(&str, f64); 14] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("m", 1e-3),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
        ("", 1.0),
    ];
    let (number, multiplier) = SUFFIXES
        .iter()
        .find_map(|(suffix, multiplier)| Some((text.strip_suffix(suffix)?, multiplier)))?;
    let value: f64 = number.parse().ok()?;
    // Quantities are never negative; a float is exact enough for room counted in whole pods.
    (value.is_finite() && value >= 0.0).then(|| (value * multiplier * 1000.0).round() as u128)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities_in_thousandths() {
        let cases = [
            ("8", Some(8_000)),
            ("500m", Some(500)),
            ("10", Some(10_000)),
            ("30Gi", Some(30 * 1024 * 1024 * 1024 * 1000)),
            ("1.5k", Some(1_500_000)),
            ("2e3", Some(2_000_000)),
            ("1Mi", Some(1_048_576_000)),
            ("-1", None),
            ("ten", None),
            ("5Xi", None),
            ("2E", Some(2_000_000_000_000_000_000_000)),
        ];
        for (text, expected) in cases {
            assert_eq!(quantity(text), expected, "{text}");
        }
    }

    /// The seed's node: room for one engine pod (1 GPU, 10 CPUs, 30 GiB).
    fn seed_pod() -> Value {
        json!({"spec": {"nodeName": "gpu-node-1", "containers": [
            {"resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi"}}}]}})
    }

    #[test]
    fn slots_are_the_fewest_pods_any_requested_resource_allows() {
        let node =
            Resources::from_quantities(&json!({"nvidia.com/gpu": "2", "cpu": "32", "memory": "64Gi", "pods": "110"}));
        let pod = Resources::of_pod(&seed_pod());
        // GPUs allow 2, CPUs 3, memory 2: two.
        assert_eq!(node.slots(&Resources::default(), &pod), 2);
        let used = &requested([&seed_pod()])["gpu-node-1"];
        assert_eq!(node.slots(used, &pod), 1);
        let mut both = used.clone();
        both.add(used);
        assert_eq!(node.slots(&both, &pod), 0);
        // A resource the node does not have: no room; no allocatable known: no room.
        let cpu_only = Resources::from_quantities(&json!({"cpu": "32", "memory": "64Gi", "pods": "110"}));
        assert_eq!(cpu_only.slots(&Resources::default(), &pod), 0);
        assert_eq!(Resources::default().slots(&Resources::default(), &pod), 0);
        // A pod that requests nothing counts against the node's pods only.
        let bare = Resources::of_pod(&json!({"spec": {}}));
        let few_pods = Resources::from_quantities(&json!({"pods": "3"}));
        assert_eq!(few_pods.slots(&Resources::default(), &bare), 3);
    }

    /// Init containers, sidecars, pod-level requests and overhead, as kube-scheduler counts
    /// them (k8s.io/component-helpers v0.35 `PodRequests`; the KEP of sidecar containers).
    #[test]
    fn a_pods_requests_are_what_kube_scheduler_counts() {
        let requests = |cpu: &str, gpus: &str| json!({"requests": {"cpu": cpu, "nvidia.com/gpu": gpus}});
        let expected = |quantities: Value| Resources::from_quantities(&quantities);
        // An init container that takes every GPU while it runs holds them: the larger of 8 and 4.
        let warm_up = json!({"spec": {"initContainers": [{"name": "warm-up", "resources": requests("1", "8")}],
            "containers": [{"name": "train", "resources": requests("2", "4")}]}});
        assert_eq!(
            Resources::of_pod(&warm_up),
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
            Resources::of_pod(&sidecars),
            expected(json!({"cpu": "350m", "pods": "1"}))
        );
        let sidecar_last = json!({"spec": {"initContainers": [
                {"name": "init-1", "resources": cpu("120m")},
                {"name": "sidecar-1", "restartPolicy": "Always", "resources": cpu("50m")}],
            "containers": [{"name": "app", "resources": cpu("100m")}]}});
        assert_eq!(
            Resources::of_pod(&sidecar_last),
            expected(json!({"cpu": "150m", "pods": "1"}))
        );
        // Pod-level requests replace the containers' CPU and memory, never their GPUs; the
        // RuntimeClass's overhead comes on top.
        let pod_level = json!({"spec": {"resources": {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": "7"}},
            "containers": [{"name": "a", "resources": {"requests": {"cpu": "3", "memory": "1Gi", "nvidia.com/gpu": "1"}}},
                {"name": "b", "resources": {"requests": {"ephemeral-storage": "1Gi"}}}],
            "overhead": {"cpu": "250m", "memory": "120Mi"}}});
        assert_eq!(
            Resources::of_pod(&pod_level),
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
        let requested = requested([&seed_pod(), &done, &pending]);
        assert_eq!(requested.len(), 1);
        assert_eq!(
            requested["gpu-node-1"],
            Resources::from_quantities(&json!({"nvidia.com/gpu": "1", "cpu": "10", "memory": "30Gi", "pods": "1"}))
        );
    }
}
