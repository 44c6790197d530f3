//! The playground in a real browser: the built page (`make web`, in target/playground) served on
//! loopback, driven in headless Chromium over WebDriver (Debian's chromium and chromium-driver).
//! Skipped, saying why, on a machine without them; under CI=true (`.ci/run` installs them) a
//! missing piece fails. Screenshots go to target/playground-test.

#![cfg(not(target_arch = "wasm32"))]

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use ome_spread_sim::bench::large_cluster as cluster;
use ome_spread_sim::support::local::free_port;
use ome_spread_sim::support::wait::until;
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A child process, stopped when the test ends however it ends.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn start(program: &str, args: &[&str]) -> Running {
    let child = Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    Running(child)
}

async fn listening(port: u16) {
    until(&format!("something listening on port {port}"), 10, || {
        TcpStream::connect(("127.0.0.1", port)).is_ok()
    })
    .await;
}

/// Why the test cannot run here, if it cannot.
fn missing(site: &Path) -> Option<String> {
    let needs = [
        (Path::new(CHROMIUM), "Debian's chromium"),
        (Path::new(CHROMEDRIVER), "Debian's chromium-driver"),
        (&site.join("index.html"), "the built page: make web"),
    ];
    let missing: Vec<&str> = needs
        .iter()
        .filter(|(path, _)| !path.exists())
        .map(|(_, what)| *what)
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

async fn texts(client: &Client, css: &str) -> Vec<String> {
    let mut texts = Vec::new();
    for element in client.find_all(Locator::Css(css)).await.expect(css) {
        texts.push(element.text().await.expect("text"));
    }
    texts
}

async fn screenshot(client: &Client, name: &str) {
    let folder = repository().join("target/playground-test");
    std::fs::create_dir_all(&folder).expect("target/playground-test");
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(folder.join(name), png).expect("the screenshot written");
}

/// The page open in headless Chromium, with the server and chromedriver it needs; None, after
/// saying why, where they cannot run (never under CI=true).
struct Browser {
    client: Client,
    _server: Running,
    _chromedriver: Running,
}

async fn open_page() -> Option<Browser> {
    let site = repository().join("target/playground");
    if let Some(missing) = missing(&site) {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI must run the browser test; missing: {missing}"
        );
        eprintln!("the browser test is skipped: it needs {missing}");
        return None;
    }
    let (page, driver) = (free_port(), free_port());
    let server = start(
        "python3",
        &[
            "-m",
            "http.server",
            &page.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
            &site.to_string_lossy(),
        ],
    );
    let chromedriver = start(CHROMEDRIVER, &[&format!("--port={driver}")]);
    listening(page).await;
    listening(driver).await;
    // A new empty profile each run, as a fresh machine has.
    let profile = std::env::temp_dir().join(format!("ome-spread-chromium-{}", std::process::id()));
    // Chromium's own background connections are refused on these closed machines: turned off.
    let options = json!({
        "binary": CHROMIUM,
        "args": ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,1600", format!("--user-data-dir={}", profile.display())],
    });
    let mut capabilities = serde_json::Map::new();
    capabilities.insert("goog:chromeOptions".into(), options);
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities)
        .connect(&format!("http://127.0.0.1:{driver}"))
        .await
        .expect("a WebDriver session in Chromium");
    client
        .goto(&format!("http://127.0.0.1:{page}/"))
        .await
        .expect("the page");
    client
        .wait()
        .at_most(Duration::from_secs(20))
        .for_element(Locator::Css("body[data-ready='true']"))
        .await
        .expect("the page's module loaded");
    Some(Browser {
        client,
        _server: server,
        _chromedriver: chromedriver,
    })
}

#[tokio::test]
async fn the_seeds_example_and_a_broken_yaml_in_headless_chromium() {
    let Some(browser) = open_page().await else {
        return;
    };
    let client = browser.client.clone();
    the_seeds_example(&client).await;
    skewed_and_zone_a_lost(&client).await;
    a_broken_yaml(&client).await;
    client.close().await.expect("the session closed");
}

