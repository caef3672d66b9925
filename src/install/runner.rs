//! Running the pipeline: under the run directory's lock, stage after stage in order, each one
//! skipped when its inputs are unchanged and its outputs intact (re-hashed), else run into a
//! staging folder that is published whole when it succeeds. A stage's inputs include what it
//! reads of earlier stages' outputs, so a change reruns the stage it touches and every later
//! stage that depends on what changed; a stage whose inputs cannot be read fails with that
//! error. SIGINT or SIGTERM mark the running stage interrupted.

use super::lock::{LockError, RunLock};
use super::log::{redact, StageLog};
use super::rundir::{RunDir, ISO_ACCESS_LOG};
use super::stage::{Inputs, IsoServer, Stage, StageContext, StageWork, WaitLimits};
use super::state::{now, RunState, Status};
use crate::output::Progress;
use anyhow::{Context, Result};
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `bootstrap install`, resolved.
#[derive(Clone, Debug)]
pub struct InstallSettings {
    /// The inventory directory.
    pub inventory: PathBuf,
    /// The run directory (created when missing).
    pub run: PathBuf,
    /// Run this stage again even if unchanged, and start there (earlier stages must be done).
    pub from: Option<Stage>,
    /// Stop after this stage.
    pub until: Option<Stage>,
    /// `--installer PATH`: an openshift-install to use instead of the release's.
    pub installer: Option<PathBuf>,
    /// `--reboot NODE`: nodes the boot stage resets again although a run already did.
    pub reboot: Vec<String>,
    /// `--insecure-api HOST`: cluster API hosts allowed plain HTTP or unverified TLS.
    pub insecure_api: Vec<String>,
    /// The wait stage's limits.
    pub wait_limits: WaitLimits,
}

/// The signal that stopped a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Signal {
    /// SIGINT (Ctrl-C).
    #[serde(rename = "SIGINT")]
    Interrupt,
    /// SIGTERM.
    #[serde(rename = "SIGTERM")]
    Terminate,
}

impl fmt::Display for Signal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Signal::Interrupt => "SIGINT",
            Signal::Terminate => "SIGTERM",
        })
    }
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Ending {
    /// Every stage asked for is done.
    Complete,
    /// A stage failed.
    Failed {
        /// That stage.
        stage: Stage,
        /// Its log, relative to the run directory.
        log: String,
    },
    /// A signal stopped a stage (or the run between stages).
    Interrupted {
        /// The stage it stopped, if one was running.
        stage: Option<Stage>,
        /// The signal.
        signal: Signal,
    },
}

/// What a run did with one stage.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageReport {
    /// The stage.
    pub stage: Stage,
    /// `ran`, `skipped`, `failed`, `interrupted`, or `kept` (before --from).
    pub action: &'static str,
    /// Why it ran (`first run`, `inputs changed: inventory:nodes.yaml`, ...), or what it made.
    pub detail: String,
}

/// `bootstrap install`'s result.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallReport {
    /// The run directory.
    pub run: String,
    /// The stages this run reached, in order.
    pub stages: Vec<StageReport>,
    /// How it ended.
    pub ending: Ending,
}

impl InstallReport {
    /// The exit code: 0 complete, 1 a stage failed, 130 SIGINT, 143 SIGTERM.
    pub fn exit_code(&self) -> u8 {
        match self.ending {
            Ending::Complete => 0,
            Ending::Failed { .. } => 1,
            Ending::Interrupted {
                signal: Signal::Interrupt,
                ..
            } => 130,
            Ending::Interrupted {
                signal: Signal::Terminate,
                ..
            } => 143,
        }
    }
}

impl fmt::Display for InstallReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for s in &self.stages {
            writeln!(f, "{:<9} {:<11} {}", s.stage.name(), s.action, s.detail)?;
        }
        match &self.ending {
            Ending::Complete => writeln!(f, "done: {}", self.run),
            Ending::Failed { stage, log } => writeln!(
                f,
                "{stage} failed; its log: {}",
                Path::new(&self.run).join(log).display()
            ),
            Ending::Interrupted { stage, signal } => match stage {
                Some(s) => writeln!(f, "{signal}: {s} interrupted; run again to continue"),
                None => writeln!(f, "{signal}: stopped between stages; run again to continue"),
            },
        }
    }
}

