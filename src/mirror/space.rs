//! Preflight for disk space: a 2 TB mirror that fills the disk after ten hours is worse than
//! one refused in the first second. The bytes still to write (blobs not yet in the layout,
//! less what partial files already hold) are compared with the free space where they go.

use super::plan::BlobNode;
use crate::oci::layout::OciLayout;
use crate::output::human_bytes;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// Room kept free beyond the blobs: manifests, index, record, checkpoints, filesystem slack.
const MARGIN: u64 = 64 * 1024 * 1024;

/// Bytes available to an unprivileged writer on the filesystem holding `path`.
pub fn free_bytes(path: &Path) -> Result<u64> {
    let st = rustix::fs::statvfs(path)
        .with_context(|| format!("reading the free space of {}", path.display()))?;
    Ok(st.f_bavail.saturating_mul(st.f_frsize))
}

/// Bytes a mirror into `layout` still has to write for `nodes`.
pub fn bytes_to_write(layout: &OciLayout, nodes: &[BlobNode]) -> u64 {
    nodes
        .iter()
        .filter(|n| layout.blob_size(&n.blob.digest) != Some(n.blob.size))
        .map(|n| {
            n.blob
                .size
                .saturating_sub(layout.partial_len(&n.blob.digest, n.blob.size))
        })
        .sum()
}

/// Refuses to start when the layout's filesystem cannot take what is still to write,
/// naming both numbers and the flag that overrides the check.
pub fn preflight(layout: &OciLayout, nodes: &[BlobNode], ignore: bool) -> Result<()> {
    let needed = bytes_to_write(layout, nodes);
    if needed == 0 {
        return Ok(());
    }
    let free = free_bytes(layout.root())?;
    if free < needed.saturating_add(MARGIN) {
        if ignore {
            tracing::warn!(
                "{} has {} free for {} to write; going on as --ignore-free-space says",
                layout.root().display(),
                human_bytes(free),
                human_bytes(needed)
            );
            return Ok(());
        }
        bail!(
            "not enough space at {}: {} still to write (plus {} margin) but only {} free; free some space or choose another destination, or pass --ignore-free-space to start anyway",
            layout.root().display(),
            human_bytes(needed),
            human_bytes(MARGIN),
            human_bytes(free)
        );
    }
    Ok(())
}
