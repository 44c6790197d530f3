//! The controller's image as `make image` wrote it (target/image/ome-spread-controller.oci.tar),
//! opened by buildah in storage of the test's own under target/: its user, entrypoint, labels and
//! size as deploy/Dockerfile and the chart say, and the controller run in it. `make image-test`
//! builds the image and runs this; `make test` does so where buildah is installed.

mod live;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

/// The image's files: the static controller alone, measured at 12,856,520 bytes here
/// (x86_64-unknown-linux-musl, the release profile: LTO, stripped). About a quarter more leaves the
/// code room to grow, and still fails on a debug build or a base image's files beside it.
const MOST_BYTES: u64 = 16_000_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs buildah and make image's archive: make image-test"]
async fn the_image_runs_the_static_controller_as_user_65532() {
    let buildah = Buildah::new();
    let archive = live::workspace().join("target/image/ome-spread-controller.oci.tar");
    assert!(
        archive.is_file(),
        "{} not found: make image writes it",
        archive.display()
    );
    let container = buildah
        .run(&["from", &format!("oci-archive:{}", archive.display())])
        .await;
    let container = container.trim();
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
            "org.opencontainers.image.version": "0.1.0",
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

/// The bytes of the regular files under `root`.
fn files_size(root: &std::path::Path) -> u64 {
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

/// buildah with storage of its own (vfs, under target/image-test), removed when dropped; as in
/// the Makefile, run where /var/lib and /run are empty and forgotten, so that the cache and folder
/// buildah keeps there as root are left nowhere.
struct Buildah {
    dir: PathBuf,
}

impl Buildah {
    fn new() -> Buildah {
        let dir = live::workspace().join("target/image-test");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("tmp")).expect("target/image-test");
        Buildah { dir }
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new("unshare");
        command
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg(r#"mount -t tmpfs tmpfs /var/lib && mount -t tmpfs tmpfs /run && exec "$@""#)
            .args(["sh", "buildah", "--root"])
            .arg(self.dir.join("storage"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .args(["--storage-driver", "vfs"])
            .args(args)
            .env("TMPDIR", self.dir.join("tmp"));
        command
    }

    /// `buildah ARGS`, at most a minute: its standard output.
    async fn run(&self, args: &[&str]) -> String {
        let output = tokio::process::Command::from(self.command(args))
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(60), output)
            .await
            .unwrap_or_else(|_| panic!("buildah {args:?} took more than a minute"))
            .unwrap_or_else(|e| panic!("buildah does not start: {e}"));
        assert!(
            output.status.success(),
            "buildah {args:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).expect("UTF-8")
    }
}

impl Drop for Buildah {
    fn drop(&mut self) {
        let _ = self.command(&["rm", "--all"]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
