//! `git orch sync`: exchange state with a remote.

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;

/// Fetch other clones' state, integrate it, push this clone's.
///
/// Fetches refs/orch/* into refs/orch-remotes/<REMOTE>/*, fast-forwards
/// local refs, merges a diverged log keeping both sides, and pushes without
/// force, repeating if the remote moved meanwhile. Exit 3 when another
/// writer's log arrived rewritten (both versions are kept; `git orch fsck`
/// lists the events that differ), or when a log was refused because it
/// gained an event over the size limit (1 MiB; nothing of it is taken in).
#[derive(Debug, Args)]
pub struct SyncArgs {
    /// The remote (default: config orch.remote, else origin).
    pub remote: Option<String>,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &GlobalArgs, args: &SyncArgs) -> CommandResult {
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
            "warnings": report.warnings.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "rewrites": report.rewrites.iter().map(|r| serde_json::json!({
                "writer": r.writer,
                "before": r.before.to_string(),
                "after": r.after.to_string(),
            })).collect::<Vec<_>>(),
            "refused": report.refused.iter().map(|r| serde_json::json!({
                "ref": r.reference,
                "writer": r.writer,
                "path": r.path,
                "blob": r.blob.to_string(),
                "size": r.size,
            })).collect::<Vec<_>>(),
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
        output::status(&format!(
            "warning: {w}\nhint: {}",
            super::error::sync_hint(w)
        ));
    }
    for r in &report.refused {
        output::status(&format!(
            "refused: the log of writer {} ({}) on {} holds an event of {} bytes ({}, blob {}); an event may be at most {} bytes, so nothing of that log was taken in",
            r.writer,
            r.reference,
            report.remote,
            r.size,
            r.path,
            r.blob,
            crate::event::MAX_EVENT_BYTES
        ));
    }
    if report.rewrites.is_empty() && report.refused.is_empty() {
        return Ok(exit::OK);
    }
    for r in &report.rewrites {
        output::status(&format!(
            "rewritten: the log of writer {} went from {} to {}, which does not descend from it; both versions are kept",
            r.writer, r.before, r.after
        ));
    }
    if report.rewrites.is_empty() {
        return Err(CommandError::with_code(
            exit::BLOCKED,
            format!(
                "{} writer log(s) refused: git-orch writes no event near that size, so the clone that wrote it is damaged or hostile\nhint: the rest was synced; on the remote, `git log -p <ref>` shows the commit that added it: restore that log there from a clone with an intact copy, and install the server hook (`git orch hooks install --server`), which refuses such events",
                report.refused.len()
            ),
        ));
    }
    Err(CommandError::with_code(
        exit::BLOCKED,
        format!(
            "{} writer log(s) arrived rewritten: state is append-only, so someone rewrote history\nhint: `git orch fsck` lists the events that differ; find out who force-pushed, and protect the remote with `git orch hooks install --server`",
            report.rewrites.len()
        ),
    ))
}
