//! One Application's reconciliation: compare (or a ComparisonError), decide on and run a step
//! of the automated sync operation (with the Application's retry backoff and Argo's self-heal
//! timeout), and write the status Argo writes (sync, health, resources, conditions,
//! operationState, reconciledAt) when it changed.

use super::health::{Health, Status};
use super::repo::{Rendered, Repos, Source};
use super::sync::{self, Item, Options, Step};
use super::{
    Memo, APPLICATION_API, CONTROLLER_USER, FIELD_MANAGER, FINALIZER, NAMESPACE, REFRESH_ANNOTATION,
};
use crate::site::kube::{ObjectRef, Store, WriteOptions};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Argo's default self-heal timeout: a succeeded sync is not redone sooner.
const SELF_HEAL_TIMEOUT: Duration = Duration::from_secs(5);

/// What one reconciliation works with.
pub(super) struct Ctx<'a> {
    pub store: &'a Store,
    pub repos: &'a mut Repos,
    pub resync: Duration,
    pub app_check: bool,
    pub memo: &'a mut Memo,
}

/// Reconciles `app`; when it wants to be looked at again regardless of changes.
pub(super) async fn reconcile(ctx: &mut Ctx<'_>, app: Value) -> Option<Instant> {
    let name = app["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if app["metadata"]["deletionTimestamp"].is_string() {
        finalize(ctx.store, &app, &name);
        return None;
    }
    let refresh = app["metadata"]["annotations"][REFRESH_ANNOTATION].is_string();
    if refresh {
        let patch = json!({"metadata": {"annotations": {REFRESH_ANNOTATION: null}}});
        let _ = ctx
            .store
            .merge_patch(&app_ref(&name), patch, &write_options(), None);
    }
    let stale = ctx.memo.refreshed.is_none_or(|t| t.elapsed() >= ctx.resync);
    let max_age = if refresh || stale {
        Duration::ZERO
    } else {
        ctx.resync
    };
    let (status, wake) = match compare_and_sync(ctx, &app, &name, max_age).await {
        Ok(r) => r,
        Err(message) => (comparison_error(&app, message), None),
    };
    write_status(ctx, &app, &name, status, stale || refresh);
    wake
}

fn app_ref(name: &str) -> ObjectRef {
    ObjectRef {
        api_version: APPLICATION_API.into(),
        kind: "Application".into(),
        namespace: Some(NAMESPACE.into()),
        name: name.into(),
    }
}

fn write_options() -> WriteOptions {
    WriteOptions {
        field_manager: FIELD_MANAGER.into(),
        user: CONTROLLER_USER.into(),
        ..WriteOptions::default()
    }
}

/// RFC 3339 in seconds, as Kubernetes writes times.
pub(super) fn now() -> String {
    let f = time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
    time::OffsetDateTime::now_utc()
        .format(&f)
        .unwrap_or_default()
}

async fn compare_and_sync(
    ctx: &mut Ctx<'_>,
    app: &Value,
    name: &str,
    max_age: Duration,
) -> Result<(Value, Option<Instant>), String> {
    let src = Source::of(app)?;
    let rendered = ctx.repos.render(ctx.store, &src, max_age).await?;
    let dest_ns = app["spec"]["destination"]["namespace"]
        .as_str()
        .unwrap_or_default();
    let mut items = sync::prepare(ctx.store, name, dest_ns, rendered.objects.clone())?;
    sync::observe(ctx.store, &mut items, ctx.app_check);
    let previous = &app["status"]["resources"];
    let extra = sync::extraneous(ctx.store, name, previous, &items);
    let out_of_sync = items.iter().any(|i| !i.synced) || !extra.is_empty();
    let (op, wake) = operate(ctx, app, &rendered, out_of_sync, &mut items, &extra);
    sync::observe(ctx.store, &mut items, ctx.app_check);
    let mut tracked = previous.clone();
    if let Some(list) = tracked.as_array_mut() {
        list.extend(items.iter().map(Item::resource_status));
    }
    let extra = sync::extraneous(ctx.store, name, &tracked, &items);
    Ok((status_of(app, &rendered, &items, &extra, op), wake))
}

fn options(app: &Value) -> Options {
    let policy = &app["spec"]["syncPolicy"];
    let has = |opt: &str| {
        policy["syncOptions"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|o| o.as_str() == Some(opt))
    };
    let dest_ns = app["spec"]["destination"]["namespace"]
        .as_str()
        .unwrap_or_default();
    Options {
        prune: policy["automated"]["prune"] == true,
        create_namespace: (has("CreateNamespace=true") && !dest_ns.is_empty())
            .then(|| dest_ns.to_string()),
        skip_dry_run_on_missing: has("SkipDryRunOnMissingResource=true"),
    }
}

