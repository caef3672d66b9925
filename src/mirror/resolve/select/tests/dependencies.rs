//! `olm.package.required`: reported by default as oc-mirror v2 does, followed when asked,
//! and met across catalogs through [`Provided`].

use super::*;

/// oc-mirror v2's filter keeps only what is listed: gitops 1.13.1 requires nfd
/// `>=4.15.0 <4.16.0`, and by default nfd is not added; the requirement is reported, naming
/// the bundle and the range, and why the selection does not meet it.
#[test]
fn dependencies_are_not_followed_by_default_but_reported() {
    let sel = select(
        &catalog(),
        &operator(vec![pkg(GITOPS)]),
        0,
        Dependencies::Report,
    )
    .unwrap();
    assert_eq!(sel.packages.keys().collect::<Vec<_>>(), vec![GITOPS]);
    assert!(sel.dependencies.is_empty());
    assert_eq!(
        sel.unmet,
        vec![UnmetRequirement {
            package: GITOPS.into(),
            bundle: "openshift-gitops-operator.v1.13.1".into(),
            required: "nfd".into(),
            range: ">=4.15.0 <4.16.0".into(),
            reason: "the catalog has such a bundle of 'nfd', but the selection leaves it out"
                .into(),
        }]
    );
    // nfd listed with channel stable, whose head 4.16.0 is out of range: still unmet, and
    // the kept nfd 4.16.0 has no requirement of its own.
    let mut p = pkg("nfd");
    p.channels = vec![chan("stable")];
    let sel = select(
        &catalog(),
        &operator(vec![pkg(GITOPS), p]),
        0,
        Dependencies::Report,
    )
    .unwrap();
    assert_eq!(versions(&sel, "nfd"), vec!["4.16.0"]);
    assert_eq!(sel.unmet.len(), 1);
    // nfd listed with channel 4.15: met by what is listed. Its own requirement
    // (cert-manager >=1.0.0) is then unmet in turn.
    let mut p = pkg("nfd");
    p.channels = vec![chan("4.15")];
    p.default_channel = some("4.15");
    let sel = select(
        &catalog(),
        &operator(vec![pkg(GITOPS), p]),
        0,
        Dependencies::Report,
    )
    .unwrap();
    let unmet: Vec<(&str, &str)> = sel
        .unmet
        .iter()
        .map(|u| (u.bundle.as_str(), u.required.as_str()))
        .collect();
    assert_eq!(unmet, vec![("nfd.v4.15.0", "cert-manager")]);
}

#[test]
fn dependencies_are_followed_transitively_when_asked() {
    let sel = select(
        &catalog(),
        &operator(vec![pkg(GITOPS)]),
        0,
        Dependencies::Follow,
    )
    .unwrap();
    assert!(sel.unmet.is_empty(), "{:?}", sel.unmet);
    assert_eq!(versions(&sel, GITOPS), vec!["1.13.1"]);
    // nfd: its default channel's head (so the package stays valid), plus 4.15.0, which the
    // range needs, in that same channel (a kept channel beats adding channel 4.15).
    assert_eq!(entries(&sel, "nfd", "stable"), vec!["4.15.0", "4.16.0"]);
    assert!(!sel.channels["nfd"].contains_key("4.15"));
    // nfd 4.15.0 requires cert-manager >=1.0.0: its default head satisfies it.
    assert_eq!(versions(&sel, "cert-manager"), vec!["1.14.0"]);
    let picks: Vec<(&str, &str, &str)> = sel
        .dependencies
        .iter()
        .map(|d| {
            (
                d.required_by.as_str(),
                d.package.as_str(),
                d.bundle.as_str(),
            )
        })
        .collect();
    assert_eq!(
        picks,
        vec![
            ("openshift-gitops-operator.v1.13.1", "nfd", "nfd.v4.15.0"),
            ("nfd.v4.15.0", "cert-manager", "cert-manager.v1.14.0"),
        ]
    );
    assert!(sel.images.iter().any(|i| i.contains("/nfd/operator@")));
}

