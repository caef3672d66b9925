//! The BMC checks, shared with the boot stage: each node's BMC as the inventory names it
//! ([`targets`]: address, credentials, trust, the identity to expect), and what is read from it
//! before anything changes ([`inspect`]): the system, its MACs and UUID against the inventory,
//! its virtual CD; and the vendor profile the client would boot it by ([`Client::profile`]:
//! vendor, model, the Manager's firmware). Only GETs (and the session login and logout) are sent: the preflight runs
//! [`check_node`] on every node; the boot stage runs [`inspect`] on the client it then boots
//! with.

use super::{Area, Check};
use crate::inventory::model::Node;
use crate::inventory::{self, Inventory};
use crate::redfish::{
    self, Client, Credentials, Endpoint, Identified, NodeIdentity, RedfishError, Trust,
    VirtualMedia,
};
use anyhow::{anyhow, Context, Result};
use serde::Serialize;

/// One node's BMC as the inventory names it.
pub struct BmcTarget {
    /// The node's hostname.
    pub node: String,
    /// Its index in nodes.yaml (for `nodes[i].bmc...` in messages).
    pub index: usize,
    /// Address, credentials and trust.
    pub endpoint: Endpoint,
    /// What the BMC's system must show.
    pub identity: NodeIdentity,
    /// How its certificate is trusted, in words.
    pub trust: String,
    /// The credentials' reference, in words (`file secrets/bmc`), for fixes.
    pub credentials_ref: Option<String>,
    /// The inventory's `bmc.vendor`, forcing the vendor profile.
    pub vendor: Option<redfish::Vendor>,
}

impl BmcTarget {
    /// True when its TLS is verified (a CA, a pinned fingerprint or the system roots).
    pub fn verified(&self) -> bool {
        matches!(
            self.endpoint.trust,
            Trust::Ca(_) | Trust::Fingerprint(_) | Trust::System
        ) && !self.endpoint.address.starts_with("http://")
    }
}

/// Every node's BMC target; an unreadable credential or CA names the node and field.
pub fn targets(inv: &Inventory) -> Result<Vec<BmcTarget>> {
    inv.nodes
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| target(inv, i, node))
        .collect()
}

/// Node `i`'s BMC target ([`targets`] for every node).
pub fn target(inv: &Inventory, i: usize, node: &Node) -> Result<BmcTarget> {
    let b = &node.bmc;
    let at = format!("nodes[{i}].bmc ({})", node.hostname);
    let credentials = inventory::bmc_credentials(inv, node)?.map(|c| Credentials {
        password: c.password.expose().to_string(),
        user: c.user,
    });
    let trust =
        if b.insecure_skip_tls_verify {
            Trust::Insecure
        } else if let Some(ca) = &b.ca {
            let path = inv.resolve(&ca.file);
            Trust::Ca(fs_err::read(&path).with_context(|| {
                format!("{at}.ca: reading the BMC's CA (lab: `bootstrap-lab up` writes it)")
            })?)
        } else if let Some(fp) = &b.fingerprint {
            Trust::Fingerprint(redfish::parse_fingerprint(fp).ok_or_else(|| {
                anyhow!("{at}.fingerprint: not a SHA-256 fingerprint (32 hex bytes)")
            })?)
        } else {
            Trust::System
        };
    let credentials_ref = b.credentials.as_ref().map(|r| match (&r.file, &r.env) {
        (Some(f), _) => format!("file {f}"),
        (_, Some(e)) => format!("environment variable {e}"),
        _ => "its reference".to_string(),
    });
    Ok(BmcTarget {
        node: node.hostname.clone(),
        index: i,
        endpoint: Endpoint {
            address: b.address.clone(),
            credentials,
            trust,
        },
        identity: NodeIdentity {
            macs: node
                .nics
                .iter()
                .map(|n| (n.name.clone(), n.mac.to_ascii_lowercase()))
                .collect(),
            uuid: b.system_uuid.clone(),
        },
        trust: trust_label(node),
        credentials_ref,
        vendor: b.vendor,
    })
}

