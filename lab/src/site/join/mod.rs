//! Day two in the simulated site: a machine booted from a node ISO (`oc adm node-image
//! create`'s, [`crate::nodeimage`]) joins the installed cluster as upstream's add-nodes flow
//! does it. The ISO's `nodes-config.yaml` (openshift/installer
//! `pkg/asset/agent/joiner/addnodesconfig.go`) names the hosts; the machine whose name is one
//! of them walks the day-two install (its own local assisted-service, rendezvous 127.0.0.1:
//! installer `pkg/asset/agent/image/ignition.go`; `add-node.sh` starts the install, the host
//! stops at `Rebooting`), then its kubelet bootstraps against the cluster ([`kubelet`]):
//!
//! 1. the client CSR (`kube-apiserver-client-kubelet`, as the node-bootstrapper) stays
//!    pending until someone approves it (on platform none or baremetal without Machines the
//!    cluster-machine-approver cannot: installer `docs/user/agent/add-node/add-nodes.md`,
//!    "two pending CSRs ... must be manually approved"); approved, the kube-controller-manager
//!    signer issues it;
//! 2. issued, the kubelet registers its Node (NotReady, `node-role.kubernetes.io/worker`) and
//!    asks for its serving certificate (`kubelet-serving`, as `system:node:NAME`);
//! 3. the Node goes Ready two steps after it registered, whether or not the serving CSR is
//!    approved: readiness is the kubelet's runtime and network, not its serving certificate
//!    (installer `pkg/agent/monitoraddnodes.go` reports "Node is Ready but has CSRs pending
//!    approval" for exactly that case); until the serving CSR is approved and issued the
//!    kubelet serves no certificate (`oc logs`, `oc exec` fail on a real site).
//!
//! A denied CSR is given up and asked for again a step later, as the kubelet's bootstrap
//! (`waitForCertificate` fails, the kubelet restarts) and certificate manager do.
//!
//! The fault switch [`Joiner::new`]`(rogue)`: with the first join, a client CSR for a host no
//! nodes-config names (`rogue-worker-0`), and once the node registered a serving CSR in its
//! name with an address it does not have (192.0.2.66): what an approver must leave pending.

pub mod kubelet;

use crate::site::kube::Store;
use anyhow::{Context, Result};
use serde_json::Value;
use std::path::Path;
use std::sync::Mutex;

/// The node ISO's nodes-config, at its root.
pub const NODES_CONFIG: &str = "nodes-config.yaml";
/// The host a rogue client CSR names.
pub const ROGUE_HOST: &str = "rogue-worker-0";
/// The address a rogue serving CSR claims.
pub const ROGUE_IP: &str = "192.0.2.66";

/// The day-two install stages a joining host walks, one per step (assisted-service stops a
/// day-two host at `Rebooting`).
const STAGES: [&str; 4] = [
    "Starting installation",
    "Installing",
    "Writing image to disk",
    "Rebooting",
];
/// Steps from the Node's registration to Ready.
const READY_AFTER: u32 = 2;

/// One host of nodes-config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinHost {
    /// `hostname`.
    pub hostname: String,
    /// Its interfaces' `macAddress`es.
    pub macs: Vec<String>,
    /// Its NMState `networkConfig` addresses.
    pub addresses: Vec<String>,
}

/// What a node ISO tells the machine that boots it.
#[derive(Clone, Debug)]
pub struct NodeIso {
    /// nodes-config's hosts.
    pub hosts: Vec<JoinHost>,
}

impl NodeIso {
    /// Reads the extracted ISO at `dir`.
    pub fn read(dir: &Path) -> Result<NodeIso> {
        let text = fs_err::read_to_string(dir.join(NODES_CONFIG))?;
        let config: Value = serde_saphyr::from_str(&text).context("reading nodes-config.yaml")?;
        let hosts = config["hosts"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| JoinHost {
                hostname: h["hostname"].as_str().unwrap_or_default().to_string(),
                macs: h["interfaces"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|i| i["macAddress"].as_str().map(str::to_ascii_lowercase))
                    .collect(),
                addresses: nmstate_addresses(&h["networkConfig"]),
            })
            .collect();
        Ok(NodeIso { hosts })
    }
}

/// The IP addresses an NMState document configures (`interfaces[].ipv4|ipv6.address[].ip`).
pub fn nmstate_addresses(network_config: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for i in network_config["interfaces"]
        .as_array()
        .into_iter()
        .flatten()
    {
        for family in ["ipv4", "ipv6"] {
            for a in i[family]["address"].as_array().into_iter().flatten() {
                if let Some(ip) = a["ip"].as_str() {
                    out.push(ip.to_string());
                }
            }
        }
    }
    out
}

#[derive(Debug)]
enum Stage {
    Installing(usize),
    /// The kubelet waits on its client CSR.
    Bootstrapping(Option<String>),
    /// The Node exists; steps since, and the serving CSR.
    Registered(u32, Option<String>),
}

struct Joining {
    host: JoinHost,
    stage: Stage,
}

/// The machines joining the cluster.
pub struct Joiner {
    nodes: Mutex<Vec<Joining>>,
    isos: Mutex<Vec<(String, NodeIso)>>,
    signer: crate::site::pki::LabCa,
    rogue: bool,
    rogue_made: Mutex<(bool, bool)>,
    /// The store's revision after the last pass: with no machine joining, a pass runs only
    /// when something was written since (a controller acts on changes, and reads that change
    /// nothing would fill the audit trail).
    seen: Mutex<u64>,
}

