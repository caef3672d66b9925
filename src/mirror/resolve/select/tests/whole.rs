//! Reading as little as the selection needs gives what reading everything gives: the streamed
//! `full: true` layer is byte for byte the rendered one, and [`select_reading`] keeps what
//! [`select`] keeps, for every kind of entry, on one file and on documents spread over files in
//! any order.

use super::*;
use crate::openshift::rebuild::configs_layer;

/// The same documents over three files, bundles before channels, packages split across files.
fn spread_files() -> BTreeMap<String, Vec<u8>> {
    let docs = catalog_documents();
    let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
    for (i, d) in docs.into_iter().enumerate().rev() {
        match i % 3 {
            0 => a.push(d),
            1 => b.push(d),
            _ => c.push(d),
        }
    }
    BTreeMap::from([
        ("a/catalog.json".to_string(), stream(&a)),
        ("b.json".to_string(), stream(&b)),
        ("z/more.json".to_string(), stream(&c)),
        ("README.md".to_string(), b"not a catalog".to_vec()),
    ])
}

fn full() -> Operator {
    Operator {
        full: true,
        ..operator(vec![])
    }
}

#[test]
fn full_catalog_streamed_is_the_rendered_layer_byte_for_byte() {
    for files in [catalog_files(), spread_files()] {
        let whole = Catalog::parse(&files).unwrap();
        let sel = select(&whole, &full(), 0, Dependencies::Report).unwrap();
        for unknown in [UnknownSchemas::Keep, UnknownSchemas::Drop] {
            let rendered = sel.render(unknown);
            let layer = configs_layer(&rendered, "/configs", Some("/tmp/cache")).unwrap();
            let (streamed, streamed_layer) =
                stream_whole(&files, unknown, "/configs", Some("/tmp/cache")).unwrap();
            assert_eq!(
                streamed_layer.bytes.to_bytes().unwrap(),
                layer.bytes.to_bytes().unwrap()
            );
            assert_eq!(streamed_layer.diff_id, layer.diff_id);
            assert_eq!(streamed.bundle_names(), sel.bundle_names());
            assert_eq!(streamed.images, sel.images);
            assert_eq!(streamed.unmet, sel.unmet);
        }
    }
}

#[test]
fn select_reading_keeps_what_select_keeps() {
    let ops = [
        operator(vec![pkg(GPU)]),
        operator(vec![pkg(GITOPS), pkg("nfd")]),
        operator(vec![IncludePackage {
            channels: vec![chan("stable")],
            ..pkg(GPU)
        }]),
        operator(vec![]),
    ];
    for files in [catalog_files(), spread_files()] {
        let whole = Catalog::parse(&files).unwrap();
        for op in &ops {
            for deps in [Dependencies::Report, Dependencies::Follow] {
                let mut reads = 0;
                let mut read = |keep: Keep<'_>| {
                    reads += 1;
                    Catalog::read(files.iter().map(|(n, b)| (n.as_str(), &b[..])), keep)
                        .map(|(c, _)| c)
                };
                let got = select_reading(&mut read, op, 0, deps).unwrap();
                let want = select(&whole, op, 0, deps).unwrap();
                assert_eq!(got, want, "{op:?} {deps:?}");
                assert_eq!(
                    got.render(UnknownSchemas::Keep),
                    want.render(UnknownSchemas::Keep)
                );
                // Listed packages whose requirements stay within them: one read.
                let within = op.packages.iter().all(|p| p.name == GPU);
                if within && !op.packages.is_empty() {
                    assert_eq!(reads, 1, "{op:?} {deps:?}");
                }
            }
        }
    }
}

#[test]
fn a_listed_package_read_alone_still_reports_why_a_requirement_is_unmet() {
    let files = catalog_files();
    let op = operator(vec![pkg(GITOPS)]);
    let mut read = |keep: Keep<'_>| {
        Catalog::read(files.iter().map(|(n, b)| (n.as_str(), &b[..])), keep).map(|(c, _)| c)
    };
    let sel = select_reading(&mut read, &op, 0, Dependencies::Report).unwrap();
    assert_eq!(sel.unmet.len(), 1);
    assert_eq!(
        sel.unmet[0].reason,
        "the catalog has such a bundle of 'nfd', but the selection leaves it out"
    );
}
