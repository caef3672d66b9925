//! `bootstrap render`: a site inventory becomes the agent installer's `install-config.yaml` and
//! `agent-config.yaml`. The inventory is loaded and validated first (every problem printed, exit
//! 1, nothing written); then what it references is read ([`inventory::read_referenced`], the
//! mirror record), both files are built in memory by a pure step (`build`, with `files.rs`
//! mapping the inventory to the installer's own types) and checked with `bootstrap validate`'s
//! rules, and only then written, each atomically (install-config.yaml mode 0600: it holds the
//! pull secret). Output is deterministic and emitted by [`crate::yaml::to_string`].

pub(crate) mod files;

use crate::installer::install_config::ImageSource;
use crate::inventory::model::Node;
use crate::inventory::{
    self, render_inventory_problems, Inventory, InventoryError, InventoryFile, Referenced,
};
use crate::oci::digest::Digest;
use crate::oci::layout::write_atomic_mode;
use crate::oci::reference::ImageRef;
use crate::openshift::record::MirrorRecord;
use crate::secret::Secret;
use crate::yaml::Problem;
use anyhow::{Context, Result};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// The install-config file name.
pub const INSTALL_CONFIG_FILE: &str = "install-config.yaml";
/// The agent-config file name.
pub const AGENT_CONFIG_FILE: &str = "agent-config.yaml";
/// Mode of install-config.yaml (pull secret inside).
const PRIVATE_MODE: u32 = 0o600;
/// Mode of agent-config.yaml.
const PUBLIC_MODE: u32 = 0o644;

/// The rendered files, in memory, and what the summary shows.
#[derive(Debug)]
pub struct Rendered {
    /// install-config.yaml's bytes (holds the pull secret: never print them).
    pub install_config: Secret,
    /// agent-config.yaml's bytes.
    pub agent_config: String,
    /// The release image by digest: as written, or the mirror record's for a version.
    pub release: Option<String>,
    /// One line per node, in agent-config.yaml's order.
    pub nodes: Vec<NodeSummary>,
}

/// What the summary shows of a node: nothing secret.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct NodeSummary {
    /// Host name.
    pub hostname: String,
    /// `master` or `worker`.
    pub role: String,
    /// The BMC's address (credentials are never shown).
    pub bmc: String,
    /// Physical NICs' MACs, lower case.
    pub macs: Vec<String>,
    /// The machine-network address.
    #[serde(rename = "machineIP")]
    pub machine_ip: String,
    /// The root device (deviceName, or the hints given).
    pub root_device: String,
}

/// A written file, for the JSON summary.
#[derive(Debug, Serialize)]
pub struct WrittenFile {
    /// Its path.
    pub path: String,
    /// sha256 of its bytes, hex.
    pub sha256: String,
    /// Its mode, octal (`0600`).
    pub mode: String,
}

/// `--output json`'s document.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RenderSummary {
    /// `<name>.<baseDomain>`.
    pub cluster: String,
    /// The inventory directory.
    pub inventory: String,
    /// The output directory.
    pub out: String,
    /// Control-plane replicas.
    pub control_plane: usize,
    /// Compute replicas.
    pub compute: usize,
    /// The release image by digest, when known.
    pub release: Option<String>,
    /// The files written.
    pub files: Vec<WrittenFile>,
    /// The nodes.
    pub nodes: Vec<NodeSummary>,
}

/// A `bootstrap render` run, resolved.
#[derive(Clone, Debug)]
pub struct RenderSettings {
    /// The inventory directory (site.yaml, nodes.yaml and what they reference).
    pub inventory: PathBuf,
    /// Where the two files go (created when missing).
    pub out: PathBuf,
}

/// What `bootstrap render` did.
#[derive(Debug)]
pub enum RenderOutcome {
    /// Both files were written; the inventory's warnings (rendered as problem lines), if any.
    Rendered {
        /// What was written, for the printer.
        summary: RenderSummary,
        /// The inventory's warnings, one problem per line.
        warnings: Option<String>,
    },
    /// The inventory has problems (one per line); nothing was written.
    Refused(String),
}

