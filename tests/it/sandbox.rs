//! Agents confined (issue 17): with the bubblewrap sandbox an agent cannot
//! write the user's main checkout, the home folder or another attempt's
//! worktree, nor reach the SSH agent, while it writes and commits its own
//! files and the work lands; gates run confined with the same cleaned
//! environment; `sandbox = none` and a sandbox that cannot work here behave
//! as docs/security.md says; bad settings are refused before anything is
//! written.

use crate::common;
use crate::tools;

use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use common::{Project, Sandbox, events, project, status_json, stderr};

/// An agent that, as task `a`, tries every forbidden thing and reports
/// each result in `src/a/report`, then does its own work and commits it;
/// as task `b`, just does its work. `$1` is the main checkout, `$2` the
/// SSH agent socket, `$3` the user's home folder (inside the sandbox
/// `$HOME` is a private folder; this is the real one).
const PROBE: &str = r#"run sh -c 'main="$1"; sock="$2"; home="$3"; case "$ORCH_TASK" in
b) echo done > src/b/done; r="$(dirname "$PWD")/a-1/src/a/report"; i=0;
   while ! grep -q "b-1/src/b/README" "$r" 2>/dev/null && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done ;;
a) r=src/a/report; : > "$r"; other="$(dirname "$PWD")/b-1/src/b/README"; i=0;
   while [ ! -e "$other" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done;
   if [ -e "$other" ]; then echo "B-SEEN" >> "$r"; else echo "B-MISSING" >> "$r"; fi;
   for t in "$main/README.md" "$main/.git/config" "$home/evil" "$other"; do
     if (echo evil >> "$t") 2>/dev/null; then echo "WROTE $t" >> "$r"; else echo "DENIED $t" >> "$r"; fi;
   done;
   if [ -n "${SSH_AUTH_SOCK:-}" ]; then echo "SOCK-ENV" >> "$r"; else echo "NO-SOCK-ENV" >> "$r"; fi;
   if [ -n "${SECRET_TOKEN:-}" ]; then echo "SECRET-ENV" >> "$r"; else echo "NO-SECRET-ENV" >> "$r"; fi;
   if python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])" "$sock" 2>/dev/null; then echo "SOCK-CONNECTED" >> "$r"; else echo "SOCK-DENIED" >> "$r"; fi;
   echo yes > src/a/done;
   git add -A && git commit -q -m "a: own commit" ;;
esac' sh @MAIN@ @SOCK@ @HOME@
"#;

/// A project of `a` and `b`, run at once (b's agent stays until a's report
/// shows it tried b's worktree, with a deadline, so a tries it while b
/// works), with `config` as .orch/config, the probe agent, an SSH agent
/// socket and a secret in the driver's environment. The probe attacks the
/// main checkout, or `decoy` in its place (where a write that goes
/// through, as without a sandbox, must not leave the checkout dirty).
/// Returns the project, the socket's listener and the test's home folder.
fn setup(sb: &mut Sandbox, config: &str, decoy: bool) -> (Project, UnixListener, PathBuf) {
    let sock = sb.path().join("agent.sock");
    let listener = UnixListener::bind(&sock).expect("socket");
    listener.set_nonblocking(true).expect("non-blocking");
    sb.set_env("SSH_AUTH_SOCK", &sock.to_string_lossy());
    sb.set_env("SECRET_TOKEN", "s3cr3t-value");
    let p = project(
        sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &[], "test -f src/b/done"),
        ],
        Some(config),
    );
    // The fake reads one command per line: the shell script is one line.
    let main = if decoy {
        let d = sb.path().join("decoy");
        std::fs::create_dir_all(d.join(".git")).expect("decoy");
        std::fs::write(d.join("README.md"), "decoy\n").expect("decoy");
        std::fs::write(d.join(".git/config"), "").expect("decoy");
        d
    } else {
        p.repo.clone()
    };
    let home = sb.path().join("home");
    let script = PROBE
        .trim()
        .replace('\n', " ")
        .replace("@MAIN@", &main.to_string_lossy())
        .replace("@SOCK@", &sock.to_string_lossy())
        .replace("@HOME@", &home.to_string_lossy());
    // The sandbox hides the test's folder, so the script travels in the
    // environment rather than in FAKE_AGENT_DIR.
    sb.set_env("FAKE_AGENT_SCRIPT", &script);
    (p, listener, home)
}

