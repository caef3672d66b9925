//! The iso stage: the agent ISO. The rendered files are copied into `RUN/iso/work/` (the
//! originals in `RUN/config/` stay: the installer consumes its inputs), the extra manifests go
//! under `work/openshift/` (every `*.yaml|yml` of the inventory's `manifests/` folder, and the
//! day-1 MachineConfigs the inventory asks for: `99-<role>-blacklist-irdma`), and
//! the installer the tools stage recorded (`RUN/tools/openshift-install`, or
//! `openshift-baremetal-install` when the inventory names it) runs `agent create image --dir
//! work` with `RUN/tools` first on PATH (the installer calls `oc`) and only the environment it
//! needs, `SSL_CERT_FILE` among it: a trust bundle of the system's roots and the site
//! registry's CA, checked against every registry the installer pulls from before it runs. Its log streams into the
//! stage log; a failure quotes its last error line. The outputs it leaves (the ISO,
//! `rendezvousIP`, `auth/kubeconfig` made 0600, `.openshift_install_state.json` whose watcher
//! token the wait stage needs) are checked and described in `RUN/iso/iso.json`.

use super::{Inputs, IsoServer, StageContext, StageWork};
use crate::install::log::StageLog;
use crate::install::rundir::{
    InstallerDir, CONFIG_DIR, ISO_DIR, ISO_FILE, TOOLS_DIR, TRUST_BUNDLE_FILE,
};
use crate::inventory::model::MachineRole;
use crate::inventory::Inventory;
use crate::render::{AGENT_CONFIG_FILE, INSTALL_CONFIG_FILE};
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The inventory folder whose files become extra manifests.
pub const MANIFESTS_DIR: &str = "manifests";

/// The iso stage.
pub struct Iso;

impl StageWork for Iso {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        let mut inputs = Inputs::default();
        inputs.run_files(&cx.run, CONFIG_DIR)?;
        inputs.run_files(&cx.run, TOOLS_DIR)?;
        for (name, path) in manifest_files(&cx.inventory)? {
            inputs.file(format!("inventory:{MANIFESTS_DIR}/{name}"), &path)?;
        }
        let inv = cx.inventory()?;
        // The installer's trust: the site registry's CA goes into its bundle.
        if let Some(ca) = &inv.site.references.registry_ca {
            inputs.file(format!("inventory:{}", ca.file), &inv.resolve(&ca.file))?;
        }
        let roles = irdma_roles(&inv).join(",");
        inputs.setting("day1.blacklistIrdma", &roles);
        inputs.setting("bootstrapVersion", env!("CARGO_PKG_VERSION"));
        Ok(inputs)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(ISO_DIR)
    }

    fn run(
        &self,
        cx: &StageContext,
        _iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        let inv = cx.inventory()?;
        let work = InstallerDir::in_iso(out);
        let extra = work.extra_manifests();
        fs_err::create_dir_all(&extra)?;
        for name in [INSTALL_CONFIG_FILE, AGENT_CONFIG_FILE] {
            let from = cx.run.root().join(CONFIG_DIR).join(name);
            if !from.is_file() {
                bail!("{} is missing: run the render stage first", from.display());
            }
            let bytes = fs_err::read(&from)?;
            crate::fs::write_atomic_mode(&work.input(name), &bytes, 0o600)?;
        }
        let mut manifests = Vec::new();
        for (name, path) in manifest_files(&cx.inventory)? {
            fs_err::copy(&path, extra.join(&name))?;
            manifests.push(name);
        }
        for role in irdma_roles(&inv) {
            let name = format!("99-{role}-blacklist-irdma.yaml");
            crate::fs::write_atomic(&extra.join(&name), irdma_machine_config(role).as_bytes())?;
            manifests.push(name);
        }
        log.line(&format!("extra manifests: {}", manifests.join(", ")))?;
        let bundle = trust_bundle(&inv, out, log)?;
        check_trust(cx, &bundle, log)?;
        run_installer(cx, &work, &bundle, log)?;
        describe(out, &work, &manifests, log)
    }
}