/// How the node's BMC certificate is trusted, in words (recorded and shown).
pub fn trust_label(node: &Node) -> String {
    let b = &node.bmc;
    if b.address.starts_with("http://") {
        "none (plain HTTP, no credentials)".to_string()
    } else if b.insecure_skip_tls_verify {
        "NOT VERIFIED (insecureSkipTLSVerify)".to_string()
    } else if let Some(ca) = &b.ca {
        format!("CA {}", ca.file)
    } else if let Some(fp) = &b.fingerprint {
        format!("pinned {fp}")
    } else {
        "system roots".to_string()
    }
}

/// What [`inspect`] read from a BMC, as far as it got.
#[derive(Default)]
pub struct Inspection {
    /// The system and its MACs.
    pub found: Option<Identified>,
    /// The vendor profile a boot follows (what the BMC says it is, or `bmc.vendor`).
    pub profile: Option<redfish::Profile>,
    /// Its virtual CD.
    pub cd: Option<VirtualMedia>,
}

/// Why [`inspect`] stopped: the BMC's error, or the system is another node's.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    /// Reading failed.
    #[error(transparent)]
    Redfish(#[from] RedfishError),
    /// The system is not the node meant.
    #[error(transparent)]
    Identity(#[from] redfish::IdentityMismatch),
}

/// Reads the system and its MACs and checks them against `identity`, then chooses the vendor
/// profile (`forced`: the inventory's `bmc.vendor`) and finds the virtual CD it boots from;
/// each into `seen` as soon as it is read (the caller records what was read even on a
/// mismatch). GETs only.
pub async fn inspect(
    client: &Client,
    identity: &NodeIdentity,
    forced: Option<redfish::Vendor>,
    seen: &mut Inspection,
) -> Result<(), InspectError> {
    let found = seen.found.insert(client.identify().await?);
    identity.check(found)?;
    let profile = seen
        .profile
        .insert(client.profile(&found.system, forced).await?);
    seen.cd = Some(client.virtual_cd(&found.system, profile).await?);
    Ok(())
}

/// One node's BMC facts for the preflight's JSON.
#[derive(Clone, Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BmcFacts {
    /// The node.
    pub node: String,
    /// Its BMC (no credentials).
    pub bmc: String,
    /// How its TLS is trusted.
    pub trust: String,
    /// `session`, `basic` or `none`, once connected.
    pub auth: Option<String>,
    /// The vendor profile a boot would follow, with what the BMC says it is (vendor, model,
    /// the Manager's model and firmware).
    pub vendor: Option<redfish::Profile>,
    /// The MACs its BMC reports.
    pub macs: Vec<String>,
    /// Its UUID.
    pub uuid: Option<String>,
    /// Its virtual CD's path.
    pub virtual_cd: Option<String>,
    /// Every call made (method, path, status): GETs, and the session's POST and DELETE.
    pub calls: Vec<redfish::Call>,
}

/// The preflight of one node's BMC: three checks (the BMC answers with its credentials and
/// trust; the system is the node meant; its virtual CD is there), each with its fix.
pub async fn check_node(target: &BmcTarget, opts: redfish::Options) -> (Vec<Check>, BmcFacts) {
    let mut facts = BmcFacts {
        node: target.node.clone(),
        bmc: crate::secret::redact_url(&target.endpoint.address),
        trust: target.trust.clone(),
        ..Default::default()
    };
    let subject = target.node.clone();
    let client = match Client::connect(&target.endpoint, opts).await {
        Ok(c) => c,
        Err(e) => {
            let check = Check::fail(Area::Bmc, &subject, format!("{e}"), connect_fix(target, &e));
            let skipped = [Area::Identity, Area::VirtualMedia]
                .map(|a| Check::skip(a, &subject, "the BMC did not answer".into()));
            let mut checks = vec![check];
            checks.extend(skipped);
            return (checks, facts);
        }
    };
    facts.auth = Some(client.auth_kind().to_string());
    let mut seen = Inspection::default();
    let inspected = inspect(&client, &target.identity, target.vendor, &mut seen).await;
    facts.calls = client.calls();
    client.logout().await;
    if let Some(f) = &seen.found {
        facts.macs = f.macs.clone();
        facts.uuid = f.system.uuid.clone();
    }
    facts.vendor = seen.profile.clone();
    facts.virtual_cd = seen.cd.as_ref().map(|cd| cd.path.clone());
    let mut checks = vec![bmc_check(target, &facts)];
    checks.extend(inspected_checks(target, &subject, &seen, inspected));
    (checks, facts)
}

