//! Launching one agent for an attempt or a review, and reading what it
//! did: its command line for where it runs (permission flags only inside
//! the sandbox), confined by the sandbox, its output watched while it runs
//! so a refused key or a rate limit stops it in seconds, and afterwards its
//! usage (with a cost: reported, estimated from the price table, or
//! unknown), whether it was unavailable, and its own error text.
//!
//! The runner records and decides; this module only prepares and reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::agent::price::{self, Price};
use crate::agent::{self, AgentSpec, Availability, CostSource, PromptInput, StreamWatch};
use crate::event::AgentUsage;
use crate::process::{Ended, GroupSpec, LineFilter, Stream};
use crate::sandbox::{Confine, Sandbox, SandboxError};

/// Why an agent or a command could not be prepared to start. Its text is
/// what the attempt's, gate's or lead's record says after "could not
/// start:".
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// A folder outside the worktree the agent may write could not be
    /// made.
    #[error("creating {}: {source}", path.display())]
    Writable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The sandbox could not make a private home or confine the command.
    #[error(transparent)]
    Sandbox(#[from] SandboxError),
    /// The prepared program could not be started.
    #[error(transparent)]
    Spawn(#[from] crate::process::ProcessError),
}

/// One agent to start.
pub struct AgentJob<'a> {
    pub spec: &'a AgentSpec,
    pub sandbox: &'a Sandbox,
    pub prompt: &'a str,
    pub prompt_file: &'a Path,
    pub worktree: &'a Path,
    /// The repository's git directory.
    pub common_dir: &'a Path,
    /// Files under the repository's git directory the agent reads (its
    /// prompt, its retry context): the sandbox hides the rest of it.
    pub readable: Vec<PathBuf>,
    /// Where its output goes.
    pub log_dir: &'a Path,
    /// File names of its output in `log_dir` (`agent`, `review`).
    pub log_name: &'a str,
    pub task: &'a str,
    pub attempt: u32,
    /// The runner's variables (`ORCH_*`, the hooks' git config).
    pub env: &'a [(String, String)],
    /// Commands the agent may run in the milder permission mode.
    pub allowed_commands: Vec<String>,
    /// Applied to output lines before they are kept (secret masking).
    pub filter: LineFilter,
    /// More folders outside the worktree it may write.
    pub writable: Vec<PathBuf>,
}

/// A prepared agent: what to spawn, and the watch on its output.
pub struct Launch {
    pub group: GroupSpec,
    pub watch: Arc<Mutex<StreamWatch>>,
    /// Its private home in the sandbox, deleted with this value (after its
    /// usage was read from the session records there).
    _home: Option<crate::sandbox::PrivateHome>,
    /// Where it runs, and since when (to find its session records).
    worktree: PathBuf,
    prepared: std::time::SystemTime,
}

/// The agent's command, confined and watched.
pub fn agent(job: &AgentJob) -> Result<Launch, LaunchError> {
    let spec = job.spec;
    let mut permissions = job.sandbox.permissions();
    permissions.allowed_commands = job.allowed_commands.clone();
    let inv = agent::invocation_in(
        spec,
        &PromptInput {
            prompt: job.prompt,
            prompt_file: job.prompt_file,
            workdir: job.worktree,
            task: job.task,
            attempt: job.attempt,
        },
        &permissions,
    );
    let mut writable = inv.writable.clone();
    writable.extend(job.writable.iter().cloned());
    for w in &writable {
        std::fs::create_dir_all(w).map_err(|source| LaunchError::Writable {
            path: w.clone(),
            source,
        })?;
    }
    let mut env = job.env.to_vec();
    env.extend(spec.env.iter().cloned());
    env.extend(inv.env.iter().cloned());
    let watch = Arc::new(Mutex::new(StreamWatch::new(spec.kind, spec.api_retries())));
    let on_line = {
        let watch = watch.clone();
        Arc::new(move |stream: Stream, line: &str| {
            watch
                .lock()
                .expect("the watch lock is never poisoned")
                .line(stream == Stream::Stderr, line)
        })
    };
    let group = GroupSpec {
        program: inv.program.clone(),
        args: inv.args.clone(),
        cwd: job.worktree.to_owned(),
        env,
        env_remove: Vec::new(),
        env_clear: false,
        stdin: inv.stdin.clone(),
        stdout: job.log_dir.join(format!("{}.out", job.log_name)),
        stderr: job.log_dir.join(format!("{}.err", job.log_name)),
        filter: Some(job.filter.clone()),
        on_line: Some(on_line),
    };
    let home = private_home(job.sandbox)?;
    let mut readable = job.readable.clone();
    if !readable.iter().any(|r| r == job.prompt_file) {
        readable.push(job.prompt_file.to_owned());
    }
    let group = job.sandbox.wrap(
        group,
        &Confine {
            worktree: job.worktree,
            common_dir: job.common_dir,
            readable: &readable,
            writable: &writable,
            home: home
                .as_ref()
                .map_or(Path::new("/nonexistent"), |h| h.path()),
            home_files: &crate::sandbox::agent_home_files(spec),
            pass_env: &crate::sandbox::agent_pass_env(spec),
            program: &inv.program,
            programs: &crate::sandbox::agent_programs(spec),
            view: crate::sandbox::View::OwnPath,
        },
    )?;
    Ok(Launch {
        group,
        watch,
        _home: home,
        worktree: job.worktree.to_owned(),
        prepared: std::time::SystemTime::now(),
    })
}

