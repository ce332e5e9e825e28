//! `git orch approve`: record a decision bound to a plan's exact bytes, and
//! `git orch approve verify`.

use clap::{Args, Subcommand};

use super::{Cli, CommandError, CommandResult, exit, open_store, output};
use crate::approval::{self, Verdict};
use crate::event::Decision;
use crate::ids::PlanId;
use crate::plan::revisions;

/// Approve the current revision of a plan (or send it back with --revise).
///
/// The approval is bound to the plan's content hash: any later change to
/// the plan voids it. A plan with blocking findings cannot be approved.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ApproveArgs {
    /// The plan id.
    #[arg(required = true)]
    pub plan: Option<String>,
    /// Who decides (default: git's user.name <user.email>).
    #[arg(long, value_name = "WHO")]
    pub approver: Option<String>,
    /// Why; required with --revise.
    #[arg(long, value_name = "TEXT")]
    pub note: Option<String>,
    /// Sign the approval commit with your git signing setup (gpg or ssh).
    #[arg(long)]
    pub sign: bool,
    /// Send the plan back for revision instead of approving it.
    #[arg(long, requires = "note")]
    pub revise: bool,
    /// Analyse against this commit (default: the plan's target, else HEAD).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    #[command(subcommand)]
    pub command: Option<ApproveCommand>,
}

#[derive(Debug, Subcommand)]
pub enum ApproveCommand {
    Verify(VerifyArgs),
}

/// Exit 0 only if the latest decision approves the plan's current bytes.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    pub plan: String,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

fn plan_id(text: &str) -> Result<PlanId, CommandError> {
    PlanId::new(text).map_err(|e| CommandError::error(e.to_string()))
}

/// Who is deciding: `--approver`, else git's identity, else `$USER`.
fn approver(store: &crate::store::Store, given: Option<&str>) -> Result<String, CommandError> {
    let who = match given {
        Some(w) => w.trim().to_owned(),
        None => {
            let name = store.config_get("user.name")?;
            let email = store.config_get("user.email")?;
            match (name, email) {
                (Some(n), Some(e)) => format!("{n} <{e}>"),
                (Some(n), None) => n,
                (None, Some(e)) => format!("<{e}>"),
                (None, None) => std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
            }
        }
    };
    if who.is_empty() || who.chars().any(char::is_control) || who.len() > 256 {
        return Err(CommandError::error(
            "the approver must be one line of at most 256 characters",
        ));
    }
    Ok(who)
}

pub fn run(cli: &Cli, args: &ApproveArgs) -> CommandResult {
    if let Some(ApproveCommand::Verify(v)) = &args.command {
        return verify(cli, v);
    }
    let store = open_store(&cli.directory)?;
    let id = plan_id(args.plan.as_deref().expect("clap requires the plan"))?;
    if let Some(n) = &args.note
        && (n.len() > 64 * 1024 || n.chars().any(|c| c.is_control() && c != '\n'))
    {
        return Err(CommandError::error(
            "the note must be text of at most 64 KiB",
        ));
    }
    let current = revisions::latest(&store, &id)
        .map_err(|e| CommandError::error(e.to_string()))?
        .ok_or_else(|| {
            CommandError::error(format!(
                "no plan {id}\nhint: store it first with `git orch plan add <file>`"
            ))
        })?;
    let who = approver(&store, args.approver.as_deref())?;
    let decision = if args.revise {
        Decision::Revise
    } else {
        let review = approval::review(&store, &current.plan, args.base.as_deref())
            .map_err(|e| CommandError::error(e.to_string()))?;
        let blocking = review.analysis.blocking();
        if blocking > 0 {
            for l in super::plan::render_findings(&review) {
                output::status(&l);
            }
            return Err(CommandError::with_code(
                exit::BLOCKED,
                format!(
                    "refusing to approve plan {id} revision {}: {blocking} blocking finding(s)\nhint: fix the plan, store it with `git orch plan add`, and approve the new revision",
                    current.revision
                ),
            ));
        }
        Decision::Approve
    };
    let recorded = approval::record(
        &store,
        &current,
        decision,
        &who,
        args.note.as_deref(),
        args.sign,
    )
    .map_err(|e| CommandError::error(e.to_string()))?;
    match decision {
        Decision::Approve => output::status(&format!(
            "Approved plan {id} revision {} ({}) as {who}{}.",
            current.revision,
            current.hash,
            if recorded.signed { ", signed" } else { "" }
        )),
        Decision::Revise => output::status(&format!(
            "Plan {id} revision {} sent back for revision by {who}.",
            current.revision
        )),
    }
    Ok(exit::OK)
}

fn verify(cli: &Cli, args: &VerifyArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let id = plan_id(&args.plan)?;
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    let verdict = approval::verify(&store, &id, require_signed)
        .map_err(|e| CommandError::error(e.to_string()))?;
    if args.json {
        let (state, current, approval) = match &verdict {
            Verdict::Valid { current, approval } => ("approved", current, Some(approval)),
            Verdict::NoDecision { current } => ("unapproved", current, None),
            Verdict::Revise { current, approval } => ("revise", current, Some(approval)),
            Verdict::Stale { current, approval } => ("stale", current, Some(approval)),
            Verdict::Unsigned { current, approval } => ("unsigned", current, Some(approval)),
        };
        let json = serde_json::json!({
            "plan_id": id,
            "valid": verdict.is_valid(),
            "state": state,
            "revision": current.revision,
            "hash": current.hash,
            "approval": approval.map(|a| serde_json::json!({
                "revision": a.approval.revision,
                "hash": a.approval.plan_hash,
                "decision": a.approval.decision,
                "approver": a.approval.approver,
                "signed": a.signed,
                "commit": a.commit.to_string(),
            })),
        });
        output::Out::new().line(&json.to_string());
    }
    if verdict.is_valid() {
        output::status(&verdict.explain());
        Ok(exit::OK)
    } else {
        Err(CommandError::with_code(exit::BLOCKED, verdict.explain()))
    }
}
