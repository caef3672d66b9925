//! The integration tests, as one binary: `support` (real registries, a token server, TLS material,
//! synthetic images, the fault proxy) is compiled once instead of once per test file, and every
//! item of it is used by some test, so dead code in it is reported rather than allowed.
//!
//! Each module is one area, run against the `bootstrap` binary or the library: `cargo nextest
//! run --test it -E 'test(/^mirror::/)'` (or `cargo test --test it mirror::`) runs one of them.
//!
//! Many end-to-end tests here are longer than the 80 lines a function of the crates gets: each
//! is one scenario (start the servers, run the command, rerun it, read back what it left) whose
//! steps share its state and read best whole, top to bottom, as a delivery engineer would run
//! them; their helpers live in `support`. The same holds for the rehearsal's `main`.
//! `lab_bin`/`bootstrap_bin` (support/run.rs) find the two binaries.

mod support;

mod agent_validate;
mod archive;
mod argocd_lab;
mod audit_report;
mod boot_lab;
mod challenges;
mod cli;
mod facts;
mod gather_lab;
mod gitops_check;
mod gitops_init;
mod handoff;
mod harness;
mod helm;
mod hostile;
mod install;
mod install_lab;
mod installer_parity;
mod inventory;
mod join_api;
mod kube_api;
mod kube_hostile;
mod lab_hosts;
mod lab_seed;
mod lab_site;
mod lab_vendors;
mod mirror;
mod model;
mod modules;
mod olm_lab;
mod openshift;
mod platforms;
mod playbook;
mod preflight_lab;
mod prep_lab;
mod records;
mod redfish;
mod redfish_hostile;
mod redfish_vendors;
mod release_extract;
mod render;
mod repair_lab;
mod resilience;
mod resume;
mod serve;
mod serve_limits;
mod serve_registry;
mod signatures;
mod signed_record;
mod ssh;
mod tampered;
mod token_refresh;
mod trust;
mod update_graph;
mod wait;
