//! The new cluster's Kubernetes API, as the wait stage (and `kubectl get`) reads it: HTTPS on
//! port 6443 with the serving certificate the booted ISO carries (signed by the CA of the
//! installer's kubeconfig, for `api.NAME.DOMAIN`), answered from the [`Simulator`].
//!
//! What it imitates: bearer-token authentication (the kubeconfig's admin token, checked against
//! the sha256 the ISO carries; anything else is 401 with a `Status` body); `GET` of ConfigMap
//! `kube-system/bootstrap` (`data.status: complete` once bootstrap is done; 404 `Status` before),
//! ClusterVersion `version` (Progressing, then Available), the ClusterOperators (list and one;
//! Progressing, then Available one per step), Route `openshift-console/console` (admitted at the
//! end); and enough discovery (`/version`, `/api`, `/apis`, `/api/v1`, the two groups'
//! resource lists) for `kubectl get` to find them. The API answers only once node 0 has
//! rebooted into the cluster (see [`super::gate`]).
//!
//! What it does not: watches, writes, field or label selectors, tables (`kubectl` falls back to
//! the plain objects), any other kind or namespace, aggregated discovery, or OpenAPI.

use super::gate::{AcceptorFn, GatedTlsListener};
use super::json_response;
use super::simulator::{ApiView, Simulator, OPERATORS};
use anyhow::Result;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// Serves the stand-in on `listener` until an error.
pub async fn serve(sim: Arc<Simulator>, listener: std::net::TcpListener) -> Result<()> {
    let cached: Arc<Mutex<Option<tokio_rustls::TlsAcceptor>>> = Arc::default();
    let acceptor: AcceptorFn = {
        let sim = sim.clone();
        Arc::new(move || {
            let mut c = cached.lock().unwrap_or_else(|e| e.into_inner());
            if c.is_none() {
                let install = sim.install()?;
                *c = tls_acceptor(&install.api_cert_pem, &install.api_key_pem).ok();
            }
            c.clone()
        })
    };
    let gated = GatedTlsListener::new(listener, sim.api_gate.clone(), acceptor)?;
    let app = axum::Router::new().fallback(handle).with_state(sim);
    axum::serve(gated, app).await?;
    Ok(())
}

pub(crate) fn tls_acceptor(cert_pem: &str, key_pem: &str) -> Result<tokio_rustls::TlsAcceptor> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs =
        CertificateDer::pem_slice_iter(cert_pem.as_bytes()).collect::<Result<Vec<_>, _>>()?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_no_client_auth()
    .with_single_cert(certs, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

fn status(code: StatusCode, reason: &str, message: &str) -> Response {
    json_response(
        code,
        &(json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code.as_u16()})),
    )
    .into_response()
}

async fn handle(
    State(sim): State<Arc<Simulator>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    let view = sim.cluster_api_view();
    let Some(install) = view.install.clone() else {
        return status(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceUnavailable",
            "not installed",
        );
    };
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let sha = crate::oci::digest::Digest::of(token.as_bytes());
    if token.is_empty() || sha.hex() != install.admin_token_sha256 {
        return status(StatusCode::UNAUTHORIZED, "Unauthorized", "Unauthorized");
    }
    if method != Method::GET {
        return status(
            StatusCode::METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            "the lab's cluster API stand-in only reads",
        );
    }
    match answer(uri.path(), &view, &install.name, &install.domain) {
        Some(v) => json_response(StatusCode::OK, &(v)),
        None => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            &format!(
                "the server could not find the requested resource ({})",
                uri.path()
            ),
        ),
    }
}

