//! Which channels and entries a listed package keeps (heads, version ranges, `full`, the
//! default channel), and what is refused: names the catalog lacks, channels opm would refuse,
//! bounds that match nothing.

use super::*;

#[test]
fn heads_only_for_every_package_without_packages() {
    let sel = select(&catalog(), &operator(vec![]), 0, Dependencies::Report).unwrap();
    assert_eq!(entries(&sel, GPU, "stable"), vec!["24.6.2"]);
    assert_eq!(entries(&sel, GPU, "v24.6"), vec!["24.6.2"]);
    assert_eq!(entries(&sel, GPU, "v23.9"), vec!["23.9.2"]);
    assert_eq!(versions(&sel, GPU), vec!["23.9.2", "24.6.2"]);
    assert_eq!(entries(&sel, "nfd", "stable"), vec!["4.16.0"]);
    assert_eq!(entries(&sel, "nfd", "4.15"), vec!["4.15.0"]);
    assert_eq!(versions(&sel, GITOPS), vec!["1.13.1"]);
    assert_eq!(versions(&sel, "cert-manager"), vec!["1.14.0"]);
    // Every requirement is already met by a channel head: nothing added, nothing unmet.
    assert!(sel.dependencies.is_empty(), "{:?}", sel.dependencies);
    assert!(sel.unmet.is_empty(), "{:?}", sel.unmet);
    assert_eq!(sel.packages[GPU].default_channel, "stable");
    assert_eq!(sel.others.len(), 2);
}

#[test]
fn heads_only_for_a_listed_package_covers_all_its_channels() {
    let sel = select(
        &catalog(),
        &operator(vec![pkg(GPU)]),
        0,
        Dependencies::Report,
    )
    .unwrap();
    assert_eq!(sel.packages.keys().collect::<Vec<_>>(), vec![GPU]);
    let channels: Vec<&String> = sel.channels[GPU].keys().collect();
    assert_eq!(channels, vec!["stable", "v23.9", "v24.6"]);
    assert_eq!(versions(&sel, GPU), vec!["23.9.2", "24.6.2"]);
}

#[test]
fn min_version_alone_runs_to_the_channel_head() {
    let mut p = pkg(GPU);
    p.min_version = some("24.6.0");
    let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
    // 24.6.0 is not on stable's replaces chain: it is kept because 24.6.1 skips it.
    assert_eq!(
        entries(&sel, GPU, "stable"),
        vec!["24.6.0", "24.6.1", "24.6.2"]
    );
    assert_eq!(
        entries(&sel, GPU, "v24.6"),
        vec!["24.6.0", "24.6.1", "24.6.2"]
    );
    // v23.9 has nothing in range and is not the default channel: dropped, as oc-mirror does.
    assert!(!sel.channels[GPU].contains_key("v23.9"));
    assert_eq!(versions(&sel, GPU), vec!["24.6.0", "24.6.1", "24.6.2"]);
}

#[test]
fn min_and_max_version_keep_the_range() {
    let mut c = chan("stable");
    c.min_version = some("24.3.0");
    c.max_version = some("24.6.1");
    let mut p = pkg(GPU);
    p.channels = vec![c];
    let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
    assert_eq!(
        entries(&sel, GPU, "stable"),
        vec!["24.3.0", "24.6.0", "24.6.1"]
    );
    assert_eq!(sel.channels[GPU].len(), 1);
    assert_eq!(versions(&sel, GPU), vec!["24.3.0", "24.6.0", "24.6.1"]);
}

#[test]
fn equal_min_and_max_keep_exactly_that_version() {
    let mut p = pkg(GPU);
    p.min_version = some("24.6.0");
    p.max_version = some("24.6.0");
    let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
    assert_eq!(entries(&sel, GPU, "stable"), vec!["24.6.0"]);
    assert_eq!(entries(&sel, GPU, "v24.6"), vec!["24.6.0"]);
    let mut p = pkg(GPU);
    p.min_version = some("24.6.9");
    p.max_version = some("24.6.9");
    let e = select_err(&operator(vec![p]));
    assert_eq!(
            e,
            "mirror.operators[0].packages[0].minVersion: no bundle of package 'gpu-operator-certified' has version 24.6.9"
        );
}

