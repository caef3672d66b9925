//! The boot stage's proof that each node booted the ISO, not something else: a BMC that took
//! every call and a node that powered on say nothing about *what* it started (a Dell told `Cd`
//! by the standard PATCH boots its physical drive; a SuperMicro told `Cd` boots its disk). A
//! node counts as booted only on evidence, polled after the resets:
//!
//! - **its agent at the rendezvous host**: the rendezvous host's REST API (the one the wait
//!   stage reads, with the installer's watcher token) lists a host whose `requested_hostname`
//!   is the node's (the agent-based installer names each host from agent-config, by MAC);
//! - **its BMC read the ISO after its reset**: bootstrap's ISO server saw a GET of the ISO's
//!   bytes from the BMC's address after the reset. Only an address no other node's BMC shares
//!   counts (in the lab every BMC is 127.0.0.1, and a shared address cannot tell which node
//!   read), and only when bootstrap serves the ISO.
//!
//! A node without either within the bound (`--boot-timeout`, from its reset) booted something
//! else, and is reported at once with its vendor's fix ([`crate::redfish::Profile::wrong_boot_fix`]).
//! The other nodes' agents can only be seen once the rendezvous host is up: while it shows no
//! sign of the ISO, they are "not confirmed", and so when it cannot come up in this run at all
//! (it failed before its reset); the stage fails then, naming the rendezvous host.

use crate::openshift::assisted;
use crate::output::NodeLines;
use crate::redfish::Profile;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use super::served::IsoReads;

/// A node whose boot is to be proven.
#[derive(Clone, Debug)]
pub(super) struct Watched {
    /// The node.
    pub node: String,
    /// Its BMC's address, when no other node's BMC has it (the ISO reads from it are its own).
    pub bmc_ip: Option<IpAddr>,
    /// When its reset was sent (reads of the ISO before it do not count).
    pub since: SystemTime,
    /// When its bound started: its reset in this run, or this run's start for a node an
    /// earlier run reset.
    pub started: Instant,
    /// The vendor profile its boot followed (for the fix).
    pub profile: Option<Profile>,
    /// It is the rendezvous host (node 0).
    pub rendezvous: bool,
}

/// What was found about one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// It booted the ISO: the evidence, in words.
    Booted(String),
    /// No sign of the ISO within the bound: it started from something else. The message, with
    /// the fix.
    SomethingElse(String),
    /// Cannot be told: why (the rendezvous host is not up).
    Unconfirmed(String),
}

/// What the rendezvous host's API showed while the stage ran: it is read from before the first
/// reset ([`Registrations::watch`]), because it answers only while node 0 runs the discovery
/// ISO, and a late node's registration must not be missed when node 0 has moved on.
#[derive(Clone, Debug, Default)]
pub(super) struct Registrations(Arc<Mutex<Seen>>);

#[derive(Debug, Default)]
struct Seen {
    /// Each host name seen, with what was seen first (`host ID, status`).
    hosts: BTreeMap<String, String>,
    /// The API answered at least once.
    answered: bool,
    /// The last answer, or why there was none.
    last: String,
}

impl Registrations {
    /// Polls `rest` every `poll` into the registrations, until the returned task is aborted.
    pub fn watch(
        rest: Result<assisted::Client, String>,
        poll: Duration,
    ) -> (Registrations, tokio::task::JoinHandle<()>) {
        let regs = Registrations::default();
        let task = {
            let regs = regs.clone();
            tokio::spawn(async move {
                loop {
                    let answer = match &rest {
                        Ok(client) => client.clusters().await.map_err(|e| e.to_string()),
                        Err(why) => Err(why.clone()),
                    };
                    if let Ok(mut seen) = regs.0.lock() {
                        match answer {
                            Ok(clusters) => {
                                seen.answered = true;
                                seen.last = "it answered".to_string();
                                for h in clusters.into_iter().flat_map(|c| c.hosts) {
                                    seen.hosts
                                        .entry(h.requested_hostname.clone())
                                        .or_insert_with(|| format!("host {}, {}", h.id, h.status));
                                }
                            }
                            Err(why) => seen.last = why,
                        }
                    }
                    tokio::time::sleep(poll).await;
                }
            })
        };
        (regs, task)
    }

    fn host(&self, name: &str) -> Option<String> {
        self.0.lock().ok()?.hosts.get(name).cloned()
    }

    fn answered(&self) -> (bool, String) {
        self.0
            .lock()
            .map(|s| (s.answered, s.last.clone()))
            .unwrap_or_default()
    }
}

/// Where evidence is looked for.
pub(super) struct Sources {
    /// What the rendezvous host's API showed.
    pub rest: Registrations,
    /// The rendezvous IP.
    pub rendezvous: Option<IpAddr>,
    /// The ISO server's reads, when bootstrap serves the ISO.
    pub reads: Option<IsoReads>,
}

