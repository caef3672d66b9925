//! The lab `oc` stand-in's `adm node-image create`, read from openshift/oc
//! `pkg/cli/admin/nodeimage/create.go` and `basenodeimagecommand.go`: the flags
//! (`--dir`, `-o/--output-name`, `-r/--report`, `-a/--registry-config`, `--insecure`, the global
//! `--kubeconfig`; every other upstream flag refused by name), `Validate` (nodes-config.yaml
//! exists and is YAML), then `Run`'s tasks through the cluster API with the kubeconfig:
//! `checkMinSupportedVersion` (ClusterVersion `status.desired.version` >= 4.17, oc's words),
//! `getNodeJoinerPullSpec` (ConfigMap `openshift-config/installer-images`, else the release's
//! `baremetal-installer`), the temporary namespace `openshift-node-joiner-*` with its
//! ServiceAccount, ClusterRole and ClusterRoleBinding (owned by the namespace), the ConfigMap
//! `nodes-config` and the node-joiner Pod, all as oc makes them; the namespace is deleted at
//! the end (`cleanup`). The lab runs no pods: the node-joiner's work is done in place
//! ([`joiner`]), its report's stages printed as `monitorWorkflowReport` prints them. Log lines
//! go to stdout as `newPrefixWriter` writes them: `<RFC3339 UTC> [node-image create] <text>`.
//! On failure `DIR/report.json` and exit 1; on success `DIR/node.<arch>.iso` (a real ISO 9660
//! image, xorriso: `nodes-config.yaml` and the `lab/` facts the simulated machine reads).

pub mod joiner;

use anyhow::{bail, Context, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The config file oc reads from `--dir` (`nodeJoinerConfigurationFile`).
pub const NODES_CONFIG: &str = "nodes-config.yaml";
/// `nodeJoinerMinimumSupportedVersion`.
const MINIMUM_VERSION: &str = "4.17";
/// Upstream flags the lab does not imitate.
const REFUSED: [&str; 10] = [
    "pxe",
    "mac-address",
    "cpu-architecture",
    "ssh-key-path",
    "hostname",
    "root-device-hint",
    "network-config-path",
    "skip-verification",
    "certificate-authority",
    "p",
];

/// What a run printed and how it ended.
#[derive(Debug, Default)]
pub struct Run {
    /// stdout: the prefixed log lines.
    pub stdout: String,
    /// stderr: `error: ...`.
    pub stderr: Vec<String>,
    /// Exit status.
    pub status: u8,
}

impl Run {
    fn log(&mut self, text: &str) {
        self.stdout.push_str(&format!(
            "{} [node-image create] {text}\n",
            joiner::rfc3339()
        ));
    }

    fn error(mut self, e: &anyhow::Error) -> Run {
        self.stderr.push(format!("error: {e:#}"));
        self.status = 1;
        self
    }
}

#[derive(Debug, Default)]
struct Options {
    dir: Option<PathBuf>,
    output_name: Option<String>,
    report: bool,
    registry_config: Option<String>,
    insecure: bool,
}

fn parse(args: &[&str]) -> Result<Options> {
    let mut o = Options::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (name, inline) = match a.strip_prefix("--") {
            Some(f) => match f.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (f.to_string(), None),
            },
            None => match a.strip_prefix('-') {
                Some(short) if short.len() == 1 => (short.to_string(), None),
                _ => bail!("unknown command {a:?} for \"oc adm node-image create\""),
            },
        };
        let mut value = || -> Result<String> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => Ok(it
                    .next()
                    .with_context(|| format!("flag needs an argument: --{name}"))?
                    .to_string()),
            }
        };
        match name.as_str() {
            "dir" => o.dir = Some(PathBuf::from(value()?)),
            "output-name" | "o" => o.output_name = Some(value()?),
            "registry-config" | "a" => o.registry_config = Some(value()?),
            "report" | "r" => o.report = inline.as_deref() != Some("false"),
            "insecure" => o.insecure = inline.as_deref() != Some("false"),
            n if REFUSED.contains(&n) || ["m", "c", "k"].contains(&n) => bail!(
                "the lab stand-in for oc does not do `adm node-image create --{n}` (it imitates the ISO workflow with nodes-config.yaml; see docs/lab.md)"
            ),
            n => bail!("unknown flag: --{n}"),
        }
    }
    Ok(o)
}

