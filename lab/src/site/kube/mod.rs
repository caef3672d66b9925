//! The lab cluster's Kubernetes API: an in-memory stand-in faithful where the product and the
//! lab's controllers depend on it — server-side apply with field managers, the status
//! subresource, strict field validation against the kinds' schemas, CRDs, RBAC, finalizers and
//! an audit trail of every call — served over HTTPS to kubectl and kube-rs.

pub mod crds;
pub mod csr;
pub mod discovery;
pub mod http;
pub mod kinds;
pub mod managed;
pub mod patch;
pub mod printers;
pub mod rbac;
pub mod ssa;
pub mod store;
pub mod table;
pub mod validate;

pub use http::{serve_loopback, Api, Auth, LoopbackApi};
pub use store::{ApiError, AuditEvent, ObjectRef, Store, WriteOptions};

#[cfg(test)]
mod store_tests;
