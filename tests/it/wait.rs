//! The wait stage's watcher against the lab's stand-ins on 127.0.0.1: the installer stand-in
//! makes the ISO and the run's `iso/work` files from the lab's rendered configs, bootstrap's own
//! ISO server serves it, the simulator "boots" the three nodes from it (fetching and reading the
//! ISO as a BMC would), and the watcher follows the install through the rendezvous stand-in and
//! the cluster API stand-in, as `openshift-install agent wait-for` would (issue 26 point 5: the
//! cluster API before the rendezvous API on every poll, a host pending user action fails at
//! once, an operator still rolling out is waited for). Where the lab cannot show a behaviour, a
//! scripted rendezvous host stands in ([`support::scripted`]).

use crate::support;
use bootstrap::install::WaitLimits;
use bootstrap::openshift::assisted::{self, ApiError};
use bootstrap::openshift::watch::{watcher_token, WaitFailure, WaitResult, WaitView, Watch};
use bootstrap_lab::site::simulator::{Observation, Simulator, SimulatorConfig};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

const NODES: [&str; 3] = ["master-0", "master-1", "master-2"];
const STEP: Duration = Duration::from_millis(150);
/// A step long enough for a 50 ms poll to see every stage on a loaded machine.
const SLOW_STEP: Duration = Duration::from_millis(400);

/// What the watcher showed.
#[derive(Default)]
struct Recorded {
    hosts: Vec<(String, String)>,
    said: Vec<String>,
}

impl WaitView for Recorded {
    fn host(&mut self, name: &str, line: &str) {
        self.hosts.push((name.to_string(), line.to_string()));
    }
    fn say(&mut self, line: &str) {
        self.said.push(line.to_string());
    }
}

impl Recorded {
    fn count(&self, needle: &str) -> usize {
        self.said.iter().filter(|l| l.contains(needle)).count()
    }
}

/// A lab install: the stand-in installer's outputs, the ISO served, the stand-ins running.
struct LabInstall {
    _dir: tempfile::TempDir,
    _served: bootstrap::serve::Running,
    work: PathBuf,
    iso_url: String,
    sim: Arc<Simulator>,
    rendezvous: SocketAddr,
    api: SocketAddr,
}

/// `WORK/agent.x86_64.iso` served on 127.0.0.1 (as the boot stage serves it) until dropped.
pub(crate) async fn serve_iso(work: &Path) -> bootstrap::serve::Running {
    let iso = bootstrap::serve::ServedFile::open(&work.join("agent.x86_64.iso")).unwrap();
    bootstrap::serve::start(
        iso,
        "127.0.0.1:0".parse().unwrap(),
        None,
        None,
        None,
        bootstrap::serve::Limits::ISO,
    )
    .await
    .unwrap()
}

impl LabInstall {
    async fn start(validation_failure: Option<&str>, step: Duration) -> LabInstall {
        Self::start_with(SimulatorConfig {
            step,
            validation_failure: validation_failure.map(str::to_string),
            ..SimulatorConfig::default()
        })
        .await
    }

    async fn start_with(config: SimulatorConfig) -> LabInstall {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        make_iso(dir.path(), &work);
        let served = serve_iso(&work).await;
        let iso_url = served.url.clone();
        let sim = Arc::new(Simulator::new(config).unwrap());
        let rest = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let api = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let (rendezvous, api_addr) = (rest.local_addr().unwrap(), api.local_addr().unwrap());
        tokio::spawn(sim.clone().serve(rest, api));
        LabInstall {
            _dir: dir,
            _served: served,
            work,
            iso_url,
            sim,
            rendezvous,
            api: api_addr,
        }
    }

    /// Every node powered on from the ISO with the boot override on Cd.
    async fn boot_all(&self) {
        for node in NODES {
            self.sim
                .observe(Observation {
                    node: node.to_string(),
                    powered_on: true,
                    media: Some(self.iso_url.clone()),
                    boot_cd: true,
                    boots: None,
                })
                .await
                .unwrap();
        }
    }

    fn watch(&self, limits: WaitLimits, seen: Option<PathBuf>) -> Watch {
        let kubeconfig = self.work.join("auth/kubeconfig");
        Watch {
            rendezvous: self.rendezvous.to_string(),
            api_address: Some(self.api),
            poll: Duration::from_millis(50),
            seen_file: seen,
            ..Watch::new(self.rendezvous.ip(), self.token(), kubeconfig, limits)
        }
    }

