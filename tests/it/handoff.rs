//! The hand-off against the lab cluster (support/gitops_lab.rs: the Kubernetes API stand-in,
//! the OLM and Argo CD imitations, the lab's real Git server holding the repository
//! `bootstrap gitops init` wrote): in order with each wait observed (read from the API's
//! audit trail), the root and every child Synced and Healthy as real `kubectl` shows them, a
//! tenant's namespace holding its quota, network policy and role bindings, a rerun that changes
//! nothing, kill -9 in the middle then a rerun that completes, and the repository password
//! nowhere but inside its Secret.

use crate::support::gitops_lab::GitopsLab;
use crate::support::run::ok;
use bootstrap_lab::site::kube::{AuditEvent, ObjectRef};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// The first call matching `pred`, by position in the audit trail.
fn first(audit: &[AuditEvent], pred: impl Fn(&AuditEvent) -> bool) -> Option<usize> {
    audit.iter().position(pred)
}

/// bootstrap's own real (not dry-run) apply of `kind` `name`.
fn applied(e: &AuditEvent, kind: &str, name: &str) -> bool {
    e.field_manager.as_deref() == Some("bootstrap")
        && e.verb == "apply"
        && !e.dry_run
        && e.kind == kind
        && e.name.as_deref() == Some(name)
        && e.code < 300
}

/// bootstrap's server-side dry run of `kind` `name`.
fn dry_run(e: &AuditEvent, kind: &str, name: &str) -> bool {
    e.field_manager.as_deref() == Some("bootstrap")
        && e.verb == "apply"
        && e.dry_run
        && e.kind == kind
        && e.name.as_deref() == Some(name)
}

/// bootstrap's read (as the kubeconfig's admin) of `kind` `name`: a wait asking. The OLM and
/// Argo CD imitations read as their own users.
fn read(e: &AuditEvent, kind: &str, name: &str) -> bool {
    e.verb == "get" && e.kind == kind && e.name.as_deref() == Some(name) && e.user == "system:admin"
}

fn at(audit: &[AuditEvent], what: &str, pred: impl Fn(&AuditEvent) -> bool) -> usize {
    first(audit, pred).unwrap_or_else(|| panic!("no API call for {what} in the audit trail"))
}

