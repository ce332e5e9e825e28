//! Pipeline benchmark: what one trivial subtask costs end to end, beside a
//! raw shell loop doing the git equivalent, in one run.
//!
//! A project of `ORCH_PIPELINE_TASKS` (default 16) independent subtasks,
//! each owning `src/tNN/**` and verified by `test -f src/tNN/done`; the
//! agent writes that file and nothing else (instantly). Both sides land on
//! the branch `land`, which no worktree has checked out, starting from the
//! same commit, in a fresh copy of the same repository each round, dirty
//! pages flushed before each side and the order of the sides alternating
//! from round to round (`ORCH_PIPELINE_ROUNDS`, default 3):
//!
//! * raw: one bash loop, per subtask: `git worktree add -b` from `land`,
//!   write the file, `git add -A` + `git commit`, run the verification,
//!   `git rebase` onto the current `land`, run the verification on the
//!   result, `git update-ref land <new> <old>` (a compare-and-swap), and
//!   `git worktree remove`. That is the work git-orch's guarantees need
//!   (a branch and worktree per attempt, a result commit, the subtask's
//!   verification on the result and, as the default integration gate, on
//!   the candidate, a CAS landing), with none of its records, gates or
//!   confinement;
//! * `git orch run --cap 1`: the same subtasks one at a time, as the loop
//!   does them, with the default configuration (so agents and command
//!   gates run in the sandbox where bubblewrap works);
//! * the same with `GIT_ORCH_SANDBOX=none`, to show the sandbox's share;
//! * `git orch run` with its default cap (4), for the record.
//!
//! Printed: wall time of each side, per subtask, and the ratio to the raw
//! loop. The goal is ≤ 1.3× per subtask. Run with
//! `cargo bench --bench pipeline` (about a minute).

mod common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{command, flush, git, median, ms, orch};

/// The agent: writes the file its task's verification looks for, in the
/// folder its task owns.
const AGENT: &str = "run sh -c \"d=${ORCH_OWNED_GLOBS%/**}; echo yes > $d/done\"\n";

/// The raw loop, as a person would script it. `$1` is the worktree root,
/// the rest are the task ids.
const RAW_LOOP: &str = r#"set -e
root=$1; shift
for t in "$@"; do
  wt="$root/$t"
  git worktree add -q -b "raw/$t" "$wt" land
  echo yes > "$wt/src/$t/done"
  git -C "$wt" add -A
  git -C "$wt" commit -q -m "$t"
  (cd "$wt" && test -f "src/$t/done")
  old=$(git rev-parse refs/heads/land)
  git -C "$wt" rebase -q "$old"
  (cd "$wt" && test -f "src/$t/done")
  new=$(git -C "$wt" rev-parse HEAD)
  git update-ref refs/heads/land "$new" "$old"
  git worktree remove "$wt"
done
"#;

fn task_ids(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("t{i:02}")).collect()
}

/// The template repository: the project, its plan approved, `land` at
/// `main`.
fn template(root: &Path, tasks: &[String]) -> PathBuf {
    let repo = root.join("template");
    std::fs::create_dir_all(&repo).expect("dir");
    git(&repo, &["init", "-q", "-b", "main"]);
    let mut subtasks = Vec::new();
    for t in tasks {
        let d = repo.join("src").join(t);
        std::fs::create_dir_all(&d).expect("dir");
        std::fs::write(d.join("README"), format!("{t}\n")).expect("file");
        subtasks.push(serde_json::json!({
            "id": t, "title": format!("Task {t}"), "owned_globs": [format!("src/{t}/**")],
            "deliverable": "done", "verification": format!("test -f src/{t}/done"),
        }));
    }
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "project"]);
    git(&repo, &["branch", "land"]);
    orch(&repo, &["init"]);
    let plan = serde_json::json!({"version": 1, "id": "bench", "instruction": "bench", "subtasks": subtasks});
    let file = root.join("plan.json");
    std::fs::write(&file, plan.to_string()).expect("plan");
    orch(&repo, &["plan", "add", &file.to_string_lossy()]);
    orch(&repo, &["approve", "bench"]);
    repo
}

