//! bootstrap: the library behind the `bootstrap` command. Every command's work lives here;
//! `main.rs` only parses arguments and dispatches.

pub mod cli;
pub mod installer;
pub mod inventory;
pub mod lab;
pub mod mirror;
pub mod model;
pub mod netaddr;
pub mod oci;
pub mod output;
pub mod render;
pub mod secret;
pub mod verify;
pub mod yaml;
