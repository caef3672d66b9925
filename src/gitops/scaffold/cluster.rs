//! `cluster/`: the GPU platform's operators (Namespace, OperatorGroup, Subscription from the
//! mirrored catalog), their policies (NodeFeatureDiscovery, ClusterPolicy, NicClusterPolicy,
//! DataScienceCluster), and the KAI scheduler's Queue CRD, priority classes and parent queue.
//!
//! The policies are minimal and written against each kind's definition at its source:
//! - NodeFeatureDiscovery `nfd.openshift.io/v1`: openshift/cluster-nfd-operator
//!   config/samples/nfd.openshift.io_v1_nodefeaturediscovery.yaml (7612647158a4a04e46b24bceaa09ed146bb87fd5);
//!   no `operand.image`, so the operator runs the operand image its CSV names (the mirrored one).
//! - ClusterPolicy `nvidia.com/v1`: NVIDIA/gpu-operator bundle/manifests/
//!   gpu-operator-certified.clusterserviceversion.yaml alm-examples (a666a8d49e36ad99d4428d8543a4724454c1b838),
//!   with the open kernel modules the talk moved to.
//! - NicClusterPolicy `mellanox.com/v1alpha1`: Mellanox/network-operator config/samples/
//!   mellanox.com_v1alpha1_nicclusterpolicy.yaml (d0e3abff053f76092b7e06f04724e37f8d15b9f6).
//! - DataScienceCluster `datasciencecluster.opendatahub.io/v1`: opendatahub-io/opendatahub-operator
//!   config/samples/datasciencecluster_v1_datasciencecluster.yaml (20916a359c617048692bc0697f9c4076832a8973).
//! - Queue `scheduling.run.ai/v2` and the priority classes: NVIDIA/KAI-Scheduler
//!   (72de64fc8eca10fa8cca26a20156178f3edbe092): the CRD is vendored in `src/gitops/vendor/`.

use super::catalogs::{catalog_for, choice, CatalogSource};
use super::{object, Files};
use crate::inventory::Inventory;
use anyhow::Result;
use serde_json::{json, Value};

/// The vendored KAI Queue CRD (its source and commit in its first lines).
pub(super) const KAI_QUEUE_CRD: &str = include_str!("../vendor/scheduling.run.ai_queues.yaml");

/// The parent queue every tenant's queue hangs under.
pub const PARENT_QUEUE: &str = "tenants";

/// An operator from the mirrored catalogs.
pub struct Operator {
    /// The component (Application and folder) name.
    pub component: &'static str,
    /// The OLM package.
    pub package: &'static str,
    /// Its namespace.
    pub namespace: &'static str,
    /// OwnNamespace (`targetNamespaces: [namespace]`) or AllNamespaces.
    pub own_namespace: bool,
}

/// The platform's operators, in the order their Applications are listed.
pub const OPERATORS: &[Operator] = &[
    Operator {
        component: "nfd",
        package: "nfd",
        namespace: "openshift-nfd",
        own_namespace: true,
    },
    Operator {
        component: "nvidia-gpu-operator",
        package: "gpu-operator-certified",
        namespace: "nvidia-gpu-operator",
        own_namespace: true,
    },
    Operator {
        component: "nvidia-network-operator",
        package: "nvidia-network-operator",
        namespace: "nvidia-network-operator",
        own_namespace: true,
    },
    Operator {
        component: "openshift-ai",
        package: "rhods-operator",
        namespace: "redhat-ods-operator",
        own_namespace: false,
    },
];

/// The KAI scheduler's namespace (its Helm chart's default).
pub const KAI_NAMESPACE: &str = "kai-scheduler";

/// The priority classes: (name, value, preemptionPolicy, description). KAI treats a priority
/// below 100 as preemptible and 100 or more as not: interactive work is never preempted and
/// preempts the rest, inference likewise under it, training is preemptible and never preempts.
pub const PRIORITY_CLASSES: &[(&str, i64, &str, &str)] = &[
    (
        "gpu-interactive",
        150,
        "PreemptLowerPriority",
        "Notebooks and interactive sessions: a person is waiting; never preempted.",
    ),
    (
        "gpu-inference",
        125,
        "PreemptLowerPriority",
        "Model serving: steady latency; never preempted, preempts training.",
    ),
    (
        "gpu-training",
        50,
        "Never",
        "Batch training: preemptible, runs when GPUs are free (overnight); never preempts others.",
    ),
];

