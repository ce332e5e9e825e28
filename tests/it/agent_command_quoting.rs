//! The `command` agent's template, run by a real `sh` and through `git
//! orch run`: hostile values (`$(…)`, backticks, quotes, newlines, `;`) in
//! every placeholder, in every quoting position of a template, reach the
//! program as literal data and run nothing.

use crate::common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use common::{Sandbox, stderr};
use git_orch::agent::{AgentSpec, PromptInput, invocation};

/// The word a template position prints for a value.
type Expected = fn(&str) -> String;

/// Values that would run `touch <canary>` if any were evaluated.
fn hostile(canary: &Path) -> Vec<String> {
    let c = canary.display();
    vec![
        format!("$(touch {c})"),
        format!("`touch {c}`"),
        format!("x'; touch {c}; echo '"),
        format!("x\"; touch {c}; echo \""),
        format!("a\nb; touch {c}"),
        format!(";touch {c};"),
        format!("$(touch {c})' \"`touch {c}`\" \\"),
        "${HOME} * ?".to_owned(),
    ]
}

/// Runs the invocation of `template` as the runner would (its program,
/// args and environment, nothing inherited) and returns the NUL-separated
/// words it printed.
fn words_printed(template: &str, input: &PromptInput, model: &str) -> Vec<String> {
    let values = BTreeMap::from([
        ("kind".to_owned(), vec!["command".to_owned()]),
        ("command".to_owned(), vec![template.to_owned()]),
        ("model".to_owned(), vec![model.to_owned()]),
    ]);
    let spec = AgentSpec::from_config("quoting", &values).expect("valid spec");
    let inv = invocation(&spec, input);
    let out = Command::new(&inv.program)
        .args(&inv.args)
        .current_dir(input.workdir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .envs(inv.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .expect("run sh");
    assert!(
        out.status.success(),
        "sh failed for {template:?}: {}",
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
fn hostile_values_in_every_placeholder_and_quoting_position_run_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let canary = dir.path().join("pwned");
    // Positions where the placeholder stands, and the word each prints.
    let positions: [(&str, Expected); 7] = [
        ("{P}", |v| v.to_owned()),
        ("\"{P}\"", |v| v.to_owned()),
        ("'{P}'", |v| v.to_owned()),
        ("--x={P}", |v| format!("--x={v}")),
        ("'--x={P}'", |v| format!("--x={v}")),
        ("\"--x={P}\"", |v| format!("--x={v}")),
        ("\"$(printf %s {P})\"", |v| {
            v.trim_end_matches('\n').to_owned()
        }),
    ];
    // Positions whose output depends on the shell's word splitting: only
    // "runs nothing" is checked there.
    let loose = [
        "$(printf '%s\\0' {P})",
        "`printf '%s\\0' {P}`",
        "\"`printf '%s' {P}`\"",
        "x{P}y{P}z",
    ];
    for value in hostile(&canary) {
        let workdir = dir.path().join("w");
        std::fs::create_dir_all(&workdir).expect("workdir");
        let prompt_file = dir.path().join(format!("p-{}.md", value.len()));
        let input = PromptInput {
            prompt: "unused",
            prompt_file: &prompt_file,
            workdir: &workdir,
            task: &value,
            attempt: 7,
        };
        let placeholders = ["{task}", "{prompt_file}", "{workdir}", "{model}"];
        let expected_value = |p: &str| match p {
            "{task}" => value.clone(),
            "{prompt_file}" => prompt_file.to_string_lossy().into_owned(),
            "{workdir}" => workdir.to_string_lossy().into_owned(),
            _ => value.clone(),
        };
        for placeholder in placeholders {
            for (position, expected) in &positions {
                let template = format!("printf '%s\\0' {}", position.replace("{P}", placeholder));
                let words = words_printed(&template, &input, &value);
                assert_eq!(
                    words,
                    [expected(&expected_value(placeholder))],
                    "template {template:?} with value {value:?}"
                );
            }
            for position in loose {
                let template = format!("printf '%s\\0' {}", position.replace("{P}", placeholder));
                words_printed(&template, &input, &value);
            }
        }
        // {attempt} is a number, but it is passed the same way.
        let words = words_printed("printf '%s\\0' '{attempt}' \"$0\"", &input, &value);
        assert_eq!(words, ["7", "quoting"]);
        assert!(
            !canary.exists(),
            "a value was evaluated by the shell: {value:?}"
        );
    }
}

#[test]
fn a_run_with_hostile_paths_and_model_lands_the_literal_values() {
    let sb = Sandbox::new();
    let canary = sb.path().join("canary");
    // The repository's own path (and so the prompt file's and the
    // worktree's) and the model name are hostile.
    let name = format!("it's $(touch {c}) `touch {c}` ;x", c = canary.display());
    let repo = sb.repo(&name);
    std::fs::create_dir_all(repo.join(".orch")).expect("mkdir");
    std::fs::create_dir_all(repo.join("src/a")).expect("mkdir");
    std::fs::write(repo.join("src/a/README"), "a\n").expect("write");
    let model = format!("m'; touch {c}; \"$(touch {c})\"\nx", c = canary.display());
    let template = r#"printf '%s\n' {task} "{prompt_file}" '--w={workdir}' "$(printf %s {model})" > src/a/words"#;
    let config = format!(
        "[orch]\n    agent = tpl\n[agent \"tpl\"]\n    kind = command\n    model = {}\n    command = {}\n",
        git_config_value(&model),
        git_config_value(template)
    );
    std::fs::write(repo.join(".orch/config"), config).expect("config");
    sb.git(&repo, &["add", "."]);
    sb.git(
        &repo,
        &[
            "-c",
            "user.name=Seed",
            "-c",
            "user.email=seed@example.com",
            "commit",
            "-q",
            "-m",
            "project",
        ],
    );
    let plan = serde_json::json!({
        "version": 1, "id": "q", "instruction": "quote",
        "subtasks": [{"id": "a", "title": "A", "owned_globs": ["src/a/**"], "deliverable": "a", "verification": "true"}],
    });
    let plan_file = sb.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    sb.orch_ok(&repo, &["plan", "add", &plan_file.to_string_lossy()]);
    sb.orch_ok(&repo, &["approve", "q"]);
    let out = sb.orch(&repo, &["run", "q"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let words = std::fs::read_to_string(repo.join("src/a/words")).expect("landed");
    let lines: Vec<&str> = words.lines().collect();
    assert_eq!(lines[0], "a");
    assert!(
        lines[1].ends_with("a-1.md") && lines[1].contains(&name),
        "{words}"
    );
    assert!(
        lines[2].starts_with("--w=") && lines[2].ends_with("a-1"),
        "{words}"
    );
    assert_eq!(words.lines().skip(3).collect::<Vec<_>>().join("\n"), model);
    assert!(!canary.exists(), "a value was evaluated");
}

/// `value` as a git-config value: quoted, with `"`, `\` and newlines
/// escaped.
fn git_config_value(value: &str) -> String {
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[test]
fn a_template_naming_a_variable_agents_do_not_get_is_warned_about_with_the_pass_env_fix() {
    let mut sb = Sandbox::new();
    sb.set_env("HELPER", "from-the-shell");
    let template = git_config_value(r#"test -n "$HELPER" && echo "$HELPER" > src/a/done"#);
    let config = |pass: &str| {
        format!(
            "[orch]\n    agent = w\n    retries = 0\n[agent \"w\"]\n    kind = command\n{pass}    command = {template}\n"
        )
    };
    let p = common::project(
        &mut sb,
        &[("a", &[], "test -f src/a/done")],
        Some(&config("")),
    );
    let out = sb.orch(&p.repo, &["run", "proj"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(
        err.contains("agent w's command names $HELPER, which agents do not get")
            && err.contains("`passEnv = HELPER`"),
        "{err}"
    );
    // The fix as the warning names it: the variable reaches the agent.
    std::fs::write(
        p.repo.join(".orch/config"),
        config("    passEnv = HELPER\n"),
    )
    .expect("config");
    sb.git(&p.repo, &["commit", "-qam", "pass HELPER"]);
    let out = sb.orch(&p.repo, &["run", "proj"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(!err.contains("which agents do not get"), "{err}");
    assert_eq!(
        sb.git(&p.repo, &["show", "main:src/a/done"]),
        "from-the-shell"
    );
}
