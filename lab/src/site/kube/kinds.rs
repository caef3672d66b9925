//! The kinds the stand-in serves: the built-in ones (a fixed table) and those registered by
//! CustomResourceDefinitions (read from the CRD object: names, scope, served versions, the
//! storage version's schema, the status subresource, printer columns).

use super::store::ApiError;
use serde_json::Value;

/// A served kind.
#[derive(Clone, Debug)]
pub struct KindInfo {
    /// The API group ("" for core).
    pub group: String,
    /// The served versions, the preferred (storage) one first.
    pub versions: Vec<String>,
    /// The kind.
    pub kind: String,
    /// The resource (plural) name.
    pub plural: String,
    /// The singular name.
    pub singular: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// `kubectl get` short names.
    pub short_names: Vec<String>,
    /// Categories (`all` ...).
    pub categories: Vec<String>,
    /// The kind has the status subresource: main writes ignore `status`, status writes only it.
    pub status_subresource: bool,
    /// The storage version's openAPIV3Schema (CRD kinds).
    pub schema: Option<Value>,
    /// The storage version's additionalPrinterColumns (CRD kinds).
    pub printer_columns: Vec<Value>,
    /// The top-level fields a built-in kind has besides apiVersion/kind/metadata (None: any).
    pub top_fields: Option<&'static [&'static str]>,
    /// The CRD that registered the kind.
    pub crd: Option<String>,
    /// The CRD's schema checks.
    pub checker: Option<std::sync::Arc<bootstrap::gitops::crd::Crd>>,
}

impl KindInfo {
    /// `group/version`, or `version` for the core group.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The preferred version's apiVersion.
    pub fn preferred_api_version(&self) -> String {
        self.api_version(&self.versions[0])
    }

    /// `plural` or `plural.group`, as the API server names the resource in messages.
    pub fn qualified_resource(&self) -> String {
        if self.group.is_empty() {
            self.plural.clone()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }
}

/// (group, version) of an apiVersion.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.rsplit_once('/').unwrap_or(("", api_version))
}

const CONFIGMAP: &[&str] = &["data", "binaryData", "immutable"];
const SECRET: &[&str] = &["data", "stringData", "type", "immutable"];
const SPEC_STATUS: &[&str] = &["spec", "status"];
const SERVICE_ACCOUNT: &[&str] = &[
    "secrets",
    "imagePullSecrets",
    "automountServiceAccountToken",
];
const ROLE: &[&str] = &["rules", "aggregationRule"];
const BINDING: &[&str] = &["subjects", "roleRef"];
const PRIORITY_CLASS: &[&str] = &["value", "globalDefault", "description", "preemptionPolicy"];

/// (group, version, kind, plural, namespaced, short names, status subresource, top fields)
type Builtin = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    &'static [&'static str],
    bool,
    &'static [&'static str],
);

const BUILTINS: &[Builtin] = &[
    (
        "",
        "v1",
        "Namespace",
        "namespaces",
        false,
        &["ns"],
        true,
        SPEC_STATUS,
    ),
    (
        "",
        "v1",
        "ConfigMap",
        "configmaps",
        true,
        &["cm"],
        false,
        CONFIGMAP,
    ),
    ("", "v1", "Secret", "secrets", true, &[], false, SECRET),
    (
        "",
        "v1",
        "ServiceAccount",
        "serviceaccounts",
        true,
        &["sa"],
        false,
        SERVICE_ACCOUNT,
    ),
    (
        "",
        "v1",
        "Service",
        "services",
        true,
        &["svc"],
        true,
        SPEC_STATUS,
    ),
    (
        "",
        "v1",
        "ResourceQuota",
        "resourcequotas",
        true,
        &["quota"],
        true,
        SPEC_STATUS,
    ),
    (
        "",
        "v1",
        "LimitRange",
        "limitranges",
        true,
        &["limits"],
        false,
        SPEC_STATUS,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
        &[],
        false,
        ROLE,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        &[],
        false,
        BINDING,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "Role",
        "roles",
        true,
        &[],
        false,
        ROLE,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
        &[],
        false,
        BINDING,
    ),
    (
        "networking.k8s.io",
        "v1",
        "NetworkPolicy",
        "networkpolicies",
        true,
        &["netpol"],
        false,
        SPEC_STATUS,
    ),
    (
        "scheduling.k8s.io",
        "v1",
        "PriorityClass",
        "priorityclasses",
        false,
        &["pc"],
        false,
        PRIORITY_CLASS,
    ),
    (
        "apps",
        "v1",
        "Deployment",
        "deployments",
        true,
        &["deploy"],
        true,
        SPEC_STATUS,
    ),
    ("", "v1", "Node", "nodes", false, &["no"], true, SPEC_STATUS),
    ("", "v1", "Pod", "pods", true, &["po"], true, SPEC_STATUS),
    (
        "certificates.k8s.io",
        "v1",
        "CertificateSigningRequest",
        "certificatesigningrequests",
        false,
        &["csr"],
        true,
        SPEC_STATUS,
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        &["crd", "crds"],
        true,
        SPEC_STATUS,
    ),
];

