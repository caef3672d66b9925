//! `mirror.operators[].catalog: oci://PATH`: a file-based catalog image in an OCI image layout on
//! disk (a catalog a team filtered or built itself), named and placed as oc-mirror v2 names and
//! places it:
//!
//! - parsing as `image.ParseRef` (`internal/pkg/image/image.go`): everything after `oci://` is
//!   the path (a `:tag` stays part of it), an `@sha256:...` is split off; a relative path is
//!   taken from the current directory (`filepath.Abs`);
//! - placement as `FilterCollector.collectOperator` (`internal/pkg/operator/filtered_collector.go`):
//!   repository `targetCatalog`, else the path's base name (`path.Base`); tag `targetTag`, else
//!   `latest`;
//! - `oci:` without `//` is no OCI layout to oc-mirror v2 (`Operator.IsFBCOCI` is never called):
//!   `ParseRef` reads it as a registry reference and refuses it, "unable to parse image
//!   correctly : tag and digest are empty".

use super::Operator;
use crate::oci::digest::Digest;
use std::path::{Component, Path, PathBuf};

/// The scheme of a catalog read from an OCI layout.
pub const OCI_SCHEME: &str = "oci://";

/// The tag an `oci://` catalog gets without `targetTag`, as oc-mirror gives it.
pub const DEFAULT_TAG: &str = "latest";

/// An `oci://` catalog: where its layout is and which image of it to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayoutCatalog {
    /// The layout directory, absolute and cleaned (Go's `filepath.Abs`).
    pub path: PathBuf,
    /// The manifest an `@sha256:...` suffix pins, if any.
    pub digest: Option<Digest>,
    /// The base name of the path as written (Go's `path.Base`): the default repository.
    pub name: String,
}

impl LayoutCatalog {
    /// The catalog `catalog` names when it starts with `oci://` (`None` otherwise); `Err` with
    /// the reason when its digest part is no digest or it names no path.
    pub fn parse(catalog: &str) -> Option<Result<Self, String>> {
        let rest = catalog.strip_prefix(OCI_SCHEME)?;
        Some(Self::parse_path(rest, catalog))
    }

    fn parse_path(rest: &str, catalog: &str) -> Result<Self, String> {
        let (written, digest) = match rest.split_once('@') {
            Some((p, d)) => {
                let digest = d.parse::<Digest>().map_err(|e| {
                    format!("{catalog} unable to parse image correctly : invalid digest ({e})")
                })?;
                (p, Some(digest))
            }
            None => (rest, None),
        };
        if written.is_empty() {
            return Err(format!(
                "{catalog} names no directory: write oci:///absolute/path or oci://relative/path"
            ));
        }
        Ok(LayoutCatalog {
            path: absolute(Path::new(written)),
            digest,
            name: base_name(written),
        })
    }

    /// How records and reports name it: `oci://` and the absolute path (oc-mirror's
    /// `catalogImage`).
    pub fn label(&self) -> String {
        format!("{OCI_SCHEME}{}", self.path.display())
    }

    /// The repository it goes to under the destination: `targetCatalog`, else the base name.
    pub fn repository(&self, op: &Operator) -> String {
        op.target_catalog
            .clone()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| self.name.clone())
    }

    /// The tag it goes to: `targetTag`, else `latest`.
    pub fn tag(op: &Operator) -> String {
        op.target_tag
            .clone()
            .filter(|t| !t.is_empty())
            .unwrap_or_else(|| DEFAULT_TAG.to_string())
    }
}

/// oc-mirror v2's refusal of an `oci:` catalog written without `//` (`oci:/path`, `oci:path`),
/// which it reads as a registry reference; `None` for any other catalog.
pub fn single_slash_refusal(catalog: &str) -> Option<String> {
    (catalog.starts_with("oci:") && !catalog.starts_with(OCI_SCHEME)).then(|| {
        format!(
            "{catalog} unable to parse image correctly : tag and digest are empty (as oc-mirror refuses it: only oci:// names an OCI layout; write oci:///absolute/path or oci://relative/path)"
        )
    })
}

/// Go's `path.Base`: the last element after trailing slashes are removed; `.` for an empty
/// path, `/` for slashes only.
fn base_name(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".into();
    }
    trimmed.rsplit('/').next().unwrap_or(trimmed).to_string()
}

/// Go's `filepath.Abs`: joined to the current directory when relative, then cleaned of `.`
/// and `..` lexically.
fn absolute(path: &Path) -> PathBuf {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut out = PathBuf::from("/");
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(target_catalog: Option<&str>, target_tag: Option<&str>) -> Operator {
        Operator {
            catalog: "oci:///x".into(),
            target_catalog: target_catalog.map(str::to_string),
            target_tag: target_tag.map(str::to_string),
            ..Operator::default()
        }
    }

    /// As oc-mirror's `ParseRef` and `collectOperator`: the base name and `latest`, or the
    /// targets; a `:tag` is part of the path; a relative path is taken from the current
    /// directory.
    #[test]
    fn an_oci_catalog_is_placed_at_its_base_name_and_latest_unless_targets_say() {
        let c = LayoutCatalog::parse("oci:///tmp/case72949/redhat-operator-index/")
            .unwrap()
            .unwrap();
        assert_eq!(
            c.path,
            PathBuf::from("/tmp/case72949/redhat-operator-index")
        );
        assert_eq!(c.label(), "oci:///tmp/case72949/redhat-operator-index");
        assert_eq!(c.repository(&op(None, None)), "redhat-operator-index");
        assert_eq!(LayoutCatalog::tag(&op(None, None)), "latest");
        assert_eq!(
            c.repository(&op(Some("72949/catalog"), None)),
            "72949/catalog"
        );
        assert_eq!(LayoutCatalog::tag(&op(None, Some("v15"))), "v15");
        let tagged = LayoutCatalog::parse("oci:///a/b:v1").unwrap().unwrap();
        assert_eq!((tagged.name.as_str(), tagged.digest), ("b:v1", None));
        let rel = LayoutCatalog::parse("oci://./sub/../cat").unwrap().unwrap();
        assert_eq!(rel.path, std::env::current_dir().unwrap().join("cat"));
        assert_eq!(rel.name, "cat");
        let hex = "a".repeat(64);
        let pinned = LayoutCatalog::parse(&format!("oci:///a/cat@sha256:{hex}"))
            .unwrap()
            .unwrap();
        assert_eq!(pinned.digest.unwrap().hex(), hex);
        assert!(LayoutCatalog::parse("oci:///a/cat@sha256:zz")
            .unwrap()
            .is_err());
        assert!(LayoutCatalog::parse("quay.io/a/b:1").is_none());
    }

    #[test]
    fn oci_without_two_slashes_is_refused_as_oc_mirror_refuses_it() {
        let why = single_slash_refusal("oci:/tmp/cat").unwrap();
        assert!(
            why.starts_with(
                "oci:/tmp/cat unable to parse image correctly : tag and digest are empty"
            ),
            "{why}"
        );
        assert!(single_slash_refusal("oci:///tmp/cat").is_none());
        assert!(single_slash_refusal("quay.io/a/b:1").is_none());
    }
}