/// Starts, continues or leaves the sync operation; the operationState and a wake-up time.
fn operate(
    ctx: &mut Ctx<'_>,
    app: &Value,
    rendered: &Rendered,
    out_of_sync: bool,
    items: &mut [Item],
    extra: &[ObjectRef],
) -> (Value, Option<Instant>) {
    let prev = app["status"]["operationState"].clone();
    let policy = &app["spec"]["syncPolicy"];
    let running = prev["phase"] == "Running";
    let (mut op, first) = if running {
        if let Some(at) = ctx.memo.retry_at.filter(|at| *at > Instant::now()) {
            return (prev, Some(at));
        }
        (prev, false)
    } else {
        match should_auto_sync(ctx, app, &prev, &rendered.revision, out_of_sync) {
            Ok(()) => (new_operation(app, &rendered.revision), true),
            Err(wake) => return (prev, wake),
        }
    };
    ctx.memo.retry_at = None;
    let o = options(app);
    let step = match first.then(|| sync::dry_run(ctx.store, items, &o)).flatten() {
        Some(failed) => failed,
        None => sync::step(ctx.store, items, extra, &o, ctx.app_check),
    };
    op["syncResult"] = json!({"revision": rendered.revision, "source": app["spec"]["source"], "resources": step.results});
    let wake = finish(ctx, &mut op, &step, &policy["retry"]);
    (op, wake)
}

/// Whether an automated sync starts now (Argo's autoSync): Err with a wake-up time when not.
fn should_auto_sync(
    ctx: &Ctx<'_>,
    app: &Value,
    prev: &Value,
    revision: &str,
    out_of_sync: bool,
) -> Result<(), Option<Instant>> {
    let automated = &app["spec"]["syncPolicy"]["automated"];
    if !automated.is_object() || automated["enabled"] == false || !out_of_sync {
        return Err(None);
    }
    let attempted = prev["syncResult"]["revision"] == revision;
    if !attempted {
        return Ok(());
    }
    // The same revision again: only self-heal redoes a succeeded sync; a failed one waits for a new commit.
    if prev["phase"] != "Succeeded" || automated["selfHeal"] != true {
        return Err(None);
    }
    match ctx.memo.healed_at.map(|t| t + SELF_HEAL_TIMEOUT) {
        Some(at) if at > Instant::now() => Err(Some(at)),
        _ => Ok(()),
    }
}

fn new_operation(app: &Value, revision: &str) -> Value {
    let policy = &app["spec"]["syncPolicy"];
    let mut sync = json!({"revision": revision, "prune": policy["automated"]["prune"] == true});
    if let Some(opts) = policy["syncOptions"].as_array() {
        sync["syncOptions"] = json!(opts);
    }
    let mut operation = json!({"sync": sync, "initiatedBy": {"automated": true}});
    if policy["retry"].is_object() {
        operation["retry"] = policy["retry"].clone();
    }
    json!({"operation": operation, "phase": "Running", "message": "", "startedAt": now()})
}

/// Sets the operation's phase after a step; a failed step is retried per `retry`.
fn finish(ctx: &mut Ctx<'_>, op: &mut Value, step: &Step, retry: &Value) -> Option<Instant> {
    op["message"] = json!(step.message);
    op["phase"] = json!(step.phase);
    match step.phase {
        "Running" => return None,
        "Succeeded" => ctx.memo.healed_at = Some(Instant::now()),
        _ => {
            let count = op["retryCount"].as_i64().unwrap_or(0);
            let limit = retry["limit"].as_i64().unwrap_or(0);
            if retry.is_object() && (limit < 0 || count < limit) {
                let wait = backoff(&retry["backoff"], count);
                let at = Instant::now() + wait;
                let when = time::OffsetDateTime::now_utc() + wait;
                op["phase"] = json!("Running");
                op["retryCount"] = json!(count + 1);
                op["message"] = json!(format!(
                    "{}. Retrying attempt #{} at {:02}:{:02}:{:02}.",
                    step.message,
                    count + 1,
                    when.hour(),
                    when.minute(),
                    when.second()
                ));
                ctx.memo.retry_at = Some(at);
                return Some(at);
            }
        }
    }
    op["finishedAt"] = json!(now());
    None
}

