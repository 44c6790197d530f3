use ome_spread_sim::stand_in::scheduler::place;
use ome_spread_sim::support::objects::{Node, Pod};
use serde_json::{Value, json};

const ZONE: &str = "topology.kubernetes.io/zone";

fn node(name: &str, zone: &str, gpus: &str, spec: Value) -> Value {
    Node::named(name)
        .label(ZONE, zone)
        .label("gpu", "true")
        .spec(spec)
        .allocatable(json!({"nvidia.com/gpu": gpus, "cpu": "32", "pods": "110"}))
        .json()
}

fn pod(name: &str, labels: Value, node: Option<&str>, extra: Value) -> Value {
    let mut pod = Pod::named("ns", name)
        .labels(labels)
        .with("nodeSelector", json!({"gpu": "true"}))
        .container("engine", json!({"nvidia.com/gpu": "1", "cpu": "10"}));
    if let Some(node) = node {
        pod = pod.on(node);
    }
    for (field, value) in extra.as_object().into_iter().flatten() {
        pod = pod.with(field, value.clone());
    }
    pod.json()
}

fn spread(when: &str) -> Value {
    json!({"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": when,
        "labelSelector": {"matchLabels": {"app": "a"}}}]})
}

#[test]
fn filters_say_why_each_node_is_turned_down() {
    let nodes = [
        node("a1", "a", "1", json!({"unschedulable": true})),
        node(
            "b1",
            "b",
            "1",
            json!({"taints": [{"key": "dedicated", "value": "batch", "effect": "NoSchedule"}]}),
        ),
        node("c1", "c", "1", json!({})),
        node("c2", "c", "0", json!({})),
    ];
    let placed = [pod("x", json!({}), Some("c1"), json!({}))];
    let new = pod("new", json!({}), None, json!({}));
    assert_eq!(
        place(&new, &nodes, &placed, &[]),
        Err("0/4 nodes are available: 2 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint {dedicated: batch}, 1 node(s) were unschedulable.".into())
    );
    let tolerant = pod(
        "t",
        json!({}),
        None,
        json!({"tolerations": [{"key": "dedicated", "operator": "Exists"}]}),
    );
    assert_eq!(place(&tolerant, &nodes, &placed, &[]), Ok("b1".into()));
    let numbered = |terms: Value| {
        pod(
            "n",
            json!({}),
            None,
            json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}),
        )
    };
    let mut cards = nodes[2].clone();
    cards["metadata"]["labels"]["gpus"] = json!("8");
    let gt = |bound: &str| json!([{"matchExpressions": [{"key": "gpus", "operator": "Gt", "values": [bound]}]}]);
    assert_eq!(place(&numbered(gt("4")), &[cards.clone()], &[], &[]), Ok("c1".into()));
    let refused = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.";
    assert_eq!(
        place(&numbered(gt("8")), &[cards.clone()], &[], &[]),
        Err(refused.into())
    );
    // An empty term matches no node.
    assert_eq!(place(&numbered(json!([{}])), &[cards], &[], &[]), Err(refused.into()));
    let elsewhere = pod("e", json!({}), None, json!({"nodeSelector": {"gpu": "false"}}));
    assert_eq!(
        place(&elsewhere, &nodes[2..3], &[], &[]),
        Err("0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.".into())
    );
}

#[test]
fn do_not_schedule_filters_and_schedule_anyway_scores() {
    let nodes = [
        node("a1", "a", "4", json!({})),
        node("b1", "b", "4", json!({})),
        node("c1", "c", "4", json!({"unschedulable": true})),
    ];
    let app = json!({"app": "a"});
    let placed = [
        pod("p0", app.clone(), Some("a1"), json!({})),
        pod("p1", app.clone(), Some("a1"), json!({})),
    ];
    // Zone c counts (nodeTaintsPolicy Ignore) and is empty: a would be 3 against 0, b 1.
    assert_eq!(
        place(
            &pod("n", app.clone(), None, spread("DoNotSchedule")),
            &nodes,
            &placed,
            &[]
        ),
        Ok("b1".into())
    );
    let mut honour = spread("DoNotSchedule");
    honour["topologySpreadConstraints"][0]["nodeTaintsPolicy"] = json!("Honor");
    let one_more = [
        placed[0].clone(),
        placed[1].clone(),
        pod("p2", app.clone(), Some("b1"), json!({})),
    ];
    // Against c (0) neither a (2) nor b (1) takes a third with maxSkew 1; with c's cordon
    // honoured, b (1) against b's own 1 does.
    assert_eq!(
        place(&pod("n", app.clone(), None, spread("DoNotSchedule")), &nodes, &one_more, &[]),
        Err("0/3 nodes are available: 2 node(s) didn't match pod topology spread constraints, 1 node(s) were unschedulable.".into())
    );
    assert_eq!(
        place(&pod("n", app.clone(), None, honour), &nodes, &one_more, &[]),
        Ok("b1".into())
    );
    // ScheduleAnyway: the fewest first, a preferred node before that.
    assert_eq!(
        place(
            &pod("n", app.clone(), None, spread("ScheduleAnyway")),
            &nodes[..2],
            &placed,
            &[]
        ),
        Ok("b1".into())
    );
    let hint = ["a1".to_owned()];
    assert_eq!(
        place(
            &pod("n", app, None, spread("ScheduleAnyway")),
            &nodes[..2],
            &placed,
            &hint
        ),
        Ok("a1".into())
    );
}

#[test]
fn a_worker_goes_where_its_leader_is() {
    let nodes = [
        node("a1", "a", "1", json!({})),
        node("b1", "b", "1", json!({})),
        node("b2", "b", "1", json!({})),
    ];
    let term = json!({"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": ZONE, "labelSelector": {"matchLabels": {"role": "leader", "i": "0"}}}]}}});
    let leader = pod("l", json!({"role": "leader", "i": "0"}), Some("b1"), json!({}));
    let worker = pod("w", json!({"role": "worker", "i": "0"}), None, term.clone());
    assert_eq!(place(&worker, &nodes, &[leader], &["a1".into()]), Ok("b2".into()));
    // No leader anywhere, and the worker is not one: nowhere.
    assert_eq!(
        place(&worker, &nodes, &[], &[]),
        Err("0/3 nodes are available: 3 node(s) didn't match pod affinity rules.".into())
    );
}
