//! Archives across the air gap (issue 16, parts 1-4 and 6): a mirror to `archive://` cut into
//! chunks of at most the size asked (a lone large blob excepted), checked at the door with
//! coreutils and OpenSSH alone, extracted by GNU tar into a layout, pushed from the chunks in
//! place (byte-exact, no blob file on the push side), served by `serve registry archive://`
//! (skopeo, over TLS), and one flipped byte named by `bootstrap verify` with its chunk and blob.
//! Delta archives carry only what is new and refuse to push onto a registry without their base.
//!
//! Here what the files share; `crossing.rs` one archive's whole way (cut, checked at the door,
//! extracted, served, pushed from its chunks, a flipped byte named), `delta.rs` delta archives,
//! `create.rs` `archive create` from a disk mirror and missing or left-out content named,
//! `unsealed.rs` runs that stop before sealing, continued or started over.

mod create;
mod crossing;
mod delta;
mod unsealed;

use crate::support;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use support::images::{PushedImage, SyntheticSet};
use support::run::{bootstrap, failed, ok, write_config};
use support::Registry;

const MIB: u64 = 1024 * 1024;
fn manifest(dir: &Path) -> serde_json::Value {
    serde_json::from_slice(&fs_err::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn skopeo(args: &[&str]) -> std::process::Output {
    Command::new("skopeo").args(args).output().unwrap()
}

/// Every pushed image is at `host` under `prefix` with the source's manifest bytes, and every
/// blob with its size.
fn assert_at(host: &str, prefix: &str, pushed: &[PushedImage]) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let http = reqwest::Client::new();
    for img in pushed {
        let repo = format!("{prefix}/{}", img.repo);
        let url = format!("docker://{host}/{repo}:{}", img.tag);
        let o = skopeo(&["inspect", "--raw", "--tls-verify=false", &url]);
        assert!(
            o.status.success(),
            "{url}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.stdout, img.manifest, "{url}");
        for (digest, size) in &img.blobs {
            let resp = rt
                .block_on(
                    http.head(format!("http://{host}/v2/{repo}/blobs/{digest}"))
                        .send(),
                )
                .unwrap();
            assert_eq!(resp.status(), 200, "{repo} {digest}");
            assert_eq!(
                resp.headers()["content-length"].to_str().unwrap(),
                size.to_string()
            );
        }
    }
}
