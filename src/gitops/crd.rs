//! A CustomResourceDefinition (`apiextensions.k8s.io/v1`) as the checks and the lab's API
//! stand-in need it: its names, scope, versions with their compiled schemas, and the
//! validation of one object against it (header, `metadata` as ObjectMeta, the version's
//! `openAPIV3Schema`). The Argo CD CRDs OpenShift GitOps installs ship inside the binary
//! (`crds/`), so the repository check needs no cluster.

use super::builtin::{validate_metadata, NameRule};
use super::schema::{Schema, Violation};
use serde_json::Value;
use std::sync::OnceLock;

/// A CustomResourceDefinition.
#[derive(Clone, Debug)]
pub struct Crd {
    /// `metadata.name`: `PLURAL.GROUP`.
    pub name: String,
    /// `spec.group`.
    pub group: String,
    /// `spec.names.kind`.
    pub kind: String,
    /// `spec.names.listKind` (`KIND` + `List` when left out).
    pub list_kind: String,
    /// `spec.names.plural`.
    pub plural: String,
    /// `spec.names.singular` (the kind in lower case when left out).
    pub singular: String,
    /// `spec.names.shortNames`.
    pub short_names: Vec<String>,
    /// `spec.names.categories`.
    pub categories: Vec<String>,
    /// `spec.scope` is `Namespaced`.
    pub namespaced: bool,
    /// `spec.versions`, in the file's order.
    pub versions: Vec<CrdVersion>,
}

/// One of a CRD's versions.
#[derive(Clone, Debug)]
pub struct CrdVersion {
    /// `v1alpha1`.
    pub name: String,
    /// Served by the API.
    pub served: bool,
    /// The version objects are stored in (exactly one per CRD).
    pub storage: bool,
    /// The compiled `schema.openAPIV3Schema`, when there is one.
    pub schema: Option<Schema>,
    /// `subresources.status` is set.
    pub status_subresource: bool,
    /// `additionalPrinterColumns`.
    pub printer_columns: Vec<PrinterColumn>,
}

/// A column `kubectl get` prints for the version.
#[derive(Clone, Debug)]
pub struct PrinterColumn {
    /// Header.
    pub name: String,
    /// `type`: string, integer, number, boolean, date.
    pub type_: String,
    /// `jsonPath`: `.status.sync.status`.
    pub json_path: String,
    /// `description`.
    pub description: Option<String>,
    /// 0 for the default view, more for `-o wide`.
    pub priority: i32,
    /// `format`.
    pub format: Option<String>,
}

impl Crd {
    /// Reads a CRD object; the error names the field that is missing or wrong.
    pub fn from_value(crd: &Value) -> Result<Crd, String> {
        let kind = crd.get("kind").and_then(Value::as_str);
        if kind != Some("CustomResourceDefinition") {
            return Err(format!(
                "kind: expected CustomResourceDefinition, found {}",
                kind.unwrap_or("nothing")
            ));
        }
        let spec = crd.get("spec").ok_or("spec: Required value")?;
        let names = spec.get("names").ok_or("spec.names: Required value")?;
        let kind = text(names, "kind", "spec.names")?;
        let versions = spec
            .get("versions")
            .and_then(Value::as_array)
            .ok_or("spec.versions: Required value")?
            .iter()
            .enumerate()
            .map(|(i, v)| CrdVersion::from_value(v, &format!("spec.versions[{i}]")))
            .collect::<Result<Vec<_>, _>>()?;
        if versions.iter().filter(|v| v.storage).count() != 1 {
            return Err("spec.versions: exactly one version must be the storage version".into());
        }
        Ok(Crd {
            name: text(
                crd.get("metadata").unwrap_or(&Value::Null),
                "name",
                "metadata",
            )?,
            group: text(spec, "group", "spec")?,
            list_kind: opt_text(names, "listKind").unwrap_or_else(|| format!("{kind}List")),
            plural: text(names, "plural", "spec.names")?,
            singular: opt_text(names, "singular").unwrap_or_else(|| kind.to_lowercase()),
            short_names: texts(names, "shortNames"),
            categories: texts(names, "categories"),
            namespaced: opt_text(spec, "scope").as_deref() != Some("Cluster"),
            kind,
            versions,
        })
    }