/// The BMC row: it answered; warned when its TLS is not verified.
fn bmc_check(target: &BmcTarget, facts: &BmcFacts) -> Check {
    let vendor = facts
        .vendor
        .as_ref()
        .map(|p| format!("; vendor profile {}", p.summary()))
        .unwrap_or_default();
    let detail = format!(
        "{} answers, auth {}, TLS {}{vendor}",
        facts.bmc,
        facts.auth.as_deref().unwrap_or("none"),
        target.trust
    );
    if target.verified() {
        return Check::ok(Area::Bmc, &target.node, detail);
    }
    let at = format!("nodes[{}].bmc", target.index);
    Check::warn(
        Area::Bmc,
        &target.node,
        detail,
        format!("its TLS is not verified: give {at}.ca (the CA that signed the BMC's certificate) or {at}.fingerprint, and use https:// with credentials"),
    )
}

fn inspected_checks(
    target: &BmcTarget,
    subject: &str,
    seen: &Inspection,
    inspected: Result<(), InspectError>,
) -> Vec<Check> {
    let at = format!("nodes[{}]", target.index);
    let identity_ok = |f: &Identified| {
        let uuid = f.system.uuid.as_deref().unwrap_or("none");
        Check::ok(
            Area::Identity,
            subject,
            format!(
                "MACs {} and UUID {uuid} as nodes.yaml says",
                f.macs.join(", ")
            ),
        )
    };
    match (inspected, &seen.found, &seen.cd) {
        (Ok(()), Some(found), Some(cd)) => {
            let inserted = match (&cd.inserted, &cd.image) {
                (true, Some(image)) => format!(", holding {}", crate::secret::redact_url(image)),
                _ => String::new(),
            };
            vec![
                identity_ok(found),
                Check::ok(
                    Area::VirtualMedia,
                    subject,
                    format!("{} ({}){inserted}", cd.path, cd.media_types.join(", ")),
                ),
            ]
        }
        (Err(InspectError::Identity(e)), _, _) => vec![
            Check::fail(
                Area::Identity,
                subject,
                e.to_string(),
                format!("correct {at}.nics[].mac / {at}.bmc.systemUUID in nodes.yaml, or {at}.bmc.address if another server answers there"),
            ),
            Check::skip(Area::VirtualMedia, subject, "not the node meant".into()),
        ],
        (Err(e), Some(found), _) => vec![
            identity_ok(found),
            Check::fail(
                Area::VirtualMedia,
                subject,
                e.to_string(),
                "enable virtual media on this BMC (its licence, e.g. iDRAC Enterprise/Datacenter) so it can boot the agent ISO".into(),
            ),
        ],
        (result, _, _) => vec![
            Check::fail(
                Area::Identity,
                subject,
                result.err().map_or("the system was not read".into(), |e| e.to_string()),
                format!("check {at}.bmc.address names this node's system"),
            ),
            Check::skip(Area::VirtualMedia, subject, "the system was not read".into()),
        ],
    }
}

/// The fix for a BMC that did not let us in.
fn connect_fix(target: &BmcTarget, e: &RedfishError) -> String {
    let at = format!("nodes[{}].bmc", target.index);
    match e {
        RedfishError::Unauthorized { .. } => format!(
            "the BMC refuses the user and password of {at}.credentials ({}): put the BMC's account there as user:password",
            target.credentials_ref.as_deref().unwrap_or("none given")
        ),
        RedfishError::CredentialsNeeded { .. } => {
            format!("set {at}.credentials (a file user:password)")
        }
        RedfishError::Tls { fix, .. } => fix.clone(),
        RedfishError::FingerprintMismatch { .. } => {
            format!("check the BMC's certificate, then pin its fingerprint in {at}.fingerprint")
        }
        RedfishError::Address { .. } | RedfishError::CleartextCredentials { .. } => {
            format!("correct {at}.address")
        }
        RedfishError::SeveralSystems { .. } => {
            format!("write the node's full system URL as {at}.address")
        }
        _ => format!(
            "check {at}.address and that this machine reaches the BMC network (routing, firewall, the BMC's power)"
        ),
    }
}
