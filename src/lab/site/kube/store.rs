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
            if sub.is_some_and(|s| s != "status" || !info.status_subresource) {
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

/// Deletes (or marks) one object, with what depends on it; the object as it was last seen.
fn delete_object(st: &mut State, key: &Key, mut live: Value) -> Value {
    let has_finalizers = live["metadata"]["finalizers"]
        .as_array()
        .is_some_and(|f| !f.is_empty());
    let is_namespace = key.0.is_empty() && key.1 == "Namespace";
    if has_finalizers || is_namespace {
        if live["metadata"]["deletionTimestamp"].is_null() {
            live["metadata"]["deletionTimestamp"] = json!(now());
            live["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if is_namespace {
                live["status"] = json!({"phase": "Terminating"});
            }
            live["metadata"]["resourceVersion"] = json!(st.bump().to_string());
            st.objects.insert(key.clone(), live.clone());
        }
        if is_namespace {
            let inside: Vec<(Key, Value)> = st
                .objects
                .iter()
                .filter(|(k, _)| k.2.as_deref() == Some(key.3.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            for (k, v) in inside {
                delete_object(st, &k, v);
            }
            reap_namespaces(st);
        }
        return live;
    }
    st.objects.remove(key);
    st.bump();
    if key.0 == "apiextensions.k8s.io" && key.1 == "CustomResourceDefinition" {
        unregister_crd(st, &live);
    }
    reap_namespaces(st);
    live
}

/// Removes terminating namespaces that have nothing left inside.
fn reap_namespaces(st: &mut State) {
    let empty: Vec<Key> = st
        .objects
        .iter()
        .filter(|(k, v)| {
            k.0.is_empty() && k.1 == "Namespace" && !v["metadata"]["deletionTimestamp"].is_null()
        })
        .filter(|(k, _)| {
            !st.objects
                .keys()
                .any(|o| o.2.as_deref() == Some(k.3.as_str()))
        })
        .map(|(k, _)| k.clone())
        .collect();
    for k in empty {
        st.objects.remove(&k);
        st.bump();
    }
}

fn unregister_crd(st: &mut State, crd: &Value) {
    let Ok(info) = kinds::from_crd(crd) else {
        return;
    };
    st.kinds.remove(&(info.group.clone(), info.kind.clone()));
    st.objects
        .retain(|k, _| !(k.0 == info.group && k.1 == info.kind));
}

/// One write in progress, under the store's lock.
struct Write<'a, 's> {
    st: &'a mut MutexGuard<'s, State>,
    info: &'a KindInfo,
    r: &'a ObjectRef,
    o: &'a WriteOptions,
    sub: Option<&'a str>,
}

/// The metadata fields a client sets; the rest the store keeps.
const CLIENT_META: &[&str] = &[
    "name",
    "namespace",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
];

impl Write<'_, '_> {
    fn run(self, op: Op) -> Result<Outcome, ApiError> {
        let key = State::key(self.info, self.r);
        let live = self.st.objects.get(&key).cloned();
        let mut warnings = Vec::new();
        let manager_name = if self.o.field_manager.is_empty() {
            "unknown"
        } else {
            self.o.field_manager.as_str()
        };
        let m = Manager {
            name: manager_name,
            subresource: self.sub,
            api_version: &self.r.api_version,
            status_subresource: self.info.status_subresource,
        };
        let shape = Shape::root(self.info.schema.as_ref());
        let now = now();
        let (mut new, created) = match (op, &live) {
            (Op::Create(_), Some(_)) => {
                return Err(ApiError::new(
                    409,
                    "AlreadyExists",
                    format!(
                        "{} \"{}\" already exists",
                        self.info.qualified_resource(),
                        self.r.name
                    ),
                ));
            }
            (Op::Create(obj), None) => {
                let mut new = self.client_fields(self.input(obj, &mut warnings, false)?);
                if self.info.status_subresource {
                    new.as_object_mut().map(|o| o.remove("status"));
                }
                managed::update(&Value::Null, &mut new, &m, shape, &now);
                (new, true)
            }
            (Op::Apply(_), _) if self.o.field_manager.is_empty() => {
                return Err(ApiError::new(400, "BadRequest", "PATCH, application/apply-patch+yaml requires a fieldManager: the fieldManager query parameter is required for apply requests".into()));
            }
            (Op::Apply(obj), _) => {
                let applied = self.applied(self.input(obj, &mut warnings, true)?);
                let base = live.clone().unwrap_or(Value::Null);
                if base.is_null() && self.sub.is_some() {
                    return Err(self.not_found());
                }
                (
                    managed::apply(&base, &applied, &m, self.o.force, shape, &now)?,
                    live.is_none(),
                )
            }
            (_, None) => return Err(self.not_found()),
            (Op::Replace(obj), Some(l)) => {
                let want = obj["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap_or_default();
                if !want.is_empty() && Some(want) != l["metadata"]["resourceVersion"].as_str() {
                    return Err(ApiError::new(409, "Conflict", format!("Operation cannot be fulfilled on {} \"{}\": the object has been modified; please apply your changes to the latest version and try again", self.info.qualified_resource(), self.r.name)));
                }
                let mut new = self.replaced(l, self.input(obj, &mut warnings, false)?);
                managed::update(l, &mut new, &m, shape, &now);
                (new, false)
            }
            (Op::MergePatch(_, p) | Op::JsonPatch(_, p), Some(l)) => {
                let mut patched = l.clone();
                if p.is_array() {
                    patch::json_patch(&mut patched, &p)?;
                } else {
                    patch::merge_patch(&mut patched, &p);
                }
                let mut new = self.replaced(l, self.input(patched, &mut warnings, false)?);
                managed::update(l, &mut new, &m, shape, &now);
                (new, false)
            }
        };
        self.system_fields(live.as_ref(), &mut new, &now);
        self.commit(key, live, new, created, warnings)
    }

    fn not_found(&self) -> ApiError {
        ApiError::not_found(&self.info.qualified_resource(), &self.r.name)
    }

    /// The request's object, checked against the kind: unknown fields refused (strict) or
    /// pruned with a warning each.
    fn input(
        &self,
        mut obj: Value,
        warnings: &mut Vec<String>,
        apply: bool,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::new(
                400,
                "BadRequest",
                "the body is not a JSON or YAML object".into(),
            ));
        }
        let kind = obj["kind"].as_str().unwrap_or_default();
        if !kind.is_empty() && kind != self.info.kind {
            return Err(ApiError::new(
                400,
                "BadRequest",
                format!(
                    "the body's kind {kind:?} does not match the resource's kind {:?}",
                    self.info.kind
                ),
            ));
        }
        let unknown = validate::take_unknown(self.info, &mut obj);
        if self.o.strict && !unknown.is_empty() {
            return Err(self.strict_error(&unknown, apply));
        }
        warnings.extend(unknown.iter().map(|p| format!("unknown field \"{p}\"")));
        obj["apiVersion"] = json!(self.r.api_version);
        obj["kind"] = json!(self.info.kind);
        Ok(obj)
    }

    /// 400 as the API server words strict field validation's refusal.
    fn strict_error(&self, unknown: &[String], apply: bool) -> ApiError {
        let (group, version) = split_api_version(&self.r.api_version);
        let message = if apply {
            let ns = self.r.namespace.as_deref().unwrap_or_default();
            let paths: Vec<String> = unknown
                .iter()
                .map(|p| format!(".{p}: field not declared in schema"))
                .collect();
            format!(
                "failed to create typed patch object ({ns}/{}; {group}/{version}, Kind={}): {}",
                self.r.name,
                self.info.kind,
                paths.join(", ")
            )
        } else {
            let each: Vec<String> = unknown
                .iter()
                .map(|p| format!("unknown field \"{p}\""))
                .collect();
            format!(
                "{} in version \"{version}\" cannot be handled as a {}: strict decoding error: {}",
                self.info.kind,
                self.info.kind,
                each.join(", ")
            )
        };
        ApiError::new(400, "BadRequest", message)
    }

    /// The object with only the metadata a client sets.
    fn client_fields(&self, mut obj: Value) -> Value {
        if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.retain(|k, _| CLIENT_META.contains(&k.as_str()));
        }
        obj["metadata"]["name"] = json!(self.r.name);
        if let Some(ns) = &self.r.namespace {
            obj["metadata"]["namespace"] = json!(ns);
        }
        obj
    }

    /// An applied configuration cut to what this subresource writes.
    fn applied(&self, obj: Value) -> Value {
        let mut obj = self.client_fields(obj);
        if self.sub == Some("status") {
            let meta =
                json!({"name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"]});
            let mut cut = json!({"apiVersion": obj["apiVersion"], "kind": obj["kind"], "metadata": meta, "status": obj["status"]});
            if let Some(m) = cut["metadata"].as_object_mut() {
                m.retain(|_, v| !v.is_null());
            }
            return cut;
        }
        if self.info.status_subresource {
            obj.as_object_mut().map(|o| o.remove("status"));
        }
        obj
    }

    /// A full new object (PUT, patch result) over the live one: status from the live object
    /// for main writes of kinds with the subresource, only status for status writes.
    fn replaced(&self, live: &Value, obj: Value) -> Value {
        if self.sub == Some("status") {
            let mut new = live.clone();
            new["status"] = obj["status"].clone();
            return new;
        }
        let mut new = self.client_fields(obj);
        if self.info.status_subresource {
            match live.get("status") {
                Some(s) => new["status"] = s.clone(),
                None => {
                    new.as_object_mut().map(|o| o.remove("status"));
                }
            }
        }
        new["metadata"]["managedFields"] = live["metadata"]["managedFields"].clone();
        new
    }
}

