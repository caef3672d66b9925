//! A stage's inputs: every file and setting its result depends on, by name, each as the sha256
//! of its bytes. Secrets (the pull secret, BMC credentials) are hashed like files and only their
//! hash is kept. Names say where a value comes from: `inventory:site.yaml`,
//! `secret:references.pullSecret`, `setting:bootstrapVersion`, `run:config/install-config.yaml`.

use crate::install::rundir::RunDir;
use crate::inventory::model::SecretRef;
use crate::inventory::{self, Inventory};
use crate::oci::digest::Digest;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The value recorded for an input file that does not exist (or a variable that is not set).
pub const ABSENT: &str = "absent";

/// A stage's inputs: name -> sha256 (hex) of the value, or [`ABSENT`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Inputs(pub BTreeMap<String, String>);

impl Inputs {
    /// A file: `name` -> its sha256, or [`ABSENT`] when it does not exist. Streamed: one is
    /// `--installer PATH`, some 500 MB.
    pub fn file(&mut self, name: impl Into<String>, path: &Path) -> Result<()> {
        let value = match fs_err::File::open(path).and_then(crate::bounded::hash_reader) {
            Ok((digest, _)) => digest.hex().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => ABSENT.to_string(),
            Err(e) => return Err(e).with_context(|| format!("hashing {}", path.display())),
        };
        self.0.insert(name.into(), value);
        Ok(())
    }

    /// A setting that matters: `setting:NAME` -> the sha256 of its value.
    pub fn setting(&mut self, name: &str, value: &str) {
        self.0.insert(
            format!("setting:{name}"),
            Digest::of(value.as_bytes()).hex().to_string(),
        );
    }

    /// A secret by reference (file or environment variable): `secret:AT` -> the sha256 of its
    /// value; the value itself is never kept.
    pub fn secret(&mut self, at: &str, inv: &Inventory, r: &SecretRef) -> Result<()> {
        let name = format!("secret:{at}");
        match (&r.file, &r.env) {
            (Some(f), _) => self.file(name, &inv.resolve(f))?,
            (None, Some(var)) => {
                let value = std::env::var(var)
                    .map(|v| Digest::of(v.as_bytes()).hex().to_string())
                    .unwrap_or_else(|_| ABSENT.to_string());
                self.0.insert(name, value);
            }
            (None, None) => {
                self.0.insert(name, ABSENT.to_string());
            }
        }
        Ok(())
    }

    /// Every file an earlier stage published under `RUN/DIR`, as `run:DIR/...`: how a later
    /// stage (iso reads `config/`) depends on an earlier one's outputs, so that a change there
    /// reruns it and a rerun that produced the same bytes does not.
    pub fn run_files(&mut self, run: &RunDir, dir: &str) -> Result<()> {
        for (rel, sha) in run.hash_outputs(dir)? {
            self.0.insert(format!("run:{rel}"), sha);
        }
        Ok(())
    }

    /// One file an earlier stage published, `path` under the run directory, as `run:PATH`.
    pub fn run_file(&mut self, run: &RunDir, path: &Path) -> Result<()> {
        let rel = path.strip_prefix(run.root()).unwrap_or(path);
        self.file(format!("run:{}", rel.display()), path)
    }

    /// Each of `names`' entries of the inventory's nodes.yaml, as
    /// `inventory:nodes.yaml[HOSTNAME]` -> the sha256 of the entry as JSON (comments,
    /// layout and the other nodes do not count): what a stage that works on some
    /// nodes depends on, so that adding a node does not rerun a stage of the others. A name
    /// nodes.yaml no longer has is [`ABSENT`].
    pub fn nodes(&mut self, inventory: &Path, names: &[String]) -> Result<()> {
        let path = inventory.join(inventory::model::NODES_FILE);
        let text = fs_err::read_to_string(&path)?;
        let doc: serde_json::Value =
            serde_saphyr::from_str(&text).with_context(|| format!("reading {}", path.display()))?;
        let entries = doc["nodes"].as_array().cloned().unwrap_or_default();
        for name in names {
            let value = entries
                .iter()
                .find(|n| n["hostname"].as_str() == Some(name))
                .map_or(ABSENT.to_string(), |n| {
                    Digest::of(n.to_string().as_bytes()).hex().to_string()
                });
            self.0.insert(
                format!("inventory:{}[{name}]", inventory::model::NODES_FILE),
                value,
            );
        }
        Ok(())
    }

    /// The names whose values differ between `self` and `other` (added, removed or changed).
    pub fn changed(&self, other: &Inputs) -> Vec<String> {
        let mut names: Vec<String> = self
            .0
            .iter()
            .filter(|(k, v)| other.0.get(*k) != Some(*v))
            .map(|(k, _)| k.clone())
            .collect();
        names.extend(other.0.keys().filter(|k| !self.0.contains_key(*k)).cloned());
        names
    }
}