/// An inventory checked as far as it can be without writing anything: loaded, validated, what
/// it references read, both files built in memory and passed through `bootstrap validate`'s
/// rules. The install pipeline's validate stage stops here; `bootstrap render` goes on to write.
#[derive(Debug)]
pub enum Checked {
    /// Both files are ready to be written.
    Valid {
        /// The inventory, loaded.
        inventory: Box<Inventory>,
        /// Both files, in memory.
        rendered: Rendered,
        /// The inventory's warnings, one problem per line.
        warnings: Option<String>,
    },
    /// The inventory has problems (one per line).
    Refused(String),
}

/// Everything `bootstrap render` does before it writes: validate the inventory, read what it
/// references, build both files in memory and check them with `bootstrap validate`'s rules.
/// `Err` only for what is not the inventory's fault (an unreadable file, a renderer bug).
pub fn check(inventory: &Path) -> Result<Checked> {
    let (inv, problems) = match inventory::load_validated(inventory) {
        Ok(loaded) => loaded,
        Err(e @ InventoryError::Invalid { .. }) => return Ok(Checked::Refused(e.to_string())),
        Err(e) => return Err(e.into()),
    };
    if problems.iter().any(|(_, p)| p.is_error()) {
        let text = render_inventory_problems(&inv.dir, &problems);
        return Ok(Checked::Refused(text));
    }
    // Warnings only: reported, and the files are written.
    let warnings = (!problems.is_empty()).then(|| render_inventory_problems(&inv.dir, &problems));
    let rendered = match render(&inv) {
        Ok(r) => r,
        Err(problems) => {
            let text = render_inventory_problems(&inv.dir, &problems);
            return Ok(Checked::Refused(text));
        }
    };
    self_check(&rendered)?;
    Ok(Checked::Valid {
        inventory: Box::new(inv),
        rendered,
        warnings,
    })
}

/// `bootstrap render --inventory DIR --out RUNDIR`: [`check`], and only then write both files.
pub fn run(settings: &RenderSettings) -> Result<RenderOutcome> {
    let (inv, rendered, warnings) = match check(&settings.inventory)? {
        Checked::Refused(text) => return Ok(RenderOutcome::Refused(text)),
        Checked::Valid {
            inventory,
            rendered,
            warnings,
        } => (inventory, rendered, warnings),
    };
    let files = write(&rendered, &settings.out)?;
    let (masters, workers) = files::counts(&inv);
    let summary = RenderSummary {
        cluster: format!("{}.{}", inv.site.cluster.name, inv.site.cluster.base_domain),
        inventory: settings.inventory.display().to_string(),
        out: settings.out.display().to_string(),
        control_plane: masters,
        compute: workers,
        release: rendered.release.clone(),
        files,
        nodes: rendered.nodes.clone(),
    };
    Ok(RenderOutcome::Rendered { summary, warnings })
}

impl std::fmt::Display for RenderSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{}: {} control-plane, {} compute nodes",
            self.cluster, self.control_plane, self.compute
        )?;
        for file in &self.files {
            writeln!(
                f,
                "wrote {} (mode {}, sha256 {})",
                file.path, file.mode, file.sha256
            )?;
        }
        Ok(())
    }
}

impl RenderSummary {
    /// The nodes as an aligned table (hostname, role, BMC, MACs, machine IP, root device).
    pub fn node_table(&self) -> String {
        table(&self.nodes)
    }
}

/// The rendered pair must pass `bootstrap validate` (the installer's rules and the ones it
/// misses) before anything is written: a problem here is a bug in the renderer or a rule the
/// inventory's validation lacks, and is reported as such.
fn self_check(rendered: &Rendered) -> Result<()> {
    let problems = crate::installer::validate_files(
        Some(("install-config.yaml", rendered.install_config.expose())),
        Some(("agent-config.yaml", &rendered.agent_config)),
    );
    // Warnings were the inventory's to give (the same checks ran on it); only errors here are
    // renderer bugs.
    if !problems.iter().any(|p| p.problem.is_error()) {
        return Ok(());
    }
    let lines: Vec<String> = problems
        .iter()
        .filter(|p| p.problem.is_error())
        .map(|p| p.to_string())
        .collect();
    anyhow::bail!(
        "the rendered files do not pass bootstrap validate (a bug in bootstrap render; please report it with the inventory); nothing was written:\n{}",
        lines.join("\n")
    )
}