    fn token(&self) -> String {
        watcher_token(&self.work.join(".openshift_install_state.json")).unwrap()
    }
}

/// The lab's rendered configs through the installer stand-in (pinned as extraction pins it):
/// `work/` holds the ISO, rendezvousIP, auth/kubeconfig and the state file.
pub(crate) fn make_iso(scratch: &Path, work: &Path) {
    use bootstrap::openshift::pin;
    use bootstrap_lab::standin::{script, Tool};
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/render/lab");
    fs_err::create_dir_all(work).unwrap();
    for f in ["install-config.yaml", "agent-config.yaml"] {
        fs_err::copy(testdata.join(f), work.join(f)).unwrap();
    }
    let s = script(
        Tool::OpenshiftInstall,
        &crate::support::run::lab_bin(),
        "4.18.3",
    );
    let reps = [
        pin::Replacement::release_image("site:5000/ocp/release@sha256:ab").unwrap(),
        pin::Replacement::release_version("4.18.3").unwrap(),
    ];
    let mut pinned = Vec::new();
    pin::copy_and_replace(&mut s.as_slice(), &mut pinned, &reps).unwrap();
    let installer = scratch.join("openshift-install");
    fs_err::write(&installer, pinned).unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        fs_err::set_permissions(&installer, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // No release registry here: the base ISO is the installer's override.
    let base = scratch.join("coreos-x86_64.iso");
    fs_err::write(&base, b"a base ISO").unwrap();
    let out = std::process::Command::new(&installer)
        .args(["agent", "create", "image", "--dir"])
        .arg(work)
        .env("OPENSHIFT_INSTALL_OS_IMAGE_OVERRIDE", &base)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn limits(bootstrap: u64, install: u64) -> WaitLimits {
    WaitLimits {
        bootstrap: Duration::from_secs(bootstrap),
        install: Duration::from_secs(install),
        ..WaitLimits::default()
    }
}

/// The whole lab install, watched: every host's stages shown (node 0 up to Rebooting, the
/// others to Done), the injected validation failure printed exactly once although it lasts
/// several polls, bootstrap complete detected from the cluster API (kubeconfig's CA, token and
/// tls-server-name) while the rendezvous API still answers (bootkube is done before node 0
/// reboots: the cluster API is read first on every poll, as the installer's
/// `IsBootstrapComplete` does), install complete from the cluster API, the ClusterOperators
/// listed while they come up; a rerun with the same memory prints none of the events or
/// validations again and finds the install complete.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watcher_follows_the_lab_install_to_complete() {
    let lab = LabInstall::start(Some("master-1"), SLOW_STEP).await;
    let seen = lab._dir.path().join("cache/wait.json");
    let watch = lab.watch(limits(60, 60), Some(seen.clone()));
    let cancel = AtomicBool::new(false);
    let mut view = Recorded::default();
    let watching = async { watch.run(&cancel, &mut view).await };
    let booting = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        lab.boot_all().await;
    };
    let (result, ()) = tokio::join!(watching, booting);
    let result: WaitResult = result.unwrap();

    for node in NODES {
        let lines: Vec<&String> = view
            .hosts
            .iter()
            .filter(|(n, _)| n == node)
            .map(|(_, l)| l)
            .collect();
        let stages: std::collections::BTreeSet<&str> = lines
            .iter()
            .filter_map(|l| l.split_whitespace().nth(3))
            .collect();
        assert!(stages.len() >= 4, "{node}: {lines:?}");
        for stage in ["Writing image to disk", "Rebooting"] {
            assert!(
                lines.iter().any(|l| l.contains(stage)),
                "{node} never showed {stage}: {lines:?}"
            );
        }
        let last = if node == "master-0" {
            "Rebooting"
        } else {
            "Done"
        };
        assert_eq!(result.hosts[node].stage.as_deref(), Some(last), "{node}");
    }
    assert!(view
        .hosts
        .iter()
        .any(|(n, l)| n == "master-0" && l.contains("Waiting for bootkube")));
    assert_eq!(
        view.count("Host master-1 validation: Host couldn't synchronize with any NTP server"),
        1,
        "{:#?}",
        view.said
    );
    assert_eq!(
        view.count("validation 'ntp-synced' is now failing"),
        1,
        "the warning event, once: {:#?}",
        view.said
    );
    assert_eq!(view.count("API went away"), 0, "{:#?}", view.said);
    assert_eq!(view.count("Bootstrap Kube API Initialized"), 1);
    assert_eq!(view.count("cluster bootstrap is complete"), 1);
    assert!(
        view.count("ClusterOperators not yet stable: ") >= 2,
        "{:#?}",
        view.said
    );
    assert!(view
        .said
        .iter()
        .any(|l| l.contains("console (unavailable and progressing)")));
    assert!(view
        .said
        .last()
        .unwrap()
        .starts_with("Cluster is installed"));
    assert!(
        result.rest_api_gone.is_none() && result.bootstrap_complete.is_some(),
        "bootstrap was seen complete only once the rendezvous API went away: {:?}",
        result.rest_api_gone
    );
    assert!(result.install_complete.is_some());
    assert_eq!(
        result.console.as_deref(),
        Some("console-openshift-console.apps.lab.rehearsal.example.com")
    );
    assert_eq!(result.cluster.as_ref().unwrap().name, "lab");
    let remembered = fs_err::read_to_string(&seen).unwrap();
    assert!(!remembered.contains(&lab.token()), "the token is a secret");

    let mut again = Recorded::default();
    let result = watch.run(&cancel, &mut again).await.unwrap();
    assert!(result.install_complete.is_some());
    assert_eq!(again.count("validation"), 0, "{:#?}", again.said);
    assert_eq!(again.count("API went away"), 0, "{:#?}", again.said);
    assert_eq!(
        again.hosts.len(),
        3,
        "the last lines, shown once: {:?}",
        again.hosts
    );
}

