//! The rules a parsed configuration must follow (`validate.rs`), oc-mirror's and bootstrap's,
//! each refused with the field path and what to write instead.

use super::*;

#[test]
fn bad_and_duplicate_architectures() {
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  platform:\n    architectures: [amd64, x86_64, arm64, amd64]\n"
    ));
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(
            lines,
            vec![
                "isc.yaml:5:28: mirror.platform.architectures[1]: unknown architecture 'x86_64' (write amd64); expected one of amd64, arm64, ppc64le, s390x, multi",
                "isc.yaml:5:43: mirror.platform.architectures[3]: 'amd64' is listed twice (first at line 5); remove one",
            ]
        );
}

#[test]
fn full_with_version_range_is_refused() {
    let text = format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    full: true\n    packages:\n    - name: nfd\n      minVersion: 4.16.0\n"
        );
    let e = parse_err(&text);
    assert_eq!(
            e,
            "isc.yaml:9:19: mirror.operators[0].packages[0].minVersion: cannot be combined with `full: true` on mirror.operators[0] (oc-mirror: \"Full: true cannot be mixed with versionRange\"); full mirrors every version, so remove full or the version range"
        );
    let text = format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    full: true\n    packages:\n    - name: nfd\n      channels:\n      - name: stable\n        maxVersion: 4.16.3\n"
        );
    assert!(parse_err(&text).starts_with("isc.yaml:11:21: mirror.operators[0].packages[0].channels[0].maxVersion: cannot be combined with `full: true`"));
}

#[test]
fn package_and_channel_ranges_are_refused() {
    let text = format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    packages:\n    - name: nfd\n      maxVersion: 4.16.5\n      channels:\n      - name: stable\n        minVersion: 4.16.0\n"
        );
    assert_eq!(
            parse_err(&text),
            "isc.yaml:11:21: mirror.operators[0].packages[0].channels[0].minVersion: package 'nfd' already sets maxVersion (mirror.operators[0].packages[0].maxVersion); a version range goes on the package or on its channels, not both (oc-mirror refuses this too)"
        );
}

#[test]
fn duplicates_oc_mirror_refuses() {
    let text = format!(
            "{HEAD}mirror:\n  platform:\n    channels:\n    - name: stable-4.16\n    - name: stable-4.16\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    packages:\n    - name: nfd\n    - name: nfd\n"
        );
    let e = parse_err(&text);
    assert_eq!(e.lines().count(), 2, "{e}");
    assert!(e.contains("isc.yaml:7:13: mirror.platform.channels[1].name: release channel 'stable-4.16' is listed twice"), "{e}");
    assert!(
        e.contains(
            "isc.yaml:12:13: mirror.operators[0].packages[1].name: package 'nfd' is listed twice"
        ),
        "{e}"
    );
}

#[test]
fn archive_size_must_be_positive() {
    let e = parse_err(&format!("{HEAD}archiveSize: 0\nmirror: {{}}\n"));
    assert_eq!(
            e,
            "isc.yaml:3:14: archiveSize: must be a positive number of GiB (e.g. 4), found 0; or leave it out"
        );
}

#[test]
fn additional_image_shapes() {
    let text = format!(
            "{HEAD}mirror:\n  additionalImages:\n  - name: \"\"\n  - name: docker://docker://quay.io/a/b:1\n  - name: \"quay.io/a/b :1\"\n  - name: oci:///srv/layout\n  - name: ubi9/ubi:latest\n"
        );
    let e = parse_err(&text);
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 4, "{e}");
    assert!(lines[0].starts_with(
        "isc.yaml:5:11: mirror.additionalImages[0].name: is empty; give the full image reference"
    ));
    // One docker:// is oc-mirror's transport, dropped; a second one is not a reference.
    assert_eq!(lines[1], "isc.yaml:6:11: mirror.additionalImages[1].name: 'docker://quay.io/a/b:1' starts with docker://; leave the scheme out: write 'quay.io/a/b:1'");
    assert!(lines[2].starts_with(
        "isc.yaml:7:11: mirror.additionalImages[2].name: 'quay.io/a/b :1' contains whitespace"
    ));
    assert!(lines[3].contains("names a local OCI layout"));
    // no registry host: accepted here, as oc-mirror does (docker.io is implied)
    assert!(!e.contains("ubi9/ubi"));
}

#[test]
fn blocked_images_must_be_non_empty_regular_expressions() {
    let e = parse_err(&format!("{HEAD}mirror:\n  blockedImages:\n  - name: ''\n"));
    assert!(
        e.starts_with("isc.yaml:5:11: mirror.blockedImages[0].name: is empty"),
        "{e}"
    );
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  blockedImages:\n  - name: quay.io/bad/(.*\n"
    ));
    assert!(
        e.starts_with(
            "isc.yaml:5:11: mirror.blockedImages[0].name: is not a valid regular expression"
        ),
        "{e}"
    );
    let c = parse_ok(&format!(
        "{HEAD}mirror:\n  blockedImages:\n  - name: quay.io/bad/.*\n"
    ));
    assert!(c.unsupported_sections().is_empty());
    let blocked = c.blocked_images();
    assert!(blocked[0].1.is_match("quay.io/bad/image:1"));
    assert!(!blocked[0].1.is_match("quay.io/good/image:1"));
}