fn answer(path: &str, view: &ApiView, name: &str, domain: &str) -> Option<Value> {
    let path = path.trim_end_matches('/');
    Some(match path {
        "/version" => json!({"major": "1", "minor": "31", "gitVersion": "v1.31.6",
            "platform": "linux/amd64", "goVersion": "go1.22.12", "compiler": "gc"}),
        "/api" => json!({"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "0.0.0.0:6443"}]}),
        "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            group("config.openshift.io"), group("route.openshift.io")]}),
        "/api/v1" => resources("v1", &[("configmaps", "ConfigMap", true)]),
        "/apis/config.openshift.io/v1" => resources(
            "config.openshift.io/v1",
            &[
                ("clusterversions", "ClusterVersion", false),
                ("clusteroperators", "ClusterOperator", false),
            ],
        ),
        "/apis/route.openshift.io/v1" => {
            resources("route.openshift.io/v1", &[("routes", "Route", true)])
        }
        "/api/v1/namespaces/kube-system/configmaps/bootstrap" => {
            if !view.bootstrap_complete {
                return None;
            }
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "bootstrap", "namespace": "kube-system"},
                "data": {"status": "complete"}})
        }
        "/apis/config.openshift.io/v1/clusterversions/version" => cluster_version(view),
        "/apis/config.openshift.io/v1/clusterversions" => list(
            "ClusterVersionList",
            "config.openshift.io/v1",
            vec![cluster_version(view)],
        ),
        "/apis/config.openshift.io/v1/clusteroperators" => list(
            "ClusterOperatorList",
            "config.openshift.io/v1",
            (0..OPERATORS.len()).map(|i| operator(view, i)).collect(),
        ),
        "/apis/route.openshift.io/v1/namespaces/openshift-console/routes/console" => {
            route(view, name, domain)
        }
        "/apis/route.openshift.io/v1/namespaces/openshift-console/routes" => list(
            "RouteList",
            "route.openshift.io/v1",
            vec![route(view, name, domain)],
        ),
        p => {
            let one = p.strip_prefix("/apis/config.openshift.io/v1/clusteroperators/")?;
            operator(view, OPERATORS.iter().position(|o| *o == one)?)
        }
    })
}

fn group(name: &str) -> Value {
    let v = json!({"groupVersion": format!("{name}/v1"), "version": "v1"});
    json!({"name": name, "versions": [v.clone()], "preferredVersion": v})
}

fn resources(group_version: &str, list: &[(&str, &str, bool)]) -> Value {
    let resources: Vec<Value> = list
        .iter()
        .map(|(plural, kind, namespaced)| {
            json!({"name": plural, "singularName": kind.to_lowercase(), "namespaced": namespaced,
                "kind": kind, "verbs": ["get", "list"]})
        })
        .collect();
    json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
        "resources": resources})
}

fn list(kind: &str, api_version: &str, items: Vec<Value>) -> Value {
    json!({"kind": kind, "apiVersion": api_version, "metadata": {"resourceVersion": "1"},
        "items": items})
}

fn condition(kind: &str, on: bool, message: &str) -> Value {
    json!({"type": kind, "status": if on { "True" } else { "False" },
        "lastTransitionTime": super::simulator::now(), "message": message})
}

fn cluster_version(view: &ApiView) -> Value {
    let done = view.installed;
    let msg = if done {
        "Cluster version is 4.18.3".to_string()
    } else {
        format!(
            "Working towards 4.18.3: {} of {} operators available",
            view.operators_available,
            OPERATORS.len()
        )
    };
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "spec": {"clusterID": "00000000-0000-4000-8000-000000000000"},
        "status": {"desired": {"version": "4.18.3"}, "conditions": [
            condition("Available", done, &msg),
            condition("Failing", false, ""),
            condition("Progressing", !done, &msg)]}})
}

fn operator(view: &ApiView, i: usize) -> Value {
    let available = i < view.operators_available;
    let msg = if available {
        "All is well"
    } else {
        "Rolling out"
    };
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
        "metadata": {"name": OPERATORS[i]},
        "status": {"conditions": [
            condition("Available", available, msg),
            condition("Degraded", false, ""),
            condition("Progressing", !available, msg)]}})
}

fn route(view: &ApiView, name: &str, domain: &str) -> Value {
    let host = format!("console-openshift-console.apps.{name}.{domain}");
    let admitted = view.installed;
    json!({"apiVersion": "route.openshift.io/v1", "kind": "Route",
        "metadata": {"name": "console", "namespace": "openshift-console"},
        "spec": {"host": host, "to": {"kind": "Service", "name": "console"}},
        "status": {"ingress": [{"host": host, "routerName": "default",
            "conditions": [condition("Admitted", admitted, "")]}]}})
}
