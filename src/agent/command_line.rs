//! What the adapters build an agent's command line from and into: the
//! prompt and where the attempt runs, the permissions it runs with, and
//! the [`Invocation`] the runner starts.

use std::path::Path;

use super::spec::AgentSpec;

/// What to run for one attempt. The runner starts `program` with `args` in
/// the attempt's worktree, in a process group of its own, adding `env` on
/// top of the `ORCH_*` variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    /// The program, looked up on PATH unless it contains a `/`.
    pub program: String,
    /// Its arguments, each passed as one argv entry (no shell in between).
    pub args: Vec<String>,
    /// Extra environment on top of the `ORCH_*` variables the runner sets.
    pub env: Vec<(String, String)>,
    /// Bytes to write to the agent's stdin, then close it. `None` means
    /// stdin must be `/dev/null`: Codex, Claude and Gemini all read a piped
    /// stdin as extra prompt, and would wait forever on an open one.
    pub stdin: Option<Vec<u8>>,
    /// Folders outside the worktree the CLI writes to (Aider's history
    /// files): the runner creates them, and the sandbox lets the agent
    /// write them.
    pub writable: Vec<std::path::PathBuf>,
}

/// Where the attempt runs, which decides the permission flags.
#[derive(Debug, Clone, Default)]
pub struct Permissions {
    /// The attempt runs inside git-orch's sandbox.
    pub sandboxed: bool,
    /// The agent runs as root (uid 0), which Claude Code minds.
    pub root: bool,
    /// Shell commands the agent should be allowed to run in the milder,
    /// non-bypass mode: the subtask's verification and the gate commands,
    /// so it can check its own work.
    pub allowed_commands: Vec<String>,
}

/// The prompt and where the attempt runs.
#[derive(Debug, Clone, Copy)]
pub struct PromptInput<'a> {
    /// The full prompt text (also in `prompt_file`).
    pub prompt: &'a str,
    /// Where the runner wrote the prompt; outside the worktree, so nothing
    /// written beside it (Aider's history files) ends up in the result.
    pub prompt_file: &'a Path,
    /// The attempt's worktree, the agent's working directory.
    pub workdir: &'a Path,
    /// The task id.
    pub task: &'a str,
    /// The attempt number, from 1.
    pub attempt: u32,
}

/// The longest prompt passed as one command-line argument. Linux refuses an
/// argument over 32 pages (`MAX_ARG_STRLEN`, 128 KiB) with E2BIG, so larger
/// prompts go through stdin or the prompt file, which every CLI here
/// documents as an alternative.
pub const MAX_PROMPT_ARG_BYTES: usize = 100 * 1024;

/// Whether `prompt` can be passed as an argument: short enough, and free of
/// NUL bytes, which no argv entry can hold.
pub(super) fn prompt_fits_argv(prompt: &str) -> bool {
    prompt.len() <= MAX_PROMPT_ARG_BYTES && !prompt.contains('\0')
}

/// An invocation of the spec's program with no arguments yet.
pub(super) fn base_invocation(spec: &AgentSpec) -> Invocation {
    Invocation {
        program: spec
            .program()
            .expect("CLI kinds always have a program")
            .to_owned(),
        args: Vec::new(),
        env: spec.env.clone(),
        stdin: None,
        writable: Vec::new(),
    }
}
