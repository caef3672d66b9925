//! The filtered catalog image: the source catalog's layers reused as they are, one new layer on
//! top holding the filtered configs, and the config and manifest rewritten to match. The new
//! layer first empties the config directory (an opaque whiteout), so nothing of the source's
//! catalog shows through, and empties the serving cache directory the image's command names
//! (`--cache-dir=/tmp/cache`), whose contents describe the unfiltered catalog; `opm serve`
//! rebuilds the cache at start. Labels, entrypoint and command are kept. Deterministic: the same
//! source and files give the same digests.

use crate::oci::digest::{Digest, StreamHasher};
use crate::oci::made::{MadeBlob, SpoolWriter};
use crate::oci::manifest::RawManifest;
use anyhow::{bail, Context, Result};
use bytes::Bytes;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

/// The new layer: gzip-compressed tar and the digest of its uncompressed tar (its diff_id).
#[derive(Clone, Debug)]
pub struct ConfigsLayer {
    /// The compressed layer, as pushed (spooled to a temporary file when written by
    /// [`ConfigsLayerWriter`]).
    pub bytes: MadeBlob,
    /// The layer's digest.
    pub digest: Digest,
    /// The uncompressed tar's digest, for the config's `rootfs.diff_ids`.
    pub diff_id: Digest,
}

impl ConfigsLayer {
    /// The layer of an uncompressed tar: its diff_id, then gzip-compressed and digested.
    pub fn from_tar(tar_bytes: &[u8]) -> std::io::Result<Self> {
        let diff_id = Digest::of(tar_bytes);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(tar_bytes)?;
        let bytes = Bytes::from(gz.finish()?);
        Ok(ConfigsLayer {
            digest: Digest::of(&bytes),
            bytes: MadeBlob::Memory(bytes),
            diff_id,
        })
    }
}

/// One rebuilt single-platform image.
#[derive(Clone, Debug)]
pub struct RebuiltManifest {
    /// The new manifest.
    pub manifest: RawManifest,
    /// The new config blob.
    pub config: Bytes,
    /// The new config's digest.
    pub config_digest: Digest,
}

/// Directory components of an absolute or relative image path (`/configs` -> `configs`).
fn components(path: &str) -> Result<Vec<&str>> {
    let parts: Vec<&str> = path
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    if parts.is_empty() || parts.contains(&"..") {
        bail!("'{path}' does not name a directory below the image root");
    }
    Ok(parts)
}

/// The cache directory an `opm serve` command line names (`--cache-dir=DIR` or
/// `--cache-dir DIR`), read from the image config's `config.Cmd` and `config.Entrypoint`.
pub fn cache_dir_of(config: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(config).ok()?;
    let inner = value.get("config")?;
    let mut args: Vec<&str> = Vec::new();
    for key in ["Entrypoint", "Cmd"] {
        if let Some(list) = inner.get(key).and_then(Value::as_array) {
            args.extend(list.iter().filter_map(Value::as_str));
        }
    }
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if let Some(dir) = arg.strip_prefix("--cache-dir=") {
            return Some(dir.to_string());
        }
        if *arg == "--cache-dir" {
            return it.next().map(|s| s.to_string());
        }
    }
    None
}

/// Builds the configs layer: directories, then an opaque whiteout in the config directory
/// (and in `cache_dir`, when given), then `files` (paths relative to the config directory).
pub fn configs_layer(
    files: &BTreeMap<String, Vec<u8>>,
    config_dir: &str,
    cache_dir: Option<&str>,
) -> Result<ConfigsLayer> {
    let mut w = ConfigsLayerWriter::new(files.keys().cloned(), config_dir, cache_dir)?;
    for (name, data) in files {
        w.append(name, data)?;
    }
    w.finish()
}