/// How much of the end of an agent's output is read for its usage and
/// verdict: the totals come last, and the output is as long as the agent
/// likes.
pub const OUTPUT_READ: usize = 16 << 20;

/// The largest session record read for usage.
const SESSION_RECORD_MAX: u64 = 64 << 20;

/// The usage in the session record a CLI kept for this run (see
/// [`agent::session_records`]): found under the agent's home folder,
/// written since the launch, naming the worktree.
fn session_usage(spec: &AgentSpec, launch: &Launch) -> Option<agent::Usage> {
    let (dirs, parse) = agent::session_records(spec.kind)?;
    let env: BTreeMap<&str, &str> = launch
        .group
        .env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let home = PathBuf::from(env.get("HOME")?);
    let worktree = launch.worktree.to_string_lossy().into_owned();
    let mut roots: Vec<PathBuf> = dirs.iter().map(|d| home.join(d)).collect();
    if let Some(codex_home) = env.get("CODEX_HOME") {
        roots.push(PathBuf::from(codex_home).join("sessions"));
    }
    let mut best: Option<(std::time::SystemTime, agent::Usage)> = None;
    let mut stack: Vec<(PathBuf, u32)> = roots.into_iter().map(|r| (r, 0)).collect();
    let mut visited = 0;
    while let Some((dir, depth)) = stack.pop() {
        visited += 1;
        if depth > 6 || visited > 2000 {
            break;
        }
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let path = entry.path();
            // Not through symlinks: the agent made this tree.
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            if meta.is_dir() {
                stack.push((path, depth + 1));
                continue;
            }
            let modified = meta.modified().unwrap_or(std::time::UNIX_EPOCH);
            if modified < launch.prepared || path.extension().is_none_or(|e| e != "jsonl") {
                continue;
            }
            // The agent wrote these: a regular file of a sane size only.
            let Some(text) = crate::process::read_written(&path, SESSION_RECORD_MAX)
                .and_then(|b| String::from_utf8(b).ok())
            else {
                continue;
            };
            // Gemini names the project in `.project_root` beside `chats/`.
            let root = path
                .parent()
                .and_then(Path::parent)
                .map(|p| p.join(".project_root"))
                .and_then(|p| crate::process::read_written(&p, 4096))
                .map(|b| String::from_utf8_lossy(&b).into_owned())
                .unwrap_or_default();
            if !(text.contains(&worktree) || root.trim() == worktree) {
                continue;
            }
            let usage = parse(&text);
            if (usage.input_tokens, usage.output_tokens) != (0, 0)
                && best.as_ref().is_none_or(|(t, _)| modified > *t)
            {
                best = Some((modified, usage));
            }
        }
    }
    best.map(|(_, u)| u)
}

/// What an agent's run came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Read {
    pub usage: AgentUsage,
    /// Why the agent could not work at all (for the fallback chain).
    pub unavailable: Option<String>,
    pub availability: Availability,
    /// The agent's own last error message.
    pub cause: Option<String>,
}