/// Polls the sources every `poll` until every watched node has a verdict: each node gets
/// `bound` from its `started`. `rendezvous_down` says the rendezvous host cannot come up in
/// this run (it failed before its reset): the others are not confirmed at once. Returns one
/// verdict per node; stops early (leaving the rest not confirmed) when `cancel` is set.
pub(super) async fn await_boots(
    watched: &[Watched],
    sources: &Sources,
    bound: Duration,
    poll: Duration,
    rendezvous_down: Option<&str>,
    lines: &NodeLines,
    cancel: &AtomicBool,
) -> BTreeMap<String, Verdict> {
    let mut verdicts: BTreeMap<String, Verdict> = BTreeMap::new();
    let rest_where = sources
        .rendezvous
        .map_or("the rendezvous host".to_string(), |ip| {
            format!("the rendezvous host {ip}")
        });
    if let Some(down) = rendezvous_down {
        for w in watched.iter().filter(|w| !w.rendezvous) {
            verdicts.insert(
                w.node.clone(),
                Verdict::Unconfirmed(format!(
                    "its agent cannot be seen: the rendezvous host {down} did not boot in this run"
                )),
            );
        }
    }
    for w in watched.iter().filter(|w| !verdicts.contains_key(&w.node)) {
        lines.set(
            &w.node,
            format!(
                "powered on; waiting for a sign it booted the ISO (up to {})",
                crate::output::human_duration(bound)
            ),
        );
    }
    loop {
        let pending: Vec<&Watched> = watched
            .iter()
            .filter(|w| !verdicts.contains_key(&w.node))
            .collect();
        if pending.is_empty() || cancel.load(Ordering::SeqCst) {
            break;
        }
        let (rest_answered, last_rest) = sources.rest.answered();
        for w in &pending {
            if let Some(h) = sources.rest.host(&w.node) {
                let verdict =
                    Verdict::Booted(format!("its agent registered with {rest_where} ({h})"));
                lines.set(&w.node, "booted the ISO: its agent registered");
                verdicts.insert(w.node.clone(), verdict);
                continue;
            }
            let read = w
                .bmc_ip
                .zip(sources.reads.as_ref())
                .and_then(|(ip, reads)| reads.last_read(ip).map(|t| (ip, t)));
            if let Some((ip, at)) = read.filter(|(_, t)| *t > w.since) {
                let after = at.duration_since(w.since).unwrap_or_default();
                lines.set(&w.node, "booted the ISO: its BMC read it");
                verdicts.insert(
                    w.node.clone(),
                    Verdict::Booted(format!(
                        "its BMC ({ip}) read the ISO from bootstrap's server {} after the reset",
                        crate::output::human_duration(Duration::from_secs(after.as_secs()))
                    )),
                );
            }
        }
        // Past the bound: the rendezvous host first, as the others hang on it.
        let node0_failed = verdicts.iter().any(|(n, v)| {
            matches!(v, Verdict::SomethingElse(_))
                && watched.iter().any(|w| &w.node == n && w.rendezvous)
        });
        let undecided: Vec<&Watched> = watched
            .iter()
            .filter(|w| !verdicts.contains_key(&w.node))
            .collect();
        for w in undecided {
            let over = w.started.elapsed() >= bound;
            if node0_failed && !w.rendezvous {
                verdicts.insert(
                    w.node.clone(),
                    Verdict::Unconfirmed(format!(
                        "its agent cannot be seen: {rest_where} never booted the ISO"
                    )),
                );
                continue;
            }
            if !over {
                continue;
            }
            if !w.rendezvous && !rest_answered {
                verdicts.insert(
                    w.node.clone(),
                    Verdict::Unconfirmed(format!(
                        "its agent cannot be seen: {rest_where}'s API never answered in {} ({last_rest})",
                        crate::output::human_duration(bound)
                    )),
                );
                continue;
            }
            let fix = w.profile.as_ref().map_or_else(
                || Profile::generic().wrong_boot_fix(),
                Profile::wrong_boot_fix,
            );
            let seen = match w.rendezvous {
                true => format!("{rest_where}'s API never answered ({last_rest})"),
                false => format!("{rest_where} has no host {}", w.node),
            };
            let read = match (w.bmc_ip, &sources.reads) {
                (Some(ip), Some(_)) => {
                    format!(", and its BMC ({ip}) did not read the ISO after the reset")
                }
                _ => String::new(),
            };
            verdicts.insert(
                w.node.clone(),
                Verdict::SomethingElse(format!(
                    "booted something else: no sign of the ISO {} after its reset ({seen}{read}). {fix}. Then: bootstrap install --reboot {}",
                    crate::output::human_duration(bound),
                    w.node
                )),
            );
        }
        if watched.iter().all(|w| verdicts.contains_key(&w.node)) {
            break;
        }
        tokio::time::sleep(poll).await;
    }
    for w in watched {
        verdicts.entry(w.node.clone()).or_insert_with(|| {
            Verdict::Unconfirmed("the run was interrupted before a sign was seen".to_string())
        });
    }
    verdicts
}