/// A writer that hashes what passes through it.
struct Hashing<W> {
    inner: W,
    hasher: StreamHasher,
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

type LayerStream = Hashing<flate2::write::GzEncoder<Hashing<SpoolWriter>>>;

/// [`configs_layer`] written one file at a time: the tar is compressed and hashed as it is
/// written, and the compressed layer goes to an unlinked temporary file (TMPDIR): neither the
/// files, the tar nor the layer are held in memory.
/// The names are given first (for the directory entries); the files must then come in that
/// (sorted) order, and all of them.
pub struct ConfigsLayerWriter {
    tar: tar::Builder<LayerStream>,
    root: String,
    names: Vec<String>,
    next: usize,
}

fn entry_header(kind: tar::EntryType, size: u64, mode: u32) -> tar::Header {
    let mut h = tar::Header::new_ustar();
    h.set_entry_type(kind);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(0);
    h.set_uid(0);
    h.set_gid(0);
    h
}

impl ConfigsLayerWriter {
    /// Starts the layer for files `names` (relative to `config_dir`; sorted here): writes the
    /// directories and the opaque whiteouts.
    pub fn new(
        names: impl IntoIterator<Item = String>,
        config_dir: &str,
        cache_dir: Option<&str>,
    ) -> Result<Self> {
        let root = components(config_dir)?.join("/");
        let cache = cache_dir.map(components).transpose()?.map(|c| c.join("/"));
        let mut dirs = BTreeSet::new();
        let add_parents = |path: &str, dirs: &mut BTreeSet<String>| {
            let mut acc = String::new();
            for part in path.split('/') {
                if !acc.is_empty() {
                    acc.push('/');
                }
                acc.push_str(part);
                dirs.insert(acc.clone());
            }
        };
        add_parents(&root, &mut dirs);
        if let Some(c) = &cache {
            add_parents(c, &mut dirs);
        }
        let names: BTreeSet<String> = names.into_iter().collect();
        for name in &names {
            let rel = components(name).with_context(|| format!("catalog file '{name}'"))?;
            let path = format!("{root}/{}", rel.join("/"));
            if let Some((parent, _)) = path.rsplit_once('/') {
                add_parents(parent, &mut dirs);
            }
        }
        let gz = flate2::write::GzEncoder::new(
            Hashing {
                inner: SpoolWriter::new("the rebuilt catalog layer")?,
                hasher: StreamHasher::new(),
            },
            flate2::Compression::default(),
        );
        let mut tar = tar::Builder::new(Hashing {
            inner: gz,
            hasher: StreamHasher::new(),
        });
        for dir in &dirs {
            let mut h = entry_header(tar::EntryType::Directory, 0, 0o755);
            tar.append_data(&mut h, format!("{dir}/"), std::io::empty())?;
        }
        let mut whiteouts = vec![format!("{root}/.wh..wh..opq")];
        whiteouts.extend(cache.iter().map(|c| format!("{c}/.wh..wh..opq")));
        for w in whiteouts {
            let mut h = entry_header(tar::EntryType::Regular, 0, 0o644);
            tar.append_data(&mut h, w, std::io::empty())?;
        }
        Ok(ConfigsLayerWriter {
            tar,
            root,
            names: names.into_iter().collect(),
            next: 0,
        })
    }

    /// The name the next [`append`](Self::append) must give, if any is left.
    pub fn expected(&self) -> Option<&str> {
        self.names.get(self.next).map(String::as_str)
    }

    /// Writes file `name`, which must be the next of the names given to [`new`](Self::new).
    pub fn append(&mut self, name: &str, data: &[u8]) -> Result<()> {
        if self.expected() != Some(name) {
            bail!(
                "catalog layer: file '{name}' written out of order (expected {:?})",
                self.expected()
            );
        }
        self.next += 1;
        let rel = components(name)?.join("/");
        let mut h = entry_header(tar::EntryType::Regular, data.len() as u64, 0o644);
        self.tar
            .append_data(&mut h, format!("{}/{rel}", self.root), data)?;
        Ok(())
    }

