//! The demo's project and plan: `tt`, a tiny text toolkit in POSIX shell
//! (one function per `src/<name>.sh`, its checks in `tests/test_<name>.sh`,
//! `sh test.sh` runs them all), and the plan of five subtasks that grows it.
//!
//! Everything here is data. The project needs only a POSIX shell and the
//! standard utilities (`tr`, `wc`), so it runs offline on a fresh machine;
//! its tests print TAP lines (`not ok 2 - reverse: keeps every character`),
//! which the test gate turns into failing test names for the retry context.
//! The code the subtasks write is in `agent.rs`.

use serde_json::json;

/// The plan's id, as the commands the demo shows name it.
pub const PLAN_ID: &str = "tt-features";

/// The branch the project lives on and results land on.
pub const TARGET: &str = "main";

/// The name of the scripted agent in `.orch/config`.
pub const DEMO_AGENT: &str = "demo";

/// The message of the project's first commit.
pub const SEED_MESSAGE: &str = "tt: a tiny text toolkit with lower and its tests";

const README: &str = "\
# tt: a tiny text toolkit

Shell functions for text, one per file in `src/`, each with its checks in
`tests/test_<name>.sh`. Needs only a POSIX shell.

    sh tt.sh lower 'Hello'    # hello
    sh test.sh                # runs every test file
";

const TT: &str = r##"#!/bin/sh
# tt: a tiny text toolkit. Usage: sh tt.sh FUNCTION TEXT...
here=$(dirname "$0")
for f in "$here"/src/*.sh; do
	[ -e "$f" ] && . "$f"
done
if [ $# -lt 1 ]; then
	echo "usage: sh tt.sh FUNCTION TEXT..." >&2
	exit 2
fi
name=$1
shift
case $name in
'' | *[!a-z]*) fn=- ;;
*) fn=$name ;;
esac
if [ ! -f "$here/src/$fn.sh" ]; then
	echo "tt: no function $name; the functions are the files in src/" >&2
	exit 2
fi
"$fn" "$*"
"##;

const TEST_SH: &str = r##"#!/bin/sh
# Runs every tests/test_*.sh; fails if any check failed.
cd "$(dirname "$0")" || exit 1
status=0
for t in tests/test_*.sh; do
	[ -e "$t" ] || continue
	echo "# $t"
	sh "$t" || status=1
done
if [ "$status" -eq 0 ]; then
	echo "# all tests passed"
else
	echo "# some tests failed"
fi
exit "$status"
"##;

const TEST_LIB: &str = r##"# Sourced by every test file, from the project's root: loads the toolkit
# and prints one TAP line per check ("ok 1 - name" or "not ok 1 - name").
for f in src/*.sh; do
	[ -e "$f" ] && . "./$f"
done
n=0
failed=0
check() { # NAME EXPECTED ACTUAL
	n=$((n + 1))
	if [ "$2" = "$3" ]; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1"
		echo "#   expected: '$2'"
		echo "#   actual:   '$3'"
		failed=1
	fi
}
finish() {
	exit "$failed"
}
"##;

const LOWER: &str = r##"# lower TEXT: TEXT in lower case.
lower() {
	printf '%s\n' "$1" | tr '[:upper:]' '[:lower:]'
}
"##;

const TEST_LOWER: &str = r##". ./tests/lib.sh
check "lower: upper case becomes lower case" "hello" "$(lower HeLLo)"
check "lower: other characters stay" "a-1 b!" "$(lower 'A-1 B!')"
finish
"##;

const CI_README: &str = "Scripts that CI runs; the plan adds ci/check.sh.\n";

/// The committed settings: a test gate on every attempt, the same suite as
/// the merge queue's integration gate, and the scripted agent as the
/// default. `git-orch` is found on PATH, as `git orch` finds it.
pub const ORCH_CONFIG: &str = r##"# git-orch settings for this project (git-config syntax).
[orch]
	target = main
	cap = 4
	agent = demo
# Every attempt's result must pass the whole suite...
[gate "test"]
	run = sh test.sh
	mode = block
	timeout = 120
# ...and so must every candidate the merge queue builds on main.
[integration]
	run = sh test.sh
# The demo's scripted, offline agent (see `git orch demo --help`).
[agent "demo"]
	kind = command
	command = git-orch demo-agent
"##;

/// The files of the project's first commit, as (path, contents).
pub fn seed_files() -> Vec<(&'static str, &'static str)> {
    vec![
        ("README.md", README),
        ("tt.sh", TT),
        ("test.sh", TEST_SH),
        ("tests/lib.sh", TEST_LIB),
        ("src/lower.sh", LOWER),
        ("tests/test_lower.sh", TEST_LOWER),
        ("ci/README", CI_README),
        (".orch/config", ORCH_CONFIG),
    ]
}

/// The plan: three independent functions, one that needs `upper`, and a CI
/// script that owns a pinch point (`ci/**`) and so runs alone.
pub fn plan() -> serde_json::Value {
    let function = |id: &str, title: &str, deliverable: &str| {
        json!({
            "id": id,
            "title": title,
            "owned_globs": [format!("src/{id}.sh"), format!("tests/test_{id}.sh")],
            "deliverable": deliverable,
            "verification": format!("sh tests/test_{id}.sh"),
        })
    };
    let mut shout = function(
        "shout",
        "shout: upper case with an exclamation mark",
        "src/shout.sh defines shout TEXT, printing upper TEXT followed by '!', with checks in tests/test_shout.sh",
    );
    shout["depends_on"] = json!(["upper"]);
    json!({
        "version": 1,
        "id": PLAN_ID,
        "instruction": "Add upper, reverse, wordcount and shout to tt, each with its tests, and a CI script that checks the whole project",
        "target": TARGET,
        "subtasks": [
            function(
                "upper",
                "upper: text to upper case",
                "src/upper.sh defines upper TEXT, printing TEXT in upper case, with checks in tests/test_upper.sh",
            ),
            function(
                "reverse",
                "reverse: text backwards",
                "src/reverse.sh defines reverse TEXT, printing TEXT backwards, with checks in tests/test_reverse.sh",
            ),
            function(
                "wordcount",
                "wordcount: count the words of a text",
                "src/wordcount.sh defines wordcount TEXT, printing the number of words in TEXT, with checks in tests/test_wordcount.sh",
            ),
            shout,
            {
                "id": "ci",
                "title": "A CI script for the whole project",
                "owned_globs": ["ci/**"],
                "deliverable": "ci/check.sh checks that every script parses, that every src/<name>.sh has tests/test_<name>.sh, and runs sh test.sh",
                "verification": "sh ci/check.sh",
            },
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_is_valid_and_owns_disjoint_files() {
        let bytes = serde_json::to_vec(&plan()).expect("serialises");
        let plan = crate::plan::format::parse(&bytes).expect("the demo plan is valid");
        assert_eq!(plan.id.as_str(), PLAN_ID);
        assert_eq!(plan.subtasks.len(), 5);
        let mut globs: Vec<&String> = plan.subtasks.iter().flat_map(|s| &s.owned_globs).collect();
        let n = globs.len();
        globs.sort();
        globs.dedup();
        assert_eq!(globs.len(), n);
    }

    #[test]
    fn the_seed_holds_the_config_the_plan_relies_on() {
        let files = seed_files();
        let config = files
            .iter()
            .find(|(p, _)| *p == ".orch/config")
            .expect("config");
        assert!(config.1.contains("[integration]"));
        assert!(config.1.contains(&format!("[agent \"{DEMO_AGENT}\"]")));
    }
}
