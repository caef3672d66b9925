//! Writing YAML the way bootstrap writes every file: serde-saphyr's defaults (strings a YAML
//! 1.1 reader such as Go's sigs.k8s.io/yaml would take for a boolean or a number are quoted,
//! booleans are only true/false, multi-line strings are literal blocks), and long single-line
//! strings (an SSH key, a pull secret) kept on one line instead of folded.

use serde::Serialize;

/// `value` as YAML text.
pub fn to_string<T: Serialize>(value: &T) -> Result<String, serde_saphyr::ser::Error> {
    let mut options = serde_saphyr::SerializerOptions::default();
    options.folded_wrap_chars = usize::MAX / 2;
    serde_saphyr::to_string_with_options(value, options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// Regression guard for REFERENCE §6: strings a YAML 1.1 reader (sigs.k8s.io/yaml) would
    /// turn into booleans or numbers stay quoted strings in what bootstrap emits.
    #[test]
    fn ambiguous_strings_stay_strings_for_go_readers() {
        let labels: BTreeMap<&str, &str> = [
            ("a", "on"),
            ("b", "true"),
            ("c", "yes"),
            ("d", "0644"),
            ("e", "off"),
            ("f", "1e3"),
            ("g", ""),
            ("h", "null"),
            ("i", "802.3ad"),
        ]
        .into_iter()
        .collect();
        let text = to_string(&labels).unwrap();
        for (k, v) in &labels {
            if *k == "i" {
                assert!(text.contains("i: 802.3ad"), "{text}");
                continue;
            }
            let quoted =
                text.contains(&format!("{k}: \"{v}\"")) || text.contains(&format!("{k}: '{v}'"));
            assert!(quoted, "{v} must be quoted:\n{text}");
        }
        // And booleans are written only as true/false.
        let flags: BTreeMap<&str, bool> = [("p", true), ("q", false)].into_iter().collect();
        assert_eq!(to_string(&flags).unwrap(), "p: true\nq: false\n");
        // Every string go-yaml v2 reads as something else (the one list, `scalar.rs`).
        for (v, read) in crate::yaml::scalar::RESOLVE_CASES {
            if read.is_none() || v.is_empty() {
                continue;
            }
            let text = to_string(&BTreeMap::from([("k", *v)])).unwrap();
            let quoted = text == format!("k: \"{v}\"\n") || text == format!("k: '{v}'\n");
            assert!(quoted, "{v} must be quoted: {text}");
        }
        // Keys too: `y` is a YAML 1.1 boolean.
        let keys: BTreeMap<&str, &str> = [("y", "x")].into_iter().collect();
        assert_eq!(to_string(&keys).unwrap(), "\"y\": x\n");
    }
}
