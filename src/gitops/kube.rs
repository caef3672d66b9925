//! The cluster as the hand-off writes to it: kube-rs with the installer's kubeconfig. Every
//! write is a server-side apply with field manager `bootstrap`, `fieldValidation=Strict` and
//! `force` (bootstrap owns what it applies), and may be a server-side dry run; every kind is
//! found once by pinned discovery of its group version (`/apis/GROUP/VERSION`), so a kind the
//! cluster does not serve yet (an operator's CRD) is named as such.
//!
//! API errors keep the server's own message (the field it refused, the conflict, the missing
//! permission) with the object they concern; they pass through a [`Redactor`] first, since a
//! server may quote what it refused.

use crate::openshift::api::{describe_error, ApiTrust, Retry};
use crate::secret::Secret;
use anyhow::{anyhow, Context, Result};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::discovery::{ApiCapabilities, Scope};
use serde_json::Value;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Mutex;

/// The field manager of everything the hand-off applies.
pub const FIELD_MANAGER: &str = "bootstrap";

/// What an object is, for messages and records: `Kind namespace/name` or `Kind name`.
pub fn describe(obj: &Value) -> String {
    let kind = obj["kind"].as_str().unwrap_or("object");
    let name = obj["metadata"]["name"].as_str().unwrap_or("?");
    match obj["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Replaces every secret (and its base64 form, as a Secret's `data` carries it) in a text.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// Redacts `secrets` (empty values are ignored).
    pub fn new(secrets: &[&Secret]) -> Self {
        use base64::Engine as _;
        let mut all = Vec::new();
        for s in secrets {
            let raw = s.expose();
            if raw.len() < 4 {
                continue;
            }
            all.push(raw.to_string());
            all.push(base64::engine::general_purpose::STANDARD.encode(raw.as_bytes()));
        }
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor { secrets: all }
    }

    /// `text` with every secret replaced by `<redacted>`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            out = out.replace(s.as_str(), "<redacted>");
        }
        out
    }
}

/// The cluster's API, with the kinds it has been asked about.
pub struct Cluster {
    client: kube::Client,
    kinds: Mutex<HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>>,
    redactor: Redactor,
    trust: ApiTrust,
}

/// A kind the cluster does not serve (yet): its group version is unknown to the API, or the
/// group version does not list it. Any other failure to ask is an error of its own.
#[derive(Debug, thiserror::Error)]
#[error("the cluster does not serve {kind} ({api_version}): {answer} (is the operator that owns it installed?)")]
pub struct NotServed {
    kind: String,
    api_version: String,
    answer: String,
}

/// An object as the cluster returned it after an apply.
#[derive(Clone, Debug)]
pub struct Applied {
    /// The object, as stored (or as it would be, for a dry run).
    pub object: Value,
}

impl Applied {
    /// `metadata.uid`.
    pub fn uid(&self) -> &str {
        self.object["metadata"]["uid"].as_str().unwrap_or_default()
    }

    /// `metadata.resourceVersion`.
    pub fn resource_version(&self) -> &str {
        self.object["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
    }
}

fn gvk_of(api_version: &str, kind: &str) -> GroupVersionKind {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    GroupVersionKind::gvk(group, version, kind)
}

impl Cluster {
    /// The API of the kubeconfig at `path` (`address` dialled instead of its server, when
    /// given; `insecure` the hosts named by `--insecure-api`), transient answers retried
    /// ([`Retry::API`]); errors pass through `redactor`.
    pub async fn connect(
        kubeconfig: &Path,
        address: Option<SocketAddr>,
        insecure: &[String],
        redactor: Redactor,
    ) -> Result<Self> {
        let c = crate::openshift::api::connect(kubeconfig, address, insecure, Retry::API).await?;
        Ok(Cluster {
            client: c.client,
            kinds: Mutex::default(),
            redactor,
            trust: c.trust,
        })
    }

    /// How the connection to the API is trusted.
    pub fn trust(&self) -> &ApiTrust {
        &self.trust
    }

    /// The API resource of `apiVersion`/`kind`: asked of the cluster once, then remembered.
    async fn resource(
        &self,
        api_version: &str,
        kind: &str,
    ) -> Result<(ApiResource, ApiCapabilities)> {
        let gvk = gvk_of(api_version, kind);
        if let Some(found) = self.kinds.lock().expect("kinds").get(&gvk) {
            return Ok(found.clone());
        }
        let found = kube::discovery::pinned_kind(&self.client, &gvk)
            .await
            .map_err(|e| {
                let answer = self.redactor.redact(&describe_error(&e));
                match &e {
                    kube::Error::Api(s) if s.code == 404 => NotServed {
                        kind: kind.to_string(),
                        api_version: api_version.to_string(),
                        answer,
                    }
                    .into(),
                    kube::Error::Discovery(_) => NotServed {
                        kind: kind.to_string(),
                        api_version: api_version.to_string(),
                        answer,
                    }
                    .into(),
                    _ => anyhow!("asking the cluster which kinds {api_version} serves (for {kind}): {answer}"),
                }
            })?;
        self.kinds.lock().expect("kinds").insert(gvk, found.clone());
        Ok(found)
    }

