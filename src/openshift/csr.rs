//! Which certificate signing requests of a joining node bootstrap approves, and how.
//!
//! A node added on day two (`oc adm node-image create`) has no Machine object, so the cluster's
//! own approver (openshift/cluster-machine-approver) approves neither of its two CSRs: the
//! installer's docs say both "must be manually approved by the user" (docs/user/agent/add-node/
//! add-nodes.md), and `oc adm node-image monitor` lists them as pending (installer
//! pkg/agent/monitoraddnodes.go). bootstrap approves them for the nodes it is adding, with the
//! machine approver's checks of a CSR's shape (pkg/controller/csr_check.go) and the inventory in
//! place of the Machine:
//!
//! - the client CSR (`kubernetes.io/kube-apiserver-client-kubelet`, by the node-bootstrapper
//!   service account, `isReqFromNodeBootstrapper`): subject exactly `O=system:nodes`,
//!   `CN=system:node:NAME`, no subject alternative names, usages `client auth` with `digital
//!   signature` (and `key encipherment`, the legacy set) (`isNodeClientCert`); NAME a node being
//!   added, with no Node object of that name yet;
//! - the serving CSR (`kubernetes.io/kubelet-serving`, by `system:node:NAME` in the groups
//!   `system:nodes` and `system:authenticated`): CN the username, O holding `system:nodes`,
//!   usages `server auth` with `digital signature` (and `key encipherment`)
//!   (`validateCSRContents`); every DNS name the node's hostname or its name in the cluster's
//!   domain, every IP address one of the node's addresses in the inventory
//!   (`authorizeServingCertWithMachine`, the inventory standing for the Machine's addresses).
//!
//! Anything else is left pending and said: a CSR naming a node not being added is none of
//! bootstrap's business, and one naming an added node with the wrong shape or addresses is a
//! warning sign. The request itself (`spec.request`, a PEM PKCS#10) is what is checked, not the
//! object's description of it. An approval is what `oc adm certificate approve` writes (kubectl
//! pkg/cmd/certificates/certificates.go `addConditionIfNeeded`): condition `Approved`, status
//! `True`, through the `/approval` subresource, with bootstrap's own reason and message.

use base64::Engine as _;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::net::IpAddr;

/// The kubelet's client certificates' signer.
pub const CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client-kubelet";
/// The kubelet's serving certificates' signer.
pub const SERVING_SIGNER: &str = "kubernetes.io/kubelet-serving";
/// Who asks for a new node's client certificate.
pub const NODE_BOOTSTRAPPER: &str =
    "system:serviceaccount:openshift-machine-config-operator:node-bootstrapper";
/// The node-bootstrapper's groups, exactly (cluster-machine-approver `nodeBootstrapperGroups`).
const BOOTSTRAPPER_GROUPS: [&str; 3] = [
    "system:serviceaccounts:openshift-machine-config-operator",
    "system:serviceaccounts",
    "system:authenticated",
];
/// The approval's reason.
pub const APPROVE_REASON: &str = "BootstrapDayTwoApprove";

/// A node being added, as the inventory has it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Joining {
    /// Its host name (the Node's name).
    pub hostname: String,
    /// Its name in the cluster's domain (`NAME.CLUSTER.DOMAIN`), when known.
    pub fqdn: Option<String>,
    /// Its addresses.
    pub addresses: Vec<IpAddr>,
}

/// Which of the two CSRs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// The kubelet's client certificate (the first).
    Client,
    /// The kubelet's serving certificate (the second).
    Serving,
}

/// What to do with a CSR.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Approve: it is `node`'s, and its shape and addresses match the inventory.
    Approve {
        /// The node.
        node: String,
        /// Which of its CSRs.
        kind: Kind,
    },
    /// Already approved or denied, or not a kubelet's: nothing to do, nothing to say.
    Ignore,
    /// Left pending: `why`, for the report (a CSR of another host, or one that does not match).
    Leave {
        /// The node it names, when it names one.
        node: Option<String>,
        /// Why it is left.
        why: String,
    },
}

/// A CSR's name, for messages.
pub fn name(csr: &Value) -> &str {
    csr["metadata"]["name"].as_str().unwrap_or("?")
}

