//! The commands: each resolves its clap arguments into the library's typed settings (uv's two
//! phases), runs the library, and hands the result to the one [`Printer`]. This is the only
//! layer below `main.rs` that sees clap types; the library never does, and never prints.

pub mod archive;
pub mod audit;
pub mod gather;
pub mod gitops_check;
pub mod gitops_init;
pub mod handoff;
pub mod install;
pub mod mirror;
pub mod model;
pub mod preflight;
pub mod prep;
pub mod release;
pub mod render;
pub mod serve;
pub mod validate;
pub mod verify;

use crate::cli::RegistryArgs;
use crate::oci::auth::AuthFile;
use crate::oci::registry::RegistryOptions;
use crate::oci::retry::RetryPolicy;
use std::process::ExitCode;

pub use crate::output::Printer;

/// Registry access from the command line: the auth file loaded, the per-host exceptions, and
/// the retry policy of every request.
pub fn registry_options(
    args: &RegistryArgs,
    retry: RetryPolicy,
) -> anyhow::Result<RegistryOptions> {
    Ok(RegistryOptions {
        authfile: AuthFile::load(args.authfile.as_deref())?,
        ca_bundle: args.ca_bundle.clone(),
        plain_http: args.plain_http.clone(),
        insecure_tls: args.insecure_skip_tls_verify.clone(),
        retry,
    })
}

/// Exit 0 when `ok`, else 1 (the result was printed; the failure is in it).
fn exit_code(ok: bool) -> ExitCode {
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
