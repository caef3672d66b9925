//! The strict reader: unknown keys, keys in another case, missing fields, wrong types,
//! YAML errors, `kind` and `apiVersion`, unreadable files; each named at its line and column.

use super::*;

#[test]
fn unknown_key_fixture_names_file_line_column_and_key() {
    let path = fixture("unknown-key.yaml");
    let e = load(&path).unwrap_err().to_string();
    let origin = path.display().to_string();
    assert_eq!(
            e,
            format!("{origin}:8:3: unknown field 'additionalImage' in mirror (did you mean 'additionalImages'?); expected one of platform, operators, additionalImages, helm, blockedImages, samples")
        );
}

#[test]
fn unknown_key_at_top_level() {
    let e = parse_err(&format!("{HEAD}mirror: {{}}\nmirrors: {{}}\n"));
    assert_eq!(
            e,
            "isc.yaml:4:1: unknown field 'mirrors' at the top level (did you mean 'mirror'?); expected one of apiVersion, kind, mirror, archiveSize"
        );
    let e = parse_err(&format!("{HEAD}mirror: {{}}\ndelete: {{}}\n"));
    assert!(e.starts_with("isc.yaml:4:1: unknown field 'delete' at the top level: delete belongs in a DeleteImageSetConfiguration"), "{e}");
}

/// oc-mirror decodes with Go's encoding/json, which matches keys ignoring case: a key in
/// another case is read as the one meant, with a warning giving the right spelling, and the
/// positions of what follows still name the keys as the schema spells them.
#[test]
fn keys_differing_only_in_case_are_read_with_a_warning() {
    let c = parse_ok(
            "apiversion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  AdditionalImages:\n  - Name: quay.io/a/b:1\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetcatalog: my-org/ops\n",
        );
    assert_eq!(c.mirror.additional_images[0].name, "quay.io/a/b:1");
    assert_eq!(
        c.mirror.operators[0].target_catalog.as_deref(),
        Some("my-org/ops")
    );
    assert_eq!(
            c.warning_lines("isc.yaml"),
            vec![
                "isc.yaml:1:1: apiversion: 'apiversion' is read as 'apiVersion' (oc-mirror matches keys ignoring case); write 'apiVersion'",
                "isc.yaml:4:3: mirror.AdditionalImages: 'AdditionalImages' is read as 'additionalImages' (oc-mirror matches keys ignoring case); write 'additionalImages'",
                "isc.yaml:5:5: mirror.additionalImages[0].Name: 'Name' is read as 'name' (oc-mirror matches keys ignoring case); write 'name'",
                "isc.yaml:8:5: mirror.operators[0].targetcatalog: 'targetcatalog' is read as 'targetCatalog' (oc-mirror matches keys ignoring case); write 'targetCatalog'",
            ]
        );
    assert!(c.warnings().iter().all(|w| !w.is_error()));
    assert_eq!(
        c.location("mirror.additionalImages[0].name"),
        Some(Location {
            line: 5,
            column: 11
        })
    );
    // Both spellings in one mapping: which one Go keeps is an accident; refused.
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  additionalImages: []\n  additionalimages:\n  - name: quay.io/a/b:1\n"
    ));
    assert!(
        e.starts_with("isc.yaml:5:3: duplicate key 'additionalImages' in mirror (first at line 4)"),
        "{e}"
    );
}

/// oc-mirror looks `kind` and `mirror` up exactly in a plain map before decoding
/// (internal/pkg/config/load.go), so those two are not matched ignoring case.
#[test]
fn kind_and_mirror_are_matched_exactly_as_oc_mirror_does() {
    let e = parse_err(
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nMirror: {}\n",
    );
    assert!(
            e.starts_with("isc.yaml:3:1: unknown field 'Mirror' at the top level: oc-mirror looks this key up exactly as `mirror`"),
            "{e}"
        );
    let e = parse_err(
        "apiVersion: mirror.openshift.io/v2alpha1\nKind: ImageSetConfiguration\nmirror: {}\n",
    );
    assert!(e.starts_with("isc.yaml:1:1: kind is missing"), "{e}");
}

#[test]
fn unknown_key_in_operator_package() {
    let text = format!(
            "{HEAD}mirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    packages:\n    - name: a\n    - name: nfd\n      minVersoin: 4.16.0\n"
        );
    let e = parse_err(&text);
    assert_eq!(
            e,
            "isc.yaml:9:7: unknown field 'minVersoin' in mirror.operators[0].packages[1] (did you mean 'minVersion'?); expected one of name, channels, defaultChannel, minVersion, maxVersion"
        );
}

#[test]
fn unknown_key_in_flow_mapping() {
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  additionalImages: [{{name: quay.io/a/b:1, tag: x}}]\n"
    ));
    assert!(
        e.starts_with("isc.yaml:4:44: unknown field 'tag' in mirror.additionalImages[0]"),
        "{e}"
    );
}