/// The regular `*.yaml|yml` files of the inventory's `manifests/` folder, by name, sorted.
fn manifest_files(inventory: &Path) -> Result<Vec<(String, std::path::PathBuf)>> {
    let dir = inventory.join(MANIFESTS_DIR);
    let mut files = Vec::new();
    let entries = match fs_err::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(files),
        Err(e) => return Err(e.into()),
    };
    for e in entries {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !(name.ends_with(".yaml") || name.ends_with(".yml")) {
            continue;
        }
        if !e.file_type()?.is_file() {
            bail!(
                "{}: not a regular file; the inventory's manifests are plain YAML files",
                e.path().display()
            );
        }
        files.push((name, e.path()));
    }
    files.sort();
    Ok(files)
}

/// The roles `day1.blacklistIrdma` names, each once.
fn irdma_roles(inv: &Inventory) -> Vec<&'static str> {
    let mut roles: Vec<MachineRole> = inv.site.day1.blacklist_irdma.clone();
    roles.sort();
    roles.dedup();
    roles.into_iter().map(MachineRole::name).collect()
}

/// The day-1 MachineConfig that keeps `irdma` off a role's nodes (OpenShift's "disabling the
/// irdma kernel module").
pub fn irdma_machine_config(role: &str) -> String {
    format!(
        "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata:\n  name: 99-{role}-blacklist-irdma\n  labels:\n    machineconfiguration.openshift.io/role: {role}\nspec:\n  kernelArguments:\n  - module_blacklist=irdma\n"
    )
}

/// Where Go's `crypto/x509` looks for the system's roots on Linux (`root_linux.go`), in its
/// order: the first that exists is the base of the installer's bundle.
const SYSTEM_ROOT_FILES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// `RUN/iso/trust-bundle.pem`: the system's roots (this process's `SSL_CERT_FILE` when set,
/// else the first of Go's files that exists) and the site registry's CA
/// (`references.registryCA`), for the installer and the `oc` it runs as `SSL_CERT_FILE`.
/// `openshift-install agent create image` runs `oc image extract` against the mirror without
/// `--insecure` (openshift/installer `pkg/asset/agent/image/oc.go`), so the mirror must verify
/// with the roots Go reads.
fn trust_bundle(inv: &Inventory, out: &Path, log: &mut StageLog) -> Result<PathBuf> {
    let system = match std::env::var_os("SSL_CERT_FILE") {
        Some(f) => Some(PathBuf::from(f)),
        None => SYSTEM_ROOT_FILES
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file()),
    };
    let mut pem = Vec::new();
    let mut parts = Vec::new();
    if let Some(system) = &system {
        pem = crate::bounded::read_regular(system, 16 << 20)
            .with_context(|| format!("reading the system's TLS roots {}", system.display()))?;
        parts.push(format!("the system's roots ({})", system.display()));
    }
    if let Some(ca) = &inv.site.references.registry_ca {
        let path = inv.resolve(&ca.file);
        let bytes = crate::bounded::read_regular(&path, 1 << 20)
            .with_context(|| format!("reading references.registryCA {}", path.display()))?;
        if !pem.is_empty() && !pem.ends_with(b"\n") {
            pem.push(b'\n');
        }
        pem.extend(bytes);
        parts.push(format!("references.registryCA ({})", ca.file));
    }
    if pem.is_empty() {
        bail!("no TLS roots for the installer: this machine has none of {} and site.yaml gives no references.registryCA; install the system's CA certificates or set SSL_CERT_FILE", SYSTEM_ROOT_FILES.join(", "));
    }
    let bundle = out.join(TRUST_BUNDLE_FILE);
    crate::fs::write_atomic_mode(&bundle, &pem, 0o644)?;
    log.line(&format!(
        "the installer's trust ({TRUST_BUNDLE_FILE}, its SSL_CERT_FILE): {}",
        parts.join(" and ")
    ))?;
    Ok(bundle)
}