    /// The finished layer; every named file must have been written.
    pub fn finish(self) -> Result<ConfigsLayer> {
        if let Some(missing) = self.expected() {
            bail!("catalog layer: file '{missing}' was never written");
        }
        let tar = self.tar.into_inner()?;
        let (diff_id, _) = tar.hasher.finish();
        let gz = tar.inner.finish()?;
        let (digest, _) = gz.hasher.finish();
        Ok(ConfigsLayer {
            bytes: gz.inner.finish()?,
            digest,
            diff_id,
        })
    }
}

/// How a rebuilt image's config changes besides the new layer.
#[derive(Clone, Debug)]
pub struct Rewrite {
    /// The history entry the new layer gets.
    pub created_by: &'static str,
    /// A new `config.Cmd`, when the image's command changes (the graph data image).
    pub cmd: Option<Vec<String>>,
}

impl Rewrite {
    /// A filtered catalog: the layer added, labels, entrypoint and command kept.
    pub const CATALOG: Rewrite = Rewrite {
        created_by: "bootstrap mirror: the catalog filtered to the selected operators",
        cmd: None,
    };
}

/// Rewrites one single-platform catalog image: `layer` appended to the manifest's layers and
/// to the config's `rootfs.diff_ids` and `history`, everything else kept.
pub fn rebuild_manifest(
    manifest: &RawManifest,
    config: &[u8],
    layer: &ConfigsLayer,
) -> Result<RebuiltManifest> {
    rebuild_manifest_with(manifest, config, layer, &Rewrite::CATALOG)
}

/// [`rebuild_manifest`] with the config changed as `rewrite` says.
pub fn rebuild_manifest_with(
    manifest: &RawManifest,
    config: &[u8],
    layer: &ConfigsLayer,
    rewrite: &Rewrite,
) -> Result<RebuiltManifest> {
    let mut cfg: Value =
        serde_json::from_slice(config).context("the catalog's image config is not JSON")?;
    if let Some(cmd) = &rewrite.cmd {
        let inner = cfg
            .as_object_mut()
            .context("the image config is not a JSON object")?
            .entry("config")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(obj) = inner.as_object_mut() {
            obj.insert("Cmd".into(), serde_json::json!(cmd));
        }
    }
    let diff_ids = cfg
        .pointer_mut("/rootfs/diff_ids")
        .and_then(Value::as_array_mut)
        .context("the catalog's image config has no rootfs.diff_ids")?;
    diff_ids.push(Value::String(layer.diff_id.to_string()));
    if let Some(obj) = cfg.as_object_mut() {
        let history = obj
            .entry("history")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Some(h) = history.as_array_mut() {
            h.push(serde_json::json!({
                "created_by": rewrite.created_by,
                "comment": "bootstrap",
            }));
        }
    }
    let config_bytes = Bytes::from(serde_json::to_vec(&cfg)?);
    let config_digest = Digest::of(&config_bytes);
    let mut m: Value =
        serde_json::from_slice(&manifest.bytes).context("the catalog's manifest is not JSON")?;
    let docker = manifest.media_type.contains("docker");
    let layer_type = if docker {
        "application/vnd.docker.image.rootfs.diff.tar.gzip"
    } else {
        "application/vnd.oci.image.layer.v1.tar+gzip"
    };
    let config_desc = m
        .get_mut("config")
        .and_then(Value::as_object_mut)
        .context("the catalog's manifest has no config")?;
    config_desc.insert("digest".into(), Value::String(config_digest.to_string()));
    config_desc.insert("size".into(), Value::from(config_bytes.len() as u64));
    let layers = m
        .get_mut("layers")
        .and_then(Value::as_array_mut)
        .context("the catalog's manifest has no layers")?;
    layers.push(serde_json::json!({
        "mediaType": layer_type,
        "digest": layer.digest.to_string(),
        "size": layer.bytes.len(),
    }));
    let bytes = Bytes::from(serde_json::to_vec(&m)?);
    Ok(RebuiltManifest {
        manifest: RawManifest::new(bytes, Some(&manifest.media_type)),
        config: config_bytes,
        config_digest,
    })
}

/// Rewrites an index: only the entries in `replaced` (old digest -> new manifest) are kept,
/// each pointing at its new manifest; platform and annotations kept.
pub fn rebuild_index(
    index: &RawManifest,
    replaced: &BTreeMap<String, RawManifest>,
) -> Result<RawManifest> {
    let mut value: Value =
        serde_json::from_slice(&index.bytes).context("the catalog's index is not JSON")?;
    let entries = value
        .get_mut("manifests")
        .and_then(Value::as_array_mut)
        .context("the catalog's index has no manifests")?;
    entries.retain(|e| {
        e.get("digest")
            .and_then(Value::as_str)
            .is_some_and(|d| replaced.contains_key(d))
    });
    for e in entries.iter_mut() {
        let old = e.get("digest").and_then(Value::as_str).unwrap_or_default();
        let new = &replaced[old];
        e["digest"] = Value::String(new.digest.to_string());
        e["size"] = Value::from(new.bytes.len() as u64);
    }
    Ok(RawManifest::new(
        Bytes::from(serde_json::to_vec(&value)?),
        Some(&index.media_type),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oci::layers::read_config_dir;

    fn files() -> BTreeMap<String, Vec<u8>> {
        BTreeMap::from([
            ("nfd/catalog.json".to_string(), b"{\"a\":1}".to_vec()),
            ("catalog.json".to_string(), b"{}".to_vec()),
        ])
    }

    #[test]
    fn the_layer_hides_the_source_catalog_and_is_deterministic() {
        let old = {
            let mut tar = tar::Builder::new(Vec::new());
            for (path, data) in [
                ("configs/gone/catalog.json", &b"old"[..]),
                ("configs/nfd/catalog.json", &b"old"[..]),
            ] {
                let mut h = tar::Header::new_gnu();
                h.set_size(data.len() as u64);
                h.set_mode(0o644);
                h.set_cksum();
                tar.append_data(&mut h, path, data).unwrap();
            }
            tar.into_inner().unwrap()
        };
        let layer = configs_layer(&files(), "/configs", Some("/tmp/cache")).unwrap();
        let again = configs_layer(&files(), "/configs", Some("/tmp/cache")).unwrap();
        assert_eq!(layer.digest, again.digest);
        let new = layer.bytes.to_bytes().unwrap();
        let read = read_config_dir(
            [&old[..], &new[..]].into_iter().map(std::io::Cursor::new),
            "/configs",
        )
        .unwrap();
        assert_eq!(read, files());
    }

    #[test]
    fn the_streamed_layer_is_the_tar_compressed_in_one_go_and_its_digests_match() {
        let layer = configs_layer(&files(), "/configs", Some("/tmp/cache")).unwrap();
        let bytes = layer.bytes.to_bytes().unwrap();
        let mut tar = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&bytes[..]), &mut tar)
            .unwrap();
        assert_eq!(layer.diff_id, Digest::of(&tar));
        assert_eq!(layer.digest, Digest::of(&bytes));
        let whole = ConfigsLayer::from_tar(&tar).unwrap();
        assert_eq!(
            whole.bytes.to_bytes().unwrap(),
            bytes,
            "compressing file by file changes no byte"
        );
        let mut w = ConfigsLayerWriter::new(files().into_keys(), "/configs", None).unwrap();
        let e = w.append("nfd/catalog.json", b"{}").unwrap_err().to_string();
        assert!(
            e.contains("out of order (expected Some(\"catalog.json\"))"),
            "{e}"
        );
        w.append("catalog.json", b"{}").unwrap();
        let e = w.finish().unwrap_err().to_string();
        assert!(e.contains("'nfd/catalog.json' was never written"), "{e}");
    }

    #[test]
    fn manifest_and_config_gain_the_layer_and_keep_labels() {
        let config = serde_json::json!({
            "architecture": "amd64", "os": "linux",
            "config": {"Labels": {"operators.operatorframework.io.index.configs.v1": "/configs"},
                       "Entrypoint": ["/bin/opm"], "Cmd": ["serve", "/configs", "--cache-dir=/tmp/cache"]},
            "rootfs": {"type": "layers", "diff_ids": ["sha256:".to_string() + &"1".repeat(64)]},
        });
        let config = serde_json::to_vec(&config).unwrap();
        assert_eq!(cache_dir_of(&config).as_deref(), Some("/tmp/cache"));
        let manifest = serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": Digest::of(&config).to_string(), "size": config.len()},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                        "digest": "sha256:".to_string() + &"2".repeat(64), "size": 10}],
        });
        let manifest = RawManifest::new(Bytes::from(serde_json::to_vec(&manifest).unwrap()), None);
        let layer = configs_layer(&files(), "/configs", None).unwrap();
        let rebuilt = rebuild_manifest(&manifest, &config, &layer).unwrap();
        let cfg: Value = serde_json::from_slice(&rebuilt.config).unwrap();
        assert_eq!(
            cfg["config"]["Labels"]["operators.operatorframework.io.index.configs.v1"],
            "/configs"
        );
        assert_eq!(cfg["rootfs"]["diff_ids"][1], layer.diff_id.to_string());
        let m: Value = serde_json::from_slice(&rebuilt.manifest.bytes).unwrap();
        assert_eq!(m["layers"].as_array().unwrap().len(), 2);
        assert_eq!(m["layers"][1]["digest"], layer.digest.to_string());
        assert_eq!(m["config"]["digest"], rebuilt.config_digest.to_string());
        assert_eq!(rebuilt.config_digest, Digest::of(&rebuilt.config));
    }

    #[test]
    fn a_config_dir_outside_the_root_is_refused() {
        assert!(configs_layer(&files(), "/", None).is_err());
        assert!(configs_layer(&files(), "/a/../..", None).is_err());
    }
}