async fn the_seeds_example(client: &Client) {
    // The seed's example: its first pod gets the zone constraint, and its two Instances run in
    // zone-a and zone-b, one each: Satisfied.
    let menu = client.find(Locator::Css("#scenario")).await.expect("the menu");
    menu.select_by_value("0").await.expect("the seed's example picked");
    client
        .wait()
        .for_element(Locator::Css(".reason-name"))
        .await
        .expect("a reason");
    assert_eq!(texts(client, ".reason-name").await, ["Satisfied"]);
    assert_eq!(texts(client, ".domain h5").await, ["zone-a (1)", "zone-b (1)"]);
    assert_eq!(
        texts(client, ".domain .pod").await,
        ["default · gpu-node-1", "default · gpu-node-2"]
    );
    // The seed's Step 2 tables, as explain prints them.
    assert_eq!(
        texts(client, "table.step2 tbody tr").await,
        [
            "qwen3-0-6b-engine Required topology.kubernetes.io/zone <none>",
            "qwen3-0-6b-engine-0-default-0 topology.kubernetes.io/zone DoNotSchedule gpu-node-1",
            "qwen3-0-6b-engine-1-default-0 topology.kubernetes.io/zone DoNotSchedule gpu-node-2",
            "gpu-node-1 zone-a",
            "gpu-node-2 zone-b",
        ]
    );
    // What losing each zone leaves: one of two, and the lost one fits nowhere.
    assert_eq!(
        texts(client, "table.losses tbody tr").await,
        [
            "zone-a 1 1 of 2 0 of 1 (zone-a still counts; with Honor: 0 of 1)",
            "zone-b 1 1 of 2 0 of 1 (zone-b still counts; with Honor: 0 of 1)",
        ]
    );
    assert_eq!(
        texts(client, "#verdict").await,
        ["Accepted, with the terms below added or completed"]
    );
    assert_eq!(
        texts(client, "#pod .line.added").await,
        [
            "  topologySpreadConstraints:",
            "  - maxSkew: 1",
            "    topologyKey: topology.kubernetes.io/zone",
            "    whenUnsatisfiable: DoNotSchedule",
            "    labelSelector:",
            "      matchLabels:",
            "        ome.io/inferenceservice: qwen3-0-6b",
            "        component: engine",
            "        ome.io/runner: default",
        ]
    );
    screenshot(client, "seed.png").await;
    client
        .execute("document.getElementById('diagnosis').scrollIntoView()", vec![])
        .await
        .expect("scrolled to the diagnosis");
    screenshot(client, "seed-diagnosis.png").await;
}

async fn skewed_and_zone_a_lost(client: &Client) {
    // Skewed: three Instances in zone-a, none in zone-b; the plan moves one, drawn as an arrow.
    let menu = client.find(Locator::Css("#scenario")).await.expect("the menu");
    menu.select_by_value("15").await.expect("Skewed picked");
    assert_eq!(texts(client, ".reason-name").await, ["Skewed"]);
    assert_eq!(texts(client, ".domain h5").await, ["zone-a (3)", "zone-b (0)"]);
    assert_eq!(
        texts(client, ".domain[data-domain='zone-b'] .planned").await,
        ["Instance 2, after move 1"]
    );
    assert_eq!(
        texts(client, ".moves li").await,
        [
            "Move Instance 2 from gpu-node-1 (zone-a) to zone-b: kubectl ome migration start qwen3-0-6b --component engine --instance 2 --from-node gpu-node-1 --hint-node gpu-node-2 -n spread-demo"
        ]
    );
    let arrows = client.find_all(Locator::Css(".arrows > path")).await.expect("arrows");
    assert_eq!(arrows.len(), 1);
    // zone-a's column clicked: it is lost, its three Instances greyed; zone-b's free GPU takes
    // one of them again (Preferred), drawn as an arrow. Clicked again: as it was.
    let zone_a = client
        .find(Locator::Css(".domain[data-domain='zone-a']"))
        .await
        .expect("zone-a's column");
    zone_a.click().await.expect("zone-a clicked");
    assert_eq!(texts(client, ".domain.lost h5").await, ["zone-a (3)"]);
    assert_eq!(
        texts(client, ".instance.lost .instance-title").await,
        ["Instance 0", "Instance 1", "Instance 2"]
    );
    assert_eq!(
        texts(client, ".domain[data-domain='zone-b'] .replaced").await,
        ["Instance 0, placed again"]
    );
    let repairs = client
        .find_all(Locator::Css(".arrows.loss > path"))
        .await
        .expect("arrows");
    assert_eq!(repairs.len(), 1);
    screenshot(client, "skewed-zone-a-lost.png").await;
    zone_a.click().await.expect("zone-a clicked again");
    assert!(texts(client, ".lost, .replaced").await.is_empty());
    client
        .execute("document.getElementById('diagnosis').scrollIntoView()", vec![])
        .await
        .expect("scrolled to the diagnosis");
    screenshot(client, "skewed.png").await;
}