/// `oc [--kubeconfig K] adm node-image create ARGS`.
pub fn create(args: &[&str], kubeconfig: Option<&str>) -> Run {
    let run = Run::default();
    let opts = match parse(args) {
        Ok(o) => o,
        Err(e) => return run.error(&e),
    };
    let dir = match opts.dir.clone().map_or_else(std::env::current_dir, Ok) {
        Ok(d) => d,
        Err(e) => return run.error(&e.into()),
    };
    let config = match validate_config_file(&dir) {
        Ok(c) => c,
        Err(e) => return run.error(&e),
    };
    if let Some(p) = &opts.registry_config {
        if let Err(e) = fs_err::read_to_string(p) {
            return run.error(&e.into());
        }
    }
    let Some(kubeconfig) = kubeconfig
        .map(String::from)
        .or_else(|| std::env::var("KUBECONFIG").ok())
    else {
        return run.error(&anyhow::anyhow!("Missing or incomplete configuration info.  Please point to an existing, complete config file:\n\n  1. Via the command-line flag --kubeconfig\n  2. Via the KUBECONFIG environment variable"));
    };
    crate::oc::block_on(async move { Ok(session(&dir, &opts, &config, &kubeconfig).await) })
        .unwrap_or_else(|e| Run::default().error(&e))
}

/// `validateConfigFile`: the file exists (`stat`) and is YAML.
fn validate_config_file(dir: &Path) -> Result<(String, Value)> {
    let path = dir.join(NODES_CONFIG);
    let text = fs_err::read_to_string(&path)
        .map_err(|_| anyhow::anyhow!("stat {NODES_CONFIG}: no such file or directory"))?;
    let value: Value = serde_saphyr::from_str(&text)
        .map_err(|e| anyhow::anyhow!("config file {NODES_CONFIG} is not valid: {e}"))?;
    Ok((text, value))
}

async fn session(dir: &Path, o: &Options, config: &(String, Value), kubeconfig: &str) -> Run {
    let mut run = Run::default();
    let api = match Cluster::connect(kubeconfig).await {
        Ok(c) => c,
        Err(e) => return run.error(&e),
    };
    let mut made = Made::default();
    let result = tasks(&api, &mut run, &mut made, config).await;
    let outcome = match result {
        Err(e) => Err(e),
        Ok(()) => node_joiner(&api, &mut run, dir, o, config).await,
    };
    if let Some(ns) = &made.namespace {
        // `cleanup`: the namespace goes, and with it (ownerReferences) the role and binding.
        let _ = api.delete(&format!("/api/v1/namespaces/{ns}")).await;
        for path in &made.cluster_scoped {
            let _ = api.delete(path).await;
        }
    }
    match outcome {
        Ok(()) => run,
        Err(e) => run.error(&e),
    }
}

#[derive(Default)]
struct Made {
    namespace: Option<String>,
    cluster_scoped: Vec<String>,
}

/// The tasks before the pod runs, each as oc does it.
async fn tasks(
    api: &Cluster,
    run: &mut Run,
    made: &mut Made,
    config: &(String, Value),
) -> Result<()> {
    let cv = match api
        .get("/apis/config.openshift.io/v1/clusterversions/version")
        .await?
    {
        Some(cv) => cv,
        None => bail!("command expects a connection to an OpenShift 4.x server"),
    };
    let version = cv["status"]["desired"]["version"]
        .as_str()
        .unwrap_or_default();
    let minor = major_minor(version).with_context(|| {
        format!("failed to parse major.minor version from ClusterVersion status.desired.version {version:?}")
    })?;
    if minor.as_str() < MINIMUM_VERSION {
        bail!("the 'oc adm node-image' command is only available for OpenShift versions {MINIMUM_VERSION} and later");
    }
    match api.get("/api/v1/namespaces/openshift-config/configmaps/installer-images").await? {
        Some(cm) => run.log(&format!(
            "installer pullspec obtained from installer-images configMap {}",
            cm["data"]["images.json"].as_str().unwrap_or_default()
        )),
        None => run.log("configMap containing installer-images is not available, trying to get image from registry"),
    }
    let ns = api
        .create("/api/v1/namespaces", json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"generateName": "openshift-node-joiner-", "annotations": {
                "oc.openshift.io/command": "oc adm node-image create", "openshift.io/node-selector": ""}}}))
        .await
        .context("cannot create namespace")?;
    let ns_name = ns["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    made.namespace = Some(ns_name.clone());
    let owner = json!([{"apiVersion": "v1", "kind": "Namespace", "name": ns_name, "uid": ns["metadata"]["uid"]}]);
    let sa = api
        .create(&format!("/api/v1/namespaces/{ns_name}/serviceaccounts"), json!({"apiVersion": "v1",
            "kind": "ServiceAccount", "metadata": {"generateName": "node-joiner-", "namespace": ns_name}}))
        .await
        .context("cannot create service account")?;
    let sa_name = sa["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let role = api
        .create(
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            cluster_role(&owner),
        )
        .await
        .context("cannot create role")?;
    let role_name = role["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    made.cluster_scoped.push(format!(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles/{role_name}"
    ));
    let binding = api
        .create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"generateName": "node-joiner-monitor-", "ownerReferences": owner},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": ns_name}]}))
        .await
        .context("cannot create role binding")?;
    made.cluster_scoped.push(format!(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{}",
        binding["metadata"]["name"].as_str().unwrap_or_default()
    ));
    api.create(
        &format!("/api/v1/namespaces/{ns_name}/configmaps"),
        json!({"apiVersion": "v1",
        "kind": "ConfigMap", "metadata": {"name": "nodes-config", "namespace": ns_name},
        "data": {NODES_CONFIG: config.0}}),
    )
    .await
    .context("cannot create configmap")?;
    api.create(
        &format!("/api/v1/namespaces/{ns_name}/pods"),
        pod(&ns_name, &sa_name),
    )
    .await
    .context("cannot create pod")?;
    run.log("Launching command");
    Ok(())
}

