//! A reconcile's errors, the bounds on its waits, and the one rule for a poisoned lock.

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use ome_spread_core::diagnosis::DiagnosisError;

/// How long one API write may take before the reconcile counts as failed and is retried.
pub const API_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a reconcile waits for the caches it reads before it fails, naming them, and is
/// retried: never a reconcile that waits silently (and holds a graceful shutdown) forever.
pub const FILL_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("the API server did not answer {0} within {API_TIMEOUT:?}")]
    Timeout(&'static str),
    /// A value OME would not accept, named by object and field.
    #[error(transparent)]
    BadObject(#[from] DiagnosisError),
    #[error("a cache stopped before it was filled")]
    CacheGone,
    /// The API server has not answered the first list of these caches' watches.
    #[error("the caches of {0} are not filled after {FILL_TIMEOUT:?}: their first list has not been answered")]
    NotFilled(String),
    /// Asked to stop before the caches filled: their watches end with the controller.
    #[error("stopping before the caches were filled")]
    Stopping,
}

impl Error {
    /// The kind of error, as the `error` label of the errors metric.
    pub fn kind(&self) -> String {
        match self {
            Self::Api(kube::Error::Api(status)) => format!("api_{}", status.code),
            Self::Api(_) => "api".into(),
            Self::Timeout(_) => "timeout".into(),
            Self::BadObject(_) => "bad_object".into(),
            Self::CacheGone | Self::NotFilled(_) | Self::Stopping => "cache".into(),
        }
    }
}

/// `call`, failed as [`Error::Timeout`] after [`API_TIMEOUT`].
pub async fn within_timeout<T>(
    what: &'static str,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<T, Error> {
    tokio::time::timeout(API_TIMEOUT, call)
        .await
        .map_err(|_| Error::Timeout(what))?
        .map_err(Error::from)
}

/// The one rule for a poisoned lock: go on with what it holds. Every lock of the controller
/// guards plain records that each write leaves whole, and a reconcile that panicked fails alone
/// (kube-runtime retries it): the process must not stop for it.
pub fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
