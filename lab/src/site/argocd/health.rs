//! Resource health as Argo CD assesses it, for the kinds the platform uses: the built-in rule
//! of each kind, Subscription as Argo's Lua customization (resource_customizations/
//! operators.coreos.com/Subscription/health.lua) says, CRDs by their Established condition,
//! and a child Application only when the ArgoCD instance declares a health check for it
//! (Argo CD >= 1.8 has none built in). Kinds without a rule have no health, as in Argo.

use serde_json::{json, Value};

/// A health status, in Argo's order from best to worst.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Healthy.
    Healthy,
    /// Suspended.
    Suspended,
    /// Progressing.
    Progressing,
    /// Missing: the object does not exist.
    Missing,
    /// Degraded.
    Degraded,
    /// Unknown.
    Unknown,
}

impl Status {
    /// Argo's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Healthy => "Healthy",
            Status::Suspended => "Suspended",
            Status::Progressing => "Progressing",
            Status::Missing => "Missing",
            Status::Degraded => "Degraded",
            Status::Unknown => "Unknown",
        }
    }

    fn parse(s: &str) -> Status {
        match s {
            "Healthy" => Status::Healthy,
            "Suspended" => Status::Suspended,
            "Progressing" => Status::Progressing,
            "Missing" => Status::Missing,
            "Degraded" => Status::Degraded,
            _ => Status::Unknown,
        }
    }
}

/// A resource's health and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Health {
    /// The status.
    pub status: Status,
    /// Why (may be empty).
    pub message: String,
}

impl Health {
    fn of(status: Status, message: impl Into<String>) -> Health {
        Health {
            status,
            message: message.into(),
        }
    }

    /// As the Application's status holds it.
    pub fn to_json(&self) -> Value {
        if self.message.is_empty() {
            json!({"status": self.status.as_str()})
        } else {
            json!({"status": self.status.as_str(), "message": self.message})
        }
    }
}

/// The kinds healthy as soon as they exist.
const PRESENT_IS_HEALTHY: &[&str] = &[
    "Namespace",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Service",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "NetworkPolicy",
    "ResourceQuota",
    "LimitRange",
    "PriorityClass",
];

