//! Whether a new cluster is bootstrapped and installed, read from its API with the installer's
//! kubeconfig, as `openshift-install agent wait-for` decides it:
//! - bootstrap complete: ConfigMap `kube-system/bootstrap` has `data.status: complete`;
//! - install complete: ClusterVersion `version` (config.openshift.io/v1) is Available=True,
//!   Failing=False and Progressing=False, and Route `openshift-console/console`
//!   (route.openshift.io/v1) is admitted (`status.ingress[].conditions` Admitted=True);
//! - while waiting, the ClusterOperators that are not Available or are Degraded.
//!
//! The OpenShift kinds are read as dynamic objects with hand-built API resources: no discovery
//! round trips, and nothing asked of the API but these four reads.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use serde::Serialize;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;

/// ClusterVersion, config.openshift.io/v1 (cluster scoped).
pub fn cluster_version_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterVersion"),
        "clusterversions",
    )
}

/// ClusterOperator, config.openshift.io/v1 (cluster scoped).
pub fn cluster_operator_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("config.openshift.io", "v1", "ClusterOperator"),
        "clusteroperators",
    )
}

/// Route, route.openshift.io/v1 (namespaced).
pub fn route_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("route.openshift.io", "v1", "Route"),
        "routes",
    )
}

/// A client for the API the kubeconfig at `path` names (its current context), trusted by its
/// `certificate-authority-data` (and `tls-server-name` when given); `address`, when given, is
/// dialled instead of the kubeconfig's server (the certificate is still checked for the
/// kubeconfig's `tls-server-name`, or for its server's host).
pub async fn client_from_kubeconfig(
    path: &Path,
    address: Option<SocketAddr>,
) -> Result<kube::Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading the kubeconfig {}", path.display()))?;
    let mut config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .with_context(|| format!("loading the kubeconfig {}", path.display()))?;
    if let Some(addr) = address {
        if config.tls_server_name.is_none() {
            config.tls_server_name = config.cluster_url.host().map(str::to_string);
        }
        config.cluster_url = format!("https://{addr}")
            .parse()
            .context("the cluster API's address")?;
    }
    config.connect_timeout = Some(std::time::Duration::from_secs(10));
    config.read_timeout = Some(std::time::Duration::from_secs(20));
    kube::Client::try_from(config)
        .with_context(|| format!("a client for the kubeconfig {}", path.display()))
}

/// The new cluster's API.
#[derive(Clone)]
pub struct ClusterApi {
    client: kube::Client,
}

/// Where the install stands, from ClusterVersion, the ClusterOperators and the console Route.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InstallStatus {
    /// ClusterVersion Available=True.
    pub available: bool,
    /// ClusterVersion Progressing=True.
    pub progressing: bool,
    /// ClusterVersion Failing=True.
    pub failing: bool,
    /// The message of its Progressing (or Failing) condition.
    pub message: Option<String>,
    /// `status.desired.version`.
    pub version: Option<String>,
    /// ClusterOperators not Available or Degraded, by name.
    pub unhealthy_operators: Vec<OperatorHealth>,
    /// The console's host, once its Route is admitted.
    pub console: Option<String>,
}

impl InstallStatus {
    /// Install complete, as the installer decides it.
    pub fn complete(&self) -> bool {
        self.available && !self.progressing && !self.failing && self.console.is_some()
    }
}

/// A ClusterOperator that is not yet healthy.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OperatorHealth {
    /// Its name.
    pub name: String,
    /// Available=True.
    pub available: bool,
    /// Degraded=True.
    pub degraded: bool,
    /// Progressing=True.
    pub progressing: bool,
    /// The message of its Degraded (or Available) condition.
    pub message: Option<String>,
}

impl ClusterApi {
    /// The API the kubeconfig at `path` names: [`client_from_kubeconfig`].
    pub async fn from_kubeconfig(path: &Path, address: Option<SocketAddr>) -> Result<Self> {
        let client = client_from_kubeconfig(path, address).await?;
        Ok(ClusterApi { client })
    }

    /// Whether bootstrap is complete: `Err` when the API does not answer, `false` while the
    /// ConfigMap is missing or not complete.
    pub async fn bootstrap_complete(&self) -> Result<bool> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        let cm = api
            .get_opt("bootstrap")
            .await
            .context("reading ConfigMap kube-system/bootstrap")?;
        Ok(cm
            .and_then(|cm| cm.data)
            .and_then(|d| d.get("status").cloned())
            .is_some_and(|s| s == "complete"))
    }

    /// Where the install stands; `Err` when the API does not answer.
    pub async fn install_status(&self) -> Result<InstallStatus> {
        let mut st = InstallStatus::default();
        let cv: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &cluster_version_resource());
        if let Some(cv) = cv
            .get_opt("version")
            .await
            .context("reading ClusterVersion version")?
        {
            let status = &cv.data["status"];
            st.available = condition(status, "Available").0;
            st.progressing = condition(status, "Progressing").0;
            st.failing = condition(status, "Failing").0;
            st.message = condition(status, "Failing")
                .1
                .filter(|_| st.failing)
                .or_else(|| condition(status, "Progressing").1);
            st.version = status["desired"]["version"].as_str().map(str::to_string);
        }
        let co: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &cluster_operator_resource());
        let operators = co
            .list(&ListParams::default())
            .await
            .context("listing ClusterOperators")?;
        for op in operators {
            let status = &op.data["status"];
            let h = OperatorHealth {
                name: op.metadata.name.clone().unwrap_or_default(),
                available: condition(status, "Available").0,
                degraded: condition(status, "Degraded").0,
                progressing: condition(status, "Progressing").0,
                message: condition(status, "Degraded")
                    .1
                    .or_else(|| condition(status, "Available").1),
            };
            if !h.available || h.degraded {
                st.unhealthy_operators.push(h);
            }
        }
        st.unhealthy_operators.sort_by(|a, b| a.name.cmp(&b.name));
        let routes: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), "openshift-console", &route_resource());
        if let Some(route) = routes
            .get_opt("console")
            .await
            .context("reading Route openshift-console/console")?
        {
            st.console = admitted_host(&route.data);
        }
        Ok(st)
    }
}

/// Whether the condition `kind` of `status.conditions` is True, and its message.
pub fn condition(status: &Value, kind: &str) -> (bool, Option<String>) {
    let found = status["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == kind);
    match found {
        Some(c) => (
            c["status"] == "True",
            c["message"]
                .as_str()
                .filter(|m| !m.is_empty())
                .map(str::to_string),
        ),
        None => (false, None),
    }
}

/// The host of a Route one of whose ingresses admitted it.
fn admitted_host(route: &Value) -> Option<String> {
    let ingress = route["status"]["ingress"].as_array()?;
    ingress
        .iter()
        .find(|i| condition(i, "Admitted").0)
        .map(|i| {
            i["host"]
                .as_str()
                .or(route["spec"]["host"].as_str())
                .unwrap_or_default()
                .to_string()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Route is admitted only when one ingress has Admitted=True.
    #[test]
    fn a_route_is_admitted_by_its_ingress_condition() {
        let route = serde_json::json!({"spec": {"host": "console.apps.lab"}, "status": {"ingress": [
            {"host": "console.apps.lab", "conditions": [{"type": "Admitted", "status": "False"}]}]}});
        assert_eq!(admitted_host(&route), None);
        let route = serde_json::json!({"spec": {"host": "console.apps.lab"}, "status": {"ingress": [
            {"host": "console.apps.lab", "conditions": [{"type": "Admitted", "status": "True"}]}]}});
        assert_eq!(admitted_host(&route).as_deref(), Some("console.apps.lab"));
    }
}