fn major_minor(version: &str) -> Option<String> {
    let mut it = version.splitn(3, '.');
    let (major, minor, _) = (it.next()?, it.next()?, it.next()?);
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    (digits(major) && digits(minor)).then(|| format!("{major}.{minor}"))
}

fn cluster_role(owner: &Value) -> Value {
    let rule = |groups: &[&str], resources: &[&str], verbs: &[&str]| json!({"apiGroups": groups, "resources": resources, "verbs": verbs});
    json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
    "metadata": {"generateName": "node-joiner-", "ownerReferences": owner},
    "rules": [
        rule(&["config.openshift.io"], &["clusterversions", "infrastructures", "proxies", "imagedigestmirrorsets"], &["get", "list"]),
        rule(&["operator.openshift.io"], &["imagecontentsourcepolicies"], &["get", "list"]),
        rule(&["machineconfiguration.openshift.io"], &["machineconfigs"], &["get", "list"]),
        rule(&["certificates.k8s.io"], &["certificatesigningrequests"], &["get", "list"]),
        rule(&[""], &["configmaps", "nodes", "pods"], &["get", "list"]),
        rule(&[""], &["secrets"], &["get", "list", "create", "update"]),
    ]})
}

fn pod(ns: &str, sa: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": "node-joiner-", "namespace": ns, "labels": {"app": "node-joiner"}},
        "spec": {"restartPolicy": "Never", "serviceAccountName": sa,
            "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "node-joiner", "image": "baremetal-installer",
                "imagePullPolicy": "IfNotPresent",
                "securityContext": {"allowPrivilegeEscalation": false, "runAsNonRoot": true,
                    "capabilities": {"drop": ["ALL"]}},
                "volumeMounts": [{"name": "nodes-config", "mountPath": "/config"}, {"name": "assets", "mountPath": "/assets"}],
                "command": ["/bin/bash", "-c", "cp /config/nodes-config.yaml /assets; HOME=/assets node-joiner add-nodes --dir=/assets --log-level=debug; sleep 600"]}],
            "volumes": [{"name": "nodes-config", "configMap": {"name": "nodes-config"}},
                {"name": "assets", "emptyDir": {"sizeLimit": "4Gi"}}]}})
}

/// What the node-joiner pod does, in place, then oc's end of the run.
async fn node_joiner(
    api: &Cluster,
    run: &mut Run,
    dir: &Path,
    o: &Options,
    config: &(String, Value),
) -> Result<()> {
    let mut report = joiner::Report::start();
    let result = add_nodes(api, run, &mut report, dir, config).await;
    report.complete(result.as_ref().err());
    if let Err(e) = &result {
        run.log(&format!(
            "command execution failed. Reason: {}",
            e.root_cause()
        ));
        save_report(run, dir, &report)?;
        run.status = 1;
        return Ok(());
    }
    let iso = result?;
    run.log(&format!("Saving ISO image to {}", dir.display()));
    if let Some(name) = &o.output_name {
        let to = dir.join(name);
        if to.exists() {
            bail!("file already exists: {}", to.display());
        }
        fs_err::rename(&iso, &to)?;
    }
    if o.report {
        save_report(run, dir, &report)?;
    }
    run.log("Command successfully completed");
    Ok(())
}