fn report(repo: &Path) -> Vec<String> {
    std::fs::read_to_string(repo.join("src/a/report"))
        .expect("the report landed")
        .lines()
        .map(str::to_owned)
        .collect()
}

fn sandboxes_of(sb: &Sandbox, repo: &Path) -> Vec<String> {
    events(sb, repo)
        .iter()
        .filter(|e| e["type"] == "attempt_started")
        .map(|e| e["sandbox"].as_str().unwrap_or("?").to_owned())
        .collect()
}

#[test]
fn a_sandboxed_agent_cannot_write_outside_its_worktree_but_its_work_lands() {
    if !tools::bwrap_works("a_sandboxed_agent_cannot_write_outside_its_worktree_but_its_work_lands")
    {
        return;
    }
    let mut sb = Sandbox::new();
    // A gate that passes only if it too runs confined and clean.
    let config_for = |main: &Path| {
        format!(
            "[orch]\n    sandbox = bwrap\n[gate \"confined\"]\n    run = \"! (echo x >> {}/README.md) 2>/dev/null && test -z \\\"$SECRET_TOKEN\\\" && test -z \\\"$SSH_AUTH_SOCK\\\"\"\n",
            main.display()
        )
    };
    // The project's path is known only once it exists: write the config
    // after, in a second commit.
    let (p, listener, home) = setup(&mut sb, "", false);
    std::fs::write(p.repo.join(".orch/config"), config_for(&p.repo)).expect("config");
    sb.git(&p.repo, &["add", "."]);
    sb.git(&p.repo, &["commit", "-q", "-m", "sandbox config"]);
    sb.set_env("GIT_ORCH_SANDBOX", "");
    let readme = std::fs::read(p.repo.join("README.md")).expect("readme");
    let git_config = std::fs::read(p.repo.join(".git/config")).expect("config");

    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    let dirty = sb.git(&p.repo, &["status", "--porcelain", "--ignored"])
        + &std::fs::read_to_string(p.repo.join("README.md")).unwrap_or_default();
    assert_eq!(out.status.code(), Some(0), "{}\n{dirty}", stderr(&out));
    assert!(!stderr(&out).contains("no sandbox"), "{}", stderr(&out));

    let s = status_json(&sb, &p.repo);
    assert!(
        s["tasks"]
            .as_array()
            .expect("tasks")
            .iter()
            .all(|t| t["status"] == "done"),
        "{s}"
    );
    let r = report(&p.repo);
    assert_eq!(r.len(), 8, "{r:?}");
    assert_eq!(
        r[0], "B-SEEN",
        "the other attempt's worktree was not there to attack"
    );
    for line in &r[1..5] {
        assert!(
            line.starts_with("DENIED "),
            "a write outside the worktree went through: {r:?}"
        );
    }
    assert_eq!(&r[5..], ["NO-SOCK-ENV", "NO-SECRET-ENV", "SOCK-DENIED"]);
    // Nothing outside changed.
    assert_eq!(
        std::fs::read(p.repo.join("README.md")).expect("readme"),
        readme
    );
    assert_eq!(
        std::fs::read(p.repo.join(".git/config")).expect("config"),
        git_config
    );
    assert!(!home.join("evil").exists());
    // Whatever b's worktree held when b's result was committed landed:
    // nothing of a's in it.
    assert_eq!(
        std::fs::read_to_string(p.repo.join("src/b/README")).expect("b readme"),
        "b\n"
    );
    assert!(
        listener.accept().is_err(),
        "the agent reached the SSH agent socket"
    );
    // The agent's own committed work is part of what landed (one commit
    // per subtask, titled by the subtask).
    let log = sb.git(&p.repo, &["log", "--format=%s", "main"]);
    assert!(log.lines().any(|l| l == "Task a"), "{log}");
    assert_eq!(sandboxes_of(&sb, &p.repo), ["bwrap", "bwrap"]);
    let verdicts: Vec<serde_json::Value> = events(&sb, &p.repo)
        .into_iter()
        .filter(|e| e["type"] == "gate_verdict" && e["verdict"]["gate"] == "confined")
        .collect();
    assert!(
        verdicts.iter().all(|v| v["verdict"]["status"] == "pass") && verdicts.len() == 2,
        "{verdicts:?}"
    );
}

