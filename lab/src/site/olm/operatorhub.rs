//! The OperatorHub `cluster` and the default CatalogSources, as the marketplace operator keeps
//! them: each default source exists unless disabled (by `spec.disableAllDefaultSources`, or
//! per source in `spec.sources`, which wins), a disabled one is removed, and `status.sources`
//! reports every default source with `disabled` and `status: Success` (a name that is no
//! default source: `Error`, "Not present in the default definitions").

use super::catalogs::MARKETPLACE;
use super::objects::{self, OLM_V1ALPHA1};
use crate::site::kube::Store;
use anyhow::{Context, Result};
use serde_json::{json, Value};

const CONFIG_V1: &str = "config.openshift.io/v1";
const FIELD_MANAGER: &str = "marketplace-operator";

/// The default sources of an OpenShift 4.18 cluster: name, display name, index repository
/// (on registry.redhat.io) and priority.
pub const DEFAULT_SOURCES: [(&str, &str, &str, i64); 4] = [
    (
        "certified-operators",
        "Certified Operators",
        "redhat/certified-operator-index",
        -200,
    ),
    (
        "community-operators",
        "Community Operators",
        "redhat/community-operator-index",
        -400,
    ),
    (
        "redhat-marketplace",
        "Red Hat Marketplace",
        "redhat/redhat-marketplace-index",
        -300,
    ),
    (
        "redhat-operators",
        "Red Hat Operators",
        "redhat/redhat-operator-index",
        -100,
    ),
];

/// The default CatalogSource `name`.
fn default_source((name, display, repo, priority): (&str, &str, &str, i64)) -> Value {
    json!({
        "apiVersion": OLM_V1ALPHA1, "kind": "CatalogSource",
        "metadata": {"name": name, "namespace": MARKETPLACE,
                     "annotations": {"operatorframework.io/managed-by": "marketplace-operator"}},
        "spec": {
            "displayName": display,
            "publisher": "Red Hat",
            "sourceType": "grpc",
            "image": format!("registry.redhat.io/{repo}:{}", crate::catalog::CATALOG_TAG),
            "priority": priority,
            "updateStrategy": {"registryPoll": {"interval": "10m"}},
        },
    })
}

/// The OperatorHub `cluster` as a fresh cluster has it.
pub fn operator_hub() -> Value {
    json!({"apiVersion": CONFIG_V1, "kind": "OperatorHub", "metadata": {"name": "cluster"}, "spec": {}})
}

/// Adds or removes the default sources as the OperatorHub says, and reports it in its status.
pub fn reconcile(store: &Store) -> Result<()> {
    let r = objects::reference(CONFIG_V1, "OperatorHub", None, "cluster");
    let Some(hub) = objects::get(store, &r)? else {
        return Ok(());
    };
    let all_disabled = hub["spec"]["disableAllDefaultSources"]
        .as_bool()
        .unwrap_or(false);
    let listed = hub["spec"]["sources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let mut statuses = Vec::new();
    for source in DEFAULT_SOURCES {
        let name = source.0;
        let disabled = listed
            .iter()
            .find(|s| s["name"].as_str() == Some(name))
            .and_then(|s| s["disabled"].as_bool())
            .unwrap_or(all_disabled);
        let cs = objects::reference(OLM_V1ALPHA1, "CatalogSource", Some(MARKETPLACE), name);
        if disabled {
            if objects::get(store, &cs)?.is_some() {
                store
                    .delete(&cs, &objects::manager(FIELD_MANAGER))
                    .with_context(|| format!("removing the default CatalogSource {name}"))?;
            }
        } else {
            objects::apply(store, default_source(source), FIELD_MANAGER)?;
        }
        statuses.push(json!({"name": name, "disabled": disabled, "status": "Success"}));
    }
    for s in &listed {
        let name = s["name"].as_str().unwrap_or_default();
        if !DEFAULT_SOURCES.iter().any(|d| d.0 == name) {
            statuses.push(
                json!({"name": name, "disabled": s["disabled"].as_bool().unwrap_or(false),
                "status": "Error", "message": "Not present in the default definitions"}),
            );
        }
    }
    objects::write_status(store, &hub, json!({"sources": statuses}), FIELD_MANAGER)?;
    Ok(())
}

/// What a fresh cluster has before the hand-off: the namespaces `default`, `kube-system`,
/// `openshift-marketplace` and `openshift-operators` (with its `global-operators`
/// OperatorGroup), the OperatorHub `cluster` and the default CatalogSources. Existing objects
/// are left as they are.
pub fn seed(store: &Store) -> Result<()> {
    // OpenShift's own namespaces the hand-off writes into (the mirror's release signatures go
    // to openshift-config-managed).
    for ns in [
        "default",
        "kube-system",
        MARKETPLACE,
        "openshift-operators",
        "openshift-config",
        "openshift-config-managed",
    ] {
        let obj = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        objects::create_absent(store, obj, "bootstrap-lab")?;
    }
    let global = json!({"apiVersion": objects::OLM_V1, "kind": "OperatorGroup",
        "metadata": {"name": "global-operators", "namespace": "openshift-operators"}, "spec": {}});
    objects::create_absent(store, global, "bootstrap-lab")?;
    objects::create_absent(store, operator_hub(), "bootstrap-lab")?;
    for source in DEFAULT_SOURCES {
        objects::create_absent(store, default_source(source), FIELD_MANAGER)?;
    }
    Ok(())
}
