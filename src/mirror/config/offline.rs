//! Every check of a configuration that needs no network, run before the first request: the
//! additional images' references, the `oci://` catalogs' layouts (each an OCI image layout),
//! and the Helm local charts (each a readable chart archive). A
//! user learns of a bad digest or a missing chart in their file at once, all problems together,
//! each at its line and column, not once the destination answers.

use super::layout_catalog::LayoutCatalog;
use super::{ConfigError, ImageSetConfig};
use crate::oci::reference::ImageRef;
use crate::openshift::helm;
use crate::yaml::Problem;

impl ImageSetConfig {
    /// The checks of [`crate::mirror`]'s later steps that need nothing but the file and the
    /// local disk; every problem at once, `origin:line:col: path: message`.
    pub fn check_offline(&self, origin: &str) -> Result<(), ConfigError> {
        let mut problems = Vec::new();
        for entry in self.additional_images() {
            if let Err(e) = ImageRef::parse(entry.name) {
                problems.push(Problem::new(entry.location, entry.path.clone(), e.reason));
            }
        }
        for (i, op) in self.mirror.operators.iter().enumerate() {
            let at = format!("mirror.operators[{i}].catalog");
            let why = LayoutCatalog::parse(&op.catalog)
                .and_then(Result::ok)
                .and_then(|c| layout_problem(&c));
            if let Some(why) = why {
                problems.push(Problem::new(self.location(&at), at, why));
            }
        }
        for (i, chart) in self.mirror.helm.local.iter().enumerate() {
            let at = format!("mirror.helm.local[{i}].path");
            let location = self
                .location(&at)
                .or_else(|| self.location(&format!("mirror.helm.local[{i}]")));
            if let Some(why) = local_chart_problem(chart.path.as_deref()) {
                problems.push(Problem::new(location, at, why));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError::invalid(origin, problems))
        }
    }
}

/// Why an `oci://` catalog's directory is no OCI image layout (no `oci-layout` file or no
/// `index.json`), or `None`.
fn layout_problem(catalog: &LayoutCatalog) -> Option<String> {
    let missing: Vec<&str> = ["oci-layout", "index.json"]
        .into_iter()
        .filter(|f| !catalog.path.join(f).is_file())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{}: no OCI image layout there (no {}): name the directory holding the catalog image as an OCI image layout, e.g. written by `skopeo copy docker://CATALOG oci:DIR:TAG`",
            catalog.label(),
            missing.join(", no ")
        )
    })
}

/// Why a Helm local chart's `path` cannot be mirrored, or `None`: missing, unreadable, not a
/// file, larger than Helm accepts, not a chart archive.
fn local_chart_problem(path: Option<&str>) -> Option<String> {
    let Some(path) = path.filter(|p| !p.is_empty()) else {
        return Some("is missing; give the chart archive (.tgz) to mirror".into());
    };
    let meta = match fs_err::metadata(path) {
        Ok(m) => m,
        // fs_err's message names the path already.
        Err(e) => return Some(format!("{e}; give the chart archive (.tgz) to mirror")),
    };
    if !meta.is_file() {
        return Some(format!(
            "{path} is not a file (a chart directory must be packed with `helm package` first)"
        ));
    }
    if meta.len() > helm::MAX_CHART_BYTES as u64 {
        return Some(format!(
            "{path} is larger than Helm accepts for a chart archive"
        ));
    }
    let read = fs_err::read(path).map_err(|e| e.to_string());
    match read.and_then(|tgz| helm::read_chart(&tgz).map_err(|e| format!("{e:#}"))) {
        Ok(_) => None,
        Err(why) => Some(format!(
            "{path} is not a chart archive ({why}; a directory must be packed with `helm package` first)"
        )),
    }
}
