//! The controller as its container's PID 1, against a live cluster (`make e2e-cluster`): three
//! `ome-spread controller` processes, each PID 1 of a PID namespace of its own (`unshare --pid
//! --fork`, as root), where the kernel delivers only the signals the process handles. SIGTERM, as
//! the kubelet sends it on a rollout or a drain: a standby is gone at once; the leader ends its
//! reconciles, releases the Lease, and a standby leads within seconds, not after the Lease's 30 s.
//!
//!   OME_SPREAD_E2E_KUBECONFIG=... cargo test -p ome-spread-controller --test signals -- --ignored

use ome_spread_sim::support::{live, local, wait::eventually};

use std::path::Path;
use std::time::{Duration, Instant};

use ome_spread_sim::support::live::Process;

/// The Lease's namespace, as the chart's.
const NAMESPACE: &str = "ome-spread";

/// Sends SIGTERM to `pid`.
async fn terminate(pid: u32) {
    let sent = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .expect("kill runs");
    assert!(sent.success(), "SIGTERM sent to {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a cluster: make e2e-cluster"]
async fn as_pid_one_a_standby_stops_at_once_and_the_leader_hands_the_lease_over_on_sigterm() {
    let Some(admin) = live::with_crds().await else {
        return;
    };
    live::controller_namespace(&admin).await;

    let binary = local::binary("ome-spread");
    let binary = binary.to_str().expect("a UTF-8 path");
    let mut controllers = Vec::new();
    for identity in ["ome-spread-signals-a", "ome-spread-signals-b", "ome-spread-signals-c"] {
        let listen = format!("127.0.0.1:{}", local::free_port());
        let args = [
            "--pid",
            "--fork",
            "--kill-child",
            binary,
            "controller",
            "--listen",
            &listen,
            "--identity",
            identity,
        ];
        let env = [("KUBECONFIG", admin.as_path()), ("POD_NAMESPACE", Path::new(NAMESPACE))];
        let (process, _) =
            Process::start(identity, Path::new("unshare"), &args, &env, "standing by for the Lease").await;
        controllers.push((identity, process));
    }
    let leader = eventually("a leader on the Lease", 60, || live::lease_holder(&admin)).await;
    let at = |identity: &str, controllers: &[(&str, Process)]| {
        controllers
            .iter()
            .position(|(name, _)| *name == identity)
            .unwrap_or_else(|| panic!("the Lease names {identity}, none of ours"))
    };
    let (_, mut leading) = controllers.remove(at(&leader, &controllers));

    // A standby: nothing to hand over, so nothing to wait for.
    let (standby, mut process) = controllers.remove(0);
    let signalled = Instant::now();
    terminate(process.pid_one()).await;
    let status = process.exit_within(Duration::from_secs(2)).await;
    let gone = signalled.elapsed();
    eprintln!("the standby {standby} was gone {gone:?} after SIGTERM");
    assert!(
        status.is_some_and(|s| s.success()),
        "{standby}, PID 1 of its namespace, still running 2 s after SIGTERM, or failed: {status:?}"
    );

    // The leader: its reconciles end, it releases the Lease, the last standby takes it.
    let survivor = controllers[0].0;
    let signalled = Instant::now();
    terminate(leading.pid_one()).await;
    eventually("the last standby on the Lease", 30, || async {
        live::lease_holder(&admin).await.filter(|h| h == survivor)
    })
    .await;
    let handed_over = signalled.elapsed();
    eprintln!("the Lease moved from {leader} to {survivor} {handed_over:?} after SIGTERM");
    assert!(
        handed_over < Duration::from_secs(5),
        "the Lease moved {handed_over:?} after the leader's SIGTERM: not released"
    );
    let status = leading.exit_within(Duration::from_secs(10)).await;
    assert!(status.is_some_and(|s| s.success()), "the leader's exit: {status:?}");
    drop(controllers);
    live::forget_lease(&admin).await;
}
