//! What a selection holds and writes: its images once each, its files in a fixed order,
//! deprecations kept only about what is kept.

use super::*;

#[test]
fn every_related_image_of_a_kept_bundle_is_listed_once() {
    let mut p = pkg(GPU);
    p.channels = vec![chan("stable")];
    let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
    let expected: Vec<String> = ["bundle", "device-plugin", "driver", "toolkit"]
        .iter()
        .map(|r| format!("registry.example.com/gpu-operator-certified/{r}@sha256:24.6.2"))
        .collect();
    // The bundle image is both `image` and a relatedImage: listed once.
    assert_eq!(sel.images, expected);
    for b in sel.bundles.values().flat_map(|b| b.values()) {
        assert!(sel.images.contains(&b.image));
        for r in &b.related_images {
            assert!(sel.images.contains(&r.image), "{}", r.image);
        }
    }
}

#[test]
fn render_is_ordered_filtered_and_deterministic() {
    let mut p = pkg(GPU);
    p.min_version = some("24.6.0");
    let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
    let files = sel.render(UnknownSchemas::Keep);
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        vec!["catalog.json", "gpu-operator-certified/catalog.json"]
    );
    assert_eq!(files, sel.render(UnknownSchemas::Keep));
    let docs = fbc::parse_file("x.json", &files["gpu-operator-certified/catalog.json"])
        .unwrap()
        .unwrap();
    let summary: Vec<(&str, &str)> = docs
        .iter()
        .map(|d| {
            (
                d["schema"].as_str().unwrap(),
                d.get("name").and_then(Value::as_str).unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("olm.package", GPU),
            ("olm.channel", "stable"),
            ("olm.channel", "v24.6"),
            ("olm.bundle", "gpu-operator-certified.v24.6.0"),
            ("olm.bundle", "gpu-operator-certified.v24.6.1"),
            ("olm.bundle", "gpu-operator-certified.v24.6.2"),
        ]
    );
    // The deprecations are about 23.9.2 and v23.9, both dropped: the document goes too.
    assert!(!files["gpu-operator-certified/catalog.json"]
        .windows(16)
        .any(|w| w == b"olm.deprecations"));
    // Fields not modelled (icon) survive; the rebuilt catalog parses as a catalog.
    assert!(docs[0].contains_key("icon"));
    let rebuilt = Catalog::parse(&files).unwrap();
    assert_eq!(rebuilt.bundles[GPU].len(), 3);
    assert_eq!(rebuilt.others.len(), 1);
    // Drop leaves unknown schemas out.
    let files = sel.render(UnknownSchemas::Drop);
    assert_eq!(files.len(), 1);
}

#[test]
fn deprecations_about_kept_things_are_kept() {
    let sel = select(
        &catalog(),
        &operator(vec![pkg(GPU)]),
        0,
        Dependencies::Report,
    )
    .unwrap();
    let dep = sel
        .others
        .iter()
        .find(|o| o.schema == "olm.deprecations")
        .unwrap();
    assert_eq!(dep.raw["entries"].as_array().unwrap().len(), 2);
    let mut p = pkg(GPU);
    p.channels = vec![chan("stable"), chan("v23.9")];
    p.min_version = None;
    let sel = select(&catalog(), &operator(vec![p]), 0, Dependencies::Report).unwrap();
    let dep = sel
        .others
        .iter()
        .find(|o| o.schema == "olm.deprecations")
        .unwrap();
    // 23.9.2 is kept (head of v23.9), and so is the channel.
    assert_eq!(dep.raw["entries"].as_array().unwrap().len(), 2);
}
