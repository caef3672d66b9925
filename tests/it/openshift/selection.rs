//! Operator selection against the seeded catalog, one test per rule (heads only, `minVersion`,
//! a version range, `full`, a dropped default channel), and dependencies reported as oc-mirror
//! reports them, followed when asked, met by another catalog.

use super::*;

/// The images a plan mirrors for operators: everything but the catalog itself.
fn operator_images(plan: &Value, lab: &Lab) -> BTreeSet<String> {
    let catalog = format!("{}/redhat/redhat-operator-index:v4.18", lab.host());
    let mut out = sources(plan);
    assert!(out.remove(&catalog), "the plan holds the catalog {catalog}");
    out
}

/// Bundle images and related images of `bundles` (names), from what the seed pushed.
fn images_of(lab: &Lab, bundles: &[&str]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut found = BTreeSet::new();
    for p in lab.seed["catalog"]["packages"].as_array().unwrap() {
        for b in p["bundles"].as_array().unwrap() {
            let name = b["name"].as_str().unwrap();
            if bundles.contains(&name) {
                found.insert(name);
                out.insert(b["image"].as_str().unwrap().to_string());
                for r in b["relatedImages"].as_object().unwrap().values() {
                    out.insert(r.as_str().unwrap().to_string());
                }
            }
        }
    }
    assert_eq!(
        found.len(),
        bundles.len(),
        "bundles {bundles:?} not all seeded"
    );
    out
}

fn assert_selects(lab: &Lab, name: &str, operators: &str, bundles: &[&str]) {
    let cfg = lab.operators_config(name, operators);
    let plan = lab.plan(&cfg);
    assert_eq!(
        operator_images(&plan, lab),
        images_of(lab, bundles),
        "{operators}"
    );
}

/// Heads only (no range, not full): a listed channel gives its head bundle alone.
#[test]
fn selection_heads_only() {
    let lab = Lab::new();
    assert_selects(
        &lab,
        "heads.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n    - name: openshift-gitops-operator\n      channels:\n      - name: gitops-1.14\n      defaultChannel: gitops-1.14\n",
        &[
            "gpu-operator-certified.v24.9.1",
            "openshift-gitops-operator.v1.14.3",
        ],
    );
}

/// `minVersion` alone: from that version to the channel's head.
#[test]
fn selection_min_version_only() {
    let lab = Lab::new();
    assert_selects(
        &lab,
        "min.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n        minVersion: 24.9.0\n",
        &["gpu-operator-certified.v24.9.0", "gpu-operator-certified.v24.9.1"],
    );
}

/// `minVersion` and `maxVersion`: the bundles between them, bounds included.
#[test]
fn selection_min_and_max_version() {
    let lab = Lab::new();
    assert_selects(
        &lab,
        "range.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n        minVersion: 24.6.2\n        maxVersion: 24.9.0\n",
        &["gpu-operator-certified.v24.6.2", "gpu-operator-certified.v24.9.0"],
    );
}

/// `full: true`: every bundle of every channel of the listed packages.
#[test]
fn selection_full() {
    let lab = Lab::new();
    assert_selects(
        &lab,
        "full.yaml",
        "    full: true\n    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n",
        &[
            "gpu-operator-certified.v24.6.0",
            "gpu-operator-certified.v24.6.2",
            "gpu-operator-certified.v24.9.0",
            "gpu-operator-certified.v24.9.1",
        ],
    );
}

/// A selection that drops the package's default channel needs `defaultChannel`: without it the
/// run fails naming the field, line and column, before anything is written; with it, it works.
#[test]
fn selection_dropping_the_default_channel_needs_default_channel() {
    let lab = Lab::new();
    let cfg = lab.operators_config(
        "dropped.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: v24.6\n",
    );
    let err = lab.plan_error(&cfg);
    assert!(err.contains("dropped.yaml:"), "{err}");
    assert!(err.contains("mirror.operators[0].packages[0]"), "{err}");
    assert!(err.contains("defaultChannel"), "{err}");
    assert!(!lab.path("never-created").exists());
    assert_selects(
        &lab,
        "kept.yaml",
        "    skipDependencies: true\n    packages:\n    - name: gpu-operator-certified\n      defaultChannel: v24.6\n      channels:\n      - name: v24.6\n",
        &["gpu-operator-certified.v24.6.2"],
    );
}

/// The lines of `stderr` that warn of an unmet `olm.package.required`.
fn dependency_warnings(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.starts_with("warning: ") && l.contains(" requires package "))
        .collect()
}

