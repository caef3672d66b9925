//! Issue 30 points 3 and 4a against the seeded lab: `platform.kubeVirtContainer` mirrors the
//! KubeVirt container disk the release's boot images name (oc-mirror v2's
//! `getKubeVirtImages`), and `type: okd` channels are read from OKD's own update graph
//! (`--okd-graph-url`, oc-mirror's `OkdUpdateURL`) and land where oc-mirror puts releases, with
//! the mirror set mapping them; the KubeVirt disk also crosses the gap through a disk mirror.

use super::{digest, Lab};
use crate::support::client::RegistryClient;
use crate::support::run::{bootstrap, json, ok};
use crate::support::{block_on, Registry};
use serde_json::Value;
use std::collections::BTreeSet;

const HEAD: &str = "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\n";

/// Mirrors `config` to `docker://<site>/mirror` with the lab's graphs; the run's JSON summary
/// and its record.
fn mirror(lab: &Lab, site: &Registry, config: &std::path::Path) -> (Value, Value) {
    let (summary, record) = lab.mirror_to(site, config, &[]);
    (summary, json(&record))
}

/// The digest `repo:tag` holds at `site`.
fn tagged_digest(site: &Registry, repo: &str, tag: &str) -> String {
    let client = RegistryClient::new(site);
    block_on(async {
        let (_, m) = client
            .get_manifest(repo, tag)
            .await
            .unwrap_or_else(|e| panic!("{repo}:{tag}: {e}"));
        digest(&m)
    })
}

fn pinned_digest(reference: &Value) -> String {
    reference
        .as_str()
        .unwrap()
        .rsplit_once('@')
        .unwrap()
        .1
        .to_string()
}

/// With `kubeVirtContainer: true`, stable-4.18's head (4.18.3) brings the container disk its
/// `0000_50_installer_coreos-bootimages.yaml` names for x86_64, to
/// `openshift/release:4.18.3-x86_64-kube-virt-container`, and the record lists it.
#[test]
fn kubevirt_container_lands_where_oc_mirror_puts_it() {
    let lab = Lab::new();
    let site = Registry::plain();
    let cfg = lab.config(
        "kubevirt.yaml",
        &format!(
            "{HEAD}mirror:\n  platform:\n    kubeVirtContainer: true\n    channels:\n    - name: stable-4.18\n"
        ),
    );
    let (summary, rec) = mirror(&lab, &site, &cfg);
    let disk = lab.release("4.18.3")["kubevirt"].clone();
    assert!(disk.is_string(), "the seed gives 4.18.3 a KubeVirt disk");
    assert_eq!(summary["releases"][0]["version"], "4.18.3");
    assert_eq!(summary["releases"][0]["kubeVirtContainer"][0], disk);
    assert_eq!(
        tagged_digest(
            &site,
            "mirror/openshift/release",
            "4.18.3-x86_64-kube-virt-container"
        ),
        pinned_digest(&disk)
    );
    let entry = rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["source"] == disk)
        .unwrap_or_else(|| panic!("the record has no {disk}"));
    assert_eq!(entry["path"], "openshift/release");
    assert_eq!(entry["tag"], "4.18.3-x86_64-kube-virt-container");
    assert_eq!(entry["category"], "release");
    assert_eq!(entry["digest"].as_str().unwrap(), pinned_digest(&disk));
}

/// 4.18.1's boot images name no KubeVirt disk: asking for it fails with oc-mirror's message,
/// before anything is copied.
#[test]
fn a_release_without_a_kubevirt_container_fails_with_oc_mirrors_message() {
    let lab = Lab::new();
    let release = lab.release("4.18.1")["image"].as_str().unwrap().to_string();
    assert!(lab.release("4.18.1").get("kubevirt").is_none());
    let cfg = lab.config(
        "no-kubevirt.yaml",
        &format!(
            "{HEAD}mirror:\n  platform:\n    kubeVirtContainer: true\n    release: {release}\n"
        ),
    );
    let err = lab.plan_error(&cfg);
    assert!(
        err.contains(&format!(
            "{release}: could not find kubevirt image in this release"
        )),
        "{err}"
    );
}

