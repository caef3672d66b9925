//! The hand-off's part of site.yaml: `gitops` (the site's GitOps repository and how Argo CD
//! reaches it, the operators' catalogs and channels, the tenants, the wait). Checked with the
//! rest of the inventory so `bootstrap gitops init` and the handoff stage start from a site
//! whose names Kubernetes accepts and whose credentials fit the repository's URL.

use super::Validator;
use crate::installer::checks::{self, Finding};
use crate::inventory::model::{GitRepository, Gitops, Tenant};
use crate::inventory::InventoryFile;
use crate::netaddr::is_dns_label;
use crate::yaml::quote;
use std::collections::BTreeSet;

/// The operator packages `gitops.operators` may name: those the scaffold subscribes to.
pub const KNOWN_PACKAGES: &[&str] = &[
    "nfd",
    "gpu-operator-certified",
    "nvidia-network-operator",
    "rhods-operator",
];

/// Namespace prefixes a tenant may not take: the platform's own.
const RESERVED_PREFIXES: &[&str] = &["openshift-", "kube-"];
/// Namespaces a tenant may not take.
const RESERVED_NAMES: &[&str] = &["default", "openshift", "kube-system"];

/// How a repository URL is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UrlKind {
    /// `https://`.
    Https,
    /// `ssh://` or scp-like `user@host:path`.
    Ssh,
    /// `git://`: no authentication, no encryption; a lab's.
    Git,
}

/// How `url` is reached, or why it cannot be used.
pub fn url_kind(url: &str) -> Result<UrlKind, String> {
    let host_ok = |rest: &str| {
        let host = rest.split(['/', ':']).next().unwrap_or("");
        let host = host.rsplit('@').next().unwrap_or("");
        !host.is_empty() && !rest.contains(char::is_whitespace)
    };
    if let Some(rest) = url.strip_prefix("https://") {
        if rest.split('/').next().is_some_and(|h| h.contains('@')) {
            return Err(format!(
                "{} carries credentials; write the URL without them and set username and password",
                quote(url)
            ));
        }
        return host_ok(rest)
            .then_some(UrlKind::Https)
            .ok_or_else(|| bad_url(url));
    }
    if let Some(rest) = url.strip_prefix("ssh://") {
        return host_ok(rest)
            .then_some(UrlKind::Ssh)
            .ok_or_else(|| bad_url(url));
    }
    if let Some(rest) = url.strip_prefix("git://") {
        return host_ok(rest)
            .then_some(UrlKind::Git)
            .ok_or_else(|| bad_url(url));
    }
    // scp-like: git@host:path (no scheme, a user, a colon before the path).
    if !url.contains("://") {
        if let Some((user_host, path)) = url.split_once(':') {
            if user_host.contains('@') && host_ok(user_host) && !path.is_empty() {
                return Ok(UrlKind::Ssh);
            }
        }
    }
    Err(bad_url(url))
}

fn bad_url(url: &str) -> String {
    format!("{} is not a Git URL Argo CD can clone; write https://HOST/PATH, ssh://git@HOST/PATH, git@HOST:PATH, or git://HOST/PATH (lab only)", quote(url))
}

/// A Kubernetes quantity (`4`, `500m`, `64Gi`, `1.5e3`), not negative.
pub fn is_quantity(s: &str) -> bool {
    static RE: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(
            r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]+))?$",
        )
        .expect("the quantity pattern compiles")
    });
    RE.is_match(s)
}

