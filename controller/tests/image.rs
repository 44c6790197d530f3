//! The controller's image as `make image` wrote it (target/image/ome-spread-controller.oci.tar):
//! opened by buildah in storage of the test's own under target/, its user, entrypoint, labels and
//! size as deploy/Dockerfile and the chart say, and the controller run in it; then pushed to a
//! registry on 127.0.0.1 (Debian's docker-registry), pulled back by buildah and by containerd, and
//! run by containerd with runc, as a node would (short of the kubelet). `make image-test` builds
//! the image and runs this; `make test` does so where the tools are installed.

mod oci;

use ome_spread_sim::support::live;

use std::path::{Path, PathBuf};

use oci::{Buildah, IMAGE, archive, output, private, registry, scratch};

use serde_json::{Value, json};

/// The image's files: the static controller alone (x86_64-unknown-linux-musl, the release
/// profile: LTO, stripped), with room for the code to grow; a debug build or a base image's files
/// beside it still fail.
const MOST_BYTES: u64 = 16_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs buildah and make image's archive: make image-test"]
async fn the_image_runs_the_static_controller_as_user_65532() {
    let buildah = Buildah::new(&scratch("buildah"));
    let container = buildah.run(&["from", &archive()]).await;
    let container = container.as_str();
    let inspected: Value = serde_json::from_str(&buildah.run(&["inspect", "--type", "container", container]).await)
        .expect("buildah inspect prints JSON");

    let config = &inspected["OCIv1"]["config"];
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(config["Entrypoint"], json!(["/usr/local/bin/ome-spread"]));
    assert_eq!(
        config["Cmd"],
        Value::Null,
        "the chart's args are the whole command line"
    );
    assert_eq!(
        config["Labels"],
        json!({
            "org.opencontainers.image.title": "ome-spread-controller",
            "org.opencontainers.image.description": "Says whether the spread of OME's OMENative Instances holds, and why not",
            "org.opencontainers.image.source": "https://github.com/ome-spread/ome-spread",
            "org.opencontainers.image.version": "v0.1.0",
            "org.opencontainers.image.licenses": "Apache-2.0"
        })
    );
    assert_eq!(inspected["OCIv1"]["architecture"], "amd64");
    assert_eq!(
        inspected["OCIv1"]["rootfs"]["diff_ids"].as_array().map(Vec::len),
        Some(1),
        "one layer: the binary"
    );

    let root = PathBuf::from(buildah.run(&["mount", container]).await.trim());
    let bytes = files_size(&root);
    println!("image: {bytes} bytes of files");
    assert!(
        bytes <= MOST_BYTES,
        "the image's files take {bytes} bytes, more than {MOST_BYTES}"
    );

    // What the entrypoint names, run in the image as its user: it starts with no file beside it.
    let help = buildah
        .run(&[
            "run",
            "--isolation",
            "chroot",
            container,
            "--",
            "/usr/local/bin/ome-spread",
            "--help",
        ])
        .await;
    assert_eq!(
        help.lines().next(),
        Some("Fault-domain spread of OME's OMENative Instances")
    );
}

/// The containerd namespace of the test, and so its cgroup under each controller.
const NAMESPACE: &str = "ome-spread-test";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs buildah, docker-registry, containerd, runc and make image's archive: make image-test"]
async fn the_image_goes_through_a_registry_and_runs_under_containerd() {
    let buildah = Buildah::new(&scratch("registry"));
    let (registry, _registry) = registry(&buildah.dir).await;
    let reference = format!("{registry}/{IMAGE}");

    let built = buildah.run(&["pull", "--quiet", &archive()]).await;
    let local = format!("localhost/{IMAGE}");
    let remote = format!("docker://{reference}");
    buildah
        .run(&["push", "--quiet", "--tls-verify=false", &local, &remote])
        .await;
    buildah.run(&["rmi", "--all"]).await;
    let pulled = buildah.run(&["pull", "--quiet", "--tls-verify=false", &remote]).await;
    assert_eq!(
        pulled, built,
        "the image pulled back is the one pushed (its config's digest)"
    );

    let node = Containerd::start(&scratch("containerd")).await;
    node.ctr(&["images", "pull", "--plain-http", &reference]).await;
    let command = ["--", "/usr/local/bin/ome-spread", "--help"];
    node.ctr(&[&["containers", "create", &reference, "help"][..], &command].concat())
        .await;
    let info: Value = serde_json::from_str(&node.ctr(&["containers", "info", "help"]).await)
        .expect("ctr containers info prints JSON");
    assert_eq!(
        info["Spec"]["process"]["user"],
        json!({"uid": 65532, "gid": 65532, "additionalGids": [65532]}),
        "the image's user, as runc is told to run it"
    );
    let fifos = node.dir.join("fifo");
    let help = node
        .ctr(&["task", "start", "--fifo-dir", &fifos.display().to_string(), "help"])
        .await;
    assert_eq!(
        help.lines().next(),
        Some("Fault-domain spread of OME's OMENative Instances")
    );
    node.ctr(&["containers", "rm", "help"]).await;
}

/// The bytes of the regular files under `root`.
fn files_size(root: &Path) -> u64 {
    std::fs::read_dir(root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|entry| entry.expect("a directory entry"))
        .map(|entry| {
            let kind = entry.file_type().expect("a file type");
            if kind.is_dir() {
                files_size(&entry.path())
            } else if kind.is_file() {
                entry.metadata().expect("metadata").len()
            } else {
                0
            }
        })
        .sum()
}

/// containerd (Debian's, with runc) with its root, state and socket in `dir`, in the namespace
/// NAMESPACE; stopped when dropped, and the cgroups runc made for that namespace removed.
struct Containerd {
    dir: PathBuf,
    _process: live::Process,
}

impl Containerd {
    async fn start(dir: &Path) -> Containerd {
        let config = dir.join("config.toml");
        // The CRI plugin is the kubelet's: ctr needs none of it. The opt plugin would make
        // /opt/containerd.
        let toml = format!(
            "version = 2\nroot = \"{dir}/root\"\nstate = \"{dir}/state\"\n\
             disabled_plugins = [\"io.containerd.grpc.v1.cri\"]\n\
             [grpc]\n  address = \"{dir}/containerd.sock\"\n\
             [ttrpc]\n  address = \"{dir}/containerd.sock.ttrpc\"\n\
             [plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"{dir}/opt\"\n",
            dir = dir.display()
        );
        std::fs::write(&config, toml).expect("containerd's config written");
        std::fs::create_dir_all(dir.join("fifo")).expect("the fifo folder");
        let config = config.display().to_string();
        let (process, _) = live::Process::start(
            "containerd",
            Path::new("unshare"),
            &[&private("containerd")[..], &["--config", &config]].concat(),
            &[],
            "containerd successfully booted",
        )
        .await;
        Containerd {
            dir: dir.to_owned(),
            _process: process,
        }
    }

    /// `ctr ARGS` against it: its standard output.
    async fn ctr(&self, args: &[&str]) -> String {
        let mut command = std::process::Command::new("ctr");
        command
            .arg("--address")
            .arg(self.dir.join("containerd.sock"))
            .args(["--namespace", NAMESPACE])
            .args(args);
        output(command).await
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        // runc removes each container's cgroup, not the namespace's folder above them.
        for controller in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            let _ = std::fs::remove_dir(controller.path().join(NAMESPACE));
        }
        let _ = std::fs::remove_dir(Path::new("/sys/fs/cgroup").join(NAMESPACE));
    }
}
