//! An attempt's workspace: its branch, its checkout (a worktree with a
//! git folder of its own, never a linked worktree of the repository), port
//! block, hooks, prompt files, and the import of whatever the agent leaves.
//!
//! [`Workspace`] is the one type an attempt's phases go through, one method
//! per phase, in the order `run::attempt` calls them: [`Workspace::record`]
//! (branch and record), [`Workspace::check_out`] (the checkout),
//! [`Workspace::install_hooks`] and [`Workspace::write_prompt`], then
//! [`Workspace::import_result`] once the agent is gone, or
//! [`Workspace::settle`] when the attempt ends without a result.
//!
//! The branch and the `attempt_created` record are written in one ref
//! transaction. The checkout is then made; if that fails, the branch is
//! deleted and the attempt recorded abandoned in one transaction again, so
//! there is never a branch without a record or a record pointing at a
//! branch that was never made.
//!
//! The agent commits into its checkout's own git folder (the quarantine,
//! see [`crate::store::quarantine`]); the repository's branch of the
//! attempt moves only when git-orch imports the result, from what it read
//! as data, never from what the agent's git metadata says.

use std::net::TcpListener;
use std::path::{Path, PathBuf};

use crate::event::{Event, Failure, FailureClass, Outcome, PORT_BLOCK};
use crate::ids::{RunId, TaskId};
use crate::store::log::Operation;
use crate::store::quarantine::{CheckoutPaths, ImportError, ImportLimits, Refusal};
use crate::store::refs::{Expected, RefUpdate};
use crate::store::{Oid, Store, StoreError};

use super::context::{RunContext, RunError};

/// Where one attempt's things live.
#[derive(Debug, Clone)]
pub struct AttemptPaths {
    /// `refs/heads/…` of the attempt branch.
    pub branch_ref: String,
    pub worktree: PathBuf,
    /// git-orch's own index of the worktree, out of the agent's reach
    /// ([`checkout_index`]).
    pub index: PathBuf,
    /// `.git/orch/logs/<run>/<task>/attempt-<n>/`: agent and gate output.
    pub log_dir: PathBuf,
    /// `.git/orch/prompts/<run>/<task>-<n>.md`
    pub prompt: PathBuf,
    /// `.git/orch/prompts/<run>/<task>-<n>.retry.json`
    pub retry_context: PathBuf,
}

impl AttemptPaths {
    /// The worktree as a checkout: its folder and git-orch's index of it.
    pub fn checkout(&self) -> CheckoutPaths {
        CheckoutPaths {
            dir: self.worktree.clone(),
            index: self.index.clone(),
        }
    }

    /// The branch name without `refs/heads/` (also the branch of the
    /// worktree's own git folder).
    pub fn branch(&self) -> &str {
        self.branch_ref
            .strip_prefix("refs/heads/")
            .unwrap_or(&self.branch_ref)
    }
}

/// git-orch's index of attempt `n` of `task`'s worktree:
/// `.git/orch/indexes/<run>/<task>-<n>`.
pub fn checkout_index(common_dir: &Path, run: &RunId, task: &TaskId, n: u32) -> PathBuf {
    common_dir
        .join("orch")
        .join("indexes")
        .join(run.as_str())
        .join(format!("{task}-{n}"))
}

/// One attempt's workspace: where its things live and what it starts
/// from. Each phase of the attempt that touches the repository or the
/// worktree is one method here; `run::attempt` calls them in order.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub paths: AttemptPaths,
    run: RunId,
    task: TaskId,
    n: u32,
    /// The commit the attempt's change is judged against.
    base: Oid,
    /// Where its branch and worktree start when not at `base` (the
    /// previous attempt's result, for a retry that continues it).
    start: Option<Oid>,
    /// Bounds on what an import of the agent's work may bring in.
    limits: ImportLimits,
}

/// What [`Workspace::check_out`] came to.
#[derive(Debug)]
pub enum CheckedOut {
    Made,
    /// It could not be made (why); the attempt is recorded abandoned.
    Abandoned(StoreError),
}

/// What a finished agent's work became: the attempt's result.
#[derive(Debug, Clone)]
pub struct ImportedResult {
    pub commit: Oid,
    pub tree: Oid,
    /// The commits from the base to the result, for per-commit gates.
    pub steps: Vec<crate::store::CommitStep>,
}

