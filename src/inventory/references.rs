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
