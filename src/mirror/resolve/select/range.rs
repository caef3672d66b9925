//! Version ranges: the ImageSetConfiguration's `minVersion`/`maxVersion` bounds, compared as
//! oc-mirror compares them (Masterminds/semver), and the `versionRange` of an
//! `olm.package.required` property, read as OLM reads it (blang/semver).

use super::channel::ChannelGraph;
use super::{config_error, SelectError};
use crate::openshift::fbc::{Catalog, Channel};
use semver::Version;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// A `minVersion`/`maxVersion` pair from the ImageSetConfiguration.
#[derive(Clone, Debug)]
pub(super) struct IscRange {
    min: Option<Version>,
    max: Option<Version>,
    /// `minVersion` and `maxVersion` are the same text: keep exactly that version.
    exact: bool,
    /// Field path of the first bound set, for messages.
    pub(super) path: String,
}

impl IscRange {
    /// `None` when neither bound is set (empty strings count as unset, as in oc-mirror).
    pub(super) fn parse(
        min: &Option<String>,
        max: &Option<String>,
        base: &str,
    ) -> Result<Option<IscRange>, SelectError> {
        let bound = |v: &Option<String>, field: &str| -> Result<Option<Version>, SelectError> {
            match v.as_deref().map(str::trim).filter(|s| !s.is_empty()) {
                None => Ok(None),
                Some(s) => parse_tolerant(s).map(Some).map_err(|e| {
                    config_error(
                        format!("{base}.{field}"),
                        format!(
                            "'{s}' is not a version ({e}); write MAJOR.MINOR.PATCH, e.g. 24.6.2"
                        ),
                    )
                }),
            }
        };
        let (lo, hi) = (bound(min, "minVersion")?, bound(max, "maxVersion")?);
        let field = match (&lo, &hi) {
            (None, None) => return Ok(None),
            (Some(_), _) => "minVersion",
            (None, Some(_)) => "maxVersion",
        };
        let exact = lo.is_some() && min.as_deref().map(str::trim) == max.as_deref().map(str::trim);
        Ok(Some(IscRange {
            min: lo,
            max: hi,
            exact,
            path: format!("{base}.{field}"),
        }))
    }

    /// Masterminds/semver's `>=min <=max`: each bound rejects a pre-release version unless
    /// the bound has a pre-release part itself; build metadata is ignored.
    pub(super) fn contains(&self, v: &Version) -> bool {
        let admits = |bound: &Version| v.pre.is_empty() || !bound.pre.is_empty();
        self.min
            .as_ref()
            .is_none_or(|m| admits(m) && v.cmp_precedence(m) != Ordering::Less)
            && self
                .max
                .as_ref()
                .is_none_or(|m| admits(m) && v.cmp_precedence(m) != Ordering::Greater)
    }

    pub(super) fn entries(
        &self,
        catalog: &Catalog,
        graph: &ChannelGraph<'_>,
    ) -> Result<BTreeSet<usize>, SelectError> {
        if let Some(want) = self.min.as_ref().filter(|_| self.exact) {
            // oc-mirror (OCPBUGS-61497): min == max keeps that version alone, not the chain.
            let any = catalog
                .bundles
                .get(&graph.channel.package)
                .is_some_and(|b| b.values().any(|b| b.version.cmp_precedence(want).is_eq()));
            if !any {
                return Err(config_error(
                    self.path.clone(),
                    format!(
                        "no bundle of package '{}' has version {want}",
                        graph.channel.package
                    ),
                ));
            }
            return Ok((0..graph.channel.entries.len())
                .filter(|&i| {
                    graph
                        .version(catalog, i)
                        .is_some_and(|v| v.cmp_precedence(want).is_eq())
                })
                .collect());
        }
        Ok(graph.segment(|i| graph.version(catalog, i).is_some_and(|v| self.contains(v))))
    }