impl Workspace {
    /// The workspace attempt `n` of `task` gets in the run of `ctx`
    /// (nothing is made yet).
    pub fn new(
        ctx: &RunContext,
        task: &crate::plan::Subtask,
        n: u32,
        base: Oid,
        start: Option<Oid>,
    ) -> Self {
        let branch = match &task.branch {
            Some(prefix) => format!("{prefix}/{}/attempt-{n}", ctx.run),
            None => format!("orch/{}/{}/attempt-{n}", ctx.run, task.id),
        };
        let worktree = ctx
            .worktree_root
            .join(ctx.run.as_str())
            .join(format!("{}-{n}", task.id));
        Workspace {
            paths: recorded_paths(&ctx.common_dir, &ctx.run, &task.id, n, &branch, worktree),
            run: ctx.run.clone(),
            task: task.id.clone(),
            n,
            base,
            start,
            limits: ctx.settings.import_limits(),
        }
    }

    /// The workspace of a recorded attempt, whose branch is at `tip` now
    /// (for settling one whose driver died).
    pub fn recorded(
        common_dir: &Path,
        run: &RunId,
        task: &TaskId,
        a: &crate::state::AttemptState,
        base: Oid,
        tip: Oid,
    ) -> Self {
        Workspace {
            paths: attempt_paths(common_dir, run, task, a),
            run: run.clone(),
            task: task.clone(),
            n: a.n,
            base,
            start: Some(tip),
            limits: ImportLimits::default(),
        }
    }

    /// Where its branch and worktree start.
    pub fn start(&self) -> Oid {
        self.start.unwrap_or(self.base)
    }

    /// A free block of ports for it ([`port_block`]), 0 when none is.
    pub fn port_block(&self, base: u16, span: u16) -> u16 {
        port_block(&self.paths.worktree, base, span).unwrap_or(0)
    }

    /// Phase 1: records the attempt and creates its branch at its start,
    /// in one ref transaction. A branch of that name already there is
    /// never taken over: the attempt is recorded failed with it
    /// ([`RunError::BranchExists`]).
    pub fn record(
        &self,
        store: &Store,
        agent: &str,
        port: u16,
        candidate: Option<crate::event::Candidate>,
    ) -> Result<(), RunError> {
        let (p, task, n) = (&self.paths, &self.task, self.n);
        let (_, existed) = store.transact(|store| {
            // A branch of this name made by someone else (by hand, by
            // another tool) is never taken over: the attempt is recorded
            // failed, so the next one has a new number and a new branch,
            // and a run meets such a branch once per attempt, not in a
            // loop.
            let existed = store.ref_target(&p.branch_ref)?.is_some();
            let mut events = vec![Event::AttemptCreated {
                run_id: self.run.clone(),
                task: task.clone(),
                attempt: n,
                branch: p.branch().to_owned(),
                base: self.base,
                start: self.start,
                worktree: p.worktree.to_string_lossy().into_owned(),
                port,
                agent: agent.to_owned(),
                candidate,
                foreign_branch: existed,
            }];
            let refs = if existed {
                // Failed, not abandoned: it counts against the retry
                // budget, so branches planted ahead cannot make a run
                // create attempts without end.
                events.push(Event::attempt_finished(
                    &self.run,
                    task,
                    n,
                    Outcome::Failed,
                    Some(Failure {
                        class: FailureClass::Internal,
                        reason: format!(
                            "its branch {} exists already and is not git-orch's to take; the next attempt gets a branch of its own (delete that branch if nobody needs it)",
                            p.branch()
                        ),
                    }),
                ));
                Vec::new()
            } else {
                vec![RefUpdate::set(
                    &p.branch_ref,
                    self.start(),
                    Expected::Absent,
                    &format!("orch: attempt {n} of {task}"),
                )]
            };
            Ok::<_, RunError>((Operation { events, refs }, existed))
        })?;
        if existed {
            return Err(RunError::BranchExists(p.branch_ref.clone()));
        }
        Ok(())
    }

