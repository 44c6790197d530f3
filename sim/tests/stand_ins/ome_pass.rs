use ome_spread_sim::stand_in::ome::{spec_differs, status_differs};
use serde_json::json;

#[test]
fn a_spec_differs_when_a_field_is_missing_or_one_the_service_dropped_stays() {
    let wanted = json!({"replicas": 2, "topologySpread": "Required"});
    assert!(!spec_differs(
        &json!({"replicas": 2, "topologySpread": "Required", "paused": true}),
        &wanted
    ));
    assert!(spec_differs(&json!({"replicas": 2}), &wanted));
    assert!(spec_differs(
        &json!({"replicas": 2, "topologySpread": "Required", "topologyKey": "rack"}),
        &wanted
    ));
}

#[test]
fn a_status_differs_by_its_fields_and_conditions_not_their_times() {
    let stored = json!({"replicas": 2, "conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "m",
        "lastTransitionTime": "2026-12-01T09:00:00Z"}]});
    let mut wanted = stored.clone();
    wanted["conditions"][0]["lastTransitionTime"] = json!("2026-12-01T10:00:00Z");
    assert!(!status_differs(&stored, &wanted));
    wanted["replicas"] = json!(3);
    assert!(status_differs(&stored, &wanted));
}
