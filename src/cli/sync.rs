//! `git orch sync`: exchange state with a remote.

use clap::Args;

use super::{Cli, CommandResult, exit, open_store, output};

/// Fetch other clones' state, integrate it, push this clone's.
///
/// Fetches refs/orch/* into refs/orch-remotes/<REMOTE>/*, fast-forwards
/// local refs, merges a diverged log keeping both sides, and pushes without
/// force, repeating if the remote moved meanwhile.
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The remote (default: config orch.remote, else origin).
    pub remote: Option<String>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &Cli, args: &SyncArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let remote = match &args.remote {
        Some(r) => r.clone(),
        None => store.default_remote()?,
    };
    let report = store.sync(&remote)?;
    if args.json {
        let json = serde_json::json!({
            "remote": report.remote,
            "created": report.created,
            "fast_forwarded": report.fast_forwarded,
            "merged": report.merged,
            "pushed": report.pushed,
            "rounds": report.rounds,
            "warnings": report.warnings,
        });
        output::Out::new().line(&json.to_string());
    }
    output::status(&format!(
        "Synced with {}: {} new, {} fast-forwarded, {} merged, {}.",
        report.remote,
        report.created.len(),
        report.fast_forwarded.len(),
        report.merged.len(),
        if report.pushed {
            "pushed"
        } else {
            "nothing to push"
        }
    ));
    for w in &report.warnings {
        output::status(&format!("warning: {w}"));
    }
    Ok(exit::OK)
}