/// What generation counts: everything but metadata and status.
fn spec_of(obj: &Value) -> Value {
    let mut v = obj.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("metadata");
        o.remove("status");
    }
    v
}

impl Write<'_, '_> {
    /// uid, creationTimestamp, generation, resourceVersion (the live one until committed),
    /// deletionTimestamp; and what the API server fills in for some kinds.
    fn system_fields(&self, live: Option<&Value>, new: &mut Value, now: &str) {
        let lm = live.map(|l| &l["metadata"]);
        let keep = |f: &str, fresh: Value| {
            lm.map(|m| m[f].clone())
                .filter(|v| !v.is_null())
                .unwrap_or(fresh)
        };
        let generation = match lm {
            Some(m) if spec_of(live.unwrap_or(&Value::Null)) != spec_of(new) => {
                m["generation"].as_i64().unwrap_or(0) + 1
            }
            Some(m) => m["generation"].as_i64().unwrap_or(1),
            None => 1,
        };
        let meta = &mut new["metadata"];
        meta["uid"] = keep("uid", json!(super::super::simulator::uuid()));
        meta["creationTimestamp"] = keep("creationTimestamp", json!(now));
        meta["generation"] = json!(generation);
        for f in [
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
        ] {
            match lm.map(|m| m[f].clone()).filter(|v| !v.is_null()) {
                Some(v) => meta[f] = v,
                None => {
                    meta.as_object_mut().map(|m| m.remove(f));
                }
            }
        }
        self.kind_defaults(new);
    }