#[test]
fn with_sandbox_none_agents_run_unconfined_but_with_the_allow_listed_environment() {
    let mut sb = Sandbox::new();
    let (p, _listener, home) = setup(&mut sb, "[orch]\n    sandbox = none\n", true);
    sb.set_env("GIT_ORCH_SANDBOX", "");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // Asked for none: no warning.
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let r = report(&p.repo);
    // As documented: without a sandbox the agent can write what you can …
    assert!(
        r[2].starts_with("WROTE ") && home.join("evil").exists(),
        "{r:?}"
    );
    // … but never sees what the allow-list leaves out.
    assert!(r.contains(&"NO-SOCK-ENV".to_owned()), "{r:?}");
    assert!(r.contains(&"NO-SECRET-ENV".to_owned()), "{r:?}");
    assert_eq!(sandboxes_of(&sb, &p.repo), ["none", "none"]);
}

/// A folder with a `bwrap` that fails the way it does where user
/// namespaces are forbidden.
fn broken_bwrap(sb: &Sandbox) -> String {
    let dir = sb.path().join("broken-bin");
    std::fs::create_dir_all(&dir).expect("mkdir");
    let bwrap = dir.join("bwrap");
    std::fs::write(
        &bwrap,
        "#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n",
    )
    .expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bwrap, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    format!(
        "{}:{}:{}:/usr/local/bin:/usr/bin:/bin",
        dir.display(),
        common::bin_dir().display(),
        common::repo_root().join("fixtures/agents").display()
    )
}

#[test]
fn auto_without_a_working_sandbox_warns_once_and_runs_unconfined() {
    let mut sb = Sandbox::new();
    let path = broken_bwrap(&sb);
    sb.set_env("PATH", &path);
    let (p, _listener, _home) = setup(&mut sb, "", true);
    sb.set_env("GIT_ORCH_SANDBOX", "auto");
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("warning: no sandbox").count(), 1, "{err}");
    assert!(
        err.contains("No permissions to create new namespace"),
        "{err}"
    );
    assert_eq!(sandboxes_of(&sb, &p.repo), ["none", "none"]);
    let r = report(&p.repo);
    assert!(r.contains(&"NO-SECRET-ENV".to_owned()), "{r:?}");
}

#[test]
fn bwrap_required_but_broken_refuses_the_run_and_writes_nothing() {
    let mut sb = Sandbox::new();
    let path = broken_bwrap(&sb);
    sb.set_env("PATH", &path);
    let (p, _listener, _home) = setup(&mut sb, "[orch]\n    sandbox = bwrap\n", true);
    sb.set_env("GIT_ORCH_SANDBOX", "");
    let before = sb.refs(&p.repo);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    // The configuration cannot work here: its own exit code.
    assert_eq!(out.status.code(), Some(78), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("bubblewrap sandbox, but it does not work here"),
        "{err}"
    );
    assert!(err.contains("apt-get install bubblewrap"), "{err}");
    assert!(err.contains("sandbox = auto"), "{err}");
    assert_eq!(sb.refs(&p.repo), before, "something was written");
}

#[test]
fn bad_sandbox_settings_are_refused_before_anything_is_written() {
    let mut sb = Sandbox::new();
    let (p, _listener, _home) = setup(&mut sb, "", true);
    std::fs::write(
        p.repo.join(".orch/config"),
        "[orch]\n    sandbox = banana\n",
    )
    .expect("config");
    sb.git(&p.repo, &["commit", "-qam", "bad sandbox"]);
    sb.set_env("GIT_ORCH_SANDBOX", "");
    let before = sb.refs(&p.repo);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out)
            .contains("[orch] sandbox: \"banana\" is not a sandbox mode; use auto, bwrap or none"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.refs(&p.repo), before);
    // The same word in the override variable.
    sb.set_env("GIT_ORCH_SANDBOX", "banana");
    std::fs::write(p.repo.join(".orch/config"), "").expect("config");
    sb.git(&p.repo, &["commit", "-qam", "no config"]);
    let before = sb.refs(&p.repo);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("GIT_ORCH_SANDBOX=\"banana\" is not a sandbox mode"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.refs(&p.repo), before);
    // And a bad [sandbox] key.
    sb.set_env("GIT_ORCH_SANDBOX", "");
    std::fs::write(
        p.repo.join(".orch/config"),
        "[sandbox]\n    network = sometimes\n",
    )
    .expect("config");
    sb.git(&p.repo, &["commit", "-qam", "bad network"]);
    let before = sb.refs(&p.repo);
    let out = sb.orch(&p.repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("[sandbox] network"),
        "{}",
        stderr(&out)
    );
    assert_eq!(sb.refs(&p.repo), before);
}

