//! The playground in a real browser: the built page (`make web`, in target/web) served on
//! loopback, driven in headless Chromium over WebDriver (Debian's chromium and chromium-driver).
//! Skipped, saying why, on a machine without them; under CI=true (`.ci/run` installs them) a
//! missing piece fails. Screenshots go to target/web-test.

#![cfg(not(target_arch = "wasm32"))]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::json;

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

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
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
    for _ in 0..100 {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing listens on port {port} after 10 s");
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
    let folder = repository().join("target/web-test");
    std::fs::create_dir_all(&folder).expect("target/web-test");
    let png = client.screenshot().await.expect("a screenshot");
    std::fs::write(folder.join(name), png).expect("the screenshot written");
}

#[tokio::test]
async fn the_seeds_example_and_a_broken_yaml_in_headless_chromium() {
    let site = repository().join("target/web");
    if let Some(missing) = missing(&site) {
        assert_ne!(
            std::env::var("CI").as_deref(),
            Ok("true"),
            "CI must run the browser test; missing: {missing}"
        );
        eprintln!("the browser test is skipped: it needs {missing}");
        return;
    }
    let (page, driver) = (free_port(), free_port());
    let _server = start(
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
    let _chromedriver = start(CHROMEDRIVER, &[&format!("--port={driver}")]);
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

    // The seed's example: its first pod gets the zone constraint, and its two Instances run in
    // zone-a and zone-b, one each: Satisfied.
    let menu = client.find(Locator::Css("#scenario")).await.expect("the menu");
    menu.select_by_value("0").await.expect("the seed's example picked");
    client
        .wait()
        .for_element(Locator::Css(".reason-name"))
        .await
        .expect("a reason");
    assert_eq!(texts(&client, ".reason-name").await, ["Satisfied"]);
    assert_eq!(texts(&client, ".domain h5").await, ["zone-a (1)", "zone-b (1)"]);
    assert_eq!(
        texts(&client, ".domain .pod").await,
        ["default · gpu-node-1", "default · gpu-node-2"]
    );
    assert_eq!(
        texts(&client, "#verdict").await,
        ["Accepted, with the terms below added or completed"]
    );
    assert_eq!(
        texts(&client, "#pod .line.added").await,
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
    screenshot(&client, "seed.png").await;

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
    assert!(texts(&client, ".reason-name").await.is_empty());
    screenshot(&client, "broken-yaml.png").await;
    client.close().await.expect("the session closed");
}