/// Judges `csr` for the nodes being added (`joining`); `existing` are the names of the Node
/// objects the cluster has.
pub fn judge(csr: &Value, joining: &[Joining], existing: &BTreeSet<String>) -> Verdict {
    let conditions = csr["status"]["conditions"].as_array();
    if conditions.is_some_and(|c| !c.is_empty()) {
        return Verdict::Ignore;
    }
    let spec = &csr["spec"];
    let signer = spec["signerName"].as_str().unwrap_or_default();
    let username = spec["username"].as_str().unwrap_or_default();
    let groups: BTreeSet<&str> = spec["groups"]
        .as_array()
        .map(|g| g.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let usages: BTreeSet<&str> = spec["usages"]
        .as_array()
        .map(|g| g.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let kind = match signer {
        CLIENT_SIGNER if username == NODE_BOOTSTRAPPER => Kind::Client,
        SERVING_SIGNER if groups.contains("system:nodes") => Kind::Serving,
        _ => return Verdict::Ignore,
    };
    let request = match parse_request(spec["request"].as_str().unwrap_or_default()) {
        Ok(r) => r,
        Err(why) => {
            return Verdict::Leave {
                node: None,
                why: format!("its request does not read: {why}"),
            }
        }
    };
    let named = request
        .common_name
        .strip_prefix("system:node:")
        .map(str::to_string);
    let leave = |why: String| Verdict::Leave {
        node: named.clone(),
        why,
    };
    let Some(node) = named.as_deref() else {
        return leave(format!(
            "its subject's CN {:?} names no node (system:node:NAME)",
            request.common_name
        ));
    };
    let Some(joining) = joining.iter().find(|j| j.hostname == node) else {
        return leave(format!("{node} is not a node this run is adding"));
    };
    let check = match kind {
        Kind::Client => client_shape(&request, &groups, &usages, existing, node),
        Kind::Serving => serving_shape(&request, username, &groups, &usages, joining),
    };
    match check {
        Ok(()) => Verdict::Approve {
            node: node.to_string(),
            kind,
        },
        Err(why) => leave(why),
    }
}

/// The machine approver's `isNodeClientCert` and `isReqFromNodeBootstrapper`, and no Node yet.
fn client_shape(
    r: &Request,
    groups: &BTreeSet<&str>,
    usages: &BTreeSet<&str>,
    existing: &BTreeSet<String>,
    node: &str,
) -> Result<(), String> {
    if *groups != BOOTSTRAPPER_GROUPS.into_iter().collect() {
        return Err(format!(
            "its groups {groups:?} are not the node-bootstrapper's"
        ));
    }
    if r.organizations != ["system:nodes"] {
        return Err(format!(
            "its subject's O is {:?}, not exactly system:nodes",
            r.organizations
        ));
    }
    if !r.dns.is_empty() || !r.ips.is_empty() || r.other_names {
        return Err("a client certificate request names subject alternative names".into());
    }
    usages_are(usages, "client auth")?;
    if existing.contains(node) {
        return Err(format!(
            "a Node {node} already exists: a client certificate for a new node is asked for \
             before it has a Node object"
        ));
    }
    Ok(())
}

/// The machine approver's `validateCSRContents` and `authorizeServingCertWithMachine`, the
/// inventory's addresses standing for the Machine's.
fn serving_shape(
    r: &Request,
    username: &str,
    groups: &BTreeSet<&str>,
    usages: &BTreeSet<&str>,
    node: &Joining,
) -> Result<(), String> {
    if username != r.common_name {
        return Err(format!(
            "it was asked by {username}, not by {}",
            r.common_name
        ));
    }
    if !groups.contains("system:authenticated") {
        return Err("its groups lack system:authenticated".into());
    }
    if !r.organizations.iter().any(|o| o == "system:nodes") {
        return Err("its subject's O lacks system:nodes".into());
    }
    if r.other_names {
        return Err("it names an e-mail address or URI".into());
    }
    usages_are(usages, "server auth")?;
    let names: BTreeSet<String> = std::iter::once(node.hostname.to_ascii_lowercase())
        .chain(node.fqdn.iter().map(|f| f.to_ascii_lowercase()))
        .collect();
    for dns in &r.dns {
        let d = dns.trim_end_matches('.').to_ascii_lowercase();
        if !names.contains(&d) {
            return Err(format!(
                "it names the DNS name {dns}, not {} in the inventory",
                names.iter().cloned().collect::<Vec<_>>().join(" or ")
            ));
        }
    }
    for ip in &r.ips {
        if !node.addresses.contains(ip) {
            return Err(format!(
                "it names the address {ip}, which is not {}'s in the inventory",
                node.hostname
            ));
        }
    }
    if r.dns.is_empty() && r.ips.is_empty() {
        return Err("it names no address or DNS name".into());
    }
    Ok(())
}

/// The usages are the current or the legacy set for `purpose` (`client auth`, `server auth`).
fn usages_are(usages: &BTreeSet<&str>, purpose: &str) -> Result<(), String> {
    let current: BTreeSet<&str> = ["digital signature", purpose].into_iter().collect();
    let legacy: BTreeSet<&str> = ["digital signature", "key encipherment", purpose]
        .into_iter()
        .collect();
    if *usages == current || *usages == legacy {
        Ok(())
    } else {
        Err(format!("its usages {usages:?} are not a kubelet's"))
    }
}

/// What the PKCS#10 request says.
#[derive(Debug, Default)]
struct Request {
    common_name: String,
    organizations: Vec<String>,
    dns: Vec<String>,
    ips: Vec<IpAddr>,
    /// E-mail addresses, URIs or other names (never in a kubelet's request).
    other_names: bool,
}

/// Reads `spec.request`: base64 of a PEM `CERTIFICATE REQUEST`.
fn parse_request(b64: &str) -> Result<Request, String> {
    use x509_parser::certification_request::X509CertificationRequest;
    use x509_parser::extensions::{GeneralName, ParsedExtension};
    use x509_parser::prelude::FromDer;
    let pem = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).map_err(|e| format!("not PEM: {e}"))?;
    if pem.label != "CERTIFICATE REQUEST" {
        return Err(format!(
            "a PEM {} where a CERTIFICATE REQUEST goes",
            pem.label
        ));
    }
    let (_, csr) = X509CertificationRequest::from_der(&pem.contents)
        .map_err(|e| format!("not a PKCS#10 request: {e}"))?;
    let subject = &csr.certification_request_info.subject;
    let mut r = Request {
        common_name: subject
            .iter_common_name()
            .filter_map(|c| c.as_str().ok())
            .collect::<Vec<_>>()
            .join(","),
        organizations: subject
            .iter_organization()
            .filter_map(|o| o.as_str().ok().map(str::to_string))
            .collect(),
        ..Request::default()
    };
    for ext in csr.requested_extensions().into_iter().flatten() {
        if let ParsedExtension::SubjectAlternativeName(san) = ext {
            for name in &san.general_names {
                match name {
                    GeneralName::DNSName(d) => r.dns.push(d.to_string()),
                    GeneralName::IPAddress(b) => match b.len() {
                        4 => r
                            .ips
                            .push(IpAddr::from(<[u8; 4]>::try_from(*b).unwrap_or_default())),
                        16 => r
                            .ips
                            .push(IpAddr::from(<[u8; 16]>::try_from(*b).unwrap_or_default())),
                        _ => r.other_names = true,
                    },
                    _ => r.other_names = true,
                }
            }
        }
    }
    Ok(r)
}

/// The body of `PUT /apis/certificates.k8s.io/v1/certificatesigningrequests/NAME/approval`:
/// `csr` with the condition `Approved` added, naming `node` (as `oc adm certificate approve`
/// adds its own).
pub fn approval(csr: &Value, node: &str, now: &str) -> Value {
    let mut body = csr.clone();
    let condition = json!({
        "type": "Approved",
        "status": "True",
        "reason": APPROVE_REASON,
        "message": format!(
            "Approved by bootstrap install: a kubelet certificate of {node}, whose name and \
             addresses match the inventory"
        ),
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    });
    match body["status"]["conditions"].as_array_mut() {
        Some(c) => c.push(condition),
        None => body["status"] = json!({"conditions": [condition]}),
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{CertificateParams, DnType, KeyPair, SanType};

    fn request(cn: &str, orgs: &[&str], sans: Vec<SanType>) -> String {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        for o in orgs {
            p.distinguished_name.push(DnType::OrganizationName, *o);
        }
        p.subject_alt_names = sans;
        let key = KeyPair::generate().unwrap();
        let pem = p.serialize_request(&key).unwrap().pem().unwrap();
        base64::engine::general_purpose::STANDARD.encode(pem)
    }

    fn client(cn: &str) -> Value {
        json!({"metadata": {"name": "csr-a"}, "spec": {
            "signerName": CLIENT_SIGNER, "username": NODE_BOOTSTRAPPER,
            "groups": BOOTSTRAPPER_GROUPS, "usages": ["digital signature", "client auth"],
            "request": request(cn, &["system:nodes"], vec![])}, "status": {}})
    }

    fn serving(node: &str, sans: Vec<SanType>) -> Value {
        let cn = format!("system:node:{node}");
        json!({"metadata": {"name": "csr-b"}, "spec": {
            "signerName": SERVING_SIGNER, "username": cn,
            "groups": ["system:nodes", "system:authenticated"],
            "usages": ["digital signature", "key encipherment", "server auth"],
            "request": request(&cn, &["system:nodes"], sans)}})
    }

    fn worker() -> Vec<Joining> {
        vec![Joining {
            hostname: "worker-0".into(),
            fqdn: Some("worker-0.lab.example".into()),
            addresses: vec!["10.20.0.21".parse().unwrap()],
        }]
    }

    fn dns(s: &str) -> SanType {
        SanType::DnsName(s.try_into().unwrap())
    }

    fn ip(s: &str) -> SanType {
        SanType::IpAddress(s.parse().unwrap())
    }

    /// A joining node's two CSRs, as its kubelet makes them, are approved.
    #[test]
    fn a_joining_nodes_client_and_serving_csrs_are_approved() {
        let none = BTreeSet::new();
        assert_eq!(
            judge(&client("system:node:worker-0"), &worker(), &none),
            Verdict::Approve {
                node: "worker-0".into(),
                kind: Kind::Client
            }
        );
        let csr = serving("worker-0", vec![dns("worker-0"), ip("10.20.0.21")]);
        let existing = ["worker-0".to_string()].into_iter().collect();
        assert_eq!(
            judge(&csr, &worker(), &existing),
            Verdict::Approve {
                node: "worker-0".into(),
                kind: Kind::Serving
            }
        );
    }

    /// A CSR naming another host is left pending, said; an approved one is ignored.
    #[test]
    fn a_csr_naming_another_host_is_left_pending() {
        let v = judge(&client("system:node:master-0"), &worker(), &BTreeSet::new());
        assert!(
            matches!(&v, Verdict::Leave { node: Some(n), why } if n == "master-0" && why.contains("not a node this run is adding")),
            "{v:?}"
        );
        let mut done = client("system:node:worker-0");
        done["status"] = json!({"conditions": [{"type": "Approved", "status": "True"}]});
        assert_eq!(judge(&done, &worker(), &BTreeSet::new()), Verdict::Ignore);
    }

    /// The machine approver's checks: an address or name not the node's, a wrong O, a client
    /// CSR for a node that already exists, SANs in a client CSR, a foreign requester.
    #[test]
    fn a_csr_of_the_right_node_with_the_wrong_shape_is_left_pending() {
        let none = BTreeSet::new();
        let cases = [
            (
                serving("worker-0", vec![dns("worker-0"), ip("10.20.0.99")]),
                "10.20.0.99",
            ),
            (
                serving("worker-0", vec![dns("master-0"), ip("10.20.0.21")]),
                "master-0",
            ),
            (serving("worker-0", vec![]), "no address"),
        ];
        for (csr, said) in cases {
            let v = judge(&csr, &worker(), &none);
            assert!(
                matches!(&v, Verdict::Leave { why, .. } if why.contains(said)),
                "{said}: {v:?}"
            );
        }
        let mut csr = client("system:node:worker-0");
        csr["spec"]["request"] =
            json!(request("system:node:worker-0", &["system:masters"], vec![]));
        assert!(matches!(
            judge(&csr, &worker(), &none),
            Verdict::Leave { .. }
        ));
        let exists = ["worker-0".to_string()].into_iter().collect();
        let v = judge(&client("system:node:worker-0"), &worker(), &exists);
        assert!(
            matches!(&v, Verdict::Leave { why, .. } if why.contains("already exists")),
            "{v:?}"
        );
        let mut csr = client("system:node:worker-0");
        csr["spec"]["request"] = json!(request(
            "system:node:worker-0",
            &["system:nodes"],
            vec![dns("worker-0")]
        ));
        assert!(matches!(
            judge(&csr, &worker(), &none),
            Verdict::Leave { .. }
        ));
        let mut csr = client("system:node:worker-0");
        csr["spec"]["username"] = json!("system:anonymous");
        assert_eq!(judge(&csr, &worker(), &none), Verdict::Ignore);
        let mut csr = client("system:node:worker-0");
        csr["spec"]["request"] = json!("bm90IGEgcmVxdWVzdA==");
        assert!(matches!(
            judge(&csr, &worker(), &none),
            Verdict::Leave { .. }
        ));
    }

    /// The approval adds the condition kubectl adds, keeping the object.
    #[test]
    fn the_approval_adds_an_approved_condition() {
        let body = approval(
            &client("system:node:worker-0"),
            "worker-0",
            "2026-12-05T00:00:00Z",
        );
        let c = &body["status"]["conditions"][0];
        assert_eq!(c["type"], "Approved");
        assert_eq!(c["status"], "True");
        assert_eq!(c["reason"], APPROVE_REASON);
        assert_eq!(body["metadata"]["name"], "csr-a");
    }
}
