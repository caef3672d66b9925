//! The `bootstrap` binary: parse the command line, set up logging, run one command.

use bootstrap::cli::{
    ArchiveCmd, AuditCmd, Cli, Command, GitopsCmd, ModelCmd, ReleaseCmd, ServeCmd,
};
use bootstrap::commands::{self, Printer};
use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            // The platform TLS verifier logs every refusal itself; ours reports it with the fix,
            // and may still accept a self-signed certificate from --ca-bundle it refused.
            // kube-rs logs every failed request as an ERROR (its trace layer's on_failure): the
            // wait probes an API that is not up yet on every poll, and says so itself.
            tracing_subscriber::EnvFilter::try_new(format!(
                "{},rustls_platform_verifier=off,kube_client::client::builder=off",
                cli.log
            ))
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_target(false)
        // Colour codes only for a person at a terminal, never in a CI log or a file.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: starting the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let printer = Printer::new(cli.output);
    let result = runtime.block_on(async {
        match cli.command {
            Command::Mirror(args) => commands::mirror::run(*args, &printer).await,
            Command::Verify(args) => commands::verify::run(args, &printer).await,
            Command::Archive(ArchiveCmd::Create(args)) => {
                commands::archive::create(args, &printer).await
            }
            Command::Audit(AuditCmd::Report(args)) => commands::audit::report(args, &printer),
            Command::Model(ModelCmd::Pack(args)) => commands::model::pack(args, &printer).await,
            Command::Serve(ServeCmd::Iso(args)) => commands::serve::iso(args, &printer).await,
            Command::Serve(ServeCmd::Registry(args)) => {
                commands::serve::registry(args, &printer).await
            }
            Command::Release(ReleaseCmd::Extract(args)) => {
                commands::release::extract(args, &printer).await
            }
            Command::Validate(args) => commands::validate::run(args, &printer),
            Command::Render(args) => commands::render::run(args, &printer),
            Command::Install(args) => commands::install::run(args, &printer).await,
            Command::Prep(args) => commands::prep::run(args, &printer).await,
            Command::Gather(args) => commands::gather::run(args, &printer).await,
            Command::Preflight(args) => commands::preflight::run(args, &printer).await,
            Command::Gitops(GitopsCmd::Init(args)) => commands::gitops_init::run(args, &printer),
            Command::Gitops(GitopsCmd::Check(args)) => commands::gitops_check::run(args, &printer),
            Command::Gitops(GitopsCmd::Handoff(args)) => {
                commands::handoff::run(args, &printer).await
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(1)
        }
    }
}