/// The built-in kinds.
pub fn builtins() -> Vec<KindInfo> {
    BUILTINS
        .iter()
        .map(
            |&(group, version, kind, plural, namespaced, short, status, top)| KindInfo {
                group: group.into(),
                versions: vec![version.into()],
                kind: kind.into(),
                plural: plural.into(),
                singular: kind.to_lowercase(),
                namespaced,
                short_names: short.iter().map(|s| (*s).to_string()).collect(),
                categories: if namespaced && group != "rbac.authorization.k8s.io" {
                    vec!["all".into()]
                } else {
                    Vec::new()
                },
                status_subresource: status,
                schema: None,
                printer_columns: Vec::new(),
                top_fields: Some(top),
                crd: None,
                checker: None,
            },
        )
        .collect()
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn invalid(name: &str, msg: &str) -> ApiError {
    ApiError::invalid(
        "CustomResourceDefinition.apiextensions.k8s.io",
        name,
        &[(String::from("spec"), msg.to_string())],
    )
}

/// The kind a CustomResourceDefinition object registers.
pub fn from_crd(crd: &Value) -> Result<KindInfo, ApiError> {
    let name = crd["metadata"]["name"].as_str().unwrap_or_default();
    let spec = &crd["spec"];
    let names = &spec["names"];
    let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let (group, kind, plural) = (s(&spec["group"]), s(&names["kind"]), s(&names["plural"]));
    if group.is_empty() || kind.is_empty() || plural.is_empty() {
        return Err(invalid(
            name,
            "spec.group, spec.names.kind and spec.names.plural are required",
        ));
    }
    if name != format!("{plural}.{group}") {
        return Err(invalid(name, &format!("metadata.name: Invalid value: \"{name}\": must be spec.names.plural+\".\"+spec.group")));
    }
    let versions = spec["versions"].as_array().cloned().unwrap_or_default();
    let storage = versions
        .iter()
        .find(|v| v["storage"].as_bool() == Some(true))
        .ok_or_else(|| invalid(name, "spec.versions: Invalid value: must have exactly one version marked as storage version"))?;
    let mut served: Vec<String> = versions
        .iter()
        .filter(|v| v["served"].as_bool() == Some(true))
        .map(|v| s(&v["name"]))
        .collect();
    served.sort_by_key(|v| *v != s(&storage["name"]));
    Ok(KindInfo {
        group,
        versions: served,
        singular: names["singular"]
            .as_str()
            .map_or_else(|| kind.to_lowercase(), String::from),
        kind,
        plural,
        namespaced: spec["scope"].as_str() == Some("Namespaced"),
        short_names: strings(&names["shortNames"]),
        categories: strings(&names["categories"]),
        status_subresource: storage["subresources"].get("status").is_some(),
        schema: storage["schema"].get("openAPIV3Schema").cloned(),
        printer_columns: storage["additionalPrinterColumns"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
        top_fields: None,
        crd: Some(name.to_string()),
        checker: Some(std::sync::Arc::new(
            bootstrap::gitops::crd::Crd::from_value(crd).map_err(|e| invalid(name, &e))?,
        )),
    })
}
