//! From an ImageSetConfiguration to the concrete images it names.
//!
//! This module holds the pure parts of operator catalog resolution, with no registry I/O, so
//! each rule can be tested on a catalog built in a test:
//! - [`layers`] reads the catalog's config directory out of the catalog image's layers, in
//!   memory and defensively;
//! - [`fbc`] parses those files as a file-based catalog (`olm.package`, `olm.channel`,
//!   `olm.bundle` documents, unknown schemas kept as they are);
//! - [`select`] applies one `mirror.operators[]` entry to the catalog by oc-mirror v2's rules:
//!   which bundles are kept, the images they need, and the filtered catalog to rebuild.

pub mod fbc;
pub mod layers;
pub mod rebuild;
pub mod select;
