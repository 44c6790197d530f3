//! What the tests of the controller's image share: the OCI archive `make image` writes, buildah
//! with storage of a test's own, and a registry on 127.0.0.1 (Debian's docker-registry), each
//! removed or stopped when the test ends.
#![allow(dead_code)] // each test binary uses a part

use std::path::{Path, PathBuf};
use std::time::Duration;

use ome_spread_sim::support::{live, local};

/// The image's name and tag in the registry a test starts, as the chart's image values name it
/// (the tag: the chart's appVersion).
pub const IMAGE: &str = "ome-spread-controller:v0.1.0";

/// `oci-archive:FILE` of the archive make image writes.
pub fn archive() -> String {
    let archive = local::workspace().join("target/image/ome-spread-controller.oci.tar");
    assert!(
        archive.is_file(),
        "{} not found: make image writes it",
        archive.display()
    );
    format!("oci-archive:{}", archive.display())
}

/// A fresh folder of the test's own under target/image-test.
pub fn scratch(name: &str) -> PathBuf {
    let dir = local::workspace().join("target/image-test").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    dir
}

/// Debian's docker-registry on a free port of 127.0.0.1, its storage in `dir`: its address, and
/// the process, stopped when dropped.
pub async fn registry(dir: &Path) -> (String, live::Process) {
    let address = format!("127.0.0.1:{}", local::free_port());
    let config = dir.join("registry.yml");
    let storage = dir.join("registry");
    let yaml = format!(
        "version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {address}\n",
        storage.display()
    );
    std::fs::write(&config, yaml).expect("the registry's config written");
    let config = config.display().to_string();
    let (process, _) = live::Process::start(
        "docker-registry",
        Path::new("docker-registry"),
        &["serve", &config],
        &[],
        &format!("listening on {address}"),
    )
    .await;
    (address, process)
}

/// unshare's arguments that run `program` where /var/lib and /run are empty and forgotten: buildah
/// and containerd keep caches and folders there as root that their flags do not move (as in the
/// Makefile), so that nothing of the test is left outside target/.
pub fn private(program: &str) -> Vec<&str> {
    vec![
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        r#"mount -t tmpfs tmpfs /var/lib && mount -t tmpfs tmpfs /run && exec "$@""#,
        "sh",
        program,
    ]
}

/// The standard output of `command`, which must succeed within a minute.
pub async fn output(command: std::process::Command) -> String {
    let shown = format!("{command:?}");
    let output = tokio::process::Command::from(command).kill_on_drop(true).output();
    let output = tokio::time::timeout(Duration::from_secs(60), output)
        .await
        .unwrap_or_else(|_| panic!("{shown} took more than a minute"))
        .unwrap_or_else(|e| panic!("{shown} does not start: {e}"));
    assert!(
        output.status.success(),
        "{shown}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("UTF-8")
}

/// buildah with storage of its own (vfs, in `dir`), removed when dropped.
pub struct Buildah {
    pub dir: PathBuf,
}

impl Buildah {
    pub fn new(dir: &Path) -> Buildah {
        std::fs::create_dir_all(dir.join("tmp")).expect("buildah's TMPDIR");
        Buildah { dir: dir.to_owned() }
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new("unshare");
        command
            .args(private("buildah"))
            .arg("--root")
            .arg(self.dir.join("storage"))
            .arg("--runroot")
            .arg(self.dir.join("run"))
            .args(["--storage-driver", "vfs"])
            .args(args)
            .env("TMPDIR", self.dir.join("tmp"));
        command
    }

    /// `buildah ARGS`: its standard output, trimmed.
    pub async fn run(&self, args: &[&str]) -> String {
        output(self.command(args)).await.trim().to_owned()
    }
}

impl Drop for Buildah {
    fn drop(&mut self) {
        let _ = self.command(&["rm", "--all"]).output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
