//! `bootstrap prep`: host prep over SSH on its own (the install's prep stage runs the same).
//! One live line per node on stderr (connecting, facts, the verdict), Ansible-like task lines
//! above them; the verdicts and each playbook's recap on stdout (text or JSON). Exit 0 when
//! every node passed, 1 when any did not, 2 when a playbook or an argument was refused before
//! any host was touched.

use super::Printer;
use crate::cli::PrepArgs;
use crate::hostprep::prep::{self, PrepOptions, PrepRun};
use crate::hostprep::{hosts, playbook};
use crate::install::rundir::{self, RunDir};
use crate::output::NodeLines;
use anyhow::{anyhow, bail, Context, Result};
use serde_json::{Map, Value};
use std::process::ExitCode;

/// Runs `bootstrap prep`.
pub async fn run(args: PrepArgs, printer: &Printer) -> Result<ExitCode> {
    let extra_vars = extra_vars(&args.extra_vars)?;
    let inventory = match &args.inventory {
        Some(dir) => Some(crate::inventory::load(dir).map_err(|e| anyhow!("{e}"))?),
        None => None,
    };
    let playbook_paths = match (&inventory, args.playbooks.is_empty()) {
        (Some(inv), true) => inv
            .site
            .prep
            .playbooks
            .iter()
            .map(|p| inv.resolve(p))
            .collect(),
        _ => args.playbooks.clone(),
    };
    let playbooks = match prep::load_playbooks(&playbook_paths) {
        Ok(p) => p,
        Err(problems) => {
            printer.error(format_args!("{problems}"));
            printer.note("refused before any host was touched\n");
            return Ok(ExitCode::from(2));
        }
    };
    fs_err::create_dir_all(&args.run)?;
    let run = RunDir::new(&args.run);
    let known_hosts = run.known_hosts()?;
    let (hosts, forks, command_timeout) = match (&inventory, &args.ansible_inventory) {
        (Some(inv), _) => {
            let p = &inv.site.prep;
            (
                hosts::site_hosts(inv, &known_hosts, args.reachable_within)?,
                p.forks(),
                p.ssh.command_timeout(),
            )
        }
        (None, Some(file)) => {
            // Its message names the file and the reason; `{e:#}` would repeat the I/O error.
            let ai =
                playbook::inventory::load_ansible_inventory(file).map_err(|e| anyhow!("{e}"))?;
            let hosts = hosts::ansible_hosts(
                &ai,
                &known_hosts,
                std::time::Duration::from_secs(10),
                args.reachable_within,
            )?;
            (
                hosts,
                crate::inventory::model::DEFAULT_FORKS,
                std::time::Duration::from_secs(300),
            )
        }
        (None, None) => bail!("give --inventory DIR or -i ANSIBLE_INVENTORY"),
    };
    let opts = PrepOptions {
        forks: args.forks.unwrap_or(forks) as usize,
        check: args.check,
        diff: args.diff,
        limit: args.limit.clone(),
        extra_vars,
        command_timeout,
        reachable_within: args.reachable_within,
    };
    let names: Vec<String> = hosts.iter().map(|h| h.name.clone()).collect();
    let lines = NodeLines::new("prep", &names);
    let what = PrepRun {
        hosts,
        inventory: inventory.as_ref().filter(|_| !args.skip_checks),
        playbooks: &playbooks,
    };
    let out = run.join(rundir::PREP_DIR);
    let files = rundir::prep_files(&out);
    let report = prep::run(what, &opts, &files, &|e| prep::show(&lines, e)).await;
    lines.finish();
    let report = report.with_context(|| format!("prep (files in {})", out.display()))?;
    printer.result(&report)?;
    Ok(super::exit_code(report.success()))
}

/// `-e KEY=VALUE` (a string) or `-e '{"key": ...}'` (a JSON object), later over earlier.
fn extra_vars(args: &[String]) -> Result<Map<String, Value>> {
    let mut vars = Map::new();
    for a in args {
        let a = a.trim();
        if a.starts_with('{') {
            let Value::Object(obj) =
                serde_json::from_str(a).map_err(|e| anyhow!("-e {a}: not a JSON object: {e}"))?
            else {
                bail!("-e {a}: not a JSON object");
            };
            vars.extend(obj);
        } else {
            let (k, v) = a
                .split_once('=')
                .ok_or_else(|| anyhow!("-e {a}: write KEY=VALUE or a JSON object"))?;
            vars.insert(k.trim().to_string(), Value::String(v.to_string()));
        }
    }
    Ok(vars)
}
