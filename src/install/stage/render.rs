//! The render stage: `bootstrap render` into `RUN/config/` (install-config.yaml mode 0600,
//! agent-config.yaml), through the same [`render::run`].

use super::{inputs, Inputs, IsoServer, StageContext, StageWork};
use crate::install::log::StageLog;
use crate::install::rundir::CONFIG_DIR;
use crate::render::{self, RenderOutcome, RenderSettings};
use anyhow::Result;
use std::path::Path;

/// The render stage.
pub struct Render;

impl StageWork for Render {
    fn inputs(&self, cx: &StageContext) -> Result<Inputs> {
        Ok(inputs::render_inputs(&cx.inventory)?.0)
    }

    fn output_dir(&self) -> Option<&'static str> {
        Some(CONFIG_DIR)
    }

    fn run(
        &self,
        cx: &StageContext,
        _iso: &mut IsoServer,
        out: &Path,
        log: &mut StageLog,
    ) -> Result<String> {
        let settings = RenderSettings {
            inventory: cx.inventory.clone(),
            out: out.to_path_buf(),
        };
        match render::run(&settings)? {
            RenderOutcome::Refused(problems) => {
                log.line(&problems)?;
                anyhow::bail!(
                    "the inventory {} is not valid (problems in the log); fix it and run again",
                    cx.inventory.display()
                )
            }
            RenderOutcome::Rendered { summary, warnings } => {
                if let Some(w) = &warnings {
                    log.line(w)?;
                }
                log.line(summary.node_table().trim_end())?;
                let mut names = Vec::new();
                for f in &summary.files {
                    let name = Path::new(&f.path)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    log.line(&format!(
                        "{CONFIG_DIR}/{name}: mode {}, sha256 {}",
                        f.mode, f.sha256
                    ))?;
                    names.push(name);
                }
                Ok(format!(
                    "{}: {} control-plane, {} compute; {}",
                    summary.cluster,
                    summary.control_plane,
                    summary.compute,
                    names.join(", ")
                ))
            }
        }
    }
}
