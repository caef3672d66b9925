//! The read-only site preflight (`bootstrap preflight --inventory DIR`): before an install
//! touches anything, everything the site must offer is asked for, all at once: every node's BMC
//! (its credentials, its verified TLS, its vendor, the system behind it being the node meant,
//! its virtual CD; [`bmc`]), the cluster's DNS names on the site's own DNS servers ([`site`]
//! with [`dns`]), each NTP server ([`ntp`]), the site registry with the site CA and the pull
//! secret reading the release by digest, and the ISO server's address. Nothing is changed on a
//! BMC or a host: Redfish GETs only (and the session login and logout). One [`Report`]: a row
//! per check, and every problem with its fix. The boot stage runs the BMC checks of
//! [`bmc::inspect`] and [`site::iso_server`] itself before it changes a node.

pub mod bmc;
pub mod dns;
pub mod ntp;
pub mod site;

use crate::inventory::Inventory;
use serde::Serialize;
use std::fmt;
use std::time::Duration;

/// What a check is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Area {
    /// The BMC answers with its credentials, over verified TLS.
    Bmc,
    /// The system behind the BMC is the node meant (MACs, UUID).
    Identity,
    /// The BMC has a virtual CD.
    VirtualMedia,
    /// A cluster or node name resolves on the site's DNS servers.
    Dns,
    /// An NTP server answers.
    Ntp,
    /// The site registry: its CA, the pull secret, the release by digest.
    Registry,
    /// The ISO server's address.
    IsoServer,
}

impl Area {
    /// The name shown.
    pub fn name(self) -> &'static str {
        match self {
            Area::Bmc => "bmc",
            Area::Identity => "identity",
            Area::VirtualMedia => "virtual-media",
            Area::Dns => "dns",
            Area::Ntp => "ntp",
            Area::Registry => "registry",
            Area::IsoServer => "iso-server",
        }
    }
}

/// A check's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// As it must be.
    Ok,
    /// Not run: the inventory does not ask for it, or an earlier check failed.
    Skip,
    /// Works, but not as a site should (unverified TLS).
    Warn,
    /// Will stop the install.
    Fail,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Skip => "skip",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
        }
    }
}

/// One row of the report.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// What it is about.
    pub area: Area,
    /// The node, name, server or registry checked.
    pub subject: String,
    /// Its outcome.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to change, when it is not ok.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    /// A passed check.
    pub fn ok(area: Area, subject: &str, detail: String) -> Check {
        Check {
            area,
            subject: subject.to_string(),
            status: Status::Ok,
            detail,
            fix: None,
        }
    }

    /// A failed check and its fix.
    pub fn fail(area: Area, subject: &str, detail: String, fix: String) -> Check {
        Check {
            status: Status::Fail,
            fix: Some(fix),
            ..Check::ok(area, subject, detail)
        }
    }

    /// A warning and its fix.
    pub fn warn(area: Area, subject: &str, detail: String, fix: String) -> Check {
        Check {
            status: Status::Warn,
            fix: Some(fix),
            ..Check::ok(area, subject, detail)
        }
    }

    /// A check not run, and why.
    pub fn skip(area: Area, subject: &str, why: String) -> Check {
        Check {
            status: Status::Skip,
            ..Check::ok(area, subject, why)
        }
    }
}

/// The preflight's result: every check, and each BMC's facts.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    /// True when no check failed (warnings allowed).
    pub ok: bool,
    /// Counts by status.
    pub summary: Summary,
    /// Every check, BMCs first (in node order), then DNS, NTP, the registry, the ISO server.
    pub checks: Vec<Check>,
    /// What each BMC showed: vendor, MACs, UUID, virtual CD, and every request sent.
    pub bmcs: Vec<bmc::BmcFacts>,
}

/// Checks by status.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Summary {
    /// Passed.
    pub ok: usize,
    /// Warned.
    pub warn: usize,
    /// Failed.
    pub fail: usize,
    /// Not run.
    pub skip: usize,
}

