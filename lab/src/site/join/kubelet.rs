//! What a joining node's kubelet and the cluster's kube-controller-manager write, each as
//! upstream does it:
//!
//! - The client CSR: kubernetes `pkg/kubelet/certificate/bootstrap/bootstrap.go`
//!   (`requestNodeCertificate`): an ECDSA P-256 key, subject `O=system:nodes,
//!   CN=system:node:NAME`, no SANs, usages `digital signature, client auth`, signer
//!   `kubernetes.io/kube-apiserver-client-kubelet`, created with the bootstrap credentials
//!   (on OpenShift the machine-config-operator's `node-bootstrapper` service account, with
//!   its three groups: cluster-machine-approver `pkg/controller/csr_check.go`,
//!   `nodeBootstrapperGroups`), `generateName: csr-` (`k8s.io/client-go/util/certificate/csr`,
//!   the API server makes the name).
//! - The serving CSR: kubernetes `pkg/kubelet/certificate/kubelet.go`
//!   (`NewKubeletServerCertificateManager`): the same subject, SANs the node's hostname and
//!   addresses, usages `digital signature, server auth`, signer `kubernetes.io/kubelet-serving`,
//!   created as the node (`system:node:NAME`, groups `system:nodes`, `system:authenticated`).
//! - The signer: kubernetes `pkg/controller/certificates/signer/signer.go` (`handle`): an
//!   approved CSR of a signer it serves, not failed and not yet issued, gets
//!   `status.certificate`, the certificate (PEM) its CA signs from the request.
//! - The Node the kubelet registers (`pkg/kubelet/kubelet_node_status.go`, `initialNode`):
//!   `kubernetes.io/hostname`, `kubernetes.io/os`, `kubernetes.io/arch` and the `--node-labels`
//!   OpenShift's worker kubelet is given (`node-role.kubernetes.io/worker`), its addresses
//!   (InternalIP, Hostname), `nodeInfo`, and NotReady with the node lifecycle controller's
//!   `node.kubernetes.io/not-ready:NoSchedule` taint until the kubelet reports Ready.

use crate::site::kube::{ObjectRef, Store};
use crate::site::olm::objects;
use anyhow::{Context, Result};
use rcgen::{
    CertificateParams, DistinguishedName, DnType, KeyPair, SanType, PKCS_ECDSA_P256_SHA256,
};
use serde_json::{json, Value};

/// The client CSR's signer.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The serving CSR's signer.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// Who asks for the client certificate on OpenShift.
pub const NODE_BOOTSTRAPPER: &str =
    "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
/// The node-bootstrapper's groups, exactly.
pub const NODE_BOOTSTRAPPER_GROUPS: [&str; 3] = [
    "system:serviceaccounts:openshift-machine-config-operator",
    "system:serviceaccounts",
    "system:authenticated",
];
/// The CSR's API version.
pub const CSR_V1: &str = "certificates.k8s.io/v1";
/// The field manager the kubelet's writes carry.
const KUBELET: &str = "kubelet";
/// The kubelet version OpenShift 4.18 ships.
pub const KUBELET_VERSION: &str = "v1.31.6";

/// A CSR's request: who the kubelet says it is and what for.
pub struct Request<'a> {
    /// The node name (`system:node:NAME`).
    pub node: &'a str,
    /// DNS SANs (serving only).
    pub dns: Vec<String>,
    /// IP SANs (serving only).
    pub ips: Vec<std::net::IpAddr>,
}

/// The PEM certificate request for `r`, signed with a fresh P-256 key.
pub fn pem_request(r: &Request) -> Result<String> {
    let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(r.dns.clone())?;
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "system:nodes");
    dn.push(DnType::CommonName, format!("system:node:{}", r.node));
    params.distinguished_name = dn;
    params
        .subject_alt_names
        .extend(r.ips.iter().map(|ip| SanType::IpAddress(*ip)));
    Ok(params.serialize_request(&key)?.pem()?)
}

