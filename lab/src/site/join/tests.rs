use super::*;
use crate::site::kube::Store;
use crate::site::olm::objects;
use serde_json::json;

fn iso() -> NodeIso {
    NodeIso {
        hosts: vec![JoinHost {
            hostname: "worker-0".into(),
            macs: vec!["aa:bb:cc:00:00:09".into()],
            addresses: vec!["192.168.111.30".into()],
        }],
    }
}

fn csrs(store: &Store) -> Vec<Value> {
    store
        .list(kubelet::CSR_V1, "CertificateSigningRequest", None, None)
        .unwrap()
}

fn approve(store: &Store, csr: &Value) {
    let mut next = csr.clone();
    next["status"]["conditions"] = json!([{"type": "Approved", "status": "True",
        "reason": "KubectlApprove", "message": "This CSR was approved by kubectl certificate approve."}]);
    store
        .replace(next, &objects::manager("kubectl"), Some("approval"))
        .unwrap();
}

fn node(store: &Store) -> Option<Value> {
    objects::get(store, &objects::reference("v1", "Node", None, "worker-0")).unwrap()
}

fn steps(j: &Joiner, store: &Store, n: usize) {
    for _ in 0..n {
        j.step(store).unwrap();
    }
}

/// Nothing approved: the client CSR stays pending and no Node appears; approved, it is issued,
/// the Node registers NotReady and asks for its serving certificate; it goes Ready, and the
/// rogue CSRs (another host; the node's name with an address not its own) stay pending.
#[test]
fn a_joining_node_waits_for_its_client_csr_then_registers_and_asks_to_serve() {
    let store = Store::lab_cluster().unwrap();
    let j = Joiner::new(true).unwrap();
    j.boot("worker-0", "http://iso/node.iso", iso());
    steps(&j, &store, STAGES.len() + 3);
    let pending = csrs(&store);
    assert_eq!(pending.len(), 2, "{pending:#?}");
    assert!(node(&store).is_none());
    let client = pending
        .iter()
        .find(|c| {
            let pem = base64::Engine::decode(
                &base64::engine::general_purpose::STANDARD,
                c["spec"]["request"].as_str().unwrap(),
            )
            .unwrap();
            let p = rcgen::CertificateSigningRequestParams::from_pem(
                std::str::from_utf8(&pem).unwrap(),
            )
            .unwrap();
            format!("{:?}", p.params.distinguished_name).contains("system:node:worker-0")
        })
        .unwrap();
    assert_eq!(client["spec"]["signerName"], kubelet::CLIENT_SIGNER);
    assert_eq!(client["spec"]["username"], kubelet::NODE_BOOTSTRAPPER);
    assert_eq!(
        client["spec"]["groups"],
        json!(kubelet::NODE_BOOTSTRAPPER_GROUPS)
    );
    assert_eq!(
        client["spec"]["usages"],
        json!(["digital signature", "client auth"])
    );
    approve(&store, client);
    steps(&j, &store, 1);
    let issued = objects::get(
        &store,
        &objects::reference(
            kubelet::CSR_V1,
            "CertificateSigningRequest",
            None,
            objects::name(client),
        ),
    )
    .unwrap()
    .unwrap();
    assert!(issued["status"]["certificate"]
        .as_str()
        .is_some_and(|c| !c.is_empty()));
    let n = node(&store).expect("the Node registers once its client certificate is issued");
    assert_eq!(n["status"]["conditions"][0]["status"], "False");
    assert!(n["metadata"]["labels"]
        .get("node-role.kubernetes.io/worker")
        .is_some());
    assert_eq!(
        n["status"]["addresses"][0],
        json!({"type": "InternalIP", "address": "192.168.111.30"})
    );
    steps(&j, &store, 2);
    let serving: Vec<Value> = csrs(&store)
        .into_iter()
        .filter(|c| c["spec"]["signerName"] == kubelet::SERVING_SIGNER)
        .collect();
    assert_eq!(serving.len(), 2, "the node's and the rogue one");
    assert!(serving
        .iter()
        .all(|c| c["spec"]["username"] == "system:node:worker-0"));
    assert_eq!(
        node(&store).unwrap()["status"]["conditions"][0]["status"],
        "True"
    );
    assert!(node(&store).unwrap()["spec"]["taints"].is_null());
    let still: Vec<Value> = csrs(&store)
        .into_iter()
        .filter(|c| c["status"]["conditions"].is_null())
        .collect();
    assert_eq!(
        still.len(),
        3,
        "the node's serving CSR and both rogue ones wait"
    );
}

/// A denied client CSR is given up; the kubelet asks again.
#[test]
fn a_denied_client_csr_is_asked_for_again() {
    let store = Store::lab_cluster().unwrap();
    let j = Joiner::new(false).unwrap();
    j.boot("worker-0", "http://iso/node.iso", iso());
    steps(&j, &store, STAGES.len() + 1);
    let first = csrs(&store).remove(0);
    let mut next = first.clone();
    next["status"]["conditions"] =
        json!([{"type": "Denied", "status": "True", "reason": "KubectlDeny"}]);
    store
        .replace(next, &objects::manager("kubectl"), Some("approval"))
        .unwrap();
    steps(&j, &store, 2);
    assert_eq!(csrs(&store).len(), 2);
    assert!(node(&store).is_none());
}

/// A machine the ISO's nodes-config does not name does not join.
#[test]
fn a_machine_not_in_nodes_config_does_not_join() {
    let store = Store::lab_cluster().unwrap();
    let j = Joiner::new(false).unwrap();
    j.boot("worker-9", "http://iso/node.iso", iso());
    steps(&j, &store, 10);
    assert!(csrs(&store).is_empty());
}
