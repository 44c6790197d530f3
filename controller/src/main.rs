//! `ome-spread`: says whether the spread of an OMENative component holds, and if not, why.

mod explain;
mod objects;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "ome-spread",
    version,
    about = "Fault-domain spread of OME's OMENative Instances"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show where an InferenceService's Instances landed, whether the spread holds, and what to do.
    ///
    /// Prints the seed's Step 2 tables (the replica, its pods, their nodes), then the reason.
    /// Exits 0 when the spread holds, 1 when it does not, 2 on bad input.
    Explain {
        /// The InferenceService's name.
        service: String,
        /// Its namespace.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Only this component.
        #[arg(long, value_parser = ["engine", "decoder"])]
        component: Option<String>,
        /// Saved objects (`kubectl get -o yaml` output, lists included): a file, or a directory
        /// of .yaml/.yml/.json files. Reading a live cluster is not built yet.
        #[arg(long, required = true)]
        from: PathBuf,
        /// The policy's settings (YAML or JSON), as in policy.yaml, if they are not the defaults.
        #[arg(long)]
        settings: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match Cli::parse().command {
        Command::Explain {
            service,
            namespace,
            component,
            from,
            settings,
        } => match explain::run(&service, &namespace, component.as_deref(), &from, settings.as_deref()) {
            Ok((text, holds)) => {
                print!("{text}");
                ExitCode::from(if holds { 0 } else { 1 })
            }
            Err(message) => {
                eprintln!("error: {message}");
                ExitCode::from(2)
            }
        },
    }
}
