//! The iso stage: the agent ISO. The rendered files are copied into `RUN/iso/work/` (the
//! originals in `RUN/config/` stay: the installer consumes its inputs), the extra manifests go
//! under `work/openshift/` (every `*.yaml|yml` of the inventory's `manifests/` folder, and the
//! day-1 MachineConfigs the inventory asks for: `99-<role>-blacklist-irdma`), and
//! `RUN/tools/openshift-install agent create image --dir work` runs with `RUN/tools` first on
//! PATH (the installer calls `oc`) and only the environment it needs. Its log streams into the
//! stage log; a failure quotes its last error line. The outputs it leaves (the ISO,
//! `rendezvousIP`, `auth/kubeconfig` made 0600, `.openshift_install_state.json` whose watcher
//! token the wait stage needs) are checked and described in `RUN/iso/iso.json`.

use super::{Inputs, IsoServer, StageContext, StageWork};
use crate::install::log::StageLog;
use crate::install::rundir::{CACHE_DIR, CONFIG_DIR, ISO_DIR, TOOLS_DIR};
use crate::inventory::model::MachineRole;
use crate::inventory::Inventory;
use anyhow::{bail, Context, Result};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The inventory folder whose files become extra manifests.
pub const MANIFESTS_DIR: &str = "manifests";
/// The ISO the installer writes for x86_64.
pub const ISO_FILE: &str = "agent.x86_64.iso";

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
        let roles = irdma_roles(&cx.inventory()?).join(",");
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
        let work = out.join("work");
        let extra = work.join("openshift");
        fs_err::create_dir_all(&extra)?;
        for name in ["install-config.yaml", "agent-config.yaml"] {
            let from = cx.run.join(&format!("{CONFIG_DIR}/{name}"));
            if !from.is_file() {
                bail!("{} is missing: run the render stage first", from.display());
            }
            let bytes = fs_err::read(&from)?;
            crate::fs::write_atomic_mode(&work.join(name), &bytes, 0o600)?;
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
        run_installer(cx, &work, log)?;
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

/// Runs `openshift-install agent create image --dir work`, its output streamed into the log;
/// killed when the run is interrupted.
fn run_installer(cx: &StageContext, work: &Path, log: &mut StageLog) -> Result<()> {
    let tools = cx.run.join(TOOLS_DIR);
    let installer = tools.join("openshift-install");
    if !installer.is_file() {
        bail!(
            "{} is missing: run the tools stage first",
            installer.display()
        );
    }
    let cache = cx.run.join(CACHE_DIR);
    fs_err::create_dir_all(&cache)?;
    let mut cmd = installer_command(&installer, &tools, &cache, work);
    log.line(&format!(
        "running {} agent create image --dir {}",
        installer.display(),
        work.display()
    ))?;
    let child = cmd
        .spawn()
        .with_context(|| format!("starting {}", installer.display()))?;
    let (status, last_error) = stream_to_log(child, cx, log)?;
    if !status.success() {
        let quoted = last_error.unwrap_or_else(|| format!("it exited with {status}"));
        bail!("openshift-install agent create image failed: {quoted}");
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
    cmd
}

/// Streams the child's stdout and stderr into the log, line by line, until it exits (killed
/// when the run is interrupted); its status and its last `level=error|fatal` line.
fn stream_to_log(
    mut child: std::process::Child,
    cx: &StageContext,
    log: &mut StageLog,
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
                if line.contains("level=error") || line.contains("level=fatal") {
                    last_error = Some(line.clone());
                }
                log.line(&format!("openshift-install: {line}"))?;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break child.wait()?,
        }
        if cx.cancelled() {
            let _ = child.kill();
            let _ = child.wait();
            bail!("interrupted: openshift-install was stopped");
        }
    };
    for r in readers {
        let _ = r.join();
    }
    Ok((status, last_error))
}

/// Checks what the installer left and writes `iso.json`; the status line.
fn describe(out: &Path, work: &Path, manifests: &[String], log: &mut StageLog) -> Result<String> {
    let iso = work.join(ISO_FILE);
    let (digest, size) = crate::bounded::hash_regular(&iso)
        .with_context(|| format!("openshift-install left no {}", iso.display()))?;
    let sha256 = digest.hex().to_string();
    let rendezvous = fs_err::read_to_string(work.join("rendezvousIP"))
        .context("openshift-install left no rendezvousIP")?
        .trim()
        .to_string();
    let kubeconfig = work.join("auth/kubeconfig");
    if !kubeconfig.is_file() {
        bail!("openshift-install left no auth/kubeconfig");
    }
    use std::os::unix::fs::PermissionsExt;
    for secret in [
        "auth/kubeconfig",
        "auth/kubeadmin-password",
        ".openshift_install_state.json",
    ] {
        let p = work.join(secret);
        if p.exists() {
            fs_err::set_permissions(&p, std::fs::Permissions::from_mode(0o600))?;
        }
    }
    if !work.join(".openshift_install_state.json").is_file() {
        bail!("openshift-install left no .openshift_install_state.json (the wait stage needs its watcher token)");
    }
    let described = serde_json::json!({
        "iso": format!("work/{ISO_FILE}"),
        "sha256": sha256,
        "size": size,
        "rendezvousIP": rendezvous,
        "kubeconfig": "work/auth/kubeconfig",
        "state": "work/.openshift_install_state.json",
        "extraManifests": manifests,
    });
    crate::fs::write_json(&out.join("iso.json"), &described)?;
    log.line(&format!(
        "{ISO_FILE}: {size} bytes, sha256 {sha256}; rendezvousIP {rendezvous}"
    ))?;
    Ok(format!(
        "{ISO_FILE} {}, rendezvousIP {rendezvous}, {} extra manifests",
        crate::output::human_bytes(size),
        manifests.len()
    ))
}
