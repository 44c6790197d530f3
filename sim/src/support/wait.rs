//! The tests' one way to wait: on a condition, bounded in time. Never a sleep that stands in for
//! one; under tokio's paused time (`start_paused`) the polls cost no real time.

use std::time::Duration;

/// How often a condition is checked again.
const POLL: Duration = Duration::from_millis(500);

/// Polls `check` until it gives a value, for at most `seconds`; fails the test, naming `what`,
/// when it does not.
pub async fn eventually<T, F: Future<Output = Option<T>>>(what: &str, seconds: u64, mut check: impl FnMut() -> F) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(seconds);
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {seconds} s waiting for {what}"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// [`eventually`] for a condition read at once, such as the in-memory API server's state.
pub async fn until(what: &str, seconds: u64, mut done: impl FnMut() -> bool) {
    eventually(what, seconds, || std::future::ready(done().then_some(()))).await
}