/// What the inventory's rendering depends on: `site.yaml`, `nodes.yaml`, the pull secret, the
/// SSH key, the registry CA and the mirror record, and this program's version (a new bootstrap
/// may render differently). When the files do not load, only the two files are named: the
/// stage runs and reports why.
pub fn render_inputs(dir: &Path) -> Result<(Inputs, Option<Inventory>)> {
    let mut inputs = Inputs::default();
    for name in [inventory::model::SITE_FILE, inventory::model::NODES_FILE] {
        inputs.file(format!("inventory:{name}"), &dir.join(name))?;
    }
    inputs.setting("bootstrapVersion", env!("CARGO_PKG_VERSION"));
    let Ok(inv) = inventory::load(dir) else {
        return Ok((inputs, None));
    };
    let refs = &inv.site.references;
    inputs.secret("references.pullSecret", &inv, &refs.pull_secret)?;
    let files = [
        Some(&refs.ssh_public_key),
        refs.registry_ca.as_ref(),
        refs.mirror_record.as_ref(),
    ];
    for f in files.into_iter().flatten() {
        inputs.file(format!("inventory:{}", f.file), &inv.resolve(&f.file))?;
    }
    Ok((inputs, Some(inv)))
}

/// [`render_inputs`] and what validation alone reads besides: each node's BMC credentials
/// (hashed) and BMC CA.
pub fn validate_inputs(dir: &Path) -> Result<Inputs> {
    let (mut inputs, inv) = render_inputs(dir)?;
    if let Some(inv) = inv {
        for (i, node) in inv.nodes.nodes.iter().enumerate() {
            if let Some(credentials) = &node.bmc.credentials {
                let at = format!("nodes[{i}].bmc.credentials");
                inputs.secret(&at, &inv, credentials)?;
            }
            if let Some(ca) = &node.bmc.ca {
                inputs.file(format!("inventory:{}", ca.file), &inv.resolve(&ca.file))?;
            }
        }
    }
    Ok(inputs)
}

/// The inventory's secrets as they may appear in text: the pull secret whole and every string
/// inside it (the auth tokens), each BMC credential file or variable, whole and each part of
/// `user:password`, the prep login key (whole and each line of its body) and the Git
/// repository's password or key. Read best effort: what cannot be read cannot leak either.
pub fn inventory_secrets(dir: &Path) -> Vec<String> {
    let Ok(inv) = inventory::load(dir) else {
        return Vec::new();
    };
    let read = |r: &SecretRef| -> Option<String> {
        match (&r.file, &r.env) {
            (Some(f), _) => fs_err::read_to_string(inv.resolve(f)).ok(),
            (None, Some(v)) => std::env::var(v).ok(),
            _ => None,
        }
    };
    let mut secrets = Vec::new();
    if let Some(text) = read(&inv.site.references.pull_secret) {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) {
            json_strings(&v, &mut secrets);
            secrets.push(v.to_string());
        }
        secrets.push(text.trim().to_string());
    }
    // Short strings (a user name, "{}") are not secrets and would blank out ordinary words; a
    // BMC password is one however short (Dell's factory default has six letters).
    secrets.retain(|s| s.len() >= 8);
    for node in &inv.nodes.nodes {
        if let Some(text) = node.bmc.credentials.as_ref().and_then(read) {
            let text = text.trim().to_string();
            if let Some((_, password)) = text.split_once(':') {
                if password.len() >= 4 {
                    secrets.push(password.to_string());
                }
            }
            secrets.push(text);
        }
    }
    // The prep login key, whole and each line of its body (a log could quote one line).
    if let Some(key) = &inv.site.prep.ssh.private_key {
        if let Ok(text) = fs_err::read_to_string(inv.resolve(&key.file)) {
            secrets.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|l| l.len() >= 16 && !l.starts_with("-----"))
                    .map(str::to_string),
            );
            secrets.push(text.trim().to_string());
        }
    }
    if let Some(g) = &inv.site.gitops {
        let repo = &g.repository;
        for r in [&repo.password, &repo.ssh_private_key]
            .into_iter()
            .flatten()
        {
            if let Some(text) = read(r) {
                secrets.push(text.trim().to_string());
            }
        }
    }
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    secrets
}

fn json_strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| json_strings(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| json_strings(x, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A later stage that reads `config/` (iso) sees render's new outputs as changed inputs,
    /// and identical outputs as unchanged.
    #[test]
    fn a_later_stage_depends_on_the_outputs_it_reads() {
        let tmp = tempfile::tempdir().unwrap();
        let run = RunDir::new(tmp.path());
        fs_err::create_dir_all(tmp.path().join("config")).unwrap();
        fs_err::write(tmp.path().join("config/agent-config.yaml"), "a").unwrap();
        let read = || {
            let mut i = Inputs::default();
            i.run_files(&run, "config").unwrap();
            i
        };
        let first = read();
        assert!(read().changed(&first).is_empty());
        fs_err::write(tmp.path().join("config/agent-config.yaml"), "b").unwrap();
        assert_eq!(read().changed(&first), ["run:config/agent-config.yaml"]);
    }
}
