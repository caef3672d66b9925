//! The files and secrets an inventory references, read for rendering: the pull secret (a file or
//! an environment variable), the SSH public keys and the registry CA. Validation only checks
//! that the public files exist and hold what they should; the pull secret is read here alone,
//! carried as a [`Secret`], and never quoted in a message.

use super::model::SecretRef;
use super::{Inventory, InventoryFile};
use crate::secret::Secret;
use crate::yaml::Problem;

/// What an inventory references, read.
#[derive(Debug)]
pub struct Referenced {
    /// The pull secret, on one line with its keys sorted.
    pub pull_secret: Secret,
    /// The SSH public key file's content, trimmed.
    pub ssh_key: String,
    /// The registry CA's PEM, ending in one newline, when referenced.
    pub trust_bundle: Option<String>,
}

/// Reads what `inv` references; every problem (an unset variable, an unreadable file, a pull
/// secret that is not one) placed at its reference in site.yaml.
pub fn read_referenced(inv: &Inventory) -> Result<Referenced, Vec<(InventoryFile, Problem)>> {
    let refs = &inv.site.references;
    let mut problems = Vec::new();
    let pull_secret = pull_secret(inv, &refs.pull_secret).map_err(|p| problems.push(p));
    let ssh_key = read_ref(
        inv,
        "references.sshPublicKey.file",
        &refs.ssh_public_key.file,
    )
    .map(|k| k.trim().to_string())
    .map_err(|p| problems.push(p));
    let trust_bundle = match &refs.registry_ca {
        Some(ca) => read_ref(inv, "references.registryCA.file", &ca.file)
            .map(|t| Some(t.trim_end().to_string() + "\n"))
            .map_err(|p| problems.push(p)),
        None => Ok(None),
    };
    match (pull_secret, ssh_key, trust_bundle) {
        (Ok(pull_secret), Ok(ssh_key), Ok(trust_bundle)) => Ok(Referenced {
            pull_secret,
            ssh_key,
            trust_bundle,
        }),
        _ => Err(problems),
    }
}

fn read_ref(inv: &Inventory, path: &str, file: &str) -> Result<String, (InventoryFile, Problem)> {
    let full = inv.resolve(file);
    fs_err::read_to_string(&full).map_err(|e| {
        inv.problem(
            InventoryFile::Site,
            path,
            format!("reading {}: {}", full.display(), crate::yaml::io_reason(&e)),
        )
    })
}

/// The pull secret, from its file or environment variable; it must be a pull secret as the
/// installer checks one. Messages never quote it.
fn pull_secret(inv: &Inventory, r: &SecretRef) -> Result<Secret, (InventoryFile, Problem)> {
    let (path, text) = match (&r.file, &r.env) {
        (Some(f), None) => (
            "references.pullSecret.file",
            read_ref(inv, "references.pullSecret.file", f)?,
        ),
        (None, Some(var)) => match std::env::var(var) {
            Ok(v) if !v.trim().is_empty() => ("references.pullSecret.env", v),
            _ => {
                return Err(inv.problem(
                    InventoryFile::Site,
                    "references.pullSecret.env",
                    format!("the environment variable {var} is not set; export it with the pull secret's JSON"),
                ))
            }
        },
        _ => {
            return Err(inv.problem(
                InventoryFile::Site,
                "references.pullSecret",
                "set exactly one of file or env",
            ))
        }
    };
    let text = Secret::new(text);
    // The installer's fact, as bootstrap validate applies it; messages never quote the secret.
    crate::installer::checks::pull_secret(text.expose()).map_err(|f| {
        inv.problem(
            InventoryFile::Site,
            path,
            format!("the pull secret {}", f.message),
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(text.expose().trim()).map_err(|e| {
        inv.problem(
            InventoryFile::Site,
            path,
            format!("is not JSON (line {}, column {})", e.line(), e.column()),
        )
    })?;
    // One line, keys sorted: the same secret gives the same file whatever its formatting.
    Ok(Secret::new(value.to_string()))
}

/// A node's BMC user and password, read from its `bmc.credentials` reference (`user:password`).
pub struct BmcCredentials {
    /// The user.
    pub user: String,
    /// The password.
    pub password: Secret,
}

/// Reads `node`'s BMC credentials (a file's or an environment variable's first line,
/// `user:password`), or `None` when it has none. Errors name the node and the field, never the
/// value.
pub fn bmc_credentials(
    inv: &Inventory,
    node: &super::model::Node,
) -> anyhow::Result<Option<BmcCredentials>> {
    use anyhow::Context;
    let Some(r) = &node.bmc.credentials else {
        return Ok(None);
    };
    let at = format!("node {}'s bmc.credentials", node.hostname);
    let text = secret_text(inv, &at, r, "user:password")?;
    let line = text.trim().lines().next().unwrap_or_default();
    let (user, password) = line.split_once(':').with_context(|| {
        format!("{at} is not user:password (one line, the user, a colon, the password; value not shown)")
    })?;
    Ok(Some(BmcCredentials {
        user: user.to_string(),
        password: Secret::new(password),
    }))
}

/// The text a secret reference names (a file's content or an environment variable's value),
/// for the field `at` (`gitops.repository.password`); `holds` says what it should hold. Errors
/// name the field and the file or variable, never the value.
pub fn secret_text(
    inv: &Inventory,
    at: &str,
    r: &SecretRef,
    holds: &str,
) -> anyhow::Result<String> {
    use anyhow::{bail, Context};
    match (&r.file, &r.env) {
        (Some(f), _) => {
            let path = inv.resolve(f);
            fs_err::read_to_string(&path).map_err(|e| {
                anyhow::anyhow!(
                    "{at}: reading {}: {}",
                    path.display(),
                    crate::yaml::io_reason(&e)
                )
            })
        }
        (None, Some(var)) => std::env::var(var).with_context(|| {
            format!("{at} names ${var}, which is not set (it should hold {holds})")
        }),
        (None, None) => bail!("{at} names no file or env"),
    }
}
