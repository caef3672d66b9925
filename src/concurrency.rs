//! How much runs at once: the named limits of every bounded stream in the tool, in one value
//! (uv's `Concurrency`). Counts are `NonZeroUsize`, so a zero limit (a run that would wait
//! forever) cannot be expressed, and no caller needs a scattered `.max(1)`.

use std::num::NonZeroUsize;

/// The limits of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Concurrency {
    /// Blobs in flight at once (and images resolved at once).
    pub blobs: NonZeroUsize,
    /// Blob transfers talking to one registry at once (source or destination).
    pub per_registry: NonZeroUsize,
}

impl Concurrency {
    /// Default blobs in flight, and default transfers per registry.
    pub const DEFAULT_BLOBS: NonZeroUsize = NonZeroUsize::new(8).expect("8 is not zero");

    /// Files re-hashed at once by `bootstrap verify`: disks, not cores, are the limit on the
    /// small machines this runs on.
    pub const FILE_HASHES: NonZeroUsize = NonZeroUsize::new(2).expect("2 is not zero");

    /// Images resolved at once: as many as blobs in flight (each resolution is a few small
    /// requests).
    pub fn resolves(&self) -> usize {
        self.blobs.get()
    }

    /// Manifests pushed or checked at once: small requests, so twice the blob limit.
    pub fn manifests(&self) -> usize {
        self.blobs.get().saturating_mul(2)
    }
}

impl Default for Concurrency {
    fn default() -> Self {
        Concurrency {
            blobs: Self::DEFAULT_BLOBS,
            per_registry: Self::DEFAULT_BLOBS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_run_twice_as_wide_as_blobs() {
        let c = Concurrency {
            blobs: NonZeroUsize::new(3).unwrap(),
            per_registry: NonZeroUsize::MIN,
        };
        assert_eq!(c.manifests(), 6);
        assert_eq!(c.resolves(), 3);
        assert_eq!(Concurrency::default().blobs.get(), 8);
    }
}