/// Checks, before the installer runs, that every registry it will pull from (the release's and
/// each `imageDigestSources` mirror's, from the rendered install-config) verifies with exactly
/// the bundle: an installer that cannot would fail deep inside `oc image extract` and fall
/// back to downloading the base ISO from the Internet.
fn check_trust(cx: &StageContext, bundle: &Path, log: &mut StageLog) -> Result<()> {
    let mut hosts = std::collections::BTreeSet::new();
    hosts.insert(host_of(&super::tools::release(cx.run.root())?));
    let config = cx.run.root().join(CONFIG_DIR).join(INSTALL_CONFIG_FILE);
    let text = crate::bounded::read_regular(&config, 4 << 20)
        .with_context(|| format!("reading {}", config.display()))?;
    let ic: serde_json::Value = serde_saphyr::from_slice(&text)
        .with_context(|| format!("{} does not parse", config.display()))?;
    for key in ["imageDigestSources", "imageContentSources"] {
        for e in ic[key].as_array().into_iter().flatten() {
            for m in e["mirrors"].as_array().into_iter().flatten() {
                if let Some(m) = m.as_str() {
                    hosts.insert(host_of(m));
                }
            }
        }
    }
    let handle = tokio::runtime::Handle::current();
    for host in &hosts {
        handle
            .block_on(crate::oci::registry::check_bundle(host, bundle))
            .map_err(|e| {
                anyhow::anyhow!(
                    "{e:#}. The installer's oc verifies the mirror with this bundle only: put the CA that signed {host}'s certificate in the file site.yaml's references.registryCA names, then run again"
                )
            })?;
        log.line(&format!("{host} verifies with {TRUST_BUNDLE_FILE}"))?;
    }
    Ok(())
}

/// The registry (`HOST[:PORT]`) of an image name or mirror scope.
fn host_of(name: &str) -> String {
    name.split('/').next().unwrap_or(name).to_string()
}

/// Runs `openshift-install agent create image --dir work`, its output streamed into the log;
/// killed when the run is interrupted.
fn run_installer(
    cx: &StageContext,
    work: &InstallerDir,
    bundle: &Path,
    log: &mut StageLog,
) -> Result<()> {
    let work = work.path();
    let tools = cx.run.root().join(TOOLS_DIR);
    let installer = super::tools::installer(cx.run.root())?;
    let cache = cx.run.cache();
    fs_err::create_dir_all(&cache)?;
    let mut cmd = installer_command(&installer, &tools, &cache, work);
    cmd.env("SSL_CERT_FILE", bundle);
    log.line(&format!(
        "running {} agent create image --dir {}",
        installer.display(),
        work.display()
    ))?;
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", installer.display()))?;
    let (status, last_error) = stream_to_log(child, cx, log, "openshift-install")?;
    if !status.success() {
        let quoted = last_error.unwrap_or_else(|| format!("it exited with {status}"));
        bail!(
            "{} agent create image failed: {quoted}",
            installer.file_name().unwrap_or_default().to_string_lossy()
        );
    }
    Ok(())
}

/// The installer's command line and the only environment it gets: PATH with `tools` first
/// (it calls `oc`), HOME, and its cache under the run directory.
fn installer_command(installer: &Path, tools: &Path, cache: &Path, work: &Path) -> Command {
    let mut cmd = Command::new(installer);
    cmd.args(["agent", "create", "image", "--dir"])
        .arg(work)
        .arg("--log-level=info")
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/local/bin:/usr/bin:/bin", tools.display()),
        )
        .env("XDG_CACHE_HOME", cache)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Ok(home) = std::env::var("HOME") {
        cmd.env("HOME", home);
    }
    die_with_parent(&mut cmd);
    cmd
}

