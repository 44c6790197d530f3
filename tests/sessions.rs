//! The kwctl replay sessions under `tests/data/sessions` answer `get_resource` as the fixtures do:
//! this test writes them from the replicas (with `BLESS=1`) and fails when they drift.

mod support;

use serde_json::Value;
use support::{data_dir, fixture};

fn exchange(name: &str, namespace: &str, response: &str) -> String {
    format!(
        "---\n- type: Exchange\n  request: |\n    !KubernetesGetResource\n    api_version: ome.io/v1beta1\n    kind: InferenceReplica\n    name: {name}\n    namespace: {namespace}\n    disable_cache: false\n  response:\n{response}"
    )
}

fn success(replica: &Value) -> String {
    let payload = serde_json::to_string(replica).expect("json").replace('\'', "''");
    exchange(
        replica["metadata"]["name"].as_str().expect("name"),
        replica["metadata"]["namespace"].as_str().expect("namespace"),
        &format!("    type: Success\n    payload: '{payload}'\n"),
    )
}

fn expected_sessions() -> Vec<(String, String)> {
    let mut sessions: Vec<(String, String)> = ["qwen3-0-6b-engine", "qwen3-8b-engine", "deepseek-v3-engine"]
        .iter()
        .map(|name| {
            (
                format!("{name}.yml"),
                success(&fixture(&format!("replicas/{name}.json"))),
            )
        })
        .collect();
    let not_found =
        "Cannot find ome.io/v1beta1/InferenceReplica named 'qwen3-0-6b-engine' inside of namespace 'spread-demo'";
    sessions.push((
        "missing-replica.yml".into(),
        exchange(
            "qwen3-0-6b-engine",
            "spread-demo",
            &format!("    type: Error\n    message: \"{not_found}\"\n"),
        ),
    ));
    sessions
}

#[test]
fn replay_sessions_match_the_fixtures() {
    let dir = data_dir().join("sessions");
    for (file, expected) in expected_sessions() {
        let path = dir.join(&file);
        if std::env::var_os("BLESS").is_some() {
            std::fs::write(&path, &expected).expect("write session");
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            committed, expected,
            "{file} is stale: run `BLESS=1 cargo test --test sessions`"
        );
        let parsed: Value = serde_saphyr::from_str(&committed).expect("a session is YAML");
        assert_eq!(parsed.as_array().map(Vec::len), Some(1), "{file}");
    }
}
