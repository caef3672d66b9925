//! The lab cluster's objects, in memory: every write — from kubectl over HTTP or from the lab's
//! controllers in-process — goes through the same kind lookup, RBAC decision, field validation,
//! server-side apply and bookkeeping (uid, resourceVersion, generation, managedFields,
//! finalizers), and every call lands in the audit trail.

use super::kinds::{self, split_api_version, KindInfo};
use super::managed::{self, Manager};
use super::patch;
use super::rbac::{self, Attributes};
use super::ssa::Shape;
use super::validate;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use write::{delete_object, Write};

mod write;

/// An API error, as the API server's `Status` carries it.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The HTTP status code.
    pub code: u16,
    /// NotFound, AlreadyExists, Conflict, Invalid, BadRequest, Forbidden, MethodNotAllowed.
    pub reason: String,
    /// The API server's message.
    pub message: String,
}

impl ApiError {
    /// An error with this code, reason and message.
    pub fn new(code: u16, reason: &str, message: String) -> ApiError {
        ApiError {
            code,
            reason: reason.into(),
            message,
        }
    }

    /// 404 for an object: `configmaps "x" not found`.
    pub fn not_found(resource: &str, name: &str) -> ApiError {
        ApiError::new(404, "NotFound", format!("{resource} \"{name}\" not found"))
    }

    /// 422 as the API server words it: `Kind.group "name" is invalid: [path: msg, ...]`.
    pub fn invalid(kind: &str, name: &str, violations: &[(String, String)]) -> ApiError {
        let each: Vec<String> = violations
            .iter()
            .map(|(p, m)| format!("{p}: {m}"))
            .collect();
        let list = if each.len() == 1 {
            each[0].clone()
        } else {
            format!("[{}]", each.join(", "))
        };
        ApiError::new(
            422,
            "Invalid",
            format!("{kind} \"{name}\" is invalid: {list}"),
        )
    }

    /// The metav1 Status the API server answers with.
    pub fn to_status(&self) -> Value {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": self.message, "reason": self.reason, "code": self.code})
    }
}

/// How a write is made.
#[derive(Clone, Debug, Default)]
pub struct WriteOptions {
    /// The field manager (required for apply).
    pub field_manager: String,
    /// Apply: take over conflicting fields.
    pub force: bool,
    /// dryRun=All: everything but the write.
    pub dry_run: bool,
    /// fieldValidation=Strict: unknown fields are refused (else pruned, with a warning).
    pub strict: bool,
    /// Who asks ("" is the lab itself: authorized as system:admin, recorded as system:lab).
    pub user: String,
}

/// One object's coordinates.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct ObjectRef {
    /// `group/version` or `v1`.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// The namespace, for namespaced kinds.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

impl ObjectRef {
    /// The reference of an object (apiVersion, kind, metadata.namespace/name).
    pub fn of(obj: &Value) -> ObjectRef {
        let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
        ObjectRef {
            api_version: s(&obj["apiVersion"]),
            kind: s(&obj["kind"]),
            namespace: obj["metadata"]["namespace"].as_str().map(String::from),
            name: s(&obj["metadata"]["name"]),
        }
    }
}

/// One call, as the audit trail records it.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct AuditEvent {
    /// Its place in the trail, from 1.
    pub seq: u64,
    /// Who asked.
    pub user: String,
    /// get list create apply patch update delete.
    pub verb: String,
    /// The apiVersion asked for.
    pub api_version: String,
    /// The kind.
    pub kind: String,
    /// The namespace.
    pub namespace: Option<String>,
    /// The name (None for list).
    pub name: Option<String>,
    /// `status`.
    pub subresource: Option<String>,
    /// The field manager of a write.
    pub field_manager: Option<String>,
    /// A dry run.
    pub dry_run: bool,
    /// The answer's HTTP status code.
    pub code: u16,
}

