//! OpenShift content end to end, against real Distribution registries: release payloads chosen
//! from an update graph and expanded through their image-references, operator catalogs read,
//! filtered by each selection rule and rebuilt, and the cluster resources that map it all. The
//! upstream is what `bootstrap-lab seed` builds (see docs/lab.md), so every expectation below
//! names the seeded content.
//!
//! Here the seeded lab and what the files share; `lab_set.rs` the lab's mirror set, mirror to
//! mirror and across the gap (releases, the rebuilt catalog, cluster resources `oc apply` takes
//! whole), `selection.rs` the operator selection rules and dependencies, `refused.rs` catalog
//! layers that escape the image root, `kubevirt_okd.rs` KubeVirt container disks and OKD
//! channels.

mod kubevirt_okd;
mod lab_set;
mod oci_catalog;
mod refused;
mod selection;

use crate::support;

use bootstrap::oci::layers::read_config_dir;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use support::client::{BlobSource, RegistryClient};
use support::run::{bootstrap, failed, json, lab, ok};
use support::{block_on, Registry};

/// A seeded upstream registry and a scratch directory.
struct Lab {
    upstream: Registry,
    dir: tempfile::TempDir,
    seed: Value,
}

impl Lab {
    fn new() -> Lab {
        let upstream = Registry::plain();
        let dir = tempfile::tempdir().unwrap();
        let host = upstream.host();
        let out = dir.path().join("seed");
        let o = lab(&[
            "seed",
            &format!("docker://{host}"),
            "--plain-http",
            &host,
            "--out",
            out.to_str().unwrap(),
        ]);
        ok(&o);
        let seed = json(&out.join("seed.json"));
        Lab {
            upstream,
            dir,
            seed,
        }
    }

    fn host(&self) -> String {
        self.upstream.host()
    }

    /// The seed's record of release `version`.
    fn release(&self, version: &str) -> &Value {
        self.seed["releases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["version"] == version)
            .unwrap_or_else(|| panic!("the seed has no release {version}"))
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `mirrorsets/lab.yaml` pointed at this lab's upstream.
    fn lab_config(&self) -> PathBuf {
        let text =
            fs_err::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/mirrorsets/lab.yaml"))
                .unwrap();
        self.config("lab.yaml", &text.replace("127.0.0.1:5000", &self.host()))
    }

    /// An ImageSetConfiguration with `mirror:` body `body` (indented by the caller).
    fn config(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        fs_err::write(&path, text).unwrap();
        path
    }

    fn operators_config(&self, name: &str, operators: &str) -> PathBuf {
        let text = format!(
            "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: {}/redhat/redhat-operator-index:v4.18\n{operators}",
            self.host()
        );
        self.config(name, &text)
    }

    fn graph_url(&self) -> String {
        format!("file://{}", self.path("seed/graph.json").display())
    }

    /// OKD's update graph the seed wrote (`--okd-graph-url`).
    fn okd_graph_url(&self) -> String {
        format!("file://{}", self.path("seed/okd-graph.json").display())
    }

    /// Args every mirror run takes: the lab's graph and plain HTTP to the lab's registries.
    fn mirror_args(&self, extra: &[&str], hosts: &[String]) -> Vec<String> {
        let mut args: Vec<String> = vec!["mirror".into(), "--graph-url".into(), self.graph_url()];
        for h in hosts {
            args.push("--plain-http".into());
            args.push(h.clone());
        }
        args.extend(extra.iter().map(|s| s.to_string()));
        args
    }

    /// Mirrors `config` (with `extra` arguments) to `docker://<site>/mirror` with the lab's
    /// graphs (OCP's and OKD's); the run's JSON summary and the record's path.
    fn mirror_to(&self, site: &Registry, config: &Path, extra: &[&str]) -> (Value, PathBuf) {
        let record = self.path("record.json");
        let dest = format!("docker://{}/mirror", site.host());
        let okd = self.okd_graph_url();
        let mut fixed = vec![
            "--okd-graph-url",
            &okd,
            "--output",
            "json",
            "-c",
            config.to_str().unwrap(),
            "--record",
            record.to_str().unwrap(),
        ];
        fixed.extend(extra);
        fixed.push(&dest);
        let args = self.mirror_args(&fixed, &[self.host(), site.host()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let summary = serde_json::from_str(&ok(&bootstrap(&args))).unwrap();
        (summary, record)
    }

    /// The dry run's plan (JSON on stdout) of `config` into a disk mirror that is not created.
    fn plan(&self, config: &Path) -> Value {
        self.plan_with(config, &[]).0
    }

    /// The dry run's plan of `config` with `extra` arguments, and its stderr.
    fn plan_with(&self, config: &Path, extra: &[&str]) -> (Value, String) {
        let dest = format!("file://{}", self.path("never-created").display());
        let mut fixed = vec![
            "--dry-run",
            "--output",
            "json",
            "-c",
            config.to_str().unwrap(),
        ];
        fixed.extend(extra);
        fixed.push(&dest);
        let args = self.mirror_args(&fixed, &[self.host()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = bootstrap(&args);
        let out = ok(&run);
        assert!(!self.path("never-created").exists());
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        (serde_json::from_str(&out).unwrap(), stderr)
    }

    fn plan_error(&self, config: &Path) -> String {
        let dest = format!("file://{}", self.path("never-created").display());
        let args = self.mirror_args(
            &["--dry-run", "-c", config.to_str().unwrap(), &dest],
            &[self.host()],
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        failed(&bootstrap(&args))
    }
}

/// The source references of a plan or record.
fn sources(v: &Value) -> BTreeSet<String> {
    v["images"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["source"].as_str().unwrap().to_string())
        .collect()
}

fn digest(bytes: &[u8]) -> String {
    bootstrap::oci::digest::Digest::of(bytes).to_string()
}