/// Runs the pipeline as `settings` say; warnings (a stale lock taken over) and a line per stage
/// go to `progress`. `Err` for what stops the run before any stage (a held lock, an unreadable
/// state file, `--from` with earlier stages unfinished).
pub async fn run(settings: &InstallSettings, progress: &Progress) -> Result<InstallReport> {
    if let (Some(from), Some(until)) = (settings.from, settings.until) {
        anyhow::ensure!(
            from <= until,
            "--from {from} comes after --until {until}; the stages run in the order {}",
            Stage::NAMES.join(", ")
        );
    }
    let dir = RunDir::new(&settings.run);
    fs_err::create_dir_all(dir.root())
        .with_context(|| format!("creating the run directory {}", dir.root().display()))?;
    let (_lock, stale) = RunLock::acquire(&dir.lock()).map_err(|e| match e {
        LockError::Io(e) => e,
        e => anyhow::Error::new(e),
    })?;
    if let Some(old) = stale {
        progress.warn(format_args!(
            "{}: took over a stale lock of {old} (that process is gone)",
            dir.lock().display()
        ));
    }
    let signals = Signals::install()?;
    let mut state = RunState::load(&dir.state())?;
    state.inventory = settings.inventory.display().to_string();
    for rec in &mut state.stages {
        if rec.status == Status::Running {
            // Its process died (the lock was stale, or we would not hold it).
            rec.status = Status::Interrupted;
            rec.detail = Some("its process ended while it ran".to_string());
        }
    }
    // What a killed run left half-made is never taken for an output.
    let staging = dir.staging();
    if staging.exists() {
        fs_err::remove_dir_all(&staging)?;
    }
    state.save(&dir.state())?;
    let cx = StageContext {
        inventory: settings.inventory.clone(),
        run: dir.clone(),
        cancel: signals.cancel.clone(),
        installer: settings.installer.clone(),
        reboot: settings.reboot.clone(),
        insecure_api: settings.insecure_api.clone(),
        wait_limits: settings.wait_limits,
        installed: state.get(Stage::Wait).status == Status::Done,
        progress: progress.clone(),
    };
    let mut runner = Runner {
        settings,
        iso: IsoServer::new(dir.join(ISO_ACCESS_LOG)),
        dir,
        state,
        cx,
        signals,
        progress,
        reports: Vec::new(),
    };
    let ending = runner.stages().await?;
    Ok(InstallReport {
        run: settings.run.display().to_string(),
        stages: runner.reports,
        ending,
    })
}

struct Runner<'a> {
    settings: &'a InstallSettings,
    /// The ISO server, held from the stage that starts it to the end of the run (dropping it
    /// stops it) and lent to each stage for its run.
    iso: IsoServer,
    dir: RunDir,
    state: RunState,
    cx: StageContext,
    signals: Signals,
    progress: &'a Progress,
    reports: Vec<StageReport>,
}

