//! What the mirror and install halves share about OpenShift content, so neither half reaches
//! into the other:
//! - [`record`]: the mirror record, the contract between the halves (what was mirrored, where),
//!   with typed queries such as the release image of a version and the image digest sources;
//! - [`cluster`]: the resources a cluster needs to use the mirror (ImageDigestMirrorSet,
//!   ImageTagMirrorSet, CatalogSources, the release signature ConfigMap);
//! - [`release`]: a release payload's components; [`extract`]: a binary (the installer, `oc`)
//!   out of a mirrored release, pinned to it by [`pin`], its components found through
//!   [`mirrors`] (the digest mirror set, as oc finds them);
//! - [`graph`]: the update graph and the releases a channel selects from it;
//! - [`fbc`]: file-based operator catalogs, and [`rebuild`]: a filtered catalog as a new image;
//! - [`helm`]: Helm charts, the images they reference and their OCI form; [`graph_data`]: the
//!   update graph data image and its UpdateService;
//! - [`assisted`]: the watcher's client of the rendezvous host's assisted-service API,
//!   [`readiness`]: bootstrap and install complete, read from the new cluster's API, and
//!   [`watch`]: the wait for an install through both, as `openshift-install agent wait-for`.

pub mod api;
pub mod assisted;
pub mod cluster;
pub mod csr;
pub mod extract;
pub mod fbc;
pub mod graph;
pub mod graph_data;
pub mod helm;
pub mod join;
pub mod mirrors;
pub mod pin;
pub mod readiness;
pub mod rebuild;
pub mod record;
pub mod release;
pub mod watch;