fn report(stdout: &str) -> Value {
    serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// The whole hand-off in order, every wait observed, Argo CD owning the platform at the end.
#[test]
fn the_handoff_runs_in_order_and_argo_cd_owns_the_cluster() {
    let lab = GitopsLab::start();
    let out = lab.dir.join("out");
    let o = lab.with_runtime(|| lab.handoff(&out));
    let stdout = ok(&o);
    let r = report(&stdout);
    let audit = lab.audit();

    // 1. mirror: dry run before the apply; the CatalogSource is READY before the operator.
    let cs = "cs-redhat-operator-index-v4-18";
    let cs_dry = at(&audit, "CatalogSource dry run", |e| {
        dry_run(e, "CatalogSource", cs)
    });
    let cs_apply = at(&audit, "CatalogSource apply", |e| {
        applied(e, "CatalogSource", cs)
    });
    let hub = at(&audit, "OperatorHub apply", |e| {
        applied(e, "OperatorHub", "cluster")
    });
    let cs_wait = at(&audit, "CatalogSource wait", |e| {
        read(e, "CatalogSource", cs)
    });
    assert!(
        cs_dry < cs_apply && cs_apply < hub && hub < cs_wait,
        "mirror step out of order"
    );
    // 2. operator: Subscription, then installedCSV, the CSV, the CRDs, the ArgoCD, in order.
    let sub = at(&audit, "Subscription apply", |e| {
        applied(e, "Subscription", "openshift-gitops-operator")
    });
    let sub_wait = at(&audit, "Subscription wait", |e| {
        read(e, "Subscription", "openshift-gitops-operator")
    });
    let csv_name = r["csv"].as_str().unwrap();
    assert!(csv_name.starts_with("openshift-gitops-operator.v"), "{r}");
    let csv_wait = at(&audit, "CSV wait", |e| {
        read(e, "ClusterServiceVersion", csv_name)
    });
    let crd_wait = at(&audit, "CRD wait", |e| {
        read(e, "CustomResourceDefinition", "argocds.argoproj.io")
    });
    let argocd_wait = at(&audit, "ArgoCD wait", |e| {
        read(e, "ArgoCD", "openshift-gitops")
    });
    assert!(
        cs_wait < sub && sub < sub_wait,
        "the operator came before its catalog was READY"
    );
    assert!(sub_wait < csv_wait && csv_wait < crd_wait && crd_wait < argocd_wait, "operator waits out of order: Subscription {sub_wait}, CSV {csv_wait}, CRD {crd_wait}, ArgoCD {argocd_wait}: {:#?}", &audit[sub_wait.min(csv_wait).min(crd_wait).min(argocd_wait)..=sub_wait.max(csv_wait).max(crd_wait).max(argocd_wait)].iter().map(|e| format!("{} {} {} {:?}", e.user, e.verb, e.kind, e.name)).collect::<Vec<_>>());
    // 3-5. credentials, tenancy, root: after the ArgoCD is Available, in that order.
    let secret = at(&audit, "repository Secret", |e| {
        applied(e, "Secret", "bootstrap-site-repository")
    });
    let certs = at(&audit, "TLS certs", |e| {
        applied(e, "ConfigMap", "argocd-tls-certs-cm")
    });
    let role = at(&audit, "tenancy binding", |e| {
        applied(e, "ClusterRoleBinding", "bootstrap-argocd-tenancy")
    });
    let health = at(&audit, "health check", |e| {
        applied(e, "ArgoCD", "openshift-gitops")
    });
    let root = at(&audit, "root Application", |e| {
        applied(e, "Application", "root")
    });
    assert!(
        argocd_wait < secret && secret < certs && certs < role && role < health && health < root
    );
    // Every real apply by bootstrap was dry-run first, Strict.
    for (i, e) in audit.iter().enumerate() {
        if e.field_manager.as_deref() == Some("bootstrap") && e.verb == "apply" && !e.dry_run {
            let name = e.name.clone().unwrap_or_default();
            assert!(
                audit[..i].iter().any(|d| dry_run(d, &e.kind, &name)),
                "{} {name} applied without a dry run first",
                e.kind
            );
        }
    }

    // The report and applied.json agree with the cluster.
    let apps = r["applications"].as_array().unwrap();
    assert!(apps.len() >= 6, "{r}");
    for a in apps {
        assert_eq!(
            (a["sync"].as_str(), a["health"].as_str()),
            (Some("Synced"), Some("Healthy")),
            "{a}"
        );
    }
    let applied_json: Value =
        serde_json::from_str(&fs_err::read_to_string(out.join("applied.json")).unwrap()).unwrap();
    for rec in applied_json.as_array().unwrap() {
        let (kind, name) = (rec["kind"].as_str().unwrap(), rec["name"].as_str().unwrap());
        assert!(!rec["uid"].as_str().unwrap().is_empty(), "{rec}");
        assert!(
            !rec["resourceVersion"].as_str().unwrap().is_empty(),
            "{kind} {name}"
        );
    }

    // Real kubectl: root and every child Synced and Healthy.
    let table = lab.with_runtime(|| lab.kubectl(&["get", "applications", "-A"]));
    let rows: Vec<&str> = table.lines().skip(1).collect();
    assert_eq!(rows.len(), apps.len(), "{table}");
    for row in &rows {
        assert!(row.contains("Synced") && row.contains("Healthy"), "{table}");
    }
    assert!(
        rows.iter()
            .any(|r| r.split_whitespace().nth(1) == Some("root")),
        "{table}"
    );

    // A tenant's namespace holds its quota, network policies and role bindings.
    let quota: Value =
        serde_json::from_str(&lab.with_runtime(|| {
            lab.kubectl(&["get", "resourcequotas", "-n", "team-a", "-o", "json"])
        }))
        .unwrap();
    let hard = &quota["items"][0]["spec"]["hard"];
    assert_eq!(hard["requests.nvidia.com/gpu"], "4", "{quota}");
    let policies =
        lab.with_runtime(|| lab.kubectl(&["get", "networkpolicies", "-n", "team-a", "-o", "json"]));
    let policies: Value = serde_json::from_str(&policies).unwrap();
    let deny = policies["items"].as_array().unwrap().iter().any(|p| {
        p["spec"]["podSelector"] == serde_json::json!({})
            && p["spec"]["policyTypes"]
                .as_array()
                .is_some_and(|t| t.len() == 2)
            && p["spec"]["ingress"].is_null()
    });
    assert!(deny, "no default-deny policy in team-a: {policies}");
    let bindings =
        lab.with_runtime(|| lab.kubectl(&["get", "rolebindings", "-n", "team-a", "-o", "json"]));
    assert!(
        bindings.contains("team-a-admins") && bindings.contains("team-a-developers"),
        "{bindings}"
    );

    assert_no_password(&lab, &o, &out);
}

/// The password is in the Secret's `data` and nowhere in what bootstrap printed or wrote.
fn assert_no_password(lab: &GitopsLab, o: &std::process::Output, out: &Path) {
    use base64::Engine as _;
    let pw = &lab.password;
    let b64 = base64::engine::general_purpose::STANDARD.encode(pw);
    for (what, text) in [
        ("stdout", String::from_utf8_lossy(&o.stdout).into_owned()),
        ("stderr", String::from_utf8_lossy(&o.stderr).into_owned()),
        (
            "applied.json",
            fs_err::read_to_string(out.join("applied.json")).unwrap_or_default(),
        ),
        (
            "handoff.json",
            fs_err::read_to_string(out.join("handoff.json")).unwrap_or_default(),
        ),
    ] {
        assert!(
            !text.contains(pw.as_str()) && !text.contains(&b64),
            "the password is in {what}"
        );
    }
    let secret: Value = serde_json::from_str(&lab.with_runtime(|| {
        lab.kubectl(&[
            "get",
            "secret",
            "-n",
            "openshift-gitops",
            "bootstrap-site-repository",
            "-o",
            "json",
        ])
    }))
    .unwrap();
    assert_eq!(secret["data"]["password"], b64.as_str());
    assert!(secret.get("stringData").is_none());
}

/// What bootstrap owns of every object it applied: its managedFields entry (operation, time,
/// fields) and, for the objects no controller writes, the resourceVersion.
fn owned(lab: &GitopsLab, out: &Path) -> Vec<(String, Value, Option<String>)> {
    let records: Value =
        serde_json::from_str(&fs_err::read_to_string(out.join("applied.json")).unwrap()).unwrap();
    let only_ours = ["Secret", "ClusterRole", "ClusterRoleBinding", "AppProject"];
    records
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let kind = r["kind"].as_str().unwrap().to_string();
            let obj = lab
                .store
                .get(&ObjectRef {
                    api_version: r["apiVersion"].as_str().unwrap().into(),
                    kind: kind.clone(),
                    namespace: r["namespace"].as_str().map(str::to_string),
                    name: r["name"].as_str().unwrap().into(),
                })
                .unwrap();
            let entry = obj["metadata"]["managedFields"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["manager"] == "bootstrap" && m["subresource"].is_null())
                .cloned()
                .unwrap_or_else(|| panic!("{kind}: no managedFields entry of bootstrap"));
            let rv = only_ours.contains(&kind.as_str()).then(|| {
                obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string()
            });
            (format!("{kind} {}", r["name"]), entry, rv)
        })
        .collect()
}

