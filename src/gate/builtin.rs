//! The built-in gates, computed from `git diff base..result` of the trees:
//! `diff`, `scope`, `secrets`, `placeholders`.
//!
//! What lands is more than the net diff whenever an attempt's commits stay
//! reachable (the keep ref that `sync` pushes holds them; the `rebase` and
//! `merge` strategies put them on the target). So `scope` and `secrets`
//! also judge every commit of the attempt, one step at a time: a secret
//! committed and removed later, or a file outside the owned globs touched
//! and reverted, fails the attempt. `placeholders` judges every commit
//! only when the strategy keeps them on the target.
//!
//! They need no worktree and run in milliseconds, so they always run
//! first; an attempt that fails `scope` or `secrets` does not earn a test
//! run. Every path a change touches counts for scope: additions,
//! modifications, deletions, both sides of a rename (rename detection is
//! off, so a rename is a deletion plus an addition) and symlinks as paths.

use std::time::Instant;

use serde_json::json;

use super::diffscan::{AddedLine, added_lines};
use super::stack::{GateDef, GateKind};
use super::{placeholders, secrets};
use crate::event::{GateStatus, Verdict};
use crate::plan::glob;
use crate::store::objects::PathChange;
use crate::store::{Oid, Store, StoreError};

/// Files larger than this are not scanned line by line (they are still
/// checked for scope).
pub const MAX_SCAN_BYTES: usize = 4 * 1024 * 1024;

/// What the built-in gates look at, computed once per result.
#[derive(Debug, Default)]
pub struct Changes {
    /// The net change base → result.
    pub paths: Vec<PathChange>,
    pub added: Vec<AddedLine>,
    /// Added files named like a `.env` file (reported even when empty).
    pub added_files: Vec<String>,
    /// What single commits of the attempt did that the net change does not
    /// show (touched and reverted, added and removed), with the commit.
    pub history: History,
    /// Whether placeholders count in every commit (the strategy keeps the
    /// attempt's commits on the target).
    pub every_commit: bool,
    /// Files the change adds or changes, with their size in bytes, in
    /// order of path, for the size limit (`[orch] maxFileSize`).
    pub sizes: Vec<(String, u64)>,
    /// That limit: the `diff` gate fails a change with a larger file.
    pub max_file: u64,
}

/// Changes made and undone inside an attempt's history.
#[derive(Debug, Default)]
pub struct History {
    /// Paths changed by some commit but not by the net change.
    pub paths: Vec<(String, Oid)>,
    /// Lines added by some commit that the net change does not add.
    pub added: Vec<(Oid, AddedLine)>,
    /// Files added by some commit that the net change does not add.
    pub added_files: Vec<(Oid, String)>,
}

/// The lines the change from `old` to `new` adds, and the files it adds.
fn added_by(
    store: &Store,
    paths: &[PathChange],
) -> Result<(Vec<AddedLine>, Vec<String>), StoreError> {
    let mut added = Vec::new();
    let mut added_files = Vec::new();
    for c in paths {
        let Some(new) = c.new else { continue };
        if c.submodule {
            continue;
        }
        if c.old.is_none() {
            added_files.push(c.path.clone());
        }
        // Sized from its header first: a huge file is never read whole.
        if store.object_size(new)? > MAX_SCAN_BYTES as u64 {
            continue;
        }
        let new_bytes = store.read_blob(new)?;
        let old_bytes = match c.old {
            Some(o) if !c.symlink => store.read_blob(o)?,
            _ => Vec::new(),
        };
        added.extend(added_lines(&c.path, &old_bytes, &new_bytes));
    }
    Ok((added, added_files))
}

