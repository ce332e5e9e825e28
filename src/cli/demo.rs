//! `git orch demo`: renders the demo's steps for a newcomer, and the hidden
//! `git orch demo-agent`, the scripted agent the demo's runs start.
//!
//! What happens is decided in `crate::demo`; this file only says it in
//! words: a numbered heading and a sentence or two per step, then each
//! command as `$ …` with its output indented below it. All of it goes to
//! stdout (it is the demo's output, not progress about something else);
//! errors go to stderr as for every command.

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs};
use super::output;
use crate::demo::{self, AgentChoice, Event, Stage};

/// Watch the whole loop on a throwaway repository, offline.
///
/// Makes a small shell project, plans five subtasks (one depends on
/// another, one owns a pinch point and so runs alone), checks and approves
/// the plan, runs it with a scripted agent that makes two mistakes (a bug
/// its test catches, an edit outside its files that the scope gate
/// catches) and fixes them from the retry context, lands everything
/// through the merge queue, and shows status, the journal and the notes.
/// Needs only git and sh; the folder is removed at the end unless --keep.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Keep the demo in DIR (which must be new or empty) instead of a
    /// temp folder removed at the end.
    #[arg(long, value_name = "DIR")]
    pub keep: Option<PathBuf>,
    /// Have a real agent do the work instead of the scripted one: claude,
    /// codex, gemini, aider, or an agent configured in the .orch/config of
    /// the project you are in. Same plan; it may take minutes and cost
    /// money.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
}

/// The demo's scripted agent, started by `git orch run` inside a demo
/// project (it reads ORCH_TASK, ORCH_ATTEMPT and ORCH_RETRY_CONTEXT_FILE).
#[derive(Debug, Args)]
pub struct DemoAgentArgs {}

/// Headings and what each step shows, in a sentence or two.
fn stage_text(stage: Stage, agent: &AgentChoice) -> (&'static str, Vec<String>) {
    let lines = |l: &[&str]| l.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    match stage {
        Stage::Project => (
            "A project",
            lines(&[
                "A tiny shell \"text toolkit\" with a test suite, committed on main; its",
                ".orch/config names the gates every result must pass and the agent to use.",
            ]),
        ),
        Stage::Plan => (
            "A plan",
            lines(&[
                "Five subtasks, each the only writer of its files, each with a command that",
                "proves it done. `plan check` proves them safe to run in parallel: shout waits",
                "for upper, and ci owns CI config (a pinch point), so it runs alone.",
            ]),
        ),
        Stage::Approve => (
            "An approval",
            lines(&[
                "The plan is stored in git and approved; the approval is bound to the plan's",
                "content hash, so any later change voids it and `run` refuses.",
            ]),
        ),
        Stage::Run => {
            let mut l = lines(&[
                "Each attempt gets its own worktree and branch. Gates check its result (scope,",
                "the test suite, the subtask's verification); a failure becomes the retry",
                "context of a fresh attempt. Passing results land on main one by one through",
                "the merge queue, which runs the suite on each candidate first.",
            ]);
            match agent {
                AgentChoice::Scripted => l.extend(lines(&[
                    "The demo agent makes two planned mistakes: a bug in reverse (its test catches",
                    "it) and an edit to README.md in wordcount (the scope gate catches it). Each",
                    "retry fixes only what its retry context names.",
                ])),
                AgentChoice::Real { name, .. } => l.push(format!(
                    "Agent {name} does the work, unscripted; this may take minutes and cost money."
                )),
            }
            ("A run", l)
        }
        Stage::Status => (
            "Status",
            lines(&[
                "Where every task stands, folded from the event log in git (refs/orch/log/*):",
                "no database, no daemon.",
            ]),
        ),
        Stage::Journal => {
            let mut l = lines(&[
                "Every step above is an event in that log, in one global order; status, a",
                "resumed run and other clones all read the same events. Here are reverse's",
                "(plain `git orch log` lists them all).",
            ]);
            if *agent == AgentChoice::Scripted {
                l.push(
                    "Then what reverse's second attempt made of the retry context it was given."
                        .into(),
                );
            }
            ("The journal", l)
        }
        Stage::Notes => (
            "Notes on main",
            lines(&[
                "Each landed commit carries a note (refs/notes/orch) naming the attempt it came",
                "from and the approved plan revision.",
            ]),
        ),
        Stage::Result => (
            "The result",
            lines(&["main has all five pieces, and its suite passes."]),
        ),
    }
}

/// What the rendering needs to remember between events.
#[derive(Default)]
struct View {
    bold: bool,
    agent: Option<AgentChoice>,
    /// The last thing shown was a command without output yet.
    after_command: bool,
}

