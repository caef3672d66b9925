//! Repository access as Argo CD's repo server has it, read from the cluster's own objects
//! only: the `repository` (exact URL) and `repo-creds` (URL prefix) Secrets in the instance's
//! namespace, the CA of `argocd-tls-certs-cm` (one key per bare host name), and `insecure`.
//! A revision is fetched with the real `git` into a local repository per URL, resolved to a
//! commit, checked out once per commit, and rendered: `kubectl kustomize` where a
//! kustomization is, else the directory's YAML and JSON files.

use super::NAMESPACE;
use crate::site::git_server::{git_command, GitAccess};
use crate::site::kube::{ObjectRef, Store};
use base64::Engine as _;
use bootstrap::secret::Secret;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What an Application's source renders to at one commit.
#[derive(Clone, Debug)]
pub struct Rendered {
    /// The commit `targetRevision` resolved to.
    pub revision: String,
    /// The manifests, in file order.
    pub objects: Vec<Value>,
    /// `Kustomize` or `Directory`.
    pub source_type: &'static str,
}

/// A source: where, which revision, which directory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Source {
    /// `spec.source.repoURL`.
    pub repo_url: String,
    /// `spec.source.targetRevision` (`HEAD` when empty).
    pub target_revision: String,
    /// `spec.source.path`.
    pub path: String,
}

impl Source {
    /// The Application's single source, or why it cannot be used.
    pub fn of(app: &Value) -> Result<Source, String> {
        let spec = &app["spec"];
        if spec["sources"].as_array().is_some_and(|s| !s.is_empty()) {
            return Err("spec.sources (multiple sources) is not supported by the lab's Argo CD imitation; use spec.source".into());
        }
        let s = &spec["source"];
        let repo_url = s["repoURL"].as_str().unwrap_or_default().to_string();
        if repo_url.is_empty() {
            return Err("spec.source.repoURL is empty".into());
        }
        if s.get("chart").is_some_and(|c| !c.is_null())
            || s.get("helm").is_some_and(|c| !c.is_null())
        {
            return Err("Helm sources are not supported by the lab's Argo CD imitation".into());
        }
        let rev = s["targetRevision"].as_str().unwrap_or_default();
        Ok(Source {
            repo_url,
            target_revision: if rev.is_empty() {
                "HEAD".into()
            } else {
                rev.into()
            },
            path: s["path"].as_str().unwrap_or(".").to_string(),
        })
    }
}

/// The fetched revisions, kept until the next refresh.
pub struct Repos {
    work: PathBuf,
    kubectl: PathBuf,
    cache: HashMap<(Source, String), (Instant, Rendered)>,
}

impl Repos {
    /// Repositories kept under `work`, rendered with `kubectl`.
    pub fn new(work: &Path, kubectl: &Path) -> Repos {
        Repos {
            work: work.to_path_buf(),
            kubectl: kubectl.to_path_buf(),
            cache: HashMap::new(),
        }
    }

    /// The rendered source: from the cache when fetched less than `max_age` ago with the same
    /// access, else fetched. The error is the Application's ComparisonError message.
    pub async fn render(
        &mut self,
        store: &Store,
        src: &Source,
        max_age: Duration,
    ) -> Result<Rendered, String> {
        let access = access_for(store, &src.repo_url);
        let key = (src.clone(), fingerprint(&access));
        if let Some((at, r)) = self.cache.get(&key) {
            if at.elapsed() < max_age {
                return Ok(r.clone());
            }
        }
        let rendered = self.fetch_and_render(src, &access).await.map_err(|e| {
            format!("Failed to load target state: failed to generate manifest for source 1 of 1: rpc error: code = Unknown desc = {e}")
        })?;
        self.cache.insert(key, (Instant::now(), rendered.clone()));
        Ok(rendered)
    }

    async fn fetch_and_render(&self, src: &Source, access: &GitAccess) -> Result<Rendered, String> {
        let dir = self
            .work
            .join("repos")
            .join(short_hash(&normalize_url(&src.repo_url)));
        let home = dir.join("home");
        let git_dir = dir.join("git");
        if !git_dir.join("HEAD").exists() {
            git(&home, access, &["init", "--quiet", "--bare"], &git_dir).await?;
        }
        let refspecs = [
            "+refs/heads/*:refs/heads/*",
            "+refs/tags/*:refs/tags/*",
            "+HEAD:refs/remotes/origin/HEAD",
        ];
        let mut args = vec![
            "fetch",
            "--quiet",
            "--force",
            "--prune",
            src.repo_url.as_str(),
        ];
        args.extend(refspecs);
        git(&home, access, &args, &git_dir)
            .await
            .map_err(|e| list_refs_error(&src.repo_url, &e))?;
        let revision = resolve(&home, &git_dir, &src.target_revision).await?;
        let tree = dir.join("trees").join(&revision);
        if !tree.exists() {
            checkout(&home, &git_dir, &revision, &tree).await?;
        }
        let (objects, source_type) = render_dir(&self.kubectl, &tree, &src.path).await?;
        Ok(Rendered {
            revision,
            objects,
            source_type,
        })
    }
}

