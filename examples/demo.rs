//! `make demo`: builds policy.wasm, runs it in wasmtime through waPC as the policy-server does,
//! on OME's how-to's scenarios, and prints what each pod comes out with, in the columns of Step 2
//! of OME's how-to (plus, for workers, the pod affinity that keeps them in their leader's domain).

use ome_spread_core::columns;
use ome_spread_sim::policy::wasm::{Wasm, build_policy};
use ome_spread_sim::policy::{Cluster, Policy, fixture, replica, validation_request};
use serde_json::{Value, json};

struct Scenario {
    title: &'static str,
    replica: &'static str,
    pods: &'static [&'static str],
}

const SCENARIOS: &[Scenario] = &[
    Scenario {
        title: "OME's how-to example: two single-pod Instances, Required, spread across zones",
        replica: "qwen3-0-6b-engine",
        pods: &[
            "requests/qwen3-0-6b-engine-0-default-0",
            "requests/qwen3-0-6b-engine-1-default-0",
        ],
    },
    Scenario {
        title: "A leader and workers: Instances across zones, each Instance inside one NVLink rack",
        replica: "deepseek-v3-engine",
        pods: &[
            "requests/deepseek-v3-engine-0-leader-0",
            "requests/deepseek-v3-engine-0-worker-0",
        ],
    },
    Scenario {
        title: "Pods OME rendered itself: its constraint kept, and a repaired worker kept on its Instance's older rack key",
        replica: "deepseek-v3-engine",
        pods: &[
            "cases/p12_completion_finds_omes_constraint_after_an_operators/request",
            "cases/p9_ome_term_on_the_instances_older_key_is_kept/request",
        ],
    },
    Scenario {
        title: "Preferred: the spread as a preference",
        replica: "qwen3-8b-engine",
        pods: &["requests/qwen3-8b-engine-0-default-0"],
    },
    Scenario {
        title: "A pod of another workload: no host call, no change",
        replica: "",
        pods: &["requests/other-workload"],
    },
];

fn main() {
    let wasm = build_policy();
    let shown = wasm.strip_prefix(env!("CARGO_MANIFEST_DIR")).unwrap_or(wasm);
    let size = std::fs::metadata(wasm).map(|m| m.len()).unwrap_or(0);
    println!(
        "policy: {} ({size} bytes), run in wasmtime through waPC",
        shown.display()
    );
    let cluster = Cluster::with_fixtures();
    for scenario in SCENARIOS {
        println!("\n## {}\n", scenario.title);
        if !scenario.replica.is_empty() {
            let replica = replica(scenario.replica);
            let field = |name: &str| replica["spec"][name].as_str().unwrap_or("<none>").to_owned();
            let name = replica["metadata"]["name"].as_str().unwrap_or_default().to_owned();
            let fields = ["topologySpread", "topologySpreadKey", "topologyKey"].map(field);
            let header = row(["NAME", "SPREAD", "SPREAD-KEY", "TOPOLOGY-KEY"]);
            println!("{}", columns::table(&[header, [vec![name], fields.to_vec()].concat()]));
        }
        let mut rows = vec![row(["NAME", "SPREAD-KEY", "WHEN", "AFFINITY-KEY", "LEADER"])];
        for pod in scenario.pods {
            let review = fixture(&format!("{pod}.json"));
            let response = Wasm.validate(&validation_request(&review, json!({})), &cluster);
            rows.push(pod_row(&review["request"]["object"], &response));
        }
        print!("{}", columns::table(&rows));
    }
}

fn row<const N: usize>(cells: [&str; N]) -> Vec<String> {
    cells.map(String::from).to_vec()
}

/// The pod as admitted: the mutated object, or the one that came in when it passed unchanged.
fn pod_row(submitted: &Value, response: &Value) -> Vec<String> {
    let metadata = &submitted["metadata"];
    let name = metadata["name"]
        .as_str()
        .or(metadata["generateName"].as_str())
        .unwrap_or_default();
    if response["accepted"] != true {
        let message = response["message"].as_str().unwrap_or_default();
        return row([name, &format!("REJECTED: {message}"), "", "", ""]);
    }
    let pod = response.get("mutated_object").unwrap_or(submitted);
    let list = |list: &Value| list.as_array().cloned().unwrap_or_default();
    let constraints = list(&pod["spec"]["topologySpreadConstraints"]);
    let terms = list(&pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]);
    let field = |name: &'static str| move |item: &Value| item[name].as_str().unwrap_or_default().to_owned();
    let leader = |term: &Value| {
        let labels = term["labelSelector"]["matchLabels"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let labels = labels
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()));
        labels.collect::<Vec<_>>().join(",")
    };
    vec![
        name.to_owned(),
        columns::joined(&constraints, field("topologyKey")),
        columns::joined(&constraints, field("whenUnsatisfiable")),
        columns::joined(&terms, field("topologyKey")),
        columns::joined(&terms, leader),
    ]
}