    async fn api(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Api<DynamicObject>> {
        let (ar, caps) = self.resource(api_version, kind).await?;
        Ok(match (caps.scope, namespace) {
            (Scope::Namespaced, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, &ar),
            (Scope::Namespaced, None) => Api::all_with(self.client.clone(), &ar),
            (Scope::Cluster, _) => Api::all_with(self.client.clone(), &ar),
        })
    }

    /// Server-side applies `obj` (a dry run when `dry_run`), field manager `bootstrap`, Strict
    /// field validation, taking over conflicting fields.
    pub async fn apply(&self, obj: &Value, dry_run: bool) -> Result<Applied> {
        let api_version = obj["apiVersion"].as_str().unwrap_or_default();
        let kind = obj["kind"].as_str().unwrap_or_default();
        let name = obj["metadata"]["name"]
            .as_str()
            .ok_or_else(|| anyhow!("{} has no metadata.name", describe(obj)))?;
        let api = self
            .api(api_version, kind, obj["metadata"]["namespace"].as_str())
            .await?;
        let mut params = PatchParams::apply(FIELD_MANAGER)
            .force()
            .validation_strict();
        params.dry_run = dry_run;
        let stored = api
            .patch(name, &params, &Patch::Apply(obj))
            .await
            .map_err(|e| {
                self.api_error(&e, obj, if dry_run { "dry-run apply" } else { "apply" })
            })?;
        let object = serde_json::to_value(&stored).context("reading the applied object")?;
        Ok(Applied { object })
    }

    /// The object, or `None` when it does not exist (or its kind is not served yet).
    pub async fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Option<Value>> {
        let api = match self.api(api_version, kind, namespace).await {
            Ok(api) => api,
            Err(e) if e.is::<NotServed>() => return Ok(None),
            Err(e) => return Err(e),
        };
        let found = api.get_opt(name).await.map_err(|e| {
            anyhow!(
                "reading {kind} {}{name}: {}",
                namespace.map(|n| format!("{n}/")).unwrap_or_default(),
                self.redactor.redact(&describe_error(&e))
            )
        })?;
        found
            .map(|o| serde_json::to_value(&o).context("reading the object"))
            .transpose()
    }

    /// Every object of a kind (in `namespace`, when given), read in pages
    /// ([`crate::openshift::api::list_all`]); empty when the kind is not served.
    pub async fn list(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
    ) -> Result<Vec<Value>> {
        let api = match self.api(api_version, kind, namespace).await {
            Ok(api) => api,
            Err(e) if e.is::<NotServed>() => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let items = crate::openshift::api::list_all(&api, kind)
            .await
            .map_err(|e| anyhow!("{}", self.redactor.redact(&format!("{e:#}"))))?;
        items
            .iter()
            .map(|o| serde_json::to_value(o).context("reading the object"))
            .collect()
    }

    /// Forgets the kinds asked about (an operator just added CRDs).
    pub fn forget_kinds(&self) {
        self.kinds.lock().expect("kinds").clear();
    }

    fn api_error(&self, e: &kube::Error, obj: &Value, what: &str) -> anyhow::Error {
        let text = describe_error(e);
        anyhow!(
            "{what} of {}: {}",
            describe(obj),
            self.redactor.redact(&text)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A secret and its base64 form are both redacted, wherever they appear.
    #[test]
    fn secrets_are_redacted_raw_and_in_base64() {
        let pw = Secret::new("hunter2-long");
        let r = Redactor::new(&[&pw]);
        let text = "Invalid value: \"aHVudGVyMi1sb25n\": bad; password hunter2-long";
        let out = r.redact(text);
        assert!(
            !out.contains("hunter2-long") && !out.contains("aHVudGVyMi1sb25n"),
            "{out}"
        );
        assert_eq!(out.matches("<redacted>").count(), 2);
    }

    /// Objects are named as kubectl names them.
    #[test]
    fn objects_are_described_by_kind_namespace_and_name() {
        let o = serde_json::json!({"kind": "Secret", "metadata": {"name": "a", "namespace": "n"}});
        assert_eq!(describe(&o), "Secret n/a");
        let o = serde_json::json!({"kind": "ClusterRole", "metadata": {"name": "r"}});
        assert_eq!(describe(&o), "ClusterRole r");
    }
}