impl Report {
    /// The report of `checks`.
    pub fn new(checks: Vec<Check>, bmcs: Vec<bmc::BmcFacts>) -> Report {
        let mut summary = Summary::default();
        for c in &checks {
            *match c.status {
                Status::Ok => &mut summary.ok,
                Status::Warn => &mut summary.warn,
                Status::Fail => &mut summary.fail,
                Status::Skip => &mut summary.skip,
            } += 1;
        }
        Report {
            ok: summary.fail == 0,
            summary,
            checks,
            bmcs,
        }
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w_subject = self
            .checks
            .iter()
            .map(|c| c.subject.len())
            .max()
            .unwrap_or(7)
            .max(7);
        writeln!(
            f,
            "{:<13} {:<w_subject$} {:<6} DETAIL",
            "CHECK", "SUBJECT", "STATUS"
        )?;
        for c in &self.checks {
            writeln!(
                f,
                "{:<13} {:<w_subject$} {:<6} {}",
                c.area.name(),
                c.subject,
                c.status.name(),
                c.detail
            )?;
            if let Some(fix) = &c.fix {
                writeln!(f, "{:<13} {:<w_subject$} {:<6} fix: {fix}", "", "", "")?;
            }
        }
        let s = &self.summary;
        writeln!(
            f,
            "preflight {}: {} ok, {} warnings, {} failed, {} skipped; nothing was changed on any BMC or host",
            if self.ok { "passed" } else { "FAILED" },
            s.ok,
            s.warn,
            s.fail,
            s.skip
        )
    }
}

/// Limits of the preflight's network checks.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Each BMC request's time limit.
    pub bmc_timeout: Duration,
    /// Each DNS and NTP try's time limit.
    pub udp_timeout: Duration,
    /// BMCs checked at once.
    pub parallel: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            bmc_timeout: Duration::from_secs(15),
            udp_timeout: Duration::from_secs(2),
            parallel: 16,
        }
    }
}

/// Runs every check of `inv`: the BMCs (at most `limits.parallel` at once) beside DNS, NTP, the
/// registry and the ISO server. An unreadable BMC credential or CA is an error before anything
/// is asked.
pub async fn run(inv: &Inventory, limits: Limits) -> anyhow::Result<Report> {
    let targets = bmc::targets(inv)?;
    let opts = crate::redfish::Options {
        attempts: 2,
        timeout: limits.bmc_timeout,
        backoff: Duration::from_millis(500),
        ..Default::default()
    };
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(limits.parallel.max(1)));
    let bmcs = futures_util::future::join_all(targets.iter().map(|t| {
        let gate = gate.clone();
        async move {
            let _permit = gate.acquire().await;
            bmc::check_node(t, opts).await
        }
    }));
    let (bmcs, site) = tokio::join!(bmcs, site::checks(inv, &targets, limits.udp_timeout));
    let mut checks = Vec::new();
    let mut facts = Vec::new();
    for (c, f) in bmcs {
        checks.extend(c);
        facts.push(f);
    }
    checks.extend(site);
    Ok(Report::new(checks, facts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failed row is followed by its fix; warnings do not fail the report, a failure does;
    /// the JSON carries the same rows.
    #[test]
    fn every_problem_is_shown_with_its_fix_and_only_failures_fail() {
        let warned = Report::new(
            vec![
                Check::ok(Area::Ntp, "192.0.2.1", "stratum 2".into()),
                Check::warn(
                    Area::Bmc,
                    "gpu-1",
                    "TLS not verified".into(),
                    "give bmc.ca".into(),
                ),
            ],
            Vec::new(),
        );
        assert!(warned.ok);
        let failed = Report::new(
            vec![Check::fail(
                Area::Dns,
                "api-int.c.example.com",
                "NXDOMAIN".into(),
                "add the record".into(),
            )],
            Vec::new(),
        );
        assert!(!failed.ok);
        let text = failed.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[1].starts_with("dns ") && lines[1].contains("FAIL   NXDOMAIN"),
            "{text}"
        );
        assert!(lines[2].trim_start() == "fix: add the record", "{text}");
        assert!(
            lines[3].starts_with("preflight FAILED: 0 ok, 0 warnings, 1 failed"),
            "{text}"
        );
        let json = serde_json::to_value(&failed).unwrap();
        assert_eq!(json["checks"][0]["area"], "dns");
        assert_eq!(json["checks"][0]["status"], "fail");
        assert_eq!(json["checks"][0]["fix"], "add the record");
    }
}
