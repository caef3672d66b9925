//! The cluster's part of a support bundle: the rendezvous host's assisted-service through its
//! REST API with the run's watcher token while it is up (`rendezvous/`: clusters, infra-envs,
//! events per cluster and per infra-env; the watcher token opens nothing else, so its logs come
//! from the node's `agent` journal), and the new cluster's API while it answers (`cluster/`:
//! ClusterVersion, ClusterOperators, Nodes, CertificateSigningRequests), read with the
//! installer's kubeconfig. Either one not answering is recorded as not collected.

use super::bundle::Bundle;
use crate::install::rundir::InstallerDir;
use crate::openshift::api::{self, list_all, Retry};
use crate::openshift::assisted::{self, EventQuery};
use crate::openshift::readiness::{cluster_operator_resource, cluster_version_resource};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};

/// The rendezvous host's part.
pub async fn rendezvous(bundle: &Bundle, work: &InstallerDir) {
    const WHAT: &str = "rendezvous host (assisted-service)";
    let ip = match fs_err::read_to_string(work.rendezvous_ip()) {
        Ok(text) => text,
        Err(_) => {
            bundle.nothing_to_collect(
                None,
                WHAT,
                "the run has no rendezvousIP (the iso stage has not run)",
            );
            return;
        }
    };
    let Ok(ip) = ip.trim().parse::<std::net::IpAddr>() else {
        bundle.not_collected(
            None,
            WHAT,
            format!("rendezvousIP is not an address: {ip:?}"),
        );
        return;
    };
    let token = match crate::openshift::watch::watcher_token(&work.state()) {
        Ok(t) => t,
        Err(e) => {
            bundle.not_collected(None, WHAT, format!("no watcher token: {e:#}"));
            return;
        }
    };
    let client = match assisted::Client::rendezvous(ip, token) {
        Ok(c) => c,
        Err(e) => {
            bundle.not_collected(None, WHAT, format!("{e:#}"));
            return;
        }
    };
    let clusters = match client.clusters().await {
        Ok(c) => c,
        Err(e) => {
            bundle.not_collected(
                None,
                WHAT,
                format!("not answering (it stops once the cluster is installed): {e}"),
            );
            return;
        }
    };
    put(bundle, "rendezvous/clusters.json", &clusters);
    let mut queries: Vec<(String, EventQuery)> = clusters
        .iter()
        .map(|c| {
            let q = EventQuery {
                cluster_id: Some(c.id.clone()),
                ..EventQuery::default()
            };
            (format!("cluster-{}", c.id), q)
        })
        .collect();
    match client.infra_envs().await {
        Ok(envs) => {
            put(bundle, "rendezvous/infra-envs.json", &envs);
            queries.extend(envs.iter().map(|e| {
                let q = EventQuery {
                    infra_env_id: Some(e.id.clone()),
                    ..EventQuery::default()
                };
                (format!("infra-env-{}", e.id), q)
            }));
        }
        Err(e) => bundle.not_collected(None, "rendezvous infra-envs", e),
    }
    for (name, q) in queries {
        match client.events(&q).await {
            Ok(events) => put(bundle, &format!("rendezvous/events-{name}.json"), &events),
            Err(e) => bundle.not_collected(None, &format!("rendezvous events {name}"), e),
        }
    }
    bundle.nothing_to_collect(
        None,
        "rendezvous logs",
        "the watcher token opens only clusters, infra-envs and events; assisted-service's logs are in the rendezvous node's journal-agent",
    );
}

fn put(bundle: &Bundle, rel: &str, value: &impl serde::Serialize) {
    if let Err(e) = bundle.put_json(rel, value) {
        bundle.not_collected(None, rel, format!("writing it: {e:#}"));
    }
}

/// The cluster API's part.
pub async fn cluster_api(bundle: &Bundle, work: &InstallerDir, insecure: &[String]) {
    const WHAT: &str = "cluster API";
    let kubeconfig = work.kubeconfig();
    if !kubeconfig.is_file() {
        bundle.nothing_to_collect(
            None,
            WHAT,
            "the run has no auth/kubeconfig (the iso stage has not run)",
        );
        return;
    }
    let client = match api::connect(&kubeconfig, None, insecure, Retry::NONE).await {
        Ok(c) => c.client,
        Err(e) => {
            bundle.not_collected(None, WHAT, format!("{e:#}"));
            return;
        }
    };
    let kinds = [
        ("clusterversions", cluster_version_resource()),
        ("clusteroperators", cluster_operator_resource()),
        ("nodes", core("", "v1", "Node", "nodes")),
        (
            "csrs",
            core(
                "certificates.k8s.io",
                "v1",
                "CertificateSigningRequest",
                "certificatesigningrequests",
            ),
        ),
    ];
    for (name, resource) in kinds {
        let list: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        match list_all(&list, &resource.kind).await {
            Ok(items) => put(bundle, &format!("cluster/{name}.json"), &items),
            Err(e) if name == "clusterversions" => {
                // The first read tells whether the API answers at all: say it once.
                bundle.not_collected(None, WHAT, format!("not answering: {e:#}"));
                return;
            }
            Err(e) => bundle.not_collected(None, &format!("cluster {name}"), format!("{e:#}")),
        }
    }
}

fn core(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}
