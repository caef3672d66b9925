//! Day two's cluster side (issue 29) against a scripted API on 127.0.0.1: one pass approves
//! exactly the joining node's CSR whose request names it and its inventory address, leaves a
//! CSR naming another host and one with a foreign address pending (said), and labels and
//! taints the joined Node: labels merged, taints (an atomic list) read and merged by key and
//! effect, the patch conditional on the Node's resourceVersion.

use crate::kube_hostile::{api, json, path_of, status};
use base64::Engine as _;
use bootstrap::openshift::api::{connect, Retry};
use bootstrap::openshift::csr::{Joining, Kind, CLIENT_SIGNER, NODE_BOOTSTRAPPER, SERVING_SIGNER};
use bootstrap::openshift::join::Join;
use rcgen::{CertificateParams, DnType, KeyPair, SanType};
use serde_json::Value;

const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
const NODES: &str = "/api/v1/nodes";

fn request(cn: &str, sans: Vec<SanType>) -> String {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    p.distinguished_name
        .push(DnType::OrganizationName, "system:nodes");
    p.subject_alt_names = sans;
    let pem = p
        .serialize_request(&KeyPair::generate().unwrap())
        .unwrap()
        .pem()
        .unwrap();
    base64::engine::general_purpose::STANDARD.encode(pem)
}

fn csr(
    name: &str,
    signer: &str,
    user: &str,
    groups: &[&str],
    usages: &[&str],
    req: String,
) -> Value {
    serde_json::json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"name": name}, "spec": {"signerName": signer, "username": user,
        "groups": groups, "usages": usages, "request": req}, "status": {}})
}

#[tokio::test]
async fn one_pass_approves_only_the_joining_nodes_matching_csrs_and_labels_the_node() {
    let boot_groups = [
        "system:serviceaccounts:openshift-machine-config-operator",
        "system:serviceaccounts",
        "system:authenticated",
    ];
    let client = csr(
        "csr-client",
        CLIENT_SIGNER,
        NODE_BOOTSTRAPPER,
        &boot_groups,
        &["digital signature", "client auth"],
        request("system:node:worker-0", vec![]),
    );
    let other = csr(
        "csr-other-host",
        CLIENT_SIGNER,
        NODE_BOOTSTRAPPER,
        &boot_groups,
        &["digital signature", "client auth"],
        request("system:node:intruder-1", vec![]),
    );
    let foreign_ip = csr(
        "csr-foreign-ip",
        SERVING_SIGNER,
        "system:node:worker-0",
        &["system:nodes", "system:authenticated"],
        &["digital signature", "server auth"],
        request(
            "system:node:worker-0",
            vec![
                SanType::DnsName("worker-0".try_into().unwrap()),
                SanType::IpAddress("10.9.9.9".parse().unwrap()),
            ],
        ),
    );
    let list = serde_json::json!({"apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequestList", "metadata": {},
        "items": [client, other, foreign_ip]});
    let nodes = serde_json::json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {},
        "items": [{"metadata": {"name": "master-0"}, "status": {
            "addresses": [{"type": "InternalIP", "address": "192.168.111.20"}],
            "conditions": [{"type": "Ready", "status": "True"}]}}]});
    let api = api(move |r| match (r.method.as_str(), path_of(&r.target)) {
        ("GET", CSRS) => json(200, list.clone()),
        ("GET", NODES) => json(200, nodes.clone()),
        ("PUT", p) if p.ends_with("/approval") => json(200, serde_json::json!({})),
        ("GET", "/api/v1/nodes/worker-0") => json(
            200,
            serde_json::json!({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "worker-0", "resourceVersion": "7"},
                "spec": {"taints": [
                    {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                    {"key": "nvidia.com/gpu", "value": "old", "effect": "NoSchedule"}]}}),
        ),
        ("PATCH", "/api/v1/nodes/worker-0") => json(
            200,
            serde_json::json!({
            "apiVersion": "v1", "kind": "Node", "metadata": {"name": "worker-0"}}),
        ),
        _ => status(404, "NotFound", "not here"),
    });
    let join = Join::new(
        connect(&api.kubeconfig, None, &[], Retry::NONE)
            .await
            .unwrap(),
    );
    let joining = [Joining {
        hostname: "worker-0".into(),
        fqdn: None,
        addresses: vec!["192.168.111.23".parse().unwrap()],
    }];
    let pass = join.pass(&joining, "2026-12-05T00:00:00Z").await.unwrap();
    assert_eq!(
        pass.approved,
        [(
            "csr-client".to_string(),
            "worker-0".to_string(),
            Kind::Client
        )]
    );
    let left: Vec<&str> = pass.left.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(
        left,
        ["csr-other-host", "csr-foreign-ip"],
        "{:#?}",
        pass.left
    );
    assert!(pass.left[1].2.contains("10.9.9.9"), "{:#?}", pass.left);
    assert!(pass.nodes.is_empty());
    let puts: Vec<String> = api
        .server
        .seen()
        .into_iter()
        .filter(|r| r.method == "PUT")
        .map(|r| r.target)
        .collect();
    assert_eq!(puts, [format!("{CSRS}/csr-client/approval")]);

    let labels = [("nvidia.com/gpu.present".to_string(), "true".to_string())].into();
    let taints = [bootstrap::inventory::model::Taint {
        key: "nvidia.com/gpu".into(),
        value: None,
        effect: "NoSchedule".into(),
    }];
    join.label("worker-0", &labels, &taints).await.unwrap();
    // The Node read first: its taints are an atomic list, so the patch carries them all, ours
    // merged in (the old nvidia.com/gpu:NoSchedule replaced, the cordon's kept), and the
    // resourceVersion read.
    let seen = api.server.seen();
    let patch = seen
        .iter()
        .find(|r| r.method == "PATCH" && r.target.starts_with("/api/v1/nodes/worker-0"))
        .expect("a PATCH of Node worker-0");
    let body: serde_json::Value = serde_json::from_slice(&patch.body).unwrap();
    assert_eq!(
        body,
        serde_json::json!({
            "metadata": {"labels": {"nvidia.com/gpu.present": "true"}, "resourceVersion": "7"},
            "spec": {"taints": [
                {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
                {"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}
        })
    );
}
