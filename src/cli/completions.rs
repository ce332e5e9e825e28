//! `git orch completions <shell>`: shell completion that knows the
//! repository: subcommands and flags from the clap definitions, and plan
//! ids, run ids, task ids and agent names read from the repository at the
//! moment TAB is pressed.
//!
//! Completion is dynamic (clap_complete's engine): the script a shell
//! loads only hands the words typed so far back to `git-orch` with
//! `GIT_ORCH_COMPLETE=<shell>` set, and [`complete_if_asked`] answers
//! before any argument parsing. Each shell's git completion hands `git
//! orch …` over too: bash's git-completion.bash calls `_git_orch` (added
//! here) and loads a file named `git-orch` on demand; zsh's `_git` calls
//! `_git-orch` (the function this script defines when saved as
//! `_git-orch`); for fish a small function added here forwards `git orch …`
//! (fish's own git completion does so only in newer versions).
//!
//! Candidates are read, never recorded: at most the state index's cache
//! under `.git/orch/state/` is brought up to date, and a repository that
//! cannot be opened simply offers no ids.

use std::ffi::OsStr;

use clap::{Args, ValueEnum};
use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use clap_complete::env::EnvCompleter;

use super::exit;
use super::globals::{CommandResult, GlobalArgs};
use super::output;

/// The variable that asks `git-orch` for completions instead of running.
pub const COMPLETE_VAR: &str = "GIT_ORCH_COMPLETE";

/// Print a shell completion script for bash, zsh or fish on stdout.
///
/// It completes commands, flags, plan ids, run ids, task ids and agent
/// names (read from the repository when you press TAB), for both `git
/// orch …` and `git-orch …`. bash: save it as
/// ~/.local/share/bash-completion/completions/git-orch (loaded on demand
/// for both), or source it from ~/.bashrc after git's own completion. zsh:
/// save it as `_git-orch` in a directory of $fpath, before compinit runs.
/// fish: save it as ~/.config/fish/conf.d/git-orch.fish.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Shells with a completion script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// Answers a shell's completion request and exits, when this process was
/// started for one (`GIT_ORCH_COMPLETE` set); otherwise does nothing.
/// `tree` builds the whole command tree (the dispatcher owns it).
pub fn complete_if_asked(tree: fn() -> clap::Command) {
    if std::env::var_os(COMPLETE_VAR).is_none() {
        return;
    }
    clap_complete::CompleteEnv::with_factory(move || completion_command(tree()))
        .var(COMPLETE_VAR)
        .bin("git-orch")
        .completer("git-orch")
        .complete();
}

/// The command tree completion walks: the visible commands only, named
/// `git-orch`, from the `full` tree.
fn completion_command(full: clap::Command) -> clap::Command {
    clap::Command::default()
        .name("git-orch")
        .about(full.get_about().cloned().unwrap_or_default())
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned())
}

/// The bridge from git's bash completion: git-completion.bash calls
/// `_git_<command>` with `words`, `cword`, `cur` and `__git_cmd_idx` (the
/// index of `orch`) set, and completes with `-o nospace`, adding spaces
/// itself. This asks `git-orch` about the words from `orch` on.
const BASH_GIT_BRIDGE: &str = r#"
# `git orch <TAB>`: git-completion.bash calls _git_orch.
_git_orch ()
{
	local idx=${__git_cmd_idx:-1}
	local -a orch_words=("git-orch" "${words[@]:idx+1}")
	local orch_cword=$((cword - idx))
	local IFS=$'\013'
	COMPREPLY=( $( \
		_CLAP_IFS="$IFS" \
		_CLAP_COMPLETE_INDEX="$orch_cword" \
		_CLAP_COMPLETE_COMP_TYPE=9 \
		_CLAP_COMPLETE_SPACE=true \
		GIT_ORCH_COMPLETE=bash \
		git-orch -- "${orch_words[@]}" 2>/dev/null \
	) )
	local i
	for i in "${!COMPREPLY[@]}"; do
		if [[ ${COMPREPLY[i]} == */ || ${COMPREPLY[i]} == *= ]]; then
			:
		else
			COMPREPLY[i]+=" "
		fi
	done
}
"#;