    /// Phase 2: makes the worktree, the files of its start and a git
    /// folder of its own with the attempt's branch there. When that
    /// fails, a half-made one is removed again (git-orch's own, nothing
    /// in it yet), the branch deleted and the attempt recorded abandoned,
    /// atomically ([`CheckedOut::Abandoned`], with why).
    pub fn check_out(&self, store: &Store) -> Result<CheckedOut, StoreError> {
        match self.make_checkout(store) {
            Ok(()) => Ok(CheckedOut::Made),
            Err(e) => {
                self.abandon_unmade(store, &e.to_string())?;
                Ok(CheckedOut::Abandoned(e))
            }
        }
    }

    fn make_checkout(&self, store: &Store) -> Result<(), StoreError> {
        let p = &self.paths;
        if let Some(parent) = p.worktree.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| StoreError::io(format!("creating {}", parent.display()), e))?;
        }
        let occupied = std::fs::read_dir(&p.worktree).is_ok_and(|mut e| e.next().is_some());
        if occupied {
            return Err(StoreError::io(
                format!("making the worktree {}", p.worktree.display()),
                std::io::Error::new(
                    std::io::ErrorKind::AlreadyExists,
                    "the folder exists and is not empty",
                ),
            ));
        }
        let made = store.make_checkout(&p.checkout(), self.start(), p.branch());
        if made.is_err() {
            let _ = std::fs::remove_dir_all(&p.worktree);
            let _ = std::fs::remove_file(&p.index);
        }
        made
    }

    /// Gives the attempt up because its worktree could not be made:
    /// removes the branch (still at its start, nothing on it) and records
    /// why, atomically.
    fn abandon_unmade(&self, store: &Store, why: &str) -> Result<(), StoreError> {
        let p = &self.paths;
        store.transact(|store| {
            let mut refs = Vec::new();
            if let Some(at) = store.ref_target(&p.branch_ref)? {
                refs.push(RefUpdate::delete(
                    &p.branch_ref,
                    at,
                    "orch: attempt abandoned",
                ));
            }
            Ok::<_, StoreError>((
                Operation {
                    events: vec![Event::attempt_finished(
                        &self.run,
                        &self.task,
                        self.n,
                        Outcome::Abandoned,
                        Some(Failure {
                            class: FailureClass::Internal,
                            reason: format!("the worktree could not be made: {why}"),
                        }),
                    )],
                    refs,
                },
                (),
            ))
        })?;
        Ok(())
    }

    /// Phase 3: writes the hooks of the worktree's own git folder: a
    /// pre-commit hook that refuses staged paths outside the owned globs,
    /// then hands over to the hook that was in effect in the repository;
    /// every other hook of that folder is chained as is. The agent may
    /// rewrite them all: they help it stay in scope, and the scope gate is
    /// what enforces it. `exe` is this program, called back as
    /// `git-orch hook pre-commit`; `original` is the repository's own hook
    /// folder ([`original_hooks_dir`], read once per run).
    pub fn install_hooks(
        &self,
        original: &Path,
        owned: &[String],
        exe: &Path,
    ) -> Result<(), StoreError> {
        let quarantine = self.paths.checkout().quarantine();
        let hooks = quarantine.join("hooks");
        let io = |e| StoreError::io(format!("writing hooks in {}", hooks.display()), e);
        std::fs::create_dir_all(&hooks).map_err(io)?;
        let globs_file = quarantine.join("orch-owned-globs");
        std::fs::write(&globs_file, owned.join("\n") + "\n").map_err(io)?;
        let mut names: Vec<String> = std::fs::read_dir(original)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.ends_with(".sample"))
                    .collect()
            })
            .unwrap_or_default();
        if !names.iter().any(|n| n == "pre-commit") {
            names.push("pre-commit".into());
        }
        for name in names {
            let chained = original.join(&name);
            let mut script =
                String::from("#!/bin/sh\n# Written by git-orch for one attempt worktree.\n");
            if name == "pre-commit" {
                script.push_str(&format!(
                    "{} hook pre-commit --owned-globs {} || exit 1\n",
                    sh_quote(&exe.to_string_lossy()),
                    sh_quote(&globs_file.to_string_lossy())
                ));
            }
            script.push_str(&format!(
                "if [ -x {h} ]; then exec {h} \"$@\"; fi\nexit 0\n",
                h = sh_quote(&chained.to_string_lossy())
            ));
            let path = hooks.join(&name);
            std::fs::write(&path, script).map_err(io)?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).map_err(io)?;
        }
        Ok(())
    }

    /// Phase 3 too: the agent's prompt (masked) and, for a retry, the
    /// context it is given as JSON, in `.git/orch/prompts/`; the folder
    /// its output is logged in.
    pub fn write_prompt(
        &self,
        prompt: &str,
        retry: Option<&crate::gate::context::RetryContext>,
    ) -> Result<(), StoreError> {
        let p = &self.paths;
        let io = |e| StoreError::io(format!("writing {}", p.prompt.display()), e);
        if let Some(parent) = p.prompt.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        std::fs::create_dir_all(&p.log_dir).map_err(io)?;
        std::fs::write(&p.prompt, crate::gate::masking::mask_text(prompt)).map_err(io)?;
        if let Some(r) = retry {
            let json = serde_json::to_vec_pretty(r).expect("contexts serialise");
            std::fs::write(&p.retry_context, json).map_err(io)?;
        }
        Ok(())
    }

    /// Phase 4, once the agent is gone: the attempt's result, recorded.
    /// The agent's own commits are imported from its worktree's git
    /// folder (read as data, see [`crate::store::quarantine`]), then
    /// whatever it left uncommitted is committed on top with trailers
    /// naming run, task and attempt ([`Self::result_commit`]). The
    /// `attempt_result` event (with `agent`, the agent's `agent_finished`
    /// when it is not recorded yet) and the branch's move to the result go
    /// in one operation; a branch a person moved meanwhile stays where
    /// they put it. When the git folder or the files were refused, the
    /// attempt is recorded failed instead and the failure returned.
    pub fn import_result(
        &self,
        store: &Store,
        agent_name: &str,
        agent: Option<Event>,
    ) -> Result<Result<ImportedResult, Failure>, RunError> {
        let (p, task, n, start) = (&self.paths, &self.task, self.n, self.start());
        let (commit, tree) = match self.result_commit(store, agent_name) {
            Ok(Ok(made)) => made,
            Ok(Err(refused)) => {
                let failure = match refused {
                    // Too much left in the worktree itself: a gate's kind
                    // of failure, about the work.
                    Refusal::FileTooLarge { .. } | Refusal::TooMuch(_) => Failure {
                        class: FailureClass::Gate,
                        reason: format!("the result was not taken: {refused}"),
                    },
                    _ => Failure {
                        class: FailureClass::Quarantine,
                        reason: format!(
                            "what the agent left in its worktree's git folder was refused: {refused}"
                        ),
                    },
                };
                let end = Event::attempt_finished(
                    &self.run,
                    task,
                    n,
                    Outcome::Failed,
                    Some(failure.clone()),
                );
                store.append(agent.into_iter().chain([end]).collect())?;
                return Ok(Err(failure));
            }
            Err(e) => {
                if let Some(agent) = agent {
                    store.append(vec![agent])?;
                }
                return Err(e.into());
            }
        };
        let net = store.diff_trees(store.commit_info(self.base)?.tree, tree)?;
        let steps = store.commit_steps(self.base, commit)?;
        let result = Event::AttemptResult {
            run_id: self.run.clone(),
            task: task.clone(),
            attempt: n,
            commit,
            tree,
            changed: net.len(),
            control_paths: control_paths(store, &net, &steps)?,
        };
        let events: Vec<Event> = agent.into_iter().chain([result]).collect();
        store.transact(|store| {
            let refs = match store.ref_target(&p.branch_ref)? {
                Some(at) if at == start && at != commit => vec![RefUpdate::set(
                    &p.branch_ref,
                    commit,
                    Expected::At(start),
                    &format!("orch: result of {task} attempt {n}"),
                )],
                _ => Vec::new(),
            };
            Ok::<_, RunError>((
                Operation {
                    events: events.clone(),
                    refs,
                },
                (),
            ))
        })?;
        Ok(Ok(ImportedResult {
            commit,
            tree,
            steps,
        }))
    }

    /// The result commit: the agent's own commits imported, then whatever
    /// it left uncommitted committed on top. When it left nothing
    /// uncommitted, its own last commit is the result; when it changed
    /// nothing, the result is the start. Either way the worktree's git
    /// folder is written anew at the result ([`Self::hand_over`]), so
    /// nothing the agent left there stays for a person (or a later git) to
    /// trip over. Returns (commit, tree), or what in the git folder was
    /// refused.
    fn result_commit(
        &self,
        store: &Store,
        agent: &str,
    ) -> Result<Result<(Oid, Oid), Refusal>, StoreError> {
        let (p, run, task, n, start, limits) = (
            &self.paths,
            &self.run,
            &self.task,
            self.n,
            self.start(),
            self.limits,
        );
        let checkout = p.checkout();
        let head = match store.import_quarantine(&p.worktree, p.branch(), start, limits) {
            Ok(imported) => imported.head,
            Err(ImportError::Refused(why)) => {
                self.hand_over(store)?;
                return Ok(Err(why));
            }
            Err(ImportError::Store(e)) => return Err(e),
        };
        // Aider's repo-map cache is not the agent's work. What `git add`
        // writes is unreachable until the result's branch names it: a
        // prune beside the run can take it first, so it is taken into the
        // journal that keeps git-orch's own objects, and written anew if
        // one is gone.
        let head_tree = store.commit_info(head)?.tree;
        let mut tries = 0;
        let tree = loop {
            let tree = match store.snapshot_tree(&checkout, &[".aider*"], limits) {
                Ok(tree) => tree,
                Err(ImportError::Refused(why)) => {
                    self.hand_over(store)?;
                    return Ok(Err(why));
                }
                Err(ImportError::Store(e)) => return Err(e),
            };
            if store.adopt_tree(Some(head_tree), tree)? {
                break tree;
            }
            tries += 1;
            if tries == 5 {
                return Err(StoreError::Corrupt(format!(
                    "the objects of {task} attempt {n}'s result kept vanishing while they were written (a `git prune` looping beside the run?)"
                )));
            }
            // Without the index's record of the files, git hashes them all
            // again and writes what is missing.
            store.index_from(&checkout, head)?;
        };
        // A nested repository is not work to land: its gitlink points at
        // commits this repository does not have, and git would run
        // commands in it for whoever looks at the result.
        let start_tree = store.commit_info(start)?.tree;
        let mut gitlinks: Vec<String> = store
            .diff_trees(start_tree, tree)?
            .into_iter()
            .filter(|c| c.submodule && c.new.is_some())
            .map(|c| c.path)
            .collect();
        for s in store.commit_steps(start, head)? {
            gitlinks.extend(
                store
                    .diff_trees(s.before, s.after)?
                    .into_iter()
                    .filter(|c| c.submodule && c.new.is_some())
                    .map(|c| c.path),
            );
        }
        if let Some(first) = gitlinks.first() {
            self.hand_over(store)?;
            return Ok(Err(Refusal::Gitlink(first.escape_debug().to_string())));
        }
        let commit = if store.commit_info(head)?.tree == tree {
            head
        } else {
            let message = format!(
                "orch: result of {task} attempt {n}\n\nOrch-Run: {run}\nOrch-Task: {task}\nOrch-Attempt: {n}\nOrch-Agent: {agent}\n"
            );
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs() as i64);
            store.write_commit_by(
                (
                    &format!("git-orch agent ({agent})"),
                    "agent@git-orch.invalid",
                    now,
                    0,
                ),
                &message,
                tree,
                &[head],
            )?
        };
        self.hand_over(store)?;
        Ok(Ok((commit, tree)))
    }

    /// Phase 4 instead, for an attempt that ends without its result being
    /// taken (stopped, its agent unavailable, its setup failed, git-orch
    /// failed inside it): the agent's own commits are imported when they
    /// can be, and the attempt's branch moves to them (unjudged: cleanup
    /// keeps such a branch, and fsck notes it, until a person looks), and
    /// the worktree is handed over like any other, so nothing the agent
    /// left in its git folder stays there. A worktree handed over already
    /// is left as it is.
    pub fn settle(&self, store: &Store) -> Result<(), StoreError> {
        let (p, start) = (&self.paths, self.start());
        let git = p.checkout().quarantine();
        if !std::fs::symlink_metadata(&git).is_ok_and(|m| m.is_dir()) {
            if std::fs::symlink_metadata(&p.worktree).is_ok()
                && store.worktree_record(&p.worktree).is_none()
            {
                self.hand_over(store)?;
            }
            return Ok(());
        }
        if let Ok(imported) = store.import_quarantine(&p.worktree, p.branch(), start, self.limits)
            && imported.head != start
        {
            let _ = store.apply(&[RefUpdate::set(
                &p.branch_ref,
                imported.head,
                Expected::At(start),
                "orch: the agent's commits of an attempt that ended without a result",
            )]);
        }
        self.hand_over(store)
    }

    /// Once the agent is gone and its work imported, the worktree becomes
    /// an ordinary linked worktree of the repository on the attempt's
    /// branch, for a person to look at or finish by hand: its git folder
    /// (whatever the agent left there) is replaced by git's own record of
    /// it in the repository, where the agent never could write. git-orch's
    /// index of the files is that record's index.
    fn hand_over(&self, store: &Store) -> Result<(), StoreError> {
        let p = &self.paths;
        store.adopt_worktree(&p.worktree, &p.branch_ref, &p.index)
    }
}

