//! The page's menu: OME's how-to's scenarios for the policy (the replicas and pods `make demo` runs)
//! and for the diagnosis (the objects `explain`'s tests read, one per reason), as they are
//! saved in the repository.

use serde_json::{Value, json};

macro_rules! saved {
    ($path:expr) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../", $path))
    };
}

/// (title, replica JSON, Pod CREATE request JSON)
const ADMIT: [(&str, &str, &str); 4] = [
    (
        "OME's how-to example: Instance 0 of two, Required across zones",
        saved!("tests/data/replicas/qwen3-0-6b-engine.json"),
        saved!("tests/data/requests/qwen3-0-6b-engine-0-default-0.json"),
    ),
    (
        "A leader of a multi-node Instance",
        saved!("tests/data/replicas/deepseek-v3-engine.json"),
        saved!("tests/data/requests/deepseek-v3-engine-0-leader-0.json"),
    ),
    (
        "A worker: kept inside its leader's NVLink rack",
        saved!("tests/data/replicas/deepseek-v3-engine.json"),
        saved!("tests/data/requests/deepseek-v3-engine-0-worker-0.json"),
    ),
    (
        "Preferred: the spread as a preference",
        saved!("tests/data/replicas/qwen3-8b-engine.json"),
        saved!("tests/data/requests/qwen3-8b-engine-0-default-0.json"),
    ),
];

/// One reason's namespace, as `explain`'s tests read it.
macro_rules! reason {
    ($reason:literal) => {
        (
            $reason,
            saved!(concat!("controller/tests/data/reasons/", $reason, ".yaml")),
        )
    };
}

/// (title, objects as `kubectl get -o yaml` saves them); the first is OME's how-to example
const DIAGNOSE: [(&str, &str); 13] = [
    ("OME's how-to example", saved!("controller/tests/data/seed.yaml")),
    reason!("Satisfied"),
    reason!("SettingsNotProjected"),
    reason!("InstanceSplit"),
    reason!("NotRequested"),
    reason!("NoKey"),
    reason!("PreferredUnderOMEScheduler"),
    reason!("PodsPredateChange"),
    reason!("ConflictingConstraint"),
    reason!("MissingLabel"),
    reason!("DomainsFull"),
    reason!("SingleDomain"),
    reason!("Skewed"),
];

/// The menu, in order: OME's how-to example (a pod, and the namespace after both Instances ran),
/// then the other pods, then one namespace per reason. Each scenario fills the panes it has.
pub fn scenarios() -> Value {
    let yaml = |json: &str, pointer: &str| -> String {
        let value: Value = serde_json::from_str(json).unwrap_or_default();
        let value = value.pointer(pointer).unwrap_or(&Value::Null);
        serde_saphyr::to_string(value).unwrap_or_default()
    };
    let admit = |(_, replica, request): &(&str, &str, &str)| json!({ "objects": yaml(replica, ""), "pod": yaml(request, "/request/object"), "settings": "" });
    let diagnose = |objects: &str| json!({ "objects": objects, "settings": "" });
    let mut menu = vec![json!({
        "title": ADMIT[0].0,
        "group": "OME's how-to",
        "admit": admit(&ADMIT[0]),
        "diagnose": diagnose(DIAGNOSE[0].1),
    })];
    menu.extend(
        ADMIT[1..]
            .iter()
            .map(|scenario| json!({ "title": scenario.0, "group": "A pod at CREATE", "admit": admit(scenario) })),
    );
    menu.extend(DIAGNOSE[1..].iter().map(|(title, objects)| {
        json!({ "title": title, "group": "A reason of the diagnosis", "diagnose": diagnose(objects) })
    }));
    Value::Array(menu)
}
