//! The validate stage: everything `bootstrap render` checks before it writes ([`render::check`]:
//! the inventory's rules, what it references, both files built in memory and passed through
//! `bootstrap validate`'s rules), then what only an install needs
//! ([`crate::inventory::install_problems`]: a release from 4.18 on, whose installer issues the
//! watcher token the wait stage uses); it writes nothing. Warnings go to its log; problems fail
//! it.

use super::{inputs, Inputs, IsoServer, StageContext, StageWork};
use crate::install::log::StageLog;
use crate::render::{self, Checked};
use anyhow::Result;
use std::path::Path;

/// The validate stage.
pub struct Validate;

impl StageWork for Validate {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        inputs::validate_inputs(&cx.inventory)
    }

    fn output_dir(&self) -> Option<&'static str> {
        None
    }

    fn run(
        &self,
        cx: &StageContext,
        _iso: &mut IsoServer,
        _out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        log.line(&format!(
            "checking the inventory {}",
            cx.inventory.display()
        ))?;
        match render::check(&cx.inventory)? {
            Checked::Refused(problems) => {
                log.line(&problems)?;
                let n = problems.lines().count();
                anyhow::bail!(
                    "the inventory {} has {n} problem{} (each in the log, file:line:col: path: message); fix them and run again",
                    cx.inventory.display(),
                    if n == 1 { "" } else { "s" }
                )
            }
            Checked::Valid {
                inventory,
                rendered,
                warnings,
            } => {
                let refused = crate::inventory::install_problems(&inventory)?;
                if !refused.is_empty() {
                    let text =
                        crate::inventory::render_inventory_problems(&inventory.dir, &refused);
                    // The runner logs the error, which carries every problem.
                    anyhow::bail!(
                        "the inventory {} cannot be installed: {text}",
                        cx.inventory.display()
                    );
                }
                let warned = warnings.as_deref().map_or(0, |w| w.lines().count());
                if let Some(w) = &warnings {
                    log.line(w)?;
                }
                log.line("both files pass bootstrap validate's rules")?;
                let day_two = if cx.installed {
                    day_two(cx, &inventory, log)?
                } else {
                    String::new()
                };
                Ok(format!(
                    "{}.{}: {} nodes valid{}{day_two}",
                    inventory.site.cluster.name,
                    inventory.site.cluster.base_domain,
                    rendered.nodes.len(),
                    match warned {
                        0 => String::new(),
                        1 => ", 1 warning (in the log)".to_string(),
                        n => format!(", {n} warnings (in the log)"),
                    }
                ))
            }
        }
    }
}

/// An installed cluster's inventory: what it asks of the running cluster must be adding
/// nodes ([`crate::install::daytwo::plan`]); the nodes to add, for the detail.
fn day_two(
    cx: &StageContext,
    inventory: &crate::inventory::Inventory,
    log: &mut StageLog,
) -> Result<String> {
    let installed = super::cluster_nodes(&cx.run)?;
    match crate::install::daytwo::plan(&inventory.nodes.nodes, &installed) {
        Ok(None) => Ok(String::new()),
        Ok(Some(plan)) => {
            log.line(&format!(
                "the cluster is installed ({}); day two adds {}",
                cx.run.root().display(),
                plan.added.join(", ")
            ))?;
            Ok(format!("; day two adds {}", plan.added.join(", ")))
        }
        Err(problems) => {
            anyhow::bail!(
                "the cluster in {} is installed and nodes.yaml asks for what adding nodes \
                 cannot do: {}",
                cx.run.root().display(),
                problems.join("; ")
            )
        }
    }
}