#[test]
fn full_keeps_every_entry_of_the_listed_packages() {
    let mut op = operator(vec![pkg(GPU)]);
    op.full = true;
    op.skip_dependencies = true;
    let sel = select(&catalog(), &op, 0, Dependencies::Report).unwrap();
    assert_eq!(
        entries(&sel, GPU, "stable"),
        vec!["23.9.2", "24.3.0", "24.6.0", "24.6.1", "24.6.2"]
    );
    assert_eq!(entries(&sel, GPU, "v23.9"), vec!["23.9.2"]);
    assert_eq!(sel.bundles[GPU].len(), 5);
    assert_eq!(sel.packages.len(), 1);
}

#[test]
fn full_without_packages_is_the_whole_catalog() {
    let c = catalog();
    let mut op = operator(vec![]);
    op.full = true;
    let sel = select(&c, &op, 0, Dependencies::Report).unwrap();
    assert_eq!(sel.packages, c.packages);
    assert_eq!(sel.channels, c.channels);
    assert_eq!(sel.bundles, c.bundles);
    assert_eq!(sel.others, c.others);
}

#[test]
fn package_and_channel_range_together_is_an_error() {
    let mut c = chan("stable");
    c.max_version = some("24.6.1");
    let mut p = pkg(GPU);
    p.min_version = some("24.3.0");
    p.channels = vec![c];
    let e = select_err(&operator(vec![p]));
    assert_eq!(
            e,
            "mirror.operators[0].packages[0].channels[0].maxVersion: package 'gpu-operator-certified' already sets a version range (mirror.operators[0].packages[0].minVersion); a version range goes on the package or on its channels, not both (oc-mirror refuses this too)"
        );
}

#[test]
fn full_with_a_range_is_an_error() {
    let mut p = pkg(GPU);
    p.max_version = some("24.6.1");
    let mut op = operator(vec![p]);
    op.full = true;
    let e = select_err(&op);
    assert!(
        e.starts_with(
            "mirror.operators[0].packages[0].maxVersion: cannot be combined with `full: true`"
        ),
        "{e}"
    );
    let mut c = chan("stable");
    c.min_version = some("24.3.0");
    let mut p = pkg(GPU);
    p.channels = vec![c];
    let mut op = operator(vec![pkg("nfd"), p]);
    op.full = true;
    let e = select_err(&op);
    assert!(
            e.starts_with("mirror.operators[0].packages[1].channels[0].minVersion: cannot be combined with `full: true`"),
            "{e}"
        );
}

#[test]
fn dropping_the_default_channel_needs_default_channel() {
    let mut p = pkg(GPU);
    p.channels = vec![chan("v24.6")];
    let op = operator(vec![pkg("nfd"), p.clone()]);
    assert_eq!(
            select_err(&op),
            "mirror.operators[0].packages[1].defaultChannel: package 'gpu-operator-certified' has default channel 'stable' in the catalog, but that channel is not mirrored (kept: v24.6); set defaultChannel to one of the kept channels"
        );
    p.default_channel = some("v23.9");
    let op = operator(vec![pkg("nfd"), p.clone()]);
    assert_eq!(
            select_err(&op),
            "mirror.operators[0].packages[1].defaultChannel: channel 'v23.9' is not among the channels mirrored for package 'gpu-operator-certified' (v24.6); name one of them"
        );
    p.default_channel = some("v24.6");
    let sel = select(
        &catalog(),
        &operator(vec![pkg("nfd"), p]),
        0,
        Dependencies::Report,
    )
    .unwrap();
    assert_eq!(sel.packages[GPU].default_channel, "v24.6");
    assert_eq!(sel.packages[GPU].raw["defaultChannel"], "v24.6");
    assert_eq!(entries(&sel, GPU, "v24.6"), vec!["24.6.2"]);
    // The rebuilt catalog says so too.
    let files = sel.render(UnknownSchemas::Keep);
    let docs = fbc::parse_file("x.json", &files["gpu-operator-certified/catalog.json"])
        .unwrap()
        .unwrap();
    assert_eq!(docs[0]["defaultChannel"], "v24.6");
}

