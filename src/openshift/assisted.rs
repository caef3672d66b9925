//! The watcher's view of assisted-service, the REST API the rendezvous host (node 0) runs
//! while the agent-based install is under way: `http://<rendezvousIP>:8090/api/assisted-install`,
//! plain HTTP, authorised by the header `Watcher-Authorization: <JWT>` (no "Bearer"). The
//! watcher token opens exactly four endpoints, and this client calls only those:
//! `GET /v2/clusters`, `GET /v2/clusters/{id}`, `GET /v2/infra-envs` and `GET /v2/events`.
//!
//! The models are assisted-service's (`swagger.yaml`: `cluster`, `host`, `infra-env`, `event`),
//! reduced to the fields `openshift-install agent wait-for` reads; they serialise back to the
//! same names, which is how the lab's rendezvous stand-in answers with the real shapes. A
//! cluster's or host's `validations_info` is a JSON string inside the JSON;
//! [`validations`] parses it.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// The port assisted-service listens on at the rendezvous host.
pub const PORT: u16 = 8090;
/// The API's path prefix.
pub const BASE_PATH: &str = "/api/assisted-install";
/// The header that carries the watcher token.
pub const WATCHER_HEADER: &str = "Watcher-Authorization";

/// A cluster (`GET /v2/clusters/{id}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cluster {
    /// Its UUID.
    pub id: String,
    /// Its name (`metadata.name` of install-config).
    #[serde(default)]
    pub name: String,
    /// `insufficient`, `ready`, `error`, `preparing-for-installation`, `pending-for-input`,
    /// `installing`, `finalizing`, `installed`, `adding-hosts`, `cancelled`,
    /// `installing-pending-user-action`.
    pub status: String,
    /// Why it has that status, in words.
    #[serde(default)]
    pub status_info: String,
    /// How far the installation is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ClusterProgress>,
    /// Its hosts.
    #[serde(default)]
    pub hosts: Vec<Host>,
    /// The cluster's validations, a JSON string ([`validations`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validations_info: Option<String>,
    /// When the installation started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_started_at: Option<String>,
    /// When it completed (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_completed_at: Option<String>,
}

/// `cluster-progress-info`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterProgress {
    /// The whole installation, 0 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_percentage: Option<i64>,
    /// The preparation stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preparing_for_installation_stage_percentage: Option<i64>,
    /// The installing stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installing_stage_percentage: Option<i64>,
    /// The finalizing stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizing_stage_percentage: Option<i64>,
    /// What finalizing is doing (`Waiting for cluster operators`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalizing_stage: Option<String>,
}

/// A host of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Host {
    /// Its UUID.
    pub id: String,
    /// Its infra-env.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra_env_id: Option<String>,
    /// The host name it was given (agent-config's `hosts[].hostname`).
    #[serde(default)]
    pub requested_hostname: String,
    /// `master`, `worker`, `auto-assign`, `bootstrap`.
    #[serde(default)]
    pub role: String,
    /// Whether it is the bootstrap host (node 0, the rendezvous host).
    #[serde(default)]
    pub bootstrap: bool,
    /// `discovering`, `known`, `insufficient`, `preparing-for-installation`, `installing`,
    /// `installing-in-progress`, `installing-pending-user-action`, `installed`, `error`, ...
    pub status: String,
    /// Why it has that status, in words.
    #[serde(default)]
    pub status_info: String,
    /// Its installation's progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<HostProgress>,
    /// The host's validations, a JSON string ([`validations`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validations_info: Option<String>,
}

/// `host-progress-info`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostProgress {
    /// 0 to 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installation_percentage: Option<i64>,
    /// `Starting installation`, `Waiting for control plane`, `Waiting for bootkube`, `Waiting
    /// for controller`, `Installing`, `Writing image to disk`, `Rebooting`, `Waiting for
    /// ignition`, `Configuring`, `Joined`, `Done`, `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_stage: Option<String>,
    /// Details of the stage (`Writing image to disk: 42%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_info: Option<String>,
    /// When the stage started (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_started_at: Option<String>,
    /// When it was last updated (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage_updated_at: Option<String>,
}