/// Argo's retry backoff: duration × factor^count, at most maxDuration (defaults 5s, 2, 3m).
fn backoff(b: &Value, count: i64) -> Duration {
    let parse = |k: &str, d: u64| {
        b[k].as_str()
            .and_then(|s| bootstrap::output::parse_duration_ms(s).ok())
            .unwrap_or(Duration::from_secs(d))
    };
    let (base, max) = (parse("duration", 5), parse("maxDuration", 180));
    let factor = b["factor"].as_i64().unwrap_or(2).max(1) as u32;
    let mult = factor.saturating_pow(count.clamp(0, 30) as u32);
    base.saturating_mul(mult).min(max)
}

fn status_of(
    app: &Value,
    rendered: &Rendered,
    items: &[Item],
    extra: &[ObjectRef],
    op: Value,
) -> Value {
    let synced = items.iter().all(|i| i.synced) && extra.is_empty();
    let mut resources: Vec<Value> = items.iter().map(Item::resource_status).collect();
    for r in extra {
        let mut v = sync::ref_json(r);
        v["status"] = json!("OutOfSync");
        v["requiresPruning"] = json!(true);
        resources.push(v);
    }
    let health = items
        .iter()
        .filter_map(|i| i.health.clone())
        .max_by_key(|h| h.status)
        .map(|h| json!({"status": h.status.as_str()}))
        .unwrap_or_else(|| {
            Health {
                status: Status::Healthy,
                message: String::new(),
            }
            .to_json()
        });
    json!({
        "sync": {
            "status": if synced { "Synced" } else { "OutOfSync" },
            "revision": rendered.revision,
            "comparedTo": {"source": app["spec"]["source"], "destination": app["spec"]["destination"]},
        },
        "health": health,
        "resources": resources,
        "sourceType": rendered.source_type,
        "operationState": op,
        "conditions": null,
    })
}

/// The status of an Application whose source could not be loaded: what it had, sync Unknown,
/// and the ComparisonError condition.
fn comparison_error(app: &Value, message: String) -> Value {
    let old = &app["status"];
    let since = old["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "ComparisonError" && c["message"] == message.as_str())
        .and_then(|c| c["lastTransitionTime"].as_str().map(String::from))
        .unwrap_or_else(now);
    let mut st = json!({
        "sync": {"status": "Unknown", "comparedTo": {"source": app["spec"]["source"], "destination": app["spec"]["destination"]}},
        "health": if old["health"].is_object() { old["health"].clone() } else { json!({"status": "Healthy"}) },
        "conditions": [{"type": "ComparisonError", "message": message, "lastTransitionTime": since}],
    });
    for k in ["resources", "operationState", "sourceType"] {
        st[k] = old[k].clone();
    }
    st
}

/// Writes `status` when it differs from what the Application has (reconciledAt aside), or
/// on a resync.
fn write_status(ctx: &mut Ctx<'_>, app: &Value, name: &str, mut status: Value, resync: bool) {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("reconciledAt");
            m.retain(|_, x| !x.is_null());
        }
        v
    };
    if !resync && strip(&status) == strip(&app["status"]) {
        return;
    }
    status["reconciledAt"] = json!(now());
    let sub = ctx
        .store
        .kind_info(APPLICATION_API, "Application")
        .filter(|k| k.status_subresource)
        .map(|_| "status");
    match ctx.store.merge_patch(
        &app_ref(name),
        json!({"status": status}),
        &write_options(),
        sub,
    ) {
        Ok(_) => ctx.memo.refreshed = Some(Instant::now()),
        Err(e) => tracing::warn!(
            "Application {NAMESPACE}/{name}: writing its status: {}",
            e.message
        ),
    }
}

/// The resources finalizer: deletes what the Application tracks, then lets it go.
fn finalize(store: &Store, app: &Value, name: &str) {
    let finalizers: Vec<Value> = app["metadata"]["finalizers"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if !finalizers.iter().any(|f| f == FINALIZER) {
        return;
    }
    if !sync::cascade(store, name, &app["status"]["resources"]) {
        return;
    }
    let rest: Vec<Value> = finalizers.into_iter().filter(|f| f != FINALIZER).collect();
    let patch = json!({"metadata": {"finalizers": rest}});
    if let Err(e) = store.merge_patch(&app_ref(name), patch, &write_options(), None) {
        tracing::warn!(
            "Application {NAMESPACE}/{name}: removing its finalizer: {}",
            e.message
        );
    }
}
