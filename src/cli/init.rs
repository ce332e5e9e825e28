//! `git orch init`: make this clone ready to write state and, optionally,
//! to share it through a remote.

use clap::Args;

use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::event::Event;
use crate::ids::WriterId;
use crate::store::refs::{ORCH_PREFIX, REMOTES_PREFIX};

/// Set up git-orch in this repository.
///
/// Creates this clone's writer id (orch.writerId), turns on reflogs for
/// refs/orch/* (core.logAllRefUpdates=always) and, with --remote, adds the
/// refspecs that make `git fetch`/`git push` carry the orch state:
/// fetch +refs/orch/*:refs/orch-remotes/<R>/*, push refs/orch/* and HEAD.
/// Running it again changes nothing that is already set.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Share state through this remote (must already exist: `git remote add`).
    #[arg(long, value_name = "REMOTE")]
    pub remote: Option<String>,
    /// Replace this clone's writer id with a fresh one (after copying a .git).
    #[arg(long)]
    pub new_writer: bool,
}

pub fn run(cli: &GlobalArgs, args: &InitArgs) -> CommandResult {
    let mut store = open_store(&cli.directory)?;
    let mut changed = Vec::new();
    if let Some(remote) = &args.remote {
        store.check_remote(remote)?;
    }
    if args.new_writer {
        let id = WriterId::random();
        store.config_set("orch.writerId", id.as_str())?;
        // The store answers from the configuration it was opened with.
        store.reload()?;
        changed.push(format!("new writer id {id}"));
    }
    let had_writer = store.writer_id()?.is_some();
    let writer = store.writer()?;
    if !had_writer {
        changed.push(format!("writer id {writer}"));
    }
    if store.config_set("core.logAllRefUpdates", "always")? {
        changed.push("core.logAllRefUpdates=always".into());
    }
    if let Some(remote) = &args.remote {
        let fetch = format!("+{ORCH_PREFIX}*:{REMOTES_PREFIX}{remote}/*");
        if store.config_add(&format!("remote.{remote}.fetch"), &fetch)? {
            changed.push(format!("fetch refspec {fetch}"));
        }
        // Once remote.<R>.push is set, a plain `git push` pushes only what it
        // lists; HEAD keeps pushing the current branch as before.
        for push in [format!("{ORCH_PREFIX}*:{ORCH_PREFIX}*"), "HEAD".to_owned()] {
            if store.config_add(&format!("remote.{remote}.push"), &push)? {
                changed.push(format!("push refspec {push}"));
            }
        }
        if store.config_set("orch.remote", remote)? {
            changed.push(format!("orch.remote={remote}"));
        }
    }
    if changed.is_empty() {
        output::status(&format!(
            "Already initialised (writer {writer}); nothing changed."
        ));
        suggest_worktree(&store);
        next_steps(
            args.remote
                .as_deref()
                .or(store.config_get("orch.remote")?.as_deref()),
        );
        return Ok(exit::OK);
    }
    store.append(vec![Event::Initialized {
        remote: args.remote.clone(),
    }])?;
    output::status(&format!("Initialised git-orch (writer {writer}):"));
    for c in changed {
        output::status(&format!("  {c}"));
    }
    suggest_worktree(&store);
    next_steps(
        args.remote
            .as_deref()
            .or(store.config_get("orch.remote")?.as_deref()),
    );
    Ok(exit::OK)
}

/// Warm worktrees (issue 28): the `[worktree]` section this project's
/// files suggest, when its configuration has none.
fn suggest_worktree(store: &crate::store::Store) {
    let Some(root) = store.workdir() else { return };
    let configured = store
        .resolve_commit("HEAD")
        .ok()
        .and_then(|head| store.project_config(head).ok())
        .is_some_and(|v| v.section("worktree", None).is_some());
    if configured {
        return;
    }
    if let Some(text) = crate::config::worktree::suggested(root) {
        output::status(
            "Suggested for .orch/config, so attempts start with warm caches and your local files (docs/running.md, Warm worktrees):",
        );
        for l in text.lines() {
            output::status(&format!("  {}", l.replace('\t', "    ")));
        }
    }
}

/// What to do next, as commands to type.
fn next_steps(remote: Option<&str>) {
    let mut lines = vec![
        "Next:".to_owned(),
        "  git orch demo                         see the whole loop on a throwaway repository"
            .into(),
        "  git orch plan new \"<what to do>\"     write a plan (the brief for a lead agent)".into(),
        "  git orch plan add plan.json           store it, then `git orch approve <plan>`".into(),
        "  git orch run <plan>                   run it; `git orch status` shows where it stands"
            .into(),
    ];
    match remote {
        Some(r) => {
            lines.push(format!(
                "  git orch sync                         share state through {r}"
            ));
            lines.push(
                "  git orch worker                       work shared runs from this machine too"
                    .into(),
            );
        }
        None => lines
            .push("  git orch init --remote origin         share state with other clones".into()),
    }
    for l in lines {
        output::status(&l);
    }
}