impl Validator<'_> {
    /// `gitops` of site.yaml.
    pub(super) fn gitops(&mut self) {
        let Some(g) = &self.inv.site.gitops else {
            return;
        };
        self.repository(&g.repository);
        self.operators(g);
        self.tenants(&g.tenants);
        if let Some(v) = &g.wait_timeout {
            if let Err(e) = crate::output::parse_duration_ms(v) {
                self.site("gitops.waitTimeout", e);
            }
        }
    }

    fn repository(&mut self, r: &GitRepository) {
        let p = "gitops.repository";
        let kind = match url_kind(&r.url) {
            Ok(k) => Some(k),
            Err(m) => {
                self.site(format!("{p}.url"), m);
                None
            }
        };
        if kind == Some(UrlKind::Git) {
            self.finding(InventoryFile::Site, format!("{p}.url"), Finding::warning("git:// has neither authentication nor encryption: fit for a lab only; a site uses https:// or ssh://"));
        }
        if let Some(rev) = &r.revision {
            if rev.is_empty() || rev.contains(char::is_whitespace) {
                self.site(
                    format!("{p}.revision"),
                    format!(
                        "{} is not a branch, tag or commit; leave it out to follow HEAD",
                        quote(rev)
                    ),
                );
            }
        }
        self.https_credentials(r, kind);
        self.ssh_credentials(r, kind);
    }

    fn https_credentials(&mut self, r: &GitRepository, kind: Option<UrlKind>) {
        let p = "gitops.repository";
        let https = kind == Some(UrlKind::Https);
        match (&r.username, &r.password) {
            (_, Some(_)) if kind.is_some() && !https => self.site(format!("{p}.password"), "a password is sent only over https://; for an SSH URL set sshPrivateKey instead"),
            (None, Some(_)) => self.site(format!("{p}.username"), "password needs a username (for a token, the name the Git server expects, e.g. git or oauth2)"),
            (Some(_), None) => self.site(format!("{p}.password"), "username needs a password (or token): set password: {file: ...} or {env: ...}"),
            _ => {}
        }
        if let Some(pw) = &r.password {
            self.secret_ref(InventoryFile::Site, &format!("{p}.password"), pw);
        }
        if let Some(ca) = &r.ca {
            if kind.is_some() && !https {
                self.site(
                    format!("{p}.ca"),
                    "a CA verifies an https:// server; an SSH URL is verified by knownHosts",
                );
            } else if self.missing_file(&ca.file).is_none() {
                // A missing file is the hand-off's to report: a lab writes it at lab up.
                self.file_ref(
                    InventoryFile::Site,
                    &format!("{p}.ca"),
                    &ca.file,
                    checks::pem_bundle,
                );
            }
        }
        if r.insecure_skip_tls_verify && (!https || r.ca.is_some()) {
            let m = if https {
                "insecureSkipTLSVerify: true turns off what ca sets; keep one of them"
            } else {
                "insecureSkipTLSVerify concerns https:// URLs only"
            };
            self.site(format!("{p}.insecureSkipTLSVerify"), m);
        }
    }

    fn ssh_credentials(&mut self, r: &GitRepository, kind: Option<UrlKind>) {
        let p = "gitops.repository";
        let ssh = kind == Some(UrlKind::Ssh);
        if let Some(key) = &r.ssh_private_key {
            if kind.is_some() && !ssh {
                self.site(format!("{p}.sshPrivateKey"), "an SSH key is used only with ssh:// or git@HOST:PATH URLs; for https:// set username and password");
            }
            self.private_key_ref(InventoryFile::Site, &format!("{p}.sshPrivateKey"), key);
        }
        if !r.known_hosts.is_empty() && kind.is_some() && !ssh {
            self.site(
                format!("{p}.knownHosts"),
                "known hosts verify an SSH server; an https:// server is verified by ca",
            );
        }
        for (i, line) in r.known_hosts.iter().enumerate() {
            let key = line.trim().split_once(' ').map(|(_, k)| k.trim());
            let ok = key.is_some_and(|k| russh::keys::ssh_key::PublicKey::from_openssh(k).is_ok());
            if !ok {
                self.site(format!("{p}.knownHosts[{i}]"), "not a known_hosts line; write HOST KEYTYPE KEY, e.g. ssh-keyscan git.example.com's output");
            }
        }
        if ssh && r.known_hosts.is_empty() {
            self.site(format!("{p}.knownHosts"), "an SSH URL needs the server's host keys (ssh-keyscan HOST), or Argo CD refuses to connect");
        }
    }

    fn operators(&mut self, g: &Gitops) {
        let choices = std::iter::once(("gitops.operator".to_string(), &g.operator)).chain(
            g.operators
                .iter()
                .map(|(k, v)| (format!("gitops.operators.{k}"), v)),
        );
        for (p, c) in choices {
            for (field, value) in [("catalog", &c.catalog), ("channel", &c.channel)] {
                if let Some(v) = value.as_deref().filter(|v| !is_dns_name_ish(v, field)) {
                    self.site(format!("{p}.{field}"), format!("{} is not a {field} name; write the {} (lower case letters, digits, '-' and '.')", quote(v), if field == "catalog" { "CatalogSource's name in openshift-marketplace" } else { "channel as the package lists it, e.g. stable" }));
                }
            }
        }
        for package in g.operators.keys() {
            if !KNOWN_PACKAGES.contains(&package.as_str()) {
                self.site(format!("gitops.operators.{package}"), format!("{} is not a package the platform installs ({}); OpenShift GitOps itself is gitops.operator", quote(package), KNOWN_PACKAGES.join(", ")));
            }
        }
    }

    fn tenants(&mut self, tenants: &[Tenant]) {
        let mut seen = BTreeSet::new();
        for (i, t) in tenants.iter().enumerate() {
            let p = format!("gitops.tenants[{i}]");
            if !is_dns_label(&t.name) {
                self.site(format!("{p}.name"), format!("{} is not a DNS-1123 label (it names the tenant's namespace and KAI queue); use lower case letters, digits and '-', at most 63", quote(&t.name)));
            } else if RESERVED_PREFIXES.iter().any(|r| t.name.starts_with(r))
                || RESERVED_NAMES.contains(&t.name.as_str())
            {
                self.site(format!("{p}.name"), format!("{} is the platform's: openshift-*, kube-* and default are not tenant namespaces; pick the team's name", quote(&t.name)));
            } else if !seen.insert(t.name.as_str()) {
                self.site(
                    format!("{p}.name"),
                    format!(
                        "{} is another tenant's name too; each tenant has its own namespace",
                        quote(&t.name)
                    ),
                );
            }
            for (field, q) in [("cpu", &t.cpu), ("memory", &t.memory)] {
                if let Some(q) = q.as_deref().filter(|q| !is_quantity(q)) {
                    self.site(
                        format!("{p}.{field}"),
                        format!(
                            "{} is not a Kubernetes quantity; write e.g. {}",
                            quote(q),
                            if field == "cpu" {
                                "32 or 500m"
                            } else {
                                "256Gi"
                            }
                        ),
                    );
                }
            }
            for (role, groups) in [
                ("admin", &t.groups.admin),
                ("edit", &t.groups.edit),
                ("view", &t.groups.view),
            ] {
                for (j, g) in groups.iter().enumerate() {
                    if g.trim().is_empty() || g.contains(['\n', '/']) {
                        self.site(format!("{p}.groups.{role}[{j}]"), format!("{} is not a group name; write the directory group as OpenShift knows it (oc get groups)", quote(g)));
                    }
                }
            }
        }
    }
}