#[test]
fn dependency_is_met_by_a_head_when_one_satisfies_it() {
    // nfd listed with channel 4.15 only: that channel's head satisfies gitops; nothing added.
    let mut p = pkg("nfd");
    p.channels = vec![chan("4.15")];
    p.default_channel = some("4.15");
    let sel = select(
        &catalog(),
        &operator(vec![pkg(GITOPS), p]),
        0,
        Dependencies::Follow,
    )
    .unwrap();
    assert_eq!(entries(&sel, "nfd", "4.15"), vec!["4.15.0"]);
    assert!(!sel.channels["nfd"].contains_key("stable"));
    assert!(sel.dependencies.iter().all(|d| d.package != "nfd"));
    // nfd not listed, its default channel 4.15: the default channel's head is taken.
    let mut c = catalog();
    c.packages.get_mut("nfd").unwrap().default_channel = "4.15".into();
    let sel = select(&c, &operator(vec![pkg(GITOPS)]), 0, Dependencies::Follow).unwrap();
    assert_eq!(sel.channels["nfd"].keys().collect::<Vec<_>>(), vec!["4.15"]);
    assert_eq!(
        (
            sel.dependencies[0].channel.as_str(),
            sel.dependencies[0].bundle.as_str()
        ),
        ("4.15", "nfd.v4.15.0")
    );
}

/// `skipDependencies: true` opts one entry out of `--follow-dependencies`; what it leaves
/// unmet is still reported.
#[test]
fn skip_dependencies_does_not_follow_them() {
    let mut op = operator(vec![pkg(GITOPS)]);
    op.skip_dependencies = true;
    let sel = select(&catalog(), &op, 0, Dependencies::Follow).unwrap();
    assert_eq!(sel.packages.keys().collect::<Vec<_>>(), vec![GITOPS]);
    assert!(sel.dependencies.is_empty());
    assert_eq!(sel.unmet.len(), 1);
}

/// A requirement this catalog cannot meet may be met by another catalog of the
/// configuration (OLM resolves across catalog sources): reported, never refused, whether
/// dependencies are followed or not.
#[test]
fn unsatisfiable_dependency_is_reported_not_refused() {
    let mut c = catalog();
    c.bundles
        .get_mut(GITOPS)
        .unwrap()
        .get_mut("openshift-gitops-operator.v1.13.1")
        .unwrap()
        .dependencies[0]
        .version_range = ">=9.0.0".into();
    c.bundles
        .get_mut("nfd")
        .unwrap()
        .get_mut("nfd.v4.15.0")
        .unwrap()
        .dependencies[0]
        .package = "cert-utils-operator".into();
    let mut p = pkg("nfd");
    p.channels = vec![chan("4.15")];
    p.default_channel = some("4.15");
    for deps in [Dependencies::Report, Dependencies::Follow] {
        let sel = select(&c, &operator(vec![pkg(GITOPS), p.clone()]), 3, deps).unwrap();
        assert!(sel.dependencies.is_empty(), "{deps:?}");
        let unmet: Vec<(&str, &str, &str)> = sel
            .unmet
            .iter()
            .map(|u| (u.bundle.as_str(), u.range.as_str(), u.reason.as_str()))
            .collect();
        assert_eq!(
            unmet,
            vec![
                (
                    "nfd.v4.15.0",
                    ">=1.0.0",
                    "the catalog has no package 'cert-utils-operator'"
                ),
                (
                    "openshift-gitops-operator.v1.13.1",
                    ">=9.0.0",
                    "no bundle of 'nfd' in the catalog satisfies it"
                ),
            ],
            "{deps:?}"
        );
    }
}

/// What another catalog's selection keeps meets a requirement when a kept version is in
/// its range.
#[test]
fn provided_meets_a_requirement_in_range() {
    let mut p = pkg("nfd");
    p.channels = vec![chan("stable")];
    let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
    let provided = Provided::of(&sel);
    assert!(provided.meets("nfd", ">=4.16.0"));
    assert!(!provided.meets("nfd", ">=4.15.0 <4.16.0"));
    assert!(!provided.meets("cert-manager", ">=1.0.0"));
    assert!(!provided.meets("nfd", "not a range"));
}
