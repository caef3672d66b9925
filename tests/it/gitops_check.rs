//! `bootstrap gitops check` on a small GitOps repository (a root Application, child
//! Applications and an AppProject under `apps/`, a tenant base and overlay built with the real
//! `kubectl kustomize`): the good repository passes; each kind of broken Application is refused
//! naming FILE:LINE:COL and the field path; a Kustomize folder that does not build is named.

use crate::support::run::bootstrap;
use bootstrap::gitops::check::{check_repository, CheckOptions};
use std::path::{Path, PathBuf};

const REPO_URL: &str = "https://git.example.com/site.git";

const ROOT: &str = "\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: root
  namespace: openshift-gitops
  finalizers:
  - resources-finalizer.argocd.argoproj.io
spec:
  project: default
  destination:
    server: https://kubernetes.default.svc
    namespace: openshift-gitops
  source:
    repoURL: https://git.example.com/site.git
    path: apps
    targetRevision: HEAD
  syncPolicy:
    automated:
      prune: true
      selfHeal: true
    syncOptions:
    - CreateNamespace=true
";

const PROJECT: &str = "\
apiVersion: argoproj.io/v1alpha1
kind: AppProject
metadata:
  name: platform
  namespace: openshift-gitops
spec:
  sourceRepos:
  - https://git.example.com/site.git
  destinations:
  - server: https://kubernetes.default.svc
    namespace: '*'
  clusterResourceWhitelist:
  - group: ''
    kind: Namespace
";

/// The child Application the broken variants start from; tests name its lines.
const TENANTS: &str = "\
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: tenants
  namespace: openshift-gitops
  annotations:
    argocd.argoproj.io/sync-wave: \"2\"
spec:
  project: platform
  destination:
    server: https://kubernetes.default.svc
    namespace: team-a
  source:
    repoURL: https://git.example.com/site.git
    path: tenants/overlays/team-a
    targetRevision: HEAD
";

const BASE: &[(&str, &str)] = &[
    (
        "kustomization.yaml",
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- namespace.yaml\n- quota.yaml\n- network-policy.yaml\n",
    ),
    (
        "namespace.yaml",
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: tenant\n",
    ),
    (
        "quota.yaml",
        "apiVersion: v1\nkind: ResourceQuota\nmetadata:\n  name: gpu\n  namespace: tenant\nspec:\n  hard:\n    requests.nvidia.com/gpu: \"4\"\n",
    ),
    (
        "network-policy.yaml",
        "apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: default-deny\n  namespace: tenant\nspec:\n  podSelector: {}\n  policyTypes:\n  - Ingress\n---\napiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\nmetadata:\n  name: same-namespace\n  namespace: tenant\nspec:\n  podSelector: {}\n  ingress:\n  - from:\n    - podSelector: {}\n",
    ),
];

fn write(dir: &Path, file: &str, text: &str) {
    let path = dir.join(file);
    fs_err::create_dir_all(path.parent().unwrap()).unwrap();
    fs_err::write(path, text).unwrap();
}

/// The good repository, in a fresh temporary directory.
fn good_repo() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    write(dir, "bootstrap/root.yaml", ROOT);
    write(
        dir,
        "apps/kustomization.yaml",
        "resources:\n- project.yaml\n- tenants.yaml\n",
    );
    write(dir, "apps/project.yaml", PROJECT);
    write(dir, "apps/tenants.yaml", TENANTS);
    for (file, text) in BASE {
        write(dir, &format!("tenants/base/{file}"), text);
    }
    write(
        dir,
        "tenants/overlays/team-a/kustomization.yaml",
        "resources:\n- ../../base\nlabels:\n- pairs:\n    tenant: team-a\n",
    );
    // A .git folder is not part of the repository's content.
    write(dir, ".git/config.yaml", "not: [valid\n");
    tmp
}

fn check(dir: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "gitops",
        "check",
        dir.to_str().unwrap(),
        "--repo-url",
        REPO_URL,
    ];
    args.extend_from_slice(extra);
    bootstrap(&args)
}

