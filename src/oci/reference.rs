//! Image references (`registry/repository[:tag][@digest]`), normalised the way container tools
//! normalise them, and the mapping of a source repository to its place under a mirror prefix.

use super::digest::Digest;
use std::fmt;

/// The registry implied by a reference without a registry host (container tools' convention).
pub const DEFAULT_REGISTRY: &str = "docker.io";

/// A parsed, normalised image reference.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ImageRef {
    /// Registry host with optional port, e.g. `quay.io` or `127.0.0.1:5000`.
    pub registry: String,
    /// Repository path inside the registry, e.g. `openshift/release`.
    pub repository: String,
    /// Tag, when the reference names one.
    pub tag: Option<String>,
    /// Digest, when the reference pins one.
    pub digest: Option<Digest>,
}

/// Why a string is not an image reference.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid image reference '{input}': {reason}")]
pub struct ReferenceError {
    /// What was given.
    pub input: String,
    /// What is wrong with it, and how it should look.
    pub reason: String,
}

impl ImageRef {
    /// Parses `[registry/]repository[:tag][@sha256:hex]`. A reference with neither tag nor
    /// digest is refused: mirroring an implied `latest` is never what an auditor wants.
    pub fn parse(input: &str) -> Result<Self, ReferenceError> {
        let fail = |reason: &str| ReferenceError {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        if input.is_empty() {
            return Err(fail("it is empty"));
        }
        if input.contains("://") {
            return Err(fail(
                "leave out the scheme (docker://); write registry/repository:tag",
            ));
        }
        if input.chars().any(|c| c.is_whitespace()) {
            return Err(fail("it contains whitespace"));
        }
        let (name_tag, digest) = match input.split_once('@') {
            Some((n, d)) => (
                n,
                Some(
                    d.parse::<Digest>()
                        .map_err(|e| fail(&format!("the digest part is wrong: {e}")))?,
                ),
            ),
            None => (input, None),
        };
        // A ':' after the last '/' starts the tag; one before it belongs to a registry port.
        let last_slash = name_tag.rfind('/').map(|i| i + 1).unwrap_or(0);
        let (name, tag) = match name_tag[last_slash..].find(':') {
            Some(i) => (
                &name_tag[..last_slash + i],
                Some(name_tag[last_slash + i + 1..].to_string()),
            ),
            None => (name_tag, None),
        };
        if let Some(t) = &tag {
            if !valid_tag(t) {
                return Err(fail(
                    "the tag must be 1-128 characters of letters, digits, '_', '.' and '-', not starting with '.' or '-'",
                ));
            }
        }
        if tag.is_none() && digest.is_none() {
            return Err(fail("add a tag (:v1.2) or a digest (@sha256:...)"));
        }
        let (registry, repository) = split_registry(name);
        if registry.is_empty() {
            return Err(fail("the registry host is empty"));
        }
        if !valid_repository(&repository) {
            return Err(fail(
                "repository path components must be lowercase letters and digits, separated by '.', '_', '__' or '-'",
            ));
        }
        Ok(ImageRef {
            registry,
            repository,
            tag,
            digest,
        })
    }

    /// The reference a registry request uses: the digest when pinned, else the tag.
    pub fn reference(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => unreachable!("parse refuses references without tag or digest"),
        }
    }