/// The zsh script, saved as `_git-orch` in `$fpath`: one function that
/// completes `git-orch …` and, called by zsh's `_git` for `git orch …`
/// (where `words[1]` is `orch`), the same words.
const ZSH_SCRIPT: &str = r#"#compdef git-orch

# Completes `git-orch ...` and, called by zsh's git completion, `git orch ...`:
# git-orch itself answers (GIT_ORCH_COMPLETE=zsh), reading plan, run and task
# ids and agent names from the repository.
_git-orch() {
    local -a orch_words
    orch_words=("git-orch" "${(@)words[2,-1]}")
    local index=$(( CURRENT - 1 ))
    local -a completions
    completions=("${(@f)$( \
        _CLAP_IFS=$'\n' \
        _CLAP_COMPLETE_INDEX="$index" \
        GIT_ORCH_COMPLETE=zsh \
        git-orch -- "${orch_words[@]}" 2>/dev/null \
    )}")
    [[ -n $completions ]] || return 1
    local -a dirs other
    local completion value
    for completion in $completions; do
        value="${completion%%:*}"
        if [[ "$value" == */ ]]; then
            dirs+=("${value%/}")
        else
            other+=("$completion")
        fi
    done
    [[ -n $dirs ]] && _describe -V 'folders' dirs -S '/' -r '/'
    [[ -n $other ]] && _describe -V 'values' other
    return 0
}

if [[ $zsh_eval_context[-1] == loadautofunc ]]; then
    # Autoloaded from $fpath: complete now.
    _git-orch "$@"
else
    # Sourced: register for git-orch (zsh's _git finds _git-orch by name).
    compdef _git-orch git-orch
fi
"#;

/// The bridge for fish: its git completion hands `git orch …` to the
/// `git-orch` completion only in newer versions (3.6 looks for a command
/// `git-git-orch`), so this does it whenever the file is loaded, which
/// `conf.d/` does at startup.
const FISH_GIT_BRIDGE: &str = r#"
# `git orch <TAB>`: the words after `orch`, if `orch` is git's command.
function __git_orch_words
    set -l words (commandline -opc)
    set -e words[1]
    while set -q words[1]
        switch $words[1]
            case -C -c --git-dir --work-tree --namespace
                set -e words[1..2]
            case '-*'
                set -e words[1]
            case orch
                set -e words[1]
                printf '%s\n' $words
                return 0
            case '*'
                return 1
        end
    end
    return 1
end
complete -c git -f -k -n '__git_orch_words >/dev/null' -a '(GIT_ORCH_COMPLETE=fish git-orch -- git-orch (__git_orch_words) (commandline -ct))'
"#;

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    let mut buf = Vec::new();
    match shell {
        Shell::Bash => {
            clap_complete::env::Bash
                .write_registration(COMPLETE_VAR, "git-orch", "git-orch", "git-orch", &mut buf)
                .expect("writing to memory");
        }
        Shell::Zsh => buf.extend_from_slice(ZSH_SCRIPT.as_bytes()),
        Shell::Fish => {
            clap_complete::env::Fish
                .write_registration(COMPLETE_VAR, "git-orch", "git-orch", "git-orch", &mut buf)
                .expect("writing to memory");
        }
    }
    let mut text = String::from_utf8(buf).expect("completion scripts are UTF-8");
    match shell {
        Shell::Bash => text.push_str(BASH_GIT_BRIDGE),
        Shell::Fish => text.push_str(FISH_GIT_BRIDGE),
        Shell::Zsh => {}
    }
    text
}

pub fn run(_cli: &GlobalArgs, args: &CompletionsArgs) -> CommandResult {
    output::Out::new().line(script(args.shell).trim_end());
    Ok(exit::OK)
}

// ---------------------------------------------------------------------------
// Candidates read from the repository.