impl Joiner {
    /// No machine joining; with `rogue`, the fault switch (module doc).
    pub fn new(rogue: bool) -> Result<Joiner> {
        Ok(Joiner {
            nodes: Mutex::default(),
            isos: Mutex::default(),
            signer: crate::site::pki::LabCa::generate()?,
            rogue,
            rogue_made: Mutex::default(),
            seen: Mutex::new(u64::MAX),
        })
    }

    /// Whether `node` booting `url` is a join this joiner handles without fetching the ISO:
    /// the node joins already, or the ISO was read before (then it boots).
    pub fn booted_known(&self, node: &str, url: &str) -> bool {
        if self.nodes().iter().any(|j| j.host.hostname == node) {
            return true;
        }
        let iso = lock(&self.isos)
            .iter()
            .find(|(u, _)| u == url)
            .map(|(_, i)| i.clone());
        match iso {
            Some(iso) => {
                self.boot(node, url, iso);
                true
            }
            None => false,
        }
    }

    /// `node` booted the node ISO at `url`: if nodes-config names it, it starts its day-two
    /// install; a machine it does not name finds no host config and does nothing here.
    pub fn boot(&self, node: &str, url: &str, iso: NodeIso) {
        let host = iso.hosts.iter().find(|h| h.hostname == node).cloned();
        {
            let mut isos = lock(&self.isos);
            if !isos.iter().any(|(u, _)| u == url) {
                isos.push((url.to_string(), iso));
            }
        }
        let Some(host) = host else {
            tracing::warn!(
                "simulated cluster: {node} booted a node ISO whose nodes-config does not name it"
            );
            return;
        };
        tracing::info!(
            "simulated cluster: {node} booted the node ISO and starts its day-two install"
        );
        self.nodes().push(Joining {
            host,
            stage: Stage::Installing(0),
        });
    }

    fn nodes(&self) -> std::sync::MutexGuard<'_, Vec<Joining>> {
        lock(&self.nodes)
    }

    /// The joining machines and where each stands.
    pub fn status(&self) -> Vec<(String, String)> {
        self.nodes()
            .iter()
            .map(|j| (j.host.hostname.clone(), format!("{:?}", j.stage)))
            .collect()
    }

    /// The machines whose day-two install is over (their SSH hosts may start).
    pub fn installed(&self) -> Vec<String> {
        self.nodes()
            .iter()
            .filter(|j| !matches!(j.stage, Stage::Installing(_)))
            .map(|j| j.host.hostname.clone())
            .collect()
    }

    /// One step: the signer issues what was approved, then every joining machine moves on.
    pub fn step(&self, store: &Store) -> Result<()> {
        let mut nodes = self.nodes();
        if nodes.is_empty() && *lock(&self.seen) == store.revision() {
            return Ok(());
        }
        kubelet::sign_approved(store, &self.signer)?;
        for j in nodes.iter_mut() {
            self.advance(store, j)?;
        }
        *lock(&self.seen) = store.revision();
        Ok(())
    }

    fn advance(&self, store: &Store, j: &mut Joining) -> Result<()> {
        let name = j.host.hostname.clone();
        j.stage = match std::mem::replace(&mut j.stage, Stage::Installing(0)) {
            Stage::Installing(n) if n < STAGES.len() => {
                tracing::info!("simulated cluster: {name}: {}", STAGES[n]);
                Stage::Installing(n + 1)
            }
            Stage::Installing(_) | Stage::Bootstrapping(None) => {
                let csr = kubelet::create(store, kubelet::client_csr(&name)?)?;
                self.rogue_client(store)?;
                Stage::Bootstrapping(Some(csr))
            }
            Stage::Bootstrapping(Some(csr)) => match kubelet::state(store, &csr)? {
                kubelet::CsrState::Pending => Stage::Bootstrapping(Some(csr)),
                kubelet::CsrState::Refused => Stage::Bootstrapping(None),
                kubelet::CsrState::Issued => {
                    kubelet::register_node(store, &name, "worker", &j.host.addresses)?;
                    Stage::Registered(0, None)
                }
            },
            Stage::Registered(n, serving) => {
                if n + 1 == READY_AFTER {
                    kubelet::mark_ready(store, &name)?;
                }
                let serving = match serving {
                    Some(csr) if kubelet::state(store, &csr)? != kubelet::CsrState::Refused => {
                        Some(csr)
                    }
                    _ => {
                        let ips = parse_ips(&j.host.addresses);
                        let csr = kubelet::serving_csr(&name, std::slice::from_ref(&name), &ips)?;
                        self.rogue_serving(store, &name)?;
                        Some(kubelet::create(store, csr)?)
                    }
                };
                Stage::Registered(n.saturating_add(1), serving)
            }
        };
        Ok(())
    }

    fn rogue_client(&self, store: &Store) -> Result<()> {
        let mut made = lock(&self.rogue_made);
        if self.rogue && !made.0 {
            made.0 = true;
            kubelet::create(store, kubelet::client_csr(ROGUE_HOST)?)?;
        }
        Ok(())
    }

    fn rogue_serving(&self, store: &Store, name: &str) -> Result<()> {
        let mut made = lock(&self.rogue_made);
        if self.rogue && !made.1 {
            made.1 = true;
            let ip = ROGUE_IP.parse().expect("a literal address");
            kubelet::create(
                store,
                kubelet::serving_csr(name, &[name.to_string()], &[ip])?,
            )?;
        }
        Ok(())
    }
}

fn parse_ips(addresses: &[String]) -> Vec<std::net::IpAddr> {
    addresses.iter().filter_map(|a| a.parse().ok()).collect()
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests;
