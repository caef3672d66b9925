//! The rules only `bootstrap install` adds to the inventory's: what its own stages need of the
//! site that rendering does not (`bootstrap render` and the mirror accept more).
//!
//! The wait stage watches the install as `openshift-install agent wait-for` does, with the
//! watcher token of the installer's state file (`"*gencrypto.AuthConfig".WatcherAuthToken`,
//! an ES256 JWT with `auth_scheme: watcherAuth`, openshift/installer
//! pkg/asset/agent/gencrypto/authconfig.go). The agent installer issues it from 4.18 on; an
//! older release leaves the wait nothing to authenticate with, so such a release is refused
//! before anything is booted.

use super::Validator;
use crate::oci::reference::ImageRef;
use crate::openshift::record::MirrorRecord;
use crate::yaml::quote;

/// The first release whose agent installer issues the watcher token.
pub const WATCHER_TOKEN_SINCE: (u64, u64) = (4, 18);

impl Validator<'_> {
    /// `cluster.release` must be 4.18 or later: as `version`, or as the version the mirror
    /// record holds for `image`'s digest (an image the record does not hold is the tools
    /// stage's to refuse).
    pub(super) fn watcher_token_release(&mut self) {
        let release = &self.inv.site.cluster.release;
        let (path, version) = match (&release.version, &release.image) {
            (Some(v), _) => ("cluster.release.version", v.clone()),
            (None, Some(image)) => match self.recorded_version(image) {
                Some(v) => ("cluster.release.image", v),
                None => return,
            },
            (None, None) => return,
        };
        let Some((major, minor)) = major_minor(&version) else {
            return;
        };
        if (major, minor) < WATCHER_TOKEN_SINCE {
            let (since_major, since_minor) = WATCHER_TOKEN_SINCE;
            self.site(
                path,
                format!(
                    "release {} cannot be installed by bootstrap install: its wait stage authenticates as `openshift-install agent wait-for` does, with the watcher token the agent installer issues from {since_major}.{since_minor} on, and a {major}.{minor} installer issues none; install {since_major}.{since_minor} or later (mirror it and name it here)",
                    quote(&version)
                ),
            );
        }
    }

    /// The version the mirror record holds for the release image `image` (by its digest).
    fn recorded_version(&self, image: &str) -> Option<String> {
        let digest = ImageRef::parse(image).ok()?.digest?;
        let rec = self.inv.site.references.mirror_record.as_ref()?;
        let record = MirrorRecord::load(&self.inv.resolve(&rec.file)).ok()?;
        let found = record.release_by_digest(&digest)?;
        found
            .tag
            .clone()
            .or_else(|| ImageRef::parse(&found.source).ok()?.tag)
    }
}

/// Whether the installer of release `version` issues the watcher token the wait stage needs;
/// `None` when `version` is not `MAJOR.MINOR...`.
pub(crate) fn issues_watcher_token(version: &str) -> Option<bool> {
    major_minor(version).map(|v| v >= WATCHER_TOKEN_SINCE)
}

/// `4.17.9` or a release tag `4.17.9-x86_64`: (4, 17).
fn major_minor(version: &str) -> Option<(u64, u64)> {
    let mut parts = version.split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Versions and release tags give their major and minor; anything else gives none.
    #[test]
    fn a_release_tag_gives_its_major_and_minor() {
        assert_eq!(major_minor("4.17.9"), Some((4, 17)));
        assert_eq!(major_minor("4.18.0-x86_64"), Some((4, 18)));
        assert_eq!(major_minor("latest"), None);
        assert!(major_minor("4.17.9").unwrap() < WATCHER_TOKEN_SINCE);
        assert!(major_minor("5.0.0").unwrap() >= WATCHER_TOKEN_SINCE);
    }
}