/// Links (or copies) the built git-orch into `dir`, as a user who
/// downloaded it to a scratch folder has it.
fn git_orch_in(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("mkdir");
    let to = dir.join("git-orch");
    let from = common::bin_dir().join("git-orch");
    if std::fs::hard_link(&from, &to).is_err() {
        std::fs::copy(&from, &to).expect("copy git-orch");
    }
    to
}

fn executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Issue 26: git-orch, a command agent's script and that script's
/// interpreter all live in a folder under /tmp, which the sandbox makes
/// private. Each is shown read-only: the agent runs, its own commit goes
/// through the commit hook (which calls git-orch back by path), and the
/// work lands; the script cannot be written, and the home folder beside
/// them stays hidden.
#[test]
fn programs_in_a_temp_folder_run_confined_and_commit_through_the_hook() {
    if !tools::bwrap_works("programs_in_a_temp_folder_run_confined_and_commit_through_the_hook") {
        return;
    }
    let mut sb = Sandbox::new();
    assert!(
        sb.path().starts_with("/tmp"),
        "the test needs a folder under /tmp"
    );
    let bin = sb.path().join("bin");
    git_orch_in(&bin);
    // The interpreter: a link in the scratch folder (the kernel opens the
    // link's path, so the folder must be there).
    let tools = sb.path().join("tools/bin");
    std::fs::create_dir_all(&tools).expect("mkdir");
    std::os::unix::fs::symlink("/bin/sh", tools.join("mysh")).expect("symlink");
    let agent = sb.path().join("agents/my-agent");
    let script = format!(
        "#!{}\nset -e\nt=\"$1\"; r=\"src/$t/report\"; : > \"$r\"\n\
if (echo evil >> \"$0\") 2>/dev/null; then echo WROTE-SELF >> \"$r\"; else echo SELF-READ-ONLY >> \"$r\"; fi\n\
if cat \"$(dirname \"$0\")/../home/secret\" >/dev/null 2>&1; then echo HOME-SEEN >> \"$r\"; else echo HOME-HIDDEN >> \"$r\"; fi\n\
echo done > \"src/$t/done\"\ngit add -A\ngit commit -q -m \"$t: own commit\"\n",
        tools.join("mysh").display()
    );
    executable(&agent, &script);
    std::fs::write(sb.path().join("home/secret"), "s3cr3t").expect("secret");
    let p = project(
        &mut sb,
        &[
            ("a", &[], "test -f src/a/done"),
            ("b", &[], "test -f src/b/done"),
        ],
        Some(&format!(
            "[orch]\n    agent = mine\n[agent \"mine\"]\n    kind = command\n    command = {} {{task}}\n",
            agent.display()
        )),
    );
    sb.set_env(
        "PATH",
        &format!("{}:{}", bin.display(), common::system_bin().display()),
    );
    sb.set_env("GIT_ORCH_SANDBOX", "auto");
    let out = sb.orch(&p.repo, &["run", "proj"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(sandboxes_of(&sb, &p.repo), ["bwrap", "bwrap"]);
    let s = status_json(&sb, &p.repo);
    for t in s["tasks"].as_array().expect("tasks") {
        assert_eq!(t["status"], "done", "{s}");
        assert_eq!(t["attempts"], 1, "{s}");
    }
    for task in ["a", "b"] {
        let r = std::fs::read_to_string(p.repo.join(format!("src/{task}/report"))).expect("report");
        assert_eq!(r, "SELF-READ-ONLY\nHOME-HIDDEN\n");
    }
    assert_eq!(std::fs::read_to_string(&agent).expect("agent"), script);
}

/// Issue 26: the SSH agent's socket may sit in any folder, beside what an
/// agent needs (here its own script, outside /tmp and the home folder).
/// Only the socket is hidden: the script runs, the socket refuses.
#[test]
fn only_the_ssh_agent_socket_is_hidden_not_what_sits_beside_it() {
    if !tools::bwrap_works("only_the_ssh_agent_socket_is_hidden_not_what_sits_beside_it") {
        return;
    }
    let mut sb = Sandbox::new();
    let shared = tempfile::Builder::new()
        .prefix("sock-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tmp");
    let sock = shared.path().join("agent.sock");
    let listener = UnixListener::bind(&sock).expect("socket");
    listener.set_nonblocking(true).expect("non-blocking");
    let agent = shared.path().join("my-agent");
    executable(
        &agent,
        "#!/bin/sh\nset -e\nr=\"src/$1/report\"\n\
if python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' \"$2\" 2>/dev/null; then echo SOCK-CONNECTED > \"$r\"; else echo SOCK-DENIED > \"$r\"; fi\n",
    );
    let p = project(
        &mut sb,
        &[("a", &[], "test -f src/a/report")],
        Some(&format!(
            "[orch]\n    agent = mine\n[agent \"mine\"]\n    kind = command\n    command = {} {{task}} {}\n",
            agent.display(),
            sock.display()
        )),
    );
    sb.set_env("SSH_AUTH_SOCK", &sock.to_string_lossy());
    sb.set_env("GIT_ORCH_SANDBOX", "bwrap");
    let out = sb.orch(&p.repo, &["run", "proj"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(p.repo.join("src/a/report")).expect("report"),
        "SOCK-DENIED\n"
    );
    assert!(
        listener.accept().is_err(),
        "the agent reached the SSH agent socket"
    );
}

/// Issue 26: `git orch agents` looks for each program inside the sandbox a
/// run would use, and says why one is not there and how to show it. A
/// program in the runtime folder (hidden on purpose: it holds sockets)
/// cannot work confined; the same one works unconfined, and a program
/// under /tmp (shown by git-orch itself) is ready.
#[test]
fn agents_looks_for_each_program_in_the_sandbox_a_run_would_use() {
    if !tools::bwrap_works("agents_looks_for_each_program_in_the_sandbox_a_run_would_use") {
        return;
    }
    let mut sb = Sandbox::new();
    let runtime = tempfile::Builder::new()
        .prefix("xdg-")
        .tempdir_in(env!("CARGO_TARGET_TMPDIR"))
        .expect("tmp");
    let hidden = runtime.path().join("hidden-agent");
    executable(&hidden, "#!/bin/sh\nexit 0\n");
    let scratch = sb.path().join("scratch/temp-agent");
    executable(&scratch, "#!/bin/sh\nexit 0\n");
    let p = project(
        &mut sb,
        &[("a", &[], "true")],
        Some(&format!(
            "[agent \"hid\"]\n    kind = command\n    command = {} {{task}}\n[agent \"tmp\"]\n    kind = command\n    command = {}\n",
            hidden.display(),
            scratch.display()
        )),
    );
    sb.set_env("XDG_RUNTIME_DIR", &runtime.path().to_string_lossy());
    sb.set_env("GIT_ORCH_SANDBOX", "bwrap");
    let out = sb.orch(&p.repo, &["agents", "hid"]);
    let text = common::stdout(&out);
    assert_eq!(out.status.code(), Some(3), "{text}{}", stderr(&out));
    assert!(text.contains("cannot work here"), "{text}");
    assert!(
        text.contains(&format!(
            "problem: its program {} is hidden by the sandbox: runtime folders (/run, $XDG_RUNTIME_DIR) are hidden",
            hidden.display()
        )),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&common::stdout(
        &sb.orch(&p.repo, &["agents", "hid", "--json"]),
    ))
    .expect("json");
    assert_eq!(json["agents"][0]["presence"]["state"], "hidden", "{json}");
    // Under /tmp: git-orch shows it, so it is ready.
    let out = sb.orch(&p.repo, &["agents", "tmp"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stdout(&out));
    assert!(common::stdout(&out).contains("ready"));
    // Unconfined, the runtime folder is no obstacle.
    sb.set_env("GIT_ORCH_SANDBOX", "none");
    let out = sb.orch(&p.repo, &["agents", "hid"]);
    assert_eq!(out.status.code(), Some(0), "{}", common::stdout(&out));
}