/// The rendezvous stand-in refuses as assisted-service does: no token and a token signed by
/// another key get 401, the install's own token gets 403 on any endpoint but the watcher's
/// four, and the client reports a refusal as such (not as the API being down), on which the
/// watcher stops at once without quoting the token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rendezvous_refuses_other_tokens_and_endpoints() {
    let lab = LabInstall::start(None, STEP).await;
    // Another install's token: a JWT of the same shape, signed by another key. Made before the
    // first lab's install starts: made after, it took long enough on a loaded machine for that
    // install to reach the point where its rendezvous API goes away (a reset, not a 401).
    let other = LabInstall::start(None, STEP).await;
    lab.boot_all().await;
    let authority = lab.rendezvous.to_string();
    let good = assisted::Client::new(&authority, lab.token(), Duration::from_secs(5)).unwrap();
    let clusters = good.clusters().await.unwrap();
    assert_eq!(clusters[0].hosts.len(), 3);
    let envs = good.infra_envs().await.unwrap();
    let events = good
        .events(&assisted::EventQuery {
            infra_env_id: Some(envs[0].id.clone()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(events
        .iter()
        .any(|e| e.message.contains("Successfully registered")));

    let forged = assisted::Client::new(&authority, other.token(), Duration::from_secs(5)).unwrap();
    match forged.clusters().await {
        Err(ApiError::Refused { code: 401, .. }) => {}
        other => panic!("a foreign token was not refused: {other:?}"),
    }
    // The watcher stops at once on a refused token rather than waiting out its limit.
    let mut watch = lab.watch(limits(60, 60), None);
    watch.token = other.token();
    let err = watch
        .run(&AtomicBool::new(false), &mut Recorded::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.downcast_ref::<ApiError>(),
            Some(ApiError::Refused { code: 401, .. })
        ),
        "{err:#}"
    );
    assert!(!format!("{err:#}").contains(&other.token()), "{err:#}");
    let http = reqwest::Client::new();
    let base = format!("http://{authority}/api/assisted-install/v2");
    let none = http.get(format!("{base}/clusters")).send().await.unwrap();
    assert_eq!(none.status(), 401);
    let body: serde_json::Value = none.json().await.unwrap();
    assert_eq!(body["code"], 401);
    for (method, path) in [
        ("GET", format!("{base}/infra-envs/{}/hosts", envs[0].id)),
        ("POST", format!("{base}/clusters")),
        ("GET", format!("{base}/events")),
    ] {
        let r = http
            .request(method.parse().unwrap(), &path)
            .header(assisted::WATCHER_HEADER, lab.token())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 403, "{method} {path}");
    }
}

