//! Plans and approvals end to end (ARCHITECTURE.md, invariants 4 and 6): the
//! real binary against temp repositories.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Sandbox, json_lines, stderr, stdout};

fn subtask(id: &str, globs: &[&str], verify: &str, deps: &[&str]) -> serde_json::Value {
    serde_json::json!({
        "id": id, "title": format!("Build {id}"), "owned_globs": globs,
        "deliverable": format!("{id} works"), "verification": verify, "depends_on": deps,
    })
}

fn plan_json(id: &str, subtasks: Vec<serde_json::Value>) -> String {
    serde_json::json!({"version": 1, "id": id, "instruction": "Build the thing", "subtasks": subtasks})
        .to_string()
}

fn clean_plan(id: &str) -> String {
    plan_json(
        id,
        vec![
            subtask("api", &["src/api/**"], "make test-api", &[]),
            subtask("web", &["src/web/**"], "make test-web", &[]),
            subtask("cli", &["src/cli/**"], "make test-cli", &[]),
            subtask("docs", &["docs/**"], "make docs", &["api"]),
        ],
    )
}

/// A repository with a few real files for the analysis to see.
fn project(sb: &Sandbox) -> PathBuf {
    let repo = sb.repo("proj");
    for f in [
        "src/api/mod.rs",
        "src/web/mod.rs",
        "src/cli/mod.rs",
        "docs/index.md",
        "Cargo.toml",
        "Cargo.lock",
    ] {
        let p = repo.join(f);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(&p, format!("{f}\n")).expect("write");
    }
    sb.git(&repo, &["add", "."]);
    sb.git(&repo, &["commit", "-q", "-m", "project"]);
    repo
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write plan");
    p.to_string_lossy().into_owned()
}

fn orch_refs(sb: &Sandbox, repo: &Path) -> String {
    sb.git(
        repo,
        &[
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/orch/",
        ],
    )
}