/// The result of a write, with what the HTTP layer also needs.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The object after the write (or as it would be, for a dry run).
    pub object: Value,
    /// 201 when created, else 200.
    pub code: u16,
    /// Warnings (unknown fields pruned).
    pub warnings: Vec<String>,
}

/// Where an object lives: (group, kind, namespace, name).
pub(crate) type Key = (String, String, Option<String>, String);

pub(crate) struct State {
    pub(crate) revision: u64,
    pub(crate) kinds: BTreeMap<(String, String), KindInfo>,
    pub(crate) objects: BTreeMap<Key, Value>,
    audit: Vec<AuditEvent>,
}

struct Inner {
    state: Mutex<State>,
    revision: tokio::sync::watch::Sender<u64>,
    audit_log: Option<PathBuf>,
}

/// The lab cluster's object store. Cheap to clone; every clone is the same cluster.
#[derive(Clone)]
pub struct Store {
    inner: Arc<Inner>,
}

impl Default for Store {
    fn default() -> Self {
        Store::new()
    }
}

/// What a write does.
pub(crate) enum Op {
    Create(Value),
    Apply(Value),
    Replace(Value),
    MergePatch(ObjectRef, Value),
    JsonPatch(ObjectRef, Value),
}

impl Op {
    fn target(&self) -> ObjectRef {
        match self {
            Op::Create(v) | Op::Apply(v) | Op::Replace(v) => ObjectRef::of(v),
            Op::MergePatch(r, _) | Op::JsonPatch(r, _) => r.clone(),
        }
    }

    fn verbs(&self) -> (&'static str, &'static str) {
        match self {
            Op::Create(_) => ("create", "create"),
            Op::Apply(_) => ("apply", "patch"),
            Op::Replace(_) => ("update", "update"),
            Op::MergePatch(..) | Op::JsonPatch(..) => ("patch", "patch"),
        }
    }
}

impl rbac::Objects for State {
    fn rbac_list(&self, kind: &str) -> Vec<&Value> {
        self.objects
            .iter()
            .filter(|((g, k, _, _), _)| g == "rbac.authorization.k8s.io" && k == kind)
            .map(|(_, v)| v)
            .collect()
    }

    fn rbac_get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<&Value> {
        let key = (
            "rbac.authorization.k8s.io".to_string(),
            kind.to_string(),
            namespace.map(String::from),
            name.to_string(),
        );
        self.objects.get(&key)
    }
}

impl State {
    /// The kind an apiVersion and kind name, when that version is served.
    pub(crate) fn kind(&self, api_version: &str, kind: &str) -> Result<&KindInfo, ApiError> {
        let (group, version) = split_api_version(api_version);
        self.kinds
            .get(&(group.to_string(), kind.to_string()))
            .filter(|k| k.versions.iter().any(|v| v == version))
            .ok_or_else(|| {
                ApiError::new(404, "NotFound", format!("the server could not find the requested resource (no kind \"{kind}\" is registered for version \"{api_version}\")"))
            })
    }

    fn key(info: &KindInfo, r: &ObjectRef) -> Key {
        (
            info.group.clone(),
            info.kind.clone(),
            r.namespace.clone().filter(|_| info.namespaced),
            r.name.clone(),
        )
    }

    fn bump(&mut self) -> u64 {
        self.revision += 1;
        self.revision
    }
}

/// The object as read through `api_version` (the stand-in has no conversion: only the
/// apiVersion differs, as with a CRD's `None` conversion strategy).
fn as_version(mut obj: Value, api_version: &str) -> Value {
    obj["apiVersion"] = json!(api_version);
    obj
}