impl Runner<'_> {
    async fn stages(&mut self) -> Result<Ending> {
        if self.cx.installed {
            self.refuse_reinstalling()?;
        }
        for stage in Stage::ALL {
            if self.settings.until.is_some_and(|u| stage > u) {
                break;
            }
            if let Some(signal) = self.signals.received() {
                return Ok(Ending::Interrupted {
                    stage: None,
                    signal,
                });
            }
            if self.settings.from.is_some_and(|f| stage < f) {
                let rec = self.state.get(stage);
                anyhow::ensure!(
                    rec.status == Status::Done,
                    "--from {}: {stage} is {}, not done; run without --from (or --from {stage}) first",
                    self.settings.from.map_or("", Stage::name),
                    rec.status.name()
                );
                self.report(stage, "kept", "before --from".to_string());
                continue;
            }
            let work = stage.work();
            // `--from wait` on an installed cluster is asked for: the wait only reads the cluster
            // and ejects the media again.
            let sealed = self.cx.installed
                && stage.installs()
                && !(stage == Stage::Wait && self.settings.from == Some(Stage::Wait));
            let inputs = match work.inputs(&self.cx) {
                Ok(inputs) => inputs,
                Err(e) if sealed => {
                    self.keep_installed(stage, format!("its inputs cannot be read ({e:#})"));
                    continue;
                }
                Err(e) => return self.unreadable_inputs(stage, work, e),
            };
            let Some(reason) = self.why_run(stage, work, &inputs)? else {
                let detail = self.state.get(stage).detail.clone().unwrap_or_default();
                self.report(stage, "skipped", format!("unchanged: {detail}"));
                continue;
            };
            if sealed {
                self.keep_installed(stage, reason);
                continue;
            }
            if let Some(ending) = self.run_stage(stage, work, inputs, reason).await? {
                return Ok(ending);
            }
        }
        Ok(Ending::Complete)
    }

    /// A run whose cluster is installed: `--from` a stage that made it (render, tools, iso,
    /// boot: a new agent-config.yaml, ISO or kubeconfig would no longer describe the cluster
    /// that runs), or `--reboot` of one of its nodes, would touch the running cluster; refused
    /// before anything runs. `--from wait` is allowed: it reads the cluster and ejects the
    /// media again.
    fn refuse_reinstalling(&self) -> Result<()> {
        if let Some(from) = self
            .settings
            .from
            .filter(|f| f.installs() && *f != Stage::Wait)
        {
            anyhow::bail!(
                "--from {from}: the cluster in {} is installed (its wait is done), and {from} is \
                 one of the stages that made it; they are not run again on a running cluster. Nodes added to nodes.yaml are day two's (run without --from); to \
                 install another cluster, use a new --run directory",
                self.dir.root().display()
            );
        }
        if self.settings.reboot.is_empty() {
            return Ok(());
        }
        let installed = crate::install::stage::installed_nodes(&self.dir)?;
        let running: Vec<&String> = self
            .settings
            .reboot
            .iter()
            .filter(|n| installed.contains(n))
            .collect();
        if !running.is_empty() {
            anyhow::bail!(
                "--reboot {}: a node of the installed cluster in {}; bootstrap never resets a \
                 running node (drain it and reset it through its BMC yourself if you mean to). \
                 --reboot takes a node being added on day two",
                running
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                self.dir.root().display()
            );
        }
        Ok(())
    }

    /// A stage that installed the cluster, kept although `why` it would run.
    fn keep_installed(&mut self, stage: Stage, why: String) {
        let detail = self.state.get(stage).detail.clone().unwrap_or_default();
        self.report(
            stage,
            "kept",
            format!(
                "the cluster is installed, so it is not run again ({why}; a change to an \
                 installed node or the cluster is not applied by bootstrap); {detail}"
            ),
        );
    }

    /// Where the ISO server appends every answer.
    fn iso_access_log(&self) -> std::path::PathBuf {
        self.dir.join(ISO_ACCESS_LOG)
    }

    fn report(&mut self, stage: Stage, action: &'static str, detail: String) {
        self.progress
            .println(&format!("{:<9} {action}: {detail}", stage.name()));
        self.reports.push(StageReport {
            stage,
            action,
            detail,
        });
    }

    /// Why `stage` must run, or `None` when it is done, its inputs unchanged and its outputs
    /// as recorded.
    fn why_run(
        &self,
        stage: Stage,
        work: &dyn StageWork,
        inputs: &Inputs,
    ) -> Result<Option<String>> {
        let rec = self.state.get(stage);
        if self.settings.from == Some(stage) {
            return Ok(Some(format!("--from {stage}")));
        }
        if let Some(reason) = work
            .must_run(&self.cx)
            .filter(|_| !(self.cx.installed && stage.installs()))
        {
            return Ok(Some(reason));
        }
        if rec.status != Status::Done {
            return Ok(Some(
                match rec.status {
                    Status::Pending => "first run",
                    Status::Failed => "failed last time",
                    Status::Running | Status::Interrupted | Status::Done => "was interrupted",
                }
                .to_string(),
            ));
        }
        let changed = inputs.changed(&rec.inputs);
        if !changed.is_empty() {
            return Ok(Some(format!("inputs changed: {}", changed.join(", "))));
        }
        let outputs = match work.output_dir() {
            Some(d) => self.dir.hash_outputs(d)?,
            None => Default::default(),
        };
        if outputs != rec.outputs {
            let mut names: Vec<&String> = outputs
                .iter()
                .filter(|(k, v)| rec.outputs.get(*k) != Some(*v))
                .map(|(k, _)| k)
                .collect();
            names.extend(rec.outputs.keys().filter(|k| !outputs.contains_key(*k)));
            let names: Vec<&str> = names.into_iter().map(String::as_str).collect();
            return Ok(Some(format!("outputs changed: {}", names.join(", "))));
        }
        Ok(None)
    }

    /// Records in state.json how `stage`'s attempt (begun at `started`) ended.
    fn end(
        &mut self,
        stage: Stage,
        status: Status,
        started: Instant,
        detail: String,
    ) -> Result<()> {
        let rec = self.state.get_mut(stage);
        rec.status = status;
        rec.ended = Some(now());
        rec.seconds = Some(started.elapsed().as_secs_f64());
        rec.detail = Some(detail);
        self.state.save(&self.dir.state())
    }

    /// Runs one stage; `Some(ending)` when the run stops here.
    async fn run_stage(
        &mut self,
        stage: Stage,
        work: &'static dyn StageWork,
        inputs: Inputs,
        reason: String,
    ) -> Result<Option<Ending>> {
        let (attempt, log) = self.begin(stage, work, inputs, &reason)?;
        // Staged under the name of the folder it becomes; a stage with none gets one by its
        // own name, never published.
        let out = self
            .dir
            .staging_for(work.output_dir().unwrap_or(stage.name()));
        let (result, mut log) = match self
            .work_or_signal(stage, work, &out, log, &attempt)
            .await?
        {
            Worked::Finished(result, log) => (result, log),
            Worked::Interrupted(signal) => {
                return self.interrupted(stage, &attempt, signal).map(Some)
            }
        };
        match result.and_then(|detail| self.publish(work, &out).map(|()| detail)) {
            Ok(detail) => {
                self.succeeded(stage, work, &attempt, &mut log, &reason, detail)?;
                Ok(None)
            }
            Err(e) => self.failed(stage, &attempt, &mut log, e).map(Some),
        }
    }

    /// Opens the stage's log and records the stage running with `inputs`.
    fn begin(
        &mut self,
        stage: Stage,
        work: &dyn StageWork,
        inputs: Inputs,
        reason: &str,
    ) -> Result<(Attempt, StageLog)> {
        let log_name = RunDir::log_name(stage.name());
        let secrets = work.secrets(&self.cx);
        let mut log = StageLog::open(&self.dir.join(&log_name), secrets.clone())?;
        log.line(&format!(
            "== {stage}: started ({reason}); bootstrap {}",
            env!("CARGO_PKG_VERSION")
        ))?;
        self.progress
            .println(&format!("{:<9} running: {reason}", stage.name()));
        let rec = self.state.get_mut(stage);
        rec.status = Status::Running;
        rec.started = Some(now());
        rec.ended = None;
        rec.seconds = None;
        rec.inputs = inputs;
        rec.outputs.clear();
        rec.detail = None;
        rec.log = Some(log_name.clone());
        self.state.save(&self.dir.state())?;
        let attempt = Attempt {
            log_name,
            secrets,
            started: Instant::now(),
        };
        Ok((attempt, log))
    }

    /// The stage's work into `out`, on a blocking thread, or the signal that came first.
    async fn work_or_signal(
        &mut self,
        stage: Stage,
        work: &'static dyn StageWork,
        out: &Path,
        mut log: StageLog,
        attempt: &Attempt,
    ) -> Result<Worked> {
        let cx = self.cx.clone();
        // Lent to the stage's thread and taken back when it ends; a stage interrupted keeps it
        // until its thread ends, and the run ends then.
        let empty = IsoServer::new(self.iso_access_log());
        let mut iso = std::mem::replace(&mut self.iso, empty);
        let task = tokio::task::spawn_blocking({
            let out = out.to_path_buf();
            move || {
                let result = work.run(&cx, &mut iso, &out, &mut log);
                test_pause(stage, &cx);
                (result, log, iso)
            }
        });
        // A signal wins over a stage that ends at the same moment (it may have ended because
        // of the signal): nothing it did is published, and the rerun does it again.
        tokio::select! {
            biased;
            signal = self.signals.wait() => Ok(Worked::Interrupted(signal)),
            joined = task => Ok(match joined {
                Ok((result, log, iso)) => {
                    self.iso = iso;
                    Worked::Finished(result, log)
                }
                // A bug, not the site's fault: still recorded as the stage's failure, in its
                // log and state.json, rather than ending the run with the stage left running.
                Err(e) => Worked::Finished(
                    Err(anyhow::anyhow!("bootstrap failed inside the stage (a bug; please report it): {e}")),
                    StageLog::open(&self.dir.join(&attempt.log_name), attempt.secrets.clone())?,
                ),
            }),
        }
    }

    /// Puts the stage's staging folder `out` in place of its output folder.
    fn publish(&self, work: &dyn StageWork, out: &Path) -> Result<()> {
        if let Some(d) = work.output_dir() {
            if !out.exists() {
                fs_err::create_dir_all(out)?;
            }
            self.dir.publish(out, d)?;
        }
        Ok(())
    }

    /// Records the stage done with its published outputs.
    fn succeeded(
        &mut self,
        stage: Stage,
        work: &dyn StageWork,
        attempt: &Attempt,
        log: &mut StageLog,
        reason: &str,
        detail: String,
    ) -> Result<()> {
        let elapsed = attempt.started.elapsed().as_secs_f64();
        let outputs = match work.output_dir() {
            Some(d) => self.dir.hash_outputs(d)?,
            None => Default::default(),
        };
        for (name, sha) in &outputs {
            log.line(&format!("output {name} sha256 {sha}"))?;
        }
        log.line(&format!("== {stage}: done in {elapsed:.1}s"))?;
        let detail = redact(&detail, &attempt.secrets);
        self.state.get_mut(stage).outputs = outputs;
        self.end(stage, Status::Done, attempt.started, detail.clone())?;
        self.report(stage, "ran", format!("{reason}; {detail}"));
        Ok(())
    }

    /// Records the stage failed with `e`: the whole error in its log and the report, its first
    /// line in state.json.
    fn failed(
        &mut self,
        stage: Stage,
        attempt: &Attempt,
        log: &mut StageLog,
        e: anyhow::Error,
    ) -> Result<Ending> {
        let elapsed = attempt.started.elapsed().as_secs_f64();
        let full = redact(&format!("{e:#}"), &attempt.secrets);
        let first = redact(&e.to_string(), &attempt.secrets);
        log.line(&format!("error: {full}"))?;
        log.line(&format!("== {stage}: failed after {elapsed:.1}s"))?;
        let first = first.lines().next().unwrap_or_default().to_string();
        self.end(stage, Status::Failed, attempt.started, first)?;
        self.report(stage, "failed", full);
        Ok(Ending::Failed {
            stage,
            log: attempt.log_name.clone(),
        })
    }

    /// Records the stage interrupted by `signal`; nothing it made is published.
    fn interrupted(&mut self, stage: Stage, attempt: &Attempt, signal: Signal) -> Result<Ending> {
        let detail = format!("interrupted by {signal}; run again to continue");
        self.end(stage, Status::Interrupted, attempt.started, detail)?;
        // The stage's thread only ever writes under .staging, which the next run clears.
        let mut log = StageLog::open(&self.dir.join(&attempt.log_name), Vec::new())?;
        log.line(&format!("== {stage}: interrupted by {signal}"))?;
        self.report(stage, "interrupted", signal.to_string());
        Ok(Ending::Interrupted {
            stage: Some(stage),
            signal,
        })
    }

    /// A stage whose inputs cannot be read fails with that error: hashing fewer of them could
    /// take a changed stage for an unchanged one.
    fn unreadable_inputs(
        &mut self,
        stage: Stage,
        work: &dyn StageWork,
        e: anyhow::Error,
    ) -> Result<Ending> {
        let (attempt, mut log) =
            self.begin(stage, work, Inputs::default(), "reading its inputs")?;
        self.failed(stage, &attempt, &mut log, e)
    }
}

