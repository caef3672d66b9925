//! Authentication: Basic credentials from the auth file, or Bearer tokens fetched from the
//! registry's token service, cached per scope and refreshed before they expire, so a transfer
//! that outlives a token keeps going.

use super::transport::Origin;
use super::{Access, RegistryClient, RegistryError, Result};
use crate::oci::auth::{basic_header, Challenge, Credentials};
use crate::secret::Secret;
use reqwest::StatusCode;
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Default)]
pub(super) struct AuthState {
    pub(super) mode: Option<Challenge>,
    tokens: HashMap<String, Token>,
}

struct Token {
    value: Secret,
    refresh_after: Instant,
}

pub(super) fn scope_string(scopes: &[(&str, Access)]) -> String {
    scopes
        .iter()
        .map(|(repo, access)| match access {
            Access::Pull => format!("repository:{repo}:pull"),
            Access::Push => format!("repository:{repo}:pull,push"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

impl RegistryClient {
    pub(super) fn credentials(&self, scopes: &[(&str, Access)]) -> Option<Credentials> {
        let repo = scopes.first().map(|(r, _)| *r);
        self.authfile.lookup(&self.host, repo).cloned()
    }

    /// The Authorization header for a request with these scopes, fetching a token if needed.
    pub(super) async fn authorization(
        &self,
        scopes: &[(&str, Access)],
        force: bool,
    ) -> Result<Option<String>> {
        let mut state = self.state.lock().await;
        match state.mode.clone() {
            None => Ok(None),
            Some(Challenge::Basic) => Ok(self.credentials(scopes).map(|c| basic_header(&c))),
            Some(Challenge::Bearer { realm, service, .. }) => {
                let key = scope_string(scopes);
                if !force {
                    if let Some(t) = state.tokens.get(&key) {
                        if Instant::now() < t.refresh_after {
                            return Ok(Some(format!("Bearer {}", t.value.expose())));
                        }
                    }
                }
                let token = self.fetch_token(&realm, service.as_deref(), scopes).await?;
                let header = format!("Bearer {}", token.value.expose());
                state.tokens.insert(key, token);
                Ok(Some(header))
            }
        }
    }

    async fn fetch_token(
        &self,
        realm: &str,
        service: Option<&str>,
        scopes: &[(&str, Access)],
    ) -> Result<Token> {
        let mut query: Vec<(&str, String)> = Vec::new();
        if let Some(s) = service {
            query.push(("service", s.to_string()));
        }
        for s in scope_string(scopes).split(' ') {
            query.push(("scope", s.to_string()));
        }
        let creds = self.credentials(scopes);
        let realm_url: reqwest::Url = realm.parse().map_err(|_| RegistryError::Protocol {
            registry: self.host.clone(),
            message: format!(
                "the Bearer challenge names a token realm that is not a URL ({})",
                crate::secret::server_text(realm, 160)
            ),
        })?;
        let req = self.http.get(realm_url.clone()).query(&query);
        // The user's credentials go to the realm the registry named, under the realm host's own
        // settings (verified TLS, or plain HTTP only when named so), and to no redirect target.
        let credential = creds
            .as_ref()
            .map(|c| (basic_header(c), Origin::of(&realm_url)));
        let started = Instant::now();
        let resp = self
            .route(req, credential, "the token realm")
            .await
            .map_err(|e| match e {
                RegistryError::Connect {
                    registry,
                    message,
                    transient,
                } => RegistryError::Connect {
                    registry,
                    message: format!("token service {realm}: {message}"),
                    transient,
                },
                other => other,
            })?;
        let status = resp.status();
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return Err(self.refused(
                creds.as_ref(),
                &format!("the token service answered {status}"),
            ));
        }
        if !status.is_success() {
            return Err(RegistryError::Protocol {
                registry: self.host.clone(),
                message: format!("token service {realm} answered HTTP {status}"),
            });
        }
        let body = crate::oci::stream::read_body(resp, crate::oci::stream::TOKEN_BODY_MAX)
            .await
            .map_err(|e| RegistryError::Protocol {
                registry: self.host.clone(),
                message: format!("token service {realm} sent an unreadable answer: {e}"),
            })?;
        self.token_from_answer(&body, realm, started)
    }

    /// A token answer's token and when to refresh it; errors say where and what kind of
    /// problem, never a value.
    fn token_from_answer(&self, body: &[u8], realm: &str, started: Instant) -> Result<Token> {
        #[derive(serde::Deserialize)]
        struct TokenResponse {
            token: Option<String>,
            access_token: Option<String>,
            expires_in: Option<u64>,
        }
        let body: TokenResponse =
            // serde_json's message may quote a value, and a token answer's values are tokens:
            // say where and what kind, never the value.
            serde_json::from_slice(body).map_err(|e| RegistryError::Protocol {
                registry: self.host.clone(),
                message: format!(
                    "token service {realm} sent an answer that is not a token response (JSON {:?} problem at line {}, column {}; values are not shown)",
                    e.classify(),
                    e.line(),
                    e.column()
                ),
            })?;
        let value = body
            .token
            .or(body.access_token)
            .ok_or_else(|| RegistryError::Protocol {
                registry: self.host.clone(),
                message: format!("token service {realm} sent no token"),
            })?;
        // The spec's default lifetime is 60 s; refresh at 80% of it so no request carries a
        // token that expires in flight.
        let lifetime = Duration::from_secs(body.expires_in.unwrap_or(60).max(1));
        Ok(Token {
            value: Secret::new(value),
            refresh_after: started + lifetime.mul_f64(0.8),
        })
    }

    pub(super) fn refused(&self, creds: Option<&Credentials>, detail: &str) -> RegistryError {
        let message = match creds {
            Some(c) => format!(
                "authentication failed for user '{}' ({detail}); check the entry for {} in {}",
                c.username,
                self.host,
                self.authfile.describe()
            ),
            None => format!(
                "authentication required ({detail}) and {} has no entry for {}: add one, or pass --authfile FILE",
                self.authfile.describe(),
                self.host
            ),
        };
        RegistryError::Unauthorized {
            registry: self.host.clone(),
            message,
        }
    }

    /// Drops the cached token for these scopes, so the next request fetches a new one.
    pub(super) async fn forget_token(&self, scopes: &[(&str, Access)]) {
        self.state.lock().await.tokens.remove(&scope_string(scopes));
    }
}
