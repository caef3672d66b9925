//! The rendezvous host's assisted-service, as the watcher sees it: plain HTTP on port 8090,
//! `/api/assisted-install/v2/...`, answered from the [`Simulator`].
//!
//! What it imitates: the four endpoints a watcher token opens (`GET /v2/clusters`,
//! `GET /v2/clusters/{id}`, `GET /v2/infra-envs`, `GET /v2/events` with `cluster_id` or
//! `infra_env_id`, and `severities`), with the JSON shapes of assisted-service's swagger
//! (`cluster`, `host`, `infra-env`, `event`; `validations_info` as a JSON string); the
//! `Watcher-Authorization` header checked as an ES256 JWT against the install's public key
//! (read from the booted ISO), with claim `auth_scheme: watcherAuth` and an unexpired `exp`;
//! 401 `{"code":401,"message":...}` for a missing or bad token, 403 for anything else asked
//! with a good one (other paths, other methods), 404 for an unknown cluster id. The API exists
//! only while node 0 runs the ISO: before its first boot and after it reboots into the cluster,
//! connections are dropped (see [`super::gate`]).
//!
//! What it does not: the agent, user or admin APIs, paging (`limit`, `offset`), `order`,
//! host-scoped event queries, or any write.

use super::gate::GatedListener;
use super::json_response;
use super::simulator::Simulator;
use anyhow::Result;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use bootstrap::openshift::assisted::{InfraEnv, InfraError, BASE_PATH, WATCHER_HEADER};
use std::collections::HashMap;
use std::sync::Arc;

/// Serves the stand-in on `listener` until an error.
pub async fn serve(sim: Arc<Simulator>, listener: std::net::TcpListener) -> Result<()> {
    let gated = GatedListener::new(listener, sim.rendezvous_gate.clone())?;
    let app = axum::Router::new().fallback(handle).with_state(sim);
    axum::serve(gated, app).await?;
    Ok(())
}

fn refuse(code: StatusCode, message: &str) -> Response {
    let body = InfraError {
        code: i32::from(code.as_u16()),
        message: message.to_string(),
    };
    json_response(code, &(body)).into_response()
}

async fn handle(
    State(sim): State<Arc<Simulator>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let token = headers
        .get(WATCHER_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some(install) = sim.install() else {
        return refuse(StatusCode::UNAUTHORIZED, "unauthenticated: no install yet");
    };
    if let Err(why) = verify_watcher_token(token, &install.watcher_key) {
        return refuse(
            StatusCode::UNAUTHORIZED,
            &format!("unauthenticated for invalid credentials: {why}"),
        );
    }
    let Some(path) = uri.path().strip_prefix(BASE_PATH) else {
        return refuse(
            StatusCode::FORBIDDEN,
            "the watcher token may not access this path",
        );
    };
    if method != Method::GET {
        return refuse(StatusCode::FORBIDDEN, "the watcher token may only read");
    }
    let query: HashMap<String, String> = uri
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.replace("%2C", ",")))
                .collect()
        })
        .unwrap_or_default();
    let (cluster_id, infra_env_id) = sim.ids();
    match path {
        "/v2/clusters" => json_response(StatusCode::OK, &(vec![sim.cluster()])),
        "/v2/infra-envs" => json_response(
            StatusCode::OK,
            &(vec![InfraEnv {
                id: infra_env_id,
                name: format!("{}_infra-env", install.name),
                cluster_id: Some(cluster_id),
            }]),
        ),
        "/v2/events" => events(&sim, &query, &cluster_id, &infra_env_id),
        p => match p.strip_prefix("/v2/clusters/") {
            Some(id) if id == cluster_id => json_response(StatusCode::OK, &(sim.cluster())),
            Some(id) if !id.contains('/') => json_response(
                StatusCode::NOT_FOUND,
                &(serde_json::json!({"code": "404", "href": "", "id": 404, "kind": "Error",
                    "reason": format!("Cluster {id} not found")})),
            )
            .into_response(),
            _ => refuse(
                StatusCode::FORBIDDEN,
                "the watcher token may not access this path",
            ),
        },
    }
}

