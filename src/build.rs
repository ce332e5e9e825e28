//! Tells the tests whether the real agent CLIs are here, so that the
//! end-to-end tests that drive them are reported as *ignored* where they
//! are missing, never as passed having checked nothing.
//!
//! `e2e_agent_clis` is set when every CLI is found where `.ci/run`
//! installs them (`~/.cache/git-orch-e2e`, or the folders of
//! `GIT_ORCH_E2E_BIN`), and always under `CI=true`: there a missing CLI
//! must fail its tests, not hide.

use std::path::PathBuf;

const PROGRAMS: [&str; 4] = ["claude", "codex", "gemini", "aider"];

fn main() {
    println!("cargo::rustc-check-cfg=cfg(e2e_agent_clis)");
    for var in ["CI", "GIT_ORCH_E2E_BIN", "HOME"] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    let dirs: Vec<PathBuf> = match std::env::var_os("GIT_ORCH_E2E_BIN") {
        Some(v) => std::env::split_paths(&v).collect(),
        None => {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            let cache = home.join(".cache/git-orch-e2e");
            vec![cache.join("npm/bin"), cache.join("aider-venv/bin")]
        }
    };
    println!("cargo::rerun-if-changed=src/build.rs");
    for d in dirs.iter().filter(|d| d.is_dir()) {
        // An install (or its removal) changes the answer.
        println!("cargo::rerun-if-changed={}", d.display());
    }
    let ci = std::env::var("CI").is_ok_and(|v| v == "true" || v == "1");
    let all_here = PROGRAMS
        .iter()
        .all(|p| dirs.iter().any(|d| d.join(p).is_file()));
    if ci || all_here {
        println!("cargo::rustc-cfg=e2e_agent_clis");
    }
}
