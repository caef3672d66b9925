//! The update graph data image and the UpdateService that serves it, as oc-mirror v2 builds
//! them (internal/pkg/release/graph.go, internal/pkg/clusterresources): the graph data tarball
//! (cincinnati-graph-data, from `https://api.openshift.com/api/upgrades_info/graph-data`)
//! re-rooted under `/var/lib/cincinnati-graph-data/` with owner root (uid and gid 0), added
//! as one layer on top of UBI 9 (`registry.access.redhat.com/ubi9/ubi:latest`, every platform
//! of it), with the command the OpenShift Update Service's init container runs:
//! `/bin/bash -c "exec cp -rp /var/lib/cincinnati-graph-data/* /var/lib/cincinnati/graph-data"`.
//! It is pushed as `<prefix>/openshift/graph-image:latest`, and an UpdateService
//! (`updateservice.operator.openshift.io/v1`, `update-service-oc-mirror` in
//! `openshift-update-service`, 2 replicas) names it and the mirrored release repository.

use super::rebuild::{ConfigsLayer, Rewrite};
use anyhow::{bail, Context, Result};
use std::io::Read;

/// Where oc-mirror fetches the graph data (a gzip-compressed tarball of cincinnati-graph-data).
pub const DEFAULT_GRAPH_DATA_URL: &str = "https://api.openshift.com/api/upgrades_info/graph-data";
/// The image the graph data is layered on (oc-mirror's `graphBaseImage`).
pub const DEFAULT_BASE_IMAGE: &str = "registry.access.redhat.com/ubi9/ubi:latest";
/// The destination repository of the graph data image (oc-mirror's `graphImageName`).
pub const GRAPH_IMAGE_REPO: &str = "openshift/graph-image";
/// Its tag.
pub const GRAPH_IMAGE_TAG: &str = "latest";
/// Where the data sits in the image (oc-mirror's `buildGraphDataDir`).
pub const DATA_DIR: &str = "var/lib/cincinnati-graph-data";
/// The largest graph data tarball read (compressed); the real one is a few MiB.
pub const MAX_GRAPH_DATA_BYTES: usize = 256 * 1024 * 1024;

/// The graph data image's config change: its command copies the data where the Update
/// Service reads it.
pub fn rewrite() -> Rewrite {
    Rewrite {
        created_by: "bootstrap mirror: the OpenShift update graph data (cincinnati-graph-data)",
        cmd: Some(vec![
            "/bin/bash".into(),
            "-c".into(),
            "exec cp -rp /var/lib/cincinnati-graph-data/* /var/lib/cincinnati/graph-data".into(),
        ]),
    }
}

/// The graph data layer: every entry of the tarball `tgz` under [`DATA_DIR`], owned by root,
/// modes and contents kept; gzip-compressed. An entry leaving the tarball's root, or a link,
/// device or FIFO, is refused.
pub fn graph_layer(tgz: &[u8]) -> Result<ConfigsLayer> {
    let mut input = tar::Archive::new(flate2::read::GzDecoder::new(tgz));
    let mut out = tar::Builder::new(Vec::new());
    let mut files = 0usize;
    for entry in input.entries().context("reading the graph data tarball")? {
        let mut entry = entry.context("reading the graph data tarball")?;
        let path = entry.path()?.into_owned();
        let name = path.to_string_lossy().to_string();
        let parts = match crate::oci::layers::normalise(&entry.path_bytes()) {
            Ok(parts) => parts,
            Err(_) => bail!("graph data entry {name:?} leaves the tarball's root"),
        };
        let kind = entry.header().entry_type();
        if matches!(
            kind,
            tar::EntryType::XGlobalHeader | tar::EntryType::XHeader
        ) {
            continue;
        }
        let target = if parts.is_empty() {
            format!("{DATA_DIR}/")
        } else {
            format!("{DATA_DIR}/{}", parts.join("/"))
        };
        let mode = entry.header().mode().unwrap_or(0o644);
        let mut h = tar::Header::new_ustar();
        h.set_mode(mode);
        h.set_mtime(entry.header().mtime().unwrap_or(0));
        h.set_uid(0);
        h.set_gid(0);
        match kind {
            tar::EntryType::Directory => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_size(0);
                let dir = if target.ends_with('/') {
                    target
                } else {
                    format!("{target}/")
                };
                out.append_data(&mut h, dir, std::io::empty())?;
            }
            tar::EntryType::Regular | tar::EntryType::Continuous => {
                let mut data = Vec::new();
                entry.read_to_end(&mut data)?;
                h.set_entry_type(tar::EntryType::Regular);
                h.set_size(data.len() as u64);
                out.append_data(&mut h, target, data.as_slice())?;
                files += 1;
            }
            other => bail!(
                "graph data entry {name:?} is a {other:?}; only files and directories are taken"
            ),
        }
    }
    if files == 0 {
        bail!("the graph data tarball holds no files");
    }
    Ok(ConfigsLayer::from_tar(&out.into_inner()?)?)
}

