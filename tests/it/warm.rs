//! Warm worktrees (issue 28): `[worktree] include` copies the main
//! checkout's ignored local files into every checkout and they never
//! land; `[worktree] cache` shows each checkout the main checkout's build
//! caches warm (a copy without the sandbox, an overlay inside it) and no
//! write of an attempt ever reaches the main checkout's folder; a missing
//! cache folder is a warning; entries that leave the repository are
//! refused with a clear error, nothing written (invariants 2, 6, 9).

use crate::common;
use crate::tools;

use std::path::Path;

use common::{Project, Sandbox, project, status_json, stderr};

/// A project of task `a` (owning `src/a/**`) whose main checkout holds
/// ignored files: `.env`, `src/a/local.toml` and a build cache
/// `target/debug/dep.rlib` ("warm").
fn warm_project(sb: &mut Sandbox, config: &str, verification: &str) -> Project {
    let p = project(sb, &[("a", &[], verification)], Some(config));
    std::fs::write(p.repo.join(".gitignore"), ".env\nlocal.toml\ntarget/\n").expect("ignore");
    sb.git(&p.repo, &["add", ".gitignore"]);
    sb.git(&p.repo, &["commit", "-q", "-m", "ignore local files"]);
    std::fs::write(p.repo.join(".env"), "API_KEY=local-only-value\n").expect(".env");
    std::fs::write(p.repo.join("src/a/local.toml"), "port = 1\n").expect("local");
    std::fs::create_dir_all(p.repo.join("target/debug")).expect("target");
    std::fs::write(p.repo.join("target/debug/dep.rlib"), "warm\n").expect("rlib");
    p
}

/// Every path in every object reachable from any ref.
fn all_paths(sb: &Sandbox, repo: &Path) -> String {
    sb.git(repo, &["rev-list", "--all", "--objects"])
}