/// One attempt at a stage: its log and when it started.
struct Attempt {
    log_name: String,
    secrets: Vec<String>,
    started: Instant,
}

/// How a stage's work ended: its result and log, or a signal first.
enum Worked {
    Finished(Result<String>, StageLog),
    Interrupted(Signal),
}

/// SIGINT and SIGTERM, watched from the start of the run: the first one received is kept, and
/// `cancel` tells a stage's thread to stop what it can.
struct Signals {
    rx: tokio::sync::watch::Receiver<Option<Signal>>,
    cancel: Arc<AtomicBool>,
}

impl Signals {
    fn install() -> Result<Self> {
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt()).context("watching SIGINT")?;
        let mut term = signal(SignalKind::terminate()).context("watching SIGTERM")?;
        let (tx, rx) = tokio::sync::watch::channel(None);
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = cancel.clone();
        tokio::spawn(async move {
            let got = tokio::select! {
                _ = int.recv() => Signal::Interrupt,
                _ = term.recv() => Signal::Terminate,
            };
            // Sent before the flag is raised: a stage's thread that stops on the flag finds the
            // signal already there for the runner to see.
            let _ = tx.send(Some(got));
            flag.store(true, Ordering::SeqCst);
        });
        Ok(Signals { rx, cancel })
    }

    fn received(&self) -> Option<Signal> {
        *self.rx.borrow()
    }

    async fn wait(&mut self) -> Signal {
        loop {
            if let Some(s) = *self.rx.borrow_and_update() {
                return s;
            }
            if self.rx.changed().await.is_err() {
                // The watcher ended without a signal: never resolve.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The test hook that makes a stage slow enough to interrupt: `BOOTSTRAP_TEST_STAGE_PAUSE=STAGE`
/// holds that stage, after its work and before its outputs are published, for up to a minute
/// or until the run is interrupted. Used by the tests and documented in docs/install.md; it
/// changes no output.
fn test_pause(stage: Stage, cx: &StageContext) {
    if std::env::var("BOOTSTRAP_TEST_STAGE_PAUSE").as_deref() != Ok(stage.name()) {
        return;
    }
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until && !cx.cancelled() {
        std::thread::sleep(Duration::from_millis(20));
    }
}
