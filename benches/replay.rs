//! Replay benchmark: real history as one plan, git-orch against a raw-git
//! loop doing the same work, in one run.
//!
//! A stretch of a real project's first-parent history becomes one plan:
//! each commit is a subtask owning exactly the paths it touched (as
//! literal globs), depending on the latest earlier subtask that touched
//! each of them. Its agent re-applies the commit (`git diff --binary` of
//! the commit against its first parent, `git apply`d in the worktree);
//! its verification checks that its paths now hold what the commit holds.
//! Overlaps are then all ordered by dependencies, and files most commits
//! touch (a changelog, a manifest, a lockfile) make long chains: the plan
//! must pass `plan check` with nothing blocking and land as one run.
//!
//! Both sides start from the commit before the stretch, on a branch
//! `land` no worktree has checked out, in fresh copies of one template
//! repository (holding the project's objects, so the agent can read the
//! commits), dirty pages flushed before each side, the order of the sides
//! alternating from round to round:
//!
//! * raw: one bash loop, per commit, serially: `git worktree add -b` from
//!   `land`, apply the commit, `git add -A` + `git commit` (with the
//!   commit's own author and date), the verification, `git rebase` onto
//!   the current `land`, the verification again, `git update-ref land
//!   <new> <old>` (a compare-and-swap) and `git worktree remove`: the work
//!   git-orch's guarantees need, with none of its records, gates or
//!   confinement;
//! * git-orch: `plan add`, `approve` and `run --cap 4` of the one plan
//!   (`plan check` is run first, untimed, and must find nothing blocking).
//!
//! Both sides must end on the real tree of the stretch's last commit, with
//! one commit per subtask; git-orch must land each task exactly once.
//!
//! Knobs: `ORCH_REPLAY_REPO` (default: this repository), `ORCH_REPLAY_TIP`
//! (default `HEAD`), `ORCH_REPLAY_SIZES` (commits per plan, default
//! `40,150`), `ORCH_REPLAY_ROUNDS` (default 2). Commits that change no
//! file (or change a submodule) are left out of the stretch. Run with
//! `cargo bench --bench replay`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{command, flush, git, median, ms, orch};

/// The agent: applies its task's commit. The task id ends in the commit's
/// id (`c007-<commit>`), so no file outside the worktree is needed.
const AGENT: &str =
    "run sh -c \"c=${ORCH_TASK#*-}; git diff --binary $c^ $c | git apply --whitespace=nowarn\"\n";

