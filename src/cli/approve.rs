//! `git orch approve`: record a decision bound to a plan's exact bytes, and
//! `git orch approve verify`.

use clap::{Args, Subcommand};

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::approval::{self, Verdict};
use crate::event::Decision;
use crate::ids::PlanId;
use crate::plan::revisions;

/// Approve the current revision of a plan (or send it back with --revise),
/// or a person's branch for `git orch land` (--branch).
///
/// The approval is bound to the plan's content hash: any later change to
/// the plan voids it. A plan with blocking findings cannot be approved.
/// With --branch it is bound to the exact tree of the branch's tip: any
/// later change to the branch voids it. Approving what is already approved
/// records nothing (say so with --again to record another decision, e.g.
/// a signed one).
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ApproveArgs {
    /// The plan id.
    #[arg(
        required_unless_present = "branch",
        conflicts_with = "branch",
        add = super::completions::plans()
    )]
    pub plan: Option<String>,
    /// Approve this branch's current tip for `git orch land` instead of a
    /// plan.
    #[arg(long, value_name = "BRANCH", conflicts_with_all = ["revise", "base"], add = super::completions::branches())]
    pub branch: Option<String>,
    /// Record the decision even if the same one is already recorded.
    #[arg(long)]
    pub again: bool,
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
    /// The plan id.
    #[arg(add = super::completions::plans())]
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

pub fn run(cli: &GlobalArgs, args: &ApproveArgs) -> CommandResult {
    if let Some(ApproveCommand::Verify(v)) = &args.command {
        return verify(cli, v);
    }
    let store = open_store(&cli.directory)?;
    if let Some(n) = &args.note
        && (n.len() > 64 * 1024 || n.chars().any(|c| c.is_control() && c != '\n'))
    {
        return Err(CommandError::error(
            "the note must be text of at most 64 KiB",
        ));
    }
    if let Some(branch) = &args.branch {
        return approve_branch(&store, args, branch);
    }
    let id = plan_id(args.plan.as_deref().expect("clap requires the plan"))?;
    let current = revisions::latest(&store, &id)?.ok_or_else(|| {
        super::suggest::with_plan_hint(
            CommandError::error(format!("no plan {id}"))
                .hint("store it first with `git orch plan add <file>`"),
            id.as_str(),
            &store,
        )
    })?;
    let who = approver(&store, args.approver.as_deref())?;
    if !args.again && !args.revise {
        let latest = approval::latest(&store, &id)?;
        if let Some(a) = latest
            && a.approval.decision == Decision::Approve
            && a.approval.plan_hash == current.hash
            && (a.signed || !args.sign)
        {
            output::status(&format!(
                "Plan {id} revision {} ({}) is already approved by {}; nothing recorded.\nhint: `--again` records another approval",
                current.revision, current.hash, a.approval.approver
            ));
            return Ok(exit::OK);
        }
    }
    let decision = if args.revise {
        Decision::Revise
    } else {
        let review = approval::review(&store, &current.plan, args.base.as_deref())?;
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
    )?;
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

fn verify(cli: &GlobalArgs, args: &VerifyArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let id = plan_id(&args.plan)?;
    let verdict = crate::run::approval_verdict(&store, &id)
        .map_err(|e| super::suggest::with_plan_hint(e.into(), id.as_str(), &store))?;
    if args.json {
        let (state, current, approval) = match &verdict {
            Verdict::Valid { current, approval } => ("approved", current, Some(approval)),
            Verdict::NoDecision { current } => ("unapproved", current, None),
            Verdict::Revise { current, approval } => ("revise", current, Some(approval)),
            Verdict::Stale { current, approval } => ("stale", current, Some(approval)),
            Verdict::Unsigned { current, approval } => ("unsigned", current, Some(approval)),
            Verdict::Unrecorded { current, approval } => ("unrecorded", current, Some(approval)),
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
        let hint = super::error::verdict_hint(&verdict);
        let e = CommandError::with_code(exit::BLOCKED, verdict.explain());
        Err(match hint {
            Some(h) => e.hint(h),
            None => e,
        })
    }
}

/// `approve --branch`: binds a person's approval to the branch tip's tree.
fn approve_branch(store: &crate::store::Store, args: &ApproveArgs, given: &str) -> CommandResult {
    let branch = super::land::branch_name(store, given)?;
    let tip = store
        .ref_target(&format!("refs/heads/{branch}"))?
        .ok_or_else(|| CommandError::error(format!("no branch {branch}")))?;
    let tree = store.commit_info(tip)?.tree;
    let who = approver(store, args.approver.as_deref())?;
    if !args.again {
        let mut index = crate::state::StateIndex::open(store)?;
        if let Some(a) = index.branch_approval_for_tree(&tree.to_string())?
            && a.branch == branch
            && (a.signed || !args.sign)
        {
            output::status(&format!(
                "Branch {branch} at {} (tree {}) is already approved by {}; nothing recorded.\nhint: `--again` records another approval",
                &tip.to_string()[..12],
                &tree.to_string()[..12],
                a.approver
            ));
            return Ok(exit::OK);
        }
    }
    let recorded = approval::record_branch(
        store,
        &branch,
        tip,
        tree,
        &who,
        args.note.as_deref(),
        args.sign,
    )?;
    output::status(&format!(
        "Approved branch {branch} at {} (tree {}) for landing as {who}{}.\nNext: `git orch land {branch}` lands it through the merge queue.",
        &tip.to_string()[..12],
        &tree.to_string()[..12],
        if recorded.signed { ", signed" } else { "" }
    ));
    Ok(exit::OK)
}
