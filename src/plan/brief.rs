//! The brief for a lead agent: everything it needs to write a plan for one
//! instruction, in one self-contained text.
//!
//! The format rules are written out here rather than pointed to, because
//! the agent reads the user's repository, where git-orch's docs are not.
//! The skeleton is a real plan in its natural key order (`version`, `id`,
//! `instruction`, then subtasks with `id`, `title`, `owned_globs`, …), the
//! repository summary is made to choose globs from (top folders with counts
//! and sample paths, manifests and their lockfiles, migrations, CI), and
//! the pinch list is [`super::pinch::present`], the very list `plan check`
//! applies. For the rounds of `plan new --agent`, [`round_context`] tells
//! the agent what the last check found.
//!
//! Pure: the caller reads the tree and the settings.

use std::collections::BTreeMap;

use serde::Serialize;

use super::analysis::{Analysis, MIN_INDEPENDENT, Severity};
use super::pinch::{self, PinchKind, PinchRule};

/// Pinch points and manifests listed before "… and N more".
const MAX_LISTED: usize = 200;
/// Sample paths per top folder.
const SAMPLES: usize = 3;
/// Subfolders listed per large top folder.
const SUBFOLDERS: usize = 12;

/// What the brief is about.
#[derive(Debug, Clone, Copy)]
pub struct BriefInput<'a> {
    pub instruction: &'a str,
    /// How the checked commit is named (`HEAD (0123abcd4567)`).
    pub base: &'a str,
    /// Its files.
    pub paths: &'a [String],
    /// The pinch rules `plan check` applies at that commit.
    pub rules: &'a [PinchRule],
    /// Where the agent writes the plan, when git-orch runs it.
    pub plan_file: Option<&'a str>,
}

/// A skeleton subtask, in the order a person reads one.
#[derive(Serialize)]
struct SkeletonSubtask {
    id: &'static str,
    title: &'static str,
    owned_globs: Vec<&'static str>,
    deliverable: &'static str,
    verification: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    depends_on: Vec<&'static str>,
}

/// The skeleton plan, in natural key order.
#[derive(Serialize)]
struct Skeleton<'a> {
    version: u32,
    id: String,
    instruction: &'a str,
    subtasks: Vec<SkeletonSubtask>,
}

/// A kebab-case id made from the instruction's first words.
pub fn slug(instruction: &str) -> String {
    let words: Vec<String> = instruction
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(5)
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let mut s: String = words.join("-").chars().take(48).collect();
    while s.ends_with('-') {
        s.pop();
    }
    if s.is_empty() { "plan".into() } else { s }
}

/// The plan skeleton for `instruction` as pretty JSON, keys in natural
/// order: a file to start from (`plan new --skeleton`).
pub fn skeleton(instruction: &str) -> String {
    let plan = Skeleton {
        version: super::format::PLAN_VERSION,
        id: slug(instruction),
        instruction,
        subtasks: vec![
            SkeletonSubtask {
                id: "first-piece",
                title: "What this subtask delivers, in a few words",
                owned_globs: vec!["src/first/**", "tests/first_*.rs"],
                deliverable: "What exists when it is done",
                verification: "a command that fails until it is done, e.g. cargo test first",
                depends_on: Vec::new(),
            },
            SkeletonSubtask {
                id: "second-piece",
                title: "Another piece, with files no other subtask owns",
                owned_globs: vec!["src/second/**", "!src/second/generated/**"],
                deliverable: "What exists when it is done",
                verification: "cargo test second",
                depends_on: Vec::new(),
            },
            SkeletonSubtask {
                id: "third-piece",
                title: "A piece that needs the first one's result to start",
                owned_globs: vec!["docs/first.md"],
                deliverable: "What exists when it is done",
                verification: "test -s docs/first.md",
                depends_on: vec!["first-piece"],
            },
        ],
    };
    serde_json::to_string_pretty(&plan).expect("the skeleton serialises")
}