/// A second run applies the same objects and changes nothing: bootstrap's field ownership
/// (and its time) is as the first run left it, and the objects only bootstrap writes keep
/// their resourceVersion.
#[test]
fn a_rerun_changes_nothing() {
    let lab = GitopsLab::start();
    let (one, two) = (lab.dir.join("one"), lab.dir.join("two"));
    ok(&lab.with_runtime(|| lab.handoff(&one)));
    let first_run = owned(&lab, &one);
    assert!(first_run.iter().any(|(_, _, rv)| rv.is_some()));
    let o = lab.with_runtime(|| lab.handoff(&two));
    ok(&o);
    assert_eq!(
        first_run,
        owned(&lab, &two),
        "the rerun changed what bootstrap applied"
    );
    assert_no_password(&lab, &o, &two);
}

/// kill -9 while the operator is installing, then a rerun: it completes.
#[test]
fn kill_9_mid_handoff_then_rerun_completes() {
    let lab = GitopsLab::start();
    let out = lab.dir.join("out");
    let mut child = lab.with_runtime(|| lab.handoff_command(&out).spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(120);
    while !lab
        .audit()
        .iter()
        .any(|e| applied(e, "Subscription", "openshift-gitops-operator"))
    {
        assert!(
            Instant::now() < deadline,
            "the hand-off never applied its Subscription"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    let killed = child.wait().unwrap();
    assert!(!killed.success());
    assert!(
        !out.join("applied.json").exists(),
        "a killed run left a report"
    );
    let o = lab.with_runtime(|| lab.handoff(&out));
    let r = report(&ok(&o));
    assert!(
        r["applications"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["health"] == "Healthy"),
        "{r}"
    );
}

/// Day two belongs to Argo CD: after the hand-off, a reviewed change pushed to the site's
/// repository (team-a's GPU quota raised from 4 to 8) reaches the cluster with no bootstrap
/// run, written by the Argo CD controller.
#[test]
fn day_two_a_pushed_change_reaches_the_cluster_through_argo_cd() {
    let lab = GitopsLab::start();
    ok(&lab.with_runtime(|| lab.handoff(&lab.dir.join("out"))));
    let overlay = lab.repo.join("tenants/team-a/kustomization.yaml");
    let text = fs_err::read_to_string(&overlay).unwrap();
    let gpu = "path: /spec/hard/requests.nvidia.com~1gpu\n      value: \"4\"";
    assert!(text.contains(gpu), "{text}");
    fs_err::write(&overlay, text.replace(gpu, &gpu.replace("\"4\"", "\"8\""))).unwrap();
    lab.git(&["commit", "-q", "-am", "team-a: 8 GPUs"]);
    lab.git(&["push", "-q", &lab.url, "main"]);
    let quota = ObjectRef {
        api_version: "v1".into(),
        kind: "ResourceQuota".into(),
        namespace: Some("team-a".into()),
        name: "tenant-quota".into(),
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    let obj = loop {
        let obj = lab.store.get(&quota).unwrap();
        if obj["spec"]["hard"]["requests.nvidia.com/gpu"] == "8" {
            break obj;
        }
        assert!(
            Instant::now() < deadline,
            "the pushed quota never reached the cluster: {obj}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let writer = obj["metadata"]["managedFields"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| {
            m["fieldsV1"]["f:spec"]["f:hard"]
                .get("f:requests.nvidia.com/gpu")
                .is_some()
        })
        .map(|m| m["manager"].clone());
    assert_eq!(writer, Some(Value::from("argocd-controller")), "{obj}");
}

/// The install pipeline's handoff stage (`bootstrap install --from handoff`, the stages before
/// it recorded done, the installer's kubeconfig where the iso stage leaves it): it runs the
/// hand-off to its end, records its outputs, and the password is nowhere in state.json, the
/// stage's log, applied.json, handoff.json or the output; `install status` shows it done; and
/// the run directory holds only files `rundir` names.
#[test]
fn the_install_pipelines_handoff_stage_runs_it_and_keeps_the_password_out_of_state() {
    let lab = GitopsLab::start();
    let run = lab.dir.join("run");
    fs_err::create_dir_all(run.join("iso/work/auth")).unwrap();
    fs_err::copy(&lab.kubeconfig, run.join("iso/work/auth/kubeconfig")).unwrap();
    let done: Vec<Value> = ["validate", "render", "tools", "iso", "boot", "wait", "prep"]
        .iter()
        .map(|s| serde_json::json!({"stage": s, "status": "done", "detail": "done in an earlier run"}))
        .collect();
    let state = serde_json::json!({"version": 1, "inventory": lab.inventory.display().to_string(), "stages": done});
    fs_err::write(run.join("state.json"), state.to_string()).unwrap();
    let install = |extra: &[&str]| {
        let mut args = vec![
            "install",
            "--inventory",
            lab.inventory.to_str().unwrap(),
            "--run",
            run.to_str().unwrap(),
        ];
        args.extend(extra);
        lab.with_runtime(|| {
            crate::support::run::command(&args)
                .env("NO_COLOR", "1")
                .output()
                .unwrap()
        })
    };
    let o = install(&["--from", "handoff", "--until", "handoff"]);
    ok(&o);
    let state: Value =
        serde_json::from_str(&fs_err::read_to_string(run.join("state.json")).unwrap()).unwrap();
    let rec = state["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == "handoff")
        .unwrap()
        .clone();
    assert_eq!(rec["status"], "done", "{rec}");
    assert!(
        rec["detail"]
            .as_str()
            .unwrap()
            .contains("Synced and Healthy"),
        "{rec}"
    );
    assert!(
        rec["outputs"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.ends_with("applied.json")),
        "{rec}"
    );
    assert_no_password(&lab, &o, &run.join("handoff"));
    // The stage wrote only its own folder and its log, names the run directory's contract
    // (rundir) gives.
    assert!(run.join("handoff/handoff.json").is_file());
    assert_eq!(
        crate::support::run::unnamed_in_run(&run),
        Vec::<String>::new()
    );
    let pw = lab.password.as_str();
    for file in ["state.json", "logs/handoff.log"] {
        let text = fs_err::read_to_string(run.join(file)).unwrap();
        assert!(!text.contains(pw), "the password is in {file}");
    }
    let status = ok(&crate::support::run::bootstrap(&[
        "install",
        "status",
        "--run",
        run.to_str().unwrap(),
    ]));
    let line = status
        .lines()
        .find(|l| l.starts_with("handoff"))
        .unwrap_or_default();
    assert!(
        line.contains("done") && line.contains("Synced and Healthy"),
        "{status}"
    );
}

/// Issue 28 point 5 through the command: a kubeconfig with an `http://` server, or with
/// `insecure-skip-tls-verify: true`, is refused before any request (no token crosses), naming
/// the fix; with `--insecure-api HOST` the unverified hand-off runs and its report says so.
#[test]
fn an_unprotected_kubeconfig_is_refused_unless_the_host_is_named_insecure() {
    use crate::support::scripted::{Answer, Scripted};
    let lab = GitopsLab::start();
    let text = fs_err::read_to_string(&lab.kubeconfig).unwrap();
    let server_line = text
        .lines()
        .find(|l| l.trim_start().starts_with("server:"))
        .unwrap()
        .to_string();
    let server = server_line.trim().trim_start_matches("server:").trim();
    let host = server
        .trim_start_matches("https://")
        .rsplit_once(':')
        .unwrap()
        .0
        .to_string();
    let command = |kubeconfig: &Path, out: &Path, extra: &[&str]| {
        let mut args = vec![
            "gitops",
            "handoff",
            "--inventory",
            lab.inventory.to_str().unwrap(),
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--timeout",
            "2m",
            "--poll-ms",
            "100",
            "--output",
            "json",
        ];
        args.extend_from_slice(extra);
        crate::support::run::command(&args).output().unwrap()
    };

    let plain = Scripted::plain(|_| Answer::status(404));
    let kc = lab.dir.join("plain-kubeconfig");
    fs_err::write(
        &kc,
        text.replace(
            &server_line,
            &format!("    server: http://{}", plain.host()),
        ),
    )
    .unwrap();
    let o = lab.with_runtime(|| command(&kc, &lab.dir.join("plain"), &[]));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains("is plain HTTP") && stderr.contains("--insecure-api 127.0.0.1"),
        "{stderr}"
    );
    assert!(plain.seen().is_empty(), "{:#?}", plain.seen());

    let kc = lab.dir.join("unverified-kubeconfig");
    let unverified: String = text
        .lines()
        .filter(|l| !l.contains("certificate-authority-data"))
        .map(|l| match l == server_line {
            true => format!("{l}\n    insecure-skip-tls-verify: true\n"),
            false => format!("{l}\n"),
        })
        .collect();
    fs_err::write(&kc, unverified).unwrap();
    let o = lab.with_runtime(|| command(&kc, &lab.dir.join("refused"), &[]));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{stderr}");
    assert!(
        stderr.contains("insecure-skip-tls-verify: true"),
        "{stderr}"
    );
    // That nothing is sent is kubeconfig-level (kube_hostile::insecure_skip_tls_verify_is_
    // refused_unless_named counts the requests); the lab's own controllers write to its audit
    // trail all along, so here: nothing recorded.
    assert!(!lab.dir.join("refused").join("handoff.json").exists());

    let out = lab.dir.join("named");
    let o = lab.with_runtime(|| command(&kc, &out, &["--insecure-api", &host]));
    let r = report(&ok(&o));
    let trust = r["apiTrust"].as_str().unwrap_or_default();
    assert!(
        trust.contains("NOT VERIFIED") && trust.contains(&host),
        "{r}"
    );
    let recorded: Value =
        serde_json::from_str(&fs_err::read_to_string(out.join("handoff.json")).unwrap()).unwrap();
    assert_eq!(recorded["apiTrust"], r["apiTrust"]);
}
