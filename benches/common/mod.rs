//! What the benchmarks share: git and `git orch` runners with a hermetic
//! environment, the folder they work in, flushing dirty pages before a
//! timed round, alternating the order of the two sides, medians, and the
//! peak memory of a child process.
//!
//! Every benchmark compares git-orch with a baseline in the same run and
//! prints both sides and their ratio; see `benches/README.md`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where benchmark repositories are made: `$ORCH_BENCH_DIR`, else the
/// system temp dir. The file system matters, so benches print it.
pub fn bench_root() -> PathBuf {
    std::env::var_os("ORCH_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir)
}

/// The built `git-orch` binary: `$ORCH_BIN`, else the release build next
/// to this bench, else `git-orch` on PATH.
pub fn orch_bin() -> PathBuf {
    if let Some(b) = std::env::var_os("ORCH_BIN") {
        return PathBuf::from(b);
    }
    let here = std::env::current_exe().expect("bench path");
    // target/release/deps/<bench> → target/release/git-orch
    let candidate = here
        .parent()
        .and_then(Path::parent)
        .map(|p| p.join("git-orch"));
    match candidate {
        Some(c) if c.is_file() => c,
        _ => PathBuf::from("git-orch"),
    }
}

/// A command with the environment every bench uses: no global git
/// config, fixed identities, the fake agents on PATH.
pub fn command(program: impl AsRef<std::ffi::OsStr>, dir: &Path) -> Command {
    let mut c = Command::new(program);
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/agents");
    let bin = orch_bin();
    let bin_dir = bin.parent().map(Path::to_owned).unwrap_or_default();
    let path = format!(
        "{}:{}:{}",
        bin_dir.display(),
        fixtures.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    c.current_dir(dir)
        .env("PATH", path)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "bench")
        .env("GIT_AUTHOR_EMAIL", "bench@example.com")
        .env("GIT_COMMITTER_NAME", "bench")
        .env("GIT_COMMITTER_EMAIL", "bench@example.com")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    c
}

/// Runs git in `dir`; panics on failure; returns stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = command("git", dir).args(args).output().expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Runs `git orch` in `dir`; panics on failure; returns stdout.
pub fn orch(dir: &Path, args: &[&str]) -> String {
    let out = command(orch_bin(), dir)
        .args(args)
        .output()
        .expect("git-orch runs");
    assert!(
        out.status.success(),
        "git orch {args:?} in {}: {}{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes dirty pages back before a timed round, so neither side pays for
/// the other's writes.
pub fn flush() {
    // SAFETY: sync(2) takes no arguments and cannot fail.
    unsafe { libc::sync() };
}

/// One finished child: wall time and peak resident memory (0 when not
/// measured).
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    pub wall: Duration,
    pub max_rss_kb: u64,
}

/// Runs `cmd` to its end with output discarded, measuring wall time only.
///
/// Not its memory: wait4's `ru_maxrss` of a child started from this
/// process includes this process's own pages (the child is spawned with
/// vfork, and exec keeps the old memory's high-water mark), so every
/// command looked as big as the bench. [`measure_with_rss`] measures both.
pub fn measure(cmd: Command) -> Measured {
    let mut m = wait_for(cmd);
    m.max_rss_kb = 0;
    m
}

/// Runs `cmd` through `/usr/bin/time -f %M`, which forks it from its own
/// small process and reports the command's peak RSS alone; the wall time
/// includes `time`'s start-up (about a millisecond), so use it on both
/// sides of a comparison or for long commands.
pub fn measure_with_rss(cmd: Command) -> Measured {
    let out = tempfile::NamedTempFile::new().expect("temp file");
    let mut wrapped = Command::new("/usr/bin/time");
    wrapped
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(out.path())
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        wrapped.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    let mut m = wait_for(wrapped);
    let text = std::fs::read_to_string(out.path()).expect("time's output");
    m.max_rss_kb = text
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .next_back()
        .expect("a peak RSS from /usr/bin/time");
    m
}

fn wait_for(mut cmd: Command) -> Measured {
    cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    let start = Instant::now();
    let child = cmd.spawn().expect("spawn");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value to be overwritten.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not reaped yet; the pointers are
    // valid for the call.
    let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = start.elapsed();
    assert_eq!(rc, pid, "wait4");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{cmd:?} failed (status {status})"
    );
    // The child was reaped by wait4; forget it so nothing waits again.
    std::mem::forget(child);
    Measured {
        wall,
        max_rss_kb: usage.ru_maxrss as u64,
    }
}

/// Median of a slice of durations.
pub fn median(xs: &mut [Duration]) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

/// Times `a` and `b` `rounds` times each, alternating which goes first
/// and flushing before each, and returns (median of a, median of b).
pub fn alternate(
    rounds: usize,
    mut a: impl FnMut() -> Duration,
    mut b: impl FnMut() -> Duration,
) -> (Duration, Duration) {
    let (mut xa, mut xb) = (Vec::new(), Vec::new());
    for i in 0..rounds {
        if i % 2 == 0 {
            flush();
            xa.push(a());
            flush();
            xb.push(b());
        } else {
            flush();
            xb.push(b());
            flush();
            xa.push(a());
        }
    }
    (median(&mut xa), median(&mut xb))
}

/// Milliseconds with one decimal.
pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// The file system type of `path` (from /proc/mounts), for the record.
pub fn fs_type(path: &Path) -> String {
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let mut best = ("?".to_owned(), 0);
    for line in mounts.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() > 2 && path.starts_with(f[1]) && f[1].len() >= best.1 {
            best = (f[2].to_owned(), f[1].len());
        }
    }
    best.0
}

