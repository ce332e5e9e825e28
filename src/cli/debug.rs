//! `git orch debug`: hidden diagnostics used by tests and benchmarks.

use clap::{Args, Subcommand};

use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::event::Event;

/// Diagnostics for tests and benchmarks; not part of the stable interface.
#[derive(Debug, Args)]
pub struct DebugArgs {
    #[command(subcommand)]
    pub command: DebugCommand,
}

#[derive(Debug, Subcommand)]
pub enum DebugCommand {
    /// Append marker events, one operation per batch.
    Append {
        /// Label written into every marker.
        #[arg(long, default_value = "debug")]
        label: String,
        /// How many events in all.
        #[arg(long, default_value_t = 1)]
        count: u64,
        /// Events per operation (one commit each).
        #[arg(long, default_value_t = 1)]
        batch: u64,
    },
    /// Print docs/cli.md, the Markdown command reference.
    CliReference,
}

/// `tree`: the whole command tree, for the CLI reference.
pub fn run(cli: &GlobalArgs, args: &DebugArgs, tree: clap::Command) -> CommandResult {
    match &args.command {
        DebugCommand::Append {
            label,
            count,
            batch,
        } => {
            let store = open_store(&cli.directory)?;
            let batch = (*batch).max(1);
            let mut n = 0;
            while n < *count {
                let events: Vec<Event> = (n..(n + batch).min(*count))
                    .map(|i| Event::DebugMarker {
                        label: label.clone(),
                        n: i,
                    })
                    .collect();
                n += events.len() as u64;
                store.append(events)?;
            }
        }
        DebugCommand::CliReference => {
            output::Out::new().line(super::manual::cli_reference(tree).trim_end());
        }
    }
    Ok(exit::OK)
}
