//! bootstrap: the library behind the `bootstrap` command. Every command's work lives here;
//! `main.rs` only parses arguments and dispatches.
//!
//! The rehearsal lab (the `bootstrap-lab` crate in `lab/`) is built on this library's public
//! API and nothing here depends on it. What the lab uses is listed in docs/architecture.md
//! ("What the lab uses of the site library"): changing one of those items changes the lab.

pub mod audit;
pub mod bounded;
pub mod cli;
pub mod commands;
pub mod concurrency;
pub mod fs;
pub mod gitops;
pub mod hostprep;
pub mod install;
pub mod installer;
pub mod inventory;
pub mod mirror;
pub mod modelcar;
pub mod netaddr;
pub mod oci;
pub mod openshift;
pub mod output;
pub mod preflight;
pub mod redfish;
pub mod render;
pub mod secret;
pub mod serve;
pub mod sshsig;
pub mod verify;
pub mod yaml;