/// The same ImageSetConfiguration gives oc-mirror v2's bundles: gpu-operator v24.9.1 requires
/// nfd >=4.17.0, and oc-mirror's filter keeps only what is listed, so by default nfd is not
/// added; the requirement is a warning naming the bundle and the range (stderr, and the plan's
/// JSON). `--follow-dependencies` adds nfd's head and reports it; `skipDependencies: true` opts
/// an entry out again.
#[test]
fn selection_reports_dependencies_as_oc_mirror_and_follows_them_when_asked() {
    let lab = Lab::new();
    let operators = "    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n";
    let cfg = lab.operators_config("deps.yaml", operators);
    let gpu = ["gpu-operator-certified.v24.9.1"];
    let (plan, stderr) = lab.plan_with(&cfg, &[]);
    assert_eq!(operator_images(&plan, &lab), images_of(&lab, &gpu));
    let catalog = &plan["catalogs"][0];
    assert_eq!(catalog["dependenciesFollowed"], false, "{catalog}");
    assert_eq!(catalog["dependencies"], serde_json::json!([]), "{catalog}");
    assert_eq!(
        catalog["unmetDependencies"],
        serde_json::json!([{
            "bundle": "gpu-operator-certified.v24.9.1",
            "package": "gpu-operator-certified",
            "requiredPackage": "nfd",
            "versionRange": ">=4.17.0",
            "reason": "the catalog has such a bundle of 'nfd', but the selection leaves it out",
        }]),
        "{catalog}"
    );
    let warnings = dependency_warnings(&stderr);
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains(
            "bundle 'gpu-operator-certified.v24.9.1' of package 'gpu-operator-certified' requires package 'nfd' (>=4.17.0)"
        ) && warnings[0].contains("--follow-dependencies"),
        "{stderr}"
    );

    let (plan, stderr) = lab.plan_with(&cfg, &["--follow-dependencies"]);
    let nfd = "nfd.4.18.0-202503041405";
    assert_eq!(
        operator_images(&plan, &lab),
        images_of(&lab, &[gpu[0], nfd])
    );
    let catalog = &plan["catalogs"][0];
    assert_eq!(catalog["dependenciesFollowed"], true, "{catalog}");
    assert_eq!(
        catalog["dependencies"],
        serde_json::json!([format!("nfd/{nfd}")]),
        "{catalog}"
    );
    assert_eq!(catalog["unmetDependencies"], serde_json::json!([]));
    assert!(dependency_warnings(&stderr).is_empty(), "{stderr}");

    let skip = lab.operators_config(
        "nodeps.yaml",
        &format!("    skipDependencies: true\n{operators}"),
    );
    let (plan, stderr) = lab.plan_with(&skip, &["--follow-dependencies"]);
    assert_eq!(operator_images(&plan, &lab), images_of(&lab, &gpu));
    assert_eq!(plan["catalogs"][0]["dependenciesFollowed"], false);
    assert_eq!(dependency_warnings(&stderr).len(), 1, "{stderr}");
}

/// A required package another catalog of the configuration keeps is met there (OLM resolves
/// across catalog sources): no error, no warning, nothing added; when that other catalog keeps
/// other packages only, the requirement is a warning again, not an error.
#[test]
fn a_dependency_met_by_another_catalog_is_not_reported() {
    let lab = Lab::new();
    let gpu = "    packages:\n    - name: gpu-operator-certified\n      channels:\n      - name: stable\n";
    let other = |package: &str| {
        format!(
            "  - catalog: {}/redhat/redhat-operator-index:v4.18\n    targetCatalog: other/redhat-operator-index\n    packages:\n    - name: {package}\n",
            lab.host()
        )
    };
    let cfg = lab.operators_config("two.yaml", &format!("{gpu}{}", other("nfd")));
    let (plan, stderr) = lab.plan_with(&cfg, &[]);
    for catalog in plan["catalogs"].as_array().unwrap() {
        assert_eq!(
            catalog["unmetDependencies"],
            serde_json::json!([]),
            "{catalog}"
        );
        assert_eq!(catalog["dependencies"], serde_json::json!([]), "{catalog}");
    }
    assert_eq!(
        plan["catalogs"][1]["bundles"]["nfd"],
        serde_json::json!(["nfd.4.18.0-202503041405"])
    );
    assert!(dependency_warnings(&stderr).is_empty(), "{stderr}");

    let cfg = lab.operators_config("other.yaml", &format!("{gpu}{}", other("rhods-operator")));
    let (plan, stderr) = lab.plan_with(&cfg, &[]);
    assert_eq!(
        plan["catalogs"][0]["unmetDependencies"]
            .as_array()
            .unwrap()
            .len(),
        1,
        "{plan}"
    );
    assert_eq!(dependency_warnings(&stderr).len(), 1, "{stderr}");
}
