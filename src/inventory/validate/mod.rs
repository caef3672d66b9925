//! The inventory's rules: everything the agent installer enforces on the install-config.yaml and
//! agent-config.yaml rendered from it (the same facts `bootstrap validate` applies, from
//! [`crate::installer::checks`]), and what it misses but a site pays for later (duplicate
//! addresses, a rendezvous IP on no control-plane node, a VLAN on a NIC that is not there).
//! Every problem is reported at once, each with its file, field path, line and column.
//!
//! `site.rs` checks site.yaml (cluster, networks, references), `nodes.rs` each node on its own
//! and what must be unique across nodes, `cross.rs` what ties the site to its nodes (the control
//! plane's size, VIPs, the rendezvous host). Only the inventory's own files and the public files
//! it references are read; secrets are never read here.

mod cross;
mod gitops;
mod install;
pub(crate) use install::issues_watcher_token;
mod nodes;
mod prep;
mod site;

use super::model::{Role, SecretRef, VlanInterface};
use super::{Inventory, InventoryFile};
use crate::installer::checks::{Check, Finding};
use crate::netaddr::Cidr;
use crate::yaml::{quote, Problem};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// MTUs accepted: IPv6's minimum to the largest jumbo frame switches carry.
const MTU_RANGE: std::ops::RangeInclusive<u32> = 1280..=9216;

/// Every problem of `inv`, in file order (site.yaml, then nodes.yaml, each by field), each with
/// its file, field path, line and column. Empty when the inventory can be rendered.
pub fn validate(inv: &Inventory) -> Vec<(InventoryFile, Problem)> {
    let mut v = Validator {
        inv,
        problems: Vec::new(),
        machine: Vec::new(),
        open_secrets: BTreeSet::new(),
    };
    v.cluster_identity();
    v.release();
    v.networks();
    v.references();
    v.nodes();
    v.control_plane();
    v.vips_and_rendezvous();
    v.boot();
    v.prep_site();
    v.prep_nodes();
    v.gitops();
    v.problems.sort_by(|a, b| {
        (a.0, a.1.location.map(|l| (l.line, l.column)))
            .cmp(&(b.0, b.1.location.map(|l| (l.line, l.column))))
    });
    v.problems
}

/// The problems `bootstrap install` adds to [`validate`]'s ([`install`]'s rules: a release
/// whose installer issues the watcher token), in file order, each with its file, field path,
/// line and column (when `inv` was loaded with positions).
pub fn validate_for_install(inv: &Inventory) -> Vec<(InventoryFile, Problem)> {
    let mut v = Validator {
        inv,
        problems: Vec::new(),
        machine: Vec::new(),
        open_secrets: BTreeSet::new(),
    };
    v.watcher_token_release();
    v.problems
}

struct Validator<'a> {
    inv: &'a Inventory,
    problems: Vec<(InventoryFile, Problem)>,
    /// The machine networks that parsed.
    machine: Vec<Cidr>,
    /// Secret files already reported open to others: one finding per file, not per reference
    /// (every node may name the same BMC credentials).
    open_secrets: BTreeSet<std::path::PathBuf>,
}

/// What a secret file holds, which decides how loudly a mode open to others is reported.
#[derive(Clone, Copy)]
enum Secret {
    /// An SSH private key: OpenSSH refuses it, so validation does.
    PrivateKey,
    /// A password, token, pull secret or TLS key: warned about.
    Other,
}

/// A node's static address, parsed.
struct NodeAddress<'a> {
    node: usize,
    index: usize,
    ip: IpAddr,
    hostname: &'a str,
    role: Role,
}

impl<'a> Validator<'a> {
    fn site(&mut self, path: impl Into<String>, message: impl Into<String>) {
        let p = self.inv.problem(InventoryFile::Site, path, message);
        self.problems.push(p);
    }

    fn node(&mut self, path: impl Into<String>, message: impl Into<String>) {
        let p = self.inv.problem(InventoryFile::Nodes, path, message);
        self.problems.push(p);
    }

    /// A check's finding about `path` in `file`, with its severity.
    fn finding(&mut self, file: InventoryFile, path: impl Into<String>, f: Finding) {
        let (file, mut p) = self.inv.problem(file, path, f.message);
        p.severity = f.severity;
        self.problems.push((file, p));
    }

    /// A check's verdict about `path` in `file`: its finding, if any.
    fn check(&mut self, file: InventoryFile, path: impl Into<String>, verdict: Check) {
        if let Err(f) = verdict {
            self.finding(file, path, f);
        }
    }

    fn mtu(&mut self, file: InventoryFile, path: &str, mtu: u32) {
        if !MTU_RANGE.contains(&mtu) {
            let p = self.inv.problem(
                file,
                path,
                format!(
                    "MTU {mtu} is out of range; use {} to {} (9000 for jumbo frames)",
                    MTU_RANGE.start(),
                    MTU_RANGE.end()
                ),
            );
            self.problems.push(p);
        }
    }

