//! Helpers for the tests that need something outside the repository
//! (bubblewrap, the real agent CLIs) and that look at processes.
//!
//! A test whose tool is missing skips with a loud message on stderr, but
//! under `CI=true` a missing tool fails the test: CI installs them all
//! (`.ci/run`), so a skip there would hide a broken install.

#![allow(dead_code)]

use std::path::Path;
use std::time::{Duration, Instant};

/// Whether tests run in CI, where every tool must be present.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// Reports a missing tool: panics in CI, else prints a loud skip message.
/// Returns false so callers can `if !present(..) { return; }`.
pub fn missing(test: &str, what: &str) -> bool {
    let msg = format!(
        "\n==================== SKIPPED ====================\n{test}: {what}\n(.ci/run installs it; under CI=true this fails)\n=================================================\n"
    );
    if in_ci() {
        panic!("{msg}");
    }
    eprintln!("{msg}");
    false
}

/// Whether bubblewrap makes a sandbox here (the same isolation git-orch
/// asks for); otherwise reports it as [`missing`].
pub fn bwrap_works(test: &str) -> bool {
    let out = std::process::Command::new("bwrap")
        .args([
            "--die-with-parent",
            "--new-session",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--",
            "true",
        ])
        .output();
    match out {
        Ok(o) if o.status.success() => true,
        Ok(o) => missing(
            test,
            &format!(
                "bubblewrap cannot make a sandbox here: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            ),
        ),
        Err(e) => missing(test, &format!("bubblewrap (bwrap) is not installed: {e}")),
    }
}

/// Live processes (not zombies) whose environment holds `NAME=value`.
pub fn with_env(name: &str, value: &str) -> Vec<u32> {
    let wanted = format!("{name}={value}");
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(environ) = std::fs::read(format!("/proc/{pid}/environ")) else {
            continue;
        };
        if !environ.split(|b| *b == 0).any(|v| v == wanted.as_bytes()) {
            continue;
        }
        let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(") ")
                    .and_then(|(_, rest)| rest.chars().next())
            })
            .is_none_or(|state| state == 'Z' || state == 'X');
        if !zombie {
            out.push(pid);
        }
    }
    out
}

/// Polls `done` every 50 ms until it holds or `limit` passes; returns
/// whether it held.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if done() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A random hex marker, so parallel tests never see each other's processes.
pub fn marker() -> String {
    let mut bytes = [0u8; 8];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Sends SIGKILL to the processes of `pids` that still hold the marker
/// (cleanup after a failed assertion, so a failing test leaves nothing).
pub fn kill_marked(name: &str, value: &str) {
    for pid in with_env(name, value) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
    }
}

/// Whether `path` exists.
pub fn exists(path: &Path) -> bool {
    path.exists()
}