    /// Every CRD in a multi-document YAML text (empty documents skipped).
    pub fn parse_yaml(text: &str) -> Result<Vec<Crd>, String> {
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|e| format!("reading the CRDs: {e}"))?;
        docs.iter()
            .filter(|d| !d.is_null())
            .enumerate()
            .map(|(i, d)| Crd::from_value(d).map_err(|e| format!("document {}: {e}", i + 1)))
            .collect()
    }

    /// The version called `name`.
    pub fn version(&self, name: &str) -> Option<&CrdVersion> {
        self.versions.iter().find(|v| v.name == name)
    }

    /// The storage version (`from_value` checked there is exactly one).
    pub fn storage_version(&self) -> &CrdVersion {
        self.versions
            .iter()
            .find(|v| v.storage)
            .expect("from_value checked one storage version")
    }

    /// Every violation of `obj`: `apiVersion` a served version of the group, `kind` the CRD's,
    /// `metadata` as ObjectMeta, the rest against the version's schema.
    pub fn validate(&self, obj: &Value) -> Vec<Violation> {
        let mut out = Vec::new();
        let Some(map) = obj.as_object() else {
            out.push(Violation::new(
                "",
                "Invalid value: the object must be a mapping",
            ));
            return out;
        };
        let version = self.check_header(obj, &mut out);
        match map.get("metadata") {
            Some(meta) => out.extend(validate_metadata(meta, NameRule::Subdomain)),
            None => out.push(Violation::new(
                "metadata.name",
                "Required value: name or generateName is required",
            )),
        }
        if let Some(schema) = version.and_then(|v| v.schema.as_ref()) {
            // metadata is ObjectMeta, checked above; the schema only says `type: object`
            // (and may require it), so it sees an empty one.
            let mut rest = map.clone();
            if let Some(meta) = rest.get_mut("metadata") {
                *meta = Value::Object(serde_json::Map::new());
            }
            out.extend(schema.validate(&Value::Object(rest)));
        }
        out
    }

    /// The version `apiVersion` names, after reporting a wrong group, version or kind.
    fn check_header(&self, obj: &Value, out: &mut Vec<Violation>) -> Option<&CrdVersion> {
        let kind = obj.get("kind").and_then(Value::as_str);
        if kind != Some(self.kind.as_str()) {
            out.push(Violation::new(
                "kind",
                format!("Invalid value: {}: must be {}", shown(kind), self.kind),
            ));
        }
        let api_version = obj.get("apiVersion").and_then(Value::as_str);
        let version = api_version
            .and_then(|a| a.strip_prefix(&format!("{}/", self.group)))
            .and_then(|v| self.version(v).filter(|v| v.served));
        if version.is_none() {
            let served: Vec<String> = self
                .versions
                .iter()
                .filter(|v| v.served)
                .map(|v| format!("{}/{}", self.group, v.name))
                .collect();
            out.push(Violation::new(
                "apiVersion",
                format!(
                    "Invalid value: {}: {} is served as {}",
                    shown(api_version),
                    self.kind,
                    served.join(", ")
                ),
            ));
        }
        version
    }
}

impl CrdVersion {
    fn from_value(v: &Value, at: &str) -> Result<CrdVersion, String> {
        let schema = match v.pointer("/schema/openAPIV3Schema") {
            Some(s) => Some(Schema::new(s).map_err(|e| format!("{at}.schema.{e}"))?),
            None => None,
        };
        let columns = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| cols.iter().map(PrinterColumn::from_value).collect())
            .unwrap_or_default();
        Ok(CrdVersion {
            name: text(v, "name", at)?,
            served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
            storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
            schema,
            status_subresource: v.pointer("/subresources/status").is_some(),
            printer_columns: columns,
        })
    }
}

impl PrinterColumn {
    fn from_value(v: &Value) -> PrinterColumn {
        PrinterColumn {
            name: opt_text(v, "name").unwrap_or_default(),
            type_: opt_text(v, "type").unwrap_or_default(),
            json_path: opt_text(v, "jsonPath").unwrap_or_default(),
            description: opt_text(v, "description"),
            priority: v
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
            format: opt_text(v, "format"),
        }
    }
}

/// Argo CD's Application CRD as OpenShift GitOps installs it (`crds/application-crd.yaml`),
/// whole: what `gitops check` validates against, and what the lab's OLM installs.
pub const APPLICATION_CRD_YAML: &str = include_str!("crds/application-crd.yaml");

/// Argo CD's AppProject CRD as OpenShift GitOps installs it (`crds/appproject-crd.yaml`).
pub const APPPROJECT_CRD_YAML: &str = include_str!("crds/appproject-crd.yaml");

