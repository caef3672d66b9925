//! The repository's README: what each folder is, and how a tenant is added (a pull request).

use super::cluster::{PARENT_QUEUE, PRIORITY_CLASSES};
use super::tenants::GPU_QUOTA;
use super::Component;
use crate::inventory::model::Gitops;
use std::fmt::Write;

/// The README's text.
pub(super) fn text(g: &Gitops, components: &[Component]) -> String {
    let mut s = String::new();
    let _ = write!(
        s,
        "# The site's GitOps repository\n\n\
Written by `bootstrap gitops init` from the site inventory; from the hand-off on, Argo CD\n\
(OpenShift GitOps) keeps the cluster as this repository says. Change the cluster by changing\n\
this repository, through a pull request: what runs is what was approved.\n\n\
Argo CD follows `{}` at `{}`.\n\n\
## Layout\n\n\
- `bootstrap/`: the AppProject `platform` (this repository only, this cluster only, the\n\
  cluster-scoped kinds the children need) and the root Application `root`, which syncs\n\
  `apps/`. The handoff stage applies these two; everything else follows from them.\n\
- `apps/`: one Application per component, ordered by `argocd.argoproj.io/sync-wave`:\n\n",
        g.repository.url,
        g.repository.revision()
    );
    for c in components {
        let _ = writeln!(s, "  - wave {}: `{}` ({})", c.wave, c.name, c.path);
    }
    let classes: Vec<String> = PRIORITY_CLASSES
        .iter()
        .map(|(name, value, _, _)| format!("`{name}` ({value})"))
        .collect();
    let _ = write!(
        s,
        "\n- `cluster/`: the GPU platform. Each operator folder holds its Namespace, OperatorGroup\n\
  and a Subscription to the mirrored CatalogSource; the policy folders hold the\n\
  NodeFeatureDiscovery, ClusterPolicy, NicClusterPolicy and DataScienceCluster.\n\
  `cluster/kai-scheduler/crds/` is the KAI scheduler's Queue CRD (its source and commit in its\n\
  first lines); the scheduler's own workloads come from its Helm chart, rendered into\n\
  `cluster/kai-scheduler/` by the site (KAI is in no operator catalog).\n\
  `cluster/kai-queues/` holds the priority classes {} (interactive work is never preempted;\n\
  training is preemptible and preempts nothing) and the parent queue `{PARENT_QUEUE}`, whose GPU\n\
  quota is the tenants' total.\n\
- `tenants/base/`: the standard tenant: its Namespace, RoleBindings (`admin`, `edit`, `view`)\n\
  for its directory groups, NetworkPolicies that deny all traffic but the namespace's own and\n\
  DNS, a ResourceQuota with `{GPU_QUOTA}`, a LimitRange, and its KAI queue under `{PARENT_QUEUE}`.\n\
- `tenants/<name>/`: one overlay per tenant: the namespace, the groups and the numbers.\n\
  `tenants/kustomization.yaml` lists them.\n\n\
Every folder builds with `kubectl kustomize <folder>`; `bootstrap gitops check .` runs the\n\
same checks as the scaffold (kustomize, the Argo CD schema of every Application).\n\n\
## Adding a tenant\n\n\
1. Copy an overlay: `cp -r tenants/{example} tenants/<name>`, and in its kustomization.yaml set\n\
   `namespace: <name>`, the queue's name, the groups and the GPU, CPU and memory numbers.\n\
2. Add `<name>` to `tenants/kustomization.yaml`, and raise the GPU quota of the parent queue in\n\
   `cluster/kai-queues/parent-queue.yaml` by the tenant's GPUs.\n\
3. `kubectl kustomize tenants` and `bootstrap gitops check .`, then open a pull request. Once it\n\
   is approved and merged, Argo CD creates the namespace with its quota, policies and bindings;\n\
   nothing is done by hand. Removing the folder (another pull request) removes the tenant.\n\n\
Or add the tenant to the inventory's `gitops.tenants` and run `bootstrap gitops init --force`\n\
into a checkout: it rewrites only the files it owns and says which changed.\n",
        classes.join(" > "),
        example = g.tenants.first().map(|t| t.name.as_str()).unwrap_or("<tenant>"),
    );
    s
}
