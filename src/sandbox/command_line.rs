//! Which programs a shell command line starts, read without running a
//! shell: the sandbox makes them visible (a command agent's
//! `command = /tmp/tools/my-agent`, a gate's `run = sh /tmp/ci/check.sh`)
//! and the preflight checks that they are there.
//!
//! Only the first simple command counts (up to `;`, `&&`, `|`, …): its
//! program, after variable assignments and wrappers such as `exec` or
//! `env`, and the script it hands to an interpreter (`sh x.sh`,
//! `python3 /opt/agent.py`). Words that expand something (`$`, a
//! backtick, a `{placeholder}`) end the reading, and a shell builtin is
//! no program: a command line this module cannot read gets no check
//! rather than a wrong one. Pure: no I/O.

/// Words that run the next word as the program.
const WRAPPERS: [&str; 8] = [
    "exec", "command", "env", "nohup", "nice", "setsid", "stdbuf", "time",
];

/// Shell builtins and keywords: no program to find.
const BUILTINS: [&str; 41] = [
    ".", ":", "[", "alias", "bg", "break", "case", "cd", "continue", "echo", "eval", "exit",
    "export", "false", "fg", "for", "getopts", "hash", "if", "jobs", "kill", "local", "printf",
    "pwd", "read", "readonly", "return", "set", "shift", "source", "test", "times", "trap", "true",
    "type", "ulimit", "umask", "unset", "until", "wait", "while",
];

/// Interpreters whose first operand is a script to read.
fn is_interpreter(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    let versioned = |prefix: &str| {
        name.strip_prefix(prefix)
            .is_some_and(|rest| rest.chars().all(|c| c.is_ascii_digit() || c == '.'))
    };
    matches!(
        name,
        "sh" | "bash"
            | "dash"
            | "zsh"
            | "ksh"
            | "node"
            | "nodejs"
            | "perl"
            | "ruby"
            | "deno"
            | "bun"
    ) || versioned("python")
}

/// One word of the command line, unquoted; `None` when it expands
/// something.
type Word = Option<String>;

/// The words of the first simple command of `line`.
fn first_command(line: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut started = false;
    let mut dynamic = false;
    let mut chars = line.chars().peekable();
    let mut finish = |word: &mut String, started: &mut bool, dynamic: &mut bool| {
        if *started {
            words.push((!*dynamic).then(|| std::mem::take(word)));
        }
        word.clear();
        *started = false;
        *dynamic = false;
    };
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => finish(&mut word, &mut started, &mut dynamic),
            ';' | '&' | '|' | '(' | ')' | '\n' | '<' | '>' => break,
            '\\' => {
                started = true;
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            '\'' => {
                started = true;
                for n in chars.by_ref() {
                    if n == '\'' {
                        break;
                    }
                    word.push(n);
                }
            }
            '"' => {
                started = true;
                while let Some(n) = chars.next() {
                    match n {
                        '"' => break,
                        '$' | '`' => dynamic = true,
                        '\\' => {
                            if let Some(e) = chars.next() {
                                word.push(e);
                            }
                        }
                        n => word.push(n),
                    }
                }
            }
            '$' | '`' | '{' | '*' | '?' | '[' | '~' => {
                started = true;
                dynamic = true;
                word.push(c);
            }
            c => {
                started = true;
                word.push(c);
            }
        }
    }
    finish(&mut word, &mut started, &mut dynamic);
    words
}

/// Whether `word` is a variable assignment (`NAME=value`).
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The programs `line` starts that must exist where it runs: its program
/// (a name looked up on `PATH`, or an absolute path) and, when that is an
/// interpreter, the script it runs (when given as an absolute path; a
/// relative one is in the worktree, which is always there).
pub fn programs(line: &str) -> Vec<String> {
    let words = first_command(line);
    let mut rest = words.into_iter().peekable();
    // Assignments, then wrappers with their options and assignments.
    let program = loop {
        let Some(word) = rest.next() else {
            return Vec::new();
        };
        let Some(word) = word else {
            return Vec::new();
        };
        if is_assignment(&word) {
            continue;
        }
        if WRAPPERS.contains(&word.as_str()) {
            while rest
                .peek()
                .is_some_and(|w| w.as_deref().is_some_and(|w| w.starts_with('-')))
            {
                rest.next();
            }
            continue;
        }
        break word;
    };
    if BUILTINS.contains(&program.as_str()) || (program.contains('/') && !program.starts_with('/'))
    {
        return Vec::new();
    }
    let mut out = vec![program.clone()];
    if is_interpreter(&program) {
        for word in rest {
            let Some(word) = word else { break };
            // Code given inline (`-c`, `-e`) or a module (`-m`): no script.
            if ["-c", "-e", "-m", "--eval", "-"].contains(&word.as_str()) {
                break;
            }
            if word.starts_with('-') {
                continue;
            }
            if word.starts_with('/') {
                out.push(word);
            }
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_and_the_script_it_runs() {
        assert_eq!(programs("my-agent --task {task}"), ["my-agent"]);
        assert_eq!(
            programs("/tmp/tools/agent.sh --prompt {prompt_file}"),
            ["/tmp/tools/agent.sh"]
        );
        assert_eq!(
            programs("sh /tmp/x/agent.sh {task}"),
            ["sh", "/tmp/x/agent.sh"]
        );
        assert_eq!(
            programs("python3 -u '/opt/my agent/run.py' && echo done"),
            ["python3", "/opt/my agent/run.py"]
        );
        assert_eq!(
            programs("FOO=1 exec env -i BAR=2 node /srv/a.js"),
            ["node", "/srv/a.js"]
        );
        assert_eq!(programs("git-orch demo-agent"), ["git-orch"]);
        assert_eq!(programs("cargo test; npm test"), ["cargo"]);
        // A relative script is in the worktree: nothing to make visible.
        assert_eq!(programs("sh ./scripts/check.sh"), ["sh"]);
        assert_eq!(programs("bash -c 'exit 1'"), ["bash"]);
        assert_eq!(programs("python3 -m pytest"), ["python3"]);
    }

    #[test]
    fn what_cannot_be_read_without_a_shell_is_left_out() {
        assert!(programs("$HELPER --x").is_empty());
        assert!(programs("\"$AGENT\" run").is_empty());
        assert!(programs("cd sub && make").is_empty());
        assert!(programs("./local-script").is_empty());
        assert!(programs("").is_empty());
        assert!(programs("   ").is_empty());
        assert_eq!(programs("sh \"$SCRIPT\""), ["sh"]);
        assert_eq!(programs("sh {prompt_file}"), ["sh"]);
        assert_eq!(programs("~/bin/agent"), Vec::<String>::new());
    }
}
