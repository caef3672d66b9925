//! A lab cluster for the hand-off, in the test process: the Kubernetes API stand-in on
//! 127.0.0.1 (TLS, an admin kubeconfig), the OLM imitation with the lab's catalog, the Argo CD
//! imitation, and the lab's real Git server (`git http-backend` over HTTPS with a password)
//! holding the repository `bootstrap gitops init` scaffolded from a copy of inventory/lab,
//! committed and pushed with real `git`. The mirror the inventory names is a record with
//! `cluster-resources/` holding the lab catalog's CatalogSource. Everything stops on drop.

use super::run::{copy_dir, ok};
use bootstrap::oci::reference::ImageRef;
use bootstrap::openshift::cluster::ClusterResources;
use bootstrap::secret::Secret;
use bootstrap_lab::site::argocd::{self, ArgoConfig};
use bootstrap_lab::site::git_server::{GitServer, GitTls};
use bootstrap_lab::site::kube::http::{serve_loopback, LoopbackApi};
use bootstrap_lab::site::kube::{AuditEvent, Store};
use bootstrap_lab::site::olm::{self, OlmConfig};
use bootstrap_lab::site::pki::LabCa;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// The registry the mirror's catalog image names (never contacted: the lab OLM knows the
/// catalog by its repository).
pub const MIRROR_REGISTRY: &str = "registry.lab.example.com:8443";

/// The lab cluster, its Git server and the inventory that points at them.
pub struct GitopsLab {
    /// The inventory copy (gitops.repository.url = this lab's Git server).
    pub inventory: PathBuf,
    /// The admin kubeconfig.
    pub kubeconfig: PathBuf,
    /// The repository password (the inventory's secrets/git-password).
    pub password: String,
    /// The cluster's objects.
    pub store: Store,
    /// The scaffolded repository's working copy (pushed to `main`).
    pub repo: PathBuf,
    /// The repository's URL on the lab's Git server.
    pub url: String,
    git_ca: PathBuf,
    askpass: PathBuf,
    /// Scratch space.
    pub dir: PathBuf,
    _api: LoopbackApi,
    _git: GitServer,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    rt: tokio::runtime::Runtime,
    _tmp: tempfile::TempDir,
}