impl Changes {
    /// Reads the changes between two trees and the lines they add, and
    /// what each of `steps` (the attempt's commits) did beyond that.
    pub fn read(
        store: &Store,
        base_tree: Oid,
        result_tree: Oid,
        steps: &[crate::store::CommitStep],
    ) -> Result<Self, StoreError> {
        let paths = store.diff_trees(base_tree, result_tree)?;
        let (added, added_files) = added_by(store, &paths)?;
        let mut history = History::default();
        // One commit from base to result shows nothing the net does not.
        if steps.len() > 1
            || steps
                .first()
                .is_some_and(|s| (s.before, s.after) != (base_tree, result_tree))
        {
            let net_paths: std::collections::HashSet<&str> =
                paths.iter().map(|c| c.path.as_str()).collect();
            let net_lines: std::collections::HashSet<(&str, &str)> = added
                .iter()
                .map(|l| (l.path.as_str(), l.text.as_str()))
                .collect();
            let mut seen_paths = std::collections::HashSet::new();
            for &crate::store::CommitStep {
                commit,
                before,
                after,
            } in steps
            {
                let step = store.diff_trees(before, after)?;
                for c in &step {
                    if !net_paths.contains(c.path.as_str()) && seen_paths.insert(c.path.clone()) {
                        history.paths.push((c.path.clone(), commit));
                    }
                }
                let (lines, files) = added_by(store, &step)?;
                for l in lines {
                    if !net_lines.contains(&(l.path.as_str(), l.text.as_str())) {
                        history.added.push((commit, l));
                    }
                }
                for f in files {
                    if !added_files.contains(&f) {
                        history.added_files.push((commit, f));
                    }
                }
            }
        }
        let mut sizes = Vec::new();
        for c in &paths {
            if let Some(new) = c.new.filter(|_| !c.submodule) {
                sizes.push((c.path.clone(), store.object_size(new)?));
            }
        }
        Ok(Self {
            paths,
            added,
            added_files,
            history,
            every_commit: false,
            sizes,
            max_file: crate::config::MAX_FILE_SIZE,
        })
    }
}

/// A commit id as people read it.
fn short(commit: &Oid) -> String {
    commit.to_string()[..12].to_owned()
}

fn verdict(
    def: &GateDef,
    status: GateStatus,
    start: Instant,
    summary: String,
    details: serde_json::Value,
) -> Verdict {
    Verdict {
        gate: def.name.clone(),
        mode: def.mode,
        status,
        cached_pass: None,
        inputs: None,
        command: None,
        duration_ms: start.elapsed().as_millis() as u64,
        summary,
        tail: String::new(),
        details,
    }
}

/// Pass, or fail/warn according to the gate's mode.
fn failed(def: &GateDef) -> GateStatus {
    match def.mode {
        crate::event::GateMode::Warn => GateStatus::Warn,
        _ => GateStatus::Fail,
    }
}

/// The scope gate's rule for local files (warm worktrees, issue 28): a
/// file that `[worktree] include` copies into every checkout (`.env`,
/// local settings) is the user's, never work to land, whatever the owned
/// globs say: a result that adds or changes one fails scope.
pub fn refuse_local_files(
    v: Verdict,
    def: &GateDef,
    changes: &Changes,
    include: &[String],
) -> Verdict {
    if include.is_empty()
        || !matches!(def.kind, GateKind::Scope)
        || def.mode == crate::event::GateMode::Skip
    {
        return v;
    }
    let start = Instant::now();
    let matcher = crate::sandbox::warm::include_matcher(include);
    let mut local: Vec<&str> = changes
        .paths
        .iter()
        .map(|c| c.path.as_str())
        .chain(changes.history.paths.iter().map(|(p, _)| p.as_str()))
        .filter(|p| matcher.is_match(p))
        .collect();
    local.sort_unstable();
    local.dedup();
    if local.is_empty() {
        return v;
    }
    verdict(
        def,
        failed(def),
        start,
        format!(
            "{} is a local file every checkout gets ([worktree] include): it never lands; take it out of the result",
            local.join(", ")
        ),
        json!({ "local_files": local, "include": include }),
    )
}

