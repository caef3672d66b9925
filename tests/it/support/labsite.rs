//! The lab inventory pointed at a mirrored site registry: `inventory/lab` copied, its release
//! named by version (resolved in the mirror record), its references set to the site registry's
//! CA, a pull secret holding the site registry's credentials, and the mirror record; the day-1
//! irdma MachineConfig asked for the control plane, and one extra manifest; and the seeding of
//! the lab upstream. Shared by the install and extraction tests and the lab rehearsal.

use std::path::{Path, PathBuf};

use super::Registry;

/// `bootstrap-lab seed` into `upstream` (a plain-HTTP registry), its files under `dir/seed`;
/// returns that folder (graph.json, seed.json).
pub fn seed(upstream: &Registry, dir: &Path) -> PathBuf {
    let seed = dir.join("seed");
    super::run::ok(&super::run::lab(&[
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
    super::run::copy_dir(&super::run::shipped_inventory("lab"), &inventory);
    // The spare machine only where a test adds it (`with_spare`): these sites are the three
    // masters, each reset once.
    fs_err::remove_file(inventory.join(bootstrap_lab::site::SPARES_FILE)).unwrap();
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
    lab_prep(&inventory, &mut lines);
    fs_err::write(inventory.join("site.yaml"), lines.join("\n") + "\n").unwrap();
    fs_err::create_dir_all(inventory.join("manifests")).unwrap();
    fs_err::write(
        inventory.join("manifests/50-chrony.yaml"),
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 50-master-chrony\n  labels:\n    machineconfiguration.openshift.io/role: master\n",
    )
    .unwrap();
    inventory
}

/// The lab inventory's three BMCs (127.0.0.1:8001..8003) moved to `ports`, and the TLS ones
/// verified against the lab CA that `bootstrap-lab up` writes to secrets/bmc-ca.pem instead of
/// the shipped opt-out, as on a site. Returns the BMC base URLs, in node order.
pub fn site_bmcs(inventory: &Path, ports: &[u16]) -> Vec<String> {
    let path = inventory.join("nodes.yaml");
    let mut text = fs_err::read_to_string(&path).unwrap();
    let mut bases = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let from = format!("127.0.0.1:{}/", 8001 + i);
        let at = text
            .find(&from)
            .unwrap_or_else(|| panic!("nodes.yaml has no BMC at {from}"));
        let scheme = if text[..at].ends_with("https://") {
            "https"
        } else {
            "http"
        };
        text = text.replacen(&from, &format!("127.0.0.1:{port}/"), 1);
        bases.push(format!("{scheme}://127.0.0.1:{port}"));
    }
    let text = text.replace(
        "    insecureSkipTLSVerify: true",
        "    ca:\n      file: secrets/bmc-ca.pem",
    );
    fs_err::write(&path, text).unwrap();
    bases
}

/// After [`site_bmcs`] (which returned `bases`): the plain BMC (master-2's, no credentials, as
/// shipped) made TLS with Basic auth verified against the lab CA like the others, so every BMC
/// is as a site's should be (the preflight's BMC checks all green).
pub fn verify_every_bmc(inventory: &Path, bases: &[String]) {
    let path = inventory.join("nodes.yaml");
    let mut text = fs_err::read_to_string(&path).unwrap();
    for base in bases.iter().filter(|b| b.starts_with("http://")) {
        let from = format!("    address: {base}/");
        let at = text
            .find(&from)
            .unwrap_or_else(|| panic!("nodes.yaml has no {from}"));
        let end = at + text[at..].find('\n').expect("a line");
        let line = text[at..end].replacen("http://", "https://", 1);
        let tls = format!(
            "{line}\n    credentials:\n      file: secrets/bmc.example\n    ca:\n      file: secrets/bmc-ca.pem"
        );
        text.replace_range(at..end, &tls);
    }
    fs_err::write(&path, text).unwrap();
}

/// inventory/lab copied to `dir/inv` with free BMC ports: as shipped (master-0 and master-1
/// TLS + Basic auth without verification, master-2 plain), or with `verified_tls` every node TLS + Basic
/// auth verified against the lab CA at secrets/bmc-ca.pem (the variant its nodes.yaml describes).
pub fn lab_inventory(dir: &Path, verified_tls: bool) -> (PathBuf, Vec<u16>) {
    let inv = dir.join("inv");
    super::run::copy_dir(&super::run::shipped_inventory("lab"), &inv);
    // The spare machine only for the tests that add it (`with_spare`): the others build the
    // three masters.
    fs_err::remove_file(inv.join(bootstrap_lab::site::SPARES_FILE)).unwrap();
    let ports = free_ports();
    let text = fs_err::read_to_string(inv.join("nodes.yaml")).unwrap();
    let shipped_bmc_lines = [
        "    credentials:",
        "      file: secrets/bmc.example",
        "    insecureSkipTLSVerify: true",
    ];
    let mut out = Vec::new();
    let mut replaced = 0;
    for line in text.lines() {
        if verified_tls && shipped_bmc_lines.contains(&line) {
            continue;
        }
        let bmc = (0..3).find(|i| {
            line.starts_with("    address: ") && line.contains(&format!("127.0.0.1:{}/", 8001 + i))
        });
        let Some(i) = bmc else {
            out.push(line.to_string());
            continue;
        };
        replaced += 1;
        let line = line.replace(&format!(":{}/", 8001 + i), &format!(":{}/", ports[i]));
        if verified_tls {
            out.push(line.replace("http://", "https://"));
            out.push("    credentials:\n      file: secrets/bmc.example".into());
            out.push("    ca:\n      file: secrets/bmc-ca.pem".into());
        } else {
            out.push(line);
        }
    }
    assert_eq!(
        replaced, 3,
        "nodes.yaml no longer has its BMCs on 127.0.0.1:8001..8003"
    );
    fs_err::write(inv.join("nodes.yaml"), out.join("\n") + "\n").unwrap();
    (inv, ports)
}

/// Puts the shipped spare machine (`inventory/lab/spares.yaml`) back into a copied lab
/// inventory, its BMC on a free port; that port.
pub fn with_spare(inv: &Path) -> u16 {
    let shipped = super::run::shipped_inventory("lab").join(bootstrap_lab::site::SPARES_FILE);
    let text = fs_err::read_to_string(shipped).unwrap();
    let port = free_ports()[0];
    assert!(
        text.contains("127.0.0.1:8004/"),
        "spares.yaml no longer has its BMC on 127.0.0.1:8004"
    );
    let text = text.replace("127.0.0.1:8004/", &format!("127.0.0.1:{port}/"));
    fs_err::write(inv.join(bootstrap_lab::site::SPARES_FILE), text).unwrap();
    port
}

/// The lab venv (sushy-tools) that scripts/install-deps.sh makes; tests tell `bootstrap` where
/// it is, as their HOME is a private one.
pub fn venv() -> String {
    std::env::var("BOOTSTRAP_LAB_VENV").unwrap_or_else(|_| {
        format!(
            "{}/.cache/bootstrap/lab-venv",
            std::env::var("HOME").unwrap()
        )
    })
}

/// `bootstrap-lab ARGS` told where the lab venv is (lab up starts sushy-tools from it).
pub fn run_lab(args: &[&str]) -> std::process::Output {
    super::run::lab_command(args)
        .env("BOOTSTRAP_LAB_VENV", venv())
        .output()
        .unwrap()
}

/// Runs `bootstrap ARGS` (the site binary) with the lab venv, as the lab's prep runs it
/// (ansible-playbook is there).
pub fn run_site(args: &[&str]) -> std::process::Output {
    super::run::command(args)
        .env("BOOTSTRAP_LAB_VENV", venv())
        .output()
        .unwrap()
}

/// Three different free ports on 127.0.0.1 (free when this returns: each test binds them soon
/// after), from below the kernel's ephemeral range ([`super::registry::free_port`]).
pub fn free_ports() -> Vec<u16> {
    let mut ports = Vec::new();
    while ports.len() < 3 {
        let port = super::registry::free_port().expect("a free port on 127.0.0.1");
        if !ports.contains(&port) {
            ports.push(port);
        }
    }
    ports
}

/// The lab inventory's prep as a rehearsal runs it: the shipped playbooks (by their paths in
/// this checkout) and the lab's private key made private, as OpenSSH wants it (git checks it
/// out readable by all).
pub fn lab_prep(inventory: &Path, site_lines: &mut Vec<String>) {
    use std::os::unix::fs::PermissionsExt;
    let key = inventory.join("secrets/id_ed25519");
    fs_err::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
    let at = site_lines
        .iter()
        .position(|l| l == "prep:")
        .expect("the lab site.yaml has a prep section");
    let playbooks = ["handshake.yml", "gpu-node.yml"]
        .map(|p| format!("    - {}", super::run::repo("playbooks").join(p).display()));
    site_lines.insert(at + 1, format!("  playbooks:\n{}", playbooks.join("\n")));
}

/// A lab site brought up by a test (`bootstrap-lab up`), taken down when the test ends however
/// it ends.
pub struct SiteLab {
    /// Its state dir.
    pub state: PathBuf,
    /// The inventory it was brought up from.
    pub inv: PathBuf,
}

impl SiteLab {
    /// `bootstrap-lab up --inventory INV --state STATE EXTRA... --output json`: the guard and the status.
    pub fn up(inv: &Path, state: &Path, extra: &[&str]) -> (SiteLab, serde_json::Value) {
        let mut args = vec![
            "up",
            "--inventory",
            inv.to_str().unwrap(),
            "--state",
            state.to_str().unwrap(),
            "--output",
            "json",
        ];
        args.extend_from_slice(extra);
        let o = run_lab(&args);
        let lab = SiteLab {
            state: state.to_path_buf(),
            inv: inv.to_path_buf(),
        };
        let status = serde_json::from_str(&super::run::ok(&o)).unwrap();
        (lab, status)
    }

    /// `bootstrap-lab status --output json`.
    pub fn status(&self) -> serde_json::Value {
        self.json("status")
    }

    /// `bootstrap-lab down --output json`.
    pub fn down(&self) -> serde_json::Value {
        self.json("down")
    }

    fn json(&self, command: &str) -> serde_json::Value {
        let o = run_lab(&[
            command,
            "--state",
            self.state.to_str().unwrap(),
            "--output",
            "json",
        ]);
        serde_json::from_str(&super::run::ok(&o)).unwrap()
    }

    /// `STATE/site.json`.
    pub fn record(&self) -> bootstrap_lab::site::SiteRecord {
        bootstrap_lab::site::SiteRecord::read(&self.state).unwrap()
    }

    /// Each node's reset count, as its emulator logged the resets.
    pub fn resets(&self) -> Vec<(String, u64)> {
        self.status()["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                (
                    n["node"].as_str().unwrap().to_string(),
                    n["resets"].as_u64().unwrap(),
                )
            })
            .collect()
    }
}