    /// `registry/repository`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The same image in another repository, keeping tag and digest.
    pub fn moved_to(&self, registry: &str, repository: &str) -> ImageRef {
        ImageRef {
            registry: registry.to_string(),
            repository: repository.to_string(),
            tag: self.tag.clone(),
            digest: self.digest.clone(),
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(t) = &self.tag {
            write!(f, ":{t}")?;
        }
        if let Some(d) = &self.digest {
            write!(f, "@{d}")?;
        }
        Ok(())
    }
}

fn split_registry(name: &str) -> (String, String) {
    match name.split_once('/') {
        Some((first, rest))
            if first.contains('.') || first.contains(':') || first == "localhost" =>
        {
            (first.to_string(), rest.to_string())
        }
        Some(_) => (DEFAULT_REGISTRY.to_string(), name.to_string()),
        None => (DEFAULT_REGISTRY.to_string(), format!("library/{name}")),
    }
}

fn valid_tag(tag: &str) -> bool {
    let b = tag.as_bytes();
    !b.is_empty()
        && b.len() <= 128
        && (b[0].is_ascii_alphanumeric() || b[0] == b'_')
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// Distribution's grammar: `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*` per component.
pub fn valid_repository(repo: &str) -> bool {
    !repo.is_empty() && repo.len() <= 255 && repo.split('/').all(valid_component)
}

fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    if b.is_empty() || !is_alnum(b[0]) || !is_alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if is_alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !is_alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

fn is_alnum(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit()
}

/// A registry destination `docker://HOST[:PORT][/PREFIX]`: where mirrored repositories go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegistryTarget {
    /// Host with optional port.
    pub registry: String,
    /// Repository prefix without leading or trailing '/', possibly empty.
    pub prefix: String,
}

impl RegistryTarget {
    /// Parses `HOST[:PORT][/PREFIX]` (the part after `docker://`).
    pub fn parse(input: &str) -> Result<Self, ReferenceError> {
        let fail = |reason: &str| ReferenceError {
            input: input.to_string(),
            reason: reason.to_string(),
        };
        let trimmed = input.trim_end_matches('/');
        let (registry, prefix) = match trimmed.split_once('/') {
            Some((r, p)) => (r, p),
            None => (trimmed, ""),
        };
        if registry.is_empty() {
            return Err(fail(
                "name a registry host, e.g. docker://registry.example.com:5000/mirror",
            ));
        }
        if !prefix.is_empty() && !valid_repository(prefix) {
            return Err(fail(
                "the prefix must be lowercase repository path components, e.g. /mirror/ocp",
            ));
        }
        Ok(RegistryTarget {
            registry: registry.to_string(),
            prefix: prefix.to_string(),
        })
    }

    /// The destination repository for a source repository path: the path kept under the prefix.
    pub fn repository_for(&self, source_repository: &str) -> String {
        if self.prefix.is_empty() {
            source_repository.to_string()
        } else {
            format!("{}/{}", self.prefix, source_repository)
        }
    }
}

impl fmt::Display for RegistryTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.prefix.is_empty() {
            write!(f, "docker://{}", self.registry)
        } else {
            write!(f, "docker://{}/{}", self.registry, self.prefix)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_and_normalise() {
        let r = ImageRef::parse("quay.io/openshift/release:4.18.1").unwrap();
        assert_eq!(r.registry, "quay.io");
        assert_eq!(r.repository, "openshift/release");
        assert_eq!(r.tag.as_deref(), Some("4.18.1"));
        let r = ImageRef::parse("127.0.0.1:5000/a/b@sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.tag, None);
        assert!(r.reference().starts_with("sha256:"));
        let r = ImageRef::parse("ubuntu:24.04").unwrap();
        assert_eq!(r.name(), "docker.io/library/ubuntu");
    }

    #[test]
    fn malformed_references_say_what_is_wrong() {
        for (input, needle) in [
            ("quay.io/a/b", "add a tag"),
            ("quay.io/A/b:1", "lowercase"),
            ("docker://quay.io/a:1", "scheme"),
            ("quay.io/a:-x", "tag"),
            ("quay.io/a@sha256:12", "digest"),
            ("quay.io/a//b:1", "lowercase"),
        ] {
            let err = ImageRef::parse(input).unwrap_err().to_string();
            assert!(err.contains(needle), "{input}: {err}");
        }
    }

    #[test]
    fn destination_keeps_source_path_under_prefix() {
        let t = RegistryTarget::parse("mirror.local:5000/ocp/").unwrap();
        assert_eq!(t.registry, "mirror.local:5000");
        assert_eq!(t.repository_for("a/b"), "ocp/a/b");
        assert_eq!(
            RegistryTarget::parse("h").unwrap().repository_for("a/b"),
            "a/b"
        );
    }
}
