//! `/metrics`, `/healthz` and `/readyz`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use scopeguard::ScopeGuard;
// tokio's clock, so that tests can pause and advance it.
use tokio::time::Instant;

use crate::error::lock;
use crate::metrics::Metrics;

/// The default of `--stalled-after`: well above what a quiet, healthy cluster leaves between two
/// events of the Lease's watch (the leader renews the Lease every 25 s; with no leader for a
/// while, kube-runtime's watcher still relists after a failed re-watch).
pub const STALLED_AFTER: Duration = Duration::from_secs(600);

/// Ready: the policy's settings read, and standing by for the Lease or leading with every cache
/// filled. Live: the Lease's watch brought an event within the bound (once it started), and no
/// reconcile has run longer than the bound.
#[derive(Default)]
pub struct Health {
    ready: AtomicBool,
    /// Why the settings are not read yet, or None.
    settings: Mutex<Option<String>>,
    /// What a ready controller does not do, said beside `ok` (the reports' CRD missing).
    note: Mutex<Option<String>>,
    /// None: [`STALLED_AFTER`].
    bound: Option<Duration>,
    /// The last event of the Lease's watch; None until the watch starts.
    watched: Mutex<Option<Instant>>,
    /// When each reconcile running started.
    running: Mutex<Vec<Instant>>,
}

impl Health {
    /// Unhealthy after `bound` without an event of the Lease's watch, or with a reconcile running.
    pub fn new(bound: Duration) -> Self {
        Self {
            bound: Some(bound),
            ..Self::default()
        }
    }

    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    /// Why the policy's settings are not read yet; None once they are.
    pub fn waiting_for_settings(&self, why: Option<String>) {
        *lock(&self.settings) = why;
    }

    /// What a ready controller does not do, or None.
    pub fn note(&self, what: Option<String>) {
        *lock(&self.note) = what;
    }

    /// What `/readyz` says beside `ok`.
    pub fn note_now(&self) -> Option<String> {
        lock(&self.note).clone()
    }

    /// Ok when ready, else why not.
    pub fn ready(&self) -> Result<(), String> {
        match lock(&self.settings).clone() {
            Some(why) => Err(why),
            None if self.ready.load(Ordering::Acquire) => Ok(()),
            None => Err("filling caches".into()),
        }
    }

    /// The Lease's watch brought an event (a renewal, or a relist).
    pub fn watched(&self) {
        *lock(&self.watched) = Some(Instant::now());
    }

    /// A reconcile runs until the guard is dropped.
    pub fn reconciling(self: &Arc<Self>) -> ScopeGuard<Instant, impl FnOnce(Instant)> {
        let started = Instant::now();
        lock(&self.running).push(started);
        let health = self.clone();
        scopeguard::guard(started, move |started| {
            // Any one that started at the same instant: only the oldest start is read.
            let mut running = lock(&health.running);
            if let Some(at) = running.iter().position(|start| *start == started) {
                running.swap_remove(at);
            }
        })
    }

    /// Ok while the controller makes progress, else why not.
    pub fn live(&self) -> Result<(), String> {
        let bound = self.bound.unwrap_or(STALLED_AFTER);
        let within = |since: Option<Instant>, what: &str| match since {
            Some(at) if at.elapsed() > bound => {
                let (elapsed, bound) = (at.elapsed().as_secs(), bound.as_secs());
                Err(format!("{what} for {elapsed}s (bound {bound}s)"))
            }
            _ => Ok(()),
        };
        within(*lock(&self.watched), "no event of the Lease's watch")?;
        within(lock(&self.running).iter().min().copied(), "a reconcile has run")
    }
}

pub fn router(metrics: Arc<Metrics>, health: Arc<Health>) -> Router {
    const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    let for_ready = health.clone();
    let metrics = get(|| async move { ([(header::CONTENT_TYPE, OPENMETRICS)], metrics.encode()) });
    let live = get(|| async move { answer(health.live().map(|()| None)) });
    let ready = get(|| async move { answer(for_ready.ready().map(|()| for_ready.note_now())) });
    Router::new()
        .route("/metrics", metrics)
        .route("/healthz", live)
        .route("/readyz", ready)
}