/// The paths of a recorded attempt of `task` in `run`, from its record.
pub fn attempt_paths(
    common_dir: &Path,
    run: &RunId,
    task: &TaskId,
    a: &crate::state::AttemptState,
) -> AttemptPaths {
    recorded_paths(
        common_dir,
        run,
        task,
        a.n,
        &a.branch,
        PathBuf::from(&a.worktree),
    )
}

/// The paths of attempt `n` of `task`, from its record (its branch
/// without `refs/heads/`, its worktree).
pub fn recorded_paths(
    common_dir: &Path,
    run: &RunId,
    task: &TaskId,
    n: u32,
    branch: &str,
    worktree: PathBuf,
) -> AttemptPaths {
    let orch = common_dir.join("orch");
    AttemptPaths {
        branch_ref: format!("refs/heads/{branch}"),
        worktree,
        index: checkout_index(common_dir, run, task, n),
        log_dir: orch
            .join("logs")
            .join(run.as_str())
            .join(task.as_str())
            .join(format!("attempt-{n}")),
        prompt: orch
            .join("prompts")
            .join(run.as_str())
            .join(format!("{task}-{n}.md")),
        retry_context: orch
            .join("prompts")
            .join(run.as_str())
            .join(format!("{task}-{n}.retry.json")),
    }
}

