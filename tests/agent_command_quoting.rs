//! The `command` agent's template, run by a real `sh`: every placeholder
//! value reaches the program as exactly one literal argument, however
//! hostile (quotes, command substitution, globs, spaces, newlines), and
//! nothing in it is evaluated.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use git_orch::agent::{AgentSpec, PromptInput, invocation};

/// Runs the invocation and returns the NUL-separated words it printed.
fn words_printed(template: &str, input: &PromptInput, args: &[&str]) -> Vec<String> {
    let values = BTreeMap::from([
        ("kind".to_owned(), vec!["command".to_owned()]),
        ("command".to_owned(), vec![template.to_owned()]),
        (
            "args".to_owned(),
            args.iter().map(|a| (*a).to_owned()).collect(),
        ),
    ]);
    let spec = AgentSpec::from_config("quoting", &values).expect("valid spec");
    let inv = invocation(&spec, input);
    let out = Command::new(&inv.program)
        .args(&inv.args)
        .current_dir(input.workdir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .split('\0')
        .filter(|w| !w.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn hostile_values_arrive_as_single_literal_arguments() {
    let dir = tempfile::tempdir().expect("temp dir");
    let canary = dir.path().join("pwned");
    let task = format!("t'; touch {} #", canary.display());
    let prompt_file = format!(
        "{}/it's $(touch {}) `touch {}`\nline two/*.md",
        dir.path().display(),
        canary.display(),
        canary.display()
    );
    let input = PromptInput {
        prompt: "unused",
        prompt_file: Path::new(&prompt_file),
        workdir: dir.path(),
        task: &task,
        attempt: 7,
    };
    let words = words_printed(
        r#"printf '%s\0' {task} {prompt_file} {attempt} {model} "$0" "$@""#,
        &input,
        &["arg with space", "$(touch x)"],
    );
    assert_eq!(
        words,
        [
            task.as_str(),
            prompt_file.as_str(),
            "7",
            // {model} is unset: an empty word, which printf drops here.
            "quoting",
            "arg with space",
            "$(touch x)",
        ]
    );
    assert!(!canary.exists(), "a value was evaluated by the shell");
    assert!(!dir.path().join("x").exists(), "an arg was evaluated");
}
