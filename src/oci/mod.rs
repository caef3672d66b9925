//! The OCI vocabulary and wire: digests, references, manifests, credentials, the distribution
//! API and the OCI image layout on disk.

pub mod auth;
pub mod blob_read;
pub mod checkpointed;
pub mod digest;
pub(crate) mod layer_walk;
pub mod layerfile;
pub mod layers;
pub mod layout;
pub mod made;
pub mod manifest;
pub mod platform;
pub mod ranged;
pub mod reference;
pub mod registry;
pub mod retry;
pub mod stall;
pub mod stream;