fn render(out: &mut output::Out, view: &mut View, event: Event<'_>) {
    let bold = view.bold;
    let agent = &mut view.agent;
    let after_command = std::mem::replace(&mut view.after_command, false);
    let (b, r) = if bold {
        ("\x1b[1m", "\x1b[0m")
    } else {
        ("", "")
    };
    match event {
        Event::Started {
            dir,
            project,
            kept,
            agent: chosen,
        } => {
            *agent = Some(chosen.clone());
            out.raw(&format!(
                "{b}git orch demo{r}: the whole loop on a throwaway repository, offline."
            ));
            out.line(&format!(
                "Working in {} ({}).",
                dir.display(),
                if kept {
                    "kept at the end"
                } else {
                    "removed at the end; --keep DIR keeps it"
                }
            ));
            out.line(&format!(
                "Every command below runs in {}, as you would type it.",
                project.display()
            ));
        }
        Event::Stage(stage) => {
            let chosen = agent.clone().unwrap_or(AgentChoice::Scripted);
            let (title, text) = stage_text(stage, &chosen);
            out.line("");
            out.raw(&format!(
                "{b}{}. {}{r}",
                stage.number(),
                output::clean(title)
            ));
            for l in text {
                out.line(&format!("   {l}"));
            }
        }
        Event::Files(files) => {
            out.line(&format!("   Files: {}", files.join(", ")));
        }
        Event::Plan(plan) => {
            out.line("   ../plan.json:");
            let width = plan
                .subtasks
                .iter()
                .map(|s| s.id.as_str().len())
                .max()
                .unwrap_or(0);
            for s in &plan.subtasks {
                let after = if s.depends_on.is_empty() {
                    String::new()
                } else {
                    let deps: Vec<&str> = s.depends_on.iter().map(|d| d.as_str()).collect();
                    format!(", after {}", deps.join(", "))
                };
                out.line(&format!(
                    "     {:<width$}  owns {}; done when `{}` passes{after}",
                    s.id.as_str(),
                    s.owned_globs.join(", "),
                    s.verification,
                ));
            }
        }
        Event::Command(line) => {
            // Commands that print nothing follow each other without a gap.
            if !after_command {
                out.line("");
            }
            out.raw(&format!("   {b}${r} {}", output::clean(line)));
            view.after_command = true;
        }
        Event::Line(line) => {
            if line.trim().is_empty() {
                out.line("");
            } else {
                out.line(&format!("     {line}"));
            }
            out.flush();
        }
    }
}

pub fn run(_cli: &GlobalArgs, args: &DemoArgs) -> CommandResult {
    let exe = std::env::current_exe()
        .map_err(|e| CommandError::error(format!("cannot find this program's own path: {e}")))?;
    let cwd = std::env::current_dir()
        .map_err(|e| CommandError::error(format!("cannot read the current folder: {e}")))?;
    let opts = demo::Options {
        keep: args.keep.clone(),
        agent: args.agent.clone(),
        exe,
        cwd,
    };
    let mut view = View {
        bold: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        ..View::default()
    };
    let mut out = output::Out::new();
    let finished = demo::run(&opts, &mut |e| render(&mut out, &mut view, e))?;
    out.line("");
    out.line(&format!(
        "Done in {:.1} s: five subtasks planned, approved, run, gated, retried where they failed, and landed.",
        finished.elapsed.as_secs_f64()
    ));
    if finished.kept {
        out.line(&format!(
            "The demo is kept: cd {} and try `git orch log --task reverse`, `git orch plan show {}`",
            finished.project.display(),
            demo::project::PLAN_ID
        ));
        out.line("or `git log --notes=orch --all --oneline`.");
    } else {
        out.line("The demo's folder is gone; `git orch demo --keep DIR` keeps one to look around.");
    }
    out.line(
        "For your own project: `git orch plan new \"<what to do>\"` writes the brief for a plan.",
    );
    Ok(exit::OK)
}

/// `git orch demo-agent`: does one attempt's scripted work in the current
/// folder (the attempt's worktree).
pub fn agent(_cli: &GlobalArgs, _args: &DemoAgentArgs) -> CommandResult {
    let workdir = std::env::current_dir()
        .map_err(|e| CommandError::error(format!("cannot read the current folder: {e}")))?;
    let task = std::env::var("ORCH_TASK").ok();
    let attempt = std::env::var("ORCH_ATTEMPT")
        .ok()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1);
    let retry = std::env::var_os("ORCH_RETRY_CONTEXT_FILE").map(PathBuf::from);
    let said = demo::agent::act(&workdir, task.as_deref(), attempt, retry.as_deref())?;
    let mut out = output::Out::new();
    for l in said {
        out.line(&l);
    }
    Ok(exit::OK)
}
