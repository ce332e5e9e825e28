//! Plan analysis benchmark: a generated plan of 1,000 subtasks against a
//! generated tree of 100,000 paths, beside the strongest simple baseline
//! for its core question (which subtasks own the same existing path), in
//! the same run: every glob of every subtask in one `globset::GlobSet`,
//! one pass over the paths, each path's owners paired up. git-orch's check
//! does more (parsing, validation, the dependency graph, pattern-level
//! overlaps for paths that do not exist yet, pinch points), so the ratio
//! is an upper bound on its overhead. (The naive way, one matcher per glob
//! tried on every path, took 160x git-orch's time; it is not run.)
//!
//! Run with `cargo bench --bench plan_check`. Not a test: it asserts that
//! the sides agree on the overlaps, not how fast they are.

use std::collections::BTreeSet;
use std::time::Instant;

use git_orch::plan::{self, pinch};

const SUBTASKS: usize = 1_000;
const PATHS: usize = 100_000;

/// 1,000 modules of 100 files in 10 directories, with tests beside them.
fn tree() -> Vec<String> {
    let mut paths = Vec::with_capacity(PATHS);
    for m in 0..SUBTASKS {
        for d in 0..9 {
            for f in 0..10 {
                paths.push(format!("src/m{m:04}/d{d}/f{f}.rs"));
            }
        }
        for f in 0..10 {
            paths.push(format!("tests/m{m:04}_{f}.rs"));
        }
    }
    paths.truncate(PATHS - 4);
    paths.extend(
        [
            "Cargo.toml",
            "Cargo.lock",
            "README.md",
            ".github/workflows/ci.yml",
        ]
        .map(String::from),
    );
    paths
}

/// Each subtask owns its module and its tests; three pairs overlap on
/// purpose so both sides have something to find.
fn plan_text() -> String {
    let subtasks: Vec<serde_json::Value> = (0..SUBTASKS)
        .map(|m| {
            let mut globs = vec![format!("src/m{m:04}/**"), format!("tests/m{m:04}_*.rs")];
            if m < 3 {
                globs.push(format!("src/m{:04}/d0/*.rs", m + 500));
            }
            if m == 999 {
                globs.push("Cargo.lock".into());
            }
            serde_json::json!({
                "id": format!("t{m:04}"), "title": format!("module {m}"), "owned_globs": globs,
                "deliverable": "done", "verification": format!("cargo test -p m{m:04}"),
            })
        })
        .collect();
    serde_json::json!({"version": 1, "id": "bench", "instruction": "bench", "subtasks": subtasks})
        .to_string()
}

fn main() {
    let paths = tree();
    let text = plan_text();
    let rules = pinch::rules(&[], &[]);
    println!(
        "plan check benchmark: {SUBTASKS} subtasks, {} paths",
        paths.len()
    );

    let mut best = f64::MAX;
    let mut analysis = None;
    for _ in 0..3 {
        let start = Instant::now();
        let plan = plan::parse(text.as_bytes()).expect("valid plan");
        let a = plan::analyse(&plan, &paths, &rules);
        best = best.min(start.elapsed().as_secs_f64());
        analysis = Some(a);
    }
    let analysis = analysis.expect("ran");
    let ours: BTreeSet<(String, String)> = analysis
        .findings
        .iter()
        .filter(|f| f.code == "ownership-overlap" && f.details["count"].as_u64() > Some(0))
        .map(|f| (f.subtasks[0].clone(), f.subtasks[1].clone()))
        .collect();

    // Baseline: every glob in one GlobSet, one pass over the paths.
    let plan = plan::parse(text.as_bytes()).expect("valid plan");
    let mut owner_of_glob: Vec<usize> = Vec::new();
    let mut builder = globset::GlobSetBuilder::new();
    for (t, s) in plan.subtasks.iter().enumerate() {
        for g in &s.owned_globs {
            builder.add(plan::glob::compile(g).expect("valid glob"));
            owner_of_glob.push(t);
        }
    }
    let pairs_of = |owners: &mut Vec<usize>, found: &mut BTreeSet<(String, String)>| {
        owners.sort_unstable();
        owners.dedup();
        for (i, a) in owners.iter().enumerate() {
            for b in &owners[i + 1..] {
                found.insert((
                    plan.subtasks[*a].id.to_string(),
                    plan.subtasks[*b].id.to_string(),
                ));
            }
        }
    };
    let mut set_secs = f64::MAX;
    let mut build_secs = f64::MAX;
    let mut set_found = BTreeSet::new();
    for _ in 0..3 {
        let start = Instant::now();
        let set = builder.build().expect("glob set");
        build_secs = build_secs.min(start.elapsed().as_secs_f64());
        let mut found: BTreeSet<(String, String)> = BTreeSet::new();
        let mut hits = Vec::new();
        let mut owners = Vec::new();
        for p in &paths {
            set.matches_into(p, &mut hits);
            if hits.len() < 2 {
                continue;
            }
            owners.clear();
            owners.extend(hits.iter().map(|&g| owner_of_glob[g]));
            pairs_of(&mut owners, &mut found);
        }
        set_secs = set_secs.min(start.elapsed().as_secs_f64());
        set_found = found;
    }
    assert_eq!(
        ours, set_found,
        "both sides must find the same real-file overlaps"
    );

    println!(
        "  git-orch plan check (parse + full analysis)         {:>8.1} ms  (target < 1000 ms)",
        best * 1e3
    );
    println!(
        "  baseline: one GlobSet of {} globs, one pass       {:>8.1} ms  (real-file overlaps only; building the set: {:.1} ms)",
        owner_of_glob.len(),
        set_secs * 1e3,
        build_secs * 1e3
    );
    println!(
        "  ratio git-orch / baseline {:.3}x (git-orch {:.1}x faster; target: faster)",
        best / set_secs,
        set_secs / best
    );
    println!(
        "  findings: {} ({} blocking), {} real-file overlapping pairs",
        analysis.findings.len(),
        analysis.blocking(),
        ours.len()
    );
}
