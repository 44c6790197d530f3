//! `/metrics`, `/healthz` and `/readyz`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;

/// Ready: standing by for the Lease, or leading with every cache filled.
#[derive(Default)]
pub struct Health {
    ready: AtomicBool,
}

impl Health {
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Release);
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }
}

pub fn router(metrics: Arc<Metrics>, health: Arc<Health>) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(|State((metrics, _)): State<(Arc<Metrics>, Arc<Health>)>| async move {
                (
                    [(
                        header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    metrics.encode(),
                )
            }),
        )
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State((_, health)): State<(Arc<Metrics>, Arc<Health>)>| async move {
                if health.is_ready() {
                    (StatusCode::OK, "ok").into_response()
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "filling caches").into_response()
                }
            }),
        )
        .with_state((metrics, health))
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
        assert_eq!(get(&router, "/readyz").await.0, StatusCode::SERVICE_UNAVAILABLE);
        health.set_ready(true);
        assert_eq!(get(&router, "/readyz").await.0, StatusCode::OK);
        let (status, content_type, body) = get(&router, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            content_type,
            "application/openmetrics-text; version=1.0.0; charset=utf-8"
        );
        assert!(body.contains("# TYPE ome_spread_reconciles counter"), "{body}");
        assert_eq!(get(&router, "/nope").await.0, StatusCode::NOT_FOUND);
    }
}
