//! Logging in: a Redfish session (`POST .../SessionService/Sessions` with the user and
//! password, then `X-Auth-Token` on every request and a DELETE at the end) when the service root
//! advertises one, else HTTP Basic on every request. A BMC whose session service refuses the
//! credentials is not asked again with Basic: iDRAC locks a user out after a few failures.

use reqwest::Method;
use serde_json::{json, Value};

use super::error::RedfishError;
use super::http::{path_of, Auth, Retry, Transport};

/// Where the service root says sessions are made: `Links.Sessions`, else
/// `SessionService` -> `Sessions`; `None` when it has no session service.
pub(crate) async fn sessions_path(
    t: &Transport,
    root: &Value,
) -> Result<Option<String>, RedfishError> {
    if let Some(p) = odata_id(root.pointer("/Links/Sessions")) {
        return Ok(Some(p));
    }
    let Some(service) = odata_id(root.get("SessionService")) else {
        return Ok(None);
    };
    match t.get(&service).await {
        Ok((body, _)) => Ok(odata_id(body.get("Sessions"))),
        Err(RedfishError::Status { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Creates a session with the credentials; on success every later request carries its token.
/// `Ok(false)` when the BMC has no usable session service (the caller falls back to Basic);
/// wrong credentials are an error.
pub(crate) async fn login(t: &Transport) -> Result<bool, RedfishError> {
    let Some((user, password)) = &t.login else {
        return Ok(false);
    };
    let Some(path) = t.sessions_path.lock().expect("sessions poisoned").clone() else {
        return Ok(false);
    };
    // Unauthenticated: the login carries the credentials itself.
    *t.auth.lock().expect("auth poisoned") = Auth::None;
    let body = json!({"UserName": user, "Password": password.expose()});
    let answer = t
        .attempts(&Method::POST, &path, Some(&body), None, Retry::Transient)
        .await?;
    if answer.status == 401 || answer.status == 403 {
        let reason = super::error::BmcReason::of(&answer.body);
        return Err(RedfishError::Unauthorized {
            bmc: t.bmc.clone(),
            method: "POST".to_string(),
            path,
            message: reason.message,
        });
    }
    if !(200..300).contains(&answer.status) {
        tracing::info!(bmc = %t.bmc, status = answer.status, "redfish session refused; using Basic authentication");
        return Ok(false);
    }
    let Some(token) = answer.header("x-auth-token") else {
        tracing::info!(bmc = %t.bmc, "redfish session answer has no X-Auth-Token; using Basic authentication");
        return Ok(false);
    };
    let location = answer
        .header("location")
        .map(|l| path_of(&l))
        .or_else(|| odata_id(Some(&answer.json())));
    *t.auth.lock().expect("auth poisoned") = Auth::Session {
        token: crate::secret::Secret::new(token),
        location,
    };
    Ok(true)
}

/// Deletes the session, best effort (the call is recorded like any other).
pub(crate) async fn logout(t: &Transport) {
    let location = match &*t.auth.lock().expect("auth poisoned") {
        Auth::Session { location, .. } => location.clone(),
        _ => None,
    };
    if let Some(path) = location {
        let result = t
            .request(Method::DELETE, &path, None, None, Retry::Transient)
            .await;
        if let Ok(answer) = &result {
            if answer.status >= 400 {
                tracing::info!(bmc = %t.bmc, status = answer.status, "redfish session not deleted");
            }
        }
        *t.auth.lock().expect("auth poisoned") = Auth::None;
    }
}

/// The `@odata.id` of a link object.
pub(crate) fn odata_id(link: Option<&Value>) -> Option<String> {
    link?
        .get("@odata.id")
        .and_then(Value::as_str)
        .map(str::to_string)
}