/// The child gets SIGKILL when the thread that started it ends.
pub(super) fn die_with_parent(cmd: &mut Command) {
    // A bootstrap killed with -9 must not leave the installer writing into a staging folder
    // that the next run reuses: the child gets SIGKILL when the thread that started it ends.
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe, allocates nothing and touches
        // no state of the parent; it is the one call made between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                rustix::process::set_parent_process_death_signal(Some(
                    rustix::process::Signal::KILL,
                ))
                .map_err(std::io::Error::from)
            });
        }
    }
}

/// Streams the child's stdout and stderr into the log, line by line, until it exits (killed
/// when the run is interrupted); its status and its last `level=error|fatal` line.
pub(super) fn stream_to_log(
    mut child: std::process::Child,
    cx: &StageContext,
    log: &mut StageLog,
    tool: &str,
) -> Result<(std::process::ExitStatus, Option<String>)> {
    let (tx, rx) = mpsc::channel::<String>();
    let mut readers = Vec::new();
    let streams: [Option<Box<dyn std::io::Read + Send>>; 2] = [
        child.stdout.take().map(|s| Box::new(s) as _),
        child.stderr.take().map(|s| Box::new(s) as _),
    ];
    for stream in streams.into_iter().flatten() {
        let tx = tx.clone();
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        }));
    }
    drop(tx);
    let mut last_error = None;
    let status = loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) => {
                // The installer's logrus lines; oc's own `error: ...` and the node-image
                // command's `command execution failed. Reason: ...`.
                if line.contains("level=error")
                    || line.contains("level=fatal")
                    || line.starts_with("error: ")
                    || line.contains("command execution failed")
                {
                    last_error = Some(line.clone());
                }
                log.line(&format!("{tool}: {line}"))?;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break child.wait()?,
        }
        if cx.cancelled() {
            let _ = child.kill();
            let _ = child.wait();
            bail!("interrupted: {tool} was stopped");
        }
    };
    for r in readers {
        let _ = r.join();
    }
    Ok((status, last_error))
}

/// Checks what the installer left and writes `iso.json`; the status line.
fn describe(
    out: &Path,
    work: &InstallerDir,
    manifests: &[String],
    log: &mut StageLog,
) -> Result<String> {
    // The installer's files by their names in `work/` (messages) and in `iso/` (iso.json).
    let (name, rel) = (
        InstallerDir::relative(),
        InstallerDir::in_iso(Path::new("")),
    );
    let iso = work.iso();
    let (digest, size) = crate::bounded::hash_regular(&iso)
        .with_context(|| format!("openshift-install left no {}", iso.display()))?;
    let sha256 = digest.hex().to_string();
    let rendezvous = fs_err::read_to_string(work.rendezvous_ip())
        .with_context(|| {
            format!(
                "openshift-install left no {}",
                name.rendezvous_ip().display()
            )
        })?
        .trim()
        .to_string();
    if !work.kubeconfig().is_file() {
        bail!("openshift-install left no {}", name.kubeconfig().display());
    }
    use std::os::unix::fs::PermissionsExt;
    for secret in [work.kubeconfig(), work.kubeadmin_password(), work.state()] {
        if secret.exists() {
            fs_err::set_permissions(&secret, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    if !work.state().is_file() {
        bail!(
            "openshift-install left no {} (the wait stage needs its watcher token)",
            name.state().display()
        );
    }
    let described = serde_json::json!({
        "iso": rel.iso(),
        "sha256": sha256,
        "size": size,
        "rendezvousIP": rendezvous,
        "kubeconfig": rel.kubeconfig(),
        "state": rel.state(),
        "extraManifests": manifests,
    });
    crate::fs::write_json(&out.join(ISO_FILE), &described)?;
    let iso_name = name.iso().display().to_string();
    log.line(&format!(
        "{iso_name}: {size} bytes, sha256 {sha256}; rendezvousIP {rendezvous}"
    ))?;
    Ok(format!(
        "{iso_name} {}, rendezvousIP {rendezvous}, {} extra manifests",
        crate::output::human_bytes(size),
        manifests.len()
    ))
}
