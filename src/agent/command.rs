//! The generic agent: any program, from a shell template.
//!
//! `command = my-agent --task {task} --prompt {prompt_file}` runs as
//! `sh -c '<script>' <name> <args...>`. No value is ever pasted into the
//! script: each placeholder (`{prompt_file}`, `{workdir}`, `{task}`,
//! `{attempt}`, `{model}`) becomes a reference to an environment variable
//! the invocation sets (`ORCH_PROMPT_FILE`, `ORCH_WORKDIR`, `ORCH_TASK`,
//! `ORCH_ATTEMPT`, `ORCH_MODEL`), written to suit where the placeholder
//! stands: `"${V}"` outside quotes, `${V}` inside double quotes, and
//! `'"${V}"'` inside single quotes (close them, expand, reopen). A
//! parameter expansion's result is never parsed again by the shell, so a
//! value holding `$(…)`, backticks, quotes, `;` or newlines stays data,
//! whatever the template looks like; a template whose quoting this module
//! misreads can at worst pass the reference text literally, never run a
//! value. Braces that are not a placeholder (`${HOME}`, `{a,b}`) are left
//! alone. The spec's `args` become the script's `$1`, `$2`, … and its name
//! `$0`, the name `sh` uses in its own error messages.

use super::command_line::{Invocation, PromptInput};
use super::spec::AgentSpec;

/// Placeholders and the variables that carry their values.
const PLACEHOLDERS: [(&str, &str); 5] = [
    ("{prompt_file}", "ORCH_PROMPT_FILE"),
    ("{workdir}", "ORCH_WORKDIR"),
    ("{task}", "ORCH_TASK"),
    ("{attempt}", "ORCH_ATTEMPT"),
    ("{model}", "ORCH_MODEL"),
];

/// Where the scanner stands in the template's shell syntax.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    /// Outside quotes (the top level, or inside `$(…)` with this many
    /// unclosed `(`).
    Plain {
        parens: u32,
    },
    Single,
    Double,
    Backtick,
}

/// How a variable is referenced in `context` so that it expands to exactly
/// its value, as one word.
fn reference(context: Context, var: &str) -> String {
    match context {
        Context::Single => format!("'\"${{{var}}}\"'"),
        Context::Double => format!("${{{var}}}"),
        Context::Plain { .. } | Context::Backtick => format!("\"${{{var}}}\""),
    }
}

/// The template with every placeholder replaced by a quoted reference to
/// its variable.
pub(crate) fn script(template: &str) -> String {
    let mut out = String::with_capacity(template.len() + 32);
    let mut stack = vec![Context::Plain { parens: 0 }];
    let mut rest = template;
    while let Some(c) = rest.chars().next() {
        let top = *stack.last().expect("the stack never empties");
        if c == '{'
            && let Some((name, var)) = PLACEHOLDERS.iter().find(|(n, _)| rest.starts_with(n))
        {
            out.push_str(&reference(top, var));
            rest = &rest[name.len()..];
            continue;
        }
        let mut take = c.len_utf8();
        match (top, c) {
            (Context::Single, '\'') => {
                stack.pop();
            }
            (Context::Single, _) => {}
            (_, '\\') => {
                // The next character is escaped, whatever it is.
                take += rest[take..].chars().next().map_or(0, char::len_utf8);
            }
            (Context::Plain { .. } | Context::Backtick, '\'') => stack.push(Context::Single),
            (Context::Plain { .. } | Context::Backtick, '"') => stack.push(Context::Double),
            (Context::Double, '"') | (Context::Backtick, '`') => {
                stack.pop();
            }
            (_, '$') if rest[1..].starts_with('(') => {
                stack.push(Context::Plain { parens: 0 });
                take += 1;
            }
            (Context::Plain { .. } | Context::Double, '`') => stack.push(Context::Backtick),
            (Context::Plain { parens }, '(') if stack.len() > 1 => {
                *stack.last_mut().expect("non-empty") = Context::Plain { parens: parens + 1 };
            }
            (Context::Plain { parens }, ')') if stack.len() > 1 => {
                if parens == 0 {
                    stack.pop();
                } else {
                    *stack.last_mut().expect("non-empty") = Context::Plain { parens: parens - 1 };
                }
            }
            _ => {}
        }
        out.push_str(&rest[..take]);
        rest = &rest[take..];
    }
    out
}

