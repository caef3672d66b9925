//! The running cluster's side of adding nodes: one pass of what `oc adm node-image monitor`
//! watches (installer `pkg/agent/monitoraddnodes.go`: the pending CSRs, the Node joined by its
//! InternalIP, Ready), with the approvals the machine approver cannot give a node that has no
//! Machine ([`super::csr`]), and the inventory's labels and taints put on the Node once it has
//! joined (upstream leaves both to `oc label node` and `oc adm taint nodes`; nodes-config.yaml
//! has no field for them).
//!
//! Every read and write goes through [`super::api`]: verified TLS, bounded answers, lists in
//! pages, transient answers retried.

use super::api::{list_all, Connected};
use super::csr::{self, Joining, Kind, Verdict};
use crate::inventory::model::Taint;
use anyhow::{anyhow, Context, Result};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

/// CertificateSigningRequest, certificates.k8s.io/v1 (cluster scoped).
fn csr_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("certificates.k8s.io", "v1", "CertificateSigningRequest"),
        "certificatesigningrequests",
    )
}

/// Node, core v1.
fn node_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("", "v1", "Node"), "nodes")
}

/// A Node as the join needs it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NodeState {
    /// Its name.
    pub name: String,
    /// Its `InternalIP` addresses.
    pub internal_ips: Vec<IpAddr>,
    /// Condition `Ready` is `True`.
    pub ready: bool,
}

impl NodeState {
    fn from(obj: &Value) -> NodeState {
        let status = &obj["status"];
        NodeState {
            name: obj["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            internal_ips: status["addresses"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["type"] == "InternalIP")
                .filter_map(|a| a["address"].as_str()?.parse().ok())
                .collect(),
            ready: status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True"),
        }
    }
}

/// What one pass did and saw.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pass {
    /// CSRs approved now: (CSR, node, which).
    pub approved: Vec<(String, String, Kind)>,
    /// CSRs left pending: (CSR, the node it names, why).
    pub left: Vec<(String, Option<String>, String)>,
    /// The joining nodes' Nodes, by name, once they exist.
    pub nodes: BTreeMap<String, NodeState>,
}

/// The cluster's API, for adding nodes.
pub struct Join {
    client: kube::Client,
}

impl Join {
    /// Over `api` (see [`super::api::connect`]).
    pub fn new(api: Connected) -> Join {
        Join { client: api.client }
    }