fn all_done(sb: &Sandbox, repo: &Path) -> bool {
    status_json(sb, repo)["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .all(|t| t["status"] == "done")
}

#[test]
fn an_included_env_is_in_every_checkout_and_never_lands() {
    let mut sb = Sandbox::new();
    // The gate's checkout has the file too (the verification reads it).
    let p = warm_project(
        &mut sb,
        "[worktree]\n    include = .env src/a/*.toml\n",
        "grep -q present src/a/seen && grep -q local-only .env && test -f src/a/local.toml",
    );
    p.script(
        "a",
        "run sh -c 'grep -q local-only .env && test -f src/a/local.toml && echo present > src/a/seen'\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("local files copied into every checkout: .env, src/a/*.toml"),
        "{}",
        stderr(&out)
    );
    assert!(all_done(&sb, &p.repo));
    let paths = all_paths(&sb, &p.repo);
    assert!(paths.contains("src/a/seen"), "{paths}");
    assert!(!paths.contains(".env"), "{paths}");
    assert!(!paths.contains("local.toml"), "{paths}");
    // `plan check` and `agents` say what agents get.
    let check = sb.orch_ok(&p.repo, &["plan", "check", "proj"]);
    assert!(check.contains(".env, src/a/*.toml"), "{check}");
    let agents = sb.orch_ok(&p.repo, &["agents", "fake"]);
    assert!(agents.contains(".env, src/a/*.toml"), "{agents}");
}

#[test]
fn an_included_file_the_agent_commits_fails_scope_and_never_lands() {
    let mut sb = Sandbox::new();
    let p = warm_project(
        &mut sb,
        "[orch]\n    retries = 0\n[worktree]\n    include = src/a/local.toml\n",
        "true",
    );
    // Inside its owned globs, forced past .gitignore.
    p.script(
        "a",
        "write src/a/code.rs fn main() {}\nrun git add -f src/a/local.toml\ncommit 'with the local file'\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let log = sb.orch_ok(&p.repo, &["log", "--json"]);
    assert!(
        log.contains("src/a/local.toml is a local file every checkout gets"),
        "{log}"
    );
    let landed = sb.git(&p.repo, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(!landed.contains("local.toml"), "{landed}");
}

/// The run's attempt writes into its warm `target/`: the main checkout's
/// folder stays as it was, and the gate's checkout sees the main
/// checkout's cache, not what the agent wrote.
fn a_cache_write_stays_in_the_attempt(sb: &mut Sandbox, config: &str) -> (Project, String) {
    let p = warm_project(
        sb,
        config,
        "grep -q warm target/debug/dep.rlib && grep -q warm src/a/seen && test ! -e target/new",
    );
    // In the environment: the sandbox hides the test's script folder.
    sb.set_env(
        "FAKE_AGENT_SCRIPT",
        "run sh -c 'cat target/debug/dep.rlib > src/a/seen && echo poisoned > target/debug/dep.rlib && echo new > target/new && mkdir -p target/release && echo x > target/release/bin'",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(all_done(sb, &p.repo));
    assert_eq!(
        std::fs::read_to_string(p.repo.join("target/debug/dep.rlib")).expect("rlib"),
        "warm\n"
    );
    assert!(!p.repo.join("target/new").exists());
    assert!(!p.repo.join("target/release").exists());
    let status = sb.git(&p.repo, &["status", "--porcelain"]);
    assert_eq!(status, "", "the main checkout is clean");
    (p, stderr(&out))
}

#[test]
fn without_the_sandbox_a_cache_is_a_copy_and_writes_stay_in_it() {
    let mut sb = Sandbox::new();
    let (p, err) = a_cache_write_stays_in_the_attempt(
        &mut sb,
        "[orch]\n    cleanup = never\n[worktree]\n    cache = target/\n",
    );
    assert!(err.contains("warm caches target/ by a"), "{err}");
    assert!(err.contains("copy of the main checkout's folder"), "{err}");
    // The attempt's own copy holds its writes.
    let wt = p.repo.with_file_name("proj.orch");
    let copy = walk(&wt)
        .into_iter()
        .find(|f| f.ends_with("target/new"))
        .expect("the attempt's copy");
    assert_eq!(std::fs::read_to_string(copy).expect("new"), "new\n");
}

#[test]
fn in_the_sandbox_a_cache_is_an_overlay_whose_upper_layer_goes_with_cleanup() {
    if !tools::bwrap_works(
        "in_the_sandbox_a_cache_is_an_overlay_whose_upper_layer_goes_with_cleanup",
    ) {
        return;
    }
    let mut sb = Sandbox::new();
    sb.set_env("GIT_ORCH_SANDBOX", "bwrap");
    let (p, err) = a_cache_write_stays_in_the_attempt(
        &mut sb,
        "[orch]\n    cleanup = never\n[worktree]\n    cache = target/\n",
    );
    assert!(err.contains("warm caches target/ by an overlay"), "{err}");
    // Nothing was copied: the worktree's target/ is an empty mount point,
    // and the attempt's writes are in its upper layer only.
    let wt = p.repo.with_file_name("proj.orch");
    assert!(
        !walk(&wt).iter().any(|f| f.ends_with("dep.rlib")),
        "no copy of the cache"
    );
    let layers = p.repo.join(".git/orch/warm");
    let uppers = walk(&layers);
    let new: Vec<_> = uppers.iter().filter(|f| f.ends_with("upper/new")).collect();
    assert_eq!(new.len(), 1, "only the agent wrote it: {uppers:?}");
    let out = sb.orch_ok(&p.repo, &["cleanup", "--all-completed"]);
    let left = walk(&layers);
    assert!(
        !left.iter().any(|f| f.ends_with("upper/new")),
        "{out}\n{left:?}"
    );
}

/// Build tools key caches on absolute paths (cargo, rustc's incremental
/// sessions): in the sandbox a gate sees its checkout at the main
/// checkout's own path, with git working there against its own git
/// folder and the repository's objects; the agent keeps its own path, and
/// neither the main checkout nor its cache folder gets a byte.
#[test]
fn in_the_sandbox_a_gate_sees_its_checkout_at_the_main_checkouts_path() {
    if !tools::bwrap_works("in_the_sandbox_a_gate_sees_its_checkout_at_the_main_checkouts_path") {
        return;
    }
    let mut sb = Sandbox::new();
    sb.set_env("GIT_ORCH_SANDBOX", "bwrap");
    let p = warm_project(
        &mut sb,
        "[worktree]\n    cache = target/\n",
        "test \"$(pwd -P)\" = \"$EXPECT_MAIN\" && grep -q present src/a/seen \
         && test ! -e only-in-main && grep -q warm target/debug/dep.rlib \
         && git cat-file -e \"$ORCH_BASE^{commit}\" \
         && test -z \"$(git status --porcelain --untracked-files=no)\" \
         && test -r \"$ORCH_PROMPT_FILE\" \
         && echo gate > target/gate-wrote && echo gate > written-by-gate",
    );
    let main = p.repo.canonicalize().expect("main path");
    std::fs::write(p.repo.join("only-in-main"), "x\n").expect("untracked");
    sb.set_env("EXPECT_MAIN", &main.to_string_lossy());
    sb.set_env("GIT_ORCH_PASS_ENV", "FAKE_* EXPECT_MAIN");
    sb.set_env(
        "FAKE_AGENT_SCRIPT",
        "run sh -c 'echo present > src/a/seen && pwd -P > src/a/where'",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(all_done(&sb, &p.repo), "{}", stderr(&out));
    let agent_saw = sb.git(&p.repo, &["show", "HEAD:src/a/where"]);
    assert_ne!(
        agent_saw.trim(),
        main.display().to_string(),
        "the agent keeps its own path"
    );
    assert!(
        !p.repo.join("target/gate-wrote").exists(),
        "the cache folder got a write"
    );
    assert!(
        !p.repo.join("written-by-gate").exists(),
        "the main checkout got a write"
    );
    let status = sb.git(&p.repo, &["status", "--porcelain"]);
    assert_eq!(
        status.trim(),
        "?? only-in-main",
        "the main checkout is as it was"
    );
}

/// Layers outlive their checkout only by a crash, or as an earlier
/// git-orch left them (its agents' start probes' layers, never removed):
/// a run leaves no layers but its kept attempt's, `fsck` names a folder
/// of layers no checkout owns (never one whose checkout is there), and
/// `cleanup` removes it.
#[test]
fn layers_no_checkout_owns_are_found_by_fsck_and_removed_by_cleanup() {
    if !tools::bwrap_works("layers_no_checkout_owns_are_found_by_fsck_and_removed_by_cleanup") {
        return;
    }
    let mut sb = Sandbox::new();
    sb.set_env("GIT_ORCH_SANDBOX", "bwrap");
    let (p, _) = a_cache_write_stays_in_the_attempt(
        &mut sb,
        "[orch]\n    cleanup = never\n[worktree]\n    cache = target/\n",
    );
    let layers = p.repo.join(".git/orch/warm");
    let kept = |l: &Path| {
        let mut v: Vec<_> = std::fs::read_dir(l)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    let before = kept(&layers);
    assert_eq!(
        before.len(),
        1,
        "the kept attempt's layers only: {before:?}"
    );
    let fsck = sb.orch(&p.repo, &["fsck"]);
    assert!(!String::from_utf8_lossy(&fsck.stdout).contains("belong to no checkout"));
    // What an earlier git-orch left: layers naming no checkout, hours old.
    let left = layers.join("00112233aabbccdd");
    for d in ["0-repo-target/upper", "0-repo-target/work"] {
        std::fs::create_dir_all(left.join(d)).expect("layers");
    }
    let aged = std::process::Command::new("touch")
        .args(["-d", "2 hours ago"])
        .arg(&left)
        .status()
        .expect("touch");
    assert!(aged.success());
    let fsck = sb.orch(&p.repo, &["fsck"]);
    let said = format!("{}{}", String::from_utf8_lossy(&fsck.stdout), stderr(&fsck));
    assert!(
        said.contains(&format!("{} belong to no checkout", left.display())),
        "{said}"
    );
    assert!(!said.contains(&before[0].display().to_string()), "{said}");
    let out = sb.orch_ok(&p.repo, &["cleanup", "--dry-run"]);
    assert!(
        out.contains("(their checkout is gone)  would remove"),
        "{out}"
    );
    assert!(left.is_dir(), "a dry run removes nothing");
    let out = sb.orch_ok(&p.repo, &["cleanup"]);
    assert!(out.contains("(their checkout is gone)  removed"), "{out}");
    assert!(!left.exists());
}

#[test]
fn a_missing_cache_folder_is_a_warning_not_a_failure() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/done")],
        Some("[worktree]\n    cache = target/ node_modules/ ~/.cache/nothing\n"),
    );
    p.script("a", "write src/a/done yes\n");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning: [worktree] cache target/:") && err.contains("does not exist yet"),
        "{err}"
    );
    assert!(err.contains("node_modules/"), "{err}");
    assert!(all_done(&sb, &p.repo));
}

#[test]
fn entries_that_leave_the_repository_are_refused_and_nothing_is_written() {
    for (entry, why) in [
        ("cache = ../elsewhere", "leaves the repository"),
        ("cache = /etc", "leaves the repository"),
        ("include = /etc/passwd", "leaves the repository"),
        ("include = ../*.env", "leaves the repository"),
        ("cache = .git/objects", "git's or git-orch's own"),
    ] {
        let mut sb = Sandbox::new();
        let p = project(&mut sb, &[("a", &[], "true")], None);
        p.script("a", "write src/a/done yes\n");
        // Committed after the plan was added, which refuses it too.
        std::fs::create_dir_all(p.repo.join(".orch")).expect("mkdir");
        std::fs::write(
            p.repo.join(".orch/config"),
            format!("[worktree]\n    {entry}\n"),
        )
        .expect("config");
        sb.git(&p.repo, &["add", "."]);
        sb.git(&p.repo, &["commit", "-q", "-m", "bad config"]);
        let before = sb.refs(&p.repo);
        let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
        assert_ne!(out.status.code(), Some(0), "{entry}");
        let err = stderr(&out);
        assert!(
            err.contains("[worktree]") && err.contains(why),
            "{entry}: {err}"
        );
        assert_eq!(sb.refs(&p.repo), before, "{entry}: nothing written");
        assert!(!p.repo.with_file_name("proj.orch").exists(), "{entry}");
    }
}

#[test]
fn a_cache_that_is_a_symlink_out_of_the_repository_is_refused() {
    let mut sb = Sandbox::new();
    let p = project(
        &mut sb,
        &[("a", &[], "true")],
        Some("[orch]\n    retries = 0\n[worktree]\n    cache = target/\n    include = .env\n"),
    );
    let outside = sb.path().join("outside");
    std::fs::create_dir_all(&outside).expect("outside");
    std::fs::write(outside.join("secret"), "s").expect("secret");
    std::os::unix::fs::symlink(&outside, p.repo.join("target")).expect("link");
    // An included file that is a link out is never copied either.
    std::os::unix::fs::symlink(outside.join("secret"), p.repo.join(".env")).expect("link");
    std::fs::write(p.repo.join(".git/info/exclude"), "target\n.env\n").expect("exclude");
    p.script(
        "a",
        "run sh -c 'test ! -e .env && write=1; echo x > src/a/done'\n",
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("points outside the repository"), "{err}");
    assert_eq!(
        std::fs::read_dir(&outside).expect("outside").count(),
        1,
        "nothing written outside"
    );
}

#[test]
fn a_result_that_puts_a_link_where_the_cache_goes_is_not_followed() {
    let mut sb = Sandbox::new();
    // The cache lies inside the task's owned globs, so the agent may
    // commit a link there; the gate's checkout must not follow it.
    let p = project(
        &mut sb,
        &[("a", &[], "true")],
        Some("[orch]\n    retries = 0\n[worktree]\n    cache = src/a/cache\n"),
    );
    std::fs::write(p.repo.join(".git/info/exclude"), "src/a/cache/\n").expect("exclude");
    std::fs::create_dir_all(p.repo.join("src/a/cache")).expect("cache");
    std::fs::write(p.repo.join("src/a/cache/x"), "warm\n").expect("x");
    let victim = sb.path().join("victim");
    std::fs::create_dir_all(&victim).expect("victim");
    p.script(
        "a",
        &format!(
            "run sh -c 'rm -rf src/a/cache && ln -s {} src/a/cache && git add -f src/a/cache && git commit -q -m link'\n",
            victim.display()
        ),
    );
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_ne!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_dir(&victim).expect("victim").count(),
        0,
        "nothing copied through the link"
    );
    let log = sb.orch_ok(&p.repo, &["log", "--json"]);
    assert!(log.contains("is not a folder of the checkout"), "{log}");
}

/// Every file under `dir` (links not followed).
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let t = e.file_type().expect("type");
            if t.is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path());
            }
        }
    }
    out
}
