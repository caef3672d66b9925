//! The objects the hand-off applies, built from the inventory and the mirror's cluster
//! resources (pure: no cluster is asked). Names are OpenShift GitOps' own (REFERENCE section 5).

use crate::inventory::model::{GitRepository, Gitops};
use crate::secret::Secret;
use anyhow::{anyhow, bail, Context, Result};
use base64::Engine as _;
use serde_json::{json, Value};
use std::path::Path;

/// The operator's package, Subscription and namespace.
pub const OPERATOR_PACKAGE: &str = "openshift-gitops-operator";
/// Where the operator runs.
pub const OPERATOR_NAMESPACE: &str = "openshift-gitops-operator";
/// The channel when the inventory names none.
pub const DEFAULT_CHANNEL: &str = "latest";
/// The default Argo CD instance's namespace and name.
pub const ARGO_NAMESPACE: &str = "openshift-gitops";
/// The default ArgoCD resource.
pub const ARGOCD_NAME: &str = "openshift-gitops";
/// The default instance's application controller's service account.
pub const CONTROLLER_SA: &str = "openshift-gitops-argocd-application-controller";
/// The CRDs the operator must have established before the hand-off goes on.
pub const ARGO_CRDS: [&str; 3] = [
    "applications.argoproj.io",
    "appprojects.argoproj.io",
    "argocds.argoproj.io",
];
/// The repository credential Secret.
pub const REPO_SECRET: &str = "bootstrap-site-repository";
/// The ClusterRole (and its binding) that lets the controller write what the platform and the
/// tenants need beyond the default instance's rules ([`PLATFORM_KINDS`]).
pub const TENANCY_ROLE: &str = "bootstrap-argocd-tenancy";
/// Where the mirror's CatalogSources live.
pub const MARKETPLACE: &str = "openshift-marketplace";
/// Argo CD's health check for Applications (its documented Lua): a parent waits on a child's
/// own health, so sync waves across child Applications hold.
pub const APPLICATION_HEALTH_LUA: &str = r#"hs = {}
hs.status = "Progressing"
hs.message = ""
if obj.status ~= nil then
  if obj.status.health ~= nil then
    hs.status = obj.status.health.status
    if obj.status.health.message ~= nil then
      hs.message = obj.status.health.message
    end
  end
end
return hs
"#;

/// The mirror's cluster resources (beside its record): ImageDigestMirrorSet,
/// ImageTagMirrorSet, the release signatures' ConfigMap and one CatalogSource per catalog, as
/// `bootstrap mirror` wrote them. The install-config snippet is not a cluster object.
pub fn mirror_resources(dir: &Path) -> Result<Vec<Value>> {
    use crate::openshift::cluster::{IDMS_FILE, ITMS_FILE, SIGNATURES_FILE};
    let mut names: Vec<String> = fs_err::read_dir(dir)
        .with_context(|| {
            format!(
                "reading the mirror's cluster resources in {}",
                dir.display()
            )
        })?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            n == IDMS_FILE
                || n == ITMS_FILE
                || n == SIGNATURES_FILE
                || (n.starts_with("cs-") && n.ends_with(".yaml"))
        })
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let path = dir.join(&name);
        let text = fs_err::read_to_string(&path)?;
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .map_err(|e| anyhow!("{}: not YAML: {e}", path.display()))?;
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            if doc["kind"].as_str().is_none() || doc["metadata"]["name"].as_str().is_none() {
                bail!(
                    "{}: a document without kind or metadata.name",
                    path.display()
                );
            }
            out.push(doc);
        }
    }
    Ok(out)
}

/// OperatorHub `cluster` with every default source disabled: an air-gapped cluster only uses
/// the mirror's catalogs.
pub fn operator_hub() -> Value {
    json!({"apiVersion": "config.openshift.io/v1", "kind": "OperatorHub",
        "metadata": {"name": "cluster"}, "spec": {"disableAllDefaultSources": true}})
}

/// The operator's Namespace, OperatorGroup (all namespaces) and Subscription.
pub fn operator_install(gitops: &Gitops, catalog: &str) -> Vec<Value> {
    let channel = gitops
        .operator
        .channel
        .as_deref()
        .unwrap_or(DEFAULT_CHANNEL);
    vec![
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERATOR_NAMESPACE,
            "labels": {"openshift.io/cluster-monitoring": "true"}}}),
        json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
            "metadata": {"name": OPERATOR_NAMESPACE, "namespace": OPERATOR_NAMESPACE},
            "spec": {"upgradeStrategy": "Default"}}),
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": OPERATOR_PACKAGE, "namespace": OPERATOR_NAMESPACE},
            "spec": {"channel": channel, "installPlanApproval": "Automatic",
                "name": OPERATOR_PACKAGE, "source": catalog, "sourceNamespace": MARKETPLACE}}),
    ]
}

