//! State store benchmark: appends and reads of the event log, beside the
//! same work done with git plumbing subprocesses, in one run.
//!
//! Run with `cargo bench --bench store`. Repositories are made under
//! `$ORCH_BENCH_DIR` (default: the system temp dir); the file system matters
//! a great deal, because every append writes loose objects, so the figures
//! print where they ran. Not a test: it asserts nothing about time.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use git_orch::event::Event;
use git_orch::store::Store;

fn bench_root() -> PathBuf {
    std::env::var_os("ORCH_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn git_stdin(dir: &Path, args: &[&str], input: &[u8]) -> String {
    let mut child = Command::new("git")
        .current_dir(dir)
        .args(args)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("git runs");
    // Feed stdin from a thread: `cat-file --batch` answers while it reads,
    // and a full stdout pipe would otherwise block both sides.
    let mut stdin = child.stdin.take().expect("stdin");
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || stdin.write_all(&input).expect("write stdin"));
    let out = child.wait_with_output().expect("git output");
    feeder.join().expect("feeder");
    assert!(out.status.success(), "git {args:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn new_repo(root: &Path, name: &str) -> PathBuf {
    let dir = root.join(name);
    git(root, &["init", "-q", &dir.to_string_lossy()]);
    git(&dir, &["config", "core.logAllRefUpdates", "always"]);
    git(&dir, &["config", "user.name", "bench"]);
    git(&dir, &["config", "user.email", "bench@example.com"]);
    dir
}

fn marker(n: u64) -> Event {
    Event::DebugMarker {
        label: "bench".into(),
        n,
    }
}

/// One append the way a shell script would do it with plumbing: the same
/// cumulative `ev/<a>/<b>/<seq>.json` tree (the script keeps the listings
/// of the path's trees in memory, which favours it), a commit, and a
/// compare-and-swap `update-ref <new> <old>`.
struct PlumbingLog {
    dir: PathBuf,
    tip: Option<String>,
    leaf: Vec<String>,
    seq: u64,
}

impl PlumbingLog {
    fn append(&mut self, payload: &str) {
        self.seq += 1;
        let blob = git_stdin(
            &self.dir,
            &["hash-object", "-w", "--stdin"],
            payload.as_bytes(),
        );
        let name = format!("{:010}-{}.json", self.seq, &blob[..8]);
        if self.seq.is_multiple_of(256) {
            self.leaf.clear();
        }
        self.leaf.push(format!("100644 blob {blob}\t{name}\n"));
        let leaf = git_stdin(&self.dir, &["mktree"], self.leaf.concat().as_bytes());
        let b = format!("{:02x}", (self.seq >> 8) & 0xff);
        let a = format!("{:02x}", self.seq >> 16);
        let mid = git_stdin(
            &self.dir,
            &["mktree"],
            format!("040000 tree {leaf}\t{b}\n").as_bytes(),
        );
        let ev = git_stdin(
            &self.dir,
            &["mktree"],
            format!("040000 tree {mid}\t{a}\n").as_bytes(),
        );
        let root = git_stdin(
            &self.dir,
            &["mktree"],
            format!("040000 tree {ev}\tev\n").as_bytes(),
        );
        let mut args = vec![
            "commit-tree".to_owned(),
            root,
            "-m".into(),
            format!("event {}", self.seq),
        ];
        if let Some(t) = &self.tip {
            args.push("-p".into());
            args.push(t.clone());
        }
        let args_ref: Vec<&str> = args.iter().map(String::as_str).collect();
        let commit = git(&self.dir, &args_ref);
        let old = self.tip.clone().unwrap_or_else(|| "0".repeat(40));
        git(
            &self.dir,
            &["update-ref", "refs/orch/log/plumbing", &commit, &old],
        );
        self.tip = Some(commit);
    }
}

fn per_sec(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> (Duration, T)) -> (Duration, T) {
    let mut best: Option<(Duration, T)> = None;
    for _ in 0..runs {
        let r = f();
        if best.as_ref().is_none_or(|b| r.0 < b.0) {
            best = Some(r);
        }
    }
    best.expect("at least one run")
}

fn main() {
    let root = tempfile::Builder::new()
        .prefix("orch-bench-")
        .tempdir_in(bench_root())
        .expect("bench dir");
    let root = root.path();
    println!("git-orch state store benchmark");
    println!(
        "  directory: {} (set ORCH_BENCH_DIR to change)",
        root.display()
    );
    println!("  git: {}", git(root, &["--version"]));

    // What the file system charges for one new file: every append writes
    // six loose objects (blob, four trees, commit) and one ref lock file.
    let create_us = {
        let dir = root.join("fs-probe");
        std::fs::create_dir_all(dir.join("sub")).expect("probe dir");
        let n = 300;
        let start = Instant::now();
        for i in 0..n {
            let tmp = dir.join(format!(".tmp{i}"));
            std::fs::write(&tmp, [b'x'; 100]).expect("write");
            std::fs::rename(&tmp, dir.join("sub").join(format!("f{i}"))).expect("rename");
        }
        start.elapsed().as_secs_f64() * 1e6 / f64::from(n)
    };
    println!("  file system: {create_us:.0} µs to create and rename one small file");

    // Appends, in process.
    const N_FAST: u64 = 2000;
    let (fast, ()) = best_of(3, || {
        let dir = new_repo(root, &format!("fast-{}", git_orch::ids::WriterId::random()));
        let store = Store::open(&dir).expect("open");
        store.writer().expect("writer id");
        let start = Instant::now();
        for i in 0..N_FAST {
            store.append(vec![marker(i)]).expect("append");
        }
        (start.elapsed(), ())
    });
    // The same appends with plumbing subprocesses.
    const N_SLOW: u64 = 150;
    let (slow, ()) = best_of(2, || {
        let dir = new_repo(root, &format!("slow-{}", git_orch::ids::WriterId::random()));
        let mut log = PlumbingLog {
            dir,
            tip: None,
            leaf: Vec::new(),
            seq: 0,
        };
        let payload = serde_json::to_string(&marker(0)).expect("json");
        let start = Instant::now();
        for _ in 0..N_SLOW {
            log.append(&payload);
        }
        (start.elapsed(), ())
    });
    let fast_rate = per_sec(N_FAST, fast);
    let slow_rate = per_sec(N_SLOW, slow);
    println!();
    println!("append (one event, one commit, CAS ref update):");
    println!(
        "  git-orch in-process   {fast_rate:>9.0} appends/s  ({:.0} µs each, {N_FAST} appends)",
        1e6 / fast_rate
    );
    println!(
        "  git plumbing          {slow_rate:>9.0} appends/s  ({:.0} µs each, {N_SLOW} appends: hash-object, 4× mktree, commit-tree, update-ref)",
        1e6 / slow_rate
    );
    println!(
        "  ratio                 {:>9.1}×  (target ≥ 10×, ≥ 2000 appends/s)",
        fast_rate / slow_rate
    );
    println!(
        "  of which file creation: {:.0} µs per append (7 new files × {create_us:.0} µs)",
        7.0 * create_us
    );

    // Reading and ordering 10,000 events.
    const N_READ: u64 = 10_000;
    let dir = new_repo(root, "read");
    {
        let store = Store::open(&dir).expect("open");
        for chunk in 0..(N_READ / 100) {
            let events = (0..100).map(|i| marker(chunk * 100 + i)).collect();
            store.append(events).expect("append");
        }
    }
    let (read, count) = best_of(5, || {
        let start = Instant::now();
        let store = Store::open(&dir).expect("open");
        let view = store.read_log().expect("read");
        (start.elapsed(), view.entries.len())
    });
    assert_eq!(count as u64, N_READ);
    let (read_packed, _) = {
        git(&dir, &["repack", "-a", "-d", "-q"]);
        git(&dir, &["pack-refs", "--all"]);
        best_of(5, || {
            let start = Instant::now();
            let store = Store::open(&dir).expect("open");
            let view = store.read_log().expect("read");
            (start.elapsed(), view.entries.len())
        })
    };
    // Baseline: list the tree and read every blob with one `cat-file --batch`.
    let (plumbing_read, _) = best_of(3, || {
        let start = Instant::now();
        let tips = git(
            &dir,
            &["for-each-ref", "--format=%(refname)", "refs/orch/log/"],
        );
        let mut n = 0usize;
        for tip in tips.lines() {
            let ids = git(&dir, &["ls-tree", "-r", "--object-only", tip]);
            let out = git_stdin(
                &dir,
                &["cat-file", "--batch"],
                format!("{ids}\n").as_bytes(),
            );
            for line in out.lines() {
                if line.starts_with('{') {
                    let v: serde_json::Value = serde_json::from_str(line).expect("json");
                    n += v.is_object() as usize;
                }
            }
        }
        (start.elapsed(), n)
    });
    println!();
    println!("read and order {N_READ} events (open + union of log refs + parse + sort):");
    println!(
        "  git-orch, loose objects  {:>7.1} ms",
        read.as_secs_f64() * 1e3
    );
    println!(
        "  git-orch, packed (repack){:>7.1} ms  (target < 150 ms)",
        read_packed.as_secs_f64() * 1e3
    );
    println!(
        "  git plumbing (ls-tree + cat-file --batch, unsorted) {:>7.1} ms  ratio {:.1}×",
        plumbing_read.as_secs_f64() * 1e3,
        plumbing_read.as_secs_f64() / read_packed.as_secs_f64()
    );
}