impl Drop for SiteLab {
    fn drop(&mut self) {
        let _ = run_lab(&["down", "--state", self.state.to_str().unwrap()]);
    }
}

/// Pushes `repo` (what `bootstrap gitops init` wrote) with real `git` to the inventory's
/// `gitops.repository.url` (the lab's Git server once `bootstrap-lab up` runs), as the engineer
/// does: HTTPS verified against the CA lab up wrote into the inventory, the password from its
/// reference through GIT_ASKPASS (never on a command line). `scratch` holds the askpass helper.
pub fn push_site_repository(repo: &Path, inventory: &Path, scratch: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let inv = bootstrap::inventory::load(inventory).expect("loading the inventory");
    let g = inv
        .site
        .gitops
        .as_ref()
        .expect("the inventory has a gitops section");
    let password = bootstrap::inventory::secret_text(
        &inv,
        "gitops.repository.password",
        g.repository
            .password
            .as_ref()
            .expect("a repository password"),
        "the repository password",
    )
    .expect("reading the repository password");
    let ca = inv.resolve(&g.repository.ca.as_ref().expect("a CA").file);
    let askpass = scratch.join("git-askpass.sh");
    fs_err::write(
        &askpass,
        "#!/bin/sh\ncase \"$1\" in Username*) echo lab;; *) echo \"$LAB_GIT_PASSWORD\";; esac\n",
    )
    .unwrap();
    fs_err::set_permissions(&askpass, std::fs::Permissions::from_mode(0o755)).unwrap();
    let git = |args: &[&str]| {
        let o = std::process::Command::new("git")
            .current_dir(repo)
            .args([
                "-c",
                "user.name=delivery-engineer",
                "-c",
                "user.email=engineer@lab",
            ])
            .args(args)
            .env("GIT_SSL_CAINFO", &ca)
            .env("GIT_ASKPASS", &askpass)
            .env("LAB_GIT_PASSWORD", password.trim())
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .expect("running git");
        assert!(
            o.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "-A"]);
    git(&[
        "commit",
        "-q",
        "-m",
        "the site's GitOps repository, as bootstrap gitops init wrote it",
    ]);
    git(&["push", "-q", &g.repository.url, "main"]);
}