impl Drop for GitopsLab {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `git` in `dir` trusting the lab CA (GIT_SSL_CAINFO, which this machine also sets) and the password given through GIT_ASKPASS (never on a
/// command line).
fn run_git(dir: &Path, ca: &Path, askpass: &Path, password: &str, args: &[&str]) {
    let o = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=engineer", "-c", "user.email=engineer@lab"])
        .args(args)
        .env("GIT_SSL_CAINFO", ca)
        .env("GIT_ASKPASS", askpass)
        .env("LAB_GIT_PASSWORD", password)
        .env("GIT_TERMINAL_PROMPT", "0")
        .output()
        .expect("running git");
    assert!(
        o.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

impl GitopsLab {
    /// Starts the lab cluster and pushes the scaffolded repository.
    pub fn start() -> GitopsLab {
        let _ = tracing_subscriber::fmt()
            .with_env_filter("bootstrap=info")
            .with_test_writer()
            .try_init();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let inventory = dir.join("inventory");
        copy_dir(&super::run::shipped_inventory("lab"), &inventory);
        let password = fs_err::read_to_string(inventory.join("secrets/git-password"))
            .unwrap()
            .trim()
            .to_string();
        let store = Store::lab_cluster().unwrap();
        olm::seed(&store).unwrap();
        let (api, git) = rt.block_on(async {
            let api = serve_loopback(store.clone(), &dir.join("api"))
                .await
                .unwrap();
            let ca = LabCa::generate().unwrap();
            let listen = "127.0.0.1:0".parse().unwrap();
            let tls = GitTls::from_ca(&ca, listen, &[]).unwrap();
            let git = GitServer::start(
                &dir.join("git"),
                listen,
                "lab",
                Secret::new(password.clone()),
                tls,
            )
            .await
            .unwrap();
            (api, git)
        });
        let url = git.create_repo("site").unwrap();
        point_inventory(&inventory, &url, &git.ca_pem);
        let tasks = rt.block_on(async {
            let olm_cfg = OlmConfig {
                step: Duration::from_millis(150),
                ..OlmConfig::lab(MIRROR_REGISTRY).unwrap()
            };
            let argo_cfg = ArgoConfig {
                work_dir: dir.join("argocd"),
                kubectl: PathBuf::from("kubectl"),
                resync: Duration::from_secs(2),
            };
            let s1 = store.clone();
            let s2 = store.clone();
            vec![
                tokio::spawn(async move { olm::run(s1, olm_cfg).await }),
                tokio::spawn(async move {
                    if let Err(e) = argocd::run(s2, argo_cfg).await {
                        panic!("the Argo CD imitation stopped: {e:#}");
                    }
                }),
            ]
        });
        let repo = dir.join("repo");
        ok(&super::run::bootstrap(&[
            "gitops",
            "init",
            repo.to_str().unwrap(),
            "--inventory",
            inventory.to_str().unwrap(),
        ]));
        let askpass = dir.join("askpass.sh");
        fs_err::write(&askpass, "#!/bin/sh\ncase \"$1\" in Username*) echo lab;; *) echo \"$LAB_GIT_PASSWORD\";; esac\n").unwrap();
        Command::new("chmod")
            .args(["755", askpass.to_str().unwrap()])
            .status()
            .unwrap();
        let ca = inventory.join("secrets/git-ca.pem");
        run_git(
            &repo,
            &ca,
            &askpass,
            &password,
            &["init", "-q", "-b", "main"],
        );
        run_git(&repo, &ca, &askpass, &password, &["add", "-A"]);
        run_git(
            &repo,
            &ca,
            &askpass,
            &password,
            &[
                "commit",
                "-q",
                "-m",
                "the site's GitOps repository, as bootstrap gitops init wrote it",
            ],
        );
        run_git(
            &repo,
            &ca,
            &askpass,
            &password,
            &["push", "-q", &url, "main"],
        );
        GitopsLab {
            kubeconfig: api.kubeconfig.clone(),
            inventory,
            password,
            store,
            repo,
            url,
            git_ca: ca,
            askpass,
            dir,
            _api: api,
            _git: git,
            tasks,
            rt,
            _tmp: tmp,
        }
    }

    /// `bootstrap gitops handoff` against this lab (fast polls, a 5-minute limit), its output
    /// in `out`.
    pub fn handoff_command(&self, out: &Path) -> Command {
        let mut c = super::run::command(&[
            "gitops",
            "handoff",
            "--inventory",
            self.inventory.to_str().unwrap(),
            "--kubeconfig",
            self.kubeconfig.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--timeout",
            "2m",
            "--poll-ms",
            "100",
            "--output",
            "json",
        ]);
        c.env("NO_COLOR", "1");
        c
    }

    /// Runs the hand-off to its end.
    pub fn handoff(&self, out: &Path) -> Output {
        self.handoff_command(out).output().unwrap()
    }

    /// `kubectl --kubeconfig` against the lab cluster.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let o = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8(o.stdout).unwrap()
    }

    /// The API calls made so far, in order.
    pub fn audit(&self) -> Vec<AuditEvent> {
        self.store.audit()
    }

    /// Runs `git` in the working copy, as the engineer with the repository password.
    pub fn git(&self, args: &[&str]) {
        run_git(
            &self.repo,
            &self.git_ca,
            &self.askpass,
            &self.password,
            args,
        );
    }

    /// Keeps the runtime (and its servers) alive until `f` returns.
    pub fn with_runtime<T>(&self, f: impl FnOnce() -> T) -> T {
        let _guard = self.rt.enter();
        f()
    }
}

/// Points the inventory copy at this lab: the Git server's URL and CA, and a mirror record
/// whose `cluster-resources/` holds the lab catalog's CatalogSource.
fn point_inventory(inventory: &Path, url: &str, ca_pem: &str) {
    let site = inventory.join("site.yaml");
    let text = fs_err::read_to_string(&site).unwrap();
    let text = text.replace("https://192.168.111.1:8443/site.git", url);
    let text = text.replace(
        "references:\n",
        "references:\n  mirrorRecord:\n    file: mirror/mirror-record.json\n",
    );
    fs_err::write(&site, text).unwrap();
    fs_err::write(inventory.join("secrets/git-ca.pem"), ca_pem).unwrap();
    let mirror = inventory.join("mirror");
    fs_err::create_dir_all(&mirror).unwrap();
    fs_err::copy(
        repo_root().join("inventory/example-site/mirror/mirror-record.json"),
        mirror.join("mirror-record.json"),
    )
    .unwrap();
    let mut resources = ClusterResources::new(&[]);
    resources.add_catalog(
        ImageRef::parse(&format!(
            "{MIRROR_REGISTRY}/mirror/redhat/redhat-operator-index:v4.18"
        ))
        .unwrap(),
    );
    resources.write(&mirror.join("cluster-resources")).unwrap();
}