/// Stdout lines of a check that must have found problems (exit 1).
fn findings(dir: &Path) -> Vec<String> {
    let out = check(dir, &[]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// The repository with apps/tenants.yaml's text changed by `edit`.
fn broken(edit: impl Fn(&str) -> String) -> tempfile::TempDir {
    let tmp = good_repo();
    write(tmp.path(), "apps/tenants.yaml", &edit(TENANTS));
    tmp
}

#[test]
fn a_good_repository_passes_and_every_folder_is_built() {
    let tmp = good_repo();
    let out = check(tmp.path(), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{stderr}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(out.stdout.is_empty());
    assert!(
        stderr.contains("ok: 7 objects checked, 3 Kustomize folders built"),
        "{stderr}"
    );

    let opts = CheckOptions {
        repo_url: Some(REPO_URL.into()),
        kubectl: "kubectl".into(),
    };
    let report = check_repository(tmp.path(), &opts).unwrap();
    let built: Vec<PathBuf> = ["apps", "tenants/base", "tenants/overlays/team-a"]
        .iter()
        .map(PathBuf::from)
        .collect();
    assert_eq!(report.folders_built, built);
    assert_eq!(report.objects_checked, 7);
    assert!(report.violations.is_empty(), "{:?}", report.violations);
}

#[test]
fn a_misspelled_field_is_refused_naming_line_column_and_path() {
    let tmp = broken(|t| t.replace("  destination:\n", "  destinaton:\n"));
    assert_eq!(
        findings(tmp.path()),
        [
            "apps/tenants.yaml:8:1: spec.destination: Required value",
            "apps/tenants.yaml:10:3: spec.destinaton: field not declared in schema",
        ]
    );
}

#[test]
fn wrong_types_are_refused_naming_line_column_and_path() {
    let tmp = broken(|t| {
        t.replace("server: https://kubernetes.default.svc", "server: 443")
            .replace("targetRevision: HEAD", "targetRevision: 3")
            .replace("sync-wave: \"2\"", "sync-wave: 2")
    });
    assert_eq!(
        findings(tmp.path()),
        [
            "apps/tenants.yaml:7:35: metadata.annotations.argocd.argoproj.io/sync-wave: Invalid value: 2: annotation values are strings; quote the sync wave: \"2\"",
            "apps/tenants.yaml:11:13: spec.destination.server: Invalid value: \"integer\": spec.destination.server in body must be of type string: \"integer\"",
            "apps/tenants.yaml:16:21: spec.source.targetRevision: Invalid value: \"integer\": spec.source.targetRevision in body must be of type string: \"integer\"",
        ]
    );
}

#[test]
fn a_missing_destination_is_refused() {
    let tmp = broken(|t| {
        t.replace(
            "  destination:\n    server: https://kubernetes.default.svc\n    namespace: team-a\n",
            "",
        )
    });
    assert_eq!(
        findings(tmp.path()),
        ["apps/tenants.yaml:8:1: spec.destination: Required value"]
    );
}

#[test]
fn a_destination_with_both_server_and_name_is_refused() {
    let tmp = broken(|t| {
        t.replace(
            "    namespace: team-a\n",
            "    namespace: team-a\n    name: in-cluster\n",
        )
    });
    assert_eq!(
        findings(tmp.path()),
        ["apps/tenants.yaml:10:3: spec.destination: Invalid value: both server and name are set: set server or name, not both"]
    );
}

#[test]
fn a_path_that_is_not_in_the_repository_is_refused() {
    let tmp = broken(|t| t.replace("team-a\n    targetRevision", "team-b\n    targetRevision"));
    assert_eq!(
        findings(tmp.path()),
        ["apps/tenants.yaml:15:11: spec.source.path: Invalid value: \"tenants/overlays/team-b\": no such folder in this repository (https://git.example.com/site.git); create it or fix the path"]
    );
}

#[test]
fn a_kustomization_naming_a_missing_resource_is_refused_naming_the_folder() {
    let tmp = good_repo();
    write(
        tmp.path(),
        "tenants/base/kustomization.yaml",
        &format!("{}- limit-range.yaml\n", BASE[0].1),
    );
    let lines = findings(tmp.path());
    let base = lines
        .iter()
        .find(|l| l.starts_with("tenants/base/kustomization.yaml:"))
        .unwrap_or_else(|| panic!("{lines:?}"));
    assert!(
        base.starts_with("tenants/base/kustomization.yaml:7:3: resources[3]: kubectl kustomize tenants/base fails: "),
        "{base}"
    );
    assert!(base.contains("limit-range.yaml"), "{base}");
    // The overlay builds the base, so it fails too; nothing else is reported.
    assert!(
        lines
            .iter()
            .all(|l| l.contains("kubectl kustomize tenants/")),
        "{lines:?}"
    );
}

#[test]
fn json_output_lists_findings_with_their_places() {
    let tmp = broken(|t| t.replace("  destination:\n", "  destinaton:\n"));
    let out = check(tmp.path(), &["--output", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["violations"][1],
        serde_json::json!({"file": "apps/tenants.yaml", "line": 10, "column": 3,
                           "path": "spec.destinaton", "message": "field not declared in schema"})
    );
    assert_eq!(report["violations"].as_array().unwrap().len(), 2);
    assert_eq!(
        report["foldersBuilt"],
        serde_json::json!(["apps", "tenants/base", "tenants/overlays/team-a"])
    );
    assert_eq!(report["objectsChecked"], 7);
}

#[test]
fn a_check_that_cannot_run_exits_2() {
    let tmp = good_repo();
    let out = check(tmp.path(), &["--kubectl", "/nonexistent/kubectl"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("install kubectl"));
    let out = check(&tmp.path().join("nope"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such directory"));
}
