//! The demo's scripted agent (`git-orch demo-agent`, hidden): deterministic,
//! offline, and honest about what it reacts to.
//!
//! The runner starts it like any agent of `kind = command`, in the attempt's
//! worktree with `ORCH_TASK`, `ORCH_ATTEMPT` and, on a retry,
//! `ORCH_RETRY_CONTEXT_FILE`. It writes the real code of its subtask and
//! leaves it for git-orch to commit. Two subtasks misbehave on purpose, so
//! the demo shows the gates and retries at work:
//!
//! - `reverse` writes a loop that stops one character early, which its own
//!   test catches. It fixes the loop only when the retry context names that
//!   failing test; with no context (or another failure) it writes the same
//!   bug again, as a real agent that was told nothing would.
//! - `wordcount` also adds a usage note to `README.md`, a file it does not
//!   own, which the scope gate catches. It leaves `README.md` alone only
//!   when the retry context lists it as out of scope.
//!
//! The decision (`work`) is pure; `act` reads the context and writes files.
//! Nothing here prints: `act` returns what the agent has to say.

use std::path::{Path, PathBuf};

use crate::gate::context::RetryContext;

/// The test that catches `reverse`'s bug.
pub const REVERSE_TEST: &str = "reverse: keeps every character";

/// The file `wordcount` wrongly edits on its first attempt.
pub const OUT_OF_SCOPE_FILE: &str = "README.md";

/// The tasks the scripted agent knows.
pub const TASKS: [&str; 5] = ["upper", "reverse", "wordcount", "shout", "ci"];

/// Why the scripted agent could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error(
        "the demo agent only knows the demo's tasks ({known}), not {0:?}\nhint: it is run by `git orch demo`; use a real agent for other plans",
        known = TASKS.join(", ")
    )]
    UnknownTask(String),
    #[error(
        "ORCH_TASK is not set\nhint: the demo agent is started by `git orch run`, which sets it"
    )]
    NoTask,
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// One change to the worktree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Create or overwrite the file.
    Write(&'static str, String),
    /// Add text at the end of the file.
    Append(&'static str, String),
}

impl Change {
    pub fn path(&self) -> &'static str {
        match self {
            Change::Write(p, _) | Change::Append(p, _) => p,
        }
    }
}

/// What the agent decided: its changes and what it says about them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Work {
    pub changes: Vec<Change>,
    pub said: Vec<String>,
}

const UPPER: &str = r##"# upper TEXT: TEXT in upper case.
upper() {
	printf '%s\n' "$1" | tr '[:lower:]' '[:upper:]'
}
"##;

const TEST_UPPER: &str = r##". ./tests/lib.sh
check "upper: lower case becomes upper case" "HELLO" "$(upper hello)"
check "upper: other characters stay" "A-1 B!" "$(upper 'a-1 b!')"
finish
"##;

