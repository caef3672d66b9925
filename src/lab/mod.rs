//! `bootstrap lab`: a rehearsal lab. `lab seed` builds a realistic, scaled-down upstream in a
//! local registry (OpenShift release payloads with an update graph, an operator catalog whose
//! bundles and related images all exist, a modelcar), so mirroring releases and catalogs can be
//! rehearsed and tested without Red Hat's registries.

pub mod catalog;
pub mod image;
pub mod modelcar;
pub mod push;
pub mod release;
pub mod seed;

pub use seed::seed;
