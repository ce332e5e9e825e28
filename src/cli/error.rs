//! A command's failure as the user sees it: the error, its causes, the
//! exit code its type gives, and hints on what to do next.
//!
//! The domain's errors are typed and say what is wrong; what the user can
//! do about it depends on how they got there (the command, its options),
//! so hints are attached here, at the edge, as jj's `CommandError` does.
//! Exit codes come from the error's type, never from its text. What each
//! code means to a user is in `docs/cli.md` ("Exit codes"); each code has a
//! test driving the real binary (`tests/it/exit_codes.rs`, `tests/it/runs.rs`).
//!
//! | error type | exit code |
//! |---|---|
//! | `RunError::NotApproved`, `Busy`, `WorkersRun`, `StartedElsewhere`, `StartRace`, `BaseNotPublished`; a hand landing's `Refusal`; a `LandingProblem` that refused a landing | 3 blocked |
//! | `RunError::UnknownTask`, `BadBase`, `BadTarget`; `ReviewError::BadBase`; clap's errors | 2 usage |
//! | `RunError::AgentsCannotWork`; `RunError::Sandbox` but a bad `GIT_ORCH_SANDBOX` or a folder that cannot be made; `DemoError::UnknownAgent`, `BadAgent`, `AgentMissing`, `AgentCannotWork` | 78 configuration |
//! | `RunError::Revision`, `Approval`, `Review`, `Store` | that inner error's code |
//! | `MergeError::Run`, `Store`; `WorkerError::Run`, `Store` | that inner error's code |
//! | every other `RunError`, `MergeError`, `RevisionError`, `ApprovalError`, `ReviewError`, `WorkerError`, `StoreError`, `ProcessError`, `IdError`, `LeadError`, `DemoError`, `PlanError`, `HookError`, `FsckError`, `AgentError` | 1 error |
//!
//! Hints come from the error's type too: each `From` below matches the
//! situation, and [`typed_hints`] finds the hint of a store or plan error
//! wherever it sits in an error's chain of sources.
//!
//! Outcomes that are not errors carry their own codes from the command:
//! 3 for blocking findings, failed gates, conflicts and refused landings,
//! 64 budget spent, 65 circuit breaker, 78 an agent that cannot work as
//! configured, 130 interrupted (`exit`).

use std::error::Error;

use super::exit;
use crate::approval::{ApprovalError, ReviewError};
use crate::merge::MergeError;
use crate::merge::hand::Refusal;
use crate::plan::PlanError;
use crate::plan::revisions::RevisionError;
use crate::run::RunError;
use crate::run::progress::LandingProblem;
use crate::store::StoreError;

/// What a failed command prints (`error:` line, `caused by:` lines,
/// `hint:` lines) and the exit code it returns.
#[derive(Debug)]
pub struct CommandError {
    pub code: u8,
    /// The headline.
    pub message: String,
    /// The chain of causes under the headline, outermost first, leaving
    /// out any whose text the headline already holds.
    pub causes: Vec<String>,
    /// What the user can do next.
    pub hints: Vec<String>,
}

impl CommandError {
    /// A failure with exit code 1.
    pub fn error(message: impl Into<String>) -> Self {
        Self::with_code(exit::ERROR, message)
    }

    /// A failure with a specific exit code.
    pub fn with_code(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            causes: Vec::new(),
            hints: Vec::new(),
        }
    }

    /// A failure from a typed error: its text, and the chain of its
    /// `source()`s as causes.
    pub fn from_error(code: u8, error: &(dyn Error + 'static)) -> Self {
        let message = error.to_string();
        let mut causes: Vec<String> = Vec::new();
        let mut next = error.source();
        while let Some(cause) = next {
            let text = cause.to_string();
            let said = message.contains(&text) || causes.iter().any(|c| c.contains(&text));
            if !said && !text.is_empty() {
                causes.push(text);
            }
            next = cause.source();
        }
        let mut out = Self {
            code,
            message,
            causes,
            hints: Vec::new(),
        };
        for h in typed_hints(error) {
            out = out.hint(h);
        }
        out
    }

    /// Adds a hint on what to do next (once: a hint already given is not
    /// repeated).
    pub fn hint(mut self, hint: impl Into<String>) -> Self {
        let hint = hint.into();
        if !self.hints.contains(&hint) {
            self.hints.push(hint);
        }
        self
    }

    /// The text `main` prints after `error: `.
    pub fn render(&self) -> String {
        let mut out = self.message.clone();
        for c in &self.causes {
            out.push_str("\ncaused by: ");
            out.push_str(c);
        }
        for h in &self.hints {
            out.push_str("\nhint: ");
            out.push_str(h);
        }
        out
    }
}