/// Whether there is a health rule for the kind (a kind without one has no health, and its
/// absence does not count against the Application, as in Argo).
fn has_rule(group: &str, kind: &str, app_check: bool) -> bool {
    match (group, kind) {
        ("" | "rbac.authorization.k8s.io" | "networking.k8s.io" | "scheduling.k8s.io", k) => {
            PRESENT_IS_HEALTHY.contains(&k)
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition")
        | ("operators.coreos.com", "Subscription") => true,
        ("argoproj.io", "Application") => app_check,
        _ => false,
    }
}

/// The health of `live` (None: absent: Missing), or None when there is no rule for its kind.
/// `app_check`: the instance has a health check for argoproj.io/Application.
pub fn assess(group: &str, kind: &str, live: Option<&Value>, app_check: bool) -> Option<Health> {
    if !has_rule(group, kind, app_check) {
        return None;
    }
    let Some(obj) = live else {
        return Some(Health::of(Status::Missing, ""));
    };
    if obj["metadata"]["deletionTimestamp"].is_string() {
        return Some(Health::of(Status::Progressing, "Pending deletion"));
    }
    Some(match kind {
        "CustomResourceDefinition" => crd(obj),
        "Subscription" => subscription(obj),
        "Application" => application(obj),
        _ => Health::of(Status::Healthy, ""),
    })
}

fn condition<'a>(obj: &'a Value, kind: &str) -> Option<&'a Value> {
    obj["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

fn crd(obj: &Value) -> Health {
    match condition(obj, "Established") {
        Some(c) if c["status"] == "True" => Health::of(Status::Healthy, ""),
        _ => Health::of(Status::Progressing, "Status conditions not found"),
    }
}

/// Argo's Lua for Subscription, rule for rule.
fn subscription(obj: &Value) -> Health {
    let pending_msg = "An install plan for a subscription is pending installation";
    let Some(conditions) = obj["status"]["conditions"].as_array() else {
        return Health::of(Status::Progressing, pending_msg);
    };
    let (mut degraded, mut pending, mut msg) = (0, 0, String::new());
    for (i, c) in conditions.iter().enumerate() {
        let (t, s) = (
            c["type"].as_str().unwrap_or(""),
            c["status"].as_str().unwrap_or(""),
        );
        msg.push_str(&format!("{}: {t} | {s}\n", i + 1));
        if t == "InstallPlanPending" && s == "True" {
            pending += 1;
        } else if (t == "InstallPlanMissing" && c["reason"] != "ReferencedInstallPlanNotFound")
            || (matches!(
                t,
                "CatalogSourcesUnhealthy" | "InstallPlanFailed" | "ResolutionFailed"
            ) && s == "True")
        {
            degraded += 1;
        }
    }
    match (degraded, pending) {
        (0, 0) => Health::of(Status::Healthy, msg),
        (0, _) => Health::of(Status::Progressing, pending_msg),
        _ => Health::of(Status::Degraded, msg),
    }
}

/// The check Argo's documentation gives for argoproj.io/Application.
fn application(obj: &Value) -> Health {
    let h = &obj["status"]["health"];
    match h["status"].as_str() {
        Some(s) => Health::of(Status::parse(s), h["message"].as_str().unwrap_or("")),
        None => Health::of(Status::Progressing, ""),
    }
}

/// Whether the ArgoCD instance's `spec.resourceHealthChecks` has one for argoproj.io/Application.
pub fn has_application_check(argocd: &Value) -> bool {
    argocd["spec"]["resourceHealthChecks"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|c| c["group"] == "argoproj.io" && c["kind"] == "Application")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscription_follows_argos_lua() {
        let sub = |conds: Value| json!({"status": {"conditions": conds}});
        let h = assess(
            "operators.coreos.com",
            "Subscription",
            Some(&json!({})),
            false,
        )
        .unwrap();
        assert_eq!(h.status, Status::Progressing);
        let ok = sub(json!([{"type": "CatalogSourcesUnhealthy", "status": "False"}]));
        assert_eq!(subscription(&ok).status, Status::Healthy);
        assert_eq!(
            subscription(&ok).message,
            "1: CatalogSourcesUnhealthy | False\n"
        );
        let pending = sub(json!([{"type": "InstallPlanPending", "status": "True"}]));
        assert_eq!(subscription(&pending).status, Status::Progressing);
        let failed = sub(
            json!([{"type": "InstallPlanPending", "status": "True"}, {"type": "ResolutionFailed", "status": "True"}]),
        );
        assert_eq!(subscription(&failed).status, Status::Degraded);
        let missing = sub(
            json!([{"type": "InstallPlanMissing", "status": "True", "reason": "ReferencedInstallPlanNotFound"}]),
        );
        assert_eq!(subscription(&missing).status, Status::Healthy);
    }

    #[test]
    fn child_applications_count_only_with_a_check() {
        let app = json!({"status": {"health": {"status": "Degraded", "message": "x"}}});
        assert_eq!(
            assess("argoproj.io", "Application", Some(&app), false),
            None
        );
        assert_eq!(
            assess("argoproj.io", "Application", Some(&app), true)
                .unwrap()
                .status,
            Status::Degraded
        );
        assert_eq!(
            assess("argoproj.io", "Application", Some(&json!({})), true)
                .unwrap()
                .status,
            Status::Progressing
        );
        assert_eq!(assess("argoproj.io", "Application", None, false), None);
        assert_eq!(
            assess("argoproj.io", "Application", None, true)
                .unwrap()
                .status,
            Status::Missing
        );
        assert_eq!(
            assess("", "ResourceQuota", None, false).unwrap().status,
            Status::Missing
        );
        assert!(Status::Missing > Status::Progressing && Status::Degraded > Status::Missing);
    }
}
