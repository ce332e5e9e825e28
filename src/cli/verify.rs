//! `git orch verify`: a required check for hosted CI.

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::merge::verify;

/// Exit 0 only if every given commit was landed by git-orch from a run
/// whose plan approval is valid for the recorded hash and whose gates
/// passed, or from a person's branch (`git orch land`) whose approval is
/// bound to exactly the tree that landed and whose integration gate
/// passed.
///
/// COMMIT is a commit or a range `A..B` (every commit in it is checked).
/// Meant as a required check where server hooks cannot run. Exit 3 if any
/// commit fails.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The commit, or a range A..B of commits.
    pub commit: String,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(cli: &GlobalArgs, args: &VerifyArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    if args.commit.starts_with('-') {
        return Err(CommandError::with_code(
            exit::USAGE,
            "the commit may not start with '-'",
        ));
    }
    let commits = if args.commit.contains("..") {
        let list = store
            .git()
            .run(["rev-list", "--end-of-options", &args.commit])
            .map_err(|_| {
                CommandError::error(format!(
                    "{:?} is not a commit range\nhint: give it as A..B, e.g. origin/main..main",
                    args.commit
                ))
            })?;
        list.lines()
            .map(|l| store.parse_oid(l.trim()))
            .collect::<Result<Vec<_>, _>>()?
    } else {
        vec![store.resolve_commit(&args.commit)?.ok_or_else(|| {
            CommandError::error(format!(
                "{:?} is not a commit\nhint: give a commit id, branch or tag, or a range A..B",
                args.commit
            ))
        })?]
    };
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    let results = verify::verify(&store, &commits, require_signed)?;
    let mut out = output::Out::new();
    for v in &results {
        if args.json {
            out.line(&serde_json::to_string(v).expect("verifications serialise"));
        } else {
            out.line(&format!(
                "{} {}  {}",
                &v.commit[..12],
                if v.ok { "ok  " } else { "FAIL" },
                v.reason
            ));
        }
    }
    Ok(if results.iter().all(|v| v.ok) {
        exit::OK
    } else {
        exit::BLOCKED
    })
}