    fn kind_defaults(&self, new: &mut Value) {
        match (self.info.group.as_str(), self.info.kind.as_str()) {
            ("", "Secret") => {
                if let Some(Value::Object(sd)) =
                    new.as_object_mut().and_then(|o| o.remove("stringData"))
                {
                    use base64::Engine as _;
                    for (k, v) in sd {
                        let b = base64::engine::general_purpose::STANDARD
                            .encode(v.as_str().unwrap_or_default());
                        new["data"][k] = json!(b);
                    }
                }
                if new["type"].is_null() {
                    new["type"] = json!("Opaque");
                }
            }
            ("", "Namespace") if new["status"].is_null() => {
                new["spec"]["finalizers"] = json!(["kubernetes"]);
                new["status"] = json!({"phase": "Active"});
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => crd_status(new),
            _ => {}
        }
    }

    fn commit(
        self,
        key: Key,
        live: Option<Value>,
        mut new: Value,
        created: bool,
        warnings: Vec<String>,
    ) -> Result<Outcome, ApiError> {
        let code = if created { 201 } else { 200 };
        if self.r.name.is_empty() {
            return Err(ApiError::invalid(
                &self.info.kind,
                "",
                &[(
                    "metadata.name".into(),
                    "Required value: name or generateName is required".into(),
                )],
            ));
        }
        if created {
            self.namespace_open()?;
        }
        self.check(&new)?;
        if live.as_ref() == Some(&new) {
            return Ok(Outcome {
                object: as_version(new, &self.r.api_version),
                code,
                warnings,
            });
        }
        if self.o.dry_run {
            return Ok(Outcome {
                object: new,
                code,
                warnings,
            });
        }
        new["metadata"]["resourceVersion"] = json!(self.st.bump().to_string());
        let finished = !new["metadata"]["deletionTimestamp"].is_null()
            && new["metadata"]["finalizers"]
                .as_array()
                .is_none_or(|f| f.is_empty());
        if self.info.group == "apiextensions.k8s.io" && self.info.kind == "CustomResourceDefinition"
        {
            let kind = kinds::from_crd(&new)?;
            self.st
                .kinds
                .insert((kind.group.clone(), kind.kind.clone()), kind);
        }
        self.st.objects.insert(key.clone(), new.clone());
        if finished {
            delete_object(self.st, &key, new.clone());
        }
        Ok(Outcome {
            object: new,
            code,
            warnings,
        })
    }

    /// A new object's namespace exists and is not terminating.
    fn namespace_open(&self) -> Result<(), ApiError> {
        let Some(ns) = self.r.namespace.as_deref() else {
            return Ok(());
        };
        let key = (String::new(), "Namespace".to_string(), None, ns.to_string());
        match self.st.objects.get(&key) {
            None => Err(ApiError::not_found("namespaces", ns)),
            Some(n) if !n["metadata"]["deletionTimestamp"].is_null() => Err(ApiError::new(403, "Forbidden", format!(
                "{} \"{}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                self.info.qualified_resource(), self.r.name
            ))),
            Some(_) => Ok(()),
        }
    }

    /// The schema's rules (422 Invalid with every violation).
    fn check(&self, new: &Value) -> Result<(), ApiError> {
        let found = validate::violations(self.info, new);
        if found.is_empty() {
            return Ok(());
        }
        let kind = if self.info.group.is_empty() {
            self.info.kind.clone()
        } else {
            format!("{}.{}", self.info.kind, self.info.group)
        };
        let list: Vec<(String, String)> = found.into_iter().map(|v| (v.path, v.message)).collect();
        Err(ApiError::invalid(&kind, &self.r.name, &list))
    }
}

/// A CRD's status as the API server sets it once the names are accepted.
fn crd_status(crd: &mut Value) {
    let now = now();
    let cond = |t: &str, reason: &str, msg: &str| json!({"type": t, "status": "True", "reason": reason, "message": msg, "lastTransitionTime": now});
    let storage: Vec<Value> = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["storage"].as_bool() == Some(true))
        .map(|v| v["name"].clone())
        .collect();
    let same = crd["status"]["acceptedNames"] == crd["spec"]["names"];
    if same {
        return;
    }
    crd["status"] = json!({
        "acceptedNames": crd["spec"]["names"],
        "conditions": [cond("NamesAccepted", "NoConflicts", "no conflicts found"),
            cond("Established", "InitialNamesAccepted", "the initial names have been accepted")],
        "storedVersions": storage,
    });
}
