//! Plan analysis benchmark: a generated plan of 1,000 subtasks against a
//! generated tree of 100,000 paths, beside a naive baseline that matches
//! every path against every glob one at a time, in the same run.
//!
//! Run with `cargo bench --bench plan_check`. Not a test: it asserts that
//! both sides agree on the overlaps, not how fast they are.

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

    // Naive: every path against every glob, one matcher at a time.
    let plan = plan::parse(text.as_bytes()).expect("valid plan");
    let matchers: Vec<(usize, globset::GlobMatcher)> = plan
        .subtasks
        .iter()
        .enumerate()
        .flat_map(|(t, s)| {
            s.owned_globs
                .iter()
                .map(move |g| (t, plan::glob::matcher(g)))
        })
        .collect();
    let start = Instant::now();
    let mut naive: BTreeSet<(String, String)> = BTreeSet::new();
    let mut owners = Vec::new();
    for p in &paths {
        owners.clear();
        for (t, m) in &matchers {
            if m.is_match(p) && !owners.contains(t) {
                owners.push(*t);
            }
        }
        owners.sort_unstable();
        for (i, a) in owners.iter().enumerate() {
            for b in &owners[i + 1..] {
                naive.insert((
                    plan.subtasks[*a].id.to_string(),
                    plan.subtasks[*b].id.to_string(),
                ));
            }
        }
    }
    let naive_secs = start.elapsed().as_secs_f64();
    assert_eq!(
        ours, naive,
        "both sides must find the same real-file overlaps"
    );

    println!(
        "  git-orch plan check (parse + full analysis)  {:>8.1} ms  (target < 1000 ms)",
        best * 1e3
    );
    println!(
        "  naive: {} paths × {} globs, one at a time      {:>8.1} ms  (real-file overlaps only)",
        paths.len(),
        matchers.len(),
        naive_secs * 1e3
    );
    println!("  ratio {:.1}×  (target ≥ 10×)", naive_secs / best);
    println!(
        "  findings: {} ({} blocking), {} real-file overlapping pairs",
        analysis.findings.len(),
        analysis.blocking(),
        ours.len()
    );
}