#[test]
fn missing_required_field() {
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n  - targetTag: x\n"
    ));
    assert_eq!(
            e,
            "isc.yaml:6:5: missing required field 'name' in mirror.additionalImages[1]; add `name:` there"
        );
    let e = parse_err(&format!("{HEAD}mirror:\n  additionalImages:\n  - {{}}\n"));
    assert_eq!(
            e,
            "isc.yaml:5:5: missing required field 'name' in mirror.additionalImages[0]; add `name:` there"
        );
    let e = parse_err(HEAD);
    assert!(
        e.starts_with("isc.yaml:1:1: missing required field 'mirror' at the top level"),
        "{e}"
    );
}

#[test]
fn wrong_types_name_the_field() {
    let e = parse_err(&format!("{HEAD}archiveSize: four\nmirror: {{}}\n"));
    assert_eq!(
        e,
        "isc.yaml:3:14: archiveSize: expected a whole number, found 'four'"
    );
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  additionalImages: quay.io/a/b:1\n"
    ));
    assert_eq!(
            e,
            "isc.yaml:4:21: mirror.additionalImages: expected a list (entries starting with '- '), found 'quay.io/a/b:1'"
        );
    // A block list starts where its first item does; the wrong node is still named.
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  additionalImages:\n  - quay.io/a/b:1\n"
    ));
    assert_eq!(
            e,
            "isc.yaml:5:5: mirror.additionalImages[0]: expected a mapping (key: value entries), found 'quay.io/a/b:1'"
        );
    let e = parse_err(&format!("{HEAD}mirror:\n  platform:\n  - amd64\n"));
    assert_eq!(
        e,
        "isc.yaml:5:5: mirror.platform: expected a mapping (key: value entries), found a list"
    );
    let e = parse_err(&format!("{HEAD}mirror:\n  additionalImages:\n  - name:\n"));
    assert_eq!(
            e,
            "isc.yaml:5:9: mirror.additionalImages[0].name: a value is required here, found nothing (null)"
        );
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  platform:\n    channels:\n    - name: stable-4.16\n      type: rhel\n"
    ));
    assert_eq!(
            e,
            "isc.yaml:7:13: mirror.platform.channels[0].type: unknown value 'rhel'; expected one of ocp, okd"
        );
}

#[test]
fn duplicate_key_is_refused_with_path() {
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n    name: quay.io/a/b:2\n"
    ));
    assert_eq!(
            e,
            "isc.yaml:6:5: duplicate key 'name' in mirror.additionalImages[0] (first at line 5); a key may appear only once: merge or remove one"
        );
}

#[test]
fn yaml_syntax_error_has_location() {
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  additionalImages:\n  - name: [quay.io/a/b:1\n"
    ));
    assert!(e.starts_with("isc.yaml:5:"), "{e}");
    let e = parse_err(&format!(
        "{HEAD}mirror:\n  additionalImages:\n\t- name: quay.io/a/b:1\n"
    ));
    assert!(e.starts_with("isc.yaml:5:"), "{e}");
}

#[test]
fn empty_and_non_mapping_documents() {
    assert_eq!(
            parse_err(""),
            "isc.yaml: holds no YAML document; an ImageSetConfiguration starts with `apiVersion: mirror.openshift.io/v2alpha1` and `kind: ImageSetConfiguration`"
        );
    assert!(parse_err("# only a comment\n").starts_with("isc.yaml: holds no YAML document"));
    assert_eq!(
            parse_err("- a\n- b\n"),
            "isc.yaml:1:1: expected a mapping starting with `apiVersion: mirror.openshift.io/v2alpha1` and `kind: ImageSetConfiguration` at the top level, found a list"
        );
    assert!(
        parse_err(&format!("{HEAD}mirror: {{}}\n---\n{HEAD}mirror: {{}}\n"))
            .contains("more than one YAML document")
    );
}

#[test]
fn wrong_kind() {
    let e =
        parse_err("apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfig\nmirror: {}\n");
    assert_eq!(
        e,
        "isc.yaml:2:7: kind: expected 'ImageSetConfiguration', found 'ImageSetConfig'"
    );
    let e = parse_err(
        "apiVersion: mirror.openshift.io/v2alpha1\nkind: DeleteImageSetConfiguration\ndelete: {}\n",
    );
    assert!(
        e.starts_with(
            "isc.yaml:2:7: kind: DeleteImageSetConfiguration (oc-mirror delete) is not supported"
        ),
        "{e}"
    );
    let e = parse_err("apiVersion: mirror.openshift.io/v2alpha1\nmirror: {}\n");
    assert!(e.starts_with("isc.yaml:1:1: kind is missing"), "{e}");
}

