//! `bootstrap model pack` against real peers: the packed modelcar is a valid OCI image that
//! skopeo reads from the layout, that `bootstrap mirror --from` pushes to a real Distribution
//! registry under its digest, whose layers hold the files under /models byte for byte, and
//! which is deterministic: the same directory gives the same digest, and a changed shard
//! changes only its own layer.

use crate::support;

use bootstrap::oci::digest::Digest;
use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use support::run::{bootstrap, ok};
use support::Registry;

fn write_model(dir: &Path, shard_seed: u8) {
    fs_err::create_dir_all(dir.join("tokenizer")).unwrap();
    fs_err::write(
        dir.join("config.json"),
        br#"{"architectures":["GraniteForCausalLM"]}"#,
    )
    .unwrap();
    fs_err::write(
        dir.join("tokenizer/tokenizer.json"),
        b"{\"version\":\"1.0\"}",
    )
    .unwrap();
    for (i, seed) in [(1u8, 7u8), (2, shard_seed)] {
        let bytes: Vec<u8> = (0..3 * 1024 * 1024u32)
            .map(|n| (n as u8).wrapping_mul(seed).wrapping_add(i))
            .collect();
        fs_err::write(dir.join(format!("model-0000{i}.safetensors")), bytes).unwrap();
    }
}

fn pack(dir: &Path, reference: &str, layout: &Path) -> serde_json::Value {
    let out = ok(&bootstrap(&[
        "model",
        "pack",
        dir.to_str().unwrap(),
        reference,
        "--layout",
        &format!("file://{}", layout.display()),
        "--layer-threshold-mib",
        "1",
        "--output",
        "json",
    ]));
    serde_json::from_str(&out).unwrap()
}

/// The files a layer blob holds, by path.
fn layer_files(layout: &Path, digest: &str) -> BTreeMap<String, Vec<u8>> {
    let blob = layout
        .join("blobs/sha256")
        .join(digest.trim_start_matches("sha256:"));
    let mut archive = tar::Archive::new(fs_err::File::open(blob).unwrap());
    let mut out = BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let mut bytes = Vec::new();
        entry.read_to_end(&mut bytes).unwrap();
        out.insert(path, bytes);
    }
    out
}

#[test]
fn a_packed_model_is_a_deterministic_image_that_mirrors_like_any_other() {
    let reg = Registry::plain();
    let work = tempfile::tempdir().unwrap();
    let model = work.path().join("granite");
    write_model(&model, 11);
    let layout = work.path().join("layout");
    let reference = format!("{}/models/granite:3.1", reg.host());
    let packed = pack(&model, &reference, &layout);

    // One layer for the small files, one per shard; every file's sha256 is recorded and true.
    let layers = packed["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 3, "{packed:#}");
    let mut seen = 0;
    for layer in layers {
        let files = layer_files(&layout, layer["digest"].as_str().unwrap());
        for f in layer["files"].as_array().unwrap() {
            let path = f["path"].as_str().unwrap();
            let on_disk = fs_err::read(model.join(path.trim_start_matches("models/"))).unwrap();
            assert_eq!(files[path], on_disk, "{path} in its layer");
            assert_eq!(f["sha256"], Digest::of(&on_disk).to_string(), "{path}");
            seen += 1;
        }
    }
    assert_eq!(seen, 4);

    // skopeo reads it from the layout, under the digest we report.
    let out = std::process::Command::new("skopeo")
        .args(["inspect", "--raw"])
        .arg(format!("oci:{}:{reference}", layout.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let raw = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        Digest::of(raw.as_bytes()).to_string(),
        packed["digest"].as_str().unwrap()
    );

    // Deterministic: packing again gives the same digest; a changed shard changes one layer.
    let again = pack(&model, &reference, &work.path().join("layout2"));
    assert_eq!(again["digest"], packed["digest"]);
    write_model(&model, 13);
    let changed = pack(&model, &reference, &work.path().join("layout3"));
    let digests = |v: &serde_json::Value| -> Vec<String> {
        v["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["digest"].as_str().unwrap().to_string())
            .collect()
    };
    let (before, after) = (digests(&packed), digests(&changed));
    assert_eq!(before[..2], after[..2]);
    assert_ne!(before[2], after[2]);

    // The layout records what was packed: `verify` passes it, and `mirror --from` (which
    // refuses a layout without a record) pushes it without --accept-unrecorded.
    ok(&bootstrap(&[
        "verify",
        &format!("file://{}", layout.display()),
    ]));
    // It mirrors like any image: pushed from the layout, the registry holds it by digest.
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &format!("file://{}", layout.display()),
        &format!("docker://{}", reg.host()),
        "--plain-http",
        &reg.host(),
        "--record",
        work.path().join("rec.json").to_str().unwrap(),
        "--status-file",
        work.path().join("status.json").to_str().unwrap(),
    ]));
    let pushed = reg.skopeo_inspect("models/granite:3.1", true).unwrap();
    assert_eq!(
        Digest::of(pushed.as_bytes()).to_string(),
        packed["digest"].as_str().unwrap()
    );
}
