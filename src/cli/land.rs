//! `git orch land <branch>`: a person's branch through the merge queue.

use clap::Args;
use tokio_util::sync::CancellationToken;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::merge::Strategy;
use crate::merge::hand::{self, Outcome, Request};

/// Land a person's branch on the target through the merge queue.
///
/// For a fix made by hand where hooks protect the target: no plan needed.
/// The branch must be approved first (`git orch approve --branch BRANCH`);
/// the approval is bound to the exact tree of the branch's tip, so a branch
/// changed after approval is refused. Like an attempt's landing, it takes
/// the target's queue lock, builds the candidate on the current tip (rebase,
/// merge or squash, in memory), runs the integration gate on it in a
/// scratch worktree (`[integration] run`, else every blocking command gate
/// of .orch/config), records a `branch_landed` event and moves the target
/// by compare-and-swap; a checkout of the target follows like `git merge`.
/// `git orch verify` and the server's pre-receive hook accept what it
/// landed. Push the target and the state afterwards (`git orch sync`, then
/// `git push`). Exit 0 landed, 3 refused (not approved, changed after
/// approval, conflict, gate failed, a checkout in the way).
#[derive(Debug, Args)]
pub struct LandArgs {
    /// The branch to land (a local branch; `refs/heads/` may be given).
    #[arg(add = super::completions::branches())]
    pub branch: String,
    /// The branch it lands on (default orch.target, else the branch
    /// checked out here).
    #[arg(long, value_name = "BRANCH", add = super::completions::branches())]
    pub target: Option<String>,
    /// How it lands (default orch.mergeStrategy, rebase).
    #[arg(long, value_parser = ["rebase", "merge", "squash"])]
    pub strategy: Option<String>,
    /// Print the landing as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A local branch name from the command line: `name` or
/// `refs/heads/name`; never an option, another kind of ref, or a name git
/// would refuse.
pub fn branch_name(store: &crate::store::Store, given: &str) -> Result<String, CommandError> {
    if given.starts_with('-') {
        return Err(CommandError::with_code(
            exit::USAGE,
            format!("{given:?} is not a branch name (it reads as an option)"),
        ));
    }
    let name = match given.strip_prefix("refs/") {
        Some(rest) => rest.strip_prefix("heads/").ok_or_else(|| {
            CommandError::error(format!(
                "{given} is not a branch: only local branches (refs/heads/*) land"
            ))
        })?,
        None => given,
    };
    let valid = !name.is_empty()
        && store
            .git()
            .output(["check-ref-format", &format!("refs/heads/{name}")])
            .is_ok_and(|o| o.status.success());
    if !valid {
        return Err(CommandError::error(format!(
            "{given:?} is not a valid branch name"
        )));
    }
    if store.ref_target(&format!("refs/heads/{name}"))?.is_none() {
        return Err(CommandError::error(format!(
            "no branch {name}\nhint: `git branch` lists the local branches"
        )));
    }
    Ok(name.to_owned())
}

/// The target: `--target`, else orch.target, else the branch checked out.
fn target(
    store: &crate::store::Store,
    given: Option<&str>,
    branch: &str,
) -> Result<String, CommandError> {
    let name = match given {
        Some(t) => branch_name(store, t)?,
        None => {
            let configured = store.config_get("orch.target")?.or_else(|| {
                let head = store.resolve_commit("HEAD").ok().flatten();
                store
                    .project_config(head)
                    .ok()
                    .and_then(|v| crate::config::Settings::from_values(&v).ok())
                    .and_then(|s| s.target)
            });
            match configured {
                Some(t) => t,
                None => store
                    .git()
                    .run(["symbolic-ref", "--quiet", "--short", "HEAD"])
                    .map(|s| s.trim().to_owned())
                    .map_err(|_| {
                        CommandError::with_code(
                            exit::USAGE,
                            "no target: HEAD is detached and orch.target is not set\nhint: pass --target <branch>",
                        )
                    })?,
            }
        }
    };
    if name == branch {
        return Err(CommandError::with_code(
            exit::USAGE,
            format!(
                "{branch} would land on itself\nhint: pass --target <branch>, or check out the target"
            ),
        ));
    }
    Ok(name)
}

pub fn run(cli: &GlobalArgs, args: &LandArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let branch = branch_name(&store, &args.branch)?;
    let target = target(&store, args.target.as_deref(), &branch)?;
    if store.ref_target(&format!("refs/heads/{target}"))?.is_none() {
        return Err(CommandError::error(format!(
            "the target branch {target} does not exist"
        )));
    }
    let req = Request {
        branch: branch.clone(),
        target: target.clone(),
        strategy: args.strategy.as_deref().and_then(Strategy::parse),
    };
    let state = crate::state::SharedIndex::open(&store)?;
    let runtime = super::globals::scheduler()?;
    let cancel = CancellationToken::new();
    let tx = cancel.clone();
    output::status(&format!("Landing branch {branch} on {target}…"));
    let dir = store.common_dir().to_owned();
    let outcome = runtime.block_on(async {
        let watch = tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                tx.cancel();
            }
        });
        let r = hand::land(&dir, state, &req, &cancel).await;
        watch.abort();
        r
    });
    match outcome? {
        Outcome::Refused(refusal) => Err(refusal.into()),
        Outcome::Landed {
            landing,
            approval,
            gate_runs,
            warnings,
        } => {
            for w in &warnings {
                output::status(&format!(
                    "warning: {w}\nhint: {}",
                    super::error::landing_hint(w)
                ));
            }
            if args.json {
                output::Out::new().line(
                    &serde_json::json!({
                        "landing": landing.landing,
                        "branch": landing.branch,
                        "commit": landing.commit,
                        "tree": landing.tree,
                        "approval": landing.approval,
                        "approver": approval.approver,
                        "target": landing.target,
                        "old": landing.old,
                        "new": landing.new,
                        "strategy": landing.strategy,
                        "commits": landing.commits,
                        "verdicts": landing.verdicts,
                        "gate_runs": gate_runs,
                    })
                    .to_string(),
                );
            }
            output::status(&format!(
                "Landed branch {branch} on {target} at {} ({} commit(s), {}, approved by {}; {gate_runs} integration gate run(s)).\nNext: publish it with `git orch sync` and `git push`; `git orch verify {target}` checks it.",
                &landing.new.to_string()[..12],
                landing.commits.len(),
                landing.strategy,
                approval.approver
            ));
            Ok(exit::OK)
        }
    }
}