pub(super) fn invocation(spec: &AgentSpec, input: &PromptInput) -> Invocation {
    // `from_config` refuses a Command spec without a template; one built by
    // hand without it runs an empty script, which exits 0 having done
    // nothing, and the gates judge that.
    let template = spec.command.as_deref().unwrap_or_default();
    let mut args = vec!["-c".to_owned(), script(template), spec.name.clone()];
    args.extend(spec.args.iter().cloned());
    let mut env = spec.env.clone();
    env.extend([
        (
            "ORCH_PROMPT_FILE".to_owned(),
            input.prompt_file.to_string_lossy().into_owned(),
        ),
        (
            "ORCH_WORKDIR".to_owned(),
            input.workdir.to_string_lossy().into_owned(),
        ),
        ("ORCH_TASK".to_owned(), input.task.to_owned()),
        ("ORCH_ATTEMPT".to_owned(), input.attempt.to_string()),
        (
            "ORCH_MODEL".to_owned(),
            spec.model.clone().unwrap_or_default(),
        ),
    ]);
    Invocation {
        program: "sh".to_owned(),
        args,
        env,
        stdin: None,
        writable: Vec::new(),
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
    fn placeholders_become_references_that_suit_their_quoting() {
        assert_eq!(script("a {task} b"), r#"a "${ORCH_TASK}" b"#);
        assert_eq!(script(r#"a "--t={task}" b"#), r#"a "--t=${ORCH_TASK}" b"#);
        assert_eq!(script("a '--t={task}' b"), r#"a '--t='"${ORCH_TASK}"'' b"#);
        assert_eq!(script("a --t={task}"), r#"a --t="${ORCH_TASK}""#);
        assert_eq!(
            script(r#"x "$(echo {task} "{model}")" '{attempt}'"#),
            r#"x "$(echo "${ORCH_TASK}" "${ORCH_MODEL}")" ''"${ORCH_ATTEMPT}"''"#
        );
        assert_eq!(script("`echo {workdir}`"), r#"`echo "${ORCH_WORKDIR}"`"#);
        // An escaped quote does not open a quoted string.
        assert_eq!(script(r"a \'{task}"), r#"a \'"${ORCH_TASK}""#);
    }

    #[test]
    fn argv_runs_the_script_with_values_in_the_environment() {
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
                r#"my-agent --task "${ORCH_TASK}" --prompt "${ORCH_PROMPT_FILE}" --cwd "${ORCH_WORKDIR}" -n "${ORCH_ATTEMPT}" -m "${ORCH_MODEL}""#,
                "mine",
                "extra one",
                "two",
            ]
        );
        let env: BTreeMap<_, _> = inv.env.iter().cloned().collect();
        assert_eq!(env["K"], "V");
        assert_eq!(env["ORCH_TASK"], "add-parser");
        assert_eq!(env["ORCH_PROMPT_FILE"], "/run/p/prompt.md");
        assert_eq!(env["ORCH_WORKDIR"], "/w/attempt-3");
        assert_eq!(env["ORCH_ATTEMPT"], "3");
        assert_eq!(env["ORCH_MODEL"], "big");
        assert_eq!(inv.stdin, None);
    }

    #[test]
    fn no_value_reaches_the_script_text() {
        let s = spec("agent {task} '{prompt_file}' \"{model}\"");
        let input = PromptInput {
            prompt: "",
            prompt_file: Path::new("/tmp/it's here/$(touch pwned)\nnext line/p.md"),
            workdir: Path::new("/w"),
            task: "x'; rm -rf / #",
            attempt: 1,
        };
        let inv = crate::agent::invocation(&s, &input);
        assert!(!inv.args[1].contains("pwned"), "{}", inv.args[1]);
        assert!(!inv.args[1].contains("rm -rf"), "{}", inv.args[1]);
    }

    #[test]
    fn only_known_placeholders_are_replaced_once() {
        assert_eq!(
            script("echo ${HOME} {a,b} {unknown} {task}{task} { {model}"),
            r#"echo ${HOME} {a,b} {unknown} "${ORCH_TASK}""${ORCH_TASK}" { "${ORCH_MODEL}""#
        );
    }
}