/// oc-mirror cuts the transport off the references it matches blockedImages against, not
/// off the pattern: there a pattern holding docker:// blocks nothing. Refused, not guessed.
#[test]
fn docker_transport_in_a_blocked_pattern_is_refused() {
    let e = parse_err(&format!(
            "{HEAD}mirror:\n  blockedImages:\n  - name: docker://quay.io/bad/.*\n  - name: ^docker://quay.io/worse/.*\n"
        ));
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(
            lines,
            vec![
                "isc.yaml:5:11: mirror.blockedImages[0].name: 'docker://quay.io/bad/.*' holds docker://, but oc-mirror matches blockedImages against references without a transport (quay.io/org/image:tag), so there this pattern blocks nothing: write 'quay.io/bad/.*' to block what it names, or remove the entry",
                "isc.yaml:6:11: mirror.blockedImages[1].name: '^docker://quay.io/worse/.*' holds docker://, but oc-mirror matches blockedImages against references without a transport (quay.io/org/image:tag), so there this pattern blocks nothing: write '^quay.io/worse/.*' to block what it names, or remove the entry",
            ]
        );
}

/// oc-mirror's `IsValidPathComponent`: a targetCatalog is a repository path, lower case,
/// with no tag or digest (the tag goes in targetTag).
#[test]
fn target_catalog_with_a_tag_digest_or_upper_case_is_refused() {
    let op = |target: &str| {
        format!(
                "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetCatalog: \"{target}\"\n"
            )
    };
    assert_eq!(
            parse_err(&op("my-org/ops:v1")),
            "isc.yaml:6:20: mirror.operators[0].targetCatalog: 'my-org/ops:v1' has a tag; targetCatalog is the catalog's repository path under the destination, and oc-mirror refuses this too (\"invalid target path component: should not contain a tag or digest\"): write `targetCatalog: my-org/ops` and `targetTag: v1`"
        );
    let e = parse_err(&op("My-Org/Ops"));
    assert!(
            e.ends_with("'My-Org/Ops' has upper-case letters; targetCatalog is the catalog's repository path under the destination, and oc-mirror refuses this too (\"invalid target path component: should not contain a tag or digest\"): write `targetCatalog: my-org/ops`"),
            "{e}"
        );
    let e = parse_err(&op(
        "a/b@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    ));
    assert!(
        e.contains("has a digest;") && e.ends_with("write `targetCatalog: a/b`"),
        "{e}"
    );
    let e = parse_err(&op("/ops"));
    assert!(
        e.contains("'/ops' is not a repository path;")
            && e.ends_with("e.g. my-org/redhat-operators (put a tag in targetTag)"),
        "{e}"
    );
    parse_ok(&op("my-org/sub.team__x/red-hat--ops"));
}

/// Regression: two catalogs with one targetCatalog used to be accepted, and the second
/// replaced the first at the destination, so its operators vanished from the cluster.
#[test]
fn two_catalogs_with_one_target_catalog_are_refused() {
    let e = parse_err(&format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetCatalog: site/operators\n  - catalog: registry.redhat.io/redhat/certified-operator-index:v4.16\n    targetCatalog: site/operators\n"
        ));
    assert_eq!(
            e,
            "isc.yaml:8:20: mirror.operators[1].targetCatalog: catalog 'registry.redhat.io/redhat/certified-operator-index:v4.16' would be mirrored to 'PREFIX/site/operators:v4.16', where mirror.operators[0] ('registry.redhat.io/redhat/redhat-operator-index:v4.16') is mirrored too: pushed second, it would replace that catalog, whose operators would vanish from the cluster (oc-mirror refuses this too: \"duplicate found in configuration\"); give one of them another targetCatalog or targetTag"
        );
    // Told apart by targetTag, or by their own tags: two places, as oc-mirror accepts.
    parse_ok(&format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetCatalog: site/operators\n  - catalog: registry.redhat.io/redhat/certified-operator-index:v4.16\n    targetCatalog: site/operators\n    targetTag: certified\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.17\n    targetCatalog: site/operators\n"
        ));
}

/// A catalog without targetCatalog lands at its source path; another catalog's
/// targetCatalog (or one from another registry at the same path) can land there too.
/// oc-mirror compares references registry included and lets such two overwrite each
/// other; bootstrap places by path alone, so it refuses them.
#[test]
fn a_catalog_landing_where_another_lands_is_refused() {
    let e = parse_err(&format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n  - catalog: quay.io/me/my-index:v4.16\n    targetCatalog: redhat/redhat-operator-index\n  - catalog: quay.io/redhat/redhat-operator-index:v4.16\n"
        ));
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(lines[0].starts_with("isc.yaml:7:20: mirror.operators[1].targetCatalog: catalog 'quay.io/me/my-index:v4.16' would be mirrored to 'PREFIX/redhat/redhat-operator-index:v4.16', where mirror.operators[0]"), "{e}");
    assert!(lines[1].starts_with("isc.yaml:8:14: mirror.operators[2].catalog: catalog 'quay.io/redhat/redhat-operator-index:v4.16' would be mirrored to"), "{e}");
    assert!(!e.contains("oc-mirror refuses"), "{e}");
    // The same entry twice keeps its own message.
    let e = parse_err(&format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: quay.io/a/index:v1\n  - catalog: docker://quay.io/a/index:v1\n"
        ));
    assert_eq!(
            e,
            "isc.yaml:6:14: mirror.operators[1].catalog: catalog 'quay.io/a/index:v1' is listed twice (also mirror.operators[0]) with the same target; oc-mirror refuses duplicates: merge their packages"
        );
}