    /// Every Node, as the join needs it.
    pub async fn nodes(&self) -> Result<Vec<NodeState>> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &node_resource());
        let nodes = list_all(&api, "Nodes").await?;
        Ok(nodes
            .iter()
            .map(|n| NodeState::from(&serde_json::to_value(n).unwrap_or_default()))
            .collect())
    }

    /// One pass: reads the Nodes and the CSRs, approves the joining nodes' CSRs that match
    /// the inventory ([`csr::judge`]), says why the others are left.
    pub async fn pass(&self, joining: &[Joining], now: &str) -> Result<Pass> {
        let nodes = self.nodes().await?;
        let existing: BTreeSet<String> = nodes.iter().map(|n| n.name.clone()).collect();
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &csr_resource());
        let csrs = list_all(&api, "CertificateSigningRequests").await?;
        let mut pass = Pass::default();
        for obj in &csrs {
            let csr = serde_json::to_value(obj).context("reading a CSR")?;
            match csr::judge(&csr, joining, &existing) {
                Verdict::Approve { node, kind } => {
                    self.approve(&csr, &node, now).await?;
                    pass.approved
                        .push((csr::name(&csr).to_string(), node, kind));
                }
                Verdict::Leave { node, why } => {
                    pass.left.push((csr::name(&csr).to_string(), node, why));
                }
                Verdict::Ignore => {}
            }
        }
        let names: BTreeSet<&str> = joining.iter().map(|j| j.hostname.as_str()).collect();
        pass.nodes = nodes
            .into_iter()
            .filter(|n| names.contains(n.name.as_str()))
            .map(|n| (n.name.clone(), n))
            .collect();
        Ok(pass)
    }

    /// `PUT .../certificatesigningrequests/NAME/approval` with the Approved condition, as
    /// `oc adm certificate approve` (kubectl `UpdateApproval`).
    async fn approve(&self, csr: &Value, node: &str, now: &str) -> Result<()> {
        let name = csr::name(csr);
        let body = serde_json::to_vec(&csr::approval(csr, node, now))?;
        let request = http::Request::put(format!(
            "/apis/certificates.k8s.io/v1/certificatesigningrequests/{name}/approval"
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(body)?;
        self.client.request::<Value>(request).await.map_err(|e| {
            anyhow!(
                "approving CSR {name} of {node}: {}",
                super::api::describe_error(&e)
            )
        })?;
        Ok(())
    }

    /// Puts `labels` and `taints` on Node `node`, as `oc label node` and `oc adm taint nodes`
    /// do: labels merge by key (a strategic merge patch of `metadata.labels`); `spec.taints`
    /// is an atomic list in core/v1 (`NodeSpec.Taints` has no patch strategy, so any patch
    /// replaces it whole), so the Node's taints are read and ours merged in as kubectl's
    /// `reorganizeTaints` merges (a taint of the same key and effect replaced, every other
    /// kept: the node controller's `node.kubernetes.io/*` among them), and the patch carries
    /// the Node's `resourceVersion`, so that a taint another writer added meanwhile is not
    /// lost (409 Conflict: read again, up to three times).
    pub async fn label(
        &self,
        node: &str,
        labels: &BTreeMap<String, String>,
        taints: &[Taint],
    ) -> Result<()> {
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &node_resource());
        let mut attempt = 0;
        loop {
            attempt += 1;
            let current = api
                .get(node)
                .await
                .map_err(|e| anyhow!("reading Node {node}: {}", super::api::describe_error(&e)))?;
            let mut patch = json!({"metadata": {"labels": labels}});
            if !taints.is_empty() {
                let existing = current.data["spec"]["taints"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                patch["metadata"]["resourceVersion"] = json!(current
                    .metadata
                    .resource_version
                    .clone()
                    .unwrap_or_default());
                patch["spec"] = json!({ "taints": merge_taints(&existing, taints) });
            }
            match api
                .patch(node, &PatchParams::default(), &Patch::Strategic(&patch))
                .await
            {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(e)) if e.code == 409 && attempt < 3 => continue,
                Err(e) => {
                    return Err(anyhow!(
                        "labelling Node {node}: {}",
                        super::api::describe_error(&e)
                    ))
                }
            }
        }
    }
}

/// The Node's taints with `ours` merged in as kubectl's `reorganizeTaints` does: a taint of
/// the same key and effect is replaced, every other kept, ours appended in their order.
fn merge_taints(existing: &[Value], ours: &[Taint]) -> Vec<Value> {
    let mut merged: Vec<Value> = existing
        .iter()
        .filter(|t| {
            !ours
                .iter()
                .any(|o| t["key"] == o.key.as_str() && t["effect"] == o.effect.as_str())
        })
        .cloned()
        .collect();
    merged.extend(ours.iter().map(|t| json!(t)));
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A taint of the same key and effect is replaced; the node controller's and another of
    /// the same key with another effect stay.
    #[test]
    fn taints_merge_by_key_and_effect_keeping_the_others() {
        let existing = vec![
            json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "t"}),
            json!({"key": "nvidia.com/gpu", "value": "old", "effect": "NoSchedule"}),
            json!({"key": "nvidia.com/gpu", "effect": "NoExecute"}),
        ];
        let ours = [Taint {
            key: "nvidia.com/gpu".into(),
            value: None,
            effect: "NoSchedule".into(),
        }];
        let merged = merge_taints(&existing, &ours);
        assert_eq!(
            merged,
            vec![
                existing[0].clone(),
                existing[2].clone(),
                json!({"key": "nvidia.com/gpu", "effect": "NoSchedule"}),
            ]
        );
    }
}
