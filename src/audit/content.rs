//! The content behind a record, where the report can read it: an archive's chunks (each blob
//! read in place, at its offset) or the disk mirror a record lies in. Every blob read is checked
//! against its digest; a corrupt one is an error that names `bootstrap verify`, never a report
//! built on it.
//!
//! From the content the report learns what a record cannot say: a catalog's packages, channels
//! and bundle versions (its configs, read out of the filtered catalog's layers), whether an
//! image is a model (its manifest), and a release's version (its config's label).

use super::{BundleFacts, ChannelFacts, PackageFacts};
use crate::mirror::archive::reader::read_range;
use crate::mirror::archive::{ArchiveFile, ArchiveManifest, MANIFEST_FILE};
use crate::oci::digest::{Digest, StreamHasher};
use crate::oci::layers::{self, CONFIGS_LABEL};
use crate::oci::manifest::{OciImageManifest, Parsed, RawManifest};
use crate::openshift::fbc::Catalog;
use anyhow::{bail, Context, Result};
use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// `bootstrap model pack`'s annotation listing a model's files (`<sha256>  <path>` lines).
const MODEL_SUMS: &str = crate::modelcar::SUMS_ANNOTATION;
/// The CNCF ModelPack specification's artifact and config types.
const MODELPACK_ARTIFACT: &str = "application/vnd.cncf.model.manifest.v1+json";
const MODELPACK_CONFIG: &str = "application/vnd.cncf.model.config.v1+json";

/// Where blobs are read from.
pub(super) enum Content {
    /// An archive: each blob's chunk, offset and size.
    Archive {
        dir: PathBuf,
        blobs: HashMap<Digest, (String, u64, u64)>,
    },
    /// A disk mirror (an OCI layout).
    Layout { dir: PathBuf },
}

impl Content {
    /// An archive's blobs, each checked to lie inside a chunk the manifest lists.
    pub(super) fn archive(dir: &Path, manifest: &ArchiveManifest) -> Result<Self> {
        let sizes: HashMap<&str, u64> = manifest
            .chunks
            .iter()
            .map(|c| (c.name.as_str(), c.size))
            .collect();
        let mut blobs = HashMap::new();
        for b in &manifest.blobs {
            let fits = sizes
                .get(b.chunk.as_str())
                .is_some_and(|s| b.offset.checked_add(b.size).is_some_and(|end| end <= *s));
            if !fits {
                bail!(
                    "{}: blob {} is placed outside the chunks it lists ({} at {}); the manifest was not written by bootstrap",
                    dir.join(MANIFEST_FILE).display(),
                    b.digest,
                    b.chunk,
                    b.offset
                );
            }
            blobs.insert(b.digest.clone(), (b.chunk.clone(), b.offset, b.size));
        }
        Ok(Content::Archive {
            dir: dir.to_path_buf(),
            blobs,
        })
    }

    /// The disk mirror `record` lies in, when it is one (an OCI layout beside it).
    pub(super) fn layout_beside(record: &Path) -> Option<Self> {
        let dir = record.parent().filter(|d| !d.as_os_str().is_empty())?;
        (dir.join("oci-layout").is_file() && dir.join("blobs/sha256").is_dir()).then(|| {
            Content::Layout {
                dir: dir.to_path_buf(),
            }
        })
    }

    /// Where a blob's bytes are: the file, the offset, the size; None when not carried.
    fn locate(&self, digest: &Digest) -> Option<(PathBuf, u64, Option<u64>)> {
        match self {
            Content::Archive { dir, blobs } => blobs
                .get(digest)
                .map(|(chunk, offset, size)| (dir.join(chunk), *offset, Some(*size))),
            Content::Layout { dir } => {
                let path = dir.join("blobs/sha256").join(digest.hex());
                path.is_file().then_some((path, 0, None))
            }
        }
    }

    /// What to run when a blob is corrupt.
    fn verify_hint(&self) -> String {
        match self {
            Content::Archive { dir, .. } => format!("bootstrap verify archive://{}", dir.display()),
            Content::Layout { dir } => format!("bootstrap verify file://{}", dir.display()),
        }
    }

