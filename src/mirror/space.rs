//! Preflight for disk space: a 2 TB mirror that fills the disk after ten hours is worse than
//! one refused in the first second. The bytes still to write (blobs not yet in the layout,
//! less what partial files already hold) are compared with the free space where they go, and
//! the working directory (the upload journal of a registry destination) must have some room.
//! Before either, no single blob may declare more than `--max-blob-size`: a manifest claiming
//! a layer larger than any disk is refused before download, `--ignore-free-space` or not.

use super::plan::BlobNode;
use crate::oci::layout::OciLayout;
use crate::output::human_bytes;
use anyhow::{bail, Context, Result};
use std::path::Path;

/// The default cap on one blob's declared size: 1 TiB. The largest real layers are model
/// weights; a model file rarely exceeds 50 GB (Hugging Face's per-file limit; big models are
/// sharded) and `bootstrap model pack` gives each file its own layer, so even a whole 405B
/// model in FP16 (~810 GB) packed as one file stays under it. A declared size beyond it is a
/// mistake or an attack (a manifest saying 2^62 bytes) and is refused before any download.
pub const DEFAULT_MAX_BLOB_SIZE: u64 = 1 << 40;

/// Refuses the plan when a blob declares more than `cap` bytes, naming the image, the blob,
/// its declared size, the cap and the flag that raises it. Checked before any download and
/// whatever `--ignore-free-space` says: no disk holds such a blob, and a source that declares
/// one is not to be trusted with a download that would run until the disk is full.
pub fn check_blob_sizes(nodes: &[BlobNode], cap: u64) -> Result<()> {
    if let Some(n) = nodes.iter().find(|n| n.blob.size > cap) {
        bail!(
            "{}: blob {} declares {} ({} bytes), more than the {} allowed for one blob; the manifest is wrong or hostile, or, if the blob is real, pass --max-blob-size with a larger size (e.g. --max-blob-size 4TiB)",
            n.from,
            n.blob.digest,
            human_bytes(n.blob.size),
            n.blob.size,
            human_bytes(cap)
        );
    }
    Ok(())
}

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

/// Room the working directory needs: upload journal entries and resolved-image cache files,
/// a few KiB per image.
const WORKDIR_NEED: u64 = 16 * 1024 * 1024;

/// Refuses to start when the working directory's filesystem (or that of its nearest existing
/// parent) is nearly full: a journal that cannot be written loses what a rerun would continue.
pub fn preflight_workdir(workdir: &Path, ignore: bool) -> Result<()> {
    let existing = workdir
        .ancestors()
        .find(|p| p.exists())
        .unwrap_or(Path::new("."));
    let free = free_bytes(existing)?;
    if free < WORKDIR_NEED && !ignore {
        bail!(
            "not enough space for the working directory {}: {} free, {} needed for the upload journal; free some space or pass --workdir DIR on another filesystem (or --ignore-free-space)",
            workdir.display(),
            human_bytes(free),
            human_bytes(WORKDIR_NEED)
        );
    }
    Ok(())
}
