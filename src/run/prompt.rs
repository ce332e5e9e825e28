//! The prompt an agent gets for one attempt: the task, the files it owns
//! and the rule to stay inside them, the deliverable, how it is checked,
//! and, on a retry, what went wrong last time.

use crate::gate::GateDef;
use crate::gate::context::RetryContext;
use crate::plan::{Plan, Subtask};

/// Renders the prompt for attempt `n` of `task`.
pub fn render(
    plan: &Plan,
    task: &Subtask,
    run: &str,
    n: u32,
    gates: &[GateDef],
    retry: Option<&RetryContext>,
) -> String {
    let globs: String = task
        .owned_globs
        .iter()
        .map(|g| format!("- `{g}`\n"))
        .collect();
    let gate_list: Vec<String> = gates
        .iter()
        .filter(|g| g.mode != crate::event::GateMode::Skip)
        .map(|g| match g.kind.command() {
            Some(c) => format!("{} (`{c}`)", g.name),
            None => g.name.clone(),
        })
        .collect();
    let mut s = format!(
        "# Task {id}: {title}\n\n\
         You are one of several coding agents working in parallel on one repository, each in a git worktree of \
         its own. The current directory is yours.\n\n\
         ## Deliverable\n\n{deliverable}\n\n\
         ## Files you own\n\n\
         You may create, change or delete only files matching these globs (relative to the repository root; \
         `*` does not cross `/`, `**` spans directories):\n\n{globs}\n\
         Do not touch any other file: other agents own them, and a change outside these globs fails the \
         `scope` gate and the commit hook.\n\n\
         ## How your result is checked\n\n\
         `{verification}` must succeed. The gates: {gates}.\n\
         Do not add secrets (keys, tokens, passwords) or placeholders (TODO, unimplemented stubs).\n\n\
         ## Context\n\n\
         The whole plan's instruction: {instruction}\n\
         Run {run}, attempt {n}. Commit your work, or leave it in the worktree: git-orch commits what you \
         leave when you exit.\n",
        id = task.id,
        title = task.title,
        deliverable = task.deliverable,
        verification = task.verification,
        gates = gate_list.join(", "),
        instruction = plan.instruction,
    );
    if let Some(r) = retry {
        s.push('\n');
        s.push_str(&r.render());
        s.push_str(
            "\nThe same information is in the JSON file named by ORCH_RETRY_CONTEXT_FILE.\n",
        );
    }
    s
}