/// 200 `ok` (and a note on the next line), or 503 with the reason on one line.
fn answer(state: Result<Option<String>, String>) -> axum::response::Response {
    match state {
        Ok(None) => (StatusCode::OK, "ok").into_response(),
        Ok(Some(note)) => (StatusCode::OK, format!("ok\n{note}\n")).into_response(),
        Err(why) => (StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    async fn get(router: &Router, path: &str) -> (StatusCode, String, String) {
        let response = router
            .clone()
            .oneshot(Request::get(path).body(Body::empty()).expect("a request"))
            .await
            .expect("an answer");
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let body = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("a body");
        (status, content_type, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn health_readiness_and_metrics() {
        let health = Arc::new(Health::default());
        let router = router(Arc::default(), health.clone());
        assert_eq!(get(&router, "/healthz").await.0, StatusCode::OK);
        let (status, _, body) = get(&router, "/readyz").await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, "filling caches\n")
        );
        health.set_ready(true);
        let (status, _, body) = get(&router, "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok"));
        // What a ready controller does not do is said, and it stays ready.
        health.note(Some("no Report CRD".into()));
        let (status, _, body) = get(&router, "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\nno Report CRD\n"));
        let (status, content_type, body) = get(&router, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            content_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert!(body.contains("# TYPE ome_spread_reconciles counter"), "{body}");
        assert_eq!(get(&router, "/nope").await.0, StatusCode::NOT_FOUND);
    }

    /// Not ready, saying why, while the policy's settings are not read; ready again once they are.
    #[tokio::test]
    async fn readiness_waits_for_the_settings() {
        let health = Arc::new(Health::default());
        let router = router(Arc::default(), health.clone());
        health.set_ready(true);
        health.waiting_for_settings(Some("no ClusterAdmissionPolicy ome-spread in the cluster".into()));
        assert_eq!(
            get(&router, "/readyz").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8".into(),
                "no ClusterAdmissionPolicy ome-spread in the cluster\n".into()
            )
        );
        health.waiting_for_settings(None);
        assert_eq!(get(&router, "/readyz").await.2, "ok");
    }

    /// Live until the bound passes without an event of the Lease's watch; live again at the next.
    #[tokio::test(start_paused = true)]
    async fn healthz_fails_when_the_lease_watch_goes_quiet() {
        let health = Arc::new(Health::new(Duration::from_secs(200)));
        let router = router(Arc::default(), health.clone());
        tokio::time::sleep(Duration::from_secs(300)).await;
        assert_eq!(
            get(&router, "/healthz").await.2,
            "ok",
            "not armed before the watch starts"
        );
        health.watched();
        tokio::time::sleep(Duration::from_secs(100)).await;
        health.watched();
        tokio::time::sleep(Duration::from_secs(150)).await;
        assert_eq!(get(&router, "/healthz").await.2, "ok", "an event within the bound");
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(
            get(&router, "/healthz").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8".into(),
                "no event of the Lease's watch for 250s (bound 200s)\n".into()
            )
        );
        health.watched();
        assert_eq!(get(&router, "/healthz").await.0, StatusCode::OK);
    }

    /// Live while each reconcile ends within the bound; not while one runs longer.
    #[tokio::test(start_paused = true)]
    async fn healthz_fails_while_a_reconcile_runs_past_the_bound() {
        let health = Arc::new(Health::new(Duration::from_secs(200)));
        let router = router(Arc::default(), health.clone());
        for _ in 0..3 {
            let _done = health.reconciling();
            tokio::time::sleep(Duration::from_secs(100)).await;
        }
        let stuck = health.reconciling();
        let quick = health.reconciling();
        tokio::time::sleep(Duration::from_secs(150)).await;
        assert_eq!(get(&router, "/healthz").await.0, StatusCode::OK);
        tokio::time::sleep(Duration::from_secs(100)).await;
        assert_eq!(
            get(&router, "/healthz").await,
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "text/plain; charset=utf-8".into(),
                "a reconcile has run for 250s (bound 200s)\n".into()
            )
        );
        drop(stuck);
        drop(quick);
        assert_eq!(get(&router, "/healthz").await.0, StatusCode::OK);
    }
}
