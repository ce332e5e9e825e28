//! `git orch fsck`: check git-orch's state end to end and print what is
//! wrong, each finding with its fix.

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::fsck::{self, Accept, Finding, Severity};

/// Check git-orch's state end to end.
///
/// No ref of git-orch is damaged (a ref file a crash emptied, or a ref
/// whose commit or trees are missing or unreadable); every log record
/// parses and sits under its own blob's name; no writer's
/// log was rewritten (two different events at one seq) or has diverged
/// copies; every commit protected targets gained since their first
/// landing verifies (like `git orch verify`); refs/orch/keep holds every
/// result and candidate the records point at; every attempt branch and
/// worktree has a record, and none holds a commit nothing else keeps; no
/// scratch worktree outlived its landing or gate; no agent of this clone
/// runs without its driver; no landing left a checkout half moved; the
/// configuration parses. Pins a dead process left are listed as notes.
///
/// Prints each finding with the command or step that fixes it. Exit 0
/// when clean (notes do not count), 3 when something needs fixing.
#[derive(Debug, Args)]
pub struct FsckArgs {
    /// Print the report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// After reviewing both versions, accept the rewrite of WRITER's log at
    /// SEQ: recorded as an event; fsck then lists it as accepted.
    #[arg(long, value_name = "WRITER:SEQ", value_parser = parse_rewrite, conflicts_with = "accept_commit")]
    pub accept_rewrite: Option<(crate::ids::WriterId, u64)>,
    /// After review, accept a commit on a protected target that no
    /// landing vouches for: recorded as an event; fsck then lists it as
    /// accepted.
    #[arg(long, value_name = "COMMIT")]
    pub accept_commit: Option<String>,
    /// First repair: restore damaged refs to their newest intact value
    /// (their reflog, a remote's copy or their history), naming each and
    /// what was lost, with unreadable files moved to .git/orch/lost/;
    /// keep the commits records point at that refs/orch/keep misses;
    /// finish the checkout moves a crashed landing left; remove the pins
    /// of dead processes.
    #[arg(long)]
    pub repair: bool,
}

fn parse_rewrite(value: &str) -> Result<(crate::ids::WriterId, u64), String> {
    fsck::parse_rewrite(value).map_err(|e| e.to_string())
}

fn fsck_error(e: fsck::FsckError) -> CommandError {
    e.into()
}

pub fn run(cli: &GlobalArgs, args: &FsckArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let accept = match (&args.accept_rewrite, &args.accept_commit) {
        (Some((writer, seq)), _) => Some(Accept::Rewrite {
            writer: writer.clone(),
            seq: *seq,
        }),
        (None, Some(c)) => {
            if c.starts_with('-') {
                return Err(CommandError::with_code(
                    exit::USAGE,
                    "the commit may not start with '-'",
                ));
            }
            let id = store.resolve_commit(c)?.ok_or_else(|| {
                CommandError::error(format!(
                    "{c:?} is not a commit\nhint: give the commit id fsck printed"
                ))
            })?;
            Some(Accept::Commit(id))
        }
        (None, None) => None,
    };
    if let Some(what) = &accept {
        let by = store
            .user_identity()?
            .map(|(name, email)| format!("{name} <{email}>"))
            .unwrap_or_else(|| std::env::var("USER").unwrap_or_else(|_| "unknown".into()));
        let accepted = fsck::accept(&store, what, &by).map_err(fsck_error)?;
        output::status(&match accepted {
            crate::event::AcceptedFinding::Rewrite { writer, seq, blobs } => format!(
                "Accepted the rewrite of writer {writer}'s log at seq {seq} ({} versions), as {by}.",
                blobs.len()
            ),
            crate::event::AcceptedFinding::Commit { commit, target } => format!(
                "Accepted commit {} on {target}, as {by}.",
                &commit.to_string()[..12]
            ),
        });
    }
    if args.repair {
        let repairs = fsck::repair(&store).map_err(fsck_error)?;
        for line in &repairs.done {
            output::status(&format!("repair: {line}"));
        }
        for problem in &repairs.unsettled {
            output::status(&format!(
                "repair: {problem}\nhint: {}",
                super::error::landing_hint(problem)
            ));
        }
    }
    let report = fsck::check(&store).map_err(fsck_error)?;
    let mut out = output::Out::new();
    if args.json {
        let json = serde_json::json!({
            "version": 1,
            "ok": report.problems() == 0,
            "problems": report.problems(),
            "notes": report.notes(),
            "accepted": report.accepted(),
            "findings": report.findings,
            "checked": report.checked,
        });
        out.line(&json.to_string());
    } else {
        for f in &report.findings {
            render(&mut out, f);
        }
    }
    let c = &report.checked;
    let looked = format!(
        "{} events of {} writers, {} commits on {} targets, {} kept commits, {} attempts, {} branches, {} worktrees; state cache {} in {} files",
        c.events,
        c.writers,
        c.commits_verified,
        c.targets.len(),
        c.kept_commits,
        c.attempts,
        c.branches,
        c.worktrees,
        human_bytes(c.state_cache.bytes),
        c.state_cache.files
    );
    let mut tail = Vec::new();
    if report.notes() > 0 {
        tail.push(format!("{} note(s)", report.notes()));
    }
    if report.accepted() > 0 {
        tail.push(format!("{} accepted", report.accepted()));
    }
    let tail = if tail.is_empty() {
        String::new()
    } else {
        format!(", {}", tail.join(", "))
    };
    if report.problems() == 0 {
        output::status(&format!("fsck: clean{tail} (checked {looked})."));
        Ok(exit::OK)
    } else {
        output::status(&format!(
            "fsck: {} problem(s){tail} (checked {looked}).",
            report.problems()
        ));
        Ok(exit::BLOCKED)
    }
}

/// A size for people: `812 B`, `4.2 KiB`, `88.0 MiB`.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}

fn render(out: &mut output::Out, f: &Finding) {
    let level = match (f.severity, &f.accepted_by) {
        (Severity::Problem, None) => "problem",
        (Severity::Problem, Some(_)) => "accepted",
        (Severity::Note, _) => "note",
    };
    out.line(&format!(
        "{level:<8} {:<9} {}: {}",
        f.check.as_str(),
        f.subject,
        f.message
    ));
    match &f.accepted_by {
        Some(by) => out.line(&format!("{:18} accepted by {by}", "")),
        None => out.line(&format!("{:18} fix: {}", "", f.fix)),
    };
}

#[cfg(test)]
mod tests {
    use super::human_bytes;

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(human_bytes(812), "812 B");
        assert_eq!(human_bytes(4300), "4.2 KiB");
        assert_eq!(human_bytes(88 * 1024 * 1024), "88.0 MiB");
        assert_eq!(human_bytes(3 << 40), "3.0 TiB");
    }
}
