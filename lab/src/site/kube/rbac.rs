//! Authorization as the API server's RBAC authorizer does it: members of `system:masters` may
//! do anything; anyone else only what a ClusterRoleBinding (cluster-wide) or a RoleBinding (in
//! its namespace) grants through the rules of its ClusterRole or Role (apiGroups, resources
//! with `/subresource`, verbs, resourceNames, `*`). Refusals are 403 Forbidden worded as the
//! API server words them.

use super::store::ApiError;
use serde_json::Value;

/// The administrator (the kubeconfig's admin user; the lab's own writers have its rights).
pub const ADMIN: &str = "system:admin";
/// Who the audit trail names for the lab's own in-process calls (the OLM imitation, seeding):
/// authorized as [`ADMIN`], recorded apart so a trail tells them from a kubeconfig's calls.
pub const IN_PROCESS: &str = "system:lab";

/// What a request asks to do.
#[derive(Clone, Debug)]
pub struct Attributes<'a> {
    /// Who asks.
    pub user: &'a str,
    /// get list create update patch delete.
    pub verb: &'a str,
    /// The API group.
    pub group: &'a str,
    /// The resource (plural).
    pub resource: &'a str,
    /// The subresource (`status`).
    pub subresource: Option<&'a str>,
    /// The namespace, for namespaced kinds.
    pub namespace: Option<&'a str>,
    /// The object's name (not for list and create).
    pub name: Option<&'a str>,
}

/// The groups the user is in, as the authenticator reports them.
pub fn groups(user: &str) -> Vec<String> {
    if user.is_empty() || user == ADMIN {
        return vec!["system:masters".into(), "system:authenticated".into()];
    }
    let mut g = vec!["system:authenticated".to_string()];
    if let Some(rest) = user.strip_prefix("system:serviceaccount:") {
        g.push("system:serviceaccounts".into());
        if let Some((ns, _)) = rest.split_once(':') {
            g.push(format!("system:serviceaccounts:{ns}"));
        }
    }
    g
}

/// The RBAC objects the decision reads.
pub trait Objects {
    /// The objects of `kind` (rbac.authorization.k8s.io/v1).
    fn rbac_list(&self, kind: &str) -> Vec<&Value>;
    /// One ClusterRole or Role.
    fn rbac_get(&self, kind: &str, namespace: Option<&str>, name: &str) -> Option<&Value>;
}

/// Allows the request, or says why not (403).
pub fn authorize(objects: &dyn Objects, a: &Attributes<'_>) -> Result<(), ApiError> {
    let groups = groups(a.user);
    if groups.iter().any(|g| g == "system:masters") {
        return Ok(());
    }
    let bound = |b: &Value| subject_matches(b, a.user, &groups);
    let cluster = objects
        .rbac_list("ClusterRoleBinding")
        .into_iter()
        .filter(|b| bound(b));
    for b in cluster {
        if role_allows(objects, b, None, a) {
            return Ok(());
        }
    }
    if let Some(ns) = a.namespace {
        for b in objects
            .rbac_list("RoleBinding")
            .into_iter()
            .filter(|b| b["metadata"]["namespace"].as_str() == Some(ns) && bound(b))
        {
            if role_allows(objects, b, Some(ns), a) {
                return Ok(());
            }
        }
    }
    Err(forbidden(a))
}

fn subject_matches(binding: &Value, user: &str, groups: &[String]) -> bool {
    let binding_ns = binding["metadata"]["namespace"].as_str();
    binding["subjects"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|s| {
            let name = s["name"].as_str().unwrap_or_default();
            match s["kind"].as_str() {
                Some("User") => name == user,
                Some("Group") => groups.iter().any(|g| g == name),
                Some("ServiceAccount") => {
                    let ns = s["namespace"].as_str().or(binding_ns).unwrap_or_default();
                    user == format!("system:serviceaccount:{ns}:{name}")
                }
                _ => false,
            }
        })
}

fn role_allows(
    objects: &dyn Objects,
    binding: &Value,
    ns: Option<&str>,
    a: &Attributes<'_>,
) -> bool {
    let role_ref = &binding["roleRef"];
    let name = role_ref["name"].as_str().unwrap_or_default();
    let role = match role_ref["kind"].as_str() {
        Some("ClusterRole") => objects.rbac_get("ClusterRole", None, name),
        Some("Role") => objects.rbac_get("Role", ns, name),
        _ => None,
    };
    role.and_then(|r| r["rules"].as_array())
        .into_iter()
        .flatten()
        .any(|rule| rule_allows(rule, a))
}

fn has(list: &Value, want: &str) -> bool {
    list.as_array()
        .into_iter()
        .flatten()
        .any(|v| v.as_str().is_some_and(|v| v == "*" || v == want))
}

fn rule_allows(rule: &Value, a: &Attributes<'_>) -> bool {
    let resource = match a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.to_string(),
    };
    let names = rule["resourceNames"].as_array().filter(|n| !n.is_empty());
    let name_ok = match (names, a.name) {
        (None, _) => true,
        (Some(names), Some(n)) => names.iter().any(|v| v.as_str() == Some(n)),
        (Some(_), None) => false,
    };
    has(&rule["verbs"], a.verb)
        && has(&rule["apiGroups"], a.group)
        && (has(&rule["resources"], &resource)
            || a.subresource.is_some() && has(&rule["resources"], &format!("{}/*", a.resource)))
        && name_ok
}

/// The API server's refusal: `resourcequotas is forbidden: User "..." cannot create resource
/// "resourcequotas" in API group "" in the namespace "t"`.
pub fn forbidden(a: &Attributes<'_>) -> ApiError {
    let qualified = if a.group.is_empty() {
        a.resource.to_string()
    } else {
        format!("{}.{}", a.resource, a.group)
    };
    let subject = match a.name {
        Some(n) => format!("{qualified} \"{n}\""),
        None => qualified,
    };
    let resource = match a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.to_string(),
    };
    let scope = match a.namespace {
        Some(ns) => format!("in the namespace \"{ns}\""),
        None => "at the cluster scope".to_string(),
    };
    ApiError::new(
        403,
        "Forbidden",
        format!(
            "{subject} is forbidden: User \"{}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
            a.user, a.verb, a.group
        ),
    )
}