/// The raw loop, as a person would script it. `$1` is the worktree root;
/// then, per commit, a task id (`c007-<commit>`) and its verification.
const RAW_LOOP: &str = r#"set -e
root=$1; shift
while [ $# -gt 0 ]; do
  t=$1; verify=$2; shift 2
  c=${t#*-}
  wt="$root/$t"
  git worktree add -q -b "raw/$t" "$wt" land
  (cd "$wt" && git diff --binary "$c^" "$c" | git apply --whitespace=nowarn)
  git -C "$wt" add -A
  GIT_AUTHOR_NAME=$(git log -1 --format=%an "$c") \
  GIT_AUTHOR_EMAIL=$(git log -1 --format=%ae "$c") \
  GIT_AUTHOR_DATE=$(git log -1 --format=%aD "$c") \
    git -C "$wt" commit -q --no-verify -m "$t"
  (cd "$wt" && sh -c "$verify")
  old=$(git rev-parse refs/heads/land)
  git -C "$wt" rebase -q "$old"
  (cd "$wt" && sh -c "$verify")
  new=$(git -C "$wt" rev-parse HEAD)
  git update-ref refs/heads/land "$new" "$old"
  git worktree remove "$wt"
done
"#;

/// One commit of the stretch, as a subtask.
struct Step {
    id: String,
    commit: String,
    subject: String,
    paths: Vec<String>,
    depends_on: Vec<String>,
    verification: String,
}

/// The newest `n` commits of `source`'s first-parent history up to `tip`
/// that change at least one file and no submodule, oldest first, each
/// with the paths it changed against its first parent; and the commit the
/// stretch starts from.
fn stretch(source: &Path, tip: &str, n: usize) -> (String, Vec<Step>) {
    let list = git(source, &["rev-list", "--first-parent", "--parents", tip]);
    let mut picked: Vec<(String, Vec<String>)> = Vec::new();
    for line in list.lines() {
        let mut ids = line.split(' ');
        let commit = ids.next().expect("a commit").to_owned();
        let Some(parent) = ids.next() else {
            break; // the root: nothing before it to start from
        };
        let raw = git(
            source,
            &[
                "diff-tree",
                "-r",
                "--no-renames",
                "--no-commit-id",
                parent,
                &commit,
            ],
        );
        if raw.is_empty() || raw.lines().any(|l| l.contains(" 160000 ")) {
            continue; // no file changed, or a submodule moved
        }
        let paths = raw
            .lines()
            .filter_map(|l| l.split_once('\t').map(|(_, p)| p.to_owned()))
            .collect::<Vec<_>>();
        if paths.iter().any(|p| p.starts_with('"')) {
            continue; // a quoted (unusual) path name: keep the bench simple
        }
        picked.push((commit, paths));
        if picked.len() == n {
            break;
        }
    }
    assert_eq!(
        picked.len(),
        n,
        "{} has fewer than {n} usable first-parent commits up to {tip} (a shallow clone?)",
        source.display()
    );
    picked.reverse();
    let base = git(source, &["rev-parse", &format!("{}^", picked[0].0)]);
    let mut last_toucher: BTreeMap<String, String> = BTreeMap::new();
    let steps = picked
        .into_iter()
        .enumerate()
        .map(|(i, (commit, paths))| {
            let id = format!("c{i:03}-{commit}");
            let mut depends_on: Vec<String> = paths
                .iter()
                .filter_map(|p| last_toucher.get(order_key(p)).cloned())
                .collect();
            depends_on.sort();
            depends_on.dedup();
            for p in &paths {
                last_toucher.insert(order_key(p).to_owned(), id.clone());
            }
            let quoted: Vec<String> = paths.iter().map(|p| shell_quote(p)).collect();
            let verification = format!("git diff --quiet {commit} -- {}", quoted.join(" "));
            let subject = git(source, &["log", "-1", "--format=%s", &commit]);
            Step {
                id,
                commit,
                subject,
                paths,
                depends_on,
                verification,
            }
        })
        .collect();
    (base, steps)
}

/// What a change to `path` must be ordered behind: the path itself, or
/// for a file in a folder-wide pinch point (CI workflows) the folder, as
/// `plan check` asks: subtasks sharing a pinch point run one after another.
fn order_key(path: &str) -> &str {
    const FOLDER_PINCHES: [&str; 1] = [".github/workflows/"];
    FOLDER_PINCHES
        .iter()
        .find(|f| path.starts_with(*f))
        .map_or(path, |f| &f[..f.len() - 1])
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r#"'\''"#))
}

/// A path as a glob that matches exactly it.
fn literal_glob(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for ch in path.chars() {
        match ch {
            '*' | '?' | '[' | ']' | '{' | '}' | '\\' | '!' => {
                out.push('[');
                out.push(ch);
                out.push(']');
            }
            _ => out.push(ch),
        }
    }
    out
}

fn plan_json(id: &str, steps: &[Step]) -> serde_json::Value {
    let subtasks: Vec<serde_json::Value> = steps
        .iter()
        .map(|s| {
            serde_json::json!({
                "id": s.id,
                "title": s.subject.chars().take(100).collect::<String>(),
                "owned_globs": s.paths.iter().map(|p| literal_glob(p)).collect::<Vec<_>>(),
                "depends_on": s.depends_on,
                "deliverable": format!("the change of commit {}", s.commit),
                "verification": s.verification,
            })
        })
        .collect();
    serde_json::json!({
        "version": 1, "id": id, "instruction": "replay real history", "subtasks": subtasks,
    })
}

/// The template: the project's objects, `main` and `land` at the commit
/// the stretch starts from, git-orch set up, the plan written (not added).
fn template(root: &Path, source: &Path, tip: &str, base: &str, steps: &[Step]) -> PathBuf {
    let repo = root.join("template");
    std::fs::create_dir_all(&repo).expect("dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    let tip_id = git(source, &["rev-parse", tip]);
    git(
        &repo,
        &[
            "fetch",
            "-q",
            "--no-tags",
            &source.to_string_lossy(),
            &format!("{tip_id}:refs/replay/tip"),
        ],
    );
    git(&repo, &["checkout", "-q", "-B", "main", base]);
    git(&repo, &["branch", "land"]);
    orch(&repo, &["init"]);
    let file = repo.join(".git/replay-plan.json");
    std::fs::write(&file, plan_json("replay", steps).to_string()).expect("plan");
    repo
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Raw,
    Orch,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Raw => "raw-git serial loop",
            Side::Orch => "git orch: plan add, approve, run --cap 4",
        }
    }
}

/// Runs one side; returns its wall time and, for git-orch, the run's own.
fn run_side(
    side: Side,
    repo: &Path,
    steps: &[Step],
    real_tree: &str,
    approvals: &mut Vec<String>,
) -> (Duration, Duration) {
    let plan = repo.join(".git/replay-plan.json");
    let plan = plan.to_string_lossy().into_owned();
    flush();
    let start = Instant::now();
    let mut run_wall = Duration::ZERO;
    match side {
        Side::Raw => {
            let mut c = command("bash", repo);
            c.arg("-c")
                .arg(RAW_LOOP)
                .arg("raw-loop")
                .arg(repo.with_extension("raw"));
            for s in steps {
                c.arg(&s.id).arg(&s.verification);
            }
            let out = c.output().expect("bash runs");
            assert!(
                out.status.success(),
                "raw loop: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Side::Orch => {
            orch(repo, &["plan", "add", &plan]);
            orch(repo, &["approve", "replay"]);
            // A commit that changes a control path (a CI workflow) lands
            // only once a person approved its result: the run ends with
            // it waiting; the person approves, merges and runs again
            // (landed tasks are carried). Counted in git-orch's time.
            loop {
                let run_start = Instant::now();
                let out = command(common::orch_bin(), repo)
                    .args(["run", "replay", "--agent", "fake", "--target", "land"])
                    .args(["--cap", "4"])
                    .env("FAKE_AGENT_SCRIPT", AGENT)
                    .output()
                    .expect("git-orch runs");
                run_wall += run_start.elapsed();
                if out.status.success() {
                    break;
                }
                let why = format!(
                    "git orch run: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                assert_eq!(out.status.code(), Some(3), "{why}");
                // `merge` exits 3 while something waits for approval.
                let merge = command(common::orch_bin(), repo)
                    .args(["merge", "--json"])
                    .output()
                    .expect("git-orch runs");
                let merged: serde_json::Value =
                    serde_json::from_slice(&merge.stdout).expect("merge --json");
                let held = merged["awaiting_approval"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                assert!(!held.is_empty(), "nothing awaits approval: {why}");
                for h in &held {
                    let branch = h["branch"].as_str().expect("branch");
                    orch(repo, &["approve", "--branch", branch]);
                    approvals.push(branch.to_owned());
                }
                orch(repo, &["merge"]);
            }
        }
    }
    let wall = start.elapsed();
    let tree = git(repo, &["rev-parse", "land^{tree}"]);
    assert_eq!(
        tree,
        real_tree,
        "{}: the final tree is the real one",
        side.name()
    );
    let count: usize = git(
        repo,
        &["rev-list", "--count", "--first-parent", "main..land"],
    )
    .parse()
    .expect("a count");
    assert_eq!(
        count,
        steps.len(),
        "{}: one commit per subtask",
        side.name()
    );
    if side == Side::Orch {
        let log = orch(repo, &["log", "--json"]);
        let landed = log
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["type"] == "landed")
            .count();
        assert_eq!(landed, steps.len(), "git orch: each task landed once");
    }
    (wall, run_wall)
}

fn main() {
    let source = std::env::var_os("ORCH_REPLAY_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let tip = std::env::var("ORCH_REPLAY_TIP").unwrap_or_else(|_| "HEAD".into());
    let sizes: Vec<usize> = std::env::var("ORCH_REPLAY_SIZES")
        .unwrap_or_else(|_| "40,150".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|&n| n > 0)
        .collect();
    let rounds = common::env_number("ORCH_REPLAY_ROUNDS", 2).max(1);
    let tmp = tempfile::Builder::new()
        .prefix("orch-bench-replay-")
        .tempdir_in(common::bench_root())
        .expect("tmp");
    // ORCH_REPLAY_KEEP=1 keeps the repositories (to look at a failure).
    let keep = std::env::var_os("ORCH_REPLAY_KEEP").is_some();
    let root = if keep {
        tmp.keep()
    } else {
        tmp.path().to_owned()
    };
    let root = root.as_path();
    println!(
        "replay benchmark: {} up to {tip}, {rounds} rounds",
        source.display()
    );
    println!("  {}", common::machine(root));
    let mut rows = Vec::new();
    for &n in &sizes {
        let (base, steps) = stretch(&source, &tip, n);
        let last = &steps.last().expect("steps").commit;
        let real_tree = git(&source, &["rev-parse", &format!("{last}^{{tree}}")]);
        let dir = root.join(format!("n{n}"));
        std::fs::create_dir_all(&dir).expect("dir");
        let template = template(&dir, &source, &tip, &base, &steps);
        // Untimed: the plan passes the check with nothing blocking.
        let check = command(common::orch_bin(), &template)
            .args(["plan", "check", ".git/replay-plan.json", "--json"])
            .output()
            .expect("plan check runs");
        let report: serde_json::Value =
            serde_json::from_slice(&check.stdout).expect("plan check --json");
        let blocking = report["blocking"].as_u64().unwrap_or(u64::MAX);
        assert!(
            check.status.success() && blocking == 0,
            "plan check of {n} commits: {blocking} blocking\n{}",
            String::from_utf8_lossy(&check.stderr)
        );
        let edges: usize = steps.iter().map(|s| s.depends_on.len()).sum();
        println!(
            "  {n} commits from {}: {} paths, {edges} dependencies, plan check clean",
            &base[..12],
            steps.iter().map(|s| s.paths.len()).sum::<usize>()
        );
        let sides = [Side::Raw, Side::Orch];
        let copies: Vec<Vec<PathBuf>> = (0..rounds)
            .map(|r| {
                (0..sides.len())
                    .map(|i| common::copy_template(&template, &format!("round-{r}-side-{i}")))
                    .collect()
            })
            .collect();
        let mut walls: Vec<Vec<Duration>> = vec![Vec::new(); sides.len()];
        let mut runs: Vec<Duration> = Vec::new();
        let mut approvals: Vec<String> = Vec::new();
        for (round, repos) in copies.iter().enumerate() {
            let mut order: Vec<usize> = (0..sides.len()).collect();
            if round % 2 == 1 {
                order.reverse();
            }
            for i in order {
                let (wall, run) = run_side(sides[i], &repos[i], &steps, &real_tree, &mut approvals);
                walls[i].push(wall);
                if sides[i] == Side::Orch {
                    runs.push(run);
                }
            }
        }
        for repo in copies.iter().flatten().filter(|_| !keep) {
            common::remove_copy(repo);
        }
        let raw = median(&mut walls[0]);
        let orch = median(&mut walls[1]);
        let run = median(&mut runs);
        if !approvals.is_empty() {
            println!(
                "    {} result(s) changed control paths and were approved by hand, as a person would (per round: {})",
                approvals.len(),
                approvals.len() / rounds
            );
        }
        rows.push((n, raw, orch, run));
    }
    println!();
    println!(
        "  {:>8} {:>12} {:>12} {:>12} {:>14} {:>8}",
        "commits", "raw loop", "git orch", "(run alone)", "per commit", "vs raw"
    );
    for (n, raw, orch, run) in rows {
        println!(
            "  {:>8} {:>12} {:>12} {:>12} {:>14} {:>7.2}x",
            n,
            ms(raw),
            ms(orch),
            ms(run),
            format!("{} vs {}", ms(orch / n as u32), ms(raw / n as u32)),
            orch.as_secs_f64() / raw.as_secs_f64()
        );
    }
    println!();
    println!("  goal: ≤ 2.00x the raw loop at every size (1.50x hoped)");
}