/// The format, glob and rule sections: the same for every repository.
fn rules_text(instruction: &str, plan_file: Option<&str>) -> String {
    let write_to = match plan_file {
        Some(f) => format!(
            "Write the plan as JSON to the file {f} (its path is also in the environment\n\
             variable ORCH_PLAN_FILE). Change no other file: this checkout of the repository\n\
             is read-only, and whatever else you change is thrown away."
        ),
        None => {
            "Write the plan as JSON to a file (plan.json, outside the work tree is best).".into()
        }
    };
    format!(
        "# Plan brief\n\
\n\
Instruction: {instruction}\n\
\n\
You are the lead agent. Split the instruction into subtasks that coding agents\n\
will carry out in parallel, each in its own git worktree and branch of this\n\
repository, and write the plan that says who does what. Read the repository as\n\
much as you need to choose good subtasks and globs. {write_to}\n\
\n\
## The plan format\n\
\n\
One JSON object (UTF-8), with these keys in this order:\n\
\n\
- \"version\": 1\n\
- \"id\": the plan id: kebab-case (lower-case letters, digits, single dashes), at most 64 bytes\n\
- \"instruction\": the instruction above\n\
- \"subtasks\": a list of at least one subtask, each an object with:\n\
  - \"id\": kebab-case, unique within the plan\n\
  - \"title\": a few words\n\
  - \"owned_globs\": the files this subtask alone may change (globs, below); at least one\n\
  - \"deliverable\": what exists when it is done\n\
  - \"verification\": a shell command, run at the repository root, whose success proves it done\n\
  - \"depends_on\" (optional): ids of subtasks whose results must land before this one starts\n\
  - \"serial_only\" (optional): true when it must not run beside any other subtask\n\
\n\
Optional, rarely needed: \"target\" (the branch results land on), and per plan or\n\
subtask \"gates\", per subtask \"agent\", \"branch\", \"retries\". Any other key is an\n\
error. `git orch plan schema` prints the JSON Schema.\n\
\n\
## Globs\n\
\n\
Paths relative to the repository root, with / as the separator. * and ? never\n\
match /; ** as a whole component spans any number of folders (src/** is every\n\
file under src/, **/*.rs every .rs file); {{a,b}} alternates; [abc] and [!abc]\n\
are character classes. No absolute paths, no . or .. components, nothing under\n\
.git; a backslash only escapes a special character.\n\
\n\
An entry starting with ! is an exclusion: the subtask owns what its other globs\n\
match, minus what any of its exclusions match, whatever the order. For example\n\
[\"crates/core/flags/**\", \"!crates/core/flags/complete/**\"] owns everything under\n\
crates/core/flags/ except complete/. Exclusions only take files away from the\n\
subtask that lists them. A file whose name starts with ! is written \\!name\n\
in the glob (\"\\\\!name\" inside a JSON string).\n\
\n\
## Rules (`git orch plan check` enforces them; blocking ones must be fixed)\n\
\n\
1. Sole ownership (blocking): no file may be owned by two subtasks, including\n\
   files that do not exist yet. Two globs that could both match some new path\n\
   overlap; use disjoint folders, or exclusions.\n\
2. Pinch points: lockfiles, migrations, CI and build configuration, deploy\n\
   manifests and generated barrels (the list for this repository is below). A\n\
   subtask that owns one runs alone (serial_only); two subtasks owning the same\n\
   one is blocking. Keep them out of the parallel pieces where you can.\n\
3. Manifests and lockfiles: changing a dependency or a version in a manifest\n\
   (Cargo.toml, package.json, pyproject.toml, go.mod, …) rewrites its lockfile\n\
   (Cargo.lock, package-lock.json, uv.lock, go.sum, …), and a subtask may only\n\
   change files it owns. So the one subtask that changes dependencies owns the\n\
   manifest and its lockfile (it then runs serial_only), and subtasks that need\n\
   the new dependency depend_on it. The others leave dependencies alone.\n\
4. Fan-out: aim for at least {MIN_INDEPENDENT} subtasks that can start at once (no\n\
   depends_on, not serial, no shared files). With fewer, one agent is usually\n\
   faster and cheaper; say so with a plan of one subtask.\n\
5. Each verification is a real command that fails until that subtask is done\n\
   and checks that subtask only: not true, not echo, not the same command for\n\
   every subtask.\n\
6. Use depends_on only where a subtask needs another's result to start; never in\n\
   a cycle, never naming an unknown id.\n"
    )
}

fn files(n: usize) -> String {
    format!("{n} file{}", if n == 1 { "" } else { "s" })
}

