//! Hostile catalog content, refused: a catalog image whose layer climbs out of the image root
//! (a `..` path or a symbolic link) fails naming the catalog, the layer and the entry, and
//! writes nothing.

use super::*;

/// A catalog image whose layer holds `entry` (a path escaping the image root) is refused with
/// an error naming the catalog, the layer and the entry; nothing is written anywhere but the
/// run's own (never created) destination.
#[test]
fn a_catalog_layer_escaping_its_root_is_refused() {
    let registry = Registry::plain();
    let host = registry.host();
    let dir = tempfile::tempdir().unwrap();
    for (i, (entry, kind)) in [
        ("../escape.json", tar::EntryType::Regular),
        ("configs/../../escape.json", tar::EntryType::Regular),
        ("configs/nfd/catalog.json", tar::EntryType::Symlink),
    ]
    .into_iter()
    .enumerate()
    {
        let repo = format!("evil/catalog-{i}");
        push_catalog_with_entry(&registry, &repo, entry, kind);
        let cfg = dir.path().join(format!("evil-{i}.yaml"));
        fs_err::write(
            &cfg,
            format!("apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: {host}/{repo}:v1\n"),
        )
        .unwrap();
        let dest = dir.path().join(format!("mirror-{i}"));
        let work = dir.path().join(format!("work-{i}"));
        let o = bootstrap(&[
            "mirror",
            "--plain-http",
            &host,
            "-c",
            cfg.to_str().unwrap(),
            "--workdir",
            work.to_str().unwrap(),
            &format!("file://{}", dest.display()),
        ]);
        let err = failed(&o);
        assert!(err.contains(&format!("{host}/{repo}:v1")), "{err}");
        assert!(err.contains("layer sha256:"), "{err}");
        assert!(
            err.contains("escape.json") || err.contains("leaves the image root"),
            "{err}"
        );
        assert!(!dest.exists(), "nothing may be written for refused input");
        assert!(!dir.path().join("escape.json").exists());
        assert!(!std::env::temp_dir().join("escape.json").exists());
    }
}

/// Pushes a catalog image (configs label `/configs`) whose one layer holds a good catalog file
/// and `entry` (a symbolic link's target climbs out of the root).
fn push_catalog_with_entry(registry: &Registry, repo: &str, entry: &str, kind: tar::EntryType) {
    let mut tar = tar::Builder::new(Vec::new());
    let good = br#"{"schema":"olm.package","name":"nfd","defaultChannel":"stable"}"#;
    let mut h = tar::Header::new_gnu();
    h.set_size(good.len() as u64);
    h.set_mode(0o644);
    h.set_entry_type(tar::EntryType::Regular);
    tar.append_data(&mut h, "configs/ok/catalog.json", &good[..])
        .unwrap();
    let mut h = tar::Header::new_gnu();
    h.set_mode(0o644);
    h.set_entry_type(kind);
    if kind == tar::EntryType::Symlink {
        h.set_size(0);
        tar.append_link(&mut h, entry, "../../../../etc/passwd")
            .unwrap();
    } else {
        // The tar crate refuses to write `..` itself: set the name bytes directly.
        let name = entry.as_bytes();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_size(2);
        h.set_cksum();
        tar.append(&h, &b"{}"[..]).unwrap();
    }
    let layer = tar.into_inner().unwrap();
    let layer_digest = digest(&layer);
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64", "os": "linux",
        "config": {"Labels": {"operators.operatorframework.io.index.configs.v1": "/configs"}},
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
    }))
    .unwrap();
    let config_digest = digest(&config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer_digest, "size": layer.len()}],
    }))
    .unwrap();
    let client = RegistryClient::new(registry);
    block_on(async {
        client
            .push_blob(repo, &layer_digest, BlobSource::Bytes(layer.into()))
            .await
            .unwrap();
        client
            .push_blob(repo, &config_digest, BlobSource::Bytes(config.into()))
            .await
            .unwrap();
        client
            .put_manifest(
                repo,
                "v1",
                "application/vnd.oci.image.manifest.v1+json",
                &manifest,
            )
            .await
            .unwrap();
    });
}
