//! Mirrors over TLS: Basic and token auth, blob bodies on HTTP/1.1 connections of their own,
//! and a plain-HTTP registry reached over TLS refused at once with the fix.

use super::*;

/// Over TLS the registries offer HTTP/2; blob bodies must still go over HTTP/1.1 connections of
/// their own (issue 17: one multiplexed connection made the whole mirror slower than skopeo),
/// so no connection that carried a blob body carried a manifest. Read from the registries' own
/// logs: `http.request.remoteaddr` is one client port per connection.
fn blob_bodies_went_over_connections_of_their_own(src: &Registry, dst: &Registry) {
    use std::collections::BTreeSet;
    let conns = |reqs: &[support::reglog::LoggedRequest],
                 f: &dyn Fn(&support::reglog::LoggedRequest) -> bool|
     -> BTreeSet<String> {
        reqs.iter()
            .filter(|r| f(r))
            .map(|r| r.remote.clone())
            .collect()
    };
    let pulled = src.requests();
    let blob_gets = conns(&pulled, &|r| {
        r.method == "GET" && r.path.contains("/blobs/")
    });
    let manifest_gets = conns(&pulled, &|r| r.path.contains("/manifests/"));
    assert!(!blob_gets.is_empty() && !manifest_gets.is_empty());
    assert!(
        blob_gets.is_disjoint(&manifest_gets),
        "blob GETs shared a connection with manifest requests: {blob_gets:?} / {manifest_gets:?}"
    );
    let pushed = dst.requests();
    let uploads = conns(&pushed, &|r| {
        // A committing PUT with no body (after PATCHes) may share the small requests' one.
        r.method == "PATCH"
            || (r.method == "PUT"
                && r.query_value("digest").is_some()
                && r.content_type.as_deref() == Some("application/octet-stream"))
    });
    let manifest_puts = conns(&pushed, &|r| {
        r.method == "PUT" && r.path.contains("/manifests/")
    });
    assert!(!uploads.is_empty() && !manifest_puts.is_empty());
    assert!(
        uploads.is_disjoint(&manifest_puts),
        "blob uploads shared a connection with manifest pushes: {uploads:?} / {manifest_puts:?}"
    );
}

fn auth_mirror(src: &Registry, dst: &Registry, seed: u64) {
    let pushed = SyntheticSet::standard(seed)
        .without_large()
        .push_to(src, "src");
    let work = tempfile::tempdir().unwrap();
    let cfg = write_config(work.path(), &pushed[..2], &src.host(), &["amd64"]);
    let auth = work.path().join("auth.json");
    support::write_merged_authfile(&auth, &[src, dst]);
    let ca = work.path().join("ca.pem");
    support::write_ca_bundle(&ca, &[src, dst]);
    let dest = format!("docker://{}/m", dst.host());
    let rec = work.path().join("rec.json");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = [
            "mirror",
            "-c",
            cfg.to_str().unwrap(),
            &dest,
            "--record",
            rec.to_str().unwrap(),
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        v.extend(extra.iter().map(|x| x.to_string()));
        v
    };
    let run = |a: Vec<String>| {
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        bootstrap(&refs)
    };
    // Without the CA, TLS is refused and the message names the fix.
    let err = failed(&run(args(&["--authfile", auth.to_str().unwrap()])));
    assert!(err.contains("--ca-bundle"), "{err}");
    assert!(err.contains(&dst.host()), "{err}");
    // With it, the mirror works and digests are kept.
    ok(&run(args(&[
        "--authfile",
        auth.to_str().unwrap(),
        "--ca-bundle",
        ca.to_str().unwrap(),
    ])));
    blob_bodies_went_over_connections_of_their_own(src, dst);
    for img in &pushed[..2] {
        let mut a = vec![s("inspect"), s("--raw")];
        a.extend(dst.skopeo_tls_args());
        a.push(format!(
            "docker://{}/m/{}:{}",
            dst.host(),
            img.repo,
            img.tag
        ));
        assert_eq!(raw_digest(&skopeo_ok(&a)), img.digest);
    }
    // A wrong password is refused, naming the registry; the password is never printed.
    let bad = work.path().join("bad.json");
    support::write_authfile_with(
        &bad,
        &[(dst.host(), "tester", "wrong-password-123")],
        &[src],
    );
    let err = failed(&run(args(&[
        "--authfile",
        bad.to_str().unwrap(),
        "--ca-bundle",
        ca.to_str().unwrap(),
    ])));
    assert!(err.contains(&dst.host()) && err.contains("tester"), "{err}");
    assert!(!err.contains("wrong-password-123"));
    let rec_text = fs_err::read_to_string(&rec).unwrap();
    let (_, password) = dst.credentials().unwrap();
    assert!(!rec_text.contains(&password));
}

#[test]
fn basic_auth_over_tls() {
    let src = Registry::tls_basic("puller", "pull-secret-1");
    let dst = Registry::tls_basic("tester", "push-secret-1");
    auth_mirror(&src, &dst, 4);
}

#[test]
fn token_auth_over_tls() {
    let src = Registry::tls_token("puller", "pull-secret-2");
    let dst = Registry::tls_token("tester", "push-secret-2");
    auth_mirror(&src, &dst, 5);
    assert!(dst.tokens_issued() > 0);
}

/// Regression: a plain-HTTP registry reached over TLS (no `--plain-http`) was retried like a
/// network fault, about 22 s of backoff, before saying so. It is not a fault that passes: the
/// first answer says to pass `--plain-http`, and nothing is tried again.
#[test]
fn a_plain_http_registry_reached_over_tls_fails_at_once_with_the_fix() {
    let dst = Registry::plain();
    let work = tempfile::tempdir().unwrap();
    let isc = crate::support::run::one_image_config(work.path());
    let o = Command::new(env!("CARGO_BIN_EXE_bootstrap"))
        .args([
            "mirror",
            "-c",
            isc.to_str().unwrap(),
            &format!("docker://{}", dst.host()),
        ])
        .env("BOOTSTRAP_LOG", "warn")
        .output()
        .unwrap();
    let err = failed(&o);
    assert!(
        err.contains(&format!(
            "does not speak TLS: if it serves plain HTTP, pass --plain-http {}",
            dst.host()
        )),
        "{err}"
    );
    assert!(!err.contains("trying again"), "retried: {err}");
}