/// RFC 3339, seconds, as the API server writes times.
pub(crate) fn now() -> String {
    let t = time::OffsetDateTime::now_utc()
        .replace_nanosecond(0)
        .unwrap_or_else(|_| time::OffsetDateTime::now_utc());
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

impl Store {
    /// A cluster with the built-in kinds and the namespaces every cluster has; no CRDs.
    pub fn new() -> Store {
        Store::build(None)
    }

    /// As [`Store::new`], also appending every audit event to `path` as a JSON line.
    pub fn with_audit_log(path: impl Into<PathBuf>) -> Store {
        Store::build(Some(path.into()))
    }

    fn build(audit_log: Option<PathBuf>) -> Store {
        let kinds = kinds::builtins()
            .into_iter()
            .map(|k| ((k.group.clone(), k.kind.clone()), k))
            .collect();
        let store = Store {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    revision: 0,
                    kinds,
                    objects: BTreeMap::new(),
                    audit: Vec::new(),
                }),
                revision: tokio::sync::watch::channel(0).0,
                audit_log,
            }),
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let o = WriteOptions {
                field_manager: "kube-apiserver".into(),
                ..Default::default()
            };
            let _ = store.create(obj, &o);
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a call in the trail (and the audit log file), and wakes waiters on a write.
    fn record(&self, st: &mut State, mut ev: AuditEvent, code: u16, revision_before: u64) {
        ev.seq = st.audit.len() as u64 + 1;
        ev.code = code;
        if let Some(path) = &self.inner.audit_log {
            let line = serde_json::to_string(&ev).unwrap_or_default() + "\n";
            let appended = fs_err::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| std::io::Write::write_all(&mut f, line.as_bytes()));
            if let Err(e) = appended {
                tracing::warn!("appending to the lab cluster's audit log: {e}");
            }
        }
        st.audit.push(ev);
        if st.revision != revision_before {
            self.inner.revision.send_replace(st.revision);
        }
    }

    /// Every call so far, in order.
    pub fn audit(&self) -> Vec<AuditEvent> {
        self.lock().audit.clone()
    }

    /// The store's revision: grows on every write.
    pub fn revision(&self) -> u64 {
        self.lock().revision
    }

    /// Returns once the revision is past `since` (the new revision).
    pub async fn changed(&self, since: u64) -> u64 {
        let mut rx = self.inner.revision.subscribe();
        let r = rx.wait_for(|r| *r > since).await.map(|r| *r);
        r.unwrap_or(since)
    }

    /// Whether the kind is served (a built-in, or a CRD's kind once created).
    pub fn is_established(&self, api_version: &str, kind: &str) -> bool {
        self.lock().kind(api_version, kind).is_ok()
    }

    /// The kind's description (for discovery and tables).
    pub(crate) fn kind_info(&self, api_version: &str, kind: &str) -> Option<KindInfo> {
        self.lock().kind(api_version, kind).ok().cloned()
    }

    /// Every served kind.
    pub(crate) fn kinds(&self) -> Vec<KindInfo> {
        self.lock().kinds.values().cloned().collect()
    }

    /// Creates the CustomResourceDefinitions of a multi-document YAML; their names.
    pub fn load_crds(&self, yaml: &str) -> Result<Vec<String>, ApiError> {
        let docs: Vec<Value> = serde_saphyr::from_multiple(yaml)
            .map_err(|e| ApiError::new(400, "BadRequest", format!("reading the CRD YAML: {e}")))?;
        let o = WriteOptions {
            field_manager: "bootstrap-lab".into(),
            ..Default::default()
        };
        let mut names = Vec::new();
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            let created = self.apply(doc, &o)?;
            names.push(
                created["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            );
        }
        Ok(names)
    }
}

fn event(
    user: &str,
    verb: &str,
    r: &ObjectRef,
    sub: Option<&str>,
    o: Option<&WriteOptions>,
) -> AuditEvent {
    AuditEvent {
        seq: 0,
        user: if user.is_empty() {
            rbac::IN_PROCESS.into()
        } else {
            user.into()
        },
        verb: verb.into(),
        api_version: r.api_version.clone(),
        kind: r.kind.clone(),
        namespace: r.namespace.clone(),
        name: (!r.name.is_empty()).then(|| r.name.clone()),
        subresource: sub.map(String::from),
        field_manager: o.map(|o| o.field_manager.clone()).filter(|m| !m.is_empty()),
        dry_run: o.is_some_and(|o| o.dry_run),
        code: 0,
    }
}

