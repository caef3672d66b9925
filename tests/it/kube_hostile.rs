//! Issue 28 points 2 and 5: the cluster's API as a hostile or broken server on 127.0.0.1, met by
//! the hand-off's client (`bootstrap::gitops::kube::Cluster`, over `openshift::api`).
//!
//! - A list of 3 GiB (declared, or chunked without end) took 4 GiB of memory in 11 s: it is
//!   refused past the cap, in little memory (measured in a child, [`crate::support::peak`]),
//!   asked once; lists are read in pages (`limit`/`continue`).
//! - A 500 is asked again with backoff, and the error is the API's own message, not a guess.
//! - A kubeconfig with an `http://` server or `insecure-skip-tls-verify: true` sends nothing
//!   (no token over plain HTTP) unless the operator names the host with `--insecure-api`; then
//!   the connection says so.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use bootstrap::gitops::kube::{Cluster, Redactor};
use bootstrap::openshift::api::{ANSWER_MAX, LIST_PAGE};

use crate::support::scripted::{Answer, Generated, Scripted, Seen};
use crate::support::tls::TestPki;

const TOKEN: &str = "sha256~hostile-test-token-0123456789abcdef";
const DISCOVERY: &str = "/apis/argoproj.io/v1alpha1";
const LIST: &str = "/apis/argoproj.io/v1alpha1/namespaces/openshift-gitops/applications";
/// Set in the child: `<kubeconfig>`.
const CHILD: &str = "BOOTSTRAP_TEST_KUBE_CHILD";
/// The acceptance's bound on peak memory facing a 3 GiB list.
const PEAK_MAX_KIB: u64 = 128 * 1024;
const THREE_GIB: u64 = 3 << 30;

/// The discovery answer for argoproj.io/v1alpha1: Applications, namespaced.
fn discovery() -> Answer {
    json(
        200,
        serde_json::json!({
            "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "argoproj.io/v1alpha1",
            "resources": [{"name": "applications", "singularName": "application",
                "namespaced": true, "kind": "Application", "verbs": ["get", "list", "patch"]}]
        }),
    )
}

pub(crate) fn json(status: u16, body: serde_json::Value) -> Answer {
    Answer::status(status)
        .header("Content-Type", "application/json")
        .body(body.to_string())
}

/// A page of Applications `names`, continued by `next` when given.
fn page(names: &[&str], next: Option<&str>) -> Answer {
    let items: Vec<_> = names
        .iter()
        .map(|n| {
            serde_json::json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                "metadata": {"name": n, "namespace": "openshift-gitops"}})
        })
        .collect();
    json(
        200,
        serde_json::json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationList",
            "metadata": {"continue": next.unwrap_or("")}, "items": items}),
    )
}

/// A Status answer, as the API server words an error.
pub(crate) fn status(code: u16, reason: &str, message: &str) -> Answer {
    json(
        code,
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": message, "reason": reason, "code": code}),
    )
}

/// A kubeconfig for `server` with the bearer token; `ca` trusted, or TLS not verified.
fn kubeconfig(dir: &Path, server: &str, ca: Option<&str>, skip_verify: bool) -> PathBuf {
    let mut cluster = format!("    server: {server}\n");
    if let Some(ca) = ca {
        let b64 = base64::engine::general_purpose::STANDARD.encode(ca);
        cluster.push_str(&format!("    certificate-authority-data: {b64}\n"));
    }
    if skip_verify {
        cluster.push_str("    insecure-skip-tls-verify: true\n");
    }
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n{cluster}\
         users:\n- name: u\n  user:\n    token: {TOKEN}\n\
         contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\n\
         current-context: x\n"
    );
    let path = dir.join("kubeconfig");
    fs_err::write(&path, text).unwrap();
    path
}

/// An HTTPS API answering by `script`, and a kubeconfig trusting it.
pub(crate) struct Api {
    pub(crate) server: Scripted,
    pub(crate) kubeconfig: PathBuf,
    _dir: tempfile::TempDir,
}

