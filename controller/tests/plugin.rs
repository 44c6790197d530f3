//! `ome-spread` as the kubectl plugin `kubectl ome-spread`: the binary named `kubectl-ome_spread`
//! on PATH (as `make release` ships it, and krew installs it), run by the real kubectl
//! (`make cluster-bin` builds it), names itself `kubectl ome-spread` in its help and errors.
//!
//!   cargo test -p ome-spread-controller --test plugin -- --ignored

use ome_spread_sim::support::local;

use std::process::Command;

/// `kubectl ARGS` with a folder holding the plugin first on PATH: its exit, stdout and stderr.
fn kubectl(args: &[&str]) -> (bool, String, String) {
    let kubectl = ome_spread_sim::support::live::cluster_bin("kubectl");
    let folder = std::env::temp_dir().join(format!("ome-spread-plugin-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("a folder for the plugin");
    let plugin = folder.join("kubectl-ome_spread");
    if !plugin.exists() {
        std::os::unix::fs::symlink(local::binary("ome-spread"), &plugin).expect("the plugin linked");
    }
    let path = format!("{}:{}", folder.display(), std::env::var("PATH").unwrap_or_default());
    let output = Command::new(kubectl)
        .args(args)
        .env("PATH", path)
        .output()
        .expect("kubectl runs");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
#[ignore = "needs kubectl: make cluster-bin"]
fn kubectl_runs_the_plugin_which_names_itself_so() {
    let (ok, help, _) = kubectl(&["ome-spread", "--help"]);
    assert!(ok);
    let lines: Vec<&str> = help.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "Fault-domain spread of OME's OMENative Instances",
            "",
            "Usage: kubectl ome-spread <COMMAND>"
        ]
    );
    let (ok, _, error) = kubectl(&["ome-spread", "explain"]);
    assert!(!ok);
    assert!(
        error.contains("\nUsage: kubectl ome-spread explain <SERVICE>\n"),
        "{error}"
    );
    let (ok, listed, _) = kubectl(&["plugin", "list", "--name-only"]);
    assert!(ok);
    assert!(listed.lines().any(|line| line == "kubectl-ome_spread"), "{listed}");
    // Under its own name, it is ome-spread.
    let own = Command::new(local::binary("ome-spread"))
        .arg("--help")
        .output()
        .expect("it runs");
    let own = String::from_utf8_lossy(&own.stdout).into_owned();
    assert_eq!(own.lines().nth(2), Some("Usage: ome-spread <COMMAND>"));
}