async fn a_broken_yaml(client: &Client) {
    // A broken YAML pasted: one clear message, the rest of the page as it was.
    let objects = client
        .find(Locator::Css("#diagnose-objects"))
        .await
        .expect("the objects box");
    objects.clear().await.expect("cleared");
    objects.send_keys("kind: [Pod").await.expect("typed");
    let error = client
        .wait()
        .for_element(Locator::Css("#diagnose-error:not([hidden])"))
        .await
        .expect("an error shown");
    let message = error.text().await.expect("its text");
    assert!(message.starts_with("objects: "), "{message}");
    assert!(message.contains("line 1"), "{message}");
    assert!(texts(client, ".reason-name").await.is_empty());
    screenshot(client, "broken-yaml.png").await;
}

/// `make bench`: the benchmarks' large cluster (1,000 InferenceServices and replicas, 10,000
/// pods, 5,000 nodes) pasted as one text, diagnosed by the playground natively and in headless
/// Chromium, one run each on the same machine. Built with `--release` natively; the page's
/// module is `make web`'s (the `web` profile: optimised for size).
#[tokio::test]
#[ignore = "a benchmark: make bench runs it"]
async fn diagnosis_of_the_large_cluster_natively_and_in_chromium() {
    let cluster = cluster::cluster();
    let runtimes = vec![cluster.runtime.clone()];
    let objects = [
        &runtimes,
        &cluster.services,
        &cluster.replicas,
        &cluster.pods,
        &cluster.nodes,
    ];
    // As `kubectl get -o yaml` prints several objects: a List of each kind.
    let text: Vec<String> = objects
        .iter()
        .map(|items| json!({"apiVersion": "v1", "kind": "List", "items": items}).to_string())
        .collect();
    let text = text.join("\n---\n");
    let Some(browser) = open_page().await else {
        return;
    };
    std::fs::write(repository().join("target/playground/bench-cluster.yaml"), &text).expect("the cluster written");
    let started = Instant::now();
    let answer: Value = serde_json::from_str(&ome_spread_web::diagnose_json(&text, "")).expect("JSON");
    let native = started.elapsed();
    let satisfied = |answer: &Value| {
        answer["services"].as_array().map(|services| {
            services
                .iter()
                .filter(|s| s["components"][0]["reason"] == "Satisfied")
                .count()
        })
    };
    assert_eq!(
        satisfied(&answer),
        Some(cluster::REPLICAS),
        "{:.300}",
        answer.to_string()
    );
    let timeouts = fantoccini::wd::TimeoutConfiguration::new(Some(Duration::from_secs(600)), None, None);
    browser
        .client
        .update_timeouts(timeouts)
        .await
        .expect("a script timeout");
    let measured = browser
        .client
        .execute_async(
            "const done = arguments[arguments.length - 1];
             (async () => {
               const playground = await import('./ome_spread_web.js');
               await playground.default();
               const text = await (await fetch('bench-cluster.yaml')).text();
               const started = performance.now();
               const answer = playground.diagnose(text, '');
               const ms = performance.now() - started;
               done({ ms, answer: JSON.parse(answer) });
             })();",
            vec![],
        )
        .await
        .expect("the diagnosis in Chromium");
    // Not left among the files a user would host.
    std::fs::remove_file(repository().join("target/playground/bench-cluster.yaml")).expect("the cluster removed");
    assert_eq!(satisfied(&measured["answer"]), Some(cluster::REPLICAS));
    let browser_ms = measured["ms"].as_f64().expect("ms");
    let native_ms = native.as_secs_f64() * 1000.0;
    println!(
        "playground diagnose, {} MB of objects: native {native_ms:.0} ms, Chromium {browser_ms:.0} ms ({:.2}x native)",
        text.len() / 1_000_000,
        browser_ms / native_ms
    );
    browser.client.clone().close().await.expect("the session closed");
}