/// Files per top folder, with samples, for choosing globs.
fn tree_summary(paths: &[String]) -> Vec<String> {
    let mut root: Vec<&str> = Vec::new();
    let mut top: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for p in paths {
        match p.split_once('/') {
            None => root.push(p),
            Some((first, _)) => top.entry(first).or_default().push(p),
        }
    }
    let mut lines = Vec::new();
    let shown: Vec<&str> = root.iter().take(12).copied().collect();
    lines.push(format!(
        "  (root)  {}: {}{}",
        files(root.len()),
        shown.join(", "),
        if root.len() > shown.len() {
            ", …"
        } else {
            ""
        }
    ));
    for (dir, files) in top {
        // Samples from different subfolders where there are several.
        let mut samples: Vec<&str> = Vec::new();
        let mut seen_sub: Vec<&str> = Vec::new();
        for f in &files {
            let sub = f.split('/').nth(1).unwrap_or_default();
            if !seen_sub.contains(&sub) {
                seen_sub.push(sub);
                samples.push(f);
            }
            if samples.len() == SAMPLES {
                break;
            }
        }
        lines.push(format!(
            "  {dir}/  {}, e.g. {}",
            self::files(files.len()),
            samples.join(", ")
        ));
        if files.len() > 50 {
            let mut subs: BTreeMap<&str, usize> = BTreeMap::new();
            for f in &files {
                let mut parts = f.splitn(3, '/');
                parts.next();
                if let (Some(sub), Some(_)) = (parts.next(), parts.next()) {
                    *subs.entry(sub).or_default() += 1;
                }
            }
            let mut subs: Vec<(&str, usize)> = subs.into_iter().collect();
            subs.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            for (sub, n) in subs.iter().take(SUBFOLDERS) {
                lines.push(format!("    {dir}/{sub}/  {}", self::files(*n)));
            }
            if subs.len() > SUBFOLDERS {
                lines.push(format!("    … {} more folders", subs.len() - SUBFOLDERS));
            }
        }
    }
    lines
}

fn listed(items: &[String], what: &str) -> Vec<String> {
    let mut out: Vec<String> = items
        .iter()
        .take(MAX_LISTED)
        .map(|i| format!("  - {i}"))
        .collect();
    if items.len() > MAX_LISTED {
        out.push(format!(
            "  … and {} more {what} (`git orch plan check --json` lists them all)",
            items.len() - MAX_LISTED
        ));
    }
    if out.is_empty() {
        out.push("  (none)".into());
    }
    out
}

/// The pinch list as the brief prints it: one `unit (kind)` per line.
pub fn pinch_lines(points: &[pinch::PinchPoint]) -> Vec<String> {
    points
        .iter()
        .map(|p| format!("{} ({})", p.unit, p.kind.describe()))
        .collect()
}