/// The scratch checkout attempt `n` of `task`'s gates run in:
/// `.git/orch/scratch/gate-<run>-<task>-<n>`.
pub fn gate_scratch(common_dir: &Path, run: &RunId, task: &TaskId, n: u32) -> PathBuf {
    scratch_dir(common_dir).join(format!("gate-{run}-{task}-{n}"))
}

/// A free block of [`PORT_BLOCK`] ports on 127.0.0.1: the candidate comes
/// from a hash of the worktree path (so an attempt keeps its block across
/// restarts when it is free), then the next blocks are probed.
pub fn port_block(worktree: &Path, base: u16, span: u16) -> Option<u16> {
    let blocks = (span / PORT_BLOCK).max(1) as u64;
    let hash = blake3::hash(worktree.to_string_lossy().as_bytes());
    let first = u64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 bytes")) % blocks;
    for i in 0..blocks.min(200) {
        let start = u32::from(base) + (((first + i) % blocks) * u64::from(PORT_BLOCK)) as u32;
        if start + u32::from(PORT_BLOCK) > u32::from(u16::MAX) {
            continue;
        }
        let start = start as u16;
        let free = (start..start + PORT_BLOCK).all(|p| TcpListener::bind(("127.0.0.1", p)).is_ok());
        if free {
            return Some(start);
        }
    }
    None
}