/// nodes-config.yaml for the inventory's nodes `hostnames` (nodes to add to its running
/// cluster: `oc adm node-image create`), each host exactly as agent-config.yaml has it, checked
/// with the installer's rules for the file ([`crate::installer::nodes_config`]); an unknown
/// name or a broken rule is an error naming it.
pub fn nodes_config(inv: &Inventory, hostnames: &[String]) -> anyhow::Result<String> {
    let mut nodes = Vec::new();
    for name in hostnames {
        let node = inv
            .nodes
            .nodes
            .iter()
            .find(|n| &n.hostname == name)
            .ok_or_else(|| anyhow::anyhow!("nodes.yaml has no node {name}"))?;
        nodes.push(node);
    }
    let config = files::nodes_config(inv, &nodes);
    let problems = config.check();
    if !problems.is_empty() {
        anyhow::bail!(
            "{} would be refused by the installer:\n{}",
            crate::installer::nodes_config::FILE,
            problems.join("\n")
        );
    }
    Ok(crate::yaml::to_string(&config)?)
}

/// Both files of a valid inventory (see [`inventory::validate()`]), in memory: reads the pull
/// secret (file or environment), the SSH public key, the registry CA and the mirror record.
/// Problems with those are returned like validation problems, placed at their reference.
pub fn render(inv: &Inventory) -> Result<Rendered, Vec<(InventoryFile, Problem)>> {
    let refs = inventory::read_referenced(inv);
    let mirror = mirror_sources(inv);
    let (refs, (sources, release)) = match (refs, mirror) {
        (Ok(refs), Ok(mirror)) => (refs, mirror),
        (refs, mirror) => {
            let mut problems = refs.err().unwrap_or_default();
            problems.extend(mirror.err());
            return Err(problems);
        }
    };
    let release = inv.site.cluster.release.image.clone().or(release);
    build(inv, refs, sources, release)
}

/// The pure step: the inventory and what it references, read, become both files' bytes.
fn build(
    inv: &Inventory,
    refs: Referenced,
    sources: Vec<ImageSource>,
    release: Option<String>,
) -> Result<Rendered, Vec<(InventoryFile, Problem)>> {
    let install = files::install_config(
        inv,
        refs.pull_secret,
        refs.ssh_key,
        refs.trust_bundle,
        sources,
    );
    let agent = files::agent_config(inv);
    let emit = |what: &str, r: Result<String, serde_saphyr::ser::Error>| {
        r.map_err(|e| vec![inv.problem(InventoryFile::Site, "", format!("emitting {what}: {e}"))])
    };
    let install_config = Secret::new(emit(INSTALL_CONFIG_FILE, crate::yaml::to_string(&install))?);
    let agent_config = emit(AGENT_CONFIG_FILE, crate::yaml::to_string(&agent))?;
    let nodes = agent
        .hosts
        .iter()
        .filter_map(|h| {
            inv.nodes
                .nodes
                .iter()
                .find(|n| h.hostname.as_ref() == Some(&n.hostname))
        })
        .map(|n| summary(inv, n))
        .collect();
    Ok(Rendered {
        install_config,
        agent_config,
        release,
        nodes,
    })
}

type MirrorData = (Vec<ImageSource>, Option<String>);