/// The whole brief.
pub fn render(input: &BriefInput) -> String {
    let points = pinch::present(input.paths, input.rules);
    let locked = pinch::locked_manifests(input.paths, &points);
    let mut out = rules_text(input.instruction, input.plan_file);
    out.push_str("\n## Skeleton\n\n");
    out.push_str(&skeleton(input.instruction));
    out.push('\n');
    out.push_str(&format!(
        "\n## This repository at {}: {}\n\nFolders (files, sample paths):\n",
        input.base,
        files(input.paths.len())
    ));
    for l in tree_summary(input.paths) {
        out.push_str(&l);
        out.push('\n');
    }
    // Lockfiles with the manifests they lock, so a dependency change can be
    // given to the right subtask.
    let mut by_lock: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for l in &locked {
        by_lock.entry(&l.lockfile).or_default().push(&l.manifest);
    }
    let lockfiles: Vec<String> = points
        .iter()
        .filter(|p| p.kind == PinchKind::Lockfile)
        .map(|p| match by_lock.get(p.unit.as_str()) {
            Some(m) => format!(
                "{} locks {} manifest{}: {}{}",
                p.unit,
                m.len(),
                if m.len() == 1 { "" } else { "s" },
                m.iter().take(5).copied().collect::<Vec<_>>().join(", "),
                if m.len() > 5 { ", …" } else { "" }
            ),
            None => p.unit.clone(),
        })
        .collect();
    let lock_of: BTreeMap<&str, &str> = locked
        .iter()
        .map(|l| (l.manifest.as_str(), l.lockfile.as_str()))
        .collect();
    let manifests: Vec<String> = pinch::manifests(input.paths)
        .into_iter()
        .map(|m| match lock_of.get(m) {
            Some(l) => format!("{m} (locked by {l})"),
            None => format!("{m} (no lockfile)"),
        })
        .collect();
    out.push_str("\nManifests (dependencies):\n");
    for l in listed(&manifests, "manifests") {
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str("\nLockfiles and the manifests they lock:\n");
    for l in listed(&lockfiles, "lockfiles") {
        out.push_str(&l);
        out.push('\n');
    }
    for (title, kind) in [
        ("Migrations", PinchKind::Migration),
        ("CI configuration", PinchKind::Ci),
    ] {
        let units: Vec<String> = points
            .iter()
            .filter(|p| p.kind == kind)
            .map(|p| p.unit.clone())
            .collect();
        out.push_str(&format!("\n{title}:\n"));
        for l in listed(&units, "folders") {
            out.push_str(&l);
            out.push('\n');
        }
    }
    out.push_str("\n## Pinch points (exactly what `git orch plan check` applies here)\n\n");
    for l in listed(&pinch_lines(&points), "pinch points") {
        out.push_str(&l);
        out.push('\n');
    }
    out.push_str("\n## When the plan is written\n\n");
    match input.plan_file {
        Some(_) => out.push_str(
            "git-orch checks it as `git orch plan check` does. If the check finds blocking\n\
             problems, you get them in the next round with your plan in the same file, to\n\
             fix it there.\n",
        ),
        None => out.push_str(
            "Check it with `git orch plan check plan.json`, fix what blocks, then store it\n\
             with `git orch plan add plan.json` and ask for approval (`git orch approve <id>`).\n",
        ),
    }
    out
}

/// What the last round's check found, one line each, blocking first.
pub fn findings_text(analysis: &Analysis) -> Vec<String> {
    let mut lines = Vec::new();
    for severity in [Severity::Blocking, Severity::Warning] {
        for f in analysis.findings.iter().filter(|f| f.severity == severity) {
            let label = match severity {
                Severity::Blocking => "blocking",
                Severity::Warning | Severity::Info => "warning",
            };
            lines.push(format!("- {label} [{}] {}", f.code, f.message));
        }
    }
    lines
}

/// The part of a later round's prompt that says why the last plan did not
/// pass: `problems` are the findings (or the reason no plan could be
/// read).
pub fn round_context(round: u32, rounds: u32, plan_file: &str, problems: &[String]) -> String {
    let mut out = format!(
        "\n## Round {round} of {rounds}: your last plan did not pass the check\n\n\
         The file {plan_file} holds the plan you wrote last round (if you wrote one).\n\
         Fix it there: keep what was fine, change what the check found. Blocking\n\
         problems must go; warnings are worth a look.\n\nThe check found:\n"
    );
    for p in problems {
        out.push_str(p);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_skeleton_is_a_valid_plan_in_natural_key_order() {
        let text = skeleton("Add a checkout flow");
        let plan = super::super::format::parse(text.as_bytes()).expect("the skeleton parses");
        assert_eq!(plan.id.as_str(), "add-a-checkout-flow");
        let at = |needle: &str| text.find(needle).unwrap_or_else(|| panic!("{needle}"));
        assert!(at("\"version\"") < at("\"id\"") && at("\"id\"") < at("\"instruction\""));
        assert!(at("\"instruction\"") < at("\"subtasks\""));
        assert!(
            at("\"title\"") < at("\"owned_globs\"")
                && at("\"owned_globs\"") < at("\"deliverable\"")
        );
        assert!(at("\"deliverable\"") < at("\"verification\""));
    }

    #[test]
    fn the_brief_is_self_contained() {
        let tree = paths(&[
            "Cargo.toml",
            "Cargo.lock",
            "crates/a/Cargo.toml",
            "fuzz/Cargo.toml",
            "fuzz/Cargo.lock",
            ".github/workflows/ci.yml",
            "src/main.rs",
        ]);
        let rules = super::super::pinch::rules(&[], &[]);
        let text = render(&BriefInput {
            instruction: "Do it",
            base: "HEAD (0123456789ab)",
            paths: &tree,
            rules: &rules,
            plan_file: Some("/tmp/x/plan.json"),
        });
        assert!(
            !text.contains("docs/plans.md"),
            "points outside the user's repository"
        );
        for needle in [
            "Instruction: Do it",
            "ORCH_PLAN_FILE",
            "/tmp/x/plan.json",
            "!crates/core/flags/complete/**",
            "git orch plan schema",
            "  - fuzz/Cargo.lock (lockfile)",
            "  - Cargo.lock (lockfile)",
            "Cargo.lock locks 2 manifests: Cargo.toml, crates/a/Cargo.toml",
            "fuzz/Cargo.lock locks 1 manifest: fuzz/Cargo.toml",
            "  - .github/workflows",
            "src/  1 file, e.g. src/main.rs",
            "  - crates/a/Cargo.toml (locked by Cargo.lock)",
            "  - fuzz/Cargo.toml (locked by fuzz/Cargo.lock)",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
    }

    #[test]
    fn slugs_are_ids() {
        for s in [
            "Add a checkout flow",
            "!!!",
            "Ünïcode only",
            "a-",
            &"long ".repeat(30),
        ] {
            crate::ids::check("plan", &slug(s)).expect(s);
        }
    }
}