/// The Argo CD CRDs OpenShift GitOps installs (Application, AppProject), parsed once.
pub fn argocd_crds() -> Vec<Crd> {
    static CRDS: OnceLock<Vec<Crd>> = OnceLock::new();
    CRDS.get_or_init(|| {
        [APPLICATION_CRD_YAML, APPPROJECT_CRD_YAML]
            .iter()
            .flat_map(|text| Crd::parse_yaml(text).expect("the bundled Argo CD CRDs parse"))
            .collect()
    })
    .clone()
}

fn opt_text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn text(v: &Value, key: &str, at: &str) -> Result<String, String> {
    opt_text(v, key).ok_or_else(|| format!("{at}.{key}: Required value"))
}

fn texts(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn shown(s: Option<&str>) -> String {
    match s {
        Some(s) => Value::String(s.to_string()).to_string(),
        None => "null".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn application() -> Crd {
        argocd_crds()
            .into_iter()
            .find(|c| c.kind == "Application")
            .unwrap()
    }

    fn good_app() -> Value {
        json!({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": "root", "namespace": "openshift-gitops",
                         "annotations": {"argocd.argoproj.io/sync-wave": "-1"},
                         "finalizers": ["resources-finalizer.argocd.argoproj.io"]},
            "spec": {
                "project": "default",
                "destination": {"server": "https://kubernetes.default.svc", "namespace": "openshift-gitops"},
                "source": {"repoURL": "https://git.example.com/site.git", "path": "apps", "targetRevision": "main"},
                "syncPolicy": {"automated": {"prune": true, "selfHeal": true}, "syncOptions": ["CreateNamespace=true"]}
            }
        })
    }

    fn violations(obj: &Value) -> Vec<String> {
        application()
            .validate(obj)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn the_bundled_crds_read_with_their_names_and_versions() {
        let crds = argocd_crds();
        let kinds: Vec<&str> = crds.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(kinds, ["Application", "AppProject"]);
        let app = &crds[0];
        assert_eq!(app.name, "applications.argoproj.io");
        assert_eq!(app.short_names, ["app", "apps"]);
        assert!(app.namespaced);
        assert_eq!(app.storage_version().name, "v1alpha1");
        assert_eq!(
            app.storage_version().printer_columns[0].json_path,
            ".status.sync.status"
        );
    }

    #[test]
    fn a_good_application_passes() {
        assert_eq!(violations(&good_app()), Vec::<String>::new());
    }

    #[test]
    fn a_misspelled_field_is_named_by_path() {
        let mut app = good_app();
        let dest = app["spec"]
            .as_object_mut()
            .unwrap()
            .remove("destination")
            .unwrap();
        app["spec"]["destinaton"] = dest;
        assert_eq!(
            violations(&app),
            [
                "spec.destinaton: field not declared in schema",
                "spec.destination: Required value"
            ]
        );
    }

    #[test]
    fn wrong_types_are_named_by_path() {
        let mut app = good_app();
        app["spec"]["destination"]["server"] = json!(443);
        app["spec"]["syncPolicy"]["automated"]["prune"] = json!("yes");
        app["spec"]["source"]["targetRevision"] = json!(3);
        assert_eq!(
            violations(&app),
            [
                "spec.destination.server: Invalid value: \"integer\": spec.destination.server in body must be of type string: \"integer\"",
                "spec.source.targetRevision: Invalid value: \"integer\": spec.source.targetRevision in body must be of type string: \"integer\"",
                "spec.syncPolicy.automated.prune: Invalid value: \"string\": spec.syncPolicy.automated.prune in body must be of type boolean: \"string\"",
            ]
        );
    }

    #[test]
    fn a_missing_destination_and_an_unknown_top_level_field_are_named() {
        let mut app = good_app();
        app["spec"].as_object_mut().unwrap().remove("destination");
        app["extra"] = json!({});
        assert_eq!(
            violations(&app),
            [
                "extra: field not declared in schema",
                "spec.destination: Required value"
            ]
        );
    }

    #[test]
    fn header_and_metadata_are_checked() {
        let mut app = good_app();
        app["apiVersion"] = json!("argoproj.io/v1");
        app["metadata"]["name"] = json!("Root_App");
        app["metadata"]["labelz"] = json!({});
        let v = violations(&app);
        assert_eq!(v[0], "apiVersion: Invalid value: \"argoproj.io/v1\": Application is served as argoproj.io/v1alpha1");
        assert!(
            v.iter().any(|m| m.starts_with(
                "metadata.name: Invalid value: \"Root_App\": a lowercase RFC 1123 subdomain"
            )),
            "{v:?}"
        );
        assert!(
            v.contains(&"metadata.labelz: field not declared in schema".to_string()),
            "{v:?}"
        );
    }
}
