//! The new cluster's Kubernetes API: HTTPS on port 6443 with the serving certificate the booted
//! ISO carries (signed by the CA of the installer's kubeconfig, for `api.NAME.DOMAIN`), answered
//! by the lab's Kubernetes API stand-in ([`super::kube`]: discovery, get/list/watch-free reads,
//! server-side apply, the status subresource, dry run, strict validation, RBAC, tables) over the
//! [`Simulator`]'s store. It answers once node 0 runs the bootstrap control plane (see
//! [`super::gate`]).
//!
//! The install's progress is written into the store as a real cluster's operators write it:
//! ConfigMap `kube-system/bootstrap` (`data.status: complete` once bootstrap is done; absent,
//! so 404, before), ClusterVersion `version` (Progressing, then Available), the ClusterOperators
//! (each with Available, Progressing and Degraded as openshift/api config/v1 types_cluster_operator.go
//! defines them: Available one per step, Progressing until a step later), Route
//! `openshift-console/console` (admitted at the end). The
//! kubeconfig's admin token (checked against the sha256 the ISO carries) is `system:admin`;
//! anything else is 401 with a `Status` body. The lab's OLM and Argo CD imitations work on the
//! same store (`bootstrap-lab site-run` starts them), so the hand-off runs against this API as against a
//! site's.
//!
//! What it does not: watches, aggregated discovery, OpenAPI, or any OpenShift API beyond the
//! CRDs the lab registers.

use super::gate::{AcceptorFn, GatedTlsListener};
use super::kube::http::{router, Api};
use super::kube::Store;
use super::olm::objects;
use super::simulator::{ApiView, Simulator, OPERATORS};
use anyhow::{Context, Result};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};

/// The field manager of the install's own objects (the cluster-version operator's, on a site).
const FIELD_MANAGER: &str = "cluster-version-operator";

/// Serves the stand-in on `listener` until an error (the simulator writes the install's
/// progress into the store, [`write_view`]).
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
    let app = router(Api {
        store: sim.store.clone(),
        auth: sim.api_auth.clone(),
    });
    axum::serve(gated, app)
        .await
        .context("serving the cluster API")
}

/// The install's objects as the view has them: each applied, then its status written.
pub(crate) fn write_view(store: &Store, view: &ApiView, name: &str, domain: &str) -> Result<()> {
    if view.bootstrap_complete {
        objects::create_absent(
            store,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "bootstrap", "namespace": "kube-system"},
                "data": {"status": "complete"}}),
            FIELD_MANAGER,
        )?;
    }
    objects::create_absent(
        store,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-console"}}),
        FIELD_MANAGER,
    )?;
    if let Some(install) = view.install.as_ref().filter(|_| view.installed) {
        for (host, role) in &install.hosts {
            let addresses = install.addresses.get(host).cloned().unwrap_or_default();
            super::join::kubelet::register_node(store, host, role, &addresses)?;
            super::join::kubelet::mark_ready(store, host)?;
        }
    }
    let mut objs = vec![cluster_version(view), route(view, name, domain)];
    objs.extend(
        OPERATORS
            .iter()
            .zip(&view.operators)
            .map(|(name, state)| operator(name, *state)),
    );
    for mut obj in objs {
        let status = obj["status"].take();
        if let Some(m) = obj.as_object_mut() {
            m.remove("status");
        }
        let applied = objects::apply(store, obj, FIELD_MANAGER)?;
        objects::write_status(store, &applied, status, FIELD_MANAGER)?;
    }
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
            view.operators
                .iter()
                .filter(|(available, _)| *available)
                .count(),
            OPERATORS.len()
        )
    };
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
        "metadata": {"name": "version"},
        "spec": {"clusterID": "00000000-0000-4000-8000-000000000000"},
        "status": {"desired": {"version": "4.18.3",
                "image": "quay.io/openshift-release-dev/ocp-release:4.18.3-x86_64"},
            // An air-gapped cluster has no update service: no updates are known.
            "availableUpdates": null, "observedGeneration": 1, "versionHash": "lab-4.18.3",
            "conditions": [
            condition("Available", done, &msg),
            condition("Failing", false, ""),
            condition("Progressing", !done, &msg)]}})
}

/// A ClusterOperator with its (Available, Progressing) conditions; never Degraded.
fn operator(name: &str, (available, progressing): (bool, bool)) -> Value {
    let msg = match (available, progressing) {
        (true, false) => "All is well",
        (true, true) => "Rolling out the new revision; the previous one serves",
        (false, _) => "Rolling out",
    };
    json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
        "metadata": {"name": name}, "spec": {},
        "status": {"conditions": [
            condition("Available", available, msg),
            condition("Degraded", false, ""),
            condition("Progressing", progressing, msg)]}})
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::kube::ObjectRef;

    fn get(store: &Store, api_version: &str, kind: &str, ns: Option<&str>, name: &str) -> Value {
        store
            .get(&ObjectRef {
                api_version: api_version.into(),
                kind: kind.into(),
                namespace: ns.map(String::from),
                name: name.into(),
            })
            .unwrap_or_else(|e| panic!("{kind} {name}: {}", e.message))
    }

    /// Each stage of the install is written as valid objects (the CRDs' schemas accept them),
    /// and the next stage's status replaces the last.
    #[test]
    fn the_install_progress_is_written_as_valid_objects() {
        let store = Store::lab_cluster().unwrap();
        crate::site::olm::seed(&store).unwrap();
        let mut view = ApiView {
            bootstrap_complete: true,
            operators: vec![
                (true, false),
                (true, true),
                (false, true),
                (false, true),
                (false, true),
            ],
            installed: false,
            install: None,
        };
        write_view(&store, &view, "lab", "example.com").unwrap();
        let cm = get(&store, "v1", "ConfigMap", Some("kube-system"), "bootstrap");
        assert_eq!(cm["data"]["status"], "complete");
        let console = get(
            &store,
            "config.openshift.io/v1",
            "ClusterOperator",
            None,
            "console",
        );
        assert!(
            console["status"]["conditions"]
                .to_string()
                .contains("Rolling out"),
            "{console}"
        );
        view.operators = vec![(true, false); OPERATORS.len()];
        view.installed = true;
        write_view(&store, &view, "lab", "example.com").unwrap();
        let cv = get(
            &store,
            "config.openshift.io/v1",
            "ClusterVersion",
            None,
            "version",
        );
        let available = cv["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "Available")
            .cloned()
            .unwrap();
        assert_eq!(available["status"], "True", "{cv}");
        let route = get(
            &store,
            "route.openshift.io/v1",
            "Route",
            Some("openshift-console"),
            "console",
        );
        assert_eq!(
            route["spec"]["host"],
            "console-openshift-console.apps.lab.example.com"
        );
    }
}
