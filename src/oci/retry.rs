//! When to try again and how long to wait: capped exponential backoff with jitter for transient
//! failures (connection errors, 5xx, 429, a cut or corrupted body, a stall), honouring
//! `Retry-After`. A policy in code, so every caller retries the same way and the final error can
//! say how hard we tried.

use super::digest::DigestMismatch;
use super::registry::RegistryError;
use super::stall::Stalled;
use std::time::Duration;

/// Environment variable that overrides the first backoff delay in milliseconds (`0` disables
/// the waits; tests use it so that injected faults do not cost seconds).
pub const RETRY_DELAY_ENV: &str = "BOOTSTRAP_RETRY_DELAY_MS";

/// The longest `Retry-After` we honour; a registry asking for more is treated as down.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// How many times to try and how long to wait between tries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries in all, the first included (1 means no retry).
    pub attempts: u32,
    /// The wait after the first failure; doubles after each further one.
    pub base: Duration,
    /// The longest wait between two tries.
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 6,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The default policy with `attempts` tries, and the first delay from
    /// [`RETRY_DELAY_ENV`] when it is set.
    pub fn with_attempts(attempts: u32) -> Self {
        let mut policy = RetryPolicy {
            attempts: attempts.max(1),
            ..RetryPolicy::default()
        };
        if let Some(ms) = std::env::var(RETRY_DELAY_ENV)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        {
            policy.base = Duration::from_millis(ms);
        }
        policy
    }

    /// A policy that never retries.
    pub fn once() -> Self {
        RetryPolicy {
            attempts: 1,
            ..RetryPolicy::default()
        }
    }

    /// The wait after failed attempt number `attempt` (1-based): the server's `Retry-After`
    /// when it gave one, else `base * 2^(attempt-1)` capped, with jitter over its upper half so
    /// that many transfers failing together do not come back together.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        if let Some(after) = retry_after {
            return after.min(MAX_RETRY_AFTER);
        }
        let exp = self
            .base
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(20))
            .min(self.cap);
        let half = exp / 2;
        half + half.mul_f64(jitter())
    }
}

/// The tries one unit of work (a blob) may spend, shared by its own retry loop and by the
/// request loops of every request it makes. Without it the two loops multiply: six tries per
/// blob times six per request let a dead source cost 36 GETs per blob. With it a blob makes at
/// most `attempts` tries in all, wherever they are spent.
///
/// The blob loop runs each attempt inside [`RetryBudget::scope`]; the registry client's request
/// loop asks [`may_retry`] before each retry. A task-local carries the budget from one to the
/// other so the registry client's API stays free of it; a request made outside any scope
/// (a manifest, a ping) keeps its own policy.
#[derive(Clone, Debug)]
pub struct RetryBudget {
    remaining: std::sync::Arc<std::sync::atomic::AtomicU32>,
    spent: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

tokio::task_local! {
    static BUDGET: RetryBudget;
}

impl RetryBudget {
    /// The budget of `policy`: its tries after the first.
    pub fn new(policy: &RetryPolicy) -> Self {
        RetryBudget {
            remaining: std::sync::Arc::new(policy.attempts.saturating_sub(1).into()),
            spent: std::sync::Arc::new(0.into()),
        }
    }

    /// Takes one retry; false when none is left.
    pub fn take(&self) -> bool {
        use std::sync::atomic::Ordering;
        let took = self
            .remaining
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if took {
            self.spent.fetch_add(1, Ordering::Relaxed);
        }
        took
    }

    /// Tries made so far under this budget, the first included.
    pub fn tries(&self) -> u32 {
        self.spent.load(std::sync::atomic::Ordering::Relaxed) + 1
    }

    /// Runs `fut` with this budget in scope for every request loop inside it.
    pub async fn scope<F: std::future::Future>(&self, fut: F) -> F::Output {
        BUDGET.scope(self.clone(), fut).await
    }
}

/// Asked by a request loop before it tries again: takes one retry from the budget in scope
/// and says whether there was one; true when no budget is in scope (the loop's own policy
/// decides).
pub fn may_retry() -> bool {
    BUDGET.try_with(RetryBudget::take).unwrap_or(true)
}

/// A number in [0, 1) that differs between calls and processes; good enough to spread retries.
fn jitter() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// True when `err` may go away if the same thing is tried again: a dropped or reset
/// connection, a cut body, a 5xx or 429 answer, content that arrived corrupted, a stall.
/// Refused credentials, missing content, a full disk and bad input are not.
pub fn is_transient(err: &anyhow::Error) -> bool {
    for cause in err.chain() {
        if let Some(e) = cause.downcast_ref::<RegistryError>() {
            return e.is_transient();
        }
        if cause.downcast_ref::<Stalled>().is_some()
            || cause.downcast_ref::<DigestMismatch>().is_some()
        {
            return true;
        }
        if let Some(e) = cause.downcast_ref::<reqwest::Error>() {
            return e.is_timeout() || e.is_connect() || e.is_body() || e.is_request();
        }
        if let Some(e) = cause.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            if e.get_ref()
                .is_some_and(|inner| inner.downcast_ref::<reqwest::Error>().is_some())
            {
                return true;
            }
            return matches!(
                e.kind(),
                ConnectionReset
                    | ConnectionAborted
                    | BrokenPipe
                    | UnexpectedEof
                    | TimedOut
                    | Interrupted
                    | InvalidData
            );
        }
    }
    false
}

/// The `Retry-After` a registry sent with the failure in `err`, if any.
pub fn retry_after(err: &anyhow::Error) -> Option<Duration> {
    err.chain()
        .find_map(|c| c.downcast_ref::<RegistryError>())
        .and_then(RegistryError::retry_after)
}

/// True when `err` is the disk running out of space.
pub fn is_disk_full(err: &anyhow::Error) -> bool {
    err.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|e| e.kind() == std::io::ErrorKind::StorageFull || e.raw_os_error() == Some(28))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: the blob loop and the request loop each took `--retries`, so a dead source
    /// cost attempts x attempts requests per blob. One budget serves both.
    #[tokio::test]
    async fn one_budget_is_shared_by_nested_loops() {
        let policy = RetryPolicy::with_attempts(3);
        let budget = RetryBudget::new(&policy);
        let inner = budget.scope(async { (may_retry(), may_retry(), may_retry()) });
        assert_eq!(inner.await, (true, true, false));
        assert!(!budget.take(), "the outer loop finds the budget spent");
        assert_eq!(budget.tries(), 3);
        assert!(
            may_retry(),
            "outside a scope a request keeps its own policy"
        );
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_jitter_in_the_upper_half() {
        let p = RetryPolicy {
            attempts: 10,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(8),
        };
        for (attempt, full) in [(1, 1), (2, 2), (3, 4), (4, 8), (9, 8)] {
            let d = p.delay(attempt, None);
            let full = Duration::from_secs(full);
            assert!(d >= full / 2 && d <= full, "attempt {attempt}: {d:?}");
        }
    }

    #[test]
    fn retry_after_wins_but_is_capped() {
        let p = RetryPolicy::default();
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(p.delay(1, Some(Duration::from_secs(9999))), MAX_RETRY_AFTER);
    }

    #[test]
    fn cut_connections_are_transient_and_a_full_disk_is_not() {
        let reset = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(is_transient(&reset.context("copying blob")));
        let full = anyhow::Error::new(std::io::Error::from_raw_os_error(28));
        assert!(!is_transient(&full));
        assert!(is_disk_full(&full.context("writing")));
        let missing = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(!is_transient(&missing));
    }
}