impl From<StoreError> for CommandError {
    fn from(e: StoreError) -> Self {
        CommandError::from_error(exit::ERROR, &e)
    }
}

/// What the user can do about a store error, by its situation.
fn store_hint(e: &StoreError) -> Option<String> {
    use StoreError as E;
    let fsck_repair = "run `git orch fsck --repair`";
    Some(match e {
        E::NotARepository { .. } => {
            "run git orch inside a git repository, or create one with `git init`".to_owned()
        }
        E::Reftable { .. } => "convert it with `git refs migrate --ref-format=files` (git 2.46 or later), or use a clone made with `--ref-format=files`".to_owned(),
        E::StaleLock { path, .. } => format!(
            "if no git or git-orch process is running, a crash left it behind; remove it with `rm '{}'` and try again",
            path.display()
        ),
        E::Busy { .. } => "wait for it to finish; if it is hung, stop that process (the lock is released when it exits)".to_owned(),
        E::Contention { .. } => "another process is writing to it continuously; try again".to_owned(),
        E::ReadOnlyView { .. } => "this is a bug in git-orch; hooks must only read".to_owned(),
        E::Damaged { .. } => format!(
            "{fsck_repair}; it restores the ref from its reflog, a remote's copy or its newest intact commit, and says what, if anything, was lost"
        ),
        E::BadWriterId { .. } => "remove it with `git config --unset orch.writerId`; a new one is made on the next write".to_owned(),
        E::LogWithoutTrailers { .. } => "the log ref was rewritten by something other than git-orch; restore it from a clone with `git orch sync`".to_owned(),
        E::ClockBeyondCeiling { reference, .. } => format!(
            "`git orch fsck` names the commit; set the ref back to the commit before it (`git update-ref {reference} <commit>`), or restore it from a clone with `git orch sync`"
        ),
        E::SeqBeyondEnd { .. } => {
            "`git orch fsck` names the commit; set the ref back to the commit before it".to_owned()
        }
        E::PublishedButMoved { .. } => {
            "run `git orch sync` to bring the published state back".to_owned()
        }
        E::ObjectVanished { .. } => fsck_repair.to_owned(),
        E::ObjectsKeepVanishing { .. } => format!("stop the prune, then {fsck_repair}"),
        E::ConfigSyntax { .. } => "it uses the syntax of .gitmodules: `[section \"name\"]` headers and `key = value` lines".to_owned(),
        E::UnknownRemote { .. } => "add it with `git remote add <name> <url>`, then run `git orch init --remote <name>`".to_owned(),
        E::SigningFailed { .. } => "set up commit signing first (`git config user.signingKey …`, and `gpg.format ssh` for ssh keys), or approve without --sign".to_owned(),
        E::StateCache { folder, .. } => {
            format!("remove {} (it is rebuilt from the log)", folder.display())
        }
        E::InvalidRefName(_)
        | E::Git { .. }
        | E::Io { .. }
        | E::Process(_)
        | E::Corrupt(_) => return None,
    })
}

/// What the writer of a plan can do about its error.
fn plan_hint(e: &PlanError) -> Option<String> {
    match e {
        PlanError::TooLarge { .. } => Some("split the work into several plans".to_owned()),
        PlanError::Shape {
            suggestion: Some(k),
            ..
        } => Some(format!(
            "did you mean `{k}`? The format is in docs/plans.md; `git orch plan schema` prints its JSON Schema"
        )),
        PlanError::Shape {
            unknown_field: Some(_),
            ..
        } => Some(
            "remove it; the format is in docs/plans.md and `git orch plan schema` prints its JSON Schema"
                .to_owned(),
        ),
        _ => None,
    }
}

/// What to do about something a sync found.
pub fn sync_hint(warning: &crate::store::sync::SyncWarning) -> String {
    match warning {
        crate::store::sync::SyncWarning::WriterIdShared { .. } => {
            "give one of the clones its own id with `git orch init --new-writer`".to_owned()
        }
    }
}