/// The client CSR object for `node`, as the kubelet's bootstrap creates it.
pub fn client_csr(node: &str) -> Result<Value> {
    let pem = pem_request(&Request {
        node,
        dns: Vec::new(),
        ips: Vec::new(),
    })?;
    Ok(csr_object(
        &pem,
        CLIENT_SIGNER,
        ["digital signature", "client auth"],
        NODE_BOOTSTRAPPER,
        &NODE_BOOTSTRAPPER_GROUPS,
    ))
}

/// The serving CSR object for `node` with these SANs, as its certificate manager creates it.
pub fn serving_csr(node: &str, dns: &[String], ips: &[std::net::IpAddr]) -> Result<Value> {
    let pem = pem_request(&Request {
        node,
        dns: dns.to_vec(),
        ips: ips.to_vec(),
    })?;
    Ok(csr_object(
        &pem,
        SERVING_SIGNER,
        ["digital signature", "server auth"],
        &format!("system:node:{node}"),
        &["system:nodes", "system:authenticated"],
    ))
}

fn csr_object(pem: &str, signer: &str, usages: [&str; 2], user: &str, groups: &[&str]) -> Value {
    use base64::Engine as _;
    json!({"apiVersion": CSR_V1, "kind": "CertificateSigningRequest",
        "metadata": {"generateName": "csr-"},
        "spec": {"request": base64::engine::general_purpose::STANDARD.encode(pem),
            "signerName": signer, "usages": usages, "username": user, "groups": groups}})
}

/// Creates `csr` in the cluster as the kubelet does; its name.
pub fn create(store: &Store, csr: Value) -> Result<String> {
    let created = store
        .create(csr, &objects::manager(KUBELET))
        .map_err(|e| anyhow::anyhow!(e.message))
        .context("creating a CertificateSigningRequest")?;
    Ok(objects::name(&created).to_string())
}

/// A CSR's state as the kubelet waiting on it sees it.
#[derive(Debug, PartialEq, Eq)]
pub enum CsrState {
    /// No condition yet (or gone).
    Pending,
    /// Denied or Failed: the kubelet gives up on it and asks again.
    Refused,
    /// Approved and issued.
    Issued,
}

/// Where `name` stands.
pub fn state(store: &Store, name: &str) -> Result<CsrState> {
    let r = objects::reference(CSR_V1, "CertificateSigningRequest", None, name);
    let Some(csr) = objects::get(store, &r)? else {
        return Ok(CsrState::Refused);
    };
    let has = |t: &str| objects::condition(&csr["status"]["conditions"], t).is_some();
    Ok(if has("Denied") || has("Failed") {
        CsrState::Refused
    } else if csr["status"]["certificate"]
        .as_str()
        .is_some_and(|c| !c.is_empty())
    {
        CsrState::Issued
    } else {
        CsrState::Pending
    })
}

/// The kube-controller-manager's signer: every approved, unfailed, unissued CSR of the two
/// kubelet signers gets its certificate from `ca`.
pub fn sign_approved(store: &Store, ca: &crate::site::pki::LabCa) -> Result<()> {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    for csr in store
        .list(CSR_V1, "CertificateSigningRequest", None, None)
        .map_err(|e| anyhow::anyhow!(e.message))?
    {
        let conds = &csr["status"]["conditions"];
        let signer = csr["spec"]["signerName"].as_str().unwrap_or_default();
        if ![CLIENT_SIGNER, SERVING_SIGNER].contains(&signer)
            || objects::condition(conds, "Approved").is_none()
            || objects::condition(conds, "Failed").is_some()
            || csr["status"]["certificate"]
                .as_str()
                .is_some_and(|c| !c.is_empty())
        {
            continue;
        }
        let request = b64
            .decode(csr["spec"]["request"].as_str().unwrap_or_default())
            .context("decoding a CSR's spec.request")?;
        let cert = ca.sign_request(&String::from_utf8_lossy(&request))?;
        let mut status = csr["status"].clone();
        status["certificate"] = json!(b64.encode(cert));
        objects::write_status(store, &csr, status, "kube-controller-manager")?;
    }
    Ok(())
}