    /// A blob as a stream that fails at its end unless it matched its digest; None when the
    /// blob is not carried here.
    fn open(&self, digest: &Digest) -> Result<Option<Verifying>> {
        let Some((path, offset, size)) = self.locate(digest) else {
            return Ok(None);
        };
        let (mut file, len) = crate::bounded::open_regular(&path)?;
        let size = size.unwrap_or(len);
        file.seek(SeekFrom::Start(offset))
            .with_context(|| format!("seeking to {offset} in {}", path.display()))?;
        Ok(Some(Verifying {
            inner: file.take(size),
            hasher: Some(StreamHasher::new()),
            digest: digest.clone(),
            size,
            what: format!("blob {digest} in {}", path.display()),
        }))
    }

    /// A small blob (a manifest, a config) whole and checked; None when not carried here.
    fn read_small(&self, digest: &Digest) -> Result<Option<Vec<u8>>> {
        let Some(mut stream) = self.open(digest)? else {
            return Ok(None);
        };
        if stream.size > crate::bounded::SMALL_BLOB_MAX {
            bail!(
                "{}: {} bytes is too large for a manifest or config",
                stream.what,
                stream.size
            );
        }
        let mut bytes = Vec::with_capacity(stream.size as usize);
        stream.read_to_end(&mut bytes).map_err(|e| {
            anyhow::anyhow!(
                "{e}: run `{}` to see what else is damaged",
                self.verify_hint()
            )
        })?;
        Ok(Some(bytes))
    }

    /// A manifest, parsed by its media type (`media_type`, as the record or index names it,
    /// unless the body says); None when it is not carried here.
    fn manifest(&self, digest: &Digest, media_type: &str) -> Result<Option<Parsed>> {
        let Some(bytes) = self.read_small(digest)? else {
            return Ok(None);
        };
        Ok(Some(
            RawManifest::new(bytes.into(), Some(media_type)).parse()?,
        ))
    }

    /// The single-platform manifest of an image (the first child of an index); None when it
    /// is not carried here.
    fn image_manifest(
        &self,
        digest: &Digest,
        media_type: &str,
    ) -> Result<Option<OciImageManifest>> {
        match self.manifest(digest, media_type)? {
            None => Ok(None),
            Some(Parsed::Image(m)) => Ok(Some(*m)),
            Some(Parsed::Index(index)) => match index.manifests.first() {
                Some(child) => self.image_manifest(&child.digest.parse()?, &child.media_type),
                None => Ok(None),
            },
        }
    }

    /// The config of an image's manifest; None when it is not carried here.
    fn config(&self, manifest: &OciImageManifest) -> Result<Option<Vec<u8>>> {
        self.read_small(&manifest.config.digest.parse()?)
    }

    /// A release image's version, from its config's `io.openshift.release` label.
    pub(super) fn release_version(
        &self,
        digest: &Digest,
        media_type: &str,
    ) -> Result<Option<String>> {
        let Some(m) = self.image_manifest(digest, media_type)? else {
            return Ok(None);
        };
        Ok(self
            .config(&m)?
            .and_then(|c| crate::openshift::release::version_label(&c)))
    }

    /// For a model image, the number of files its checksum annotation lists (None when it has
    /// none, as a ModelPack artifact); None when the image is not a model or not carried here.
    pub(super) fn model_files(
        &self,
        digest: &Digest,
        media_type: &str,
    ) -> Result<Option<Option<usize>>> {
        let Some(bytes) = self.read_small(digest)? else {
            return Ok(None);
        };
        let m = match RawManifest::new(bytes.into(), Some(media_type)).parse() {
            Ok(Parsed::Image(m)) => *m,
            Ok(Parsed::Index(_)) | Err(_) => return Ok(None),
        };
        if let Some(sums) = m.annotations.as_ref().and_then(|a| a.get(MODEL_SUMS)) {
            let files = sums.lines().filter(|l| !l.trim().is_empty()).count();
            return Ok(Some(Some(files)));
        }
        let modelpack = m.artifact_type.as_deref() == Some(MODELPACK_ARTIFACT)
            || m.config.media_type == MODELPACK_CONFIG;
        Ok(modelpack.then_some(None))
    }