/// The hints of the typed errors the library leaves the choice of a hint
/// to the edge for, found anywhere in an error's chain: an error wrapped
/// as another's source keeps its hint.
fn typed_hints(error: &(dyn Error + 'static)) -> Vec<String> {
    let mut out = Vec::new();
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(e) = e.downcast_ref::<StoreError>() {
            out.extend(store_hint(e));
        }
        if let Some(e) = e.downcast_ref::<PlanError>() {
            out.extend(plan_hint(e));
        }
        next = e.source();
    }
    out
}

impl From<PlanError> for CommandError {
    fn from(e: PlanError) -> Self {
        CommandError::from_error(exit::ERROR, &e)
    }
}

impl From<crate::process::ProcessError> for CommandError {
    fn from(e: crate::process::ProcessError) -> Self {
        CommandError::from_error(exit::ERROR, &e)
    }
}

impl From<RevisionError> for CommandError {
    fn from(e: RevisionError) -> Self {
        let hint = match &e {
            RevisionError::NoSuchPlan(_) => Some(
                "`git orch plan list` shows the stored plans; `git orch plan add <file>` stores one"
                    .to_owned(),
            ),
            RevisionError::NoSuchRevision { .. } => {
                Some("`git orch plan list` shows each plan's revisions".to_owned())
            }
            RevisionError::Corrupt { .. } => Some(
                "restore the ref from a clone with `git orch sync`, or add the plan again"
                    .to_owned(),
            ),
            RevisionError::Store(_) => {
                let RevisionError::Store(e) = e else {
                    unreachable!("matched above")
                };
                return e.into();
            }
        };
        with_hint(CommandError::from_error(exit::ERROR, &e), hint)
    }
}

impl From<ApprovalError> for CommandError {
    fn from(e: ApprovalError) -> Self {
        match e {
            ApprovalError::Revision(e) => e.into(),
            ApprovalError::Store(e) => e.into(),
            e @ ApprovalError::Corrupt { .. } => CommandError::from_error(exit::ERROR, &e).hint(
                "restore the ref from a clone with `git orch sync`, or approve the plan again",
            ),
        }
    }
}

impl From<ReviewError> for CommandError {
    fn from(e: ReviewError) -> Self {
        let hint = match &e {
            ReviewError::BadBase(_) => Some("give a branch, tag or commit id"),
            ReviewError::Config(_) => {
                Some("fix .orch/config at the base commit, or the orch.* keys of this repository")
            }
            ReviewError::Store(_) => {
                let ReviewError::Store(e) = e else {
                    unreachable!("matched above")
                };
                return e.into();
            }
        };
        let code = match &e {
            ReviewError::BadBase(_) => exit::USAGE,
            _ => exit::ERROR,
        };
        with_hint(CommandError::from_error(code, &e), hint.map(str::to_owned))
    }
}