fn save_report(run: &mut Run, dir: &Path, report: &joiner::Report) -> Result<()> {
    run.log("Saving report file");
    let mut text = Vec::new();
    let fmt = serde_json::ser::PrettyFormatter::with_indent(b" ");
    let mut ser = serde_json::Serializer::with_formatter(&mut text, fmt);
    serde::Serialize::serialize(report, &mut ser)?;
    fs_err::write(dir.join("report.json"), text)?;
    Ok(())
}

async fn add_nodes(
    api: &Cluster,
    run: &mut Run,
    report: &mut joiner::Report,
    dir: &Path,
    config: &(String, Value),
) -> Result<PathBuf> {
    run.log(report.stage("add-nodes-cluster-inspection"));
    let cv = api
        .get("/apis/config.openshift.io/v1/clusterversions/version")
        .await?
        .unwrap_or_default();
    let arch = match config.1["cpuArchitecture"].as_str() {
        Some(a) => a.to_string(),
        None => {
            let masters = api
                .get("/api/v1/nodes?labelSelector=node-role.kubernetes.io%2Fmaster")
                .await?
                .unwrap_or_default();
            let arch = masters["items"][0]["status"]["nodeInfo"]["architecture"]
                .as_str()
                .context("unable to determine target cluster architecture")?;
            joiner::installer_arch(arch).to_string()
        }
    };
    if let Some(s) = report.stages.last_mut() {
        s.result = json!({"Version": cv["status"]["desired"]["version"], "ReleaseImage": cv["status"]["desired"]["image"],
            "PlatformType": "none", "Architecture": arch}).to_string();
    }
    run.log(report.stage("create-manifest"));
    joiner::validate(&config.1).map_err(|e| {
        let host_rule = e.contains("Hosts[");
        let err = anyhow::anyhow!(e);
        if host_rule {
            err.context("invalid Hosts configuration")
        } else {
            err
        }
    })?;
    run.log(report.stage("ignition"));
    run.log(report.stage("fetch-base-iso"));
    run.log(report.stage("create-agent-artifacts"));
    run.log(report.stage("generate-iso"));
    write_iso(dir, &arch, &config.0, &cv)
}

/// `DIR/node.<arch>.iso`: nodes-config.yaml and the `lab/` facts (the cluster it joins).
fn write_iso(dir: &Path, arch: &str, nodes_config: &str, cv: &Value) -> Result<PathBuf> {
    let staging = dir.join(".stand-in-node-iso");
    let _ = fs_err::remove_dir_all(&staging);
    let lab = staging.join(crate::standin::LAB_ISO_DIR);
    fs_err::create_dir_all(&lab)?;
    fs_err::write(staging.join(NODES_CONFIG), nodes_config)?;
    fs_err::write(
        lab.join("cluster-id"),
        format!("{}\n", cv["spec"]["clusterID"].as_str().unwrap_or_default()),
    )?;
    fs_err::write(
        lab.join("release-image"),
        format!(
            "{}\n",
            cv["status"]["desired"]["image"]
                .as_str()
                .unwrap_or_default()
        ),
    )?;
    let iso = dir.join(format!("node.{arch}.iso"));
    crate::standin::xorriso_iso(&staging, &iso)?;
    Ok(iso)
}

/// The cluster API through the site library's client (client-go's behaviour: the kubeconfig's
/// CA, token and `tls-server-name`).
struct Cluster {
    client: kube::Client,
}

impl Cluster {
    async fn connect(kubeconfig: &str) -> Result<Cluster> {
        let c = bootstrap::openshift::api::connect(
            Path::new(kubeconfig),
            None,
            &[],
            bootstrap::openshift::api::Retry::API,
        )
        .await?;
        Ok(Cluster { client: c.client })
    }

    async fn call(&self, method: &str, path: &str, body: Option<Value>) -> Result<Option<Value>> {
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.map(|b| b.to_string().into_bytes()).unwrap_or_default())?;
        match self.client.request::<Value>(req).await {
            Ok(v) => Ok(Some(v)),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
            Err(e) => Err(anyhow::anyhow!(bootstrap::openshift::api::describe_error(
                &e
            ))),
        }
    }

    async fn get(&self, path: &str) -> Result<Option<Value>> {
        self.call("GET", path, None).await
    }

    async fn create(&self, path: &str, obj: Value) -> Result<Value> {
        self.call("POST", path, Some(obj))
            .await?
            .with_context(|| format!("{path}: not found"))
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.call("DELETE", path, None).await.map(|_| ())
    }
}

#[cfg(test)]
mod tests;