/// No node ever boots: the watcher gives up at the bootstrap limit with the installer's words
/// (exit code 5); a cluster that bootstraps but whose operators take longer than the install
/// limit fails with the installer's install timeout (exit code 6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeouts_are_reported_as_the_installer_reports_them() {
    let lab = LabInstall::start(None, STEP).await;
    let mut watch = lab.watch(limits(1, 60), None);
    let cancel = AtomicBool::new(false);
    let err = watch
        .run(&cancel, &mut Recorded::default())
        .await
        .unwrap_err();
    let failure = err.downcast_ref::<WaitFailure>().expect("a WaitFailure");
    assert!(matches!(failure, WaitFailure::BootstrapTimedOut(_)));
    assert_eq!(failure.exit_code(), 5);
    assert!(
        err.to_string()
            .starts_with("bootstrap process timed out: context deadline exceeded"),
        "{err}"
    );

    lab.boot_all().await;
    watch.limits = WaitLimits {
        bootstrap: Duration::from_secs(60),
        install: STEP,
        ..WaitLimits::default()
    };
    let err = watch
        .run(&cancel, &mut Recorded::default())
        .await
        .unwrap_err();
    let failure = err.downcast_ref::<WaitFailure>().expect("a WaitFailure");
    assert!(matches!(failure, WaitFailure::InstallTimedOut(_)), "{err}");
    assert_eq!(failure.exit_code(), 6);
    assert!(err
        .to_string()
        .starts_with("Cluster installation timed out"));
}