/// Argo's wording of a failed `ls-remote` (go-git's errors), from git's own message.
fn list_refs_error(url: &str, git_error: &str) -> String {
    let e = git_error.to_lowercase();
    if e.contains("certificate") || e.contains("ssl") {
        let base = url.trim_end_matches('/');
        format!("failed to list refs: Get \"{base}/info/refs?service=git-upload-pack\": tls: failed to verify certificate: x509: certificate signed by unknown authority")
    } else if e.contains("authentication") || e.contains("username") || e.contains("401") {
        "failed to list refs: authentication required".into()
    } else {
        format!("failed to list refs: {git_error}")
    }
}

async fn git(
    home: &Path,
    access: &GitAccess,
    args: &[&str],
    git_dir: &Path,
) -> Result<String, String> {
    let mut cmd = git_command(home, access).map_err(|e| format!("{e:#}"))?;
    cmd.arg("--git-dir").arg(git_dir).args(args);
    let out = cmd
        .output()
        .await
        .map_err(|e| format!("running git: {e}"))?;
    if !out.status.success() {
        return Err(bootstrap::secret::server_text(
            String::from_utf8_lossy(&out.stderr).trim(),
            2000,
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// `targetRevision` as a commit: a branch, a tag, `HEAD`, or a commit (or its prefix).
async fn resolve(home: &Path, git_dir: &Path, rev: &str) -> Result<String, String> {
    let none = GitAccess::default();
    let candidates = match rev {
        "HEAD" => vec!["refs/remotes/origin/HEAD".to_string()],
        r => vec![
            format!("refs/heads/{r}"),
            format!("refs/tags/{r}"),
            r.to_string(),
        ],
    };
    for c in &candidates {
        let spec = format!("{c}^{{commit}}");
        if let Ok(sha) = git(
            home,
            &none,
            &["rev-parse", "--verify", "--quiet", &spec],
            git_dir,
        )
        .await
        {
            return Ok(sha);
        }
    }
    Err(format!("unable to resolve '{rev}' to a commit SHA"))
}

async fn checkout(home: &Path, git_dir: &Path, revision: &str, tree: &Path) -> Result<(), String> {
    let tmp = tree.with_extension("tmp");
    let _ = fs_err::remove_dir_all(&tmp);
    fs_err::create_dir_all(&tmp).map_err(|e| e.to_string())?;
    let mut cmd = git_command(home, &GitAccess::default()).map_err(|e| format!("{e:#}"))?;
    cmd.arg("--git-dir")
        .arg(git_dir)
        .arg("--work-tree")
        .arg(&tmp);
    cmd.env("GIT_INDEX_FILE", tmp.with_extension("index"));
    cmd.args(["checkout", "--quiet", "--force", revision, "--", "."]);
    let out = cmd
        .output()
        .await
        .map_err(|e| format!("running git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "checking out {revision}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    fs_err::rename(&tmp, tree).map_err(|e| e.to_string())
}

/// The manifests of `path` in `tree`: kustomize when a kustomization is there, else the
/// directory's `.yaml`, `.yml` and `.json` files (not recursive, as Argo's default).
async fn render_dir(
    kubectl: &Path,
    tree: &Path,
    path: &str,
) -> Result<(Vec<Value>, &'static str), String> {
    let rel = path.trim_start_matches("./").trim_matches('/');
    if rel.split('/').any(|p| p == "..") {
        return Err(format!("{path}: app path is outside the repository"));
    }
    let dir = if rel.is_empty() || rel == "." {
        tree.to_path_buf()
    } else {
        tree.join(rel)
    };
    if !dir.is_dir() {
        return Err(format!("{path}: app path does not exist"));
    }
    let kustomized = ["kustomization.yaml", "kustomization.yml", "Kustomization"]
        .iter()
        .any(|k| dir.join(k).exists());
    if kustomized {
        let out = tokio::process::Command::new(kubectl)
            .arg("kustomize")
            .arg(&dir)
            .output()
            .await
            .map_err(|e| format!("running {} kustomize: {e}", kubectl.display()))?;
        if !out.status.success() {
            return Err(format!(
                "`kustomize build {path}` failed exit status {}: {}",
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        return Ok((
            parse_manifests(&String::from_utf8_lossy(&out.stdout), path)?,
            "Kustomize",
        ));
    }
    let mut files: Vec<PathBuf> = fs_err::read_dir(&dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        })
        .collect();
    files.sort();
    let mut objects = Vec::new();
    for f in files {
        let text = fs_err::read_to_string(&f).map_err(|e| e.to_string())?;
        let name = format!(
            "{}/{}",
            rel,
            f.file_name().unwrap_or_default().to_string_lossy()
        );
        objects.extend(parse_manifests(&text, &name)?);
    }
    Ok((objects, "Directory"))
}

/// Multi-document YAML (or JSON) as objects; empty documents and `List`s handled as kubectl does.
pub fn parse_manifests(text: &str, origin: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|e| format!("{origin}: {e}"))?;
    let mut out = Vec::new();
    for d in docs {
        match d {
            Value::Null => {}
            Value::Object(_)
                if d["kind"].as_str().is_some_and(|k| k.ends_with("List"))
                    && d["items"].is_array() =>
            {
                out.extend(d["items"].as_array().into_iter().flatten().cloned());
            }
            Value::Object(_) => {
                if d["apiVersion"].as_str().is_none() || d["kind"].as_str().is_none() {
                    return Err(format!(
                        "{origin}: Object 'Kind' is missing in '{}'",
                        bootstrap::secret::server_text(&d.to_string(), 200)
                    ));
                }
                out.push(d);
            }
            other => return Err(format!("{origin}: a document is not an object: {other}")),
        }
    }
    Ok(out)
}

/// The access Argo CD would use for `url`, from the cluster's Secrets and ConfigMaps.
pub fn access_for(store: &Store, url: &str) -> GitAccess {
    let want = normalize_url(url);
    let secrets = |t: &str| {
        store
            .list(
                "v1",
                "Secret",
                Some(NAMESPACE),
                Some(&format!("argocd.argoproj.io/secret-type={t}")),
            )
            .unwrap_or_default()
    };
    let exact = secrets("repository")
        .into_iter()
        .find(|s| decoded(s, "url").is_some_and(|u| normalize_url(&u) == want));
    let template = || {
        secrets("repo-creds")
            .into_iter()
            .filter(|s| decoded(s, "url").is_some_and(|u| want.starts_with(&normalize_url(&u))))
            .max_by_key(|s| decoded(s, "url").map(|u| u.len()))
    };
    let secret = exact.or_else(template);
    let field = |k: &str| secret.as_ref().and_then(|s| decoded(s, k));
    let credentials = match (field("username"), field("password")) {
        (Some(u), Some(p)) if !p.is_empty() => Some((u, Secret::new(p))),
        (None, Some(p)) if !p.is_empty() => Some(("git".to_string(), Secret::new(p))),
        _ => None,
    };
    GitAccess {
        credentials,
        ca_pem: host_of(url).and_then(|h| ca_for(store, &h)),
        insecure: field("insecure").is_some_and(|v| v == "true"),
    }
}

fn ca_for(store: &Store, host: &str) -> Option<String> {
    let cm = store
        .get(&ObjectRef {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(NAMESPACE.into()),
            name: "argocd-tls-certs-cm".into(),
        })
        .ok()?;
    cm["data"][host].as_str().map(String::from)
}

/// A Secret's `data` key, decoded (`stringData` is the API server's to fold in).
fn decoded(secret: &Value, key: &str) -> Option<String> {
    let b64 = secret["data"][key].as_str()?;
    let bytes = base64::engine::general_purpose::STANDARD.decode(b64).ok()?;
    String::from_utf8(bytes).ok()
}

/// The bare host name of an `https://` URL (no user, no port).
pub fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split('/').next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host.starts_with('[') {
        host.split(']').next()?.trim_start_matches('[')
    } else {
        host.split(':').next()?
    };
    Some(host.to_string())
}

/// Argo's repository URL normalisation: lower case, no `.git`, no trailing slash.
pub fn normalize_url(url: &str) -> String {
    let u = url.trim().to_lowercase();
    let u = u.trim_end_matches('/');
    u.strip_suffix(".git").unwrap_or(u).to_string()
}

fn fingerprint(access: &GitAccess) -> String {
    use sha2::Digest as _;
    let mut h = sha2::Sha256::new();
    if let Some((u, p)) = &access.credentials {
        h.update(u.as_bytes());
        h.update([0]);
        h.update(p.expose().as_bytes());
    }
    h.update([1]);
    h.update(access.ca_pem.as_deref().unwrap_or_default().as_bytes());
    h.update([u8::from(access.insecure)]);
    hex(&h.finalize()[..8])
}

fn short_hash(s: &str) -> String {
    use sha2::Digest as _;
    hex(&sha2::Sha256::digest(s.as_bytes())[..8])
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_normalize_as_argo_does() {
        assert_eq!(
            normalize_url("https://Git.Lab:8443/site.git/"),
            "https://git.lab:8443/site"
        );
        assert_eq!(
            host_of("https://u@git.lab:8443/site.git").as_deref(),
            Some("git.lab")
        );
        assert_eq!(
            host_of("https://127.0.0.1:1234/x").as_deref(),
            Some("127.0.0.1")
        );
    }

    #[test]
    fn manifests_skip_empty_documents_and_unwrap_lists() {
        let text = "---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: a}\n---\n---\napiVersion: v1\nkind: Namespace\nmetadata: {name: b}\n";
        let objs = parse_manifests(text, "x.yaml").unwrap();
        assert_eq!(objs.len(), 2);
        assert!(parse_manifests("metadata: {name: a}\n", "y.yaml")
            .unwrap_err()
            .contains("y.yaml"));
    }
}