/// The cost of `usage` with its source: the CLI's figure, else an
/// estimate from the price table, else unknown.
pub fn price(
    usage: &agent::Usage,
    model: Option<&str>,
    prices: &BTreeMap<String, Price>,
) -> (Option<f64>, Option<CostSource>) {
    if let Some(c) = usage.cost_usd {
        return (Some(c), Some(CostSource::Reported));
    }
    // No tokens known, no estimate: `~$0.00` beside "tokens unknown" would
    // say it was free.
    if usage.input_tokens == 0 && usage.output_tokens == 0 {
        return (None, None);
    }
    match model.and_then(|m| price::lookup(m, prices)) {
        Some(p) => (
            Some(price::estimate(usage, &p)),
            Some(CostSource::Estimated),
        ),
        None => (None, None),
    }
}

/// Reads the finished run of `launch`: usage from its stdout, cost,
/// availability, cause. `tail` is the end of its stdout and stderr.
pub fn read(
    spec: &AgentSpec,
    ended: &Ended,
    launch: &Launch,
    prices: &BTreeMap<String, Price>,
    tail: &str,
) -> Read {
    let stdout = crate::process::tail_bytes(&launch.group.stdout, OUTPUT_READ);
    let watch = launch
        .watch
        .lock()
        .expect("the watch lock is never poisoned")
        .clone();
    let mut parsed = agent::parse_usage(spec.kind, &stdout);
    if (parsed.input_tokens, parsed.output_tokens) == (0, 0)
        && let Some(recorded) = session_usage(spec, launch)
    {
        // Killed before it printed its totals: its session record has
        // what it used.
        parsed = agent::Usage {
            is_error: parsed.is_error,
            ..recorded
        };
    }
    let model = parsed
        .model
        .clone()
        .or_else(|| watch.model().map(str::to_owned))
        .or_else(|| spec.model.clone());
    let (cost_usd, source) = price(&parsed, model.as_deref(), prices);
    let usage = AgentUsage {
        input_tokens: parsed.input_tokens,
        output_tokens: parsed.output_tokens,
        cost_usd,
        cache_read_tokens: parsed.cache_read_tokens,
        cache_write_tokens: parsed.cache_write_tokens,
        model,
        cost_source: source.map(|s| match s {
            CostSource::Reported => "reported".to_owned(),
            CostSource::Estimated => "estimated".to_owned(),
        }),
    };
    let missing = matches!(
        agent::classify_exit(spec.kind, ended.exit, tail),
        Availability::Missing
    );
    let (availability, unavailable) = if ended.cancelled {
        (Availability::Available, None)
    } else if missing {
        (
            Availability::Missing,
            Some("its program is missing".to_owned()),
        )
    } else if let Some(u) = watch.unavailable() {
        (u.class, Some(u.reason()))
    } else if let Some(u) = watch.unresolved() {
        // Ended (or was stopped at its timeout) still refused: exit 0 from
        // Aider after giving up says nothing about its work.
        (u.class, Some(u.reason()))
    } else if ended.timed_out {
        (Availability::Available, None)
    } else {
        match agent::classify_exit(spec.kind, ended.exit, tail) {
            Availability::Available => (Availability::Available, None),
            other => (other, Some(describe(other))),
        }
    };
    // The CLI's own last error; else, when it failed, its last line that
    // is not a banner (at a timeout, only one that reads like an error:
    // the last line is then whatever it was doing).
    let mut cause = watch.cause().map(str::to_owned).or_else(|| {
        (!ended.success())
            .then(|| agent::stream::last_error_line(spec.kind, tail, ended.timed_out))
            .flatten()
    });
    // A report the CLI wrote is named only where it still is: inside the
    // sandbox its temporary folder is gone once the agent ended.
    if let (Some(c), Some(report)) = (cause.as_mut(), watch.report())
        && Path::new(report).is_file()
    {
        c.push_str(&format!(" (full report: {report})"));
    }
    Read {
        usage,
        unavailable,
        availability,
        cause,
    }
}

fn describe(a: Availability) -> String {
    match a {
        Availability::Missing => "its program is missing",
        Availability::RateLimited => "rate limited",
        Availability::AuthFailed => "its credentials were refused",
        Availability::Overloaded => "the provider is overloaded or failing",
        Availability::Unreachable => "the provider could not be reached",
        Availability::Available => "available",
    }
    .to_owned()
}