/// What creating one small file costs under `dir` (create, write, rename
/// into a subfolder, as a loose object is written), in microseconds. On
/// ext4 this varies tenfold with how many files were deleted nearby in
/// the last seconds, and git-orch writes several files per event, so
/// every bench prints it.
pub fn file_create_us(dir: &Path) -> f64 {
    let probe = dir.join(format!(".fs-probe-{}", std::process::id()));
    std::fs::create_dir_all(probe.join("sub")).expect("probe dir");
    let n = 300;
    let start = Instant::now();
    for i in 0..n {
        let tmp = probe.join(format!(".tmp{i}"));
        std::fs::write(&tmp, [b'x'; 100]).expect("write");
        std::fs::rename(&tmp, probe.join("sub").join(format!("f{i}"))).expect("rename");
    }
    let us = start.elapsed().as_secs_f64() * 1e6 / f64::from(n);
    let _ = std::fs::remove_dir_all(&probe);
    us
}

/// One line about the machine and where the bench runs: cores, load
/// average, the file system and what a new file costs there.
pub fn machine(dir: &Path) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "{cores} cores, load average {}, {} on {} ({:.0} µs to create a file), binary {}",
        load.join(" "),
        dir.display(),
        fs_type(dir),
        file_create_us(dir),
        orch_bin().display()
    )
}

/// Appends `ops` (each op one log commit of its records, in order) to
/// `refs/orch/log/<writer>` in `repo` with one `git fast-import`, in
/// git-orch's own tree layout and commit format, as `Store::append` would
/// have written them (each commit's tree lists every event so far). The
/// ref may exist (the new commits continue it) or not.
pub fn fast_import_log(
    repo: &Path,
    writer: &git_orch::ids::WriterId,
    ops: impl IntoIterator<Item = Vec<git_orch::event::Record>>,
) {
    use git_orch::store::log::{commit_message, event_path};
    use std::io::Write;
    let log_ref = format!("refs/orch/log/{writer}");
    let exists = command("git", repo)
        .args(["rev-parse", "-q", "--verify", &log_ref])
        .output()
        .expect("git")
        .status
        .success();
    let mut child = command("git", repo)
        .args(["fast-import", "--quiet", "--done"])
        .stdin(Stdio::piped())
        .spawn()
        .expect("fast-import");
    let mut input = std::io::BufWriter::new(child.stdin.take().expect("stdin"));
    let mut first = exists;
    for records in ops {
        let message = commit_message(writer, &records);
        let time = records.last().map_or(0, |r| r.time_ms / 1000);
        writeln!(input, "commit {log_ref}").expect("write");
        writeln!(
            input,
            "committer git-orch <git-orch@localhost> {time} +0000"
        )
        .expect("write");
        writeln!(input, "data {}\n{message}", message.len()).expect("write");
        if first {
            writeln!(input, "from {log_ref}^0").expect("write");
            first = false;
        }
        for r in &records {
            let bytes = serde_json::to_vec(r).expect("record");
            let id = gix::objs::compute_hash(gix::hash::Kind::Sha1, gix::objs::Kind::Blob, &bytes)
                .expect("hash");
            writeln!(input, "M 100644 inline {}", event_path(r.seq, id.into())).expect("write");
            writeln!(input, "data {}", bytes.len()).expect("write");
            input.write_all(&bytes).expect("write");
            writeln!(input).expect("write");
        }
    }
    writeln!(input, "done").expect("write");
    drop(input);
    assert!(child.wait().expect("fast-import").success(), "fast-import");
}

/// A number from the environment variable `name`, else `default`.
pub fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// A fresh copy (`cp -a`) of the template repository beside it, named
/// `name`, for one side of one round.
pub fn copy_template(template: &Path, name: &str) -> PathBuf {
    let dest = template.with_file_name(name);
    let ok = Command::new("cp")
        .arg("-a")
        .arg(template)
        .arg(&dest)
        .status()
        .expect("cp")
        .success();
    assert!(ok, "copying the template");
    dest
}

/// Removes a copy and the worktree folders either side made beside it.
pub fn remove_copy(repo: &Path) {
    let _ = std::fs::remove_dir_all(repo);
    let _ = std::fs::remove_dir_all(repo.with_extension("orch"));
    let _ = std::fs::remove_dir_all(repo.with_extension("raw"));
}