/// The repository's credentials, read from their references.
pub struct RepoCredentials {
    /// The HTTPS user name.
    pub username: Option<String>,
    /// The HTTPS password or token.
    pub password: Option<Secret>,
    /// The SSH private key.
    pub ssh_private_key: Option<Secret>,
    /// The Git server's CA (PEM).
    pub ca_pem: Option<String>,
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s.as_bytes())
}

/// The repository Secret Argo CD reads (labelled `repository`; `data`, never `stringData`).
pub fn repository_secret(repo: &GitRepository, creds: &RepoCredentials) -> Value {
    let mut data = serde_json::Map::new();
    data.insert("url".into(), json!(b64(&repo.url)));
    data.insert("type".into(), json!(b64("git")));
    data.insert(
        "insecure".into(),
        json!(b64(if repo.insecure_skip_tls_verify {
            "true"
        } else {
            "false"
        })),
    );
    if let Some(u) = &creds.username {
        data.insert("username".into(), json!(b64(u)));
    }
    if let Some(p) = &creds.password {
        data.insert("password".into(), json!(b64(p.expose())));
    }
    if let Some(k) = &creds.ssh_private_key {
        data.insert("sshPrivateKey".into(), json!(b64(k.expose())));
    }
    json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": REPO_SECRET, "namespace": ARGO_NAMESPACE,
            "labels": {"argocd.argoproj.io/secret-type": "repository"},
            "annotations": {"managed-by": "bootstrap"}},
        "data": data})
}

/// The host of a Git URL (`https://host:port/x`, `ssh://user@host/x`, `git@host:x`), bare.
pub fn git_host(url: &str) -> Option<String> {
    let rest = match url.split_once("://") {
        Some((_, rest)) => rest,
        None => url.split_once(':')?.0,
    };
    let authority = rest.split('/').next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_string())
}

/// The Git server's CA as `argocd-tls-certs-cm` holds it (one key per bare host name): only
/// this key is applied, so the operator's own keys stay its.
pub fn tls_certs(repo: &GitRepository, ca_pem: &str) -> Result<Value> {
    let host = git_host(&repo.url)
        .ok_or_else(|| anyhow!("gitops.repository.url {}: no host in it", repo.url))?;
    Ok(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "argocd-tls-certs-cm", "namespace": ARGO_NAMESPACE},
        "data": {host: ca_pem}}))
}

/// `argocd-ssh-known-hosts-cm` with the repository's host keys added to what is there.
pub fn known_hosts(current: Option<&Value>, lines: &[String]) -> Option<Value> {
    if lines.is_empty() {
        return None;
    }
    let existing = current
        .and_then(|cm| cm["data"]["ssh_known_hosts"].as_str())
        .unwrap_or_default();
    let mut text = existing.trim_end().to_string();
    for l in lines {
        if !existing.lines().any(|e| e.trim() == l.trim()) {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(l.trim());
        }
    }
    text.push('\n');
    Some(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "argocd-ssh-known-hosts-cm", "namespace": ARGO_NAMESPACE},
        "data": {"ssh_known_hosts": text}}))
}

/// The narrow ClusterRole the platform and the tenants need and the default instance lacks
/// ([`PLATFORM_KINDS`]), bound to its application controller.
pub fn tenancy_rbac() -> Vec<Value> {
    let verbs = [
        "get", "list", "watch", "create", "update", "patch", "delete",
    ];
    let rules: Vec<Value> = PLATFORM_KINDS
        .iter()
        .map(|(group, resources, _)| json!({"apiGroups": [group], "resources": resources, "verbs": verbs}))
        .collect();
    vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": TENANCY_ROLE},
            "rules": rules}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": TENANCY_ROLE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": TENANCY_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": CONTROLLER_SA, "namespace": ARGO_NAMESPACE}]}),
    ]
}

/// What the site's repository creates that the default instance's controller may not write
/// (its ClusterRole covers namespaces, RBAC, OLM and cluster config, and reads everything):
/// API group, resources, and why. Nothing else is granted: no Secrets, no workloads.
pub const PLATFORM_KINDS: [(&str, &[&str], &str); 9] = [
    (
        "",
        &["resourcequotas", "limitranges"],
        "the tenants' limits",
    ),
    (
        "networking.k8s.io",
        &["networkpolicies"],
        "the tenants' default-deny policy",
    ),
    ("scheduling.run.ai", &["queues"], "KAI queues"),
    (
        "apiextensions.k8s.io",
        &["customresourcedefinitions"],
        "the KAI scheduler's Queue CRD",
    ),
    (
        "scheduling.k8s.io",
        &["priorityclasses"],
        "interactive, inference and training priorities",
    ),
    (
        "nfd.openshift.io",
        &["nodefeaturediscoveries"],
        "the NFD instance",
    ),
    (
        "nvidia.com",
        &["clusterpolicies"],
        "the GPU operator's ClusterPolicy",
    ),
    (
        "mellanox.com",
        &["nicclusterpolicies"],
        "the network operator's NicClusterPolicy",
    ),
    (
        "datasciencecluster.opendatahub.io",
        &["datascienceclusters"],
        "OpenShift AI's DataScienceCluster",
    ),
];

