//! Issue 30: the ImageSetConfigurations users already have. Every v2alpha1 configuration in
//! oc-mirror's own repository (tests/testdata/oc-mirror-isc/, its README names the commit and
//! how each verdict was decided) is read as oc-mirror reads it: the ones oc-mirror refuses are
//! refused, and the ones it accepts parse and validate, and pass the support check except for
//! the sections this version cannot mirror yet, which must be exactly the features the corpus
//! says the file uses (so each gap is named, and closing one tightens this test).

use crate::support::run::repo;
use bootstrap::mirror::config;
use serde_json::Value;

/// The corpus's features that are not supported yet, as `unsupported_sections` names them.
const NOT_YET: &[(&str, &str)] = &[];

/// Accepted by oc-mirror's reading (`config.ReadConfig`) but refused by its plan, before any
/// copy: `full: true` with a package version range fails the catalog filter ("failed to filter
/// catalog: Full: true cannot be mixed with versionRange": oc-mirror
/// `internal/pkg/operator/catalog_handler_test.go` line 518, e2e `oc_mirror_v2.go` line 524).
/// bootstrap refuses them while reading, with the same reason, before any request.
const PLAN_REFUSES: &[&str] = &[
    "tests__e2e__test__e2e__testdata__workloads__config-72938-1.yaml",
    "tests__unit__testdata__config__valid.yaml",
];

#[test]
fn every_configuration_oc_mirror_accepts_is_read_and_every_one_it_refuses_is_refused() {
    let dir = repo("tests/testdata/oc-mirror-isc");
    let expected: Vec<Value> =
        serde_json::from_slice(&fs_err::read(dir.join("expected.json")).unwrap()).unwrap();
    assert!(
        expected.len() >= 100,
        "the corpus lost files: {}",
        expected.len()
    );
    let mut wrong = Vec::new();
    let mut gaps = 0;
    for e in &expected {
        let file = e["file"].as_str().unwrap();
        let accepts = e["ocMirrorAccepts"].as_bool().unwrap() && !PLAN_REFUSES.contains(&file);
        let features: Vec<&str> = e["features"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let read = config::load(&dir.join(file));
        match (accepts, read) {
            (false, Ok(_)) => wrong.push(format!(
                "{file}: oc-mirror refuses it ({}), bootstrap read it",
                e["refusal"]
            )),
            (false, Err(err)) if PLAN_REFUSES.contains(&file) => {
                if !err
                    .to_string()
                    .contains("Full: true cannot be mixed with versionRange")
                {
                    wrong.push(format!("{file}: refused for another reason: {err}"));
                }
            }
            (false, Err(_)) => {}
            (true, Err(err)) => {
                wrong.push(format!("{file}: oc-mirror accepts it; bootstrap: {err}"))
            }
            (true, Ok(cfg)) => {
                let mut want: Vec<&str> = NOT_YET
                    .iter()
                    .filter(|(feature, _)| features.contains(feature))
                    .map(|(_, section)| *section)
                    .collect();
                want.sort();
                let mut got = cfg.unsupported_sections();
                got.sort();
                got.dedup();
                if got != want {
                    wrong.push(format!(
                        "{file}: unsupported sections {got:?}, the corpus says {want:?}"
                    ));
                }
                gaps += usize::from(!got.is_empty());
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {}:\n{}",
        wrong.len(),
        expected.len(),
        wrong.join("\n")
    );
    eprintln!("{gaps} accepted configurations still use a section not supported yet");
}
