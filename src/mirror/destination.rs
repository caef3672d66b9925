//! The destination of a run: reached (a registry) or checked (a directory) before anything
//! is resolved, created and locked only once every image resolved, and its working directory.

use super::transfer::Destination;
use super::Location;
use crate::oci::layout::OciLayout;
use crate::oci::registry::Registries;
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};

/// Reaches a registry destination first: an unreachable or refusing registry should fail in
/// seconds, not after the whole set was resolved. A disk destination is only checked here;
/// it is created after every image resolved, so bad input leaves nothing behind.
pub(super) async fn connect_destination(dest: &Location, regs: &Registries) -> Result<Destination> {
    match dest {
        Location::Registry(target) => {
            let client = regs.client(&target.registry)?;
            client
                .ping()
                .await
                .context("checking the destination registry")?;
            Ok(Destination::Registry {
                client,
                target: target.clone(),
            })
        }
        Location::Disk(dir) => {
            if dir.exists() && !dir.is_dir() {
                bail!(
                    "destination {} exists and is not a directory",
                    dir.display()
                );
            }
            Ok(Destination::Layout(OciLayout::unopened(dir)))
        }
        Location::Archive(dir) => {
            super::archive::writer::check_target(dir)?;
            // The layout's small files are written into the staging directory; its blobs go
            // into the chunks (see `archive::writer`).
            Ok(Destination::Layout(OciLayout::unopened(
                &super::archive::writer::staging_dir(dir),
            )))
        }
    }
}

/// The working directory: `--workdir`, else `DIR/.bootstrap` inside a disk mirror (hidden
/// files stay out of SHA256SUMS), else `./.bootstrap-work`.
pub(super) fn workdir_for(dest: &Destination, workdir: Option<&Path>) -> PathBuf {
    match (workdir, dest) {
        (Some(w), _) => w.to_path_buf(),
        (None, Destination::Layout(l)) => l.root().join(".bootstrap"),
        (None, Destination::Registry { .. }) => PathBuf::from(".bootstrap-work"),
    }
}

/// Creates a disk destination and takes its lock; picks the working directory.
pub(super) fn open_destination(
    dest: Destination,
    workdir: Option<&Path>,
) -> Result<(Destination, Option<fs_err::File>, PathBuf)> {
    let workdir = workdir_for(&dest, workdir);
    match dest {
        Destination::Layout(l) => {
            let layout = OciLayout::create(l.root())?;
            let layout = match l.archive_writer() {
                Some(w) => layout.with_writer(w.clone()),
                None => layout,
            };
            let lock = layout.lock()?;
            Ok((Destination::Layout(layout), Some(lock), workdir))
        }
        d => Ok((d, None, workdir)),
    }
}
