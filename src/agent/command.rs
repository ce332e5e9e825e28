//! The generic agent: any program, from a shell template.
//!
//! `command = my-agent --task {task} --prompt {prompt_file}` runs as
//! `sh -c '<template with placeholders replaced>' <name> <args...>`. Each
//! placeholder (`{prompt_file}`, `{workdir}`, `{task}`, `{attempt}`,
//! `{model}`) is replaced by its value already single-quoted, so the
//! template writes them bare: a path or task id holding `'`, `$(...)`,
//! spaces or newlines stays one literal word and is never evaluated. Braces
//! that are not a placeholder (`${HOME}`, `{a,b}`) are left alone, and
//! replacement is one pass, so a value containing `{task}` is not expanded
//! again. The spec's `args` become the script's `$1`, `$2`, … and its name
//! `$0`, the name `sh` uses in its own error messages.

use super::{AgentSpec, Invocation, PromptInput};

/// Quotes `value` as one word for a POSIX shell: inside single quotes
/// nothing is special, and a `'` is written as `'\''` (close the quotes, an
/// escaped quote, reopen them).
pub fn shell_quote(value: &str) -> String {
    let mut quoted = String::with_capacity(value.len() + 2);
    quoted.push('\'');
    for c in value.chars() {
        if c == '\'' {
            quoted.push_str("'\\''");
        } else {
            quoted.push(c);
        }
    }
    quoted.push('\'');
    quoted
}

/// The template with every placeholder replaced by its quoted value.
fn substitute(template: &str, spec: &AgentSpec, input: &PromptInput) -> String {
    let values = [
        (
            "{prompt_file}",
            input.prompt_file.to_string_lossy().into_owned(),
        ),
        ("{workdir}", input.workdir.to_string_lossy().into_owned()),
        ("{task}", input.task.to_owned()),
        ("{attempt}", input.attempt.to_string()),
        ("{model}", spec.model.clone().unwrap_or_default()),
    ];
    let mut script = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        script.push_str(&rest[..open]);
        let tail = &rest[open..];
        match values.iter().find(|(name, _)| tail.starts_with(name)) {
            Some((name, value)) => {
                script.push_str(&shell_quote(value));
                rest = &tail[name.len()..];
            }
            None => {
                script.push('{');
                rest = &tail[1..];
            }
        }
    }
    script.push_str(rest);
    script
}

pub(super) fn invocation(spec: &AgentSpec, input: &PromptInput) -> Invocation {
    // `from_config` refuses a Command spec without a template; one built by
    // hand without it runs an empty script, which exits 0 having done
    // nothing, and the gates judge that.
    let template = spec.command.as_deref().unwrap_or_default();
    let mut args = vec![
        "-c".to_owned(),
        substitute(template, spec, input),
        spec.name.clone(),
    ];
    args.extend(spec.args.iter().cloned());
    Invocation {
        program: "sh".to_owned(),
        args,
        env: spec.env.clone(),
        stdin: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentKind;
    use std::collections::BTreeMap;
    use std::path::Path;

    fn spec(template: &str) -> AgentSpec {
        let values = BTreeMap::from([
            ("kind".to_owned(), vec!["command".to_owned()]),
            ("command".to_owned(), vec![template.to_owned()]),
        ]);
        AgentSpec::from_config("mine", &values).expect("valid")
    }

    #[test]
    fn quotes_every_hostile_character_as_a_literal() {
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("plain"), "'plain'");
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
        assert_eq!(shell_quote("$(rm -rf ~)"), "'$(rm -rf ~)'");
        assert_eq!(shell_quote("a b\nc\td"), "'a b\nc\td'");
        assert_eq!(shell_quote("`id` \\ \"q\" *"), "'`id` \\ \"q\" *'");
        assert_eq!(shell_quote("''"), r"''\'''\'''");
    }

    #[test]
    fn argv_runs_the_substituted_template_with_sh() {
        let mut s = spec(
            "my-agent --task {task} --prompt {prompt_file} --cwd {workdir} -n {attempt} -m {model}",
        );
        s.model = Some("big".into());
        s.args = vec!["extra one".into(), "two".into()];
        s.env = vec![("K".into(), "V".into())];
        let input = PromptInput {
            prompt: "ignored: the template reads the file",
            prompt_file: Path::new("/run/p/prompt.md"),
            workdir: Path::new("/w/attempt-3"),
            task: "add-parser",
            attempt: 3,
        };
        let inv = crate::agent::invocation(&s, &input);
        assert_eq!(s.kind, AgentKind::Command);
        assert_eq!(inv.program, "sh");
        assert_eq!(
            inv.args,
            [
                "-c",
                "my-agent --task 'add-parser' --prompt '/run/p/prompt.md' --cwd '/w/attempt-3' -n '3' -m 'big'",
                "mine",
                "extra one",
                "two",
            ]
        );
        assert_eq!(inv.env, [("K".to_owned(), "V".to_owned())]);
        assert_eq!(inv.stdin, None);
    }

    #[test]
    fn hostile_values_stay_one_quoted_word() {
        let s = spec("agent {task} {prompt_file}");
        let input = PromptInput {
            prompt: "",
            prompt_file: Path::new("/tmp/it's here/$(touch pwned)\nnext line/p.md"),
            workdir: Path::new("/w"),
            task: "x'; rm -rf / #",
            attempt: 1,
        };
        let inv = crate::agent::invocation(&s, &input);
        assert_eq!(
            inv.args[1],
            "agent 'x'\\''; rm -rf / #' '/tmp/it'\\''s here/$(touch pwned)\nnext line/p.md'"
        );
    }

    #[test]
    fn only_known_placeholders_are_replaced_once() {
        let s = spec("echo ${HOME} {a,b} {unknown} {task}{task} { {model}");
        let input = PromptInput {
            prompt: "",
            prompt_file: Path::new("/p"),
            workdir: Path::new("/w"),
            task: "{task}",
            attempt: 1,
        };
        let inv = crate::agent::invocation(&s, &input);
        assert_eq!(
            inv.args[1],
            "echo ${HOME} {a,b} {unknown} '{task}''{task}' { ''"
        );
    }
}