/// `imageDigestSources` from the mirror record (catalogs excluded: they get CatalogSources), and
/// the release image by digest for `cluster.release.version`.
fn mirror_sources(inv: &Inventory) -> Result<MirrorData, (InventoryFile, Problem)> {
    let Some(rec) = &inv.site.references.mirror_record else {
        return Ok((Vec::new(), None));
    };
    let at = "references.mirrorRecord.file";
    let fail = |m: String| inv.problem(InventoryFile::Site, at, m);
    let path = inv.resolve(&rec.file);
    let record = MirrorRecord::load(&path).map_err(|e| fail(format!("{e:#}")))?;
    let sources = record
        .digest_sources()
        .map_err(|e| fail(format!("{}: {e}", path.display())))?
        .into_iter()
        .map(|s| ImageSource {
            source: s.source,
            mirrors: s.mirrors,
            source_policy: None,
        })
        .collect();
    let release = inv
        .site
        .cluster
        .release
        .version
        .as_deref()
        .and_then(|v| record.release(v))
        .and_then(|img| by_digest(&img.destination, &img.digest));
    Ok((sources, release))
}

fn by_digest(destination: &str, digest: &Digest) -> Option<String> {
    let r = ImageRef::parse(destination).ok()?;
    Some(format!("{}/{}@{digest}", r.registry, r.repository))
}

fn summary(inv: &Inventory, node: &Node) -> NodeSummary {
    let r = &node.root_device;
    let root = r.device_name.clone().unwrap_or_else(|| {
        [
            r.hctl.as_ref().map(|h| format!("hctl {h}")),
            r.serial_number.as_ref().map(|s| format!("serial {s}")),
            r.model.as_ref().map(|m| format!("model {m}")),
            r.wwn.as_ref().map(|w| format!("wwn {w}")),
            r.min_size_gigabytes.map(|g| format!(">= {g} GiB")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
    });
    NodeSummary {
        hostname: node.hostname.clone(),
        role: files::role_name(node.role).to_string(),
        bmc: crate::secret::redact_url(&node.bmc.address),
        macs: node
            .nics
            .iter()
            .map(|n| crate::netaddr::normalize_mac(&n.mac).unwrap_or_else(|_| n.mac.clone()))
            .collect(),
        machine_ip: files::machine_address(inv, node)
            .map(|(ip, _)| ip.to_string())
            .unwrap_or_default(),
        root_device: root,
    }
}

/// The stderr table: one row per node.
fn table(nodes: &[NodeSummary]) -> String {
    let header = [
        "HOSTNAME",
        "ROLE",
        "BMC",
        "MACS",
        "MACHINE IP",
        "ROOT DEVICE",
    ];
    let rows: Vec<[String; 6]> = nodes
        .iter()
        .map(|n| {
            [
                n.hostname.clone(),
                n.role.clone(),
                n.bmc.clone(),
                n.macs.join(","),
                n.machine_ip.clone(),
                n.root_device.clone(),
            ]
        })
        .collect();
    let mut width = header.map(str::len);
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = cells
            .iter()
            .zip(width)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect::<Vec<_>>()
            .join("  ");
        s.truncate(s.trim_end().len());
        s + "\n"
    };
    let mut out = line(&header.map(String::from));
    for r in &rows {
        out.push_str(&line(r));
    }
    out
}

/// Writes both files into `out` (created), each atomically; returns what was written.
fn write(r: &Rendered, out: &Path) -> Result<Vec<WrittenFile>> {
    fs_err::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut written = Vec::new();
    for (name, bytes, mode) in [
        (
            INSTALL_CONFIG_FILE,
            r.install_config.expose().as_bytes(),
            PRIVATE_MODE,
        ),
        (AGENT_CONFIG_FILE, r.agent_config.as_bytes(), PUBLIC_MODE),
    ] {
        let path = out.join(name);
        write_atomic_mode(&path, bytes, mode)
            .with_context(|| format!("writing {}", path.display()))?;
        written.push(WrittenFile {
            path: path.display().to_string(),
            sha256: Digest::of(bytes).hex().to_string(),
            mode: format!("{mode:04o}"),
        });
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let n = NodeSummary {
            hostname: "cp-0".into(),
            role: "master".into(),
            bmc: "https://10.0.0.1".into(),
            macs: vec!["aa:bb:cc:dd:ee:ff".into()],
            machine_ip: "10.0.0.10".into(),
            root_device: "/dev/sda".into(),
        };
        let t = table(&[n]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].find("ROLE"), lines[1].find("master"));
    }
}