pub(crate) fn api(script: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Api {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(&dir.path().join("pki")).unwrap();
    let server = Scripted::tls(&pki, script);
    let kubeconfig = kubeconfig(
        dir.path(),
        &format!("https://{}", server.host()),
        Some(&pki.ca_pem),
        false,
    );
    Api {
        server,
        kubeconfig,
        _dir: dir,
    }
}

pub(crate) fn path_of(target: &str) -> &str {
    target.split_once('?').map_or(target, |t| t.0)
}

async fn list(kubeconfig: &Path, insecure: &[String]) -> anyhow::Result<Vec<String>> {
    let cluster = Cluster::connect(kubeconfig, None, insecure, Redactor::default()).await?;
    let items = cluster
        .list(
            "argoproj.io/v1alpha1",
            "Application",
            Some("openshift-gitops"),
        )
        .await?;
    Ok(items
        .iter()
        .map(|o| {
            o["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect())
}

/// The child's part: list the Applications, print the error and the peak memory.
fn child(kubeconfig: &str) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let result = rt.block_on(list(Path::new(kubeconfig), &[]));
    crate::support::peak::report(&match result {
        Ok(names) => format!("no error: {} items", names.len()),
        Err(e) => format!("{e:#}"),
    });
}

/// Serves a list answer generated as `how`, lists in a child, checks the refusal (its words,
/// one request, the memory). `test` is the calling test's name.
fn list_refused_in_little_memory(test: &str, how: Generated, seen: &str) {
    if let Ok(kubeconfig) = std::env::var(CHILD) {
        return child(&kubeconfig);
    }
    let api = api(move |r| {
        match path_of(&r.target) {
        DISCOVERY => discovery(),
        LIST => Answer::status(200)
            .header("Content-Type", "application/json")
            .body(r#"{"apiVersion":"argoproj.io/v1alpha1","kind":"ApplicationList","metadata":{},"items":["#)
            .generated(how),
        _ => status(404, "NotFound", "not here"),
    }
    });
    let run = crate::support::peak::measure(
        module_path!(),
        test,
        CHILD,
        &api.kubeconfig.display().to_string(),
        Duration::from_secs(120),
    );
    for part in [
        format!("the cluster API's answer to GET {LIST} {seen}"),
        format!("more than the {ANSWER_MAX} bytes"),
        "not retried".to_string(),
    ] {
        assert!(
            run.result.contains(&part),
            "{part:?} not in: {}",
            run.result
        );
    }
    let lists: Vec<_> = api
        .server
        .seen()
        .into_iter()
        .filter(|r| path_of(&r.target) == LIST)
        .collect();
    assert_eq!(lists.len(), 1, "{lists:#?}");
    assert!(
        lists[0].target.contains(&format!("limit={LIST_PAGE}")),
        "not paged: {}",
        lists[0].target
    );
    assert!(
        run.peak_kib < PEAK_MAX_KIB,
        "peak RSS {} KiB facing {how:?}",
        run.peak_kib
    );
}

/// Regression (issue 28): a list of 3 GiB took 4 GiB of memory; one that declares 3 GiB is
/// refused from its Content-Length, in little memory, and not asked again.
#[test]
fn a_list_declaring_3_gib_is_refused_in_little_memory() {
    list_refused_in_little_memory(
        "a_list_declaring_3_gib_is_refused_in_little_memory",
        Generated::Declared(THREE_GIB),
        &format!("declares {THREE_GIB} bytes"),
    );
}

/// A chunked list without end is read as a stream and refused as it passes the cap.
#[test]
fn an_endless_chunked_list_is_refused_past_the_cap_in_little_memory() {
    list_refused_in_little_memory(
        "an_endless_chunked_list_is_refused_past_the_cap_in_little_memory",
        Generated::EndlessChunks,
        "passed",
    );
}

/// A list is read page by page: `limit` on every request, each `continue` token followed, and
/// every page's items returned once.
#[tokio::test]
async fn a_list_is_read_in_pages_following_continue() {
    let api = api(
        |r| match (path_of(&r.target), r.target.split_once("continue=")) {
            (DISCOVERY, _) => discovery(),
            (LIST, None) => page(&["a", "b"], Some("t1")),
            (LIST, Some((_, "t1"))) => page(&["c"], Some("t2")),
            (LIST, Some((_, "t2"))) => page(&["d"], None),
            _ => status(404, "NotFound", "not here"),
        },
    );
    let names = list(&api.kubeconfig, &[]).await.unwrap();
    assert_eq!(names, ["a", "b", "c", "d"]);
    let targets: Vec<_> = api
        .server
        .seen()
        .into_iter()
        .map(|r| r.target)
        .filter(|t| path_of(t) == LIST)
        .collect();
    assert_eq!(targets.len(), 3, "{targets:#?}");
    assert!(
        targets
            .iter()
            .all(|t| t.contains(&format!("limit={LIST_PAGE}"))),
        "{targets:#?}"
    );
}

/// A 500 is asked again with backoff until the API answers: two 500s, then the list.
#[tokio::test]
async fn a_500_is_asked_again_until_the_api_answers() {
    let lists = std::sync::atomic::AtomicU32::new(0);
    let api = api(move |r| match path_of(&r.target) {
        DISCOVERY => discovery(),
        LIST if lists.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < 2 => {
            status(500, "InternalError", "etcdserver: leader changed")
        }
        LIST => page(&["root"], None),
        _ => status(404, "NotFound", "not here"),
    });
    assert_eq!(list(&api.kubeconfig, &[]).await.unwrap(), ["root"]);
    let asked = api
        .server
        .seen()
        .iter()
        .filter(|r| path_of(&r.target) == LIST)
        .count();
    assert_eq!(asked, 3);
}

/// A 500 that lasts fails after the retries, in the API's words; a discovery that fails with
/// a 500 says the API's answer, not "is the operator that owns it installed?".
#[tokio::test]
async fn a_lasting_500_fails_in_the_api_s_own_words() {
    let api = api(|r| match path_of(&r.target) {
        DISCOVERY => discovery(),
        LIST => status(500, "InternalError", "etcdserver: request timed out"),
        _ => status(404, "NotFound", "not here"),
    });
    let e = format!("{:#}", list(&api.kubeconfig, &[]).await.unwrap_err());
    assert!(
        e.contains("etcdserver: request timed out") && e.contains("500"),
        "{e}"
    );
    let asked = api
        .server
        .seen()
        .iter()
        .filter(|r| path_of(&r.target) == LIST)
        .count();
    assert_eq!(
        asked,
        1 + bootstrap::openshift::api::Retry::API.retries as usize
    );

    let api = api_failing_discovery();
    let e = format!("{:#}", list(&api.kubeconfig, &[]).await.unwrap_err());
    assert!(e.contains("the admission webhook is down"), "{e}");
    assert!(!e.contains("is the operator"), "{e}");
}

fn api_failing_discovery() -> Api {
    api(|r| match path_of(&r.target) {
        DISCOVERY => status(500, "InternalError", "the admission webhook is down"),
        _ => status(404, "NotFound", "not here"),
    })
}

/// A kind whose group version the API does not serve (404) is "not served" (an empty list for
/// the hand-off's reads), with the hint about its operator.
#[tokio::test]
async fn a_kind_not_served_is_named_as_such() {
    let api = api(|_| {
        status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    });
    assert!(list(&api.kubeconfig, &[]).await.unwrap().is_empty());
    let cluster = Cluster::connect(&api.kubeconfig, None, &[], Redactor::default())
        .await
        .unwrap();
    let app = serde_json::json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
        "metadata": {"name": "root", "namespace": "openshift-gitops"}});
    let e = format!("{:#}", cluster.apply(&app, true).await.unwrap_err());
    assert!(
        e.contains("does not serve Application") && e.contains("is the operator"),
        "{e}"
    );
}

/// Regression (issue 28): a kubeconfig with an `http://` server gave the bearer token to it in
/// clear. It is refused before any request, naming the fix; named with `--insecure-api`, it is
/// used and said to be unencrypted.
#[tokio::test]
async fn a_plain_http_server_gets_no_token_unless_named_insecure() {
    let server = Scripted::plain(|r| match path_of(&r.target) {
        DISCOVERY => discovery(),
        LIST => page(&["root"], None),
        _ => status(404, "NotFound", "not here"),
    });
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(
        dir.path(),
        &format!("http://{}", server.host()),
        None,
        false,
    );
    let e = format!("{:#}", list(&kc, &[]).await.unwrap_err());
    for part in [
        "is plain HTTP",
        "certificate-authority-data",
        "--insecure-api 127.0.0.1",
        &kc.display().to_string(),
    ] {
        assert!(e.contains(part), "{part:?} not in: {e}");
    }
    assert!(server.seen().is_empty(), "{:#?}", server.seen());

    let named = vec![server.host()];
    let cluster = Cluster::connect(&kc, None, &named, Redactor::default())
        .await
        .unwrap();
    assert!(!cluster.trust().verified());
    assert!(
        cluster.trust().label().contains("NOT ENCRYPTED"),
        "{}",
        cluster.trust().label()
    );
    assert_eq!(list(&kc, &named).await.unwrap(), ["root"]);
    assert!(server
        .seen()
        .iter()
        .all(|r| r.authorization.as_deref() == Some(&format!("Bearer {TOKEN}"))));
}

/// `insecure-skip-tls-verify: true` was honoured silently: it is refused before any request
/// unless the host is named, and then said to be not verified.
#[tokio::test]
async fn insecure_skip_tls_verify_is_refused_unless_named() {
    let dir = tempfile::tempdir().unwrap();
    let pki = TestPki::generate(&dir.path().join("pki")).unwrap();
    let server = Scripted::tls(&pki, |r| match path_of(&r.target) {
        DISCOVERY => discovery(),
        LIST => page(&["root"], None),
        _ => status(404, "NotFound", "not here"),
    });
    let kc = kubeconfig(
        dir.path(),
        &format!("https://{}", server.host()),
        None,
        true,
    );
    let e = format!("{:#}", list(&kc, &[]).await.unwrap_err());
    assert!(
        e.contains("insecure-skip-tls-verify: true") && e.contains("--insecure-api 127.0.0.1"),
        "{e}"
    );
    assert!(server.seen().is_empty(), "{:#?}", server.seen());

    // The host alone names it too.
    let named = vec!["127.0.0.1".to_string()];
    let cluster = Cluster::connect(&kc, None, &named, Redactor::default())
        .await
        .unwrap();
    assert!(
        cluster.trust().label().contains("NOT VERIFIED"),
        "{}",
        cluster.trust().label()
    );
    assert_eq!(list(&kc, &named).await.unwrap(), ["root"]);
}
