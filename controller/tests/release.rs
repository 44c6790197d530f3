//! What `make release` writes (target/release-artifacts), as a platform team would take it: both
//! platforms' binaries, plugin archives, krew manifest, image index and SBOMs, and their sums; the
//! arm64 controller run under Debian's qemu-user-static, answering as the amd64 one does; then
//! `make publish` (deploy/publish.sh) to a registry on 127.0.0.1 (Debian's docker-registry), and
//! cosign's verification of what it pushed, which refuses an unsigned artifact and one signed with
//! another key. `make release-test` runs `make release`, then this.

mod oci;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use ome_spread_sim::support::{live, local};
use serde_json::Value;

use oci::{output, registry, scratch};

fn artifacts() -> PathBuf {
    let dir = local::workspace().join("target/release-artifacts");
    assert!(
        dir.join("SHA256SUMS").is_file(),
        "{} not written: make release writes it",
        dir.display()
    );
    dir
}

fn read(path: &Path) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn json(path: &Path) -> Value {
    serde_json::from_slice(&read(path)).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// ELF's e_machine of `binary`, and whether it names an interpreter (a PT_INTERP program header):
/// a static binary names none.
fn machine_and_interpreter(binary: &[u8]) -> (u16, bool) {
    assert_eq!(&binary[..5], b"\x7fELF\x02", "a 64-bit ELF file");
    let u16_at = |at: usize| u16::from_le_bytes([binary[at], binary[at + 1]]);
    let phoff = u64::from_le_bytes(binary[0x20..0x28].try_into().expect("8 bytes")) as usize;
    let (size, count) = (usize::from(u16_at(0x36)), usize::from(u16_at(0x38)));
    const PT_INTERP: u32 = 3;
    let interpreter = (0..count).any(|i| {
        let at = phoff + i * size;
        u32::from_le_bytes(binary[at..at + 4].try_into().expect("4 bytes")) == PT_INTERP
    });
    (u16_at(0x12), interpreter)
}

const X86_64: u16 = 62;
const AARCH64: u16 = 183;

/// The files of a gzipped tar, and the one named `name` among them, extracted into `dir`.
fn untar(archive: &Path, dir: &Path, name: &str) -> (Vec<String>, Vec<u8>) {
    std::fs::create_dir_all(dir).expect("a folder");
    let listed = Command::new("tar").arg("-tzf").arg(archive).output().expect("tar runs");
    let listed = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(dir)
        .arg(name)
        .status();
    assert!(status.expect("tar runs").success(), "{name} in {}", archive.display());
    (listed, read(&dir.join(name)))
}

#[test]
#[ignore = "needs make release's artifacts: make release-test"]
fn the_release_holds_both_platforms_each_summed() {
    let dir = artifacts();
    let mut expected: BTreeSet<&str> = [
        "SHA256SUMS",
        "policy.wasm",
        "ome-spread-policy.cdx.json",
        "ome-spread-controller.oci.tar",
        "ome-spread.krew.yaml",
        "ome-spread-linux-amd64",
        "ome-spread-linux-arm64",
        "ome-spread-linux-amd64.cdx.json",
        "ome-spread-linux-arm64.cdx.json",
        "ome-spread-controller-linux-amd64.cdx.json",
        "ome-spread-controller-linux-arm64.cdx.json",
        "kubectl-ome_spread-linux-amd64.tar.gz",
        "kubectl-ome_spread-linux-arm64.tar.gz",
    ]
    .into();
    if which("kwctl") {
        expected.insert("annotated-policy.wasm");
    }
    let files: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("the release folder")
        .map(|entry| entry.expect("an entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.iter().map(String::as_str).collect::<BTreeSet<_>>(), expected);

    // Every file but the sums themselves, summed, and each sum right.
    let sums = String::from_utf8(read(&dir.join("SHA256SUMS"))).expect("UTF-8");
    let summed: BTreeSet<&str> = sums.lines().filter_map(|line| line.split("  ").nth(1)).collect();
    expected.remove("SHA256SUMS");
    assert_eq!(summed, expected);
    let check = Command::new("sha256sum")
        .args(["--check", "--quiet", "SHA256SUMS"])
        .current_dir(&dir)
        .status();
    assert!(check.expect("sha256sum runs").success(), "SHA256SUMS holds a wrong sum");
    let sum_of = |file: &str| {
        let line = sums
            .lines()
            .find(|line| line.ends_with(&format!("  {file}")))
            .expect("summed");
        line[..64].to_owned()
    };

    let krew: Value =
        serde_saphyr::from_str(&String::from_utf8(read(&dir.join("ome-spread.krew.yaml"))).expect("UTF-8"))
            .expect("the krew manifest is YAML");
    assert_eq!(krew["spec"]["version"], "v0.1.0");
    for (arch, machine) in [("amd64", X86_64), ("arm64", AARCH64)] {
        let binary = read(&dir.join(format!("ome-spread-linux-{arch}")));
        assert_eq!(
            machine_and_interpreter(&binary),
            (machine, false),
            "{arch}: static, for its machine"
        );
        let archive = format!("kubectl-ome_spread-linux-{arch}.tar.gz");
        let (listed, plugin) = untar(
            &dir.join(&archive),
            &scratch(&format!("release-{arch}")),
            "kubectl-ome_spread",
        );
        assert_eq!(listed, ["kubectl-ome_spread", "LICENSE"]);
        assert!(plugin == binary, "{archive}: the plugin is that platform's binary");
        let platform = krew["spec"]["platforms"]
            .as_array()
            .and_then(|platforms| platforms.iter().find(|p| p["selector"]["matchLabels"]["arch"] == arch))
            .unwrap_or_else(|| panic!("the krew manifest has no {arch}"));
        assert_eq!(platform["selector"]["matchLabels"]["os"], "linux");
        assert_eq!(platform["sha256"], sum_of(&archive));
        assert_eq!(
            platform["uri"],
            format!("https://github.com/ome-spread/ome-spread/releases/download/v0.1.0/{archive}")
        );
    }
}

/// Each platform's image in the index make release wrote: its architecture, and the one file of
/// its one layer, the controller.
#[test]
#[ignore = "needs make release's artifacts: make release-test"]
fn the_image_is_one_index_of_both_platforms_each_its_own_controller() {
    let dir = artifacts();
    let layout = scratch("release-image");
    let status = Command::new("tar")
        .arg("-xf")
        .arg(dir.join("ome-spread-controller.oci.tar"))
        .arg("-C")
        .arg(&layout)
        .status();
    assert!(status.expect("tar runs").success());
    let blob = |digest: &Value| {
        layout
            .join("blobs/sha256")
            .join(digest.as_str().expect("a digest").trim_start_matches("sha256:"))
    };

    let top = json(&layout.join("index.json"));
    let manifests = top["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 1, "one image: the index");
    assert_eq!(manifests[0]["mediaType"], "application/vnd.oci.image.index.v1+json");
    assert_eq!(
        manifests[0]["annotations"]["org.opencontainers.image.ref.name"],
        "ome-spread-controller:v0.1.0"
    );
    let index = json(&blob(&manifests[0]["digest"]));
    let platforms: Vec<(String, String)> = index["manifests"]
        .as_array()
        .expect("the index's manifests")
        .iter()
        .map(|m| {
            (
                m["platform"]["os"].as_str().unwrap_or("").into(),
                m["platform"]["architecture"].as_str().unwrap_or("").into(),
            )
        })
        .collect();
    assert_eq!(
        platforms,
        [("linux".into(), "amd64".into()), ("linux".into(), "arm64".into())]
    );

    for (manifest, arch) in index["manifests"]
        .as_array()
        .expect("manifests")
        .iter()
        .zip(["amd64", "arm64"])
    {
        let image = json(&blob(&manifest["digest"]));
        let config = json(&blob(&image["config"]["digest"]));
        assert_eq!(
            (config["os"].as_str(), config["architecture"].as_str()),
            (Some("linux"), Some(arch))
        );
        assert_eq!(config["config"]["User"], "65532:65532");
        let layers = image["layers"].as_array().expect("layers");
        assert_eq!(layers.len(), 1, "{arch}: one layer, the binary");
        let (listed, controller) = untar(
            &blob(&layers[0]["digest"]),
            &scratch(&format!("release-layer-{arch}")),
            "usr/local/bin/ome-spread",
        );
        assert_eq!(
            listed.iter().filter(|path| !path.ends_with('/')).collect::<Vec<_>>(),
            ["usr/local/bin/ome-spread"]
        );
        assert!(
            controller == read(&dir.join(format!("ome-spread-linux-{arch}"))),
            "{arch}: the image holds that platform's controller"
        );
    }
}

/// The names of the crates an SBOM lists.
fn crates(sbom: &Value) -> BTreeSet<String> {
    sbom["components"]
        .as_array()
        .expect("components")
        .iter()
        .map(|c| c["name"].as_str().expect("a name").to_owned())
        .collect()
}

/// Each SBOM says what it describes and lists what that links, not the workspace's other crates:
/// the policy neither kube nor tokio, the controller not the policy's SDK.
#[test]
#[ignore = "needs make release's artifacts: make release-test"]
fn each_sbom_lists_what_its_artifact_is_made_of() {
    let dir = artifacts();
    let policy = json(&dir.join("ome-spread-policy.cdx.json"));
    assert_eq!(policy["bomFormat"], "CycloneDX");
    assert_eq!(policy["metadata"]["component"]["name"], "ome-spread");
    let linked = crates(&policy);
    for name in ["kubewarden-policy-sdk", "ome-spread-core", "serde_json"] {
        assert!(linked.contains(name), "the policy's SBOM lacks {name}");
    }
    for name in ["kube-runtime", "tokio", "wasmtime"] {
        assert!(
            !linked.contains(name),
            "the policy's SBOM lists {name}, which it does not link"
        );
    }
    for arch in ["amd64", "arm64"] {
        let controller = json(&dir.join(format!("ome-spread-linux-{arch}.cdx.json")));
        assert_eq!(controller["metadata"]["component"]["name"], "ome-spread-controller");
        let linked = crates(&controller);
        for name in ["kube-runtime", "tokio", "tikv-jemalloc-sys", "ring", "ome-spread-core"] {
            assert!(linked.contains(name), "{arch}: the controller's SBOM lacks {name}");
        }
        assert!(
            !linked.contains("kubewarden-policy-sdk"),
            "{arch}: the controller links no policy SDK"
        );
        let image = json(&dir.join(format!("ome-spread-controller-linux-{arch}.cdx.json")));
        assert_eq!(image["metadata"]["component"]["type"], "container");
        assert_eq!(image["metadata"]["component"]["name"], "ome-spread-controller");
        assert_eq!(image["metadata"]["component"]["version"], "v0.1.0");
        let held: Vec<&Value> = image["components"].as_array().expect("components").iter().collect();
        assert_eq!(held.len(), 1, "{arch}: the image holds the controller alone");
        assert_eq!(held[0]["name"], "ome-spread-controller");
        assert_eq!(
            crates(held[0]),
            linked,
            "{arch}: the image's controller is made of the controller's crates"
        );
    }
}

fn which(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The exit code and standard output of `command` (a controller binary, or qemu and one).
fn answer(command: &[PathBuf], args: &[&str]) -> (Option<i32>, String) {
    let output = Command::new(&command[0])
        .args(&command[1..])
        .args(args)
        .output()
        .expect("the controller runs");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

/// The release's controller for `arch`, installed as `ome-spread` (it names itself after the file
/// it runs as, as a kubectl plugin does).
fn installed(arch: &str) -> PathBuf {
    let binary = scratch(&format!("release-installed-{arch}")).join("ome-spread");
    std::fs::copy(artifacts().join(format!("ome-spread-linux-{arch}")), &binary).expect("installed");
    binary
}

/// The arm64 controller, run under qemu, prints what the amd64 one prints: its help, and the
/// diagnosis of a saved skewed model (docs/controller.md's Skewed, expected as written by hand).
#[test]
#[ignore = "needs make release's artifacts and qemu-aarch64-static: make release-test"]
fn the_arm64_controller_under_qemu_answers_as_the_amd64_one() {
    let amd64 = vec![installed("amd64")];
    let arm64 = vec![PathBuf::from("qemu-aarch64-static"), installed("arm64")];
    let reasons = local::workspace().join("controller/tests/data/reasons");
    let saved = reasons.join("Skewed.yaml").display().to_string();
    let expected = String::from_utf8(read(&reasons.join("Skewed.txt"))).expect("UTF-8");

    let help = answer(&arm64, &["--help"]);
    assert_eq!(help.0, Some(0));
    assert_eq!(
        help.1.lines().next(),
        Some("Fault-domain spread of OME's OMENative Instances")
    );
    assert_eq!(help, answer(&amd64, &["--help"]));
    let explain = ["explain", "qwen3-0-6b", "-n", "spread-demo", "--from", saved.as_str()];
    let skewed = answer(&arm64, &explain);
    assert_eq!(skewed, (Some(1), expected), "arm64's explain");
    assert_eq!(skewed, answer(&amd64, &explain), "amd64's explain");
}

/// `cosign ARGS`: whether it succeeded, and what it printed on either stream.
async fn cosign(args: &[&str]) -> (bool, String) {
    let mut command = tokio::process::Command::new(live::cluster_bin("cosign"));
    let output = command
        .args(args)
        .env("COSIGN_PASSWORD", "")
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(120), output)
        .await
        .expect("cosign answers within two minutes")
        .expect("cosign runs");
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), printed)
}

/// A cosign key pair in `dir`, named `name`, with an empty password.
async fn key_pair(dir: &Path, name: &str) -> (String, String) {
    let prefix = dir.join(name).display().to_string();
    let (ok, printed) = cosign(&["generate-key-pair", "--output-key-prefix", &prefix]).await;
    assert!(ok, "{printed}");
    (format!("{prefix}.key"), format!("{prefix}.pub"))
}

/// `make publish`'s script to `repository` with the key pair `key`: the policy's and the image's
/// references by digest, as it prints them.
async fn publish(repository: &str, key: &str) -> (String, String) {
    let mut publish = Command::new(local::workspace().join("deploy/publish.sh"));
    publish
        .args([repository, "v0.1.0"])
        .env("COSIGN_KEY", key)
        .env("COSIGN_PASSWORD", "")
        .env("PLAIN_HTTP", "1");
    let printed = output(publish).await;
    let reference = |what: &str| {
        let line = printed.lines().find_map(|line| line.strip_prefix(&format!("{what}: ")));
        line.unwrap_or_else(|| panic!("publish printed no {what}: {printed}"))
            .to_owned()
    };
    (reference("policy"), reference("image"))
}

/// The references by digest of the platforms' images in the index `image`, read from the registry.
async fn platforms(image: &str) -> Vec<String> {
    let mut inspect = Command::new("skopeo");
    inspect.args(["inspect", "--raw", "--tls-verify=false", &format!("docker://{image}")]);
    let index: Value = serde_json::from_str(&output(inspect).await).expect("the index is JSON");
    let repository = image.split('@').next().expect("a repository");
    let digests = index["manifests"].as_array().expect("the index's manifests").iter();
    digests
        .map(|m| format!("{repository}@{}", m["digest"].as_str().expect("a digest")))
        .collect()
}

/// `cosign VERB` of `reference` against the public key `public`, the registry without TLS and no
/// transparency log: whether it verified, and what cosign printed.
async fn verified(verb: &str, public: &str, args: &[&str], reference: &str) -> (bool, String) {
    let flags = [verb, "--allow-http-registry", "--insecure-ignore-tlog", "--key", public];
    cosign(&[&flags[..], args, &[reference]].concat()).await
}

/// `make publish` to a registry on 127.0.0.1, signing with a key pair of the test's: cosign then
/// verifies both signatures of the policy and of the image index, and the SBOMs attested; it
/// refuses the policy pushed again unsigned under the same tag, and a key that did not sign.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs make release's artifacts, cosign, skopeo and docker-registry: make release-test"]
async fn published_artifacts_verify_and_an_unsigned_one_is_refused() {
    let dir = scratch("release-publish");
    let (registry, _registry) = registry(&dir).await;
    let (key, public) = key_pair(&dir, "release").await;
    let repository = format!("{registry}/platform");
    let (policy, image) = publish(&repository, &key).await;
    assert!(
        policy.starts_with(&format!("{repository}/ome-spread@sha256:")),
        "{policy}"
    );
    assert!(
        image.starts_with(&format!("{repository}/ome-spread-controller@sha256:")),
        "{image}"
    );

    for signed in [&policy, &image] {
        let (ok, printed) = verified("verify", &public, &[], signed).await;
        assert!(ok, "{signed}: {printed}");
        let (ok, printed) = verified("verify", &public, &["--new-bundle-format=false"], signed).await;
        assert!(ok, "{signed}, in cosign 2's format: {printed}");
    }
    let sbom = ["--type", "cyclonedx"];
    let (ok, printed) = verified("verify-attestation", &public, &sbom, &policy).await;
    assert!(ok, "the policy's SBOM: {printed}");
    for platform in platforms(&image).await {
        let (ok, printed) = verified("verify-attestation", &public, &sbom, &platform).await;
        assert!(ok, "{platform}'s SBOM: {printed}");
    }

    // The same tag, pushed again with another module and not signed: refused.
    let other = dir.join("other.wasm");
    std::fs::write(&other, b"\0asm\x01\0\0\0").expect("a module");
    let tag = format!("{repository}/ome-spread:v0.1.0");
    let upload = [
        "upload",
        "wasm",
        "--allow-http-registry",
        "-f",
        &other.display().to_string(),
        &tag,
    ];
    let (ok, printed) = cosign(&upload).await;
    assert!(ok, "{printed}");
    let (ok, printed) = verified("verify", &public, &[], &tag).await;
    assert!(!ok, "an unsigned module verified: {printed}");
    assert!(printed.contains("no signatures found"), "{printed}");
    // Signed, but with a key not the release's.
    let (_, stranger) = key_pair(&dir, "stranger").await;
    let (ok, printed) = verified("verify", &stranger, &[], &policy).await;
    assert!(!ok, "verified with a key that did not sign: {printed}");
    assert!(printed.contains("failed to verify signature"), "{printed}");
    let (ok, printed) = verified("verify", &stranger, &["--new-bundle-format=false"], &policy).await;
    assert!(
        !ok,
        "verified in cosign 2's format with a key that did not sign: {printed}"
    );
    assert!(printed.contains("no matching signatures"), "{printed}");
}