/// Takes the first character off the rest and puts it in front of the
/// result; `CONDITION` decides when to stop.
fn reverse_source(condition: &str) -> String {
    format!(
        r##"# reverse TEXT: TEXT backwards.
reverse() {{
	_reverse_rest=$1
	_reverse_out=
	while {condition}; do
		_reverse_tail=${{_reverse_rest#?}}
		_reverse_out=${{_reverse_rest%"$_reverse_tail"}}$_reverse_out
		_reverse_rest=$_reverse_tail
	done
	printf '%s\n' "$_reverse_out"
}}
"##
    )
}

/// The bug: stops while one character is left, so it is lost.
const REVERSE_BUGGY_CONDITION: &str = r##"[ "${#_reverse_rest}" -gt 1 ]"##;
const REVERSE_FIXED_CONDITION: &str = r##"[ -n "$_reverse_rest" ]"##;

fn test_reverse() -> String {
    format!(
        r##". ./tests/lib.sh
check "reverse: empty text stays empty" "" "$(reverse '')"
check "{REVERSE_TEST}" "olleh" "$(reverse hello)"
finish
"##
    )
}

const WORDCOUNT: &str = r##"# wordcount TEXT: the number of words in TEXT.
wordcount() {
	printf '%s\n' "$1" | wc -w | tr -d ' '
}
"##;

const TEST_WORDCOUNT: &str = r##". ./tests/lib.sh
check "wordcount: counts words" "3" "$(wordcount 'one two three')"
check "wordcount: extra spaces do not count" "2" "$(wordcount '  a   b ')"
check "wordcount: empty text has no words" "0" "$(wordcount '')"
finish
"##;

const WORDCOUNT_README: &str = "
    sh tt.sh wordcount 'a b c'    # 3
";

const SHOUT: &str = r##"# shout TEXT: TEXT in upper case with an exclamation mark (uses upper).
shout() {
	printf '%s!\n' "$(upper "$1")"
}
"##;

const TEST_SHOUT: &str = r##". ./tests/lib.sh
check "shout: upper case and an exclamation mark" "HELLO!" "$(shout hello)"
finish
"##;

const CI_CHECK: &str = r##"#!/bin/sh
# CI: every script parses, every function has tests, and the suite passes.
cd "$(dirname "$0")/.." || exit 1
status=0
for f in src/*.sh tests/*.sh test.sh tt.sh; do
	sh -n "$f" || {
		echo "ci: $f does not parse"
		status=1
	}
done
for f in src/*.sh; do
	name=$(basename "$f" .sh)
	[ -f "tests/test_$name.sh" ] || {
		echo "ci: $f has no tests/test_$name.sh"
		status=1
	}
done
sh test.sh || status=1
exit "$status"
"##;

/// Whether the retry context names `reverse`'s failing test.
fn names_failing_test(retry: Option<&RetryContext>) -> bool {
    retry.is_some_and(|r| {
        r.failures
            .iter()
            .any(|f| f.failing_tests.iter().any(|t| t == REVERSE_TEST))
    })
}

/// Whether the retry context lists `path` as changed out of scope.
fn names_out_of_scope(retry: Option<&RetryContext>, path: &str) -> bool {
    retry.is_some_and(|r| {
        r.failures
            .iter()
            .any(|f| f.out_of_scope_paths.iter().any(|p| p == path))
    })
}

/// Decides what attempt `attempt` of `task` writes, given the retry context
/// (if any) of the attempt before it.
pub fn work(task: &str, attempt: u32, retry: Option<&RetryContext>) -> Result<Work, AgentError> {
    let w = |p: &'static str, t: &str| Change::Write(p, t.to_owned());
    let mut said = Vec::new();
    let context = match retry {
        Some(r) => format!(
            "attempt {attempt}, after attempt {} failed ({})",
            r.attempt, r.failure.reason
        ),
        None if attempt > 1 => format!("attempt {attempt}, with no retry context"),
        None => format!("attempt {attempt}"),
    };
    said.push(format!("demo agent: {task}, {context}"));
    let changes = match task {
        "upper" => vec![
            w("src/upper.sh", UPPER),
            w("tests/test_upper.sh", TEST_UPPER),
        ],
        "reverse" => {
            let condition = if names_failing_test(retry) {
                said.push(format!(
                    "the retry context names the failing test {REVERSE_TEST:?}: the loop stopped while one character was left; it now runs until none is"
                ));
                REVERSE_FIXED_CONDITION
            } else {
                REVERSE_BUGGY_CONDITION
            };
            vec![
                Change::Write("src/reverse.sh", reverse_source(condition)),
                Change::Write("tests/test_reverse.sh", test_reverse()),
            ]
        }
        "wordcount" => {
            let mut changes = vec![
                w("src/wordcount.sh", WORDCOUNT),
                w("tests/test_wordcount.sh", TEST_WORDCOUNT),
            ];
            if names_out_of_scope(retry, OUT_OF_SCOPE_FILE) {
                said.push(format!(
                    "the retry context says {OUT_OF_SCOPE_FILE} is not mine to change; leaving it alone"
                ));
            } else {
                said.push(format!("also adding a usage line to {OUT_OF_SCOPE_FILE}"));
                changes.push(Change::Append(
                    OUT_OF_SCOPE_FILE,
                    WORDCOUNT_README.to_owned(),
                ));
            }
            changes
        }
        "shout" => vec![
            w("src/shout.sh", SHOUT),
            w("tests/test_shout.sh", TEST_SHOUT),
        ],
        "ci" => vec![w("ci/check.sh", CI_CHECK)],
        other => return Err(AgentError::UnknownTask(other.to_owned())),
    };
    let paths: Vec<&str> = changes.iter().map(Change::path).collect();
    said.push(format!("wrote {}", paths.join(", ")));
    Ok(Work { changes, said })
}

/// Reads the retry context the runner left; a missing or unreadable file is
/// no context (and said so), exactly as an agent that was told nothing.
pub fn read_context(path: Option<&Path>) -> (Option<RetryContext>, Option<String>) {
    let Some(path) = path else {
        return (None, None);
    };
    match std::fs::read(path) {
        Ok(bytes) => match serde_json::from_slice(&bytes) {
            Ok(ctx) => (Some(ctx), None),
            Err(e) => (
                None,
                Some(format!(
                    "the retry context {} is not valid JSON ({e}); going on without it",
                    path.display()
                )),
            ),
        },
        Err(e) => (
            None,
            Some(format!(
                "cannot read the retry context {} ({e}); going on without it",
                path.display()
            )),
        ),
    }
}

/// Does the work of one attempt in `workdir`; returns what the agent says.
pub fn act(
    workdir: &Path,
    task: Option<&str>,
    attempt: u32,
    retry_file: Option<&Path>,
) -> Result<Vec<String>, AgentError> {
    let task = task.filter(|t| !t.is_empty()).ok_or(AgentError::NoTask)?;
    let (retry, problem) = read_context(retry_file);
    let mut work = work(task, attempt, retry.as_ref())?;
    if let Some(p) = problem {
        work.said.insert(1, p);
    }
    for change in &work.changes {
        let path = workdir.join(change.path());
        let io = |source| AgentError::Write {
            path: path.clone(),
            source,
        };
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(io)?;
        }
        match change {
            Change::Write(_, text) => std::fs::write(&path, text).map_err(io)?,
            Change::Append(_, text) => {
                use std::io::Write;
                std::fs::OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&path)
                    .and_then(|mut f| f.write_all(text.as_bytes()))
                    .map_err(io)?
            }
        }
    }
    Ok(work.said)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Failure, FailureClass};
    use crate::gate::context::ContextFailure;

    fn context(failing_tests: &[&str], out_of_scope: &[&str]) -> RetryContext {
        RetryContext {
            version: 1,
            task: "t".into(),
            attempt: 1,
            failure: Failure {
                class: FailureClass::Gate,
                reason: "a gate failed".into(),
            },
            failures: vec![ContextFailure {
                gate: "test".into(),
                command: Some("sh test.sh".into()),
                summary: "failed".into(),
                tail: String::new(),
                failing_tests: failing_tests.iter().map(|s| s.to_string()).collect(),
                out_of_scope_paths: out_of_scope.iter().map(|s| s.to_string()).collect(),
                secrets: Vec::new(),
                conflicts: Vec::new(),
                findings: Vec::new(),
            }],
            previous: None,
        }
    }

    fn reverse_source_of(work: &Work) -> &str {
        match &work.changes[0] {
            Change::Write("src/reverse.sh", text) => text,
            other => panic!("unexpected change {other:?}"),
        }
    }

    #[test]
    fn reverse_is_fixed_only_when_the_context_names_the_failing_test() {
        let buggy = work("reverse", 1, None).expect("known task");
        assert!(reverse_source_of(&buggy).contains(REVERSE_BUGGY_CONDITION));
        // A second attempt that was told nothing repeats the bug.
        let blind = work("reverse", 2, None).expect("known task");
        assert!(reverse_source_of(&blind).contains(REVERSE_BUGGY_CONDITION));
        let other = work("reverse", 2, Some(&context(&["something else"], &[]))).expect("known");
        assert!(reverse_source_of(&other).contains(REVERSE_BUGGY_CONDITION));
        let told = work("reverse", 2, Some(&context(&[REVERSE_TEST], &[]))).expect("known");
        assert!(reverse_source_of(&told).contains(REVERSE_FIXED_CONDITION));
    }

    #[test]
    fn wordcount_stays_in_scope_only_when_told() {
        let touches = |w: &Work| w.changes.iter().any(|c| c.path() == OUT_OF_SCOPE_FILE);
        assert!(touches(&work("wordcount", 1, None).expect("known")));
        assert!(touches(&work("wordcount", 2, None).expect("known")));
        let told = work("wordcount", 2, Some(&context(&[], &[OUT_OF_SCOPE_FILE]))).expect("known");
        assert!(!touches(&told));
    }

    #[test]
    fn unknown_tasks_and_missing_env_are_errors() {
        assert!(matches!(
            work("nope", 1, None),
            Err(AgentError::UnknownTask(_))
        ));
        let dir = tempfile::tempdir().expect("tmp");
        assert!(matches!(
            act(dir.path(), None, 1, None),
            Err(AgentError::NoTask)
        ));
    }

    #[test]
    fn a_broken_context_file_is_no_context() {
        let dir = tempfile::tempdir().expect("tmp");
        let file = dir.path().join("ctx.json");
        std::fs::write(&file, "{not json").expect("write");
        let said = act(dir.path(), Some("reverse"), 2, Some(&file)).expect("acts");
        assert!(
            said.iter().any(|l| l.contains("not valid JSON")),
            "{said:?}"
        );
        let text = std::fs::read_to_string(dir.path().join("src/reverse.sh")).expect("written");
        assert!(text.contains(REVERSE_BUGGY_CONDITION));
    }

    #[test]
    fn every_task_writes_only_inside_its_owned_globs_when_told() {
        let plan = crate::plan::format::parse(
            &serde_json::to_vec(&super::super::project::plan()).expect("json"),
        )
        .expect("valid");
        for task in TASKS {
            let sub = plan.subtask(task).expect("the plan has every task");
            let m: Vec<_> = sub
                .owned_globs
                .iter()
                .map(|g| crate::plan::glob::matcher(g))
                .collect();
            let told = context(&[REVERSE_TEST], &[OUT_OF_SCOPE_FILE]);
            for change in work(task, 2, Some(&told)).expect("known").changes {
                assert!(
                    m.iter().any(|m| m.is_match(change.path())),
                    "{task} writes {} outside {:?}",
                    change.path(),
                    sub.owned_globs
                );
            }
        }
    }
}