/// Evaluates one built-in gate. `owned` are the subtask's owned globs.
pub fn evaluate(def: &GateDef, changes: &Changes, owned: &[String]) -> Verdict {
    let start = Instant::now();
    match def.kind {
        GateKind::Diff => {
            let too_large: Vec<&(String, u64)> = changes
                .sizes
                .iter()
                .filter(|(_, size)| *size > changes.max_file)
                .collect();
            if let Some((path, size)) = too_large.first() {
                verdict(
                    def,
                    failed(def),
                    start,
                    format!(
                        "{path} is {size} bytes, more than the {} bytes a file may have ([orch] maxFileSize){}",
                        changes.max_file,
                        if too_large.len() > 1 {
                            format!(", and {} more file(s) are too", too_large.len() - 1)
                        } else {
                            String::new()
                        }
                    ),
                    json!({ "too_large": too_large, "max_file_size": changes.max_file }),
                )
            } else if changes.paths.is_empty() {
                verdict(
                    def,
                    failed(def),
                    start,
                    "the result changes nothing".into(),
                    json!(null),
                )
            } else {
                verdict(
                    def,
                    GateStatus::Pass,
                    start,
                    format!("{} path(s) changed", changes.paths.len()),
                    json!({ "changed": changes.paths.len() }),
                )
            }
        }
        GateKind::Scope => {
            // The same matcher as the analysis and the hooks: plain globs
            // minus `!` exclusions.
            let ownership = match glob::Ownership::new(owned) {
                Ok(o) => o,
                Err(e) => {
                    return verdict(
                        def,
                        GateStatus::Error,
                        start,
                        format!("the subtask's owned globs cannot be used: {e}"),
                        json!({ "owned_globs": owned }),
                    );
                }
            };
            let touched = || {
                changes
                    .paths
                    .iter()
                    .map(|c| c.path.as_str())
                    .chain(changes.history.paths.iter().map(|(p, _)| p.as_str()))
            };
            let outside: Vec<&str> = touched().filter(|p| !ownership.is_owned(p)).collect();
            // Control paths: owned is not enough, the globs must name them.
            let mut control: Vec<&str> = touched()
                .filter(|p| crate::plan::control::control_path(p).is_some())
                .collect();
            control.sort_unstable();
            control.dedup();
            let unnamed: Vec<&str> = control
                .iter()
                .copied()
                .filter(|p| {
                    ownership.is_owned(p)
                        && !crate::plan::control::named_by(ownership.includes(), p)
                })
                .collect();
            if outside.is_empty() && !unnamed.is_empty() {
                let first = unnamed[0];
                let c = crate::plan::control::control_path(first).expect("a control path");
                verdict(
                    def,
                    failed(def),
                    start,
                    format!(
                        "{} is a control path ({}): a subtask may change it only when one of its owned globs names it (such as `{}`), not through a glob that only matches it",
                        unnamed.join(", "),
                        c.what,
                        first,
                    ),
                    json!({ "out_of_scope": unnamed, "owned_globs": owned, "control_paths": control }),
                )
            } else if outside.is_empty() {
                let summary = if control.is_empty() {
                    format!("all {} changed path(s) are owned", changes.paths.len())
                } else {
                    format!(
                        "all {} changed path(s) are owned; it changes control path(s) {}, so it lands once a person approves it",
                        changes.paths.len(),
                        control.join(", ")
                    )
                };
                verdict(
                    def,
                    GateStatus::Pass,
                    start,
                    summary,
                    if control.is_empty() {
                        json!(null)
                    } else {
                        json!({ "control_paths": control })
                    },
                )
            } else {
                let shown: Vec<&str> = outside.iter().take(10).copied().collect();
                // A lockfile out of scope is almost always a dependency
                // change by a subtask that owns the manifest only.
                let lockfiles: Vec<&str> = outside
                    .iter()
                    .copied()
                    .filter(|p| crate::plan::pinch::is_lockfile(p))
                    .collect();
                // Changed and reverted inside the history: say where.
                let reverted: Vec<String> = changes
                    .history
                    .paths
                    .iter()
                    .filter(|(p, _)| !ownership.is_owned(p))
                    .take(5)
                    .map(|(p, c)| format!("{p} (in commit {}, reverted later)", short(c)))
                    .collect();
                let hint = match lockfiles.first() {
                    Some(l) => format!(
                        "; {l} is a lockfile, which only the subtask that owns it may change: keep dependencies as they are, or revise the plan so this subtask owns it (docs/plans.md, \"Manifests and lockfiles\")"
                    ),
                    None => String::new(),
                };
                verdict(
                    def,
                    failed(def),
                    start,
                    format!(
                        "{} changed path(s) outside the owned globs: {}{}{}{hint}",
                        outside.len(),
                        shown.join(", "),
                        if outside.len() > shown.len() {
                            ", …"
                        } else {
                            ""
                        },
                        if reverted.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", reverted.join(", "))
                        }
                    ),
                    json!({ "out_of_scope": outside, "owned_globs": owned, "lockfiles": lockfiles, "reverted": reverted }),
                )
            }
        }
        GateKind::Secrets => {
            let mut findings = secrets::scan(&changes.added);
            // Lines a commit added and a later one removed still sit in a
            // commit that stays reachable: scanned, and named by commit.
            let mut by_commit: Vec<(Oid, Vec<AddedLine>)> = Vec::new();
            for (c, l) in &changes.history.added {
                match by_commit.last_mut() {
                    Some((last, lines)) if last == c => lines.push(l.clone()),
                    _ => by_commit.push((*c, vec![l.clone()])),
                }
            }
            for (c, files) in &changes.history.added_files {
                by_commit.push((
                    *c,
                    vec![AddedLine {
                        path: files.clone(),
                        line: 1,
                        text: String::new(),
                    }],
                ));
            }
            let mut in_history = Vec::new();
            for (c, lines) in &by_commit {
                for mut f in secrets::scan(lines) {
                    f.path = format!("{} (in commit {}, removed later)", f.path, short(c));
                    in_history.push(f);
                }
            }
            // An added `.env` file is reported even when it is empty.
            for f in &changes.added_files {
                let added = AddedLine {
                    path: f.clone(),
                    line: 1,
                    text: String::new(),
                };
                for env in secrets::scan(std::slice::from_ref(&added)) {
                    if env.kind == secrets::SecretKind::EnvFile
                        && !findings
                            .iter()
                            .any(|x| x.path == env.path && x.kind == env.kind)
                    {
                        findings.push(env);
                    }
                }
            }
            findings.extend(in_history);
            if findings.is_empty() {
                verdict(
                    def,
                    GateStatus::Pass,
                    start,
                    format!(
                        "{} added line(s) scanned, no secret",
                        changes.added.len() + changes.history.added.len()
                    ),
                    json!(null),
                )
            } else {
                let locations: Vec<String> = findings
                    .iter()
                    .map(|f| format!("{}:{} ({})", f.path, f.line, f.kind.describe()))
                    .collect();
                verdict(
                    def,
                    failed(def),
                    start,
                    format!(
                        "{} secret(s) added: {}",
                        findings.len(),
                        locations.join(", ")
                    ),
                    json!({ "secrets": findings }),
                )
            }
        }
        GateKind::Placeholders => {
            let mut findings = placeholders::scan(&changes.added);
            if changes.every_commit {
                // The commits land as they are: what one adds and a later
                // one removes is on the target all the same.
                let lines: Vec<AddedLine> = changes
                    .history
                    .added
                    .iter()
                    .map(|(_, l)| l.clone())
                    .collect();
                findings.extend(placeholders::scan(&lines));
            }
            if findings.is_empty() {
                verdict(
                    def,
                    GateStatus::Pass,
                    start,
                    "no placeholder added".into(),
                    json!(null),
                )
            } else {
                let shown: Vec<String> = findings
                    .iter()
                    .take(5)
                    .map(|f| format!("{}:{}", f.path, f.line))
                    .collect();
                verdict(
                    def,
                    failed(def),
                    start,
                    format!(
                        "{} placeholder(s) added (TODO, FIXME, todo!() …): {}",
                        findings.len(),
                        shown.join(", ")
                    ),
                    json!({ "placeholders": findings }),
                )
            }
        }
        _ => unreachable!("only built-in gates are evaluated here"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::objects::PathChange;

    fn scope_def() -> GateDef {
        GateDef {
            name: "scope".into(),
            kind: GateKind::Scope,
            mode: crate::event::GateMode::Block,
            timeout: std::time::Duration::from_secs(1),
        }
    }

    #[test]
    fn scope_follows_the_ownership_table() {
        let blob =
            crate::store::Oid::from_hex(b"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391").expect("hex");
        for (globs, path, owned) in crate::plan::glob::tests::ownership_cases() {
            let changes = Changes {
                paths: vec![PathChange {
                    path: path.clone(),
                    old: None,
                    new: Some(blob),
                    symlink: false,
                    submodule: false,
                }],
                ..Default::default()
            };
            let v = evaluate(&scope_def(), &changes, &globs);
            let expected = if owned {
                GateStatus::Pass
            } else {
                GateStatus::Fail
            };
            assert_eq!(v.status, expected, "{globs:?} {path}: {}", v.summary);
        }
    }

    #[test]
    fn an_out_of_scope_lockfile_says_why() {
        let blob =
            crate::store::Oid::from_hex(b"e69de29bb2d1d6434b8b29ae775ad8c2e48c5391").expect("hex");
        let changes = Changes {
            paths: ["crates/a/Cargo.toml", "Cargo.lock"]
                .iter()
                .map(|p| PathChange {
                    path: (*p).into(),
                    old: Some(blob),
                    new: Some(blob),
                    symlink: false,
                    submodule: false,
                })
                .collect(),
            ..Default::default()
        };
        let v = evaluate(&scope_def(), &changes, &["crates/a/**".into()]);
        assert_eq!(v.status, GateStatus::Fail);
        assert!(
            v.summary.contains("Cargo.lock is a lockfile"),
            "{}",
            v.summary
        );
        assert_eq!(v.details["lockfiles"], serde_json::json!(["Cargo.lock"]));
    }
}