fn attributes<'a>(
    user: &'a str,
    verb: &'a str,
    info: &'a KindInfo,
    r: &'a ObjectRef,
    sub: Option<&'a str>,
) -> Attributes<'a> {
    Attributes {
        user: if user.is_empty() { rbac::ADMIN } else { user },
        verb,
        group: &info.group,
        resource: &info.plural,
        subresource: sub,
        namespace: r.namespace.as_deref().filter(|_| info.namespaced),
        name: (!r.name.is_empty() && verb != "create").then_some(r.name.as_str()),
    }
}

/// A create's `metadata.generateName` made a name when none is given, as the API server's
/// `names.SimpleNameGenerator` does: the prefix (cut to 58 characters) and five random
/// characters of its alphabet.
fn generate_name(mut obj: Value) -> Value {
    let prefix = obj["metadata"]["generateName"].as_str().unwrap_or_default();
    if prefix.is_empty()
        || !obj["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
    {
        return obj;
    }
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut b = [0u8; 5];
    let _ = aws_lc_rs::rand::fill(&mut b);
    let tail: String = b
        .iter()
        .map(|x| ALPHABET[*x as usize % ALPHABET.len()] as char)
        .collect();
    let cut: String = prefix.chars().take(58).collect();
    obj["metadata"]["name"] = json!(format!("{cut}{tail}"));
    obj
}

/// Reads.
impl Store {
    /// One object.
    pub fn get(&self, r: &ObjectRef) -> Result<Value, ApiError> {
        self.get_as(r, "", None)
    }

    /// One object, read by `user` (through `subresource`).
    pub fn get_as(&self, r: &ObjectRef, user: &str, sub: Option<&str>) -> Result<Value, ApiError> {
        let mut st = self.lock();
        let rev = st.revision;
        let result = (|| {
            let info = st.kind(&r.api_version, &r.kind)?;
            rbac::authorize(&*st, &attributes(user, "get", info, r, sub))?;
            st.objects
                .get(&State::key(info, r))
                .map(|o| as_version(o.clone(), &r.api_version))
                .ok_or_else(|| ApiError::not_found(&info.qualified_resource(), &r.name))
        })();
        let code = result.as_ref().map_or_else(|e: &ApiError| e.code, |_| 200);
        self.record(&mut st, event(user, "get", r, sub, None), code, rev);
        result
    }

    /// The objects of a kind, in a namespace or all, matching a label selector.
    pub fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<Value>, ApiError> {
        self.list_as(api_version, kind, namespace, label_selector, "")
    }

    /// As [`Store::list`], read by `user`.
    pub fn list_as(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        label_selector: Option<&str>,
        user: &str,
    ) -> Result<Vec<Value>, ApiError> {
        let r = ObjectRef {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(String::from),
            name: String::new(),
        };
        let mut st = self.lock();
        let rev = st.revision;
        let result = (|| {
            let info = st.kind(api_version, kind)?;
            rbac::authorize(&*st, &attributes(user, "list", info, &r, None))?;
            let mut out = Vec::new();
            for ((g, k, ns, _), obj) in &st.objects {
                if *g != info.group
                    || *k != info.kind
                    || (namespace.is_some() && ns.as_deref() != namespace)
                {
                    continue;
                }
                if patch::selector_matches(
                    label_selector.unwrap_or_default(),
                    &obj["metadata"]["labels"],
                )? {
                    out.push(as_version(obj.clone(), api_version));
                }
            }
            Ok(out)
        })();
        let code = result.as_ref().map_or_else(|e: &ApiError| e.code, |_| 200);
        self.record(&mut st, event(user, "list", &r, None, None), code, rev);
        result
    }
}

/// Writes.
impl Store {
    /// Creates an object (409 AlreadyExists if it exists).
    pub fn create(&self, obj: Value, o: &WriteOptions) -> Result<Value, ApiError> {
        self.write(Op::Create(obj), o, None).map(|w| w.object)
    }

    /// Server-side apply with `o.field_manager`; creates the object if absent.
    pub fn apply(&self, obj: Value, o: &WriteOptions) -> Result<Value, ApiError> {
        self.write(Op::Apply(obj), o, None).map(|w| w.object)
    }

    /// Server-side apply on the status subresource.
    pub fn apply_status(&self, obj: Value, o: &WriteOptions) -> Result<Value, ApiError> {
        self.write(Op::Apply(obj), o, Some("status"))
            .map(|w| w.object)
    }

    /// JSON merge patch of the object (or of its status).
    pub fn merge_patch(
        &self,
        r: &ObjectRef,
        patch: Value,
        o: &WriteOptions,
        subresource: Option<&str>,
    ) -> Result<Value, ApiError> {
        self.write(Op::MergePatch(r.clone(), patch), o, subresource)
            .map(|w| w.object)
    }

    /// PUT: replaces the object (or its status); a set resourceVersion must be the live one.
    pub fn replace(
        &self,
        obj: Value,
        o: &WriteOptions,
        subresource: Option<&str>,
    ) -> Result<Value, ApiError> {
        self.write(Op::Replace(obj), o, subresource)
            .map(|w| w.object)
    }

    /// Any write, with its code and warnings.
    pub(crate) fn write(
        &self,
        op: Op,
        o: &WriteOptions,
        sub: Option<&str>,
    ) -> Result<Outcome, ApiError> {
        let op = match op {
            Op::Create(obj) => Op::Create(generate_name(obj)),
            op => op,
        };
        let mut r = op.target();
        let (audit_verb, rbac_verb) = op.verbs();
        let mut st = self.lock();
        let rev = st.revision;
        let result = (|| {
            let info = st.kind(&r.api_version, &r.kind)?.clone();
            if !info.namespaced {
                r.namespace = None;
            } else if r.namespace.is_none() {
                r.namespace = Some("default".into());
            }
            let approval = sub == Some(super::csr::APPROVAL)
                && super::csr::is_csr(&info.group, &info.kind)
                && !matches!(op, Op::Create(_) | Op::Apply(_));
            if !approval && sub.is_some_and(|s| s != "status" || !info.status_subresource) {
                return Err(ApiError::not_found(&info.qualified_resource(), &r.name));
            }
            rbac::authorize(&*st, &attributes(&o.user, rbac_verb, &info, &r, sub))?;
            let w = Write {
                st: &mut st,
                info: &info,
                r: &r,
                o,
                sub,
            };
            w.run(op)
        })();
        let code = result.as_ref().map_or_else(|e| e.code, |w| w.code);
        self.record(
            &mut st,
            event(&o.user, audit_verb, &r, sub, Some(o)),
            code,
            rev,
        );
        result
    }

    /// Deletes an object; one with finalizers gets its deletionTimestamp and stays until
    /// they are emptied. A namespace takes its objects with it.
    pub fn delete(&self, r: &ObjectRef, o: &WriteOptions) -> Result<Value, ApiError> {
        let mut st = self.lock();
        let rev = st.revision;
        let mut r = r.clone();
        let result = (|| {
            let info = st.kind(&r.api_version, &r.kind)?.clone();
            if !info.namespaced {
                r.namespace = None;
            }
            rbac::authorize(&*st, &attributes(&o.user, "delete", &info, &r, None))?;
            let key = State::key(&info, &r);
            let live = st
                .objects
                .get(&key)
                .cloned()
                .ok_or_else(|| ApiError::not_found(&info.qualified_resource(), &r.name))?;
            if o.dry_run {
                return Ok(live);
            }
            Ok(as_version(
                delete_object(&mut st, &key, live),
                &r.api_version,
            ))
        })();
        let code = result.as_ref().map_or_else(|e: &ApiError| e.code, |_| 200);
        self.record(
            &mut st,
            event(&o.user, "delete", &r, None, Some(o)),
            code,
            rev,
        );
        result
    }
}