impl From<RunError> for CommandError {
    fn from(e: RunError) -> Self {
        use RunError as E;
        let (code, hint) = match &e {
            E::AgentsCannotWork(blocked) => {
                let mut out = CommandError::from_error(exit::CONFIG, &e);
                for b in blocked {
                    if !out.hints.contains(&b.fix) {
                        out.hints.push(b.fix.clone());
                    }
                }
                return out;
            }
            E::Sandbox(s) => {
                let code = match s {
                    crate::sandbox::SandboxError::BadOverride { .. } => exit::ERROR,
                    crate::sandbox::SandboxError::Io { .. } => exit::ERROR,
                    _ => exit::CONFIG,
                };
                let hint = s.fix();
                return with_hint(CommandError::from_error(code, &e), hint);
            }
            E::Revision(_) | E::Approval(_) | E::Review(_) | E::Store(_) => {
                return match e {
                    E::Revision(e) => e.into(),
                    E::Approval(e) => e.into(),
                    E::Review(e) => e.into(),
                    E::Store(e) => e.into(),
                    _ => unreachable!("matched above"),
                };
            }
            E::NotApproved { verdict, .. } => (exit::BLOCKED, verdict_hint(verdict)),
            E::Dirty { target, .. } => (
                exit::ERROR,
                Some(format!(
                    "a run starts from the tip of {target}; commit them first, or pass --base <commit> to base the run on a commit explicitly (git-orch never stashes or resets your files)"
                )),
            ),
            E::NoTarget(_) => (
                exit::ERROR,
                Some("create it, or pass --target <branch>".to_owned()),
            ),
            E::BadTarget { .. } => (
                exit::USAGE,
                Some("pass --target <branch> with a valid branch name".to_owned()),
            ),
            E::BadBase(_) => (
                exit::USAGE,
                Some("give a branch, tag or commit id".to_owned()),
            ),
            E::Busy { run, .. } => (
                exit::BLOCKED,
                Some(format!(
                    "wait for it to finish, watch it with `git orch status {run} --watch`, or stop that process"
                )),
            ),
            E::NestedRoot { .. } => (
                exit::ERROR,
                Some("set orch.worktreeRoot to a folder outside the repository".to_owned()),
            ),
            E::WorkersRun { run } => (
                exit::BLOCKED,
                Some(format!(
                    "watch it with `git orch status {run} --watch`, or work it here with `git orch worker`"
                )),
            ),
            E::StartedElsewhere { run, .. } => (
                exit::BLOCKED,
                Some(format!(
                    "watch it with `git orch status {run} --watch` after `git orch sync`; it ends where it was started"
                )),
            ),
            E::StartRace { .. } => (
                exit::BLOCKED,
                Some("`git orch sync`, then `git orch status` shows its run".to_owned()),
            ),
            E::BaseNotPublished {
                remote, target, ..
            } => (
                exit::BLOCKED,
                Some(format!(
                    "push `{target}` first (`git push {remote} {target}`), then start the run again"
                )),
            ),
            E::NoSharedRemote => (
                exit::ERROR,
                Some(
                    "set the remote workers share with `git orch init --remote <name>` (it sets orch.remote)"
                        .to_owned(),
                ),
            ),
            E::StartRefused { .. } => (
                exit::ERROR,
                Some("the remote's hook output above says why; `git orch sync` and try again once it is fixed".to_owned()),
            ),
            E::CandidatesForWorkers { .. } => (
                exit::USAGE,
                Some("run it with `git orch run` (no --start-only) to have candidates judged".to_owned()),
            ),
            E::UnknownTask { plan, .. } => (
                exit::USAGE,
                Some(format!("`git orch plan show {plan}` lists its tasks")),
            ),
            E::NoTaskInRun { run, .. } => (
                exit::ERROR,
                Some(format!("`git orch status {run}` lists its tasks")),
            ),
            E::NoAttempt { run, .. } => (
                exit::ERROR,
                Some(format!("`git orch status {run}` shows each task's attempts")),
            ),
            E::NoRun(_) => (
                exit::ERROR,
                Some("`git orch status` without an argument shows the newest run".to_owned()),
            ),
            E::NoRuns => (
                exit::ERROR,
                Some("`git orch run <plan>` starts one".to_owned()),
            ),
            E::PlanNotHere { .. } => (
                exit::ERROR,
                Some("`git orch sync` fetches it from the clone that started the run".to_owned()),
            ),
            E::Settings(_) => (
                exit::ERROR,
                Some("fix .orch/config at the base commit".to_owned()),
            ),
            E::BadRunId(_)
            | E::NoResult { .. }
            | E::BranchExists(_)
            | E::Commit(_)
            | E::Internal(_)
            => (exit::ERROR, None),
            E::Merge(m) => (
                exit::ERROR,
                m.downcast_ref::<MergeError>().and_then(merge_hint),
            ),
        };
        with_hint(CommandError::from_error(code, &e), hint)
    }
}

impl From<MergeError> for CommandError {
    fn from(e: MergeError) -> Self {
        match e {
            MergeError::Run(e) => e.into(),
            MergeError::Store(e) => e.into(),
            e => {
                let hint = merge_hint(&e);
                with_hint(CommandError::from_error(exit::ERROR, &e), hint)
            }
        }
    }
}

/// What to do about a merge queue's or hand landing's failure.
fn merge_hint(e: &MergeError) -> Option<String> {
    use MergeError as E;
    match e {
        E::Store(e) | E::Scratch(e) => store_hint(e),
        E::Run(_) => None,
        E::NoTarget { target } => Some(format!(
            "create it again where it was (`git branch {target} <commit>`), then rerun"
        )),
        E::PushRefused { .. } => Some(
            "`git orch verify` on the candidate and the remote's hook output say why".to_owned(),
        ),
        E::Unpublished { target, remote } => Some(format!(
            "push them through your usual review first, or work from a clone whose {target} matches {remote}"
        )),
        E::TargetMoving { .. } | E::MovedHere { .. } => {
            Some("try again: another process landed at the same time".to_owned())
        }
        E::LeaseLost { .. } => {
            Some("another worker lands the queue now; this one's attempts wait for it".to_owned())
        }
        E::Settings(_) => Some("fix .orch/config at the run's base commit".to_owned()),
        E::NoRun(_) => {
            Some("`git orch status` without an argument shows the newest run".to_owned())
        }
        E::Checkout { problem, .. } => Some(landing_hint(problem)),
        E::NoBranch(_) | E::Refused(_) => None,
    }
}