/// Writes every `cluster/` folder.
pub(super) fn write(files: &mut Files, inv: &Inventory, catalogs: &[CatalogSource]) -> Result<()> {
    let g = inv
        .site
        .gitops
        .as_ref()
        .expect("scaffold checked the gitops section");
    for op in OPERATORS {
        let (c, field) = choice(g, op.package);
        let catalog = catalog_for(inv, catalogs, op.package, c, &field)?;
        let channel = c.and_then(|c| c.channel.as_deref());
        operator(files, op, &catalog, channel)?;
    }
    policies(files)?;
    kai(files, g.tenants.iter().map(|t| t.gpus).sum())
}

fn operator(files: &mut Files, op: &Operator, catalog: &str, channel: Option<&str>) -> Result<()> {
    let dir = format!("cluster/{}", op.component);
    let ns = object(
        "v1",
        "Namespace",
        op.namespace,
        None,
        json!({
            "metadata": {"name": op.namespace, "labels": {"openshift.io/cluster-monitoring": "true"}},
        }),
    );
    let targets = if op.own_namespace {
        json!({"targetNamespaces": [op.namespace]})
    } else {
        json!({})
    };
    let og = object(
        "operators.coreos.com/v1",
        "OperatorGroup",
        op.component,
        Some(op.namespace),
        json!({"spec": targets}),
    );
    let mut spec = json!({
        "name": op.package,
        "source": catalog,
        "sourceNamespace": "openshift-marketplace",
        "installPlanApproval": "Automatic",
    });
    // No channel: OLM follows the package's default channel.
    if let Some(ch) = channel {
        spec["channel"] = ch.into();
    }
    let sub = object(
        "operators.coreos.com/v1alpha1",
        "Subscription",
        op.package,
        Some(op.namespace),
        json!({"spec": spec}),
    );
    files.yaml(format!("{dir}/namespace.yaml"), &[ns])?;
    files.yaml(format!("{dir}/operatorgroup.yaml"), &[og])?;
    files.yaml(format!("{dir}/subscription.yaml"), &[sub])?;
    files.kustomization(
        &dir,
        &names(&["namespace.yaml", "operatorgroup.yaml", "subscription.yaml"]),
    )
}

fn names(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// The operators' policies, one folder each.
fn policies(files: &mut Files) -> Result<()> {
    for (dir, file, doc) in [
        (
            "nfd-instance",
            "nodefeaturediscovery.yaml",
            node_feature_discovery(),
        ),
        ("gpu-cluster-policy", "clusterpolicy.yaml", cluster_policy()),
        (
            "nic-cluster-policy",
            "nicclusterpolicy.yaml",
            nic_cluster_policy(),
        ),
        (
            "datasciencecluster",
            "datasciencecluster.yaml",
            data_science_cluster(),
        ),
    ] {
        let dir = format!("cluster/{dir}");
        files.yaml(format!("{dir}/{file}"), &[doc])?;
        files.kustomization(&dir, &names(&[file]))?;
    }
    Ok(())
}

/// NFD labels the nodes' PCI devices by vendor (`feature.node.kubernetes.io/pci-10de.present`
/// for NVIDIA GPUs, `pci-15b3` for ConnectX NICs): what the GPU and network operators select.
fn node_feature_discovery() -> Value {
    let worker = "sources:\n  pci:\n    deviceClassWhitelist:\n    - \"0200\"\n    - \"0207\"\n    - \"03\"\n    - \"12\"\n    deviceLabelFields:\n    - vendor\n";
    object(
        "nfd.openshift.io/v1",
        "NodeFeatureDiscovery",
        "nfd-instance",
        Some("openshift-nfd"),
        json!({
            "spec": {
                "operand": {"servicePort": 12000},
                "workerConfig": {"configData": worker},
            },
        }),
    )
}

/// The GPU operator on OpenShift: CRI-O, the driver toolkit, the open kernel modules; DCGM
/// metrics to the cluster's monitoring; MIG single strategy.
fn cluster_policy() -> Value {
    object(
        "nvidia.com/v1",
        "ClusterPolicy",
        "gpu-cluster-policy",
        None,
        json!({
            "spec": {
                "operator": {"defaultRuntime": "crio", "use_ocp_driver_toolkit": true},
                "daemonsets": {"updateStrategy": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "1"}},
                "driver": {
                    "enabled": true,
                    "useOpenKernelModules": true,
                    "upgradePolicy": {"autoUpgrade": true, "maxParallelUpgrades": 1, "maxUnavailable": "25%"},
                },
                "toolkit": {"enabled": true},
                "devicePlugin": {"enabled": true},
                "dcgm": {"enabled": true},
                "dcgmExporter": {"enabled": true, "serviceMonitor": {"enabled": true}},
                "gfd": {"enabled": true},
                "migManager": {"enabled": true},
                "mig": {"strategy": "single"},
                "nodeStatusExporter": {"enabled": true},
                "validator": {"plugin": {"env": [{"name": "WITH_WORKLOAD", "value": "false"}]}},
            },
        }),
    )
}

