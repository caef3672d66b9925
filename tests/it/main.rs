//! The integration tests, as one binary: `support` (real registries, a token server, TLS material,
//! synthetic images, the fault proxy) is compiled once instead of once per test file, and every
//! item of it is used by some test, so dead code in it is reported rather than allowed.
//!
//! Each module is one area, run against the `bootstrap` binary or the library: `cargo nextest
//! run --test it -E 'test(/^mirror::/)'` (or `cargo test --test it mirror::`) runs one of them.

mod support;

mod agent_validate;
mod archive;
mod argocd_lab;
mod audit_report;
mod boot_lab;
mod challenges;
mod cli;
mod facts;
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
mod kube_api;
mod lab_hosts;
mod lab_seed;
mod lab_site;
mod mirror;
mod model;
mod modules;
mod olm_lab;
mod openshift;
mod platforms;
mod playbook;
mod prep_lab;
mod records;
mod redfish;
mod release_extract;
mod render;
mod resilience;
mod resume;
mod serve;
mod serve_registry;
mod signatures;
mod signed_record;
mod ssh;
mod tampered;
mod token_refresh;
mod trust;
mod update_graph;
mod wait;
