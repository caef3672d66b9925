//! Small, real, deterministic OCI images built in memory: gzip-compressed tar layers with
//! fixed times and owners, a config whose `diff_ids` are the uncompressed layers' digests, and
//! an OCI image manifest. The same inputs always give the same bytes, so a rerun of the seed
//! finds every blob and manifest already in the registry.

use anyhow::{Context, Result};
use bootstrap::oci::digest::Digest;
use bootstrap::oci::manifest::RawManifest;
use bytes::Bytes;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;

/// Media type of the manifests built here.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// Media type of the configs built here.
pub const CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// Media type of the gzip-compressed layers built here.
pub const GZIP_LAYER_MEDIA_TYPE: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// A blob with its digest.
#[derive(Clone, Debug)]
pub struct Blob {
    /// sha256 of `bytes`.
    pub digest: Digest,
    /// The content.
    pub bytes: Bytes,
}

impl Blob {
    /// Wraps bytes, computing their digest.
    pub fn new(bytes: impl Into<Bytes>) -> Self {
        let bytes = bytes.into();
        Blob {
            digest: Digest::of(&bytes),
            bytes,
        }
    }
}

/// An image ready to push: where it goes, its manifest, and the blobs (config first) the
/// manifest names.
#[derive(Clone, Debug)]
pub struct Image {
    /// Repository path inside the registry, e.g. `openshift-release-dev/ocp-release`.
    pub repository: String,
    /// The tag it is pushed under; images without one are pushed by digest only.
    pub tag: Option<String>,
    /// The manifest, exactly as pushed.
    pub manifest: RawManifest,
    /// Config and layers.
    pub blobs: Vec<Blob>,
}

impl Image {
    /// The manifest digest.
    pub fn digest(&self) -> &Digest {
        &self.manifest.digest
    }

    /// `host/repository@digest`: how catalogs and releases name the image.
    pub fn pinned(&self, host: &str) -> String {
        format!("{host}/{}@{}", self.repository, self.manifest.digest)
    }

    /// `host/repository:tag`, or the pinned reference for an untagged image.
    pub fn tagged(&self, host: &str) -> String {
        match &self.tag {
            Some(t) => format!("{host}/{}:{t}", self.repository),
            None => self.pinned(host),
        }
    }

    /// Bytes of the manifest and every blob.
    pub fn size(&self) -> u64 {
        self.manifest.bytes.len() as u64
            + self.blobs.iter().map(|b| b.bytes.len() as u64).sum::<u64>()
    }
}

/// A file to put in a layer.
#[derive(Clone, Debug)]
pub struct File {
    /// Path inside the image, without a leading `/`.
    pub path: String,
    /// Content.
    pub bytes: Vec<u8>,
    /// Permission bits.
    pub mode: u32,
}

impl File {
    /// A regular file, mode 0644.
    pub fn new(path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        File {
            path: path.into(),
            bytes: bytes.into(),
            mode: 0o644,
        }
    }

    /// An executable file, mode 0755.
    pub fn executable(path: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        File {
            mode: 0o755,
            ..File::new(path, bytes)
        }
    }
}

/// What goes into an image's config and layers.
#[derive(Clone, Debug, Default)]
pub struct ImageSpec {
    /// `config.Labels`.
    pub labels: BTreeMap<String, String>,
    /// `config.Entrypoint`, when set.
    pub entrypoint: Vec<String>,
    /// `config.Cmd`, when set.
    pub cmd: Vec<String>,
    /// Layers, bottom first; each a list of files.
    pub layers: Vec<Vec<File>>,
    /// Manifest annotations.
    pub annotations: BTreeMap<String, String>,
}