/// The UpdateService oc-mirror writes (`cluster-resources/updateService.yaml`): `releases` is
/// the mirrored release repository (no tag), `graph_image` the graph data image at its
/// destination; `annotations` those every resource of the run carries.
pub fn update_service_yaml(
    releases: &str,
    graph_image: &str,
    annotations: &std::collections::BTreeMap<&'static str, String>,
) -> Result<String> {
    let doc = serde_json::json!({
        "apiVersion": "updateservice.operator.openshift.io/v1",
        "kind": "UpdateService",
        "metadata": {
            "annotations": annotations,
            "name": "update-service-oc-mirror",
            "namespace": "openshift-update-service",
        },
        "spec": {
            "graphDataImage": graph_image,
            "releases": releases,
            "replicas": 2,
        },
    });
    Ok(serde_saphyr::to_string(&doc)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::digest::Digest;
    use std::io::Write;

    fn tarball(files: &[(&str, &str)]) -> Vec<u8> {
        let mut tar = tar::Builder::new(Vec::new());
        for (path, text) in files {
            let mut h = tar::Header::new_ustar();
            h.set_size(text.len() as u64);
            h.set_mode(0o600);
            h.set_uid(1000);
            tar.append_data(&mut h, path, text.as_bytes()).unwrap();
        }
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar.into_inner().unwrap()).unwrap();
        gz.finish().unwrap()
    }

    #[test]
    fn the_layer_re_roots_the_data_as_root() {
        let layer = graph_layer(&tarball(&[(
            "channels/stable-4.18.yaml",
            "name: stable-4.18\n",
        )]))
        .unwrap();
        let bytes = layer.bytes.to_bytes().unwrap();
        assert_eq!(layer.digest, Digest::of(&bytes));
        let mut a = tar::Archive::new(flate2::read::GzDecoder::new(&bytes[..]));
        let entries: Vec<(String, u64, u32)> = a
            .entries()
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.path().unwrap().to_string_lossy().to_string(),
                    e.header().uid().unwrap(),
                    e.header().mode().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            entries,
            [(
                "var/lib/cincinnati-graph-data/channels/stable-4.18.yaml".to_string(),
                0,
                0o600
            )]
        );
    }

    #[test]
    fn an_escaping_entry_is_refused() {
        let mut tar = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(1);
        h.as_gnu_mut().unwrap().name[..6].copy_from_slice(b"../x.y");
        h.set_cksum();
        tar.append(&h, &b"x"[..]).unwrap();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&tar.into_inner().unwrap()).unwrap();
        let err = graph_layer(&gz.finish().unwrap()).unwrap_err();
        assert!(
            err.to_string().contains("leaves the tarball's root"),
            "{err}"
        );
    }

    #[test]
    fn the_update_service_is_oc_mirrors() {
        let text = update_service_yaml(
            "mirror.example:5000/p/openshift/release-images",
            "mirror.example:5000/p/openshift/graph-image:latest",
            &Default::default(),
        )
        .unwrap();
        let v: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
        assert_eq!(v["kind"], "UpdateService");
        assert_eq!(v["metadata"]["name"], "update-service-oc-mirror");
        assert_eq!(v["spec"]["replicas"], 2);
        assert_eq!(
            v["spec"]["graphDataImage"],
            "mirror.example:5000/p/openshift/graph-image:latest"
        );
    }
}