/// A CatalogSource name (a DNS-1123 subdomain) or a channel name (which may hold dots and
/// upper-case letters in some catalogs, e.g. `v25.3`, `stable-v1.0`).
fn is_dns_name_ish(s: &str, field: &str) -> bool {
    if field == "catalog" {
        return crate::netaddr::is_dns_name(s);
    }
    !s.is_empty()
        && s.len() <= 253
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_classified_by_how_argo_cd_reaches_them() {
        assert_eq!(
            url_kind("https://192.168.111.1:8443/site.git"),
            Ok(UrlKind::Https)
        );
        assert_eq!(
            url_kind("ssh://git@git.example.com/platform/site.git"),
            Ok(UrlKind::Ssh)
        );
        assert_eq!(url_kind("git@github.com:org/site.git"), Ok(UrlKind::Ssh));
        assert_eq!(url_kind("git://127.0.0.1/site.git"), Ok(UrlKind::Git));
        assert!(url_kind("http://git.example.com/site.git").is_err());
        assert!(url_kind("https://user:pw@git.example.com/site.git")
            .unwrap_err()
            .contains("credentials"));
        assert!(url_kind("site.git").is_err());
        assert!(url_kind("https://").is_err());
    }

    #[test]
    fn quantities_follow_kubernetes() {
        for ok in ["4", "500m", "64Gi", "1.5", "1e3", "+2", ".5", "128974848"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "-1", "4 cores", "64GB", "1.2.3", "Gi"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }
}