/// The ArgoCD resource's `spec.resourceHealthChecks` with the Application check added to the
/// ones it has (a list is applied whole: the others are kept).
pub fn application_health_check(argocd: &Value) -> Value {
    let mut checks: Vec<Value> = argocd["spec"]["resourceHealthChecks"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|c| !(c["group"] == "argoproj.io" && c["kind"] == "Application"))
        .collect();
    checks.push(
        json!({"group": "argoproj.io", "kind": "Application", "check": APPLICATION_HEALTH_LUA}),
    );
    json!({"apiVersion": "argoproj.io/v1beta1", "kind": "ArgoCD",
        "metadata": {"name": ARGOCD_NAME, "namespace": ARGO_NAMESPACE},
        "spec": {"resourceHealthChecks": checks}})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Git hosts are found in every URL form Argo CD accepts.
    #[test]
    fn git_hosts_of_every_url_form() {
        assert_eq!(
            git_host("https://git.example.com:8443/site.git").as_deref(),
            Some("git.example.com")
        );
        assert_eq!(
            git_host("ssh://git@git.example.com/site.git").as_deref(),
            Some("git.example.com")
        );
        assert_eq!(
            git_host("git@git.example.com:platform/site.git").as_deref(),
            Some("git.example.com")
        );
        assert_eq!(
            git_host("https://[fd00::1]:8443/site.git").as_deref(),
            Some("fd00::1")
        );
        assert_eq!(
            git_host("https://user:pw@192.168.111.1/x").as_deref(),
            Some("192.168.111.1")
        );
    }

    /// Known hosts are added once, after what the operator put there.
    #[test]
    fn known_hosts_are_added_once() {
        let cm = json!({"data": {"ssh_known_hosts": "github.com ssh-ed25519 AAAA\n"}});
        let lines = vec!["git.lab ssh-ed25519 BBBB".to_string()];
        let out = known_hosts(Some(&cm), &lines).expect("a ConfigMap");
        assert_eq!(
            out["data"]["ssh_known_hosts"],
            "github.com ssh-ed25519 AAAA\ngit.lab ssh-ed25519 BBBB\n"
        );
        let cm2 = json!({"data": {"ssh_known_hosts": out["data"]["ssh_known_hosts"].clone()}});
        let again = known_hosts(Some(&cm2), &lines).expect("a ConfigMap");
        assert_eq!(again["data"], out["data"]);
        assert!(known_hosts(None, &[]).is_none());
    }

    /// The Application health check replaces an older one and keeps the others.
    #[test]
    fn the_application_health_check_is_added_beside_the_others() {
        let argocd = json!({"spec": {"resourceHealthChecks": [
            {"group": "apps", "kind": "Deployment", "check": "x"},
            {"group": "argoproj.io", "kind": "Application", "check": "old"}]}});
        let out = application_health_check(&argocd);
        let checks = out["spec"]["resourceHealthChecks"]
            .as_array()
            .expect("a list");
        assert_eq!(checks.len(), 2);
        assert_eq!(checks[0]["kind"], "Deployment");
        assert_eq!(checks[1]["check"], APPLICATION_HEALTH_LUA);
    }

    /// The repository Secret carries its values base64 in `data`, none in `stringData`.
    #[test]
    fn the_repository_secret_uses_data() {
        let repo = GitRepository {
            url: "https://git.lab/site.git".into(),
            revision: None,
            username: Some("lab".into()),
            password: None,
            ssh_private_key: None,
            ca: None,
            known_hosts: vec![],
            insecure_skip_tls_verify: false,
        };
        let creds = RepoCredentials {
            username: Some("lab".into()),
            password: Some(Secret::new("pw-123456")),
            ssh_private_key: None,
            ca_pem: None,
        };
        let s = repository_secret(&repo, &creds);
        assert!(s.get("stringData").is_none());
        assert_eq!(s["data"]["password"], b64("pw-123456"));
        assert_eq!(
            s["metadata"]["labels"]["argocd.argoproj.io/secret-type"],
            "repository"
        );
        assert!(!s.to_string().contains("pw-123456"));
    }
}