/// What to do about a plan whose latest decision does not approve it.
pub fn verdict_hint(verdict: &crate::approval::Verdict) -> Option<String> {
    use crate::approval::Verdict as V;
    Some(match verdict {
        V::Valid { .. } => return None,
        V::NoDecision { current } => format!(
            "review it with `git orch plan show {id}`, then `git orch approve {id}`",
            id = current.plan.id
        ),
        V::Revise { .. } => {
            "store a new revision with `git orch plan add`, then approve it".to_owned()
        }
        V::Stale { current, .. } => format!(
            "review the change with `git orch plan diff {id}`, then `git orch approve {id}`",
            id = current.plan.id
        ),
        V::Unsigned { current, .. } => format!(
            "approve again with `git orch approve {} --sign`",
            current.plan.id
        ),
        V::Unrecorded { current, .. } => format!(
            "check it with `git orch fsck`; if the plan is what you want, `git orch approve {}`",
            current.plan.id
        ),
    })
}

/// What to do about a run a worker leaves alone.
pub fn skip_hint(cause: &crate::worker::SkipCause) -> Option<String> {
    use crate::worker::SkipCause as S;
    match cause {
        S::NotApproved(verdict) => verdict_hint(verdict),
        S::Failing { persists: true } => Some("`git orch sync` and `git orch fsck` show whether this clone lacks state; check the remote is reachable".to_owned()),
        S::Failing { persists: false } => None,
        S::Config => Some("this worker leaves the run to others; fix it (`git orch agents` checks every agent), then start the worker again".to_owned()),
        S::Landing(problem) | S::Following(Some(problem)) => Some(landing_hint(problem)),
        S::Following(None) => None,
    }
}

/// What a person does about a landing that was refused, or a checkout
/// that could not follow one.
pub fn landing_hint(problem: &LandingProblem) -> String {
    match problem.innermost() {
        LandingProblem::CheckoutInTheWay { .. } => "commit, move or remove your changes to those files, then run `git orch merge` (git-orch never stashes, resets or deletes your files; other changes there are fine)".to_owned(),
        LandingProblem::CheckoutNotMoved { fix, .. } => {
            format!("finish it with `{fix}`, or `git orch fsck` to see it again")
        }
        LandingProblem::InterruptedLanding { .. } => {
            unreachable!("innermost is never an interrupted landing")
        }
    }
}

/// A landing refused: exit 3, and what to do.
impl From<LandingProblem> for CommandError {
    fn from(problem: LandingProblem) -> Self {
        CommandError::with_code(exit::BLOCKED, problem.to_string()).hint(landing_hint(&problem))
    }
}

/// A hand landing refused: exit 3, and what to do.
impl From<Refusal> for CommandError {
    fn from(refusal: Refusal) -> Self {
        use Refusal as R;
        let hint = match &refusal {
            R::ChangedSinceApproval { branch, .. } => Some(format!(
                "review the change, then `git orch approve --branch {branch}` again"
            )),
            R::NotApproved { branch, .. } => Some(format!(
                "review it, then `git orch approve --branch {branch}`"
            )),
            R::Unsigned { branch } => Some(format!(
                "approve it again with `git orch approve --branch {branch} --sign --again`"
            )),
            R::Conflict { branch, target, .. } => Some(format!(
                "merge or rebase {branch} onto {target} by hand, approve the result, and land it"
            )),
            R::GateFailed { landing, .. } => Some(format!(
                "the gate's output is under .git/orch/logs/{landing}/"
            )),
            R::Checkout(problem) => Some(landing_hint(problem)),
            R::ApprovalUnusable { .. }
            | R::AlreadyContained { .. }
            | R::NothingToLand { .. }
            | R::Interrupted => None,
        };
        with_hint(
            CommandError::with_code(exit::BLOCKED, refusal.to_string()),
            hint,
        )
    }
}