/// The files an environment names that a command reads under the
/// repository's git directory (`ORCH_PROMPT_FILE`,
/// `ORCH_RETRY_CONTEXT_FILE`), for [`command`]'s `readable`.
pub fn files_named_in(env: &[(String, String)]) -> Vec<PathBuf> {
    env.iter()
        .filter(|(k, _)| k == "ORCH_PROMPT_FILE" || k == "ORCH_RETRY_CONTEXT_FILE")
        .map(|(_, v)| PathBuf::from(v))
        .collect()
}

/// A private home for one command, when the sandbox confines it.
fn private_home(sandbox: &Sandbox) -> Result<Option<crate::sandbox::PrivateHome>, SandboxError> {
    if !sandbox.confines() {
        return Ok(None);
    }
    crate::sandbox::PrivateHome::make().map(Some)
}

/// A confined command and the private home it runs with (deleted when
/// this is dropped: keep it until the command ended).
pub struct Confined {
    pub group: GroupSpec,
    _home: Option<crate::sandbox::PrivateHome>,
}

/// A command (setup, gate) confined like the attempt's agent, in a fresh
/// private home of its own: nothing an agent left in its home reaches it.
/// `readable`: files under the repository's git directory it reads;
/// `view`: where it sees its checkout.
pub fn command(
    sandbox: &Sandbox,
    spec: GroupSpec,
    common_dir: &Path,
    readable: &[PathBuf],
    view: crate::sandbox::View,
) -> Result<Confined, LaunchError> {
    let home = private_home(sandbox)?;
    let worktree = spec.cwd.clone();
    let program = spec.program.clone();
    // `sh -c LINE`: what LINE runs must be visible too.
    let programs = match spec.args.as_slice() {
        [c, line, ..] if c == "-c" => crate::sandbox::command_line::programs(line),
        _ => Vec::new(),
    };
    let group = sandbox.wrap(
        spec,
        &Confine {
            worktree: &worktree,
            common_dir,
            readable,
            writable: &[],
            home: home
                .as_ref()
                .map_or(Path::new("/nonexistent"), |h| h.path()),
            home_files: &[],
            pass_env: &[],
            program: &program,
            programs: &programs,
            view,
        },
    )?;
    Ok(Confined { group, _home: home })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder the agent may write that cannot be made is an error of
    /// its own: the folder named, the system's reason kept as its source.
    #[test]
    fn a_writable_folder_that_cannot_be_made_is_named_with_its_cause() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").expect("write");
        let below_a_file = file.join("out");
        let spec = AgentSpec::builtin("claude").expect("builtin");
        let job = AgentJob {
            spec: &spec,
            sandbox: &Sandbox::none(),
            prompt: "p",
            prompt_file: &dir.path().join("prompt"),
            worktree: dir.path(),
            common_dir: dir.path(),
            readable: Vec::new(),
            log_dir: dir.path(),
            log_name: "agent",
            task: "t",
            attempt: 1,
            env: &[],
            allowed_commands: Vec::new(),
            filter: Arc::new(|l: &str| l.to_owned()),
            writable: vec![below_a_file.clone()],
        };
        let Err(e) = agent(&job) else {
            panic!("a folder below a file was made");
        };
        assert!(
            matches!(&e, LaunchError::Writable { path, .. } if *path == below_a_file),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with(&format!("creating {}: ", below_a_file.display())),
            "{e}"
        );
        assert!(std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()));
    }

    #[test]
    fn no_tokens_no_estimate() {
        let none = BTreeMap::new();
        let empty = agent::Usage::default();
        assert_eq!(price(&empty, Some("gpt-5"), &none), (None, None));
        let used = agent::Usage {
            input_tokens: 1_000_000,
            ..agent::Usage::default()
        };
        let (cost, source) = price(&used, Some("gpt-5"), &none);
        assert!(cost.is_some_and(|c| c > 0.0), "{cost:?}");
        assert_eq!(source, Some(CostSource::Estimated));
        let reported = agent::Usage {
            cost_usd: Some(0.0),
            ..agent::Usage::default()
        };
        assert_eq!(
            price(&reported, Some("gpt-5"), &none),
            (Some(0.0), Some(CostSource::Reported))
        );
    }
}
