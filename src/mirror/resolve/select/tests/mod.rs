//! The selection rules tried on one small catalog shaped like the real ones ([`catalog`]):
//! which entries each rule keeps (`rules.rs`), which requirements are followed or reported
//! (`dependencies.rs`), and what the filtered catalog holds and writes (`filtered.rs`).

mod dependencies;
mod filtered;
mod rules;
mod whole;

use super::*;
use crate::mirror::config::{IncludeChannel, IncludePackage};
use crate::openshift::fbc::tests::bundle;
use serde_json::{json, Value};

fn channel(package: &str, name: &str, entries: &[(&str, Option<&str>, &[&str])]) -> Value {
    let entries: Vec<Value> = entries
        .iter()
        .map(|(v, replaces, skips)| {
            let mut e = json!({"name": format!("{package}.v{v}")});
            if let Some(r) = replaces {
                e["replaces"] = json!(format!("{package}.v{r}"));
            }
            if !skips.is_empty() {
                let skips: Vec<String> = skips.iter().map(|s| format!("{package}.v{s}")).collect();
                e["skips"] = json!(skips);
            }
            e
        })
        .collect();
    json!({"schema": "olm.channel", "package": package, "name": name, "entries": entries})
}

fn package(name: &str, default: &str) -> Value {
    json!({"schema": "olm.package", "name": name, "defaultChannel": default,
               "icon": {"base64data": "iVBOR", "mediatype": "image/png"}})
}

const GPU: &str = "gpu-operator-certified";
const GITOPS: &str = "openshift-gitops-operator";

/// A small catalog shaped like the real ones:
/// - gpu-operator-certified: `stable` runs 23.9.2 -> 24.3.0 -> 24.6.1 -> 24.6.2, where
///   24.6.0 also replaces 24.3.0 and 24.6.1 skips it; `v24.6` is 24.6.0 -> 24.6.1 -> 24.6.2;
///   `v23.9` holds 23.9.2 alone;
/// - nfd: `stable` 4.15.0 -> 4.16.0, `4.15` with 4.15.0;
/// - openshift-gitops-operator: `latest` 1.12.0 -> 1.13.1, where 1.13.1 requires nfd
///   `>=4.15.0 <4.16.0`; nfd 4.15.0 requires cert-manager `>=1.0.0`;
/// - cert-manager: `stable` 1.13.0 -> 1.14.0;
/// - an olm.deprecations document for gpu-operator-certified and a document of a schema
///   nobody knows, belonging to no package.
fn catalog() -> Catalog {
    Catalog::parse(&catalog_files()).unwrap()
}

/// [`catalog`]'s documents, in one file.
fn catalog_documents() -> Vec<Value> {
    let gpu_related = &["driver", "toolkit", "device-plugin"][..];
    let docs = vec![
        package(GPU, "stable"),
        channel(
            GPU,
            "stable",
            &[
                ("23.9.2", None, &[]),
                ("24.3.0", Some("23.9.2"), &[]),
                ("24.6.0", Some("24.3.0"), &[]),
                ("24.6.1", Some("24.3.0"), &["24.6.0"]),
                ("24.6.2", Some("24.6.1"), &[]),
            ],
        ),
        channel(
            GPU,
            "v24.6",
            &[
                ("24.6.0", None, &[]),
                ("24.6.1", Some("24.6.0"), &[]),
                ("24.6.2", Some("24.6.1"), &[]),
            ],
        ),
        channel(GPU, "v23.9", &[("23.9.2", None, &[])]),
        bundle(GPU, "23.9.2", gpu_related, &[]),
        bundle(GPU, "24.3.0", gpu_related, &[]),
        bundle(GPU, "24.6.0", gpu_related, &[]),
        bundle(GPU, "24.6.1", gpu_related, &[]),
        bundle(GPU, "24.6.2", gpu_related, &[]),
        json!({"schema": "olm.deprecations", "package": GPU, "entries": [
            {"reference": {"schema": "olm.bundle", "name": "gpu-operator-certified.v23.9.2"}, "message": "23.9 is out of support"},
            {"reference": {"schema": "olm.channel", "name": "v23.9"}, "message": "use stable"},
        ]}),
        package("nfd", "stable"),
        channel(
            "nfd",
            "stable",
            &[("4.15.0", None, &[]), ("4.16.0", Some("4.15.0"), &[])],
        ),
        channel("nfd", "4.15", &[("4.15.0", None, &[])]),
        bundle(
            "nfd",
            "4.15.0",
            &["operator"],
            &[("cert-manager", ">=1.0.0")],
        ),
        bundle("nfd", "4.16.0", &["operator"], &[]),
        package(GITOPS, "latest"),
        channel(
            GITOPS,
            "latest",
            &[("1.12.0", None, &[]), ("1.13.1", Some("1.12.0"), &[])],
        ),
        bundle(GITOPS, "1.12.0", &["argocd"], &[]),
        bundle(
            GITOPS,
            "1.13.1",
            &["argocd"],
            &[("nfd", ">=4.15.0 <4.16.0")],
        ),
        package("cert-manager", "stable"),
        channel(
            "cert-manager",
            "stable",
            &[("1.13.0", None, &[]), ("1.14.0", Some("1.13.0"), &[])],
        ),
        bundle("cert-manager", "1.13.0", &[], &[]),
        bundle("cert-manager", "1.14.0", &[], &[]),
        json!({"schema": "example.com.notes", "text": "kept or dropped as a whole"}),
    ];
    docs
}

fn stream(docs: &[Value]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for d in docs {
        bytes.extend(serde_json::to_vec(d).unwrap());
        bytes.push(b'\n');
    }
    bytes
}

/// [`catalog`]'s files: all in one.
fn catalog_files() -> BTreeMap<String, Vec<u8>> {
    BTreeMap::from([(
        "index/catalog.json".to_string(),
        stream(&catalog_documents()),
    )])
}

fn operator(packages: Vec<IncludePackage>) -> Operator {
    Operator {
        catalog: "registry.redhat.io/redhat/certified-operator-index:v4.16".into(),
        packages,
        ..Operator::default()
    }
}

fn pkg(name: &str) -> IncludePackage {
    IncludePackage {
        name: name.into(),
        ..IncludePackage::default()
    }
}

fn chan(name: &str) -> IncludeChannel {
    IncludeChannel {
        name: name.into(),
        ..IncludeChannel::default()
    }
}

fn some(s: &str) -> Option<String> {
    Some(s.to_string())
}

/// Kept entries of one channel, as versions.
fn entries<'a>(sel: &'a Selection, package: &str, channel: &str) -> Vec<&'a str> {
    sel.channels[package][channel]
        .entries
        .iter()
        .map(|e| e.name.rsplit_once(".v").map_or(e.name.as_str(), |(_, v)| v))
        .collect()
}

fn versions<'a>(sel: &'a Selection, package: &str) -> Vec<&'a str> {
    sel.bundles
        .get(package)
        .map(|b| {
            b.values()
                .map(|b| b.name.rsplit_once(".v").unwrap().1)
                .collect()
        })
        .unwrap_or_default()
}

fn select_err(op: &Operator) -> String {
    select(&catalog(), op, 0, Dependencies::Report)
        .unwrap_err()
        .to_string()
}