    /// `minVersion 24.6.0 and maxVersion 24.6.2` and the like, for messages.
    pub(super) fn describe(&self) -> String {
        match (&self.min, &self.max) {
            (Some(lo), Some(hi)) => format!("the version range {lo} to {hi}"),
            (Some(lo), None) => format!("minVersion {lo}"),
            (None, Some(hi)) => format!("maxVersion {hi}"),
            (None, None) => "the version range".into(),
        }
    }

    /// A hint when the channel has pre-release versions the bounds cannot match.
    pub(super) fn prerelease_hint(&self, catalog: &Catalog, channel: &Channel) -> String {
        let plain = self.min.iter().chain(&self.max).all(|b| b.pre.is_empty());
        let pre = channel
            .entries
            .iter()
            .filter_map(|e| catalog.bundle(&channel.package, &e.name))
            .find(|b| !b.version.pre.is_empty());
        match pre {
            Some(b) if plain => format!(
                " (its versions have pre-release parts, such as {}, and, as in oc-mirror, a bound without one does not match them: write the bound with one, e.g. {}.{}.{}-0)",
                b.version, b.version.major, b.version.minor, b.version.patch
            ),
            _ => String::new(),
        }
    }
}

/// Parses a version as Masterminds' `NewVersion` and blang's `ParseTolerant` do: a leading
/// `v` and missing minor or patch numbers are accepted (`v4.16` is 4.16.0).
fn parse_tolerant(text: &str) -> Result<Version, semver::Error> {
    let t = text.trim();
    let t = t.strip_prefix(['v', 'V']).unwrap_or(t);
    let (core, rest) = t.split_at(t.find(['-', '+']).unwrap_or(t.len()));
    match core.matches('.').count() {
        0 => Version::parse(&format!("{core}.0.0{rest}")),
        1 => Version::parse(&format!("{core}.0{rest}")),
        _ => Version::parse(t),
    }
}

/// An `olm.package.required` `versionRange` in blang/semver syntax, as OLM reads it:
/// comparators separated by spaces must all hold, `||` separates alternatives. Unlike the
/// ImageSetConfiguration's bounds, pre-release versions compare plainly (blang does not set
/// them apart), so `>=4.16.0` admits `4.16.1-202408011200`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct DependencyRange {
    alternatives: Vec<Vec<(Op, Version)>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl DependencyRange {
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let mut alternatives = Vec::new();
        for alt in text.split("||") {
            let mut comparators = Vec::new();
            let mut tokens = alt.split_whitespace();
            while let Some(token) = tokens.next() {
                // `>= 1.2.0`: an operator alone takes the next token as its version.
                let joined;
                let token = if token.chars().all(|c| "<>=!".contains(c)) {
                    let next = tokens
                        .next()
                        .ok_or_else(|| format!("'{token}' is not followed by a version"))?;
                    joined = format!("{token}{next}");
                    joined.as_str()
                } else {
                    token
                };
                comparators.extend(comparator(token)?);
            }
            if comparators.is_empty() {
                return Err(format!("'{text}' has an empty alternative"));
            }
            alternatives.push(comparators);
        }
        Ok(DependencyRange { alternatives })
    }

    pub(super) fn contains(&self, v: &Version) -> bool {
        self.alternatives.iter().any(|all| {
            all.iter().all(|(op, bound)| {
                let ord = v.cmp_precedence(bound);
                match op {
                    Op::Eq => ord.is_eq(),
                    Op::Ne => ord.is_ne(),
                    Op::Gt => ord.is_gt(),
                    Op::Ge => ord.is_ge(),
                    Op::Lt => ord.is_lt(),
                    Op::Le => ord.is_le(),
                }
            })
        })
    }
}