/// The network operator: the DOCA driver on the ConnectX nodes and the RDMA shared device
/// plugin (GPUDirect RDMA over DMA-buf, so no nvidia-peermem coupling).
fn nic_cluster_policy() -> Value {
    let rdma = "{\n  \"configList\": [\n    {\n      \"resourceName\": \"rdma_shared_device_a\",\n      \"rdmaHcaMax\": 63,\n      \"selectors\": {\"vendors\": [\"15b3\"]}\n    }\n  ]\n}\n";
    object(
        "mellanox.com/v1alpha1",
        "NicClusterPolicy",
        "nic-cluster-policy",
        None,
        json!({
            "spec": {
                "ofedDriver": {
                    "image": "doca-driver",
                    "repository": "nvcr.io/nvidia/mellanox",
                    "version": "24.10-0.7.0.0-0",
                    "upgradePolicy": {"autoUpgrade": true, "maxParallelUpgrades": 1, "drain": {"enable": true, "force": true, "deleteEmptyDir": true, "timeoutSeconds": 300}},
                },
                "rdmaSharedDevicePlugin": {
                    "image": "k8s-rdma-shared-dev-plugin",
                    "repository": "ghcr.io/mellanox",
                    "version": "v1.5.2",
                    "config": rdma,
                },
            },
        }),
    )
}

/// OpenShift AI: the dashboard, workbenches, model serving (KServe), pipelines, training;
/// Kueue is Removed (KAI schedules the GPUs).
fn data_science_cluster() -> Value {
    let managed = json!({"managementState": "Managed"});
    let removed = json!({"managementState": "Removed"});
    object(
        "datasciencecluster.opendatahub.io/v1",
        "DataScienceCluster",
        "default-dsc",
        None,
        json!({
            "spec": {"components": {
                "dashboard": managed,
                "workbenches": managed,
                "datasciencepipelines": managed,
                "kserve": managed,
                "modelregistry": managed,
                "trainingoperator": managed,
                "ray": managed,
                "codeflare": removed,
                "kueue": removed,
                "modelmeshserving": removed,
                "trustyai": removed,
            }},
        }),
    )
}

/// `cluster/kai-scheduler` (namespace, Queue CRD) and `cluster/kai-queues` (priority classes,
/// the parent queue whose GPU quota is the tenants' total).
fn kai(files: &mut Files, total_gpus: u32) -> Result<()> {
    let ns = object("v1", "Namespace", KAI_NAMESPACE, None, json!({}));
    files.yaml("cluster/kai-scheduler/namespace.yaml", &[ns])?;
    files.text(
        "cluster/kai-scheduler/crds/scheduling.run.ai_queues.yaml",
        KAI_QUEUE_CRD.to_string(),
    );
    files.kustomization(
        "cluster/kai-scheduler",
        &names(&["namespace.yaml", "crds/scheduling.run.ai_queues.yaml"]),
    )?;
    let classes: Vec<Value> = PRIORITY_CLASSES
        .iter()
        .map(|(name, value, preemption, description)| {
            object(
                "scheduling.k8s.io/v1",
                "PriorityClass",
                name,
                None,
                json!({
                    "value": value,
                    "preemptionPolicy": preemption,
                    "globalDefault": false,
                    "description": description,
                }),
            )
        })
        .collect();
    files.yaml("cluster/kai-queues/priorityclasses.yaml", &classes)?;
    let parent = queue(PARENT_QUEUE, None, total_gpus, -1);
    files.yaml("cluster/kai-queues/parent-queue.yaml", &[parent])?;
    files.kustomization(
        "cluster/kai-queues",
        &names(&["priorityclasses.yaml", "parent-queue.yaml"]),
    )
}

/// A KAI Queue: `gpus` deserved, at most `limit` (-1: no limit); CPU and memory left to the
/// namespaces' ResourceQuotas.
pub fn queue(name: &str, parent: Option<&str>, gpus: u32, limit: i64) -> Value {
    let open = json!({"quota": 0, "limit": -1, "overQuotaWeight": 1});
    let mut spec = json!({
        "resources": {
            "gpu": {"quota": gpus, "limit": limit, "overQuotaWeight": 1},
            "cpu": open,
            "memory": open,
        },
    });
    if let Some(p) = parent {
        spec["parentQueue"] = p.into();
    }
    object(
        "scheduling.run.ai/v2",
        "Queue",
        name,
        None,
        json!({"spec": spec}),
    )
}
