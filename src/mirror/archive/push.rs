//! Pushing a delta archive: the content it leaves to its base must already be at the
//! destination. Checked (HEAD) before anything is pushed; a missing base is named.

use super::reader::ArchiveReader;
use super::BaseRef;
use crate::mirror::plan::ResolvedImage;
use crate::oci::digest::Digest;
use crate::oci::layout::OciLayout;
use crate::oci::reference::RegistryTarget;
use crate::oci::registry::{Mount, RegistryClient};
use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet};

/// Checks that every base blob the images need is at the destination, in a repository that
/// needs it or one the base was pushed to; nothing is pushed when any is missing. Then mounts
/// each into the repositories that need it and lack it.
pub async fn check_base(
    client: &RegistryClient,
    target: &RegistryTarget,
    layout: &OciLayout,
    images: &[ResolvedImage],
) -> Result<()> {
    let Some(reader) = layout.archive_reader() else {
        return Ok(());
    };
    let Some(base) = reader.manifest().base.clone() else {
        return Ok(());
    };
    let wanted = wanted_base_blobs(reader, target, images);
    let base_repos: Vec<String> = reader
        .manifest()
        .base_repositories
        .iter()
        .map(|r| target.repository_for(r))
        .collect();
    let mut missing = Vec::new();
    let mut mounts = Vec::new();
    for ((digest, size), repos) in &wanted {
        let (holder, lacking) = find_holder(client, digest, *size, repos, &base_repos).await?;
        match holder {
            Some(from) => mounts.extend(
                lacking
                    .into_iter()
                    .map(|to| (digest.clone(), to, from.clone())),
            ),
            None => missing.push(format!(
                "{digest} ({})",
                repos.iter().cloned().collect::<Vec<_>>().join(", ")
            )),
        }
    }
    if !missing.is_empty() {
        return Err(missing_base(reader, &base, target, &missing, wanted.len()));
    }
    // Every base blob is at the destination: mounted now into the repositories of the
    // delta's images that lack it (the push copies only what the delta carries).
    for (digest, to, from) in mounts {
        if let Mount::Upload(_) = client.mount_blob(&to, &digest, &from).await? {
            bail!(
                "{} could not mount base blob {digest} from {from} into {to}; push the base archive into {to} too (or to a registry that mounts across repositories)",
                target.registry
            );
        }
    }
    Ok(())
}

/// The refusal of a delta whose base is not all at the destination: which base, the first
/// few blobs missing (with the repositories that need them), and the push that fixes it.
fn missing_base(
    reader: &ArchiveReader,
    base: &BaseRef,
    target: &RegistryTarget,
    missing: &[String],
    wanted: usize,
) -> anyhow::Error {
    let shown: Vec<&String> = missing.iter().take(5).collect();
    anyhow::anyhow!(
        "{} is a delta over {} (sha256 {}), and {} of the {} blobs it leaves to that base are not at {}:\n  {}{}\npush the base archive first (bootstrap mirror --from archive://BASE {}), then this one; nothing was pushed",
        reader.dir().display(),
        base.path,
        base.sha256,
        missing.len(),
        wanted,
        target.registry,
        shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
        if missing.len() > shown.len() { format!("\n  and {} more", missing.len() - shown.len()) } else { String::new() },
        target
    )
}

/// The blobs the images need that the archive leaves to its base, with the destination
/// repositories that need each.
fn wanted_base_blobs(
    reader: &ArchiveReader,
    target: &RegistryTarget,
    images: &[ResolvedImage],
) -> BTreeMap<(Digest, u64), BTreeSet<String>> {
    let mut wanted: BTreeMap<_, BTreeSet<String>> = BTreeMap::new();
    for img in images {
        for b in &img.blobs {
            if reader.size(&b.digest).is_none() && reader.base_size(&b.digest).is_some() {
                wanted
                    .entry((b.digest.clone(), b.size))
                    .or_default()
                    .insert(target.repository_for(img.dest_path()));
            }
        }
    }
    wanted
}

/// Where a base blob already is (HEAD, with its size): a repository that needs it, else one
/// the base was pushed to; and the repositories that need it and lack it.
async fn find_holder(
    client: &RegistryClient,
    digest: &Digest,
    size: u64,
    repos: &BTreeSet<String>,
    base_repos: &[String],
) -> Result<(Option<String>, Vec<String>)> {
    let mut holder = None;
    let mut lacking = Vec::new();
    for repo in repos {
        if client.head_blob(repo, digest).await? == Some(size) {
            holder.get_or_insert_with(|| repo.clone());
        } else {
            lacking.push(repo.clone());
        }
    }
    if holder.is_none() {
        for repo in base_repos.iter().filter(|r| !repos.contains(*r)) {
            if client.head_blob(repo, digest).await? == Some(size) {
                holder = Some(repo.clone());
                break;
            }
        }
    }
    Ok((holder, lacking))
}
