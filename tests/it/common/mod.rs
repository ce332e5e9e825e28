//! Hermetic test harness: temp repositories made with real git, and the
//! built binary run as `git orch` through PATH with a cleared environment,
//! fixed dates, `TZ=UTC`, no global or system git config and `HOME` inside
//! the temp dir.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The directory holding the built `git-orch` binary.
pub fn bin_dir() -> PathBuf {
    Path::new(env!("CARGO_BIN_EXE_git-orch"))
        .parent()
        .expect("binary has a parent dir")
        .to_owned()
}

/// The repository's own folder (for fixtures).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A temp directory with a clean environment for git and git orch.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
    extra_env: Vec<(String, String)>,
    /// Whether git gets an author/committer identity from the environment.
    pub identity: bool,
}

impl Default for Sandbox {
    fn default() -> Self {
        Self::new()
    }
}

impl Sandbox {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("orch-test-")
            .tempdir()
            .expect("temp dir");
        std::fs::create_dir_all(dir.path().join("home")).expect("home dir");
        Self {
            dir,
            extra_env: Vec::new(),
            identity: true,
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Adds an environment variable for every command run in this sandbox.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.extra_env.push((key.into(), value.into()));
    }

    /// A command with the hermetic environment, run in `cwd`.
    pub fn command(&self, program: &str, cwd: &Path) -> Command {
        let mut cmd = Command::new(program);
        cmd.current_dir(cwd).env_clear();
        let path = format!(
            "{}:{}:{}",
            bin_dir().display(),
            repo_root().join("fixtures/agents").display(),
            system_bin().display()
        );
        for (k, v) in [
            ("PATH", path.as_str()),
            ("HOME", &self.path().join("home").to_string_lossy()),
            ("TZ", "UTC"),
            ("LANG", "C"),
            ("GIT_CONFIG_GLOBAL", "/dev/null"),
            ("GIT_CONFIG_NOSYSTEM", "1"),
            ("GIT_AUTHOR_DATE", "2026-01-01T00:00:00Z"),
            ("GIT_COMMITTER_DATE", "2026-01-01T00:00:00Z"),
            ("NO_COLOR", "1"),
            // Tests not about the sandbox run the same on every machine;
            // the sandbox tests set their own mode. The fake CLIs read
            // their scripts from FAKE_* variables, which agents of the
            // real kinds would not otherwise be given.
            ("GIT_ORCH_SANDBOX", "none"),
            ("GIT_ORCH_PASS_ENV", "FAKE_*"),
        ] {
            cmd.env(k, v);
        }
        if self.identity {
            for (k, v) in [
                ("GIT_AUTHOR_NAME", "Test Author"),
                ("GIT_AUTHOR_EMAIL", "author@example.com"),
                ("GIT_COMMITTER_NAME", "Test Committer"),
                ("GIT_COMMITTER_EMAIL", "committer@example.com"),
            ] {
                cmd.env(k, v);
            }
        }
        for (k, v) in &self.extra_env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null());
        cmd
    }

    /// Runs git in `cwd` and returns stdout; panics on failure.
    pub fn git(&self, cwd: &Path, args: &[&str]) -> String {
        let out = self
            .command("git", cwd)
            .args(args)
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?} failed in {}: {}",
            cwd.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned()
    }

    /// Runs git in `cwd` and returns the whole output, success or not.
    pub fn git_output(&self, cwd: &Path, args: &[&str]) -> Output {
        self.command("git", cwd)
            .args(args)
            .output()
            .expect("git runs")
    }

    /// Runs `git orch <args>` in `cwd` and returns its output.
    pub fn orch(&self, cwd: &Path, args: &[&str]) -> Output {
        self.command("git", cwd)
            .arg("orch")
            .args(args)
            .output()
            .expect("git orch runs")
    }

    /// Runs `git orch <args>`, asserts exit 0 and returns stdout.
    pub fn orch_ok(&self, cwd: &Path, args: &[&str]) -> String {
        let out = self.orch(cwd, args);
        assert!(
            out.status.success(),
            "git orch {args:?} exited {:?}\nstdout: {}\nstderr: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// A new repository with one commit on `main`.
    pub fn repo(&self, name: &str) -> PathBuf {
        let dir = self.path().join(name);
        std::fs::create_dir_all(&dir).expect("repo dir");
        self.git(&dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("README.md"), "hello\n").expect("write");
        self.git(&dir, &["add", "."]);
        self.git(
            &dir,
            &[
                "-c",
                "user.name=Seed",
                "-c",
                "user.email=seed@example.com",
                "commit",
                "-q",
                "-m",
                "initial",
            ],
        );
        dir
    }

    /// A bare repository to use as a shared remote.
    pub fn bare(&self, name: &str) -> PathBuf {
        let dir = self.path().join(name);
        self.git(
            self.path(),
            &["init", "-q", "--bare", "-b", "main", &dir.to_string_lossy()],
        );
        dir
    }

    /// A clone of `remote` at `name`.
    pub fn clone_of(&self, remote: &Path, name: &str) -> PathBuf {
        let dir = self.path().join(name);
        self.git(
            self.path(),
            &[
                "clone",
                "-q",
                &remote.to_string_lossy(),
                &dir.to_string_lossy(),
            ],
        );
        dir
    }

    /// Every ref with its value, for "nothing changed" checks.
    pub fn refs(&self, repo: &Path) -> String {
        self.git(repo, &["for-each-ref", "--format=%(refname) %(objectname)"])
    }
}

impl Sandbox {
    /// `git fsck --full` of every repository under the sandbox, clones and
    /// bare remotes included: one message per repository that fails.
    pub fn fsck_failures(&self) -> Vec<String> {
        let mut failures = Vec::new();
        for git_dir in git_dirs(self.path()) {
            let fsck = || {
                // git-orch starts `git maintenance run --auto` in the
                // background after appends; a repack it runs moves loose
                // objects into a pack while fsck lists them ("unable to
                // mmap …: No such file"). Wait for it, and look again
                // when an object moved: one that is really missing stays
                // missing.
                let locks = [
                    git_dir.join("objects/maintenance.lock"),
                    git_dir.join("gc.pid"),
                ];
                wait_until_quiet(&locks);
                self.command("git", self.path())
                    .arg("--git-dir")
                    .arg(&git_dir)
                    .args(["fsck", "--full", "--no-progress", "--no-dangling"])
                    .output()
                    .expect("git fsck runs")
            };
            let mut out = fsck();
            for _ in 0..3 {
                let moved = String::from_utf8_lossy(&out.stderr).contains("unable to mmap");
                if out.status.success() || !moved {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(500));
                out = fsck();
            }
            if !out.status.success() {
                failures.push(format!(
                    "{}:\n{}{}",
                    git_dir.display(),
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        failures
    }
}

impl Drop for Sandbox {
    /// Every repository a test leaves behind must pass `git fsck --full`:
    /// a missing or corrupt object that git-orch wrote fails the test that
    /// made it (unless the test already failed for another reason).
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let failures = self.fsck_failures();
        assert!(
            failures.is_empty(),
            "git fsck --full failed at the end of the test:\n{}",
            failures.join("\n")
        );
    }
}

/// Waits (at most a minute) until none of `locks` exists: git's background
/// maintenance holds one while it repacks.
pub fn wait_until_quiet(locks: &[PathBuf]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while locks.iter().any(|l| l.exists()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Every git directory under `root` (a `.git` folder or a bare repository;
/// linked worktrees share their main repository's objects and are checked
/// through it).
pub fn git_dirs(root: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        if dir.join("HEAD").is_file() && dir.join("objects").is_dir() && dir.join("refs").exists() {
            out.push(dir);
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// stdout as a string.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// stderr as a string.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Parses NDJSON output into values.
pub fn json_lines(s: &str) -> Vec<serde_json::Value> {
    s.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// Shares `repo` through a new bare remote `origin` (main pushed,
/// `orch.remote` set), as a run for workers needs; returns the remote.
pub fn share(sb: &Sandbox, repo: &Path) -> PathBuf {
    let bare = sb.bare("remote.git");
    sb.git(repo, &["remote", "add", "origin", &bare.to_string_lossy()]);
    sb.git(repo, &["push", "-q", "origin", "main"]);
    sb.orch_ok(repo, &["init", "--remote", "origin"]);
    bare
}

/// A project with one folder per task, a plan over them, approved, and a
/// folder of fake-agent scripts (`FAKE_AGENT_DIR`) the caller fills.
pub struct Project {
    pub repo: PathBuf,
    pub scripts: PathBuf,
    pub plan_id: String,
}

/// Tasks are (id, depends_on, verification). Task `x` owns `src/x/**`.
pub fn project(sb: &mut Sandbox, tasks: &[(&str, &[&str], &str)], config: Option<&str>) -> Project {
    let repo = sb.repo("proj");
    for (id, _, _) in tasks {
        let dir = repo.join("src").join(id);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("README"), format!("{id}\n")).expect("write");
    }
    if let Some(c) = config {
        std::fs::create_dir_all(repo.join(".orch")).expect("mkdir");
        std::fs::write(repo.join(".orch/config"), c).expect("config");
    }
    sb.git(&repo, &["add", "."]);
    sb.git(
        &repo,
        &[
            "-c",
            "user.name=Seed",
            "-c",
            "user.email=seed@example.com",
            "commit",
            "-q",
            "-m",
            "project",
        ],
    );
    let subtasks: Vec<serde_json::Value> = tasks
        .iter()
        .map(|(id, deps, verify)| {
            serde_json::json!({
                "id": id, "title": format!("Task {id}"), "owned_globs": [format!("src/{id}/**")],
                "deliverable": format!("{id} done"), "verification": verify, "depends_on": deps,
            })
        })
        .collect();
    let plan = serde_json::json!({"version": 1, "id": "proj", "instruction": "Do the work", "subtasks": subtasks});
    let plan_file = sb.path().join("plan.json");
    std::fs::write(&plan_file, plan.to_string()).expect("plan");
    sb.orch_ok(&repo, &["plan", "add", &plan_file.to_string_lossy()]);
    sb.orch_ok(&repo, &["approve", "proj"]);
    let scripts = sb.path().join("scripts");
    std::fs::create_dir_all(&scripts).expect("scripts");
    sb.set_env("FAKE_AGENT_DIR", &scripts.to_string_lossy());
    Project {
        repo,
        scripts,
        plan_id: "proj".into(),
    }
}

impl Project {
    /// Writes the fake-agent script for `name` (`task`, `task.N` or `default`).
    pub fn script(&self, name: &str, text: &str) {
        std::fs::write(self.scripts.join(format!("{name}.script")), text).expect("script");
    }
}

/// Puts an untracked file at `src/<task>/done` in the checkout of the
/// target for every task folder of the tests' projects, the paths their
/// landings add: every landing is refused (exit 3) until
/// [`unblock_landings`]. (Unrelated untracked files never block one.)
pub fn block_landings(repo: &Path) {
    for dir in std::fs::read_dir(repo.join("src")).expect("src").flatten() {
        std::fs::write(dir.path().join("done"), "mine").expect("untracked file");
    }
}

/// Removes what [`block_landings`] put in the way.
pub fn unblock_landings(repo: &Path) {
    for dir in std::fs::read_dir(repo.join("src")).expect("src").flatten() {
        std::fs::remove_file(dir.path().join("done")).expect("rm");
    }
}

/// `git orch status --json` of the newest run.
pub fn status_json(sb: &Sandbox, repo: &Path) -> serde_json::Value {
    serde_json::from_str(sb.orch_ok(repo, &["status", "--json"]).trim()).expect("status json")
}

/// Every event of the log.
pub fn events(sb: &Sandbox, repo: &Path) -> Vec<serde_json::Value> {
    json_lines(&sb.orch_ok(repo, &["log", "--json"]))
}

/// Whether `program` is on PATH.
pub fn have(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Whether a test that needs `what` (a program, or a file such as git's
/// completion script) can run. Missing under `CI=true` (where `.ci/run`
/// installs it) the test fails; elsewhere it says loudly that it checked
/// nothing, and the caller returns.
pub fn needs(present: bool, what: &str, install: &str) -> bool {
    if present {
        return true;
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{what} is missing under CI=true; .ci/run installs it ({install})");
    }
    eprintln!(
        "\n*** SKIPPED: {what} is not installed ({install}); this test checked nothing ***\n"
    );
    false
}

/// [`needs`] for a program on PATH.
pub fn needs_program(program: &str, install: &str) -> bool {
    needs(have(program), &format!("`{program}`"), install)
}

/// Polls `ready` every 20 ms until it holds; panics naming `what` after
/// `limit`. Tests wait on what they need to see, never a fixed delay.
pub fn wait_until(what: &str, limit: std::time::Duration, mut ready: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !ready() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited {limit:?} for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Ctrl-C for a `git orch run` spawned by a test, once `attempts` of its
/// attempts have started (so they are live when it comes); returns what
/// the run printed and how it ended.
pub fn interrupt_once_started(
    sb: &Sandbox,
    repo: &Path,
    driver: std::process::Child,
    attempts: usize,
) -> Output {
    wait_until(
        &format!("{attempts} attempts to start"),
        std::time::Duration::from_secs(30),
        || {
            events(sb, repo)
                .iter()
                .filter(|e| e["type"] == "attempt_started")
                .count()
                == attempts
        },
    );
    let pid = driver.id() as i32;
    assert!(pid > 1);
    // SAFETY: a positive pid of our own child, checked above; SIGINT is
    // what Ctrl-C sends.
    unsafe { libc::kill(pid, libc::SIGINT) };
    driver.wait_with_output().expect("wait for the run")
}

/// The real agent CLIs: tests that need them find them where `.ci/run`
/// installs them, never wherever this machine happens to have them.
const AGENT_CLIS: [&str; 4] = ["claude", "codex", "gemini", "aider"];

/// The system's programs for the tests' PATH: a folder of links to
/// everything in `/usr/local/bin`, `/usr/bin` and `/bin` except the agent
/// CLIs, made once per test process. With the system folders themselves
/// on PATH, a Gemini CLI installed system-wide changed what `git orch
/// agents` said, and so a test's result.
pub fn system_bin() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("system-bin");
        let dir = root.join(std::process::id().to_string());
        // Folders of processes that have ended.
        if let Ok(entries) = std::fs::read_dir(&root) {
            for e in entries.flatten() {
                let alive = e
                    .file_name()
                    .to_str()
                    .is_some_and(|pid| Path::new("/proc").join(pid).exists());
                if !alive {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
        std::fs::create_dir_all(&dir).expect("system-bin folder");
        for folder in ["/usr/local/bin", "/usr/bin", "/bin"] {
            let Ok(entries) = std::fs::read_dir(folder) else {
                continue;
            };
            for e in entries.flatten() {
                let name = e.file_name();
                let Some(text) = name.to_str() else { continue };
                if AGENT_CLIS.contains(&text) || dir.join(&name).exists() {
                    continue; // hidden, or an earlier folder's program wins
                }
                let _ = std::os::unix::fs::symlink(e.path(), dir.join(&name));
            }
        }
        dir
    })
}

#[test]
fn the_tests_path_has_the_system_programs_but_no_agent_cli() {
    let dir = system_bin();
    for present in ["git", "sh", "env"] {
        assert!(
            dir.join(present).exists(),
            "{present} missing from {}",
            dir.display()
        );
    }
    for hidden in AGENT_CLIS {
        assert!(!dir.join(hidden).exists(), "{hidden} is on the tests' PATH");
    }
}

// Reading the crate's own Rust sources (the layering and edge checks).

/// Whether an item is compiled only for tests (`#[cfg(test)]`, not
/// `#[cfg(not(test))]`).
pub fn test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

pub fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item::*;
    match item {
        Const(i) => &i.attrs,
        Enum(i) => &i.attrs,
        ExternCrate(i) => &i.attrs,
        Fn(i) => &i.attrs,
        ForeignMod(i) => &i.attrs,
        Impl(i) => &i.attrs,
        Macro(i) => &i.attrs,
        Mod(i) => &i.attrs,
        Static(i) => &i.attrs,
        Struct(i) => &i.attrs,
        Trait(i) => &i.attrs,
        TraitAlias(i) => &i.attrs,
        Type(i) => &i.attrs,
        Union(i) => &i.attrs,
        Use(i) => &i.attrs,
        _ => &[],
    }
}