/// An infra-env (`GET /v2/infra-envs`): the image's view of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InfraEnv {
    /// Its UUID.
    pub id: String,
    /// Its name.
    #[serde(default)]
    pub name: String,
    /// The cluster it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
}

/// An event (`GET /v2/events`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The event's kind (`host_registration_succeeded`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The cluster it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// The host it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_id: Option<String>,
    /// The infra-env it is about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infra_env_id: Option<String>,
    /// `info`, `warning`, `error`, `critical`.
    pub severity: String,
    /// What happened.
    pub message: String,
    /// When (RFC 3339).
    pub event_time: String,
}

impl Event {
    /// Whether the watcher shows it: warnings and worse.
    pub fn is_warning_or_worse(&self) -> bool {
        matches!(self.severity.as_str(), "warning" | "error" | "critical")
    }

    /// A key that names the event among all events: its time and message (events have no id).
    pub fn key(&self) -> String {
        format!("{} {}", self.event_time, self.message)
    }
}

/// One validation of `validations_info`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validation {
    /// Its id (`has-min-cpu-cores`).
    pub id: String,
    /// `success`, `failure`, `error`, `pending`, `disabled`.
    pub status: String,
    /// What it found.
    #[serde(default)]
    pub message: String,
}

impl Validation {
    /// Whether it failed (`failure` or `error`, as the installer counts them).
    pub fn failed(&self) -> bool {
        matches!(self.status.as_str(), "failure" | "error")
    }
}

/// A `validations_info` string parsed: category (`hardware`, `network`) -> validations.
pub fn validations(info: &str) -> Result<BTreeMap<String, Vec<Validation>>, serde_json::Error> {
    if info.trim().is_empty() {
        return Ok(BTreeMap::new());
    }
    serde_json::from_str(info)
}

/// assisted-service's error body for an authorisation failure (`infra_error`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct InfraError {
    /// The HTTP status (401, 403).
    pub code: i32,
    /// Why.
    pub message: String,
}

/// Why a call failed, so the watcher can tell "node 0 is gone" from "we are refused".
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// No answer: connection refused, reset or timed out (node 0 rebooting, or not up yet).
    #[error("{url}: no answer: {reason}")]
    Unreachable {
        /// The URL called.
        url: String,
        /// The transport's reason.
        reason: String,
    },
    /// 401 or 403: the watcher token is not accepted.
    #[error("{url}: {code}: {message} (the watcher token is refused)")]
    Refused {
        /// The URL called.
        url: String,
        /// 401 or 403.
        code: u16,
        /// The server's message.
        message: String,
    },
    /// Any other status.
    #[error("{url}: HTTP {code}: {body}")]
    Status {
        /// The URL called.
        url: String,
        /// The status.
        code: u16,
        /// The start of the body.
        body: String,
    },
    /// An answer that is not the model.
    #[error("{url}: the answer is not what assisted-service sends: {reason}")]
    Decode {
        /// The URL called.
        url: String,
        /// The decoder's reason.
        reason: String,
    },
}

/// Which events (`GET /v2/events` query).
#[derive(Clone, Debug, Default)]
pub struct EventQuery {
    /// `cluster_id`.
    pub cluster_id: Option<String>,
    /// `infra_env_id`.
    pub infra_env_id: Option<String>,
    /// `severities` (comma separated on the wire).
    pub severities: Vec<String>,
}

