//! Whether a new cluster is bootstrapped and installed, read from its API with the installer's
//! kubeconfig, as `openshift-install agent wait-for` decides it:
//! - bootstrap complete: ConfigMap `kube-system/bootstrap` has `data.status: complete`;
//! - install complete: ClusterVersion `version` (config.openshift.io/v1) is Available=True,
//!   Failing=False and Progressing=False (openshift/installer pkg/agent/ocp.go
//!   `AreClusterOperatorsInitialized`), Route `openshift-console/console` (route.openshift.io/v1)
//!   is admitted (`status.ingress[].conditions` Admitted=True; `IsConsoleRouteAvailable`), and
//!   every ClusterOperator is stable as `oc adm wait-for-stable-cluster` judges it (openshift/oc
//!   pkg/cli/admin/waitforstable/command.go `unstableOperatorReason`): Available=True,
//!   Progressing=False, Degraded=False, and Failing not True where an operator still reports it.
//!   The installer itself only lists the others (`LogClusterOperatorConditions`); ClusterVersion
//!   can say done while an operator is still rolling out, and a hand-off onto such a cluster
//!   meets it half-ready.
//! - while waiting, the ClusterOperators not yet stable, each with why.
//!
//! The OpenShift kinds are read as dynamic objects with hand-built API resources: no discovery
//! round trips, and nothing asked of the API but these four reads.

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
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

/// The new cluster's API.
#[derive(Clone)]
pub struct ClusterApi {
    client: kube::Client,
    /// How the connection is trusted.
    pub trust: super::api::ApiTrust,
}

/// Where the install stands, from ClusterVersion, the ClusterOperators and the console Route.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct InstallStatus {
    /// ClusterVersion Available=True.
    pub available: bool,
    /// ClusterVersion Progressing is not False (True, Unknown or absent).
    pub progressing: bool,
    /// ClusterVersion Failing is not False (True, Unknown or absent).
    pub failing: bool,
    /// The message of its Progressing (or Failing) condition.
    pub message: Option<String>,
    /// `status.desired.version`.
    pub version: Option<String>,
    /// The ClusterOperators not yet stable ([`OperatorHealth::unstable_reason`]), by name.
    pub unhealthy_operators: Vec<OperatorHealth>,
    /// The console's host, once its Route is admitted.
    pub console: Option<String>,
}

impl InstallStatus {
    /// Install complete: as the installer decides it (ClusterVersion and the console Route),
    /// and every ClusterOperator stable.
    pub fn complete(&self) -> bool {
        self.available
            && !self.progressing
            && !self.failing
            && self.console.is_some()
            && self.unhealthy_operators.is_empty()
    }
}

/// A ClusterOperator's conditions, as `oc adm wait-for-stable-cluster` reads them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OperatorHealth {
    /// Its name.
    pub name: String,
    /// Available=True.
    pub available: bool,
    /// Progressing is not False (True, Unknown or absent: still rolling out).
    pub progressing: bool,
    /// Degraded is not False (True, Unknown, or absent on an operator that does not report
    /// Failing either).
    pub degraded: bool,
    /// Failing is reported and not False (operators from before Degraded replaced it).
    pub failing: bool,
    /// The message of its Degraded, Failing, Progressing or Available condition, the first
    /// that explains why it is not stable.
    pub message: Option<String>,
}

impl OperatorHealth {
    /// The operator `name` with `status.conditions` of `status`.
    pub fn from_status(name: &str, status: &Value) -> Self {
        let state = |kind| condition_status(status, kind);
        let reported_false = |kind| state(kind) == Some("False");
        let failing = state("Failing").is_some() && !reported_false("Failing");
        let degraded = match (state("Degraded"), state("Failing")) {
            (None, Some(_)) => false,
            (d, _) => d != Some("False"),
        };
        let h = OperatorHealth {
            name: name.to_string(),
            available: state("Available") == Some("True"),
            progressing: !reported_false("Progressing"),
            degraded,
            failing,
            message: None,
        };
        let why = [
            ("Degraded", h.degraded),
            ("Failing", h.failing),
            ("Progressing", h.progressing),
            ("Available", !h.available),
        ];
        let message = why
            .iter()
            .filter(|(_, bad)| *bad)
            .find_map(|(kind, _)| condition(status, kind).1);
        OperatorHealth { message, ..h }
    }

    /// Why it is not stable, in `oc adm wait-for-stable-cluster`'s words ("unavailable and
    /// progressing"), or None when it is Available=True, Progressing=False, Degraded=False
    /// and not Failing.
    pub fn unstable_reason(&self) -> Option<String> {
        let reasons: Vec<&str> = [
            (!self.available, "unavailable"),
            (self.progressing, "progressing"),
            (self.degraded, "degraded"),
            (self.failing, "failing"),
        ]
        .iter()
        .filter(|(bad, _)| *bad)
        .map(|(_, word)| *word)
        .collect();
        (!reasons.is_empty()).then(|| reasons.join(" and "))
    }
}