/// A node's Node object as its kubelet registers it (NotReady, tainted not-ready) or, with
/// `ready`, as it stands once the kubelet reports Ready.
pub fn node_object(name: &str, role: &str, addresses: &[String], ready: bool) -> Value {
    let mut addr: Vec<Value> = addresses
        .iter()
        .map(|a| json!({"type": "InternalIP", "address": a}))
        .collect();
    addr.push(json!({"type": "Hostname", "address": name}));
    let (status, reason, message) = if ready {
        ("True", "KubeletReady", "kubelet is posting ready status")
    } else {
        (
            "False",
            "KubeletNotReady",
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady message:Network plugin returns error: no CNI configuration file in /etc/kubernetes/cni/net.d/. Has your network provider started?",
        )
    };
    let now = objects::now();
    let mut labels = json!({"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
        "node.openshift.io/os_id": "rhcos"});
    labels[format!("node-role.kubernetes.io/{role}")] = json!("");
    if role == "master" {
        labels["node-role.kubernetes.io/control-plane"] = json!("");
    }
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": {},
        "status": {"addresses": addr,
            "conditions": [{"type": "Ready", "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                "kubeletVersion": KUBELET_VERSION, "kubeProxyVersion": KUBELET_VERSION,
                "osImage": "Red Hat Enterprise Linux CoreOS 418.94.202502100215-0",
                "kernelVersion": "5.14.0-427.50.1.el9_4.x86_64",
                "containerRuntimeVersion": "cri-o://1.31.5-4.rhaos4.18.gitdad78d5.el9"}}})
}

const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Registers the Node (NotReady, with the not-ready taint) unless it exists.
pub fn register_node(store: &Store, name: &str, role: &str, addresses: &[String]) -> Result<()> {
    let r = objects::reference("v1", "Node", None, name);
    if objects::get(store, &r)?.is_some() {
        return Ok(());
    }
    let mut node = node_object(name, role, addresses, false);
    let status = node["status"].take();
    node["spec"]["taints"] =
        json!([{"key": NOT_READY_TAINT, "effect": "NoSchedule", "timeAdded": objects::now()}]);
    let created = store
        .create(node, &objects::manager(KUBELET))
        .map_err(|e| anyhow::anyhow!(e.message))
        .with_context(|| format!("registering Node {name}"))?;
    objects::write_status(store, &created, status, KUBELET)?;
    Ok(())
}

/// The kubelet reports Ready: the Ready condition, and the node lifecycle controller takes its
/// not-ready taint off (leaving every other taint as it is).
pub fn mark_ready(store: &Store, name: &str) -> Result<()> {
    let r = ObjectRef {
        api_version: "v1".into(),
        kind: "Node".into(),
        namespace: None,
        name: name.into(),
    };
    let Some(node) = objects::get(store, &r)? else {
        return Ok(());
    };
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    if taints.iter().any(|t| t["key"] == NOT_READY_TAINT) {
        let kept: Vec<Value> = taints
            .into_iter()
            .filter(|t| t["key"] != NOT_READY_TAINT)
            .collect();
        let patch =
            json!({"spec": {"taints": if kept.is_empty() { Value::Null } else { json!(kept) }}});
        store
            .merge_patch(
                &r,
                patch,
                &objects::manager("node-lifecycle-controller"),
                None,
            )
            .map_err(|e| anyhow::anyhow!(e.message))?;
    }
    let node = objects::get(store, &r)?.unwrap_or(node);
    let mut status = node["status"].clone();
    status["conditions"] = node_object(name, "worker", &[], true)["status"]["conditions"].clone();
    objects::write_status(store, &node, status, KUBELET)?;
    Ok(())
}