/// What the line being completed says so far: the repository (`-C DIR`
/// honoured) and the words typed.
struct Line {
    dir: std::path::PathBuf,
    words: Vec<String>,
}

impl Line {
    /// The line of this completion request: the words after `--`.
    fn current() -> Line {
        let words: Vec<String> = std::env::args().skip_while(|a| a != "--").skip(1).collect();
        let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
        let dir = words
            .windows(2)
            .find(|w| w[0] == "-C")
            .map(|w| cwd.join(&w[1]))
            .unwrap_or(cwd);
        Line { dir, words }
    }

    fn store(&self) -> Option<crate::store::Store> {
        crate::store::Store::discover(&self.dir).ok()
    }

    /// The value after `flag` (`--run R` or `--run=R`), if typed.
    fn flag(&self, flag: &str) -> Option<&str> {
        let eq = format!("{flag}=");
        self.words.iter().enumerate().find_map(|(i, w)| {
            if w == flag {
                self.words.get(i + 1).map(String::as_str)
            } else {
                w.strip_prefix(&eq)
            }
        })
    }
}

fn matching(current: &OsStr, items: Vec<(String, String)>) -> Vec<CompletionCandidate> {
    let current = current.to_string_lossy();
    let mut seen = std::collections::BTreeSet::new();
    items
        .into_iter()
        .filter(|(v, _)| v.starts_with(current.as_ref()) && seen.insert(v.clone()))
        .map(|(v, help)| CompletionCandidate::new(v).help(Some(help.into())))
        .collect()
}

/// Stored plans: (id, instruction's first line).
fn plan_items(store: &crate::store::Store) -> Vec<(String, String)> {
    let Ok(ids) = crate::plan::revisions::ids(store) else {
        return Vec::new();
    };
    ids.into_iter()
        .map(|id| {
            let about = crate::plan::revisions::latest(store, &id)
                .ok()
                .flatten()
                .map(|r| {
                    let first = r.plan.instruction.lines().next().unwrap_or_default();
                    format!("plan, {} task(s): {}", r.plan.subtasks.len(), first)
                })
                .unwrap_or_else(|| "plan".into());
            (id.to_string(), about)
        })
        .collect()
}

/// Runs worth offering, newest first: the unfinished ones, then the
/// newest finished run of each plan (what `status`, `merge` and `--run`
/// are asked about), read from the state index without saving it.
fn run_items(store: &crate::store::Store) -> Vec<(String, String)> {
    let Ok(mut index) = crate::state::StateIndex::open(store) else {
        return Vec::new();
    };
    let mut briefs: Vec<crate::state::RunBrief> = index.open_runs().cloned().collect();
    if let Some(b) = index.newest_run() {
        briefs.push(b.clone());
    }
    if let Ok(ids) = crate::plan::revisions::ids(store) {
        for id in ids {
            if let Ok(Some(b)) = index.last_finished_of_plan(&id) {
                briefs.push(b);
            }
        }
    }
    briefs.sort_by_key(|b| std::cmp::Reverse(b.started_ms));
    briefs
        .into_iter()
        .map(|b| {
            let what = if b.finished { "finished" } else { "open" };
            (
                b.id.to_string(),
                format!("run of plan {} on {} ({what})", b.plan_id, b.target),
            )
        })
        .collect()
}

/// Task ids: of the plan named on the line (a plan id word, or the plan of
/// `--run R`), else of every stored plan.
fn task_items(line: &Line, store: &crate::store::Store) -> Vec<(String, String)> {
    let Ok(ids) = crate::plan::revisions::ids(store) else {
        return Vec::new();
    };
    let mut plans: Vec<crate::ids::PlanId> = ids
        .iter()
        .filter(|id| line.words.iter().any(|w| w == id.as_str()))
        .cloned()
        .collect();
    if let Some(run) = line
        .flag("--run")
        .and_then(|r| crate::ids::RunId::new(r).ok())
        && let Ok(mut index) = crate::state::StateIndex::open(store)
        && let Ok(Some(b)) = index.brief(&run)
    {
        plans = vec![b.plan_id];
    }
    if plans.is_empty() {
        plans = ids;
    }
    let mut out = Vec::new();
    for id in plans {
        if let Ok(Some(rev)) = crate::plan::revisions::latest(store, &id) {
            for s in &rev.plan.subtasks {
                out.push((s.id.to_string(), format!("task of plan {id}: {}", s.title)));
            }
        }
    }
    out
}

