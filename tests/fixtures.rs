//! Every case of the rule table, written out under `tests/data/cases/<case>/` for `kwctl run`:
//! `request.json` (an AdmissionReview), `settings.json`, `session.yml` (the cluster's answer to
//! `get_resource`, for `--replay-host-capabilities-interactions`) and `response.json` (the exact
//! ValidationResponse). `BLESS=1 cargo test --test fixtures` rewrites them; this test fails when
//! they drift from the table.

mod cases;

use cases::Case;
use ome_spread_sim::policy::data_dir;
use serde_json::{Value, json};

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).expect("json") + "\n"
}

/// A kwctl replay session holding the one `get_resource` exchange the case makes, or none: then
/// kwctl needs no cluster, and fails the case if the policy calls the host after all.
fn session(case: &Case) -> String {
    let Some(name) = case.reads else {
        return "---\n[]\n".into();
    };
    let request = json!({"api_version": "ome.io/v1beta1", "kind": "InferenceReplica", "name": name, "namespace": "spread-demo", "disable_cache": false});
    let response = match case.cluster.answer(request.to_string().as_bytes()) {
        Ok(payload) => {
            let payload = String::from_utf8_lossy(&payload).replace('\'', "''");
            format!("    type: Success\n    payload: '{payload}'\n")
        }
        Err(message) => format!(
            "    type: Error\n    message: {}\n",
            serde_json::to_string(&message).expect("json")
        ),
    };
    format!(
        "---\n- type: Exchange\n  request: |\n    !KubernetesGetResource\n    api_version: ome.io/v1beta1\n    kind: InferenceReplica\n    name: {name}\n    namespace: spread-demo\n    disable_cache: false\n  response:\n{response}"
    )
}

#[test]
fn case_fixtures_match_the_rule_table() {
    let bless = std::env::var_os("BLESS").is_some();
    let root = data_dir().join("cases");
    let mut stale = Vec::new();
    for case in cases::all() {
        let dir = root.join(case.name);
        let session = session(&case);
        let parsed: Value = serde_saphyr::from_str(&session).expect("a session is YAML");
        let exchanges = usize::from(case.reads.is_some());
        assert_eq!(parsed.as_array().map(Vec::len), Some(exchanges), "{}", case.name);
        let files = [
            ("request.json", pretty(&case.review)),
            ("settings.json", pretty(&case.settings)),
            ("response.json", pretty(&cases::expected_response(&case))),
            ("session.yml", session),
        ];
        if bless {
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("case dir");
        }
        for (file, expected) in files {
            let path = dir.join(file);
            if bless {
                std::fs::write(&path, &expected).expect("write");
            }
            if std::fs::read_to_string(&path).ok().as_deref() != Some(expected.as_str()) {
                stale.push(format!("{}/{file}", case.name));
            }
        }
    }
    let on_disk = std::fs::read_dir(&root).map(|d| d.count()).unwrap_or(0);
    assert_eq!(
        on_disk,
        cases::all().len(),
        "tests/data/cases holds a directory per case, no more"
    );
    assert!(
        stale.is_empty(),
        "stale fixtures (run `BLESS=1 cargo test --test fixtures`): {stale:?}"
    );
}