/// oc-mirror v2 never looks at apiVersion (its own e2e configurations say v1alpha2): such
/// a file is read as v2alpha1 with a warning; what only v1 knew stays unknown.
#[test]
fn v1alpha2_is_read_as_v2alpha1_with_a_warning() {
    let c = parse_ok("apiVersion: mirror.openshift.io/v1alpha2\nkind: ImageSetConfiguration\nmirror:\n  additionalImages:\n  - name: quay.io/a/b:1\n");
    assert_eq!(c.api_version, API_VERSION);
    assert_eq!(
            c.warning_lines("isc.yaml"),
            vec!["isc.yaml:1:13: apiVersion: mirror.openshift.io/v1alpha2 is oc-mirror v1's apiVersion; oc-mirror v2 reads the file as v2alpha1, and so does bootstrap: set `apiVersion: mirror.openshift.io/v2alpha1`"]
        );
    let e = parse_err("apiVersion: mirror.openshift.io/v1alpha2\nkind: ImageSetConfiguration\nstorageConfig:\n  local:\n    path: ./meta\nmirror: {}\n");
    assert!(
            e.starts_with("isc.yaml:3:1: unknown field 'storageConfig' at the top level: storageConfig is oc-mirror v1 only"),
            "{e}"
        );
    let e = parse_err("apiVersion: mirror.openshift.io/v1alpha2\nkind: ImageSetConfiguration\nmirror:\n  operators:\n  - catalog: registry.redhat.io/redhat/redhat-operator-index:v4.16\n    targetName: ops\n");
    assert!(
            e.starts_with("isc.yaml:6:5: unknown field 'targetName' in mirror.operators[0]: targetName is oc-mirror v1 only; v2 replaced it with targetCatalog"),
            "{e}"
        );
}

#[test]
fn wrong_api_version() {
    let e = parse_err("apiVersion: v1\nkind: ImageSetConfiguration\nmirror: {}\n");
    assert_eq!(
        e,
        "isc.yaml:1:13: apiVersion: expected 'mirror.openshift.io/v2alpha1', found 'v1'"
    );
    let e = parse_err("kind: ImageSetConfiguration\nmirror: {}\n");
    assert!(e.starts_with("isc.yaml:1:1: apiVersion is missing"), "{e}");
}

#[test]
fn nulls_and_harmless_values_are_accepted() {
    // Go's decoder takes null for lists, flags and objects; empty sections change nothing.
    let c = parse_ok(&format!(
            "{HEAD}mirror:\n  platform:\n    graph: false\n    channels:\n    architectures:\n  operators: []\n  helm:\n  additionalImages:\n  - name: quay.io/a/b:1\n"
        ));
    assert!(c.unsupported_sections().is_empty());
    assert_eq!(c.architectures(), vec!["amd64"]);
    let c = parse_ok(&format!("{HEAD}mirror:\n"));
    assert!(c.mirror.additional_images.is_empty());
}

#[test]
fn missing_file() {
    let e = load(Path::new("does-not-exist/isc.yaml")).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }));
    assert_eq!(
        e.to_string(),
        "reading does-not-exist/isc.yaml: No such file or directory"
    );
}

#[test]
fn unreadable_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("isc.yaml");
    fs_err::write(&bin, b"apiVersion: \xff\xfe\n").unwrap();
    let e = load(&bin).unwrap_err().to_string();
    assert!(
        e.ends_with("isc.yaml: not UTF-8 text (invalid byte at offset 12); save the file as UTF-8"),
        "{e}"
    );
    let e = load(dir.path()).unwrap_err().to_string();
    assert!(e.starts_with("reading "), "{e}");
}

#[test]
fn control_characters_are_escaped_in_messages() {
    let e = parse_err("apiVersion: \"\\e[31mred\"\nkind: ImageSetConfiguration\nmirror: {}\n");
    assert!(!e.contains('\u{1b}'), "{e:?}");
    assert!(e.contains("\\u{1b}[31mred"), "{e}");
}

#[test]
fn bom_is_accepted() {
    parse_ok(&format!("\u{feff}{HEAD}mirror: {{}}\n"));
}

/// `mirror.samples` is read and ignored, as oc-mirror does, with a warning at its line that
/// says so; it is no longer a section bootstrap refuses.
#[test]
fn samples_are_read_and_ignored_with_a_warning() {
    let text = "apiVersion: mirror.openshift.io/v2alpha1\nkind: ImageSetConfiguration\nmirror:\n  samples:\n  - name: ruby\n  additionalImages:\n  - name: registry.example.com/a/b:v1\n";
    let c = parse(text, "isc.yaml").unwrap();
    assert!(c.unsupported_sections().is_empty());
    c.ensure_supported("isc.yaml").unwrap();
    let lines = c.warning_lines("isc.yaml");
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("isc.yaml:4:3: ")
            && lines[0].contains("mirror.samples: read and ignored"),
        "{lines:?}"
    );
}