/// The hooks folder git uses in this repository: `core.hooksPath` (relative
/// to the main worktree, as git reads it) or `.git/hooks`.
pub fn original_hooks_dir(store: &Store) -> Result<PathBuf, StoreError> {
    Ok(match store.config_get("core.hooksPath")? {
        Some(p) => {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                store
                    .workdir()
                    .map(Path::to_owned)
                    .unwrap_or_else(|| store.common_dir().to_owned())
                    .join(p)
            }
        }
        None => store.common_dir().join("hooks"),
    })
}

/// Single-quotes a value for `sh` (the one helper lives in `process`).
pub use crate::process::shell_quote as sh_quote;

/// What an attempt's worktree holds that the repository does not.
#[derive(Debug, Default)]
pub struct Unrecorded {
    /// Why removing it would lose something, if it would.
    pub why: Option<String>,
    /// The commit its HEAD is on, when the repository has a record of it
    /// (a person may have committed there by hand).
    pub head: Option<Oid>,
}

/// What the attempt's worktree holds that its records do not: files
/// changed or added since they were last recorded, and, for a worktree
/// whose agent never handed it over (an interrupted attempt), commits in
/// its own git folder beyond the `known` ones (its branch tip, result and
/// base), which were never imported. Asked of git with the repository's
/// own record of the worktree, or git-orch's index of it; whatever the
/// worktree's `.git` says is never read as configuration.
pub fn unrecorded_work(
    store: &Store,
    p: &AttemptPaths,
    known: &[Oid],
) -> Result<Unrecorded, StoreError> {
    let changed = |changes: Vec<String>| {
        changes.first().map(|path| {
            let more = match changes.len() {
                1 => String::new(),
                n => format!(" and {} more", n - 1),
            };
            format!("it has uncommitted changes ({path:?}{more})")
        })
    };
    if let Some((changes, head)) = store.linked_worktree_state(&p.worktree)? {
        return Ok(Unrecorded {
            why: changed(changes),
            head,
        });
    }
    let checkout = p.checkout();
    if !p.index.is_file() {
        // Lost: compare by content.
        let Some(commit) = known.first() else {
            return Ok(Unrecorded {
                why: Some("git-orch has no record of its files".into()),
                head: None,
            });
        };
        store.index_from(&checkout, *commit)?;
    }
    let changes = store.checkout_changes(&checkout)?;
    if let Some(why) = changed(changes.into_iter().map(|(p, _)| p).collect()) {
        return Ok(Unrecorded {
            why: Some(why),
            head: None,
        });
    }
    let why = if std::fs::symlink_metadata(checkout.quarantine()).is_ok_and(|m| m.is_dir()) {
        match store.quarantine_tip(&p.worktree, p.branch()) {
            Ok(tip) if known.contains(&tip) => None,
            Ok(tip) => Some(format!(
                "its own git folder has commits git-orch did not import (at {})",
                &tip.to_string()[..12]
            )),
            Err(why) => Some(format!("its own git folder was changed: {why}")),
        }
    } else {
        None
    };
    Ok(Unrecorded { why, head: None })
}