/// A watcher client of one rendezvous host. Its token is never shown (no `Debug` of it).
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client of `http://HOST:PORT/api/assisted-install` (`authority` is `HOST:PORT`, an
    /// IPv6 host in brackets) with `token`, each call limited to `timeout`.
    pub fn new(authority: &str, token: String, timeout: Duration) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()?;
        Ok(Client {
            http,
            base: format!("http://{authority}{BASE_PATH}"),
            token,
        })
    }

    /// The rendezvous host's API: `ip` port 8090.
    pub fn rendezvous(ip: std::net::IpAddr, token: String) -> anyhow::Result<Self> {
        let authority = std::net::SocketAddr::new(ip, PORT).to_string();
        Self::new(&authority, token, Duration::from_secs(10))
    }

    /// `GET /v2/clusters`.
    pub async fn clusters(&self) -> Result<Vec<Cluster>, ApiError> {
        self.get("/v2/clusters", &[]).await
    }

    /// `GET /v2/clusters/{id}`.
    pub async fn cluster(&self, id: &str) -> Result<Cluster, ApiError> {
        self.get(&format!("/v2/clusters/{id}"), &[]).await
    }

    /// `GET /v2/infra-envs`.
    pub async fn infra_envs(&self) -> Result<Vec<InfraEnv>, ApiError> {
        self.get("/v2/infra-envs", &[]).await
    }

    /// `GET /v2/events?...`.
    pub async fn events(&self, q: &EventQuery) -> Result<Vec<Event>, ApiError> {
        let mut query = Vec::new();
        if let Some(c) = &q.cluster_id {
            query.push(("cluster_id", c.clone()));
        }
        if let Some(i) = &q.infra_env_id {
            query.push(("infra_env_id", i.clone()));
        }
        if !q.severities.is_empty() {
            query.push(("severities", q.severities.join(",")));
        }
        self.get("/v2/events", &query).await
    }

    async fn get<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<T, ApiError> {
        let url = format!("{}{path}", self.base);
        let unreachable = |e: reqwest::Error| ApiError::Unreachable {
            url: url.clone(),
            reason: error_chain(&e),
        };
        let resp = self
            .http
            .get(&url)
            .query(query)
            .header(WATCHER_HEADER, &self.token)
            .send()
            .await
            .map_err(unreachable)?;
        let code = resp.status().as_u16();
        let body = resp.bytes().await.map_err(unreachable)?;
        match code {
            200 => serde_json::from_slice(&body).map_err(|e| ApiError::Decode {
                url: url.clone(),
                reason: e.to_string(),
            }),
            401 | 403 => Err(ApiError::Refused {
                url,
                code,
                message: serde_json::from_slice::<InfraError>(&body)
                    .map(|e| e.message)
                    .unwrap_or_else(|_| String::from_utf8_lossy(&body).trim().to_string()),
            }),
            _ => Err(ApiError::Status {
                url,
                code,
                body: String::from_utf8_lossy(&body).chars().take(300).collect(),
            }),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        source = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cluster as assisted-service sends it parses, with its hosts' progress, and its
    /// `validations_info` string parses into failed and passed validations.
    #[test]
    fn a_cluster_in_the_swagger_shape_parses() {
        let json = r#"{"id":"c1","name":"lab","status":"installing","status_info":"Installation in progress",
          "kind":"Cluster","progress":{"total_percentage":42,"installing_stage_percentage":40},
          "validations_info":"{\"network\":[{\"id\":\"api-vips-defined\",\"status\":\"success\",\"message\":\"ok\"}]}",
          "hosts":[{"id":"h1","kind":"Host","requested_hostname":"m0","role":"master","bootstrap":true,
            "status":"installing-in-progress","status_info":"","progress":{"current_stage":"Writing image to disk",
            "installation_percentage":30,"stage_started_at":"2026-01-01T00:00:00Z"},
            "validations_info":"{\"hardware\":[{\"id\":\"has-min-cpu-cores\",\"status\":\"failure\",\"message\":\"too few\"}]}"}]}"#;
        let c: Cluster = serde_json::from_str(json).unwrap();
        assert_eq!(
            c.hosts[0]
                .progress
                .as_ref()
                .unwrap()
                .installation_percentage,
            Some(30)
        );
        let v = validations(c.hosts[0].validations_info.as_deref().unwrap()).unwrap();
        assert!(v["hardware"][0].failed());
        let v = validations(c.validations_info.as_deref().unwrap()).unwrap();
        assert!(!v["network"][0].failed());
    }
}