    /// A catalog's packages, channels and bundle versions, read out of its layers; None when
    /// its manifest or layers are not all carried here.
    pub(super) fn catalog_packages(
        &self,
        digest: &Digest,
        media_type: &str,
        name: &str,
    ) -> Result<Option<Vec<PackageFacts>>> {
        let Some(m) = self.image_manifest(digest, media_type)? else {
            return Ok(None);
        };
        let Some(config) = self.config(&m)? else {
            return Ok(None);
        };
        let Some(dir) = configs_dir(&config) else {
            bail!("catalog {name}: its config has no {CONFIGS_LABEL} label: it is not a file-based catalog");
        };
        let Some(files) = self.read_configs(&m, &dir, name)? else {
            return Ok(None);
        };
        let catalog = Catalog::parse(&files).with_context(|| format!("reading catalog {name}"))?;
        Ok(Some(packages(&catalog)))
    }

    /// The catalog's config directory. The filtered catalog's top layer empties the directory
    /// (an opaque whiteout) before writing the kept configs, so that layer alone holds the whole
    /// catalog, and the source's large base layers are not read. A catalog not built that way
    /// is read through all its layers.
    fn read_configs(
        &self,
        m: &OciImageManifest,
        dir: &str,
        name: &str,
    ) -> Result<Option<BTreeMap<String, Vec<u8>>>> {
        let digests: Vec<Digest> = m
            .layers
            .iter()
            .map(|l| l.digest.parse())
            .collect::<Result<_, _>>()?;
        let Some(top) = digests.last() else {
            return Ok(None);
        };
        let Some(mut top_layer) = self.open(top)? else {
            return Ok(None);
        };
        let whole = empties(&mut top_layer, dir)
            .with_context(|| format!("catalog {name}: reading its layer {top}"))?;
        let from = if whole { digests.len() - 1 } else { 0 };
        let mut streams = Vec::new();
        for d in &digests[from..] {
            match self.open(d)? {
                Some(s) => streams.push(s),
                None => return Ok(None),
            }
        }
        let files = layers::read_config_dir(streams.iter_mut(), dir)
            .map_err(|e| anyhow::anyhow!("catalog {name}: {e}"))?;
        for s in &mut streams {
            s.drain().map_err(|e| {
                anyhow::anyhow!(
                    "catalog {name}: {e}: run `{}` to see what else is damaged",
                    self.verify_hint()
                )
            })?;
        }
        Ok(Some(files))
    }
}

/// One of an archive's small files (the mirror record), checked against the manifest's sha256.
pub(super) fn archive_file(dir: &Path, file: &ArchiveFile) -> Result<Vec<u8>> {
    let bytes = read_range(&dir.join(&file.chunk), file.offset, file.size)
        .with_context(|| format!("reading {} out of {}", file.path, file.chunk))?;
    if Digest::of(&bytes).hex() != file.sha256 {
        bail!(
            "{} in {} is corrupt (its sha256 is not the manifest's): run `bootstrap verify archive://{}` and copy the chunk again from the media",
            file.path,
            file.chunk,
            dir.display()
        );
    }
    Ok(bytes)
}

/// The catalog's config directory, from its image config's label.
fn configs_dir(config: &[u8]) -> Option<String> {
    let v: serde_json::Value = serde_json::from_slice(config).ok()?;
    v.pointer("/config/Labels")?
        .get(CONFIGS_LABEL)?
        .as_str()
        .map(str::to_string)
}