/// Agent names: the built-in ones and the `[agent "NAME"]` sections of the
/// project's config (at HEAD) and the repository's.
fn agent_items(store: Option<&crate::store::Store>) -> Vec<(String, String)> {
    use crate::agent::AgentKind;
    let mut out: Vec<(String, String)> = AgentKind::ALL
        .iter()
        .filter(|k| **k != AgentKind::Command && **k != AgentKind::Fake)
        .map(|k| (k.as_str().to_owned(), format!("built-in {k} agent")))
        .collect();
    if let Some(store) = store {
        let head = store.resolve_commit("HEAD").ok().flatten();
        if let Ok(values) = store.project_config(head) {
            for s in values.subsections("agent") {
                if let Some(name) = &s.subsection {
                    let kind = s.get("kind").unwrap_or(name.as_str());
                    out.push((name.clone(), format!("configured agent ({kind})")));
                }
            }
        }
    }
    out.push(("fake".into(), "the scripted test agent".into()));
    out
}

fn plan_ids(current: &OsStr) -> Vec<CompletionCandidate> {
    let line = Line::current();
    line.store()
        .map(|s| matching(current, plan_items(&s)))
        .unwrap_or_default()
}

fn run_ids(current: &OsStr) -> Vec<CompletionCandidate> {
    let line = Line::current();
    line.store()
        .map(|s| matching(current, run_items(&s)))
        .unwrap_or_default()
}

fn task_ids(current: &OsStr) -> Vec<CompletionCandidate> {
    let line = Line::current();
    line.store()
        .map(|s| matching(current, task_items(&line, &s)))
        .unwrap_or_default()
}

fn agent_names(current: &OsStr) -> Vec<CompletionCandidate> {
    let line = Line::current();
    matching(current, agent_items(line.store().as_ref()))
}

/// Completes a plan id.
pub fn plans() -> ArgValueCompleter {
    ArgValueCompleter::new(plan_ids)
}

/// Completes a run id.
pub fn runs() -> ArgValueCompleter {
    ArgValueCompleter::new(run_ids)
}

/// Completes a task id.
pub fn tasks() -> ArgValueCompleter {
    ArgValueCompleter::new(task_ids)
}

/// Completes an agent name.
pub fn agents() -> ArgValueCompleter {
    ArgValueCompleter::new(agent_names)
}

fn branch_names(current: &OsStr) -> Vec<CompletionCandidate> {
    let line = Line::current();
    let Some(store) = line.store() else {
        return Vec::new();
    };
    let items = store
        .refs_with_prefix("refs/heads/")
        .map(|refs| {
            refs.into_iter()
                .filter_map(|(name, _)| {
                    name.strip_prefix("refs/heads/")
                        .filter(|b| !b.starts_with("orch/"))
                        .map(|b| (b.to_owned(), "branch".to_owned()))
                })
                .collect()
        })
        .unwrap_or_default();
    matching(current, items)
}

/// Completes a local branch name (attempt branches `orch/…` left out).
pub fn branches() -> ArgValueCompleter {
    ArgValueCompleter::new(branch_names)
}

fn plan_ids_or_files(current: &OsStr) -> Vec<CompletionCandidate> {
    use clap_complete::engine::ValueCompleter;
    let mut out = plan_ids(current);
    out.extend(clap_complete::engine::PathCompleter::any().complete(current));
    out
}

/// Completes a plan id or a file.
pub fn plans_or_files() -> ArgValueCompleter {
    ArgValueCompleter::new(plan_ids_or_files)
}
