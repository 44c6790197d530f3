//! Every case of the rule table under the real Kubewarden `policy-server` (v1.31), over HTTP: the
//! annotated policy loaded with the case's settings, the case's replica served by a fake API
//! server, the answer's `allowed`, JSONPatch (applied to the request's pod), message and warnings
//! compared with the case's `response.json`. Needs the binary and the annotated policy:
//! `make e2e-server` builds the one and runs this with `--ignored`.

use std::collections::BTreeMap;

use ome_spread_sim::policy_server::{self, Case, Policy, PolicyServer, Tools};
use ome_spread_sim::stand_in::fake_api::FakeApi;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs policy-server and kwctl: make e2e-server"]
async fn every_case_under_the_real_policy_server() {
    let Some(tools) = Tools::find() else {
        return;
    };
    let cases = policy_server::cases();
    let mut failed: Vec<String> = Vec::new();
    let mut report = |case: &Case, differences: Vec<String>| {
        if differences.is_empty() {
            println!("ok    {}", case.name);
        } else {
            println!("DIFFERS {}\n  {}", case.name, differences.join("\n  "));
            failed.push(case.name.clone());
        }
    };

    // Settings the policy refuses: policy-server validates every policy's settings at start-up
    // and must refuse to start, printing the policy's reason.
    let (invalid, valid): (Vec<&Case>, Vec<&Case>) = cases.iter().partition(|c| c.settings_are_invalid());
    for case in invalid {
        let api = FakeApi::start(BTreeMap::new()).await;
        let policy = policy_of(case, &tools);
        let reason = case.expected["message"].as_str().unwrap_or_default();
        let reason = reason.strip_prefix("invalid policy settings: ").unwrap_or(reason);
        let differences = match PolicyServer::start(&tools.policy_server, &[policy], &api, "warn") {
            Ok(_) => vec!["policy-server started with invalid settings".to_owned()],
            Err(output) if output.contains(reason) => Vec::new(),
            Err(output) => vec![format!(
                "policy-server refused to start, but not with {reason:?}:\n{output}"
            )],
        };
        report(case, differences);
    }

    // One policy-server per set of cases whose cluster agrees, each case a policy of its own.
    let groups = policy_server::groups(valid);
    let client = policy_server::client();
    for group in &groups {
        let replicas = group.iter().filter_map(|c| c.replica.clone()).collect();
        let api = FakeApi::start(replicas).await;
        let policies: Vec<Policy> = group.iter().map(|c| policy_of(c, &tools)).collect();
        let server = PolicyServer::start(&tools.policy_server, &policies, &api, "info")
            .unwrap_or_else(|output| panic!("policy-server did not start: {output}"));
        for case in group {
            let before = api.seen().len();
            let mut differences = match policy_server::validate(&client, server.port, &case.name, &case.request).await {
                Ok(review) => policy_server::differences(&case.request, &case.expected, &review),
                Err(e) => vec![format!("no answer: {e}\n{}", server.log())],
            };
            // The policy reads only its own replica (perhaps from policy-server's cache), and
            // nothing at all where it needs none (P1, P2, P11).
            let own = case.replica.as_ref().map(|(path, _)| path.as_str());
            for call in &api.seen()[before..] {
                let path = call.split_once(' ').map_or("", |(_, p)| p);
                if path.contains("/inferencereplicas/") && Some(path) != own {
                    differences.push(format!("a lookup it should not make: {call}"));
                }
            }
            report(case, differences);
        }
        println!("  API requests of these {} cases: {:?}", group.len(), api.seen());
    }
    // One line in the shape of cargo's, for CI's closing count of cases.
    println!(
        "policy-server cases: {} passed; {} failed (under {} policy-servers)",
        cases.len() - failed.len(),
        failed.len(),
        groups.len() + cases.iter().filter(|c| c.settings_are_invalid()).count(),
    );
    assert!(
        failed.is_empty(),
        "cases that differ under the real policy-server: {failed:?}"
    );
}

fn policy_of(case: &Case, tools: &Tools) -> Policy {
    Policy {
        name: case.name.clone(),
        module: tools.policy.clone(),
        settings: case.settings.clone(),
    }
}
