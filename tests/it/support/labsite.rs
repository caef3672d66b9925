//! The lab inventory pointed at a mirrored site registry: `inventory/lab` copied, its release
//! named by version (resolved in the mirror record), its references set to the site registry's
//! CA, a pull secret holding the site registry's credentials, and the mirror record; the day-1
//! irdma MachineConfig asked for the control plane, and one extra manifest; and the seeding of
//! the lab upstream. Shared by the install and extraction tests and the lab rehearsal.

use std::path::{Path, PathBuf};

use super::Registry;

/// `bootstrap lab seed` into `upstream` (a plain-HTTP registry), its files under `dir/seed`;
/// returns that folder (graph.json, seed.json).
pub fn seed(upstream: &Registry, dir: &Path) -> PathBuf {
    let seed = dir.join("seed");
    super::run::ok(&super::run::bootstrap(&[
        "lab",
        "seed",
        &format!("docker://{}", upstream.host()),
        "--plain-http",
        &upstream.host(),
        "--out",
        seed.to_str().unwrap(),
    ]));
    seed
}

/// Writes the inventory under `dir/inv` and returns its path. `site` is a TLS registry with
/// credentials into which the mirror wrote `record` (copied into the inventory).
pub fn site_inventory(dir: &Path, site: &Registry, record: &Path, version: &str) -> PathBuf {
    let inventory = dir.join("inv");
    super::run::copy_dir(&super::run::repo("inventory/lab"), &inventory);
    fs_err::copy(record, inventory.join("mirror-record.json")).unwrap();
    fs_err::copy(
        site.ca_pem().expect("a TLS site registry"),
        inventory.join("registry-ca.pem"),
    )
    .unwrap();
    let mut secret = super::run::json(&inventory.join("secrets/pull-secret.example.json"));
    let (user, password) = site
        .credentials()
        .expect("a site registry with credentials");
    let basic = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
    };
    secret["auths"][site.host()] = serde_json::json!({ "auth": basic });
    fs_err::write(inventory.join("pull-secret.json"), secret.to_string()).unwrap();
    let text = fs_err::read_to_string(inventory.join("site.yaml")).unwrap();
    let mut lines: Vec<String> = Vec::new();
    for line in text.lines() {
        if line
            .trim_start()
            .starts_with("image: quay.io/openshift-release-dev/ocp-release@")
        {
            lines.push(format!("    version: {version}"));
        } else if line.contains("file: secrets/pull-secret.example.json") {
            lines.push("    file: pull-secret.json".into());
        } else if line == "references:" {
            lines.push(line.into());
            lines.push("  registryCA:\n    file: registry-ca.pem".into());
            lines.push("  mirrorRecord:\n    file: mirror-record.json".into());
        } else {
            lines.push(line.into());
        }
    }
    lines.push("day1:\n  blacklistIrdma: [master]".into());
    fs_err::write(inventory.join("site.yaml"), lines.join("\n") + "\n").unwrap();
    fs_err::create_dir_all(inventory.join("manifests")).unwrap();
    fs_err::write(
        inventory.join("manifests/50-chrony.yaml"),
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 50-master-chrony\n  labels:\n    machineconfiguration.openshift.io/role: master\n",
    )
    .unwrap();
    inventory
}
