//! The `bootstrap-lab` binary: parse the command line, set up logging, run one lab command.
//! Everything it runs is in the `bootstrap_lab` library; the site's code it drives is the
//! `bootstrap` library's, the same a site runs.

use bootstrap::output::Printer;
use bootstrap_lab::cli::{Cli, LabCmd};
use bootstrap_lab::commands;
use clap::Parser;
use std::io::IsTerminal;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&cli.log)
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_target(false)
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
            LabCmd::Seed(args) => commands::seed(args, &printer).await,
            LabCmd::StandIn(args) => commands::stand_in(args),
            LabCmd::Up(args) => commands::up(args, &printer).await,
            LabCmd::Down(args) => commands::down(args, &printer),
            LabCmd::Status(args) => commands::status(args, &printer),
            LabCmd::Repair(args) => commands::repair(args, &printer),
            LabCmd::SiteRun(args) => commands::site_run(args).await,
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
