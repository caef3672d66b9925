//! Pushing a delta archive: the content it leaves to its base must already be at the
//! destination. Checked (HEAD) before anything is pushed; a missing base is named.

use crate::mirror::plan::ResolvedImage;
use crate::oci::layout::OciLayout;
use crate::oci::reference::RegistryTarget;
use crate::oci::registry::RegistryClient;
use anyhow::{bail, Result};
use std::collections::{BTreeMap, BTreeSet};

/// Checks that every base blob the images need is at the destination, in at least one of the
/// repositories that need it (the push mounts it into the others).
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
    let mut missing = Vec::new();
    for ((digest, size), repos) in &wanted {
        let mut found = false;
        for repo in repos {
            if client.head_blob(repo, digest).await? == Some(*size) {
                found = true;
                break;
            }
        }
        if !found {
            missing.push(format!(
                "{digest} ({})",
                repos.iter().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if !missing.is_empty() {
        let shown: Vec<&String> = missing.iter().take(5).collect();
        bail!(
            "{} is a delta over {} (sha256 {}), and {} of the {} blobs it leaves to that base are not at {}:\n  {}{}\npush the base archive first (bootstrap mirror --from archive://BASE {}), then this one; nothing was pushed",
            reader.dir().display(),
            base.path,
            base.sha256,
            missing.len(),
            wanted.len(),
            target.registry,
            shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("\n  "),
            if missing.len() > shown.len() { format!("\n  and {} more", missing.len() - shown.len()) } else { String::new() },
            target
        );
    }
    Ok(())
}