impl ClusterApi {
    /// The API the kubeconfig at `path` names ([`super::api::connect`]; `insecure` the hosts
    /// named by `--insecure-api`). No retries: the wait polls, and asks again on its next poll.
    pub async fn from_kubeconfig(
        path: &Path,
        address: Option<SocketAddr>,
        insecure: &[String],
    ) -> Result<Self> {
        let c = super::api::connect(path, address, insecure, super::api::Retry::NONE).await?;
        Ok(ClusterApi {
            client: c.client,
            trust: c.trust,
        })
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
            // The installer's cov1helpers.IsStatusConditionTrue/False: an absent condition is
            // neither.
            st.available = condition_status(status, "Available") == Some("True");
            st.progressing = condition_status(status, "Progressing") != Some("False");
            st.failing = condition_status(status, "Failing") != Some("False");
            st.message = condition(status, "Failing")
                .1
                .filter(|_| condition(status, "Failing").0)
                .or_else(|| condition(status, "Progressing").1);
            st.version = status["desired"]["version"].as_str().map(str::to_string);
        }
        let co: Api<DynamicObject> =
            Api::all_with(self.client.clone(), &cluster_operator_resource());
        let operators = super::api::list_all(&co, "ClusterOperators").await?;
        for op in operators {
            let name = op.metadata.name.clone().unwrap_or_default();
            let h = OperatorHealth::from_status(&name, &op.data["status"]);
            if h.unstable_reason().is_some() {
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

/// The `status` (`True`, `False`, `Unknown`) of the condition `kind` of `status.conditions`,
/// None when it is not reported.
pub fn condition_status<'a>(status: &'a Value, kind: &str) -> Option<&'a str> {
    status["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .and_then(|c| c["status"].as_str())
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

    fn operator(conditions: &[(&str, &str)]) -> OperatorHealth {
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(t, s)| serde_json::json!({"type": t, "status": s, "message": format!("{t} is {s}")}))
            .collect();
        OperatorHealth::from_status("console", &serde_json::json!({"conditions": conditions}))
    }

    /// A ClusterOperator is stable only when Available=True, Progressing=False and
    /// Degraded=False (or Failing=False, on one that reports Failing instead), as
    /// `oc adm wait-for-stable-cluster` judges it: Available but still Progressing, Degraded,
    /// Failing, Unknown, or silent about a condition is not stable, and says why.
    #[test]
    fn an_operator_is_stable_only_available_not_progressing_not_degraded() {
        let stable = [
            ("Available", "True"),
            ("Progressing", "False"),
            ("Degraded", "False"),
        ];
        assert_eq!(operator(&stable).unstable_reason(), None);
        let old_style = [
            ("Available", "True"),
            ("Progressing", "False"),
            ("Failing", "False"),
        ];
        assert_eq!(operator(&old_style).unstable_reason(), None);
        let cases: [(&[(&str, &str)], &str); 7] = [
            (
                &[
                    ("Available", "True"),
                    ("Progressing", "True"),
                    ("Degraded", "False"),
                ],
                "progressing",
            ),
            (
                &[
                    ("Available", "True"),
                    ("Progressing", "False"),
                    ("Degraded", "True"),
                ],
                "degraded",
            ),
            (
                &[
                    ("Available", "True"),
                    ("Progressing", "False"),
                    ("Degraded", "False"),
                    ("Failing", "True"),
                ],
                "failing",
            ),
            (
                &[
                    ("Available", "True"),
                    ("Progressing", "False"),
                    ("Failing", "True"),
                ],
                "failing",
            ),
            (
                &[
                    ("Available", "False"),
                    ("Progressing", "True"),
                    ("Degraded", "False"),
                ],
                "unavailable and progressing",
            ),
            (
                &[
                    ("Available", "True"),
                    ("Progressing", "Unknown"),
                    ("Degraded", "False"),
                ],
                "progressing",
            ),
            (&[("Available", "True")], "progressing and degraded"),
        ];
        for (conditions, why) in cases {
            let h = operator(conditions);
            assert_eq!(h.unstable_reason().as_deref(), Some(why), "{conditions:?}");
        }
        let degraded = operator(&[
            ("Available", "True"),
            ("Progressing", "True"),
            ("Degraded", "True"),
        ]);
        assert_eq!(degraded.message.as_deref(), Some("Degraded is True"));
    }

    /// The install is not complete while one ClusterOperator is not stable, though
    /// ClusterVersion says done and the console Route is admitted (what the installer alone
    /// would call complete).
    #[test]
    fn the_install_waits_for_every_operator() {
        let mut st = InstallStatus {
            available: true,
            console: Some("console.apps.lab".into()),
            ..Default::default()
        };
        assert!(st.complete());
        st.unhealthy_operators.push(operator(&[
            ("Available", "True"),
            ("Progressing", "True"),
            ("Degraded", "False"),
        ]));
        assert!(!st.complete());
    }

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