    fn in_machine(&self, ip: IpAddr) -> bool {
        self.machine.iter().any(|c| c.contains(ip))
    }

    fn machine_list(&self) -> String {
        self.machine
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// A secret reference: exactly one of file or env; the file must exist, and others than its
    /// owner able to read it is a warning ([`Self::secret_file`]).
    fn secret_ref(&mut self, file: InventoryFile, path: &str, r: &SecretRef) {
        self.secret_ref_as(file, path, r, Secret::Other);
    }

    /// A secret reference to a private key: as [`Self::secret_ref`], and a key file others than
    /// its owner can read is refused, as OpenSSH refuses it.
    fn private_key_ref(&mut self, file: InventoryFile, path: &str, r: &SecretRef) {
        self.secret_ref_as(file, path, r, Secret::PrivateKey);
    }

    fn secret_ref_as(&mut self, file: InventoryFile, path: &str, r: &SecretRef, kind: Secret) {
        let problem = match (&r.file, &r.env) {
            (Some(_), Some(_)) | (None, None) => Some((
                path.to_string(),
                "set exactly one of file (a path) or env (an environment variable's name)".to_string(),
            )),
            (Some(f), None) => {
                return self.secret_file(file, &format!("{path}.file"), f, kind);
            }
            (None, Some(e)) => (!is_env_name(e)).then(|| {
                (format!("{path}.env"), format!("{} is not an environment variable name; use letters, digits and '_' (e.g. PULL_SECRET)", quote(e)))
            }),
        };
        if let Some((p, m)) = problem {
            let p = self.inv.problem(file, p, m);
            self.problems.push(p);
        }
    }

    /// A file holding a secret (`path` is its field): it must exist, and be its owner's alone
    /// ([`crate::secret::open_mode`], OpenSSH's rule). A private key others can read is an
    /// error, as ssh refuses it at the first login; any other secret a warning. Only the mode
    /// is read, never the secret.
    fn secret_file(&mut self, file: InventoryFile, path: &str, name: &str, kind: Secret) {
        if let Some(m) = self.missing_file(name) {
            let p = self.inv.problem(file, path, m);
            self.problems.push(p);
            return;
        }
        let resolved = self.inv.resolve(name);
        let Ok(Some(mode)) = crate::secret::open_mode(&resolved) else {
            return;
        };
        if !self.open_secrets.insert(resolved.clone()) {
            return;
        }
        let finding = match kind {
            // The words the SSH transport uses when it refuses the key.
            Secret::PrivateKey => Finding::error(
                crate::hostprep::ssh::LoginKeyError::Exposed {
                    path: resolved,
                    mode,
                }
                .to_string(),
            ),
            Secret::Other => {
                let shown = resolved.display();
                Finding::warning(format!("{shown} holds a secret and is readable by group or others (mode {mode:04o}): chmod 600 {shown}"))
            }
        };
        self.finding(file, path, finding);
    }

    /// Why `file` (relative to the inventory) cannot be used, or None.
    fn missing_file(&self, file: &str) -> Option<String> {
        let path = self.inv.resolve(file);
        match fs_err::metadata(&path) {
            Ok(m) if m.is_file() => None,
            Ok(_) => Some(format!("{} is not a file", path.display())),
            Err(e) => Some(format!(
                "{} cannot be read: {}",
                path.display(),
                crate::yaml::io_reason(&e)
            )),
        }
    }

    /// A referenced file: it must exist, and `check` its content.
    fn file_ref(&mut self, file: InventoryFile, path: &str, name: &str, check: fn(&str) -> Check) {
        let at = format!("{path}.file");
        let shown = self.inv.resolve(name).display().to_string();
        let finding = match self.missing_file(name) {
            Some(m) => Some(Finding::error(m)),
            None => match fs_err::read_to_string(self.inv.resolve(name)) {
                Ok(text) => check(&text).err().map(|f| Finding {
                    message: format!("{shown}: {}", f.message),
                    ..f
                }),
                Err(e) => Some(Finding::error(format!(
                    "{shown} cannot be read: {}",
                    crate::yaml::io_reason(&e)
                ))),
            },
        };
        if let Some(f) = finding {
            self.finding(file, at, f);
        }
    }
}

fn role_name(r: Role) -> &'static str {
    match r {
        Role::Master => "master",
        Role::Worker => "worker",
        Role::Arbiter => "arbiter",
    }
}

fn join(set: &BTreeSet<&str>) -> String {
    if set.is_empty() {
        "none".into()
    } else {
        set.iter().copied().collect::<Vec<_>>().join(", ")
    }
}

/// The VLAN interface's name: as written, or `<base>.<id>`.
pub(crate) fn vlan_name(v: &VlanInterface, id: Option<u16>) -> String {
    match &v.name {
        Some(n) => n.clone(),
        None => format!("{}.{}", v.base, id.unwrap_or(0)),
    }
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