/// Builds `spec` as an amd64 linux image for `repository` (tagged `tag` when given).
pub fn build(repository: &str, tag: Option<&str>, spec: &ImageSpec) -> Result<Image> {
    let mut layers = Vec::new();
    let mut diff_ids = Vec::new();
    for (i, files) in spec.layers.iter().enumerate() {
        let (gz, diff_id) =
            tar_gz(files).with_context(|| format!("building layer {i} of image {repository}"))?;
        diff_ids.push(diff_id.to_string());
        layers.push(Blob::new(gz));
    }
    let mut config_section = Map::new();
    config_section.insert(
        "Env".into(),
        json!(["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]),
    );
    if !spec.entrypoint.is_empty() {
        config_section.insert("Entrypoint".into(), json!(spec.entrypoint));
    }
    if !spec.cmd.is_empty() {
        config_section.insert("Cmd".into(), json!(spec.cmd));
    }
    if !spec.labels.is_empty() {
        config_section.insert("Labels".into(), json!(spec.labels));
    }
    let config = json!({
        "architecture": "amd64",
        "os": "linux",
        "config": config_section,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": diff_ids.iter().map(|_| json!({"created_by": "bootstrap-lab seed"})).collect::<Vec<_>>(),
    });
    let config = Blob::new(serde_json::to_vec(&config)?);
    let mut manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "config": {
            "mediaType": CONFIG_MEDIA_TYPE,
            "digest": config.digest,
            "size": config.bytes.len(),
        },
        "layers": layers.iter().map(|l| json!({
            "mediaType": GZIP_LAYER_MEDIA_TYPE,
            "digest": l.digest,
            "size": l.bytes.len(),
        })).collect::<Vec<Value>>(),
    });
    if !spec.annotations.is_empty() {
        manifest["annotations"] = json!(spec.annotations);
    }
    let manifest = RawManifest::new(
        Bytes::from(serde_json::to_vec(&manifest)?),
        Some(MANIFEST_MEDIA_TYPE),
    );
    let mut blobs = vec![config];
    blobs.extend(layers);
    Ok(Image {
        repository: repository.to_string(),
        tag: tag.map(String::from),
        manifest,
        blobs,
    })
}

/// A deterministic gzip-compressed tar of `files` (in the given order, directories implied,
/// zero times and owners); returns it and the digest of the uncompressed tar (the diff_id).
pub fn tar_gz(files: &[File]) -> Result<(Vec<u8>, Digest)> {
    let mut tar = tar::Builder::new(Vec::new());
    for f in files {
        let mut header = tar::Header::new_ustar();
        header.set_size(f.bytes.len() as u64);
        header.set_mode(f.mode);
        header.set_mtime(0);
        header.set_uid(0);
        header.set_gid(0);
        header.set_entry_type(tar::EntryType::Regular);
        tar.append_data(&mut header, &f.path, f.bytes.as_slice())
            .with_context(|| format!("adding {} to a layer", f.path))?;
    }
    let raw = tar.into_inner().context("finishing a layer")?;
    let diff_id = Digest::of(&raw);
    // GzBuilder writes mtime 0 and no file name unless told: the same tar gives the same bytes.
    let mut gz = flate2::GzBuilder::new().write(Vec::new(), flate2::Compression::default());
    gz.write_all(&raw).context("compressing a layer")?;
    Ok((gz.finish().context("compressing a layer")?, diff_id))
}

/// `len` deterministic bytes that do not compress (xorshift64* seeded from `seed`): stands in
/// for binaries, so layers have realistic sizes after gzip.
pub fn filler(seed: &str, len: usize) -> Vec<u8> {
    let d = Digest::of(seed.as_bytes());
    let mut state = u64::from_str_radix(&d.hex()[..16], 16).unwrap_or(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        out.extend_from_slice(&state.wrapping_mul(0x2545_F491_4F6C_DD1D).to_le_bytes());
    }
    out.truncate(len);
    out
}

/// 40 hex digits derived from `seed`: a stand-in git commit id.
pub fn commit_id(seed: &str) -> String {
    Digest::of(seed.as_bytes()).hex()[..40].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_deterministic_and_diff_ids_match_layers() {
        let spec = ImageSpec {
            labels: [("a".to_string(), "b".to_string())].into(),
            layers: vec![vec![
                File::new("etc/x", "hello"),
                File::executable("usr/bin/y", filler("y", 1000)),
            ]],
            ..Default::default()
        };
        let a = build("lab/x", Some("v1"), &spec).unwrap();
        let b = build("lab/x", Some("v1"), &spec).unwrap();
        assert_eq!(a.digest(), b.digest());
        let config: Value = serde_json::from_slice(&a.blobs[0].bytes).unwrap();
        let mut gz = flate2::read::GzDecoder::new(a.blobs[1].bytes.as_ref());
        let mut raw = Vec::new();
        std::io::Read::read_to_end(&mut gz, &mut raw).unwrap();
        assert_eq!(
            config["rootfs"]["diff_ids"][0],
            Value::String(Digest::of(&raw).to_string())
        );
        assert_eq!(config["config"]["Labels"]["a"], "b");
        assert_ne!(filler("a", 64), filler("b", 64));
        assert_eq!(filler("a", 13).len(), 13);
    }
}
