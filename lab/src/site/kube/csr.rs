//! The CertificateSigningRequest's storage strategies, as kubernetes
//! `pkg/registry/certificates/certificates/strategy.go` has them: the `/approval` subresource
//! changes only `status.conditions` (`csrApprovalStrategy.PrepareForUpdate`, condition
//! timestamps filled in when missing), `/status` changes the status but not the Approved and
//! Denied conditions (`csrStatusStrategy`), and no update may remove an Approved, Denied or
//! Failed condition (`pkg/apis/certificates/validation/validation.go`,
//! `validateCertificateSigningRequestUpdate`, in its words).

use serde_json::{json, Value};

/// The subresources a CSR has besides `status`.
pub const APPROVAL: &str = "approval";

/// Whether this kind (group, kind) is the CSR.
pub fn is_csr(group: &str, kind: &str) -> bool {
    group == "certificates.k8s.io" && kind == "CertificateSigningRequest"
}

fn conditions(obj: &Value) -> Vec<Value> {
    obj["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

fn count(conds: &[Value], t: &str) -> usize {
    conds.iter().filter(|c| c["type"] == t).count()
}

/// The object an `/approval` PUT leaves: the live one with the request's conditions, each
/// given a `lastUpdateTime` when it has none.
pub fn approval(live: &Value, request: &Value, now: &str) -> Value {
    let mut new = live.clone();
    let mut conds = conditions(request);
    for c in &mut conds {
        if c["lastUpdateTime"].as_str().unwrap_or_default().is_empty() {
            c["lastUpdateTime"] = json!(now);
        }
        if c["lastTransitionTime"]
            .as_str()
            .unwrap_or_default()
            .is_empty()
        {
            c["lastTransitionTime"] = json!(now);
        }
    }
    new["status"]["conditions"] = json!(conds);
    new
}

/// An update's violations (path, message), in the validation's words: an Approved or Denied
/// condition may be added only through `/approval`.
pub fn violations(live: &Value, new: &Value, sub: Option<&str>) -> Vec<(String, String)> {
    let (old, now) = (conditions(live), conditions(new));
    let path = "status.conditions".to_string();
    let mut out = Vec::new();
    for t in ["Approved", "Denied", "Failed"] {
        if count(&now, t) < count(&old, t) {
            out.push((
                path.clone(),
                format!("Forbidden: updates may not remove a condition of type \"{t}\""),
            ));
        }
    }
    if sub != Some(APPROVAL) {
        for t in ["Approved", "Denied"] {
            if count(&now, t) > count(&old, t) {
                out.push((
                    path.clone(),
                    format!("Forbidden: updates may not add a condition of type \"{t}\""),
                ));
            }
        }
    }
    if count(&now, "Approved") > 0 && count(&now, "Denied") > 0 {
        out.push((
            path,
            "Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive"
                .into(),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An approval keeps the spec and the certificate; only the conditions change.
    #[test]
    fn an_approval_changes_only_the_conditions() {
        let live = json!({"spec": {"signerName": "s"}, "status": {"certificate": "Yw=="}});
        let req = json!({"spec": {"signerName": "other"}, "status": {"certificate": null,
            "conditions": [{"type": "Approved", "status": "True", "reason": "KubectlApprove"}]}});
        let new = approval(&live, &req, "2026-01-01T00:00:00Z");
        assert_eq!(new["spec"]["signerName"], "s");
        assert_eq!(new["status"]["certificate"], "Yw==");
        assert_eq!(
            new["status"]["conditions"][0]["lastUpdateTime"],
            "2026-01-01T00:00:00Z"
        );
        assert!(violations(&live, &new, Some(APPROVAL)).is_empty());
    }

    /// Approval is only for `/approval`, is never taken back, and excludes a denial.
    #[test]
    fn approval_rules_in_the_validations_words() {
        let pending = json!({});
        let approved = json!({"status": {"conditions": [{"type": "Approved", "status": "True"}]}});
        let both = json!({"status": {"conditions": [{"type": "Approved"}, {"type": "Denied"}]}});
        let v = violations(&pending, &approved, Some("status"));
        assert!(
            v[0].1
                .contains("may not add a condition of type \"Approved\""),
            "{v:?}"
        );
        let v = violations(&approved, &pending, Some(APPROVAL));
        assert!(
            v[0].1
                .contains("may not remove a condition of type \"Approved\""),
            "{v:?}"
        );
        let v = violations(&approved, &both, Some(APPROVAL));
        assert!(v[0].1.contains("mutually exclusive"), "{v:?}");
    }
}