/// Commits `land` gained over `main`.
fn landed(repo: &Path) -> usize {
    git(repo, &["rev-list", "--count", "main..land"])
        .parse()
        .expect("a count")
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Raw,
    Orch,
    OrchNoSandbox,
    OrchCap4,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Raw => "raw shell loop (git worktree add … update-ref, worktree remove)",
            Side::Orch => "git orch run --cap 1",
            Side::OrchNoSandbox => "git orch run --cap 1, GIT_ORCH_SANDBOX=none",
            Side::OrchCap4 => "git orch run (default cap 4)",
        }
    }
}

fn run_side(side: Side, repo: &Path, tasks: &[String]) -> Duration {
    let mut c = match side {
        Side::Raw => {
            let mut c = command("bash", repo);
            c.arg("-c")
                .arg(RAW_LOOP)
                .arg("raw-loop")
                .arg(repo.with_extension("raw"))
                .args(tasks);
            c
        }
        _ => {
            let mut c = command(common::orch_bin(), repo);
            c.args(["run", "bench", "--agent", "fake", "--target", "land"])
                .env("FAKE_AGENT_SCRIPT", AGENT);
            if side != Side::OrchCap4 {
                c.args(["--cap", "1"]);
            }
            if side == Side::OrchNoSandbox {
                c.env("GIT_ORCH_SANDBOX", "none");
            }
            c
        }
    };
    flush();
    let start = Instant::now();
    let out = c.output().expect("runs");
    let wall = start.elapsed();
    assert!(
        out.status.success(),
        "{}: {}",
        side.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    // Raw: one commit per subtask; git-orch: the agent's result commit.
    assert_eq!(
        landed(repo),
        tasks.len(),
        "{}: every subtask landed",
        side.name()
    );
    wall
}

fn main() {
    let n = common::env_number("ORCH_PIPELINE_TASKS", 16).max(1);
    let rounds = common::env_number("ORCH_PIPELINE_ROUNDS", 3).max(1);
    let tmp = tempfile::Builder::new()
        .prefix("orch-bench-pipeline-")
        .tempdir_in(common::bench_root())
        .expect("tmp");
    let root = tmp.path();
    println!("pipeline benchmark: {n} trivial subtasks end to end, {rounds} rounds");
    println!("  {}", common::machine(root));
    let tasks = task_ids(n);
    let template = template(root, &tasks);
    let sides = [Side::Raw, Side::Orch, Side::OrchNoSandbox, Side::OrchCap4];
    // Every copy is made before anything is timed and removed after: on
    // ext4, creating files costs more while many were deleted in the last
    // seconds, so deleting one side's copy would tax the next side.
    let copies: Vec<Vec<PathBuf>> = (0..rounds)
        .map(|r| {
            (0..sides.len())
                .map(|i| common::copy_template(&template, &format!("round-{r}-side-{i}")))
                .collect()
        })
        .collect();
    std::thread::sleep(Duration::from_secs(10));
    let mut walls: Vec<Vec<Duration>> = vec![Vec::new(); sides.len()];
    for (round, repos) in copies.iter().enumerate() {
        let mut order: Vec<usize> = (0..sides.len()).collect();
        order.rotate_left(round % sides.len());
        if round % 2 == 1 {
            order.reverse();
        }
        for i in order {
            walls[i].push(run_side(sides[i], &repos[i], &tasks));
        }
    }
    for repo in copies.iter().flatten() {
        common::remove_copy(repo);
    }
    let raw = median(&mut walls[0].clone());
    println!();
    println!(
        "  {:<64} {:>10} {:>12} {:>8}",
        "", "wall", "per subtask", "vs raw"
    );
    for (i, side) in sides.iter().enumerate() {
        let m = median(&mut walls[i]);
        println!(
            "  {:<64} {:>10} {:>12} {:>7.2}x",
            side.name(),
            ms(m),
            ms(m / n as u32),
            m.as_secs_f64() / raw.as_secs_f64()
        );
    }
    println!();
    println!("  goal: git orch run --cap 1 ≤ 1.30x the raw loop per subtask");
    // The sandbox's share, side by side in this run: the same pipeline
    // with every agent and gate in bubblewrap, against none.
    let confined = median(&mut walls[1].clone());
    let unconfined = median(&mut walls[2].clone());
    println!(
        "  sandboxed vs unconfined: {} vs {} per subtask, {:.2}x (goal ≤ 1.30x)",
        ms(confined / n as u32),
        ms(unconfined / n as u32),
        confined.as_secs_f64() / unconfined.as_secs_f64()
    );
}
