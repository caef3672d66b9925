//! From an ImageSetConfiguration to the concrete images it names.
//!
//! This module holds the pure parts of operator catalog resolution, with no registry I/O, so
//! each rule can be tested on a catalog built in a test. The catalog's config directory is read
//! out of its layers by [`crate::oci::layers`] and parsed by [`crate::openshift::fbc`]; then
//! [`select`] applies one `mirror.operators[]` entry to the catalog by oc-mirror v2's rules:
//! which bundles are kept, the images they need, and the filtered catalog to rebuild
//! ([`crate::openshift::rebuild`]).

pub mod select;
