//! The store's write path, under its lock: one [`Write`] takes an operation (create, apply,
//! replace, patch) through the kind's schema, strict field validation, server-side apply's
//! field ownership, the system fields (uid, resourceVersion, generation, timestamps) and the
//! commit; and deletion, with finalizers, namespaces and CRDs taking what depends on them.
//! Apart from `mod.rs` (the store's types and reads) because it is the one part that changes
//! when the API server's write semantics are imitated more closely.

use super::*;

/// Deletes (or marks) one object, with what depends on it; the object as it was last seen.
pub(super) fn delete_object(st: &mut State, key: &Key, mut live: Value) -> Value {
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
pub(super) struct Write<'a, 's> {
    pub(super) st: &'a mut MutexGuard<'s, State>,
    pub(super) info: &'a KindInfo,
    pub(super) r: &'a ObjectRef,
    pub(super) o: &'a WriteOptions,
    pub(super) sub: Option<&'a str>,
}

/// The metadata fields a client sets; the rest the store keeps.
const CLIENT_META: &[&str] = &[
    "name",
    "generateName",
    "namespace",
    "labels",
    "annotations",
    "finalizers",
    "ownerReferences",
];

impl Write<'_, '_> {
    pub(super) fn run(self, op: Op) -> Result<Outcome, ApiError> {
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
        self.kind_rules(live.as_ref(), &new)?;
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
        if self.sub == Some(super::super::csr::APPROVAL) {
            return super::super::csr::approval(live, &obj, &now());
        }
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
        meta["uid"] = keep("uid", json!(crate::site::simulator::uuid()));
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

    /// A kind's own update rules beyond its schema (the CSR's approval, `super::super::csr`).
    fn kind_rules(&self, live: Option<&Value>, new: &Value) -> Result<(), ApiError> {
        let csr = super::super::csr::is_csr(&self.info.group, &self.info.kind);
        let Some(live) = live.filter(|_| csr) else {
            return Ok(());
        };
        let found = super::super::csr::violations(live, new, self.sub);
        if found.is_empty() {
            return Ok(());
        }
        let kind = format!("{}.{}", self.info.kind, self.info.group);
        Err(ApiError::invalid(&kind, &self.r.name, &found))
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