/// kubectl, a real client, reads the cluster API stand-in with the installer's kubeconfig
/// (CA, bearer token, tls-server-name): discovery finds the OpenShift kinds, the bootstrap
/// ConfigMap and the ClusterOperators read back; a wrong token is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_the_cluster_api_stand_in() {
    // scripts/install-deps.sh installs it (Debian: kubernetes-client): a missing peer fails.
    let kubectl = Path::new("/usr/bin/kubectl");
    assert!(
        kubectl.exists(),
        "/usr/bin/kubectl is not installed (scripts/install-deps.sh installs kubernetes-client)"
    );
    let lab = LabInstall::start(None, STEP).await;
    lab.boot_all().await;
    let watch = lab.watch(limits(60, 60), None);
    watch
        .run(&AtomicBool::new(false), &mut Recorded::default())
        .await
        .unwrap();
    let home = lab._dir.path().join("home");
    let kubeconfig = lab.work.join("auth/kubeconfig");
    let run = |args: &[&str]| {
        let mut cmd = std::process::Command::new(kubectl);
        cmd.env("HOME", &home)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--server")
            .arg(format!("https://{}", lab.api))
            .arg("--tls-server-name")
            .arg("api.lab.rehearsal.example.com")
            .arg("--cache-dir")
            .arg(home.join("cache"))
            .args(args);
        cmd.output().unwrap()
    };
    let out = run(&[
        "get",
        "configmap",
        "-n",
        "kube-system",
        "bootstrap",
        "-o",
        "jsonpath={.data.status}",
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "complete");
    let out = run(&["get", "clusteroperators", "-o", "name"]);
    assert!(out.status.success(), "{out:?}");
    let names = String::from_utf8_lossy(&out.stdout);
    assert!(
        names.contains("clusteroperator.config.openshift.io/console"),
        "{names}"
    );
    let out = run(&[
        "get",
        "clusterversion",
        "version",
        "-o",
        "jsonpath={.status.conditions[?(@.type==\"Available\")].status}",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "True", "{out:?}");
    let out = run(&["--token", "not-the-admin-token", "get", "clusteroperators"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Unauthorized"),
        "{out:?}"
    );
}

/// The wait stage itself, as the runner calls it, on a run directory whose `iso/work` the
/// installer stand-in wrote: the site's rendezvous IP and API VIP are loopback addresses of
/// their own here (127.77.X.Y, port 8090 and 6443, where the stand-ins listen), so the stage
/// reads its token, rendezvous IP and kubeconfig from the run directory exactly as on a site.
/// It writes `result.json` with the install complete, and neither the watcher token nor the
/// admin token reaches its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wait_stage_reads_the_run_directory_and_keeps_its_tokens_secret() {
    use bootstrap::install::log::StageLog;
    use bootstrap::install::rundir::RunDir;
    use bootstrap::install::stage::{IsoServer, Stage, StageContext};
    let dir = tempfile::tempdir().unwrap();
    let run = dir.path().join("run");
    let work = run.join("iso/work");
    make_iso(dir.path(), &work);
    let n = std::process::id();
    let ip = format!("127.77.{}.{}", (n >> 8) & 0xff, (n & 0xff).max(1));
    fs_err::write(work.join("rendezvousIP"), format!("{ip}\n")).unwrap();
    let kubeconfig = fs_err::read_to_string(work.join("auth/kubeconfig")).unwrap();
    let kubeconfig =
        kubeconfig.replace("https://192.168.111.5:6443", &format!("https://{ip}:6443"));
    assert!(kubeconfig.contains(&ip), "{kubeconfig}");
    fs_err::write(work.join("auth/kubeconfig"), &kubeconfig).unwrap();
    let token = watcher_token(&work.join(".openshift_install_state.json")).unwrap();
    let admin = kubeconfig
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: "))
        .unwrap()
        .to_string();

    let served = serve_iso(&work).await;
    let iso_url = served.url.clone();
    let sim = Arc::new(
        Simulator::new(SimulatorConfig {
            step: STEP,
            failure_steps: 1,
            ..SimulatorConfig::default()
        })
        .unwrap(),
    );
    let rest = std::net::TcpListener::bind(format!("{ip}:8090")).unwrap();
    let api = std::net::TcpListener::bind(format!("{ip}:6443")).unwrap();
    tokio::spawn(sim.clone().serve(rest, api));
    for node in NODES {
        sim.observe(Observation {
            node: node.to_string(),
            powered_on: true,
            media: Some(iso_url.clone()),
            boot_cd: true,
            boots: None,
        })
        .await
        .unwrap();
    }

    let cx = StageContext {
        inventory: dir.path().join("no-inventory"),
        run: RunDir::new(&run),
        cancel: Arc::new(AtomicBool::new(false)),
        installer: None,
        reboot: Vec::new(),
        insecure_api: Vec::new(),
        wait_limits: limits(120, 120),
        installed: false,
        progress: bootstrap::output::Progress::lines("install"),
    };
    let work_ = Stage::Wait.work();
    assert_eq!(work_.output_dir(), Some("wait"));
    let secrets = work_.secrets(&cx);
    assert!(secrets.contains(&token) && secrets.contains(&admin));
    let log_path = run.join("logs/wait.log");
    let out = run.join(".staging/wait");
    let mut iso = IsoServer::new(run.join("logs/iso-access.log"));
    let detail = tokio::task::spawn_blocking({
        let out = out.clone();
        let log_path = log_path.clone();
        move || {
            let mut log = StageLog::open(&log_path, secrets).unwrap();
            work_.run(&cx, &mut iso, &out, &mut log)
        }
    })
    .await
    .unwrap()
    .unwrap();
    assert!(detail.starts_with("cluster lab installed"), "{detail}");
    let result: serde_json::Value =
        serde_json::from_slice(&fs_err::read(out.join("result.json")).unwrap()).unwrap();
    assert!(result["installComplete"].is_string(), "{result}");
    // Polled every 2 s (the installer's interval), the hosts are seen at some stage of theirs.
    assert_eq!(result["hosts"].as_object().unwrap().len(), 3, "{result}");
    let log = fs_err::read_to_string(&log_path).unwrap();
    assert!(log.contains("Cluster is installed"), "{log}");
    assert!(!log.contains(&token) && !log.contains(&admin), "{log}");
    let remembered = fs_err::read_to_string(run.join("cache/wait.json")).unwrap();
    assert!(!remembered.contains(&token) && !remembered.contains(&admin));
}

/// A host that boots the agent ISO again when it reboots (the lab's upstream-shaped wrong boot
/// order: assisted-service puts it in `installing-pending-user-action`) fails the wait at once,
/// naming the node, assisted-service's own words and the fix, with the bootstrap exit code;
/// not after the 60-minute bootstrap limit the installer would wait out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_pending_user_action_fails_the_wait_at_once_with_its_fix() {
    let lab = LabInstall::start_with(SimulatorConfig {
        step: STEP,
        pending_user_action: Some("master-1".into()),
        ..SimulatorConfig::default()
    })
    .await;
    lab.boot_all().await;
    let watch = lab.watch(limits(60, 60), None);
    let mut view = Recorded::default();
    let started = std::time::Instant::now();
    let err = watch
        .run(&AtomicBool::new(false), &mut view)
        .await
        .unwrap_err();
    let failure = err.downcast_ref::<WaitFailure>().expect("a WaitFailure");
    assert!(
        matches!(failure, WaitFailure::PendingUserAction(hosts) if hosts.len() == 1 && hosts[0].0 == "master-1"),
        "{err:#}"
    );
    assert_eq!(failure.exit_code(), 5);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let text = err.to_string();
    for needle in [
        "bootstrap process returned error: host master-1 is installing-pending-user-action",
        "booted the installation image - please reboot and fix boot order",
        "make the installation disk boot first",
        "master-1's rootDevice in nodes.yaml",
        "run bootstrap install again",
    ] {
        assert!(text.contains(needle), "{needle:?} not in {text}");
    }
    assert!(
        view.hosts
            .iter()
            .any(|(n, l)| n == "master-1" && l.contains("installing-pending-user-action")),
        "{:?}",
        view.hosts
    );
    assert_eq!(
        view.count("updated status from installing-in-progress to installing-pending-user-action"),
        1,
        "{:#?}",
        view.said
    );
}

