//! The lab's model image: a small, deterministic Granite-shaped model directory (config,
//! tokenizer, a 4 MiB safetensors file in the real format) packed by `bootstrap model pack`'s
//! own code, so the lab's modelcar is exactly what that command makes of the directory.

use super::image::{filler, Blob, Image};
use anyhow::{bail, Context, Result};
use bootstrap::oci::layout::OciLayout;
use bootstrap::oci::manifest::{Parsed, RawManifest};
use bootstrap::oci::reference::ImageRef;
use std::path::Path;

/// Repository of the modelcar.
pub const MODEL_REPO: &str = "models/granite-3.1-8b-instruct";
/// Its tag.
pub const MODEL_TAG: &str = "1.0";
/// Layer threshold used to pack it (as `model pack`'s default, 64 MiB: one layer).
const THRESHOLD: u64 = 64 * 1024 * 1024;

/// Writes the model directory under `dir` (files rewritten each run with the same bytes).
pub fn write_model_dir(dir: &Path) -> Result<()> {
    fs_err::create_dir_all(dir)?;
    let config = serde_json::json!({
        "architectures": ["GraniteForCausalLM"],
        "model_type": "granite",
        "hidden_size": 2048,
        "num_hidden_layers": 1,
        "num_attention_heads": 16,
        "vocab_size": 1024,
        "torch_dtype": "bfloat16",
    });
    fs_err::write(dir.join("config.json"), serde_json::to_vec_pretty(&config)?)?;
    fs_err::write(
        dir.join("generation_config.json"),
        br#"{"bos_token_id": 0, "eos_token_id": 0, "pad_token_id": 0}"#,
    )?;
    let vocab: serde_json::Map<String, serde_json::Value> = (0..1024u32)
        .map(|i| (format!("tok{i}"), serde_json::json!(i)))
        .collect();
    let tokenizer = serde_json::json!({
        "version": "1.0",
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    });
    fs_err::write(dir.join("tokenizer.json"), serde_json::to_vec(&tokenizer)?)?;
    fs_err::write(
        dir.join("tokenizer_config.json"),
        br#"{"model_max_length": 4096, "tokenizer_class": "GPT2Tokenizer"}"#,
    )?;
    // safetensors: an 8-byte little-endian header length, a JSON header, then the tensor data.
    let data_len: usize = 1024 * 2048 * 2;
    let header = serde_json::json!({
        "__metadata__": {"format": "pt"},
        "model.embed_tokens.weight": {"dtype": "BF16", "shape": [1024, 2048], "data_offsets": [0, data_len]},
    });
    let header = serde_json::to_vec(&header)?;
    let mut st = Vec::with_capacity(8 + header.len() + data_len);
    st.extend_from_slice(&(header.len() as u64).to_le_bytes());
    st.extend_from_slice(&header);
    st.extend_from_slice(&filler("granite-3.1-8b-instruct weights", data_len));
    fs_err::write(dir.join("model.safetensors"), st)?;
    Ok(())
}

/// Generates the model under `work/model` and packs it into the OCI layout `work/layout` as
/// `host/models/granite-3.1-8b-instruct:1.0`; returns the image, read back from the layout.
pub async fn build(host: &str, work: &Path) -> Result<Image> {
    let model_dir = work.join("granite-3.1-8b-instruct");
    write_model_dir(&model_dir)?;
    let reference = ImageRef::parse(&format!("{host}/{MODEL_REPO}:{MODEL_TAG}"))
        .with_context(|| format!("the modelcar reference for registry {host}"))?;
    let layout_dir = work.join("layout");
    let out = layout_dir
        .to_str()
        .with_context(|| format!("{} is not UTF-8", layout_dir.display()))?;
    let packed = bootstrap::modelcar::pack_into_layout(&model_dir, &reference, out, THRESHOLD)
        .await
        .with_context(|| format!("packing {}", model_dir.display()))?;
    let layout = OciLayout::open(&layout_dir)?;
    let manifest = RawManifest::new(layout.read_verified(&packed.digest)?, None);
    let Parsed::Image(m) = manifest.parse()? else {
        bail!(
            "{}: the packed modelcar is not an image manifest",
            layout_dir.display()
        );
    };
    let mut digests = vec![m.config.digest.clone()];
    digests.extend(m.layers.iter().map(|l| l.digest.clone()));
    let mut blobs = Vec::new();
    for d in digests {
        let digest = d.parse().with_context(|| {
            format!(
                "{}: bad digest {d} in the modelcar manifest",
                layout_dir.display()
            )
        })?;
        blobs.push(Blob::new(layout.read_verified(&digest)?));
    }
    Ok(Image {
        repository: MODEL_REPO.to_string(),
        tag: Some(MODEL_TAG.to_string()),
        manifest,
        blobs,
    })
}