/// True when the layer holds an opaque whiteout of `dir` (it hides every layer below there).
fn empties(layer: &mut Verifying, dir: &str) -> Result<bool> {
    let want = format!("{}/.wh..wh..opq", dir.trim_matches('/'));
    let mut head = [0u8; 2];
    let n = layer.read(&mut head)?;
    let chained = std::io::Cursor::new(head[..n].to_vec()).chain(&mut *layer);
    let reader: Box<dyn Read + '_> = if n == 2 && head == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(chained))
    } else {
        Box::new(chained)
    };
    let mut archive = tar::Archive::new(reader);
    for entry in archive.entries()? {
        let entry = entry?;
        let path = entry.path()?;
        let path = path.to_string_lossy();
        let path = path.trim_start_matches("./").trim_start_matches('/');
        if path == want {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Packages by name, their channels by name, each channel's bundles by version.
fn packages(catalog: &Catalog) -> Vec<PackageFacts> {
    catalog
        .packages
        .values()
        .map(|p| PackageFacts {
            name: p.name.clone(),
            default_channel: p.default_channel.clone(),
            channels: catalog
                .channels_of(&p.name)
                .map(|c| {
                    let mut bundles: Vec<(Option<&semver::Version>, BundleFacts)> = c
                        .entries
                        .iter()
                        .map(|e| {
                            let version = catalog.bundle(&p.name, &e.name).map(|b| &b.version);
                            let facts = BundleFacts {
                                name: e.name.clone(),
                                version: version.map(ToString::to_string).unwrap_or_default(),
                            };
                            (version, facts)
                        })
                        .collect();
                    bundles.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)));
                    ChannelFacts {
                        name: c.name.clone(),
                        bundles: bundles.into_iter().map(|(_, b)| b).collect(),
                    }
                })
                .collect(),
        })
        .collect()
}

/// A blob's bytes that fail at their end unless they match its digest and size.
struct Verifying {
    inner: io::Take<fs_err::File>,
    hasher: Option<StreamHasher>,
    digest: Digest,
    size: u64,
    what: String,
}

impl Verifying {
    /// Reads what is left (a tar reader stops before the padding), so the digest is checked.
    fn drain(&mut self) -> io::Result<()> {
        io::copy(self, &mut io::sink()).map(|_| ())
    }
}

impl Read for Verifying {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        match (n, self.hasher.as_mut()) {
            (0, Some(_)) if !buf.is_empty() => {
                let hasher = self.hasher.take().expect("checked above");
                hasher
                    .verify(&self.what, &self.digest, self.size)
                    .map_err(io::Error::other)?;
            }
            (_, Some(h)) => h.update(&buf[..n]),
            _ => {}
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(entries: &[&str]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for e in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(0);
            h.set_mode(0o644);
            h.set_cksum();
            b.append_data(&mut h, e, &[][..]).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn verifying(dir: &Path, bytes: &[u8]) -> Verifying {
        let digest = Digest::of(bytes);
        let path = dir.join(digest.hex());
        fs_err::write(&path, bytes).unwrap();
        Verifying {
            inner: fs_err::File::open(&path).unwrap().take(bytes.len() as u64),
            hasher: Some(StreamHasher::new()),
            digest,
            size: bytes.len() as u64,
            what: path.display().to_string(),
        }
    }

    /// The filtered catalog's top layer is recognised by its opaque whiteout, with or without
    /// a leading `./` or `/`, and only for the catalog's own directory.
    #[test]
    fn an_opaque_whiteout_of_the_configs_directory_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let mut l = verifying(dir.path(), &layer(&["configs/", "./configs/.wh..wh..opq"]));
        assert!(empties(&mut l, "/configs").unwrap());
        let mut l = verifying(
            dir.path(),
            &layer(&["other/.wh..wh..opq", "configs/a.json"]),
        );
        assert!(!empties(&mut l, "/configs").unwrap());
    }

    /// A blob whose bytes are not its digest's fails at its end, naming it.
    #[test]
    fn a_corrupt_blob_fails_when_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let mut v = verifying(dir.path(), b"right bytes");
        v.digest = Digest::of(b"other bytes");
        let err = v.drain().unwrap_err().to_string();
        assert!(err.contains(&dir.path().display().to_string()), "{err}");
    }
}