#[test]
fn a_range_that_empties_the_default_channel_is_an_error() {
    let mut p = pkg(GPU);
    p.min_version = some("25.0.0");
    let e = select_err(&operator(vec![p]));
    assert_eq!(
            e,
            "mirror.operators[0].packages[0].minVersion: minVersion 25.0.0 leaves no bundle in channel 'stable', the default channel of package 'gpu-operator-certified'"
        );
}

#[test]
fn unknown_package_and_channel_are_errors() {
    let e = select_err(&operator(vec![pkg(GPU), pkg("gpu-operator")]));
    assert!(
        e.starts_with(
            "mirror.operators[0].packages[1].name: the catalog has no package 'gpu-operator'"
        ),
        "{e}"
    );
    let mut p = pkg(GPU);
    p.channels = vec![chan("stable"), chan("v24.9")];
    assert_eq!(
            select_err(&operator(vec![p])),
            "mirror.operators[0].packages[0].channels[1].name: package 'gpu-operator-certified' has no channel 'v24.9'; its channels are: stable, v23.9, v24.6"
        );
    let mut p = pkg(GPU);
    p.min_version = some("latest");
    assert!(select_err(&operator(vec![p]))
        .starts_with("mirror.operators[0].packages[0].minVersion: 'latest' is not a version"));
}

#[test]
fn a_channel_with_two_heads_is_an_error() {
    let mut c = catalog();
    let stable = c
        .channels
        .get_mut("nfd")
        .unwrap()
        .get_mut("stable")
        .unwrap();
    stable.entries[1].replaces = None;
    let e = select(&c, &operator(vec![pkg("nfd")]), 0, Dependencies::Report).unwrap_err();
    assert!(matches!(e, SelectError::Graph { .. }));
    assert_eq!(
            e.to_string(),
            "index/catalog.json: document 12: package 'nfd' channel 'stable': has several heads (entries nothing replaces or skips): nfd.v4.15.0, nfd.v4.16.0; opm refuses such a channel"
        );
}

#[test]
fn a_cycle_is_an_error_not_a_hang() {
    let mut c = catalog();
    let stable = c
        .channels
        .get_mut("cert-manager")
        .unwrap()
        .get_mut("stable")
        .unwrap();
    let mut third = stable.entries[0].clone();
    third.name = "cert-manager.v1.12.0".into();
    third.replaces = Some("cert-manager.v1.13.0".into());
    stable.entries[0].replaces = Some("cert-manager.v1.12.0".into());
    stable.entries.push(third);
    let e = select(
        &c,
        &operator(vec![pkg("cert-manager")]),
        0,
        Dependencies::Report,
    )
    .unwrap_err();
    assert!(
        e.to_string().ends_with("the upgrade graph has a cycle"),
        "{e}"
    );
}

#[test]
fn pre_release_hint_when_a_plain_bound_matches_nothing() {
    let mut c = catalog();
    for b in c.bundles.get_mut("nfd").unwrap().values_mut() {
        b.version.pre = semver::Prerelease::new("202407111006").unwrap();
    }
    let mut p = pkg("nfd");
    p.min_version = some("4.15.0");
    let e = select(&c, &operator(vec![p]), 0, Dependencies::Report)
        .unwrap_err()
        .to_string();
    assert!(
            e.ends_with("(its versions have pre-release parts, such as 4.15.0-202407111006, and, as in oc-mirror, a bound without one does not match them: write the bound with one, e.g. 4.15.0-0)"),
            "{e}"
        );
}
