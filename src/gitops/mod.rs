//! The hand-off to Argo CD (OpenShift GitOps): "bootstrap once, then let Argo CD own day two".
//!
//! - the site's GitOps repository: scaffolded from the inventory (`bootstrap gitops init`) and
//!   checked (`bootstrap gitops check`): every folder builds with `kubectl kustomize`, every
//!   Application and AppProject passes the Argo CD CRD's `openAPIV3Schema`;
//! - the schema checks themselves (CRDs' structural schemas, built-in kinds), which the lab's
//!   Kubernetes API stand-in also uses to validate what it stores;
//! - the handoff stage: the mirror's cluster resources, OpenShift GitOps from the mirrored
//!   catalog, repository credentials, the tenants' RBAC and health checks, the root Application,
//!   and the waits in between, through kube-rs with server-side apply.

pub mod builtin;
pub mod check;
pub mod crd;
pub mod handoff;
pub mod kube;
pub mod scaffold;
pub mod schema;