/// An OKD channel is read from OKD's graph (`--okd-graph-url`), with semver versions like
/// `4.18.0-okd-scos.1`; each release lands at `openshift/release-images:<version>` (OKD's
/// release tag) and its components at `openshift/release:<version>-<name>`.
#[test]
fn an_okd_channel_mirrors_from_okds_graph() {
    let lab = Lab::new();
    let site = Registry::plain();
    let cfg = lab.config(
        "okd.yaml",
        &format!(
            "{HEAD}mirror:\n  platform:\n    channels:\n    - name: stable-scos-4\n      type: okd\n      minVersion: 4.18.0-okd-scos.1\n      maxVersion: 4.18.0-okd-scos.2\n"
        ),
    );
    let (summary, rec) = mirror(&lab, &site, &cfg);
    let versions: Vec<&str> = summary["releases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["version"].as_str().unwrap())
        .collect();
    assert_eq!(versions, ["4.18.0-okd-scos.1", "4.18.0-okd-scos.2"]);
    assert!(summary["releases"][0]["okd"].as_bool().unwrap());
    let mut expected = BTreeSet::new();
    for r in lab.seed["okdReleases"].as_array().unwrap() {
        let version = r["version"].as_str().unwrap();
        assert_eq!(
            tagged_digest(&site, "mirror/openshift/release-images", version),
            r["digest"].as_str().unwrap()
        );
        // The installer is rebuilt for every release (a component two releases share is
        // tagged under the first that names it).
        let installer = &r["components"]["installer"];
        assert!(installer.as_str().unwrap().contains("/okd/scos-content@"));
        assert_eq!(
            tagged_digest(
                &site,
                "mirror/openshift/release",
                &format!("{version}-installer")
            ),
            pinned_digest(installer)
        );
        expected.insert(format!(
            "{}@{}",
            r["image"].as_str().unwrap().rsplit_once(':').unwrap().0,
            r["digest"].as_str().unwrap()
        ));
        for c in r["components"].as_object().unwrap().values() {
            expected.insert(c.as_str().unwrap().to_string());
        }
    }
    // The cluster's mirror set maps OKD's repositories where the releases landed.
    let idms = fs_err::read_to_string(lab.path("cluster-resources/idms-oc-mirror.yaml")).unwrap();
    for (source, path) in [
        ("okd/scos-content", "openshift/release"),
        ("okd/scos-release", "openshift/release-images"),
    ] {
        assert!(
            idms.contains(&format!(
                "- source: {}/{source}\n    mirrors:\n    - {}/mirror/{path}\n",
                lab.host(),
                site.host()
            )),
            "{idms}"
        );
    }
    let mirrored: BTreeSet<String> = rec["images"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["category"] == "release")
        .map(|i| i["source"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(mirrored, expected);
}

/// The KubeVirt container disk crosses the gap: mirrored to disk, then from the disk (the
/// upstream gone) to the site's registry, under the same tag.
#[test]
fn kubevirt_container_crosses_the_gap() {
    let lab = Lab::new();
    let cfg = lab.config(
        "kubevirt.yaml",
        &format!(
            "{HEAD}mirror:\n  platform:\n    kubeVirtContainer: true\n    channels:\n    - name: stable-4.18\n"
        ),
    );
    let disk = lab.path("disk");
    let args = lab.mirror_args(
        &[
            "-c",
            cfg.to_str().unwrap(),
            &format!("file://{}", disk.display()),
        ],
        &[lab.host()],
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&bootstrap(&args));
    let want = pinned_digest(&lab.release("4.18.3")["kubevirt"]);
    drop(lab.upstream);
    let site = Registry::plain();
    ok(&bootstrap(&[
        "mirror",
        "--from",
        &format!("file://{}", disk.display()),
        "--plain-http",
        &site.host(),
        &format!("docker://{}/site", site.host()),
    ]));
    assert_eq!(
        tagged_digest(
            &site,
            "site/openshift/release",
            "4.18.3-x86_64-kube-virt-container"
        ),
        want
    );
}
