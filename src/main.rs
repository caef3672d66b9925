//! The `bootstrap` binary: parse the command line, set up logging, run one command.

use bootstrap::cli::{Cli, Command, LabCmd, ModelCmd};
use clap::Parser;
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
    let result = runtime.block_on(async {
        match cli.command {
            Command::Mirror(args) => bootstrap::mirror::run(args, cli.output).await,
            Command::Verify(args) => bootstrap::verify::run(args, cli.output).await,
            Command::Model(ModelCmd::Pack(args)) => bootstrap::model::pack(args, cli.output).await,
            Command::Lab(LabCmd::Seed(args)) => bootstrap::lab::seed(args, cli.output).await,
            Command::Validate(args) => bootstrap::installer::run(args, cli.output),
            Command::Render(args) => bootstrap::render::run(args, cli.output),
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
