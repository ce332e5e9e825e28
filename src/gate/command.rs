//! Command gates: build, test, lint and the subtask's verification, run
//! with `sh -c` in the attempt's worktree with the `ORCH_*` environment.
//!
//! They get the same cleaned environment as agents (the allow-list of
//! `sandbox`, so no `GIT_DIR` redirecting them and no credentials they do
//! not need) and, for an attempt's gates, the same sandbox, with a fresh
//! private home each time so nothing the agent left there reaches them.
//!
//! Output goes through the secret mask on its way to the log file; the
//! verdict keeps a masked tail and, where the output is a test runner's,
//! the failing test names.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use serde_json::json;

use super::stack::GateDef;
use super::tests_output::failing_tests;
use crate::event::{GateMode, GateStatus, Verdict};
use crate::process::{GroupChild, GroupSpec};

/// Bytes of output kept in a verdict.
pub const TAIL_BYTES: usize = 4 * 1024;
/// Grace between SIGTERM and SIGKILL when a gate is stopped.
pub const GRACE: Duration = Duration::from_secs(3);

/// Where a command runs and logs.
pub struct Place<'a> {
    pub worktree: &'a Path,
    pub env: &'a [(String, String)],
    pub log_dir: &'a Path,
}

/// The sandbox a gate runs in, and the repository it reads.
pub struct Confinement<'a> {
    pub sandbox: &'a crate::sandbox::Sandbox,
    pub common_dir: &'a Path,
}

/// Runs one command gate to a verdict in the sandbox `settings` ask for
/// (the merge queue's integration gate on a candidate).
pub async fn run_in(
    def: &GateDef,
    command: &str,
    place: &Place<'_>,
    settings: &crate::config::Settings,
    common_dir: &Path,
    cancel: &CancellationToken,
) -> Verdict {
    match crate::sandbox::resolve(&settings.sandbox) {
        Ok(sandbox) => {
            let confinement = Confinement {
                sandbox: &sandbox,
                common_dir,
            };
            run_confined(def, command, place, &confinement, cancel).await
        }
        Err(e) => Verdict {
            gate: def.name.clone(),
            mode: def.mode,
            status: GateStatus::Error,
            cached_pass: None,
            inputs: None,
            command: Some(command.to_owned()),
            duration_ms: 0,
            summary: e.to_string(),
            tail: String::new(),
            details: serde_json::Value::Null,
        },
    }
}

/// Runs one command gate to a verdict in `confinement`'s sandbox (with
/// `sandbox = none`, only the environment is cleaned).
pub async fn run_confined(
    def: &GateDef,
    command: &str,
    place: &Place<'_>,
    confinement: &Confinement<'_>,
    cancel: &CancellationToken,
) -> Verdict {
    let start = Instant::now();
    let log = |ext: &str| -> PathBuf { place.log_dir.join(format!("gate-{}.{ext}", def.name)) };
    let _ = std::fs::create_dir_all(place.log_dir);
    // Each run starts a fresh log.
    let _ = std::fs::write(log("out"), b"");
    let _ = std::fs::write(log("err"), b"");
    let spec = GroupSpec {
        program: "sh".into(),
        args: vec!["-c".into(), command.into()],
        cwd: place.worktree.to_owned(),
        env: place.env.to_vec(),
        env_remove: Vec::new(),
        env_clear: false,
        stdin: None,
        stdout: log("out"),
        stderr: log("err"),
        filter: Some(super::masking::line_filter()),
        on_line: None,
    };
    let base = Verdict {
        gate: def.name.clone(),
        mode: def.mode,
        status: GateStatus::Error,
        cached_pass: None,
        inputs: None,
        command: Some(command.to_owned()),
        duration_ms: 0,
        summary: String::new(),
        tail: String::new(),
        details: serde_json::Value::Null,
    };
    let started = crate::launch::command(
        confinement.sandbox,
        spec,
        confinement.common_dir,
        &crate::launch::files_named_in(place.env),
        // Warm build caches are warm only at the path they were built at.
        crate::sandbox::View::MainPath,
    )
    .and_then(|confined| Ok((GroupChild::spawn(&confined.group)?, confined)));
    // `_confined` is held until the gate ends: its private home goes with it.
    let (mut child, _confined) = match started {
        Ok(c) => c,
        Err(e) => {
            return Verdict {
                summary: format!("could not start: {e}"),
                duration_ms: start.elapsed().as_millis() as u64,
                ..base
            };
        }
    };
    let ended = child
        .wait(tokio::time::Instant::now() + def.timeout, cancel, GRACE)
        .await;
    let out = crate::process::tail_of(&log("out"), TAIL_BYTES);
    let err = crate::process::tail_of(&log("err"), TAIL_BYTES);
    let both = format!("{out}{err}");
    let tail = tail_chars(&both, TAIL_BYTES);
    let failing = failing_tests(&both);
    let duration_ms = start.elapsed().as_millis() as u64;
    let (status, summary) = if ended.cancelled {
        (
            GateStatus::Error,
            "stopped: the run was interrupted".to_owned(),
        )
    } else if ended.timed_out {
        (
            GateStatus::Error,
            format!("timed out after {}s", def.timeout.as_secs()),
        )
    } else if ended.success() {
        (GateStatus::Pass, format!("`{command}` passed"))
    } else if ended.exit == Some(127) {
        (
            GateStatus::Error,
            format!("`{command}`: command not found (exit 127)"),
        )
    } else {
        let how = match (ended.exit, ended.signal) {
            (Some(c), _) => format!("exit {c}"),
            (None, Some(s)) => format!("signal {s}"),
            _ => "failed".into(),
        };
        let status = if def.mode == GateMode::Warn {
            GateStatus::Warn
        } else {
            GateStatus::Fail
        };
        let tests = if failing.is_empty() {
            String::new()
        } else {
            format!("; failing: {}", failing.join(", "))
        };
        (status, format!("`{command}` failed ({how}){tests}"))
    };
    Verdict {
        status,
        duration_ms,
        summary,
        tail,
        details: json!({
            "exit": ended.exit,
            "failing_tests": failing,
            "log": log("out").to_string_lossy(),
        }),
        ..base
    }
}

/// The last `max` bytes of `text`, cut at a character boundary.
pub fn tail_chars(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut start = text.len() - max;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_owned()
}