#[test]
fn check_exit_codes_clean_blocking_invalid_usage() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    let clean = write(sb.path(), "clean.json", &clean_plan("p"));
    let out = sb.orch(&repo, &["plan", "check", &clean]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("0 blocking"));

    let overlapping = write(
        sb.path(),
        "overlap.json",
        &plan_json(
            "p",
            vec![
                subtask("api", &["src/**"], "make a", &[]),
                subtask("web", &["src/web/**"], "make w", &[]),
                subtask("cli", &["tools/**"], "make c", &[]),
            ],
        ),
    );
    let out = sb.orch(&repo, &["plan", "check", &overlapping, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    assert_eq!(v["blocking"], 1);
    let f = &v["analysis"]["findings"][0];
    assert_eq!(f["code"], "ownership-overlap");
    assert_eq!(f["details"]["examples"][0], "src/web/mod.rs");

    let broken = write(
        sb.path(),
        "broken.json",
        "{\"version\": 1,\n  \"id\": oops}",
    );
    let out = sb.orch(&repo, &["plan", "check", &broken]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("line 2, column"), "{}", stderr(&out));

    let out = sb.orch(&repo, &["plan", "check"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "missing argument is a usage error"
    );
    let out = sb.orch(&repo, &["plan", "check", &clean, "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn hostile_plans_are_refused_with_exit_1_and_write_nothing() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    sb.orch_ok(&repo, &["init"]);
    let before = orch_refs(&sb, &repo);
    let base = clean_plan("p");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "malformed",
            "{\"version\":1,\n\"id\":\"p\",\n\"subtasks\": [,]}".into(),
            "line 3, column",
        ),
        (
            "dotdot id",
            base.replace("\"id\":\"p\"", "\"id\":\"..\""),
            "plan id",
        ),
        (
            "slash id",
            base.replace("\"id\":\"api\"", "\"id\":\"a/b\""),
            "task id",
        ),
        (
            "space id",
            base.replace("\"id\":\"api\"", "\"id\":\"a b\""),
            "task id",
        ),
        (
            "upper id",
            base.replace("\"id\":\"api\"", "\"id\":\"Api\""),
            "task id",
        ),
        (
            "control id",
            base.replace("\"id\":\"api\"", "\"id\":\"a\\u0007\""),
            "control",
        ),
        (
            "ref-illegal id",
            base.replace("\"id\":\"api\"", "\"id\":\"a.lock\""),
            "task id",
        ),
        (
            "ref-illegal id 2",
            base.replace("\"id\":\"api\"", "\"id\":\"a@{1}\""),
            "task id",
        ),
        (
            "bad glob",
            base.replace("src/api/**", "src/[api"),
            "\"src/[api\"",
        ),
        (
            "escaping glob",
            base.replace("src/api/**", "../outside/**"),
            "\"../outside/**\"",
        ),
        (
            "empty exclusion",
            base.replace("\"src/api/**\"", "\"src/api/**\",\"!\""),
            "exclusion of nothing",
        ),
        (
            "double exclusion",
            base.replace("\"src/api/**\"", "\"src/api/**\",\"!!src/api/x\""),
            "starts with '!!'",
        ),
        (
            "escaping exclusion",
            base.replace("\"src/api/**\"", "\"src/api/**\",\"!../x/**\""),
            "\"!../x/**\"",
        ),
        (
            "absolute exclusion",
            base.replace("\"src/api/**\"", "\"src/api/**\",\"!/etc/**\""),
            "is absolute",
        ),
        (
            "exclusion into .git",
            base.replace("\"src/api/**\"", "\"src/api/**\",\"!.git/**\""),
            "reaches into .git",
        ),
        (
            "only exclusions",
            base.replace("\"src/api/**\"", "\"!src/api/**\""),
            "only exclusions",
        ),
        (
            "duplicate ids",
            base.replace("\"id\":\"web\"", "\"id\":\"api\""),
            "more than once",
        ),
        ("no subtasks", plan_json("p", vec![]), "no subtasks"),
        (
            "unknown field",
            base.replace("\"deliverable\"", "\"deliverables\""),
            "did you mean",
        ),
        (
            "wrong version",
            base.replace("\"version\":1", "\"version\":2"),
            "version 2",
        ),
    ];
    for (name, text, needle) in cases {
        let file = write(sb.path(), "hostile.json", &text);
        for args in [vec!["plan", "check", &file], vec!["plan", "add", &file]] {
            let out = sb.orch(&repo, &args);
            assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
            assert!(
                stderr(&out).contains(needle),
                "{name}: expected {needle:?} in {}",
                stderr(&out)
            );
        }
    }
    // A 10 MB plan is refused before it is parsed.
    let huge = format!(
        "{{\"version\":1,\"id\":\"p\",\"instruction\":\"{}\"}}",
        "x".repeat(10 << 20)
    );
    let file = write(sb.path(), "huge.json", &huge);
    let out = sb.orch(&repo, &["plan", "add", &file]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("limit"), "{}", stderr(&out));
    // --id is checked like the file's id.
    let file = write(sb.path(), "ok.json", &base);
    let out = sb.orch(&repo, &["plan", "add", &file, "--id", "../../etc"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(orch_refs(&sb, &repo), before, "a refused plan wrote state");
}

#[test]
fn graph_errors_block_and_print_the_cycle_without_storing() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    let before = orch_refs(&sb, &repo);
    let cyclic = write(
        sb.path(),
        "cycle.json",
        &plan_json(
            "p",
            vec![
                subtask("a", &["a/**"], "make a", &["c"]),
                subtask("b", &["b/**"], "make b", &["a"]),
                subtask("c", &["c/**"], "make c", &["b"]),
            ],
        ),
    );
    let out = sb.orch(&repo, &["plan", "check", &cyclic]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stdout(&out).contains("dependency cycle: a → c → b → a"),
        "{}",
        stdout(&out)
    );
    let out = sb.orch(&repo, &["plan", "add", &cyclic]);
    assert_eq!(out.status.code(), Some(3));
    let unknown = write(
        sb.path(),
        "unknown.json",
        &plan_json("p", vec![subtask("a", &["a/**"], "make a", &["ghost"])]),
    );
    let out = sb.orch(&repo, &["plan", "add", &unknown]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("ghost"), "{}", stderr(&out));
    assert_eq!(orch_refs(&sb, &repo), before);
}

#[test]
fn add_show_list_diff_and_identical_content_is_a_no_op() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    let file = write(sb.path(), "p.json", &clean_plan("shop"));
    let out = sb.orch_ok(&repo, &["plan", "add", &file]);
    assert!(out.starts_with("shop 1 blake3:"), "{out}");
    let refs = orch_refs(&sb, &repo);
    // The same plan with different layout and explicit defaults: no-op.
    let v: serde_json::Value = serde_json::from_str(&clean_plan("shop")).expect("json");
    let mut v2 = v.clone();
    v2["subtasks"][0]["serial_only"] = serde_json::json!(false);
    write(
        sb.path(),
        "p.json",
        &serde_json::to_string_pretty(&v2).expect("json"),
    );
    let out = sb.orch(&repo, &["plan", "add", &file]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("identical to revision 1"),
        "{}",
        stderr(&out)
    );
    assert_eq!(orch_refs(&sb, &repo), refs, "a no-op wrote something");
    // The stored bytes are canonical and the hash is blake3 of them.
    let stored = sb.git(
        &repo,
        &["cat-file", "blob", "refs/orch/plans/shop:plan.json"],
    );
    assert!(!stored.contains('\n') && !stored.contains(": "), "{stored}");
    let shown: serde_json::Value =
        serde_json::from_str(&sb.orch_ok(&repo, &["plan", "show", "shop", "--json"]))
            .expect("json");
    assert_eq!(
        shown["hash"].as_str().expect("hash"),
        format!("blake3:{}", blake3::hash(stored.as_bytes()).to_hex())
    );
    // A real change makes revision 2; diff shows it.
    let mut v3 = v.clone();
    v3["subtasks"][1]["verification"] = serde_json::json!("make test-web-all");
    write(sb.path(), "p.json", &v3.to_string());
    assert!(
        sb.orch_ok(&repo, &["plan", "add", &file])
            .starts_with("shop 2 ")
    );
    let diff = sb.orch_ok(&repo, &["plan", "diff", "shop"]);
    assert!(
        diff.contains("-      \"verification\": \"make test-web\""),
        "{diff}"
    );
    assert!(
        diff.contains("+      \"verification\": \"make test-web-all\""),
        "{diff}"
    );
    let rev1: serde_json::Value =
        serde_json::from_str(&sb.orch_ok(&repo, &["plan", "show", "shop", "--rev", "1", "--json"]))
            .expect("json");
    assert_eq!(rev1["plan"]["subtasks"][1]["verification"], "make test-web");
    let human = sb.orch_ok(&repo, &["plan", "show", "shop"]);
    assert!(human.contains("docs: Build docs [after api]"), "{human}");
    let list = json_lines(&sb.orch_ok(&repo, &["plan", "list", "--json"]));
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["revisions"], 2);
    assert_eq!(list[0]["approval"], "unapproved");
    let events = json_lines(&sb.orch_ok(&repo, &["log", "--json"]));
    let added: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "plan_added")
        .collect();
    assert_eq!(added.len(), 2);
    assert_eq!(added[1]["revision"], 2);
    let out = sb.orch(&repo, &["plan", "show", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("plan list"));
}

#[test]
fn approval_binds_to_exact_bytes() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    let file = write(sb.path(), "p.json", &clean_plan("shop"));
    sb.orch_ok(&repo, &["plan", "add", &file]);
    let out = sb.orch(&repo, &["approve", "verify", "shop"]);
    assert_eq!(out.status.code(), Some(3), "unapproved must not verify");
    assert!(stderr(&out).contains("no approval"));
    sb.orch_ok(
        &repo,
        &[
            "approve",
            "shop",
            "--approver",
            "Ada",
            "--note",
            "looks right",
        ],
    );
    let out = sb.orch_ok(&repo, &["approve", "verify", "shop", "--json"]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(v["valid"], true);
    assert_eq!(v["approval"]["approver"], "Ada");
    // Tamper: change one byte of the plan and store it as a new revision.
    let tampered = clean_plan("shop").replace("make docs", "make doct");
    write(sb.path(), "p.json", &tampered);
    sb.orch_ok(&repo, &["plan", "add", &file]);
    let out = sb.orch(&repo, &["approve", "verify", "shop"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("is for revision 1"),
        "{}",
        stderr(&out)
    );
    assert!(
        stderr(&out).contains("now at revision 2"),
        "{}",
        stderr(&out)
    );
    // Tamper by hand: point the plan ref at a commit with different bytes
    // but the old revision's trailers; verify recomputes the hash.
    sb.orch_ok(&repo, &["approve", "shop"]);
    let good = sb.git(&repo, &["rev-parse", "refs/orch/plans/shop"]);
    let msg = sb.git(&repo, &["log", "-1", "--format=%B", &good]);
    let forged_plan = sb
        .git(&repo, &["cat-file", "blob", &format!("{good}:plan.json")])
        .replace("make doct", "rm -rf /");
    let blob = {
        let f = write(sb.path(), "forged.json", &forged_plan);
        sb.git(&repo, &["hash-object", "-w", &f])
    };
    let tree = {
        let out = sb
            .command("git", &repo)
            .args(["mktree"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                use std::io::Write;
                c.stdin
                    .take()
                    .expect("stdin")
                    .write_all(format!("100644 blob {blob}\tplan.json\n").as_bytes())?;
                c.wait_with_output()
            })
            .expect("mktree");
        stdout(&out).trim().to_owned()
    };
    let forged = sb.git(&repo, &["commit-tree", &tree, "-p", &good, "-m", &msg]);
    sb.git(&repo, &["update-ref", "refs/orch/plans/shop", &forged]);
    let out = sb.orch(&repo, &["approve", "verify", "shop"]);
    assert_ne!(
        out.status.code(),
        Some(0),
        "forged bytes verified: {}",
        stderr(&out)
    );
}

#[test]
fn approving_a_plan_with_blocking_findings_is_refused() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    let overlapping = plan_json(
        "risky",
        vec![
            subtask("a", &["src/**"], "make a", &[]),
            subtask("b", &["src/web/**"], "make b", &[]),
            subtask("c", &["tools/**"], "make c", &[]),
        ],
    );
    let file = write(sb.path(), "r.json", &overlapping);
    let out = sb.orch(&repo, &["plan", "add", &file]);
    assert!(out.status.success());
    assert!(stderr(&out).contains("1 blocking"), "{}", stderr(&out));
    let before = orch_refs(&sb, &repo);
    let out = sb.orch(&repo, &["approve", "risky"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        stderr(&out).contains("ownership-overlap"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        orch_refs(&sb, &repo),
        before,
        "a refused approval wrote state"
    );
    // Sending it back for revision is always possible, and needs a note.
    let out = sb.orch(&repo, &["approve", "risky", "--revise"]);
    assert_eq!(out.status.code(), Some(2));
    sb.orch_ok(
        &repo,
        &["approve", "risky", "--revise", "--note", "split src first"],
    );
    let out = sb.orch(&repo, &["approve", "verify", "risky"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("split src first"), "{}", stderr(&out));
}

#[test]
fn signed_approvals_with_an_ssh_key() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    let key = sb.path().join("id_ed25519");
    let ok = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(&key)
        .status();
    if !ok.is_ok_and(|s| s.success()) {
        eprintln!("ssh-keygen unavailable; skipping");
        return;
    }
    let pubkey = std::fs::read_to_string(key.with_extension("pub")).expect("pub");
    let allowed = write(
        sb.path(),
        "allowed",
        &format!("committer@example.com {pubkey}"),
    );
    sb.git(&repo, &["config", "gpg.format", "ssh"]);
    sb.git(
        &repo,
        &["config", "user.signingKey", &key.to_string_lossy()],
    );
    sb.git(&repo, &["config", "gpg.ssh.allowedSignersFile", &allowed]);
    sb.git(&repo, &["config", "orch.requireSignedApprovals", "true"]);
    let file = write(sb.path(), "p.json", &clean_plan("shop"));
    sb.orch_ok(&repo, &["plan", "add", &file]);
    sb.orch_ok(&repo, &["approve", "shop"]);
    let out = sb.orch(&repo, &["approve", "verify", "shop"]);
    assert_eq!(out.status.code(), Some(3), "unsigned approval accepted");
    assert!(stderr(&out).contains("--sign"));
    sb.orch_ok(&repo, &["approve", "shop", "--sign"]);
    let out = sb.orch(&repo, &["approve", "verify", "shop", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    assert_eq!(v["approval"]["signed"], true);
}

#[test]
fn schema_printed_equals_the_shipped_file() {
    let sb = Sandbox::new();
    let repo = sb.repo("r");
    let printed = sb.orch_ok(&repo, &["plan", "schema"]);
    let shipped =
        std::fs::read_to_string(common::repo_root().join("docs/plan.schema.json")).expect("file");
    assert_eq!(printed.trim_end(), shipped.trim_end());
    serde_json::from_str::<serde_json::Value>(&printed).expect("schema is JSON");
}

#[test]
fn plan_new_prints_a_brief_with_the_tree() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    let out = sb.orch_ok(&repo, &["plan", "new", "Add a checkout flow"]);
    for needle in [
        "Instruction: Add a checkout flow",
        "Sole ownership",
        "at least 3 subtasks that can start at once",
        "\"id\": \"add-a-checkout-flow\"",
        "src/  3 files, e.g. src/api/mod.rs, src/cli/mod.rs, src/web/mod.rs",
        "  - Cargo.lock (lockfile)",
        "  - Cargo.toml (build configuration)",
        "Cargo.lock locks 1 manifest: Cargo.toml",
        "\"!crates/core/flags/complete/**\"",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

/// The real tree of rust-lang/cargo (fixtures/data/cargo-paths.txt) as a
/// commit of empty files, for checking rules on a real layout.
fn cargo_tree(sb: &Sandbox) -> PathBuf {
    let repo = sb.repo("cargo");
    let paths = std::fs::read_to_string(common::repo_root().join("fixtures/data/cargo-paths.txt"))
        .expect("fixture");
    let empty = sb.git(&repo, &["hash-object", "-w", "--stdin"]);
    let index = sb.path().join("cargo-index");
    let info: String = paths
        .lines()
        .map(|p| format!("100644 {empty}\t{p}\n"))
        .collect();
    let run = |args: &[&str], input: Option<&str>| {
        let mut c = sb
            .command("git", &repo)
            .env("GIT_INDEX_FILE", &index)
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("git");
        if let Some(i) = input {
            use std::io::Write;
            c.stdin
                .take()
                .expect("stdin")
                .write_all(i.as_bytes())
                .expect("write");
        }
        drop(c.stdin.take());
        let out = c.wait_with_output().expect("wait");
        assert!(out.status.success());
        stdout(&out).trim().to_owned()
    };
    run(&["update-index", "--add", "--index-info"], Some(&info));
    let tree = run(&["write-tree"], None);
    let commit = sb.git(&repo, &["commit-tree", &tree, "-m", "cargo tree"]);
    sb.git(&repo, &["update-ref", "refs/heads/cargo", &commit]);
    repo
}

#[test]
fn rules_behave_sensibly_on_a_real_repository_layout() {
    let sb = Sandbox::new();
    let repo = cargo_tree(&sb);
    let plan = plan_json(
        "cargo-work",
        vec![
            subtask(
                "util",
                &["crates/cargo-util/**"],
                "cargo test -p cargo-util",
                &[],
            ),
            subtask(
                "platform",
                &["crates/cargo-platform/**"],
                "cargo test -p cargo-platform",
                &[],
            ),
            subtask("book", &["doc/**"], "mdbook build doc", &[]),
            subtask("ci", &[".github/workflows/**"], "actionlint", &[]),
            subtask(
                "lock",
                &["Cargo.lock", "Cargo.toml"],
                "cargo check",
                &["util"],
            ),
            subtask(
                "tests",
                &["tests/testsuite/**"],
                "cargo test --test testsuite",
                &[],
            ),
        ],
    );
    let file = write(sb.path(), "cargo.json", &plan);
    let out = sb.orch(
        &repo,
        &["plan", "check", &file, "--base", "cargo", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    let a = &v["analysis"];
    assert_eq!(a["paths_checked"], 3072);
    assert_eq!(v["blocking"], 0, "{a}");
    let codes: Vec<&str> = a["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().expect("code"))
        .collect();
    assert!(!codes.contains(&"glob-matches-nothing"), "{a}");
    let forced: Vec<&str> = a["forced_serial"]
        .as_array()
        .expect("list")
        .iter()
        .map(|x| x.as_str().expect("str"))
        .collect();
    // CI config and the lockfile are pinch points; crates' own Cargo.toml
    // files and the lockfiles of test fixtures under tests/testsuite/ are
    // not.
    assert_eq!(forced, ["ci", "lock"], "{a}");
    assert_eq!(out.status.code(), Some(0));
    // Two subtasks sharing the workspace lockfile is blocking.
    let shared = plan_json(
        "cargo-work",
        vec![
            subtask(
                "a",
                &["crates/cargo-util/**", "Cargo.lock"],
                "cargo test -p cargo-util",
                &[],
            ),
            subtask(
                "b",
                &["crates/cargo-platform/**", "Cargo.lock"],
                "cargo test -p cargo-platform",
                &[],
            ),
            subtask("c", &["doc/**"], "mdbook build doc", &[]),
        ],
    );
    let file = write(sb.path(), "shared.json", &shared);
    let out = sb.orch(
        &repo,
        &["plan", "check", &file, "--base", "cargo", "--json"],
    );
    assert_eq!(out.status.code(), Some(3));
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    let codes: Vec<&str> = v["analysis"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().expect("code"))
        .collect();
    assert!(codes.contains(&"pinch-shared"), "{codes:?}");
    assert!(codes.contains(&"ownership-overlap"), "{codes:?}");
}

#[test]
fn pinch_points_are_extensible_in_orch_config() {
    let sb = Sandbox::new();
    let repo = project(&sb);
    std::fs::create_dir_all(repo.join(".orch")).expect("dir");
    std::fs::write(repo.join(".orch/config"), "[pinch]\n\tpath = src/web/**\n").expect("write");
    sb.git(&repo, &["add", "."]);
    sb.git(&repo, &["commit", "-q", "-m", "config"]);
    let file = write(sb.path(), "p.json", &clean_plan("p"));
    let out = sb.orch_ok(&repo, &["plan", "check", &file, "--json"]);
    let v: serde_json::Value = serde_json::from_str(out.trim()).expect("json");
    assert_eq!(v["analysis"]["forced_serial"], serde_json::json!(["web"]));
    std::fs::write(repo.join(".orch/config"), "[pinch\n").expect("write");
    sb.git(&repo, &["commit", "-q", "-am", "broken config"]);
    let out = sb.orch(&repo, &["plan", "check", &file]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains(".orch/config"), "{}", stderr(&out));
}

/// The `unit (kind)` lines of the brief's pinch section.
fn brief_pinch_list(brief: &str) -> Vec<String> {
    let start = brief.find("## Pinch points").expect("a pinch section");
    brief[start..]
        .lines()
        .skip(1)
        .skip_while(|l| l.trim().is_empty())
        .take_while(|l| l.starts_with("  - "))
        .map(|l| l.trim_start_matches("  - ").to_owned())
        .collect()
}

fn describe(kind: &str) -> &'static str {
    match kind {
        "lockfile" => "lockfile",
        "migration" => "migrations",
        "ci" => "CI configuration",
        "build" => "build configuration",
        "deploy" => "deploy manifest",
        "generated" => "generated code",
        "custom" => "pinch point from .orch/config",
        other => panic!("unknown kind {other}"),
    }
}

#[test]
fn on_a_real_cargo_tree_the_briefs_pinch_list_is_the_checks() {
    let sb = Sandbox::new();
    let repo = cargo_tree(&sb);
    let brief = sb.orch_ok(
        &repo,
        &["plan", "new", "Bump a dependency", "--base", "cargo"],
    );
    let listed = brief_pinch_list(&brief);
    let plan = write(
        sb.path(),
        "one.json",
        &plan_json(
            "one",
            vec![subtask("book", &["doc/**"], "mdbook build doc", &[])],
        ),
    );
    let out = sb.orch(
        &repo,
        &["plan", "check", &plan, "--base", "cargo", "--json"],
    );
    let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
    let checked: Vec<String> = v["analysis"]["pinch_points"]
        .as_array()
        .expect("pinch points")
        .iter()
        .map(|p| {
            format!(
                "{} ({})",
                p["unit"].as_str().expect("unit"),
                describe(p["kind"].as_str().expect("kind"))
            )
        })
        .collect();
    assert!(!checked.is_empty());
    assert_eq!(listed, checked);
    assert!(
        listed.contains(&"Cargo.lock (lockfile)".to_owned()),
        "{listed:?}"
    );
    assert!(
        listed.contains(&".github/workflows (CI configuration)".to_owned()),
        "{listed:?}"
    );
    // Test fixtures' lockfiles are data, in neither list.
    assert!(
        !listed.iter().any(|l| l.starts_with("tests/")),
        "{listed:?}"
    );
    // The summary helps choose globs: samples, and what Cargo.lock locks.
    for needle in [
        "crates/  ",
        "e.g. crates/",
        "Cargo.lock locks 29 manifests: Cargo.toml, benches/benchsuite/Cargo.toml",
    ] {
        assert!(brief.contains(needle), "missing {needle:?}");
    }
}

#[test]
fn a_plan_bumping_one_crates_dependency_gets_a_verdict_that_says_how() {
    let sb = Sandbox::new();
    let repo = cargo_tree(&sb);
    let check = |plan: &str| {
        let file = write(sb.path(), "bump.json", plan);
        let out = sb.orch(
            &repo,
            &["plan", "check", &file, "--base", "cargo", "--json"],
        );
        let v: serde_json::Value = serde_json::from_str(stdout(&out).trim()).expect("json");
        (out.status.code(), v)
    };
    let bump = |globs: &[&str]| {
        plan_json(
            "bump",
            vec![
                subtask("bump-util", globs, "cargo test -p cargo-util", &[]),
                subtask(
                    "platform",
                    &[
                        "crates/cargo-platform/**",
                        "!crates/cargo-platform/Cargo.toml",
                    ],
                    "cargo test -p cargo-platform",
                    &[],
                ),
                subtask("book", &["doc/**"], "mdbook build doc", &[]),
                subtask("home", &["crates/home/src/**"], "cargo test -p home", &[]),
            ],
        )
    };
    // The dependency bump owns the crate's manifest but not the lockfile.
    let (code, v) = check(&bump(&["crates/cargo-util/**"]));
    assert_eq!(code, Some(0), "a warning, not a block: {v}");
    let verdict = v["analysis"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["code"] == "manifest-lockfile")
        .unwrap_or_else(|| panic!("no manifest-lockfile verdict: {v}"))
        .clone();
    assert_eq!(verdict["subtasks"], serde_json::json!(["bump-util"]));
    assert_eq!(verdict["details"]["lockfile"], "Cargo.lock");
    let message = verdict["message"].as_str().expect("message");
    assert!(
        message.contains("crates/cargo-util/Cargo.toml"),
        "{message}"
    );
    assert!(
        message.contains("add \"Cargo.lock\" to its owned_globs; it then runs serial_only"),
        "{message}"
    );
    // Done as it says: it owns the lockfile too and runs alone; the
    // verdict is gone and the plan passes.
    let (code, v) = check(&bump(&["crates/cargo-util/**", "Cargo.lock"]));
    assert_eq!(code, Some(0), "{v}");
    let codes: Vec<&str> = v["analysis"]["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| f["code"].as_str().expect("code"))
        .collect();
    assert!(!codes.contains(&"manifest-lockfile"), "{codes:?}");
    assert_eq!(
        v["analysis"]["forced_serial"],
        serde_json::json!(["bump-util"])
    );
    assert_eq!(v["blocking"], 0);
}

#[test]
fn overlaps_the_dependencies_order_pass_the_check_and_land_in_that_order() {
    let mut sb = Sandbox::new();
    let repo = project(&sb);
    std::fs::write(repo.join("CHANGELOG.md"), "# Changes\n").expect("write");
    sb.git(&repo, &["add", "CHANGELOG.md"]);
    sb.git(&repo, &["commit", "-q", "-m", "changelog"]);
    // api → web → cli, each adding its line to the changelog.
    let ordered = plan_json(
        "ordered",
        vec![
            subtask(
                "api",
                &["src/api/**", "CHANGELOG.md"],
                "grep -q api CHANGELOG.md",
                &[],
            ),
            subtask(
                "web",
                &["src/web/**", "CHANGELOG.md"],
                "grep -q web CHANGELOG.md",
                &["api"],
            ),
            subtask(
                "cli",
                &["src/cli/**", "CHANGELOG.md"],
                "grep -q cli CHANGELOG.md",
                &["web"],
            ),
        ],
    );
    let file = write(sb.path(), "ordered.json", &ordered);
    let out = sb.orch(&repo, &["plan", "check", &file]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let said = stdout(&out);
    assert!(said.contains("[ordered-overlap]"), "{said}");
    assert!(said.contains("api → web → cli"), "{said}");
    assert_eq!(
        said.matches("[ordered-overlap]").count(),
        1,
        "one line for the group, not one per pair: {said}"
    );
    sb.orch_ok(&repo, &["plan", "add", &file]);
    sb.orch_ok(&repo, &["approve", "ordered"]);
    let scripts = sb.path().join("scripts");
    std::fs::create_dir_all(&scripts).expect("scripts");
    sb.set_env("FAKE_AGENT_DIR", &scripts.to_string_lossy());
    for t in ["api", "web", "cli"] {
        std::fs::write(
            scripts.join(format!("{t}.script")),
            format!("append CHANGELOG.md - {t}\n"),
        )
        .expect("script");
    }
    let out = sb.orch(&repo, &["run", "ordered", "--agent", "fake", "--cap", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(repo.join("CHANGELOG.md")).expect("changelog"),
        "# Changes\n- api\n- web\n- cli\n"
    );
    // The same overlap without the order blocks.
    let unordered = plan_json(
        "unordered",
        vec![
            subtask(
                "api",
                &["src/api/**", "CHANGELOG.md"],
                "grep -q api CHANGELOG.md",
                &[],
            ),
            subtask(
                "web",
                &["src/web/**", "CHANGELOG.md"],
                "grep -q web CHANGELOG.md",
                &[],
            ),
        ],
    );
    let file = write(sb.path(), "unordered.json", &unordered);
    let out = sb.orch(&repo, &["plan", "check", &file]);
    assert_eq!(out.status.code(), Some(3), "{}", stdout(&out));
    assert!(
        stdout(&out).contains("[ownership-overlap]"),
        "{}",
        stdout(&out)
    );
}