fn events(
    sim: &Simulator,
    query: &HashMap<String, String>,
    cluster_id: &str,
    infra_env_id: &str,
) -> Response {
    let by_cluster = query.get("cluster_id").map(String::as_str);
    let by_env = query.get("infra_env_id").map(String::as_str);
    if by_cluster.is_none() && by_env.is_none() {
        return refuse(
            StatusCode::FORBIDDEN,
            "the watcher token may only read events of a cluster or an infra-env",
        );
    }
    if by_cluster.is_some_and(|c| c != cluster_id) || by_env.is_some_and(|e| e != infra_env_id) {
        return json_response(StatusCode::OK, &(Vec::<()>::new()));
    }
    let severities: Vec<&str> = query
        .get("severities")
        .map(|s| s.split(',').collect())
        .unwrap_or_default();
    let events: Vec<_> = sim
        .events()
        .into_iter()
        .filter(|e| severities.is_empty() || severities.contains(&e.severity.as_str()))
        .collect();
    json_response(StatusCode::OK, &(events))
}

/// Checks an ES256 JWT: its signature by `public_key` (SEC1), `auth_scheme: watcherAuth` and
/// an `exp` in the future.
pub fn verify_watcher_token(token: &str, public_key: &[u8]) -> Result<(), String> {
    use aws_lc_rs::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
    let mut parts = token.split('.');
    let (Some(h), Some(c), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err("not a JWT".into());
    };
    let header: serde_json::Value = URL_SAFE_NO_PAD
        .decode(h)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("bad JWT header")?;
    if header["alg"] != "ES256" {
        return Err("not ES256".into());
    }
    let sig = URL_SAFE_NO_PAD.decode(s).map_err(|_| "bad JWT signature")?;
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, public_key)
        .verify(format!("{h}.{c}").as_bytes(), &sig)
        .map_err(|_| "the signature does not verify")?;
    let claims: serde_json::Value = URL_SAFE_NO_PAD
        .decode(c)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("bad JWT claims")?;
    if claims["auth_scheme"] != "watcherAuth" {
        return Err("not a watcher token".into());
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if claims["exp"].as_u64().is_none_or(|exp| exp <= now) {
        return Err("expired".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{EcdsaKeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

    fn sign(key: &EcdsaKeyPair, claims: serde_json::Value) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"ES256","typ":"JWT"}"#);
        let input = format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()));
        let sig = key
            .sign(&aws_lc_rs::rand::SystemRandom::new(), input.as_bytes())
            .unwrap();
        format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref()))
    }

    /// Only an unexpired watcherAuth token signed by the install's key passes: another scheme,
    /// an expired token, a changed claim and another key's signature are each refused.
    #[test]
    fn only_the_installs_unexpired_watcher_token_passes() {
        let key = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        let public = key.public_key().as_ref().to_vec();
        let far = 4_000_000_000u64;
        let good = sign(
            &key,
            serde_json::json!({"auth_scheme": "watcherAuth", "exp": far}),
        );
        assert_eq!(verify_watcher_token(&good, &public), Ok(()));
        let agent = sign(
            &key,
            serde_json::json!({"auth_scheme": "agentAuth", "exp": far}),
        );
        assert!(verify_watcher_token(&agent, &public).is_err());
        let expired = sign(
            &key,
            serde_json::json!({"auth_scheme": "watcherAuth", "exp": 1}),
        );
        assert_eq!(
            verify_watcher_token(&expired, &public),
            Err("expired".into())
        );
        let mut parts: Vec<&str> = good.split('.').collect();
        let forged_claims =
            URL_SAFE_NO_PAD.encode(br#"{"auth_scheme":"watcherAuth","exp":4000000001}"#);
        parts[1] = &forged_claims;
        assert!(verify_watcher_token(&parts.join("."), &public).is_err());
        let other = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
        assert!(verify_watcher_token(&good, other.public_key().as_ref()).is_err());
    }
}