impl From<crate::worker::WorkerError> for CommandError {
    fn from(e: crate::worker::WorkerError) -> Self {
        use crate::worker::WorkerError as E;
        match e {
            E::Run(e) => e.into(),
            E::Store(e) => e.into(),
            e => CommandError::from_error(exit::ERROR, &e),
        }
    }
}

impl From<crate::fsck::FsckError> for CommandError {
    fn from(e: crate::fsck::FsckError) -> Self {
        use crate::fsck::FsckError as E;
        match e {
            E::Store(e) => e.into(),
            E::Run(e) => e.into(),
            E::Merge(e) => e.into(),
            E::Hook(e) => e.into(),
            e @ E::NothingToAccept { .. } => CommandError::from_error(exit::ERROR, &e)
                .hint("`git orch fsck` lists what it finds"),
        }
    }
}

impl From<crate::hooks::HookError> for CommandError {
    fn from(e: crate::hooks::HookError) -> Self {
        use crate::hooks::HookError as E;
        let hint = match &e {
            E::Input { .. } => Some(
                "git runs this hook and writes that input itself; to run it by hand, give it lines in git's format",
            ),
            E::Replaced { .. } => Some(
                "a tool replaced git-orch's hook after it was installed; decide which hook to keep, remove the other file, then install again",
            ),
            E::Globs(_) => {
                Some("the owned globs come from the subtask of the plan; fix them there")
            }
            E::Io { .. } | E::Store(_) | E::Process(_) | E::State(_) => None,
        };
        with_hint(
            CommandError::from_error(exit::ERROR, &e),
            hint.map(str::to_owned),
        )
    }
}

impl From<crate::agent::AgentError> for CommandError {
    fn from(e: crate::agent::AgentError) -> Self {
        let hint = e.fix();
        with_hint(CommandError::from_error(exit::ERROR, &e), hint)
    }
}

impl From<crate::lead::LeadError> for CommandError {
    fn from(e: crate::lead::LeadError) -> Self {
        use crate::lead::LeadError as E;
        let hint = match &e {
            E::NoBase => Some("commit something first, or give --base".to_owned()),
            E::Agent(a) => a.fix(),
            E::Sandbox(s) => s.fix(),
            E::Store(_) => {
                let E::Store(e) = e else {
                    unreachable!("matched above")
                };
                return e.into();
            }
            E::BadBase(_) => Some("give a branch, tag or commit id".to_owned()),
            E::Missing { .. } => Some(
                "install it, or choose another agent with --agent (git orch agents lists them)"
                    .to_owned(),
            ),
            E::OutFolderMissing { .. } => Some("create it, or choose another --out".to_owned()),
            E::OutExists(_) => Some("remove it, or choose another --out".to_owned()),
            E::OutInGitDir { git_dir, .. } => Some(format!(
                "save drafts in the work tree or elsewhere; without --out they go to {}",
                git_dir.join("orch/drafts").display()
            )),
            _ => None,
        };
        with_hint(CommandError::from_error(exit::ERROR, &e), hint)
    }
}

impl From<crate::demo::DemoError> for CommandError {
    fn from(e: crate::demo::DemoError) -> Self {
        use crate::demo::DemoError as E;
        let drop_agent = "or drop --agent to use the built-in demo agent";
        let hint = match &e {
            E::KeepNotEmpty(_) => Some(
                "choose a folder that does not exist yet, e.g. --keep /tmp/orch-demo".to_owned(),
            ),
            E::UnknownAgent { .. } => Some(format!(
                "use claude, codex, gemini or aider, an agent defined in the .orch/config of the project you are in, {drop_agent}"
            )),
            E::BadAgent { .. } => Some(format!("fix that section, {drop_agent}")),
            E::AgentMissing { install, .. } => Some(format!("{install}, {drop_agent}")),
            E::AgentCannotWork { fix, .. } => Some(format!("{fix}; {drop_agent}")),
            E::Spawn { .. } => Some("the demo needs git and a POSIX shell (sh) on PATH".to_owned()),
            E::StepFailed { project, .. } => Some(format!(
                "the demo's repository is kept at {} for a look (`git orch status` and `git orch log` there)",
                project.display()
            )),
            E::Io { .. } => None,
        };
        // Who writes the code cannot work as asked: nothing was written.
        let code = match &e {
            E::UnknownAgent { .. }
            | E::BadAgent { .. }
            | E::AgentMissing { .. }
            | E::AgentCannotWork { .. } => exit::CONFIG,
            _ => exit::ERROR,
        };
        with_hint(CommandError::from_error(code, &e), hint)
    }
}