/// The [control paths](crate::plan::control) a result changes: in its net
/// change (`net`) or in any of its commits (`steps`), since with the
/// `rebase` and `merge` strategies every commit lands.
pub fn control_paths(
    store: &Store,
    net: &[crate::store::objects::PathChange],
    steps: &[crate::store::CommitStep],
) -> Result<Vec<String>, StoreError> {
    let mut paths: Vec<String> = net.iter().map(|c| c.path.clone()).collect();
    if steps.len() > 1 {
        for s in steps {
            paths.extend(
                store
                    .diff_trees(s.before, s.after)?
                    .into_iter()
                    .map(|c| c.path),
            );
        }
    }
    Ok(crate::plan::control::among(
        paths.iter().map(String::as_str),
    ))
}

pub use crate::store::scratch::{
    FoundScratch, KeptScratch, ScratchGuard, ScratchUse, idle_scratch, prepare_scratch,
    remove_scratch, scratch_dir,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_blocks_are_free_and_stable() {
        let a = port_block(Path::new("/tmp/x/a-1"), 30_000, 2_000).expect("a block");
        assert!((30_000..32_000).contains(&a));
        assert_eq!(a % PORT_BLOCK, 0);
        let held = TcpListener::bind(("127.0.0.1", a)).expect("bind");
        let b = port_block(Path::new("/tmp/x/a-1"), 30_000, 2_000).expect("another block");
        assert_ne!(a, b, "a busy block is skipped");
        drop(held);
    }

    #[test]
    fn quoting_survives_hostile_paths() {
        assert_eq!(sh_quote("a'b"), "'a'\\''b'");
    }
}