/// A ClusterOperator still rolling out (Available=True, Progressing=True) keeps the install
/// from being complete though ClusterVersion says done and the console Route is admitted (all
/// the installer itself checks): the watcher shows it as progressing and ends only once the
/// operator has settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_install_is_not_complete_while_an_operator_is_still_progressing() {
    let lab = LabInstall::start_with(SimulatorConfig {
        step: STEP,
        progressing_operator: Some("ingress".into()),
        progressing_steps: 8,
        ..SimulatorConfig::default()
    })
    .await;
    lab.boot_all().await;
    let watch = lab.watch(limits(60, 60), None);
    let mut view = Recorded::default();
    let result = watch.run(&AtomicBool::new(false), &mut view).await.unwrap();
    assert!(result.install_complete.is_some());
    assert!(
        view.said
            .iter()
            .any(|l| l.contains("ClusterVersion available (")
                && l.contains("console admitted")
                && l.contains("ClusterOperators not yet stable: ingress (progressing)")),
        "the watcher never waited on the operator alone: {:#?}",
        view.said
    );
    let ingress = lab
        .sim
        .store()
        .get(&bootstrap_lab::site::kube::ObjectRef {
            api_version: "config.openshift.io/v1".into(),
            kind: "ClusterOperator".into(),
            namespace: None,
            name: "ingress".into(),
        })
        .unwrap();
    let progressing = ingress["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Progressing")
        .cloned()
        .unwrap();
    assert_eq!(
        progressing["status"], "False",
        "complete while ingress was still rolling out: {ingress}"
    );
}

/// A rendezvous host that answers every poll, still `installing` (a scripted assisted-service:
/// the lab's goes away one step after bootkube is done), does not keep the watcher from seeing
/// bootstrap complete on the cluster API: each poll reads the cluster API first, as the
/// installer's `IsBootstrapComplete` does, and the watch goes on to the install, while the
/// rendezvous host was still being read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_completes_on_the_cluster_api_while_the_rendezvous_host_still_answers() {
    use support::scripted::{Answer, Scripted};
    let lab = LabInstall::start(None, STEP).await;
    lab.boot_all().await;
    let cluster = serde_json::json!({"id": "c1", "name": "lab", "status": "installing",
        "status_info": "Installation in progress", "hosts": [{"id": "h0",
        "requested_hostname": "master-0", "role": "master", "bootstrap": true,
        "status": "installing-in-progress", "status_info": "",
        "progress": {"current_stage": "Waiting for bootkube", "installation_percentage": 50}}]});
    let rendezvous = Scripted::plain(move |seen| {
        let path = seen.target.split('?').next().unwrap_or_default();
        let body = match path.trim_start_matches("/api/assisted-install/v2") {
            "/clusters" => serde_json::json!([cluster]),
            "/clusters/c1" => cluster.clone(),
            "/infra-envs" => serde_json::json!([{"id": "e1", "name": "lab", "cluster_id": "c1"}]),
            "/events" => serde_json::json!([]),
            _ => return Answer::status(404),
        };
        Answer::status(200)
            .header("Content-Type", "application/json")
            .body(body.to_string())
    });
    let watch = Watch {
        rendezvous: rendezvous.host(),
        ..lab.watch(limits(30, 60), None)
    };
    let mut view = Recorded::default();
    let result = watch
        .run(&AtomicBool::new(false), &mut view)
        .await
        .unwrap_or_else(|e| panic!("{e:#}: {:#?}", view.said));
    assert!(result.bootstrap_complete.is_some() && result.install_complete.is_some());
    assert!(result.rest_api_gone.is_none());
    assert_eq!(result.cluster.unwrap().status, "installing");
    let polls = rendezvous
        .seen()
        .iter()
        .filter(|s| s.target.ends_with("/clusters/c1"))
        .count();
    assert!(polls >= 2, "the rendezvous host was read {polls} times");
}
