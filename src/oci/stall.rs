//! The stall detector: a transfer is abandoned (and retried) when its throughput stays below a
//! floor for a whole window, never because it is big or slow but moving. This replaces any
//! wall-clock timeout per blob, which kills a 40 GB model layer on a link that is merely slow.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// When a transfer counts as stalled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StallPolicy {
    /// How long throughput may stay below the floor.
    pub window: Duration,
    /// Bytes per second a transfer must keep up over a window.
    pub floor: u64,
}

impl Default for StallPolicy {
    fn default() -> Self {
        StallPolicy {
            window: Duration::from_secs(60),
            floor: 1024,
        }
    }
}

/// A transfer moved less than the floor over a whole window.
#[derive(Debug, thiserror::Error)]
#[error("stalled: {moved} bytes in the last {window:?}, below the floor of {floor} bytes/s (see --stall-timeout and --stall-floor)")]
pub struct Stalled {
    /// Bytes moved during the window.
    pub moved: u64,
    /// The window.
    pub window: Duration,
    /// The floor.
    pub floor: u64,
}

/// Runs `work`, watching `counter` (bytes moved so far, updated by the work as it goes); fails
/// with [`Stalled`] when a window passes with fewer than `window * floor` bytes moved. The work
/// is dropped then, which cancels its requests.
pub async fn watch<T>(
    policy: StallPolicy,
    counter: &AtomicU64,
    work: impl Future<Output = T>,
) -> Result<T, Stalled> {
    let needed = policy.floor.saturating_mul(policy.window.as_secs().max(1));
    let watchdog = async {
        let mut ticks = tokio::time::interval(policy.window);
        ticks.tick().await;
        let mut seen = counter.load(Ordering::Relaxed);
        loop {
            ticks.tick().await;
            let now = counter.load(Ordering::Relaxed);
            let moved = now.saturating_sub(seen);
            if moved < needed {
                return Stalled {
                    moved,
                    window: policy.window,
                    floor: policy.floor,
                };
            }
            seen = now;
        }
    };
    tokio::select! {
        out = work => Ok(out),
        stalled = watchdog => Err(stalled),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_silent_transfer_is_stalled_and_a_moving_one_is_not() {
        let policy = StallPolicy {
            window: Duration::from_secs(2),
            floor: 10,
        };
        let counter = AtomicU64::new(0);
        let silent = watch(
            policy,
            &counter,
            tokio::time::sleep(Duration::from_secs(60)),
        )
        .await;
        assert!(silent.is_err());

        let moving = async {
            for _ in 0..30 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                counter.fetch_add(100, Ordering::Relaxed);
            }
            "done"
        };
        assert_eq!(watch(policy, &counter, moving).await.unwrap(), "done");
    }
}