/// One blang comparator (`>=1.2.0`, `1.2.3`, `<2.x`); wildcards expand as blang expands them.
fn comparator(token: &str) -> Result<Vec<(Op, Version)>, String> {
    let ops = [
        (">=", Op::Ge),
        ("<=", Op::Le),
        ("!=", Op::Ne),
        ("==", Op::Eq),
        (">", Op::Gt),
        ("<", Op::Lt),
        ("=", Op::Eq),
        ("!", Op::Ne),
    ];
    let (op, version) = ops
        .iter()
        .find_map(|(p, op)| token.strip_prefix(p).map(|rest| (*op, rest)))
        .unwrap_or((Op::Eq, token));
    let bad = |e: &dyn std::fmt::Display| format!("'{token}' is not a version comparator ({e})");
    let parts: Vec<&str> = version.split('.').collect();
    let wild = |p: &&str| matches!(*p, "x" | "X" | "*");
    let Some(first_wild) = parts.iter().position(wild) else {
        return Ok(vec![(op, parse_tolerant(version).map_err(|e| bad(&e))?)]);
    };
    let number = |p: &str| p.parse::<u64>().map_err(|e| bad(&e));
    let (lo, hi) = match first_wild {
        0 => return Ok(vec![(Op::Ge, Version::new(0, 0, 0))]),
        1 => {
            let major = number(parts[0])?;
            (Version::new(major, 0, 0), Version::new(major + 1, 0, 0))
        }
        _ => {
            let (major, minor) = (number(parts[0])?, number(parts[1])?);
            (
                Version::new(major, minor, 0),
                Version::new(major, minor + 1, 0),
            )
        }
    };
    match op {
        Op::Gt => Ok(vec![(Op::Ge, hi)]),
        Op::Ge => Ok(vec![(Op::Ge, lo)]),
        Op::Lt => Ok(vec![(Op::Lt, lo)]),
        Op::Le => Ok(vec![(Op::Lt, hi)]),
        Op::Eq => Ok(vec![(Op::Ge, lo), (Op::Lt, hi)]),
        Op::Ne => Err(bad(&"a wildcard with != is not supported")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn isc_bounds_set_pre_releases_apart_as_oc_mirror_does() {
        let range = |min: &str| {
            IscRange::parse(&Some(min.to_string()), &None, "p")
                .unwrap()
                .unwrap()
        };
        let v = |s: &str| Version::parse(s).unwrap();
        assert!(!range("4.16.0").contains(&v("4.16.1-202408011200")));
        assert!(range("4.16.0-0").contains(&v("4.16.1-202408011200")));
        assert!(range("4.16.0").contains(&v("4.16.1+build.5")));
        assert!(range("v4.16").contains(&v("4.16.0")));
        assert!(!range("4.16").contains(&v("4.15.9")));
    }

    #[test]
    fn dependency_ranges_read_blang_syntax() {
        let r = |s: &str| DependencyRange::parse(s).unwrap();
        let v = |s: &str| Version::parse(s).unwrap();
        assert!(r(">=1.2.0 <2.0.0").contains(&v("1.9.9")));
        assert!(!r(">=1.2.0 <2.0.0").contains(&v("2.0.0")));
        assert!(r(">= 1.2.0").contains(&v("1.2.0")));
        assert!(r("<1.0.0 || >=2.0.0").contains(&v("2.1.0")));
        assert!(!r("<1.0.0 || >=2.0.0").contains(&v("1.5.0")));
        assert!(r("1.2.3").contains(&v("1.2.3")));
        assert!(r("!1.2.3").contains(&v("1.2.4")));
        assert!(r("1.2.x").contains(&v("1.2.9")));
        assert!(!r("1.2.x").contains(&v("1.3.0")));
        assert!(r(">1.x").contains(&v("2.0.0")));
        assert!(!r(">1.x").contains(&v("1.9.0")));
        // Unlike the ImageSetConfiguration bounds, pre-releases compare plainly.
        assert!(r(">=4.16.0").contains(&v("4.16.1-202408011200")));
        assert!(DependencyRange::parse("").is_err());
        assert!(DependencyRange::parse(">=").is_err());
        assert!(DependencyRange::parse(">=abc").is_err());
    }
}