impl From<crate::demo::agent::AgentError> for CommandError {
    fn from(e: crate::demo::agent::AgentError) -> Self {
        use crate::demo::agent::AgentError as E;
        let hint = match &e {
            E::UnknownTask(_) => {
                Some("it is run by `git orch demo`; use a real agent for other plans")
            }
            E::NoTask => Some("the demo agent is started by `git orch run`, which sets it"),
            _ => None,
        };
        with_hint(
            CommandError::from_error(exit::ERROR, &e),
            hint.map(str::to_owned),
        )
    }
}

/// Errors whose texts already say all there is, with exit code 1.
macro_rules! plain_errors {
    ($($t:ty),* $(,)?) => {$(
        impl From<$t> for CommandError {
            fn from(e: $t) -> Self {
                CommandError::from_error(exit::ERROR, &e)
            }
        }
    )*};
}

plain_errors!(crate::ids::IdError);

fn with_hint(e: CommandError, hint: Option<String>) -> CommandError {
    match hint {
        Some(h) => e.hint(h),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("reading the plan")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn causes_follow_the_headline_and_hints_come_last() {
        let e =
            CommandError::from_error(exit::ERROR, &Outer(std::io::Error::other("disk on fire")))
                .hint("put it out");
        assert_eq!(
            e.render(),
            "reading the plan\ncaused by: disk on fire\nhint: put it out"
        );
    }

    #[test]
    fn a_cause_the_headline_already_says_is_not_repeated() {
        let e = CommandError::from(RunError::Settings(crate::config::ConfigError {
            origin: "[orch] cap".into(),
            message: "not a number".into(),
        }));
        assert_eq!(
            e.render(),
            "[orch] cap: not a number\nhint: fix .orch/config at the base commit"
        );
    }

    #[test]
    fn a_sandbox_bind_that_cannot_work_gets_its_fix_as_the_hint() {
        let dir = tempfile::tempdir().expect("tempdir");
        let missing = dir.path().join("no-such-folder");
        let hidden = crate::sandbox::binds::Hidden {
            home: None,
            git_dir: None,
            private_homes: None,
        };
        let bind = crate::sandbox::binds::check(std::slice::from_ref(&missing), &[], &hidden)
            .expect_err("it does not exist");
        let e = CommandError::from(RunError::Sandbox(bind.into()));
        assert_eq!(e.code, exit::CONFIG);
        assert!(
            e.message
                .starts_with(&format!("[sandbox] roBind = {}: ", missing.display())),
            "{}",
            e.render()
        );
        assert_eq!(
            e.hints,
            ["create it, or remove the line from .orch/config"],
            "{}",
            e.render()
        );
    }

    #[test]
    fn exit_codes_come_from_the_type() {
        let plan = crate::ids::PlanId::new("p").unwrap();
        let run = crate::ids::RunId::new("r").unwrap();
        let task = crate::ids::TaskId::new("t").unwrap();
        let code = |e: RunError| CommandError::from(e).code;
        let current = Box::new(crate::plan::revisions::PlanRevision {
            plan: crate::plan::format::parse(
                br#"{"version":1,"id":"p","instruction":"x","subtasks":[{"id":"t","title":"t","owned_globs":["a"],"deliverable":"d","verification":"v"}]}"#,
            )
            .expect("a plan"),
            revision: 1,
            hash: "h".into(),
            commit: crate::store::Oid::from_hex(&[b'0'; 40]).expect("an id"),
        });
        let e = CommandError::from(RunError::NotApproved {
            run: None,
            verdict: Box::new(crate::approval::Verdict::NoDecision { current }),
        });
        assert_eq!(e.code, exit::BLOCKED);
        assert_eq!(
            e.render(),
            "refusing to run: plan p revision 1 has no approval\nhint: review it with `git orch plan show p`, then `git orch approve p`"
        );
        assert_eq!(code(RunError::UnknownTask { plan, task }), exit::USAGE);
        assert_eq!(
            code(RunError::WorkersRun { run: run.clone() }),
            exit::BLOCKED
        );
        assert_eq!(code(RunError::NoRun(run)), exit::ERROR);
        assert_eq!(code(RunError::BadBase("x".into())), exit::USAGE);
    }
}
