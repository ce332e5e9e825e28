//! `git orch fsck`: git-orch's state checked end to end, each finding with
//! the command or step that fixes it.
//!
//! What it checks, reading everything afresh (never the state cache): no
//! ref of git-orch is damaged (checked first; the rest is then checked
//! with the damaged refs hidden); every log record parses and sits under the name of its own blob; no
//! writer's log was rewritten (two different events at one seq of one
//! writer, in the union of every copy of the logs) or has copies that
//! diverged; every commit protected targets gained since their first
//! landing verifies like `git orch verify`; `refs/orch/keep` holds every
//! result and candidate the records point at; every attempt branch and
//! worktree is accounted for (and none holds a commit nothing else
//! keeps); no scratch worktree outlived its landing or gate; no process
//! of an attempt of this clone runs without a live driver; no checkout
//! move of a landing was left half done; the configuration parses; no pin
//! of a dead process is left (a note).
//!
//! A person who reviewed a rewrite or an unverified commit accepts it
//! ([`accept`]): a `finding_accepted` event, after which the finding is
//! listed as accepted and no longer fails. [`repair`] restores damaged
//! refs (saying what was lost) and makes the repairs that cannot lose
//! anything (keeping commits, finishing checkout moves, removing dead
//! pins).
//! This module reads and decides; it never prints.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::event::{AcceptedFinding, Event};
use crate::ids::{RunId, WriterId};
use crate::state::RunState;
use crate::store::log::{Entry, LOG_PREFIX, LogView};
use crate::store::refs::{KEEP_REF, REMOTES_PREFIX};
use crate::store::{Oid, Store, StoreError};

/// What stops fsck from finishing (a finding never does).
#[derive(Debug, thiserror::Error)]
pub enum FsckError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Run(#[from] crate::run::RunError),
    #[error("{0}")]
    Merge(#[from] crate::merge::MergeError),
    #[error("{0}")]
    Hook(#[from] crate::hooks::HookError),
    /// `--accept-…` named something fsck does not find.
    #[error(
        "fsck finds no {}; nothing was recorded",
        match what {
            Accept::Rewrite { writer, seq } => format!("rewrite of writer {writer}'s log at seq {seq}"),
            Accept::Commit(c) => format!("unverified commit {} on a protected target", &c.to_string()[..12]),
        }
    )]
    NothingToAccept { what: Accept },
}

/// A `<writer>:<seq>` that is not one.
#[derive(Debug, thiserror::Error)]
pub enum BadRewrite {
    #[error("{0:?} is not <writer>:<seq> (e.g. 3f9a1c2b7d4e:12)")]
    NoColon(String),
    #[error(transparent)]
    Writer(#[from] crate::ids::IdError),
    #[error("{0:?} is not a seq (a whole number from 1)")]
    Seq(String),
}

/// Which check a finding comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Check {
    /// A ref whose file holds no object id, or whose objects are missing
    /// or unreadable (a crash that lost writes, or a prune).
    Damaged,
    /// A log record that cannot be trusted (unreadable, or under a name
    /// that is not its blob's).
    Log,
    /// Different events at one seq of one writer, or diverged copies of a
    /// writer's log.
    Rewrite,
    /// A log commit git-orch did not write the way it writes them
    /// (committer, trailers, seq continuity): its events are not trusted.
    Chain,
    /// A commit on a protected target that does not verify.
    Landings,
    /// A commit records point at that `refs/orch/keep` does not hold.
    Keep,
    /// An attempt branch without a record, or holding unkept commits.
    Branches,
    /// A worktree without a record, or a record without its worktree.
    Worktrees,
    /// A scratch worktree a landing or gate left behind.
    Scratch,
    /// A process of an attempt running without its driver.
    Processes,
    /// A checkout a landing did not finish moving.
    Checkouts,
    /// Configuration that does not parse.
    Config,
    /// A landed commit whose note lost the record of its landing.
    Notes,
    /// A pin (`refs/orch-pins/<pid>`) its process left when it died.
    Pins,
}

impl Check {
    pub fn as_str(self) -> &'static str {
        match self {
            Check::Damaged => "damaged",
            Check::Log => "log",
            Check::Rewrite => "rewrite",
            Check::Chain => "chain",
            Check::Landings => "landings",
            Check::Keep => "keep",
            Check::Branches => "branches",
            Check::Worktrees => "worktrees",
            Check::Scratch => "scratch",
            Check::Processes => "processes",
            Check::Checkouts => "checkouts",
            Check::Config => "config",
            Check::Notes => "notes",
            Check::Pins => "pins",
        }
    }
}

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Something is wrong: fsck exits 3.
    Problem,
    /// Worth knowing, nothing wrong (a branch kept on purpose).
    Note,
}

/// One thing fsck found.
#[derive(Debug, Clone, Serialize)]
pub struct Finding {
    pub check: Check,
    pub severity: Severity,
    /// What it is about: a ref and path, `<writer>:<seq>`, a commit, a
    /// branch, a folder, a process group.
    pub subject: String,
    /// What is wrong, one or two sentences.
    pub message: String,
    /// The command or step that fixes it.
    pub fix: String,
    /// Who accepted it (`--accept-rewrite`, `--accept-commit`), if anyone:
    /// then it is listed and does not fail.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub accepted_by: Option<String>,
    /// What accepting it records, for findings a person may accept.
    #[serde(skip)]
    pub acceptance: Option<AcceptedFinding>,
}

impl Finding {
    /// Whether it makes fsck fail.
    pub fn fails(&self) -> bool {
        self.severity == Severity::Problem && self.accepted_by.is_none()
    }
}

/// What was looked at, for the closing line.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Checked {
    pub events: usize,
    pub writers: usize,
    /// Protected targets and run targets whose landings were verified.
    pub targets: Vec<String>,
    pub commits_verified: usize,
    pub kept_commits: usize,
    pub attempts: usize,
    pub branches: usize,
    pub worktrees: usize,
    /// The state cache on disk (`.git/orch/state/`): never read here,
    /// only measured.
    pub state_cache: crate::state::CacheSize,
}

/// The whole report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub findings: Vec<Finding>,
    pub checked: Checked,
}

impl Report {
    /// Findings that make fsck fail.
    pub fn problems(&self) -> usize {
        self.findings.iter().filter(|f| f.fails()).count()
    }

    /// Notes (never failing).
    pub fn notes(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Note)
            .count()
    }

    /// Problems a person accepted.
    pub fn accepted(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Problem && f.accepted_by.is_some())
            .count()
    }

    fn push(
        &mut self,
        check: Check,
        severity: Severity,
        subject: String,
        message: String,
        fix: String,
    ) {
        self.findings.push(Finding {
            check,
            severity,
            subject,
            message,
            fix,
            accepted_by: None,
            acceptance: None,
        });
    }
}

/// The log read once, with what every check needs from it.
struct Loaded {
    view: LogView,
    /// Entries with duplicates (the same blob under several refs) dropped.
    unique: Vec<usize>,
    runs: BTreeMap<RunId, RunState>,
    me: Option<WriterId>,
    /// (acceptance, who).
    accepted: Vec<(AcceptedFinding, String)>,
}

impl Loaded {
    fn read(store: &Store) -> Result<Self, FsckError> {
        let view = store.read_log()?;
        let mut seen = HashSet::new();
        let unique: Vec<usize> = (0..view.entries.len())
            .filter(|&i| seen.insert(view.entries[i].id))
            .collect();
        let runs = crate::state::fold(unique.iter().map(|&i| &view.entries[i].record));
        let accepted = unique
            .iter()
            .filter_map(|&i| match &view.entries[i].record.event {
                Event::FindingAccepted { finding, by } => Some((finding.clone(), by.clone())),
                _ => None,
            })
            .collect();
        Ok(Self {
            view,
            unique,
            runs,
            me: store.writer_id().ok().flatten(),
            accepted,
        })
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.unique.iter().map(|&i| &self.view.entries[i])
    }

    /// Who accepted a rewrite of `writer` at `seq` covering all of
    /// `blobs`, if anyone did.
    fn rewrite_accepted(&self, writer: &str, seq: u64, blobs: &[String]) -> Option<String> {
        self.accepted.iter().find_map(|(a, by)| match a {
            AcceptedFinding::Rewrite {
                writer: w,
                seq: s,
                blobs: ok,
            } if w.as_str() == writer && *s == seq && blobs.iter().all(|b| ok.contains(b)) => {
                Some(by.clone())
            }
            _ => None,
        })
    }

    fn commit_accepted(&self, commit: &str, target: &str) -> Option<String> {
        self.accepted.iter().find_map(|(a, by)| match a {
            AcceptedFinding::Commit {
                commit: c,
                target: t,
            } if c.to_string() == commit && t == target => Some(by.clone()),
            _ => None,
        })
    }
}

/// Checks everything and returns the findings. Damaged refs are reported
/// first and the rest is checked with them hidden, so one ref a crash
/// emptied does not stop fsck from looking at everything else.
pub fn check(store: &Store) -> Result<Report, FsckError> {
    let damage = store.damaged_refs(false)?;
    let mut report = Report::default();
    for d in &damage {
        report.push(
            Check::Damaged,
            Severity::Problem,
            d.reference.clone(),
            format!("{} is damaged: {}", d.reference, d.problem),
            "`git orch fsck --repair` restores it from its reflog, a remote's tracking copy or its newest intact commit, and says what was lost".into(),
        );
    }
    if damage.is_empty() {
        check_rest(store, report)
    } else {
        let view = store
            .fresh()?
            .with_proposed_refs(damage.iter().map(|d| (d.reference.clone(), None)));
        check_rest(&view, report)
    }
}

/// Every check but the damage of refs.
fn check_rest(store: &Store, mut report: Report) -> Result<Report, FsckError> {
    let loaded = Loaded::read(store)?;
    report.checked.events = loaded.unique.len();
    report.checked.writers = loaded
        .entries()
        .map(|e| e.record.writer.as_str())
        .collect::<BTreeSet<_>>()
        .len();
    check_log(store, &loaded, &mut report)?;
    check_log_commits(store, &loaded, &mut report)?;
    check_diverged(store, &mut report)?;
    check_landings(store, &loaded, &mut report)?;
    check_keep(store, &loaded, &mut report)?;
    check_attempts(store, &loaded, &mut report)?;
    check_processes(store, &loaded, &mut report);
    check_checkouts(store, &mut report)?;
    check_config(store, &mut report);
    check_notes(store, &loaded, &mut report)?;
    check_pins(store, &mut report)?;
    report.checked.state_cache = crate::state::cache_size(store);
    report
        .findings
        .sort_by(|a, b| (b.fails(), a.check, &a.subject).cmp(&(a.fails(), b.check, &b.subject)));
    Ok(report)
}

/// Pins of processes that are gone: harmless (they only keep a few
/// commits from `git gc`), removed by the next process that pins and by
/// `--repair`.
fn check_pins(store: &Store, report: &mut Report) -> Result<(), FsckError> {
    for (name, _) in store.dead_pins()? {
        report.push(
            Check::Pins,
            Severity::Note,
            name.clone(),
            format!("{name} was left by a git-orch process that is gone; it keeps the merge-queue candidates that process was working on from `git gc`"),
            "`git orch fsck --repair` removes it (so does the next landing)".into(),
        );
    }
    Ok(())
}

/// The writer a log ref belongs to (its last component).
fn writer_of(reference: &str) -> &str {
    reference.rsplit('/').next().unwrap_or_default()
}

/// Log commits git-orch did not write the way it writes them (see
/// [`Store::check_log_commits`]): a ref moved with plain git, or a
/// forgery. Readers ignore the events from the first such commit on.
fn check_log_commits(store: &Store, loaded: &Loaded, report: &mut Report) -> Result<(), FsckError> {
    for (reference, tip) in store.log_tips()? {
        let writer = writer_of(&reference).to_owned();
        for p in store.check_log_commits(&reference, None, tip)? {
            // A commit whose every event a person reviewed and accepted
            // (`--accept-rewrite`) is theirs to keep.
            let added = added_seqs(store, &p.path).unwrap_or_default();
            let accepted = !added.is_empty()
                && added.iter().all(|(seq, blobs)| {
                    loaded.rewrite_accepted(&writer, *seq, blobs).is_some()
                        || all_blobs_accepted(loaded, &writer, *seq, blobs)
                });
            if accepted {
                continue;
            }
            let seq = p.seq.unwrap_or(1);
            report.push(
                Check::Chain,
                Severity::Problem,
                format!("{}:{}", reference, p.path),
                format!(
                    "{} holds a commit git-orch did not write: {}; every reader ignores its events from seq {seq} on",
                    reference, p.reason
                ),
                format!(
                    "review it (`git log -p {reference}`); restore the ref from a clone that holds the original with `git orch sync`, or reset it to the commit before by hand (`git update-ref {reference} <commit> {}`)",
                    p.path
                ),
            );
        }
    }
    Ok(())
}

/// The seqs a log commit adds events at (from its first parent), each with
/// the blobs added there.
fn added_seqs(store: &Store, commit: &str) -> Option<Vec<(u64, Vec<String>)>> {
    let c = store.parse_oid(commit).ok()?;
    let info = store.commit_info(c).ok()?;
    let before = match info.parents.first() {
        Some(p) => Some(store.commit_info(*p).ok()?.tree),
        None => None,
    };
    let mut by_seq: BTreeMap<u64, Vec<String>> = BTreeMap::new();
    for change in store.tree_changes(before, info.tree).ok()? {
        let Some(blob) = change.new else { continue };
        let name = change.path.rsplit('/').next().unwrap_or_default();
        let seq = name.split('-').next()?.parse().ok()?;
        by_seq.entry(seq).or_default().push(blob.to_string());
    }
    Some(by_seq.into_iter().collect())
}

/// Whether the acceptances of `writer` at `seq` cover all of `blobs`.
fn all_blobs_accepted(loaded: &Loaded, writer: &str, seq: u64, blobs: &[String]) -> bool {
    blobs.iter().all(|b| {
        loaded
            .rewrite_accepted(writer, seq, std::slice::from_ref(b))
            .is_some()
    })
}

/// Unreadable records and records under a name that is not their blob's
/// (corruption), and seqs of one writer holding different events (a
/// rewrite kept beside the original).
fn check_log(store: &Store, loaded: &Loaded, report: &mut Report) -> Result<(), FsckError> {
    // (writer, seq) → blob → refs it was found under (readable or not).
    let mut at: BTreeMap<(String, u64), BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for e in loaded.entries() {
        at.entry((e.record.writer.to_string(), e.record.seq))
            .or_default()
            .entry(e.id.to_string())
            .or_default()
            .insert(e.reference.clone());
    }
    // The blob of each unreadable record, from the tree it sits in.
    let mut trees: HashMap<String, HashMap<String, Oid>> = HashMap::new();
    for p in &loaded.view.problems {
        let blob = match p.seq {
            Some(_) => {
                if !trees.contains_key(&p.reference) {
                    let listed = store
                        .ref_target(&p.reference)?
                        .map(|tip| store.tip_tree(tip).and_then(|t| store.tree_blobs(t, None)))
                        .transpose()
                        .ok()
                        .flatten()
                        .unwrap_or_default();
                    trees.insert(p.reference.clone(), listed.into_iter().collect());
                }
                trees[&p.reference].get(&p.path).map(Oid::to_string)
            }
            None => None,
        };
        let writer = writer_of(&p.reference).to_owned();
        let remote = p.reference.starts_with(REMOTES_PREFIX);
        let damaged = crate::store::is_object_damage(&p.reason);
        let (subject, fix) = match (p.seq, &blob) {
            (Some(seq), _) if damaged => (
                format!("{writer}:{seq}"),
                format!(
                    "the record's blob is missing or unreadable (a crash or a prune took it): `git orch fsck --repair` restores {} to its newest intact value (its reflog, a remote's copy or its history) and says what was lost",
                    p.reference
                ),
            ),
            (Some(seq), Some(b)) => {
                at.entry((writer.clone(), seq))
                    .or_default()
                    .entry(b.clone())
                    .or_default()
                    .insert(p.reference.clone());
                let restore = if remote {
                    "the copy on that remote was rewritten: restore it there from a clone that holds the original, and install the server hook (`git orch hooks install --server`) so it cannot happen again"
                } else {
                    "this clone's log was changed by something other than git-orch"
                };
                (
                    format!("{writer}:{seq}"),
                    format!(
                        "every reader ignores this record; review it (`git log -p {} -- {}`); {restore}; once reviewed, `git orch fsck --accept-rewrite {writer}:{seq}`",
                        p.reference, p.path
                    ),
                )
            }
            _ => (
                p.reference.clone(),
                format!(
                    "the ref does not point at a readable log commit: `git orch fsck --repair` restores it to its newest intact value (its reflog, a remote's copy or its history); or restore it from a clone that holds it (`git orch sync`), or remove the copy: `git update-ref -d {}`",
                    p.reference
                ),
            ),
        };
        let mut f = Finding {
            check: Check::Log,
            severity: Severity::Problem,
            subject,
            message: format!("corrupt record: {p}"),
            fix,
            accepted_by: None,
            acceptance: None,
        };
        if let (Some(seq), Some(b), false) = (p.seq, &blob, damaged) {
            f.accepted_by = loaded.rewrite_accepted(&writer, seq, std::slice::from_ref(b));
            f.acceptance = WriterId::new(&writer)
                .ok()
                .map(|w| AcceptedFinding::Rewrite {
                    writer: w,
                    seq,
                    blobs: at[&(writer.clone(), seq)].keys().cloned().collect(),
                });
        }
        report.findings.push(f);
    }
    for ((writer, seq), blobs) in &at {
        if blobs.len() < 2 {
            continue;
        }
        let ids: Vec<String> = blobs.keys().cloned().collect();
        let listed: Vec<String> = blobs
            .iter()
            .map(|(b, refs)| {
                format!(
                    "{} ({})",
                    &b[..12],
                    refs.iter().cloned().collect::<Vec<_>>().join(", ")
                )
            })
            .collect();
        let cat: Vec<String> = ids
            .iter()
            .map(|b| format!("`git cat-file -p {b}`"))
            .collect();
        report.findings.push(Finding {
            check: Check::Rewrite,
            severity: Severity::Problem,
            subject: format!("{writer}:{seq}"),
            message: format!(
                "writer {writer}'s log holds {} different events at seq {seq}: {}; its log was rewritten somewhere, and both versions are kept",
                ids.len(),
                listed.join(" and ")
            ),
            fix: format!(
                "compare them ({}); once reviewed, `git orch fsck --accept-rewrite {writer}:{seq}` records that you did",
                cat.join(", ")
            ),
            accepted_by: loaded.rewrite_accepted(writer, *seq, &ids),
            acceptance: WriterId::new(writer).ok().map(|w| AcceptedFinding::Rewrite {
                writer: w,
                seq: *seq,
                blobs: ids.clone(),
            }),
        });
    }
    Ok(())
}

/// Copies of one writer's log (this clone's and the remotes' tracking
/// copies) of which neither contains the other.
fn check_diverged(store: &Store, report: &mut Report) -> Result<(), FsckError> {
    let mut by_writer: BTreeMap<String, Vec<(String, Oid)>> = BTreeMap::new();
    for (name, tip) in store.log_tips()? {
        by_writer
            .entry(writer_of(&name).to_owned())
            .or_default()
            .push((name, tip));
    }
    for (writer, copies) in by_writer {
        let local = format!("{LOG_PREFIX}{writer}");
        for (i, (a, ta)) in copies.iter().enumerate() {
            for (b, tb) in &copies[i + 1..] {
                // Two remotes' copies are compared through the local one.
                if *a != local && *b != local {
                    continue;
                }
                if store.is_ancestor(*ta, *tb)? || store.is_ancestor(*tb, *ta)? {
                    continue;
                }
                report.push(
                    Check::Rewrite,
                    Severity::Problem,
                    writer.clone(),
                    format!(
                        "the copies of writer {writer}'s log have diverged: {a} ({}) and {b} ({}) do not contain each other; a log is only ever appended to, so one was rewritten (or two clones share the writer id)",
                        &ta.to_string()[..12],
                        &tb.to_string()[..12]
                    ),
                    "`git orch sync` brings both versions together without dropping an event; then `git orch fsck` again shows what differs".into(),
                );
            }
        }
    }
    Ok(())
}

/// A full branch ref name for a target as records name it.
fn branch_ref(target: &str) -> String {
    if target.starts_with("refs/") {
        target.to_owned()
    } else {
        format!("refs/heads/{target}")
    }
}

/// Most unverified commits listed per target; the rest are counted.
const MAX_LISTED: usize = 20;

/// Every commit each protected target (and each run's target) gained on
/// its first-parent chain since its first landing verifies, or a person
/// accepted it.
fn check_landings(store: &Store, loaded: &Loaded, report: &mut Report) -> Result<(), FsckError> {
    let mut targets: BTreeSet<String> = BTreeSet::new();
    // A protection that cannot be read is the config check's finding.
    if let Ok(protection) = crate::hooks::policy::protection(store) {
        for (name, _) in store.refs_with_prefix("refs/heads/")? {
            if protection.protects(&name).is_some() {
                targets.insert(name);
            }
        }
    }
    targets.extend(loaded.runs.values().map(|r| branch_ref(&r.target)));
    // The first landing on each target: where git-orch took over.
    let mut first: HashMap<String, ((u64, String, u64), String)> = HashMap::new();
    let mut note = |target: &str, order: (u64, String, u64), old: &str| {
        let slot = first
            .entry(branch_ref(target))
            .or_insert_with(|| (order.clone(), old.to_owned()));
        if order < slot.0 {
            *slot = (order, old.to_owned());
        }
    };
    for run in loaded.runs.values() {
        for l in run.landings.iter().filter(|l| !l.voided) {
            note(&l.target, l.order.clone(), &l.old.to_string());
        }
    }
    for e in loaded.entries() {
        if let Event::BranchLanded { target, old, .. } = &e.record.event {
            let (clock, writer, seq) = e.record.order_key();
            note(target, (clock, writer.to_owned(), seq), &old.to_string());
            targets.insert(branch_ref(target));
        }
    }
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    for target in targets {
        let Some(tip) = store.ref_target(&target)? else {
            continue;
        };
        let Some((_, old)) = first.get(&target) else {
            continue;
        };
        report.checked.targets.push(target.clone());
        let short = target.trim_start_matches("refs/heads/");
        let Ok(old) = store.parse_oid(old) else {
            continue;
        };
        if !store.has_object(old) || !store.is_ancestor(old, tip)? {
            report.push(
                Check::Landings,
                Severity::Problem,
                short.to_owned(),
                format!(
                    "{short} no longer contains {}, its tip before the first landing: it was rewound or rewritten",
                    &old.to_string()[..12]
                ),
                format!(
                    "find where it went (`git reflog {short}`) and move {short} back to a commit that contains it; git-orch only ever moves it forward"
                ),
            );
            continue;
        }
        let commits = crate::hooks::first_parent_commits(store, tip, &[old])?;
        report.checked.commits_verified += commits.len();
        let results = crate::merge::verify::verify(store, &commits, require_signed)?;
        let mut listed = 0;
        let mut more = 0;
        for v in results.iter().filter(|v| !v.ok) {
            let accepted_by = loaded.commit_accepted(&v.commit, short);
            if accepted_by.is_none() {
                if listed == MAX_LISTED {
                    more += 1;
                    continue;
                }
                listed += 1;
            }
            let commit_message = store
                .parse_oid(&v.commit)
                .and_then(|id| store.commit_info(id))
                .map(|i| i.message)
                .unwrap_or_default();
            let subject_line = commit_message.lines().next().unwrap_or_default();
            let mut message = format!(
                "commit {} ({subject_line:?}) on {short} is not a verified git-orch landing: {}",
                &v.commit[..12],
                v.reason
            );
            let mut fix = format!(
                "if it should not be there, revert it through a run; if it is a known exception (pushed past the hooks on purpose), `git orch fsck --accept-commit {}` records that you reviewed it",
                &v.commit[..12]
            );
            if let Some((run, task, attempt)) = unrecorded_landing(loaded, &commit_message) {
                message.push_str(&format!(
                    "; it carries the trailers of run {run}'s landing of {task} attempt {attempt}, of which no record is left (a crash cut the log's newest writes)"
                ));
                fix = format!(
                    "resume the run (`git orch run {}`): it records the landing it finds on {short} instead of landing {task} again; {fix}",
                    loaded.runs[&run].plan_id
                );
            }
            report.findings.push(Finding {
                check: Check::Landings,
                severity: Severity::Problem,
                subject: v.commit[..12].to_owned(),
                message,
                fix,
                accepted_by,
                acceptance: v.commit.parse().ok().map(|commit| AcceptedFinding::Commit {
                    commit,
                    target: short.to_owned(),
                }),
            });
        }
        if more > 0 {
            report.push(
                Check::Landings,
                Severity::Problem,
                short.to_owned(),
                format!("and {more} more commits on {short} that do not verify"),
                format!("`git orch verify <first>..{short}` lists them all"),
            );
        }
    }
    Ok(())
}

/// The run, task and attempt whose landing trailers (`Orch-Run`,
/// `Orch-Task`, `Orch-Attempt`) a commit's `message` carries, when that
/// run is in the log and holds no landing of the task: a landing whose
/// record a crash lost.
fn unrecorded_landing(loaded: &Loaded, message: &str) -> Option<(RunId, String, u32)> {
    let trailer = |key: &str| {
        message
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
    };
    let run = RunId::new(trailer("Orch-Run: ")?).ok()?;
    let task = trailer("Orch-Task: ")?.to_owned();
    let attempt = trailer("Orch-Attempt: ")?.parse().ok()?;
    let state = loaded.runs.get(&run)?;
    let landed = state
        .landings
        .iter()
        .any(|l| !l.voided && l.task.as_str() == task);
    (!landed).then_some((run, task, attempt))
}

/// A landing's record, due on the note of the commit it landed.
struct DueRecord {
    commit: Oid,
    /// The record's name (its first line).
    name: String,
    record: String,
}

/// The records landings put on the notes of the commits they landed
/// (`refs/notes/orch`), for every landing not voided whose commit this
/// clone has. Notes are derived: a lost write, a note replaced by hand or
/// by an older git-orch loses one, and nothing else would notice.
fn due_records(store: &Store, loaded: &Loaded) -> Vec<DueRecord> {
    let mut approvers: HashMap<Oid, &str> = HashMap::new();
    for e in loaded.entries() {
        if let Event::BranchApproved {
            approval, approver, ..
        } = &e.record.event
        {
            approvers.insert(*approval, approver.as_str());
        }
    }
    let mut due = Vec::new();
    for e in loaded.entries() {
        let (tip, name, record) = match &e.record.event {
            Event::Landed {
                run_id,
                task,
                attempt,
                target,
                new,
                strategy,
                commits,
                ..
            } => {
                let Some(run) = loaded.runs.get(run_id) else {
                    continue;
                };
                let voided = run
                    .landings
                    .iter()
                    .any(|l| l.voided && &l.task == task && l.attempt == *attempt && &l.new == new);
                if voided {
                    continue;
                }
                let landing = crate::run::notes::TaskLanding {
                    run: run_id.as_str(),
                    task: task.as_str(),
                    attempt: *attempt,
                    target,
                    plan_id: run.plan_id.as_str(),
                    revision: run.revision,
                    plan_hash: &run.plan_hash,
                    strategy,
                };
                (commits.last(), landing.name(), landing.record())
            }
            Event::BranchLanded {
                branch,
                commit,
                approval,
                target,
                new,
                strategy,
                ..
            } => {
                let (commit, approval_hex) = (commit.to_string(), approval.to_string());
                let landing = crate::run::notes::BranchLanding {
                    branch,
                    commit: &commit,
                    target,
                    approver: approvers.get(approval).copied().unwrap_or("?"),
                    approval: &approval_hex,
                    strategy,
                };
                (Some(new), landing.name(), landing.record())
            }
            _ => continue,
        };
        let Some(commit) = tip.copied() else {
            continue;
        };
        if store.has_object(commit) {
            due.push(DueRecord {
                commit,
                name,
                record,
            });
        }
    }
    due
}

/// Landed commits whose note lost the record of their landing.
fn missing_records(store: &Store, loaded: &Loaded) -> Result<Vec<DueRecord>, FsckError> {
    let mut missing = Vec::new();
    for due in due_records(store, loaded) {
        if !crate::run::notes::has_record(store, due.commit, &due.name)? {
            missing.push(due);
        }
    }
    Ok(missing)
}

fn check_notes(store: &Store, loaded: &Loaded, report: &mut Report) -> Result<(), FsckError> {
    for due in missing_records(store, loaded)? {
        let short = due.commit.to_string()[..12].to_owned();
        // Derived data: worth repairing, not a failure (a crash between a
        // landing's record and its note leaves this, and nothing reads
        // notes to decide anything).
        report.push(
            Check::Notes,
            Severity::Note,
            short.clone(),
            format!(
                "the note on {short} (refs/notes/orch) lost the record of its landing ({:?})",
                due.name
            ),
            "`git orch fsck --repair` writes it again from the log".to_owned(),
        );
    }
    Ok(())
}

/// A commit records point at and `refs/orch/keep` should hold.
struct Kept {
    commit: Oid,
    what: String,
    /// The writer whose records name it.
    writer: String,
}

/// Every commit records point at that `refs/orch/keep` must hold: results
/// that passed the secrets gate (one that failed it is deliberately never
/// kept), landed candidates and their commits, branch approvals and hand
/// landings.
fn expected_kept(loaded: &Loaded) -> Vec<Kept> {
    let mut out = Vec::new();
    let mut add = |commit: &Oid, what: String, writer: &str| {
        out.push(Kept {
            commit: *commit,
            what,
            writer: writer.to_owned(),
        });
    };
    for run in loaded.runs.values() {
        for (task, a) in run.attempts() {
            if crate::run::control::result_is_kept(a)
                && let Some(r) = &a.result
            {
                add(
                    &r.commit,
                    format!("the result of {}/{task}/attempt-{}", run.id, a.n),
                    a.writer.as_str(),
                );
            }
        }
    }
    for e in loaded.entries() {
        let writer = e.record.writer.as_str();
        match &e.record.event {
            Event::Landed {
                run_id,
                task,
                attempt,
                new,
                commits,
                ..
            } => {
                add(
                    new,
                    format!("the landed candidate of {run_id}/{task}/attempt-{attempt}"),
                    writer,
                );
                for c in commits {
                    add(
                        c,
                        format!("a landed commit of {run_id}/{task}/attempt-{attempt}"),
                        writer,
                    );
                }
            }
            Event::BranchApproved {
                branch, approval, ..
            } => add(approval, format!("the approval of branch {branch}"), writer),
            Event::BranchLanded {
                landing,
                new,
                approval,
                ..
            } => {
                add(
                    new,
                    format!("the candidate of hand landing {landing}"),
                    writer,
                );
                add(approval, format!("the approval cited by {landing}"), writer);
            }
            _ => {}
        }
    }
    out.sort_by_key(|k| k.commit);
    out.dedup_by(|a, b| a.commit == b.commit);
    out
}

/// The expected commits `refs/orch/keep` does not hold: (commit, present
/// in this clone).
fn missing_from_keep(store: &Store, expected: &[Kept]) -> Result<Vec<(usize, bool)>, FsckError> {
    let keep: Vec<Oid> = store.ref_target(KEEP_REF)?.into_iter().collect();
    let present: Vec<Oid> = expected
        .iter()
        .map(|k| k.commit)
        .filter(|c| store.has_object(*c))
        .collect();
    let outside: HashSet<Oid> = store
        .commits_only_in(&present, &keep)?
        .into_iter()
        .collect();
    Ok(expected
        .iter()
        .enumerate()
        .filter_map(|(i, k)| {
            if !store.has_object(k.commit) {
                Some((i, false))
            } else {
                outside.contains(&k.commit).then_some((i, true))
            }
        })
        .collect())
}

fn check_keep(store: &Store, loaded: &Loaded, report: &mut Report) -> Result<(), FsckError> {
    let expected = expected_kept(loaded);
    report.checked.kept_commits = expected.len();
    for (i, present) in missing_from_keep(store, &expected)? {
        let k = &expected[i];
        let hex = k.commit.to_string();
        let (message, fix) = if present {
            (
                format!(
                    "{} ({}) is not reachable from refs/orch/keep: `git gc` may drop it",
                    k.what,
                    &hex[..12]
                ),
                "`git orch fsck --repair` adds it to refs/orch/keep".to_owned(),
            )
        } else if loaded.me.as_ref().is_some_and(|m| m.as_str() == k.writer) {
            (
                format!("{} ({}) is missing from this clone", k.what, &hex[..12]),
                "it was lost here; a clone or remote that still has it brings it back with `git orch sync`".to_owned(),
            )
        } else {
            (
                format!(
                    "{} ({}), recorded by writer {}, is missing from this clone",
                    k.what,
                    &hex[..12],
                    k.writer
                ),
                "`git orch sync` fetches it with that clone's refs/orch/keep".to_owned(),
            )
        };
        report.push(
            Check::Keep,
            Severity::Problem,
            hex[..12].to_owned(),
            message,
            fix,
        );
    }
    Ok(())
}

/// Attempt branches, attempt worktrees, folders under the worktree roots
/// and scratch worktrees, against the records of this clone.
fn check_attempts(store: &Store, loaded: &Loaded, report: &mut Report) -> Result<(), FsckError> {
    let branches = crate::run::control::attempt_branches(&loaded.runs);
    let archive = crate::run::control::archive_tips(store, &branches)?;
    let me = loaded.me.as_ref();
    let mine: Vec<(&RunState, &crate::ids::TaskId, &crate::state::AttemptState)> = loaded
        .runs
        .values()
        .flat_map(|r| r.attempts().map(move |(t, a)| (r, t, a)))
        // An attempt that met someone else's branch made nothing.
        .filter(|(_, _, a)| Some(&a.writer) == me && !a.foreign_branch)
        .collect();
    report.checked.attempts = mine.len();
    // Branches under orch/ that no record names.
    let heads = store.refs_with_prefix("refs/heads/")?;
    for (name, tip) in &heads {
        let short = &name["refs/heads/".len()..];
        if branches.contains(short) {
            report.checked.branches += 1;
            continue;
        }
        if !short.starts_with("orch/") {
            continue;
        }
        report.checked.branches += 1;
        let only = store.commits_only_in(&[*tip], &archive)?;
        let fix = if only.is_empty() {
            format!("nothing only it holds: delete it with `git branch -D {short}`")
        } else {
            format!(
                "it holds {} commit(s) nothing else reaches; keep them on a branch of yours (`git branch -m {short} <name>`) or delete it after review (`git branch -D {short}`)",
                only.len()
            )
        };
        report.push(
            Check::Branches,
            Severity::Problem,
            short.to_owned(),
            format!("branch {short} looks like an attempt branch but no attempt record names it"),
            fix,
        );
    }
    let live = |run: &RunId| crate::run::control::driver_alive(store, run).unwrap_or(true);
    let mut roots: BTreeSet<PathBuf> = BTreeSet::new();
    let mut recorded: HashMap<PathBuf, bool> = HashMap::new();
    for (run, task, a) in &mine {
        let path = PathBuf::from(&a.worktree);
        if let Some(root) = path.parent().and_then(Path::parent) {
            roots.insert(root.to_owned());
        }
        recorded.insert(path.clone(), a.cleaned);
        let open_and_live = a.is_open() && live(&run.id);
        // Commits only an attempt branch (or its worktree) holds.
        let branch_ref = format!("refs/heads/{}", a.branch);
        if !a.is_open()
            && let Some(tip) = store.ref_target(&branch_ref)?
        {
            let mut tips = vec![tip];
            if !a.cleaned
                && let Some(head) = store.linked_worktree_head(&path)
                && head != tip
            {
                tips.push(head);
            }
            if let Some(held) = crate::run::control::unkept(store, a, &tips, &archive)? {
                use crate::run::control::UnkeptKind;
                let severity = match held.kind {
                    UnkeptKind::Added => Severity::Problem,
                    // Reported by the keep check.
                    UnkeptKind::ResultNotKept => continue,
                    UnkeptKind::SecretResult | UnkeptKind::Unjudged => Severity::Note,
                };
                let (message, fix) = held
                    .explain(&a.branch)
                    .split_once("; ")
                    .map(|(m, f)| (m.to_owned(), f.to_owned()))
                    .unwrap_or_default();
                report.push(
                    Check::Branches,
                    severity,
                    a.branch.clone(),
                    format!(
                        "the branch of {}/{task}/attempt-{} stays: {message}",
                        run.id, a.n
                    ),
                    fix,
                );
            }
        }
        if !a.cleaned && !path.exists() && !open_and_live {
            report.push(
                Check::Worktrees,
                Severity::Problem,
                path.display().to_string(),
                format!(
                    "the worktree of {}/{task}/attempt-{} is gone, but no cleanup recorded it (removed by hand?)",
                    run.id, a.n
                ),
                "`git orch cleanup` records it, and removes its branch when nothing only the branch holds".into(),
            );
        }
    }
    // Config that does not parse is the config check's finding; the
    // worktree root is then the default one.
    let settings = store
        .project_config(store.resolve_commit("HEAD")?)
        .ok()
        .and_then(|v| crate::config::Settings::from_values(&v).ok());
    let defaults = || crate::config::Settings::from_values(&Default::default());
    if let Some(settings) = settings.or_else(|| defaults().ok()) {
        roots.insert(crate::run::worktree_root(store, &settings));
    }
    let scratch_dir = crate::run::workspace::scratch_dir(store.common_dir());
    // git's records of linked worktrees under a root or the scratch folder.
    for w in store.linked_worktrees()? {
        let under_root = roots.iter().any(|r| w.path.starts_with(r));
        let scratch = w.path.starts_with(&scratch_dir);
        if !under_root && !scratch {
            continue;
        }
        report.checked.worktrees += 1;
        if w.prunable {
            report.push(
                Check::Worktrees,
                Severity::Problem,
                w.path.display().to_string(),
                format!(
                    "git still lists the worktree {} whose folder is gone",
                    w.path.display()
                ),
                "`git worktree prune` (which `git orch cleanup` runs) forgets it".into(),
            );
            continue;
        }
        if scratch {
            continue;
        }
        match recorded.get(&w.path) {
            None => report.push(
                Check::Worktrees,
                Severity::Problem,
                w.path.display().to_string(),
                format!(
                    "the worktree {} is under the worktree root but no attempt record of this clone names it",
                    w.path.display()
                ),
                format!(
                    "save anything you need from it, then `git worktree remove {}`",
                    w.path.display()
                ),
            ),
            Some(true) => report.push(
                Check::Worktrees,
                Severity::Problem,
                w.path.display().to_string(),
                format!(
                    "the worktree {} was recorded as removed but is there again",
                    w.path.display()
                ),
                format!(
                    "save anything you need from it, then `git worktree remove {}`",
                    w.path.display()
                ),
            ),
            Some(false) => {}
        }
    }
    // Folders under the roots that are nobody's worktree.
    let registered: HashSet<PathBuf> = store
        .linked_worktrees()?
        .into_iter()
        .map(|w| w.path)
        .collect();
    for root in &roots {
        let Ok(runs) = std::fs::read_dir(root) else {
            continue;
        };
        for run_dir in runs.flatten() {
            // Dot folders are no run's (lead agents' checkouts are in one).
            if run_dir.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(entries) = std::fs::read_dir(run_dir.path()) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if !p.is_dir() || recorded.contains_key(&p) || registered.contains(&p) {
                    continue;
                }
                report.push(
                    Check::Worktrees,
                    Severity::Problem,
                    p.display().to_string(),
                    format!(
                        "the folder {} under the worktree root is no attempt's worktree",
                        p.display()
                    ),
                    format!("remove it if you do not need it: `rm -r '{}'`", p.display()),
                );
            }
        }
    }
    // Warm caches' layers whose checkout is gone: a crash left them.
    for dir in crate::store::scratch::orphan_warm_layers(store.common_dir()) {
        report.push(
            Check::Scratch,
            Severity::Problem,
            dir.display().to_string(),
            format!(
                "the warm cache layers {} belong to no checkout (a crash?)",
                dir.display()
            ),
            "`git orch cleanup` removes them".into(),
        );
    }
    // Scratch worktrees no landing or gate holds: a crash left them.
    for (path, lock) in crate::run::workspace::idle_scratch(store, &|_| true)? {
        if lock.is_none() {
            continue;
        }
        report.push(
            Check::Scratch,
            Severity::Problem,
            path.display().to_string(),
            format!(
                "the scratch worktree {} outlived its landing or gate (a crash?)",
                path.display()
            ),
            "`git orch cleanup` removes it".into(),
        );
    }
    Ok(())
}

/// Whether a command line is a git-orch command that drives attempts (not
/// the supervisor between a driver and its agent).
fn is_driver(argv: &[String]) -> bool {
    let Some(first) = argv.first() else {
        return false;
    };
    let name = Path::new(first).file_name().unwrap_or_default();
    name == "git-orch" && argv.get(1).is_none_or(|a| a != "supervise")
}

/// Processes of this clone's attempts (and its runs' gates) whose driver
/// is gone: nothing will ever stop them.
fn check_processes(store: &Store, loaded: &Loaded, report: &mut Report) {
    let Some(me) = loaded.me.as_ref() else {
        return;
    };
    let ours: HashSet<&str> = loaded
        .runs
        .values()
        .filter(|r| {
            r.attempts().any(|(_, a)| a.writer == *me) || r.drivers.iter().any(|d| d.writer == *me)
        })
        .map(|r| r.id.as_str())
        .collect();
    let mut groups: BTreeMap<u32, (String, Vec<u32>)> = BTreeMap::new();
    for p in crate::process::find_with_var("ORCH_RUN", "ORCH_") {
        let Some(run) = p.vars.get("ORCH_RUN") else {
            continue;
        };
        if !ours.contains(run.as_str()) {
            continue;
        }
        let what = match (p.vars.get("ORCH_TASK"), p.vars.get("ORCH_ATTEMPT")) {
            (Some(t), Some(n)) => {
                let mine = RunId::new(run.as_str())
                    .ok()
                    .and_then(|id| loaded.runs.get(&id))
                    .is_some_and(|r| {
                        r.attempts().any(|(task, a)| {
                            task.as_str() == t && a.n.to_string() == *n && a.writer == *me
                        })
                    });
                if !mine {
                    continue;
                }
                format!("{run}/{t}/attempt-{n}")
            }
            _ => format!("run {run}"),
        };
        if crate::process::ancestor_where(p.pid, &is_driver).is_some() {
            continue;
        }
        if RunId::new(run.as_str())
            .ok()
            .is_some_and(|id| crate::run::control::driver_alive(store, &id).unwrap_or(true))
        {
            continue;
        }
        groups
            .entry(p.pgid)
            .or_insert_with(|| (what, Vec::new()))
            .1
            .push(p.pid);
    }
    for (pgid, (what, pids)) in groups {
        let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
        report.push(
            Check::Processes,
            Severity::Problem,
            format!("group {pgid}"),
            format!(
                "process {} (group {pgid}) of {what} runs without a live driver: nothing will stop it",
                pids.join(", ")
            ),
            format!(
                "stop it: `kill -TERM -- -{pgid}`; or resume the run (`git orch run <plan>`), which stops what its dead driver left"
            ),
        );
    }
}

/// Checkout moves a landing began and a crash did not let it finish.
fn check_checkouts(store: &Store, report: &mut Report) -> Result<(), FsckError> {
    for m in crate::merge::checkout::pending(store) {
        let tip = store.ref_target(&m.branch)?.map(|t| t.to_string());
        let branch = m.branch.trim_start_matches("refs/heads/");
        if tip.as_deref() == Some(m.new.as_str())
            && store.checkouts_of(&m.branch)?.contains(&m.path)
        {
            report.push(
                Check::Checkouts,
                Severity::Problem,
                m.path.display().to_string(),
                format!(
                    "{branch} moved to {} but its checkout at {} may still hold the files of {} (a landing stopped between the two)",
                    &m.new[..12.min(m.new.len())],
                    m.path.display(),
                    &m.old[..12.min(m.old.len())]
                ),
                format!("`git orch fsck --repair` finishes it, or by hand: `{}`", m.fix()),
            );
        } else {
            report.push(
                Check::Checkouts,
                Severity::Note,
                m.path.display().to_string(),
                format!(
                    "a landing's marker for the checkout at {} is left, but {branch} never moved there (or moved on): nothing to finish",
                    m.path.display()
                ),
                "`git orch fsck --repair` (or the next landing) removes the marker".into(),
            );
        }
    }
    Ok(())
}

/// `.orch/config` at HEAD and the repository's `orch.*` keys.
fn check_config(store: &Store, report: &mut Report) {
    if let Err(e) = store.writer_id() {
        report.push(
            Check::Config,
            Severity::Problem,
            "orch.writerId".into(),
            e.to_string().lines().next().unwrap_or_default().to_owned(),
            "`git config --unset orch.writerId`; a new one is made on the next write".into(),
        );
    }
    let head = store.resolve_commit("HEAD").unwrap_or_default();
    let values = match store.project_config(head) {
        Ok(v) => v,
        Err(e) => {
            report.push(
                Check::Config,
                Severity::Problem,
                crate::store::config::PROJECT_CONFIG.into(),
                e.to_string().lines().next().unwrap_or_default().to_owned(),
                "fix its syntax (that of .gitmodules: `[section \"name\"]` headers, `key = value` lines) and commit it".into(),
            );
            return;
        }
    };
    if let Err(e) = crate::config::Settings::from_values(&values) {
        let key = e.origin.rsplit(' ').next().unwrap_or_default().to_owned();
        let fix = if e.origin.starts_with("[orch]") {
            format!(
                "correct it in .orch/config and commit it, or in the repository's config: `git config orch.{key} <value>` (or `git config --unset orch.{key}`)"
            )
        } else {
            "correct it in .orch/config and commit it".to_owned()
        };
        report.push(
            Check::Config,
            Severity::Problem,
            e.origin.clone(),
            e.to_string(),
            fix,
        );
    }
}

/// Records that a person reviewed a finding and accepts it: a rewrite of
/// `writer`'s log at `seq`, or an unverified `commit` on a protected
/// target. Refuses (writing nothing) when fsck does not find it.
pub fn accept(store: &Store, what: &Accept, by: &str) -> Result<AcceptedFinding, FsckError> {
    let report = check(store)?;
    let found = report
        .findings
        .iter()
        .find_map(|f| match (&f.acceptance, what) {
            (
                Some(a @ AcceptedFinding::Rewrite { writer, seq, .. }),
                Accept::Rewrite { writer: w, seq: s },
            ) if writer == w && seq == s && f.check == Check::Rewrite => Some(a.clone()),
            (Some(a @ AcceptedFinding::Commit { commit, .. }), Accept::Commit(c))
                if commit == c =>
            {
                Some(a.clone())
            }
            _ => None,
        });
    // A corrupt record alone at its seq can be accepted too.
    let found = found.or_else(|| {
        report
            .findings
            .iter()
            .find_map(|f| match (&f.acceptance, what) {
                (
                    Some(a @ AcceptedFinding::Rewrite { writer, seq, .. }),
                    Accept::Rewrite { writer: w, seq: s },
                ) if writer == w && seq == s => Some(a.clone()),
                _ => None,
            })
    });
    let Some(finding) = found else {
        return Err(FsckError::NothingToAccept { what: what.clone() });
    };
    store.append(vec![Event::FindingAccepted {
        finding: finding.clone(),
        by: by.to_owned(),
    }])?;
    Ok(finding)
}

/// What `--accept-rewrite` / `--accept-commit` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Accept {
    Rewrite { writer: WriterId, seq: u64 },
    Commit(Oid),
}

/// Parses `<writer>:<seq>`.
pub fn parse_rewrite(value: &str) -> Result<(WriterId, u64), BadRewrite> {
    let (w, s) = value
        .rsplit_once(':')
        .ok_or_else(|| BadRewrite::NoColon(value.to_owned()))?;
    let writer = WriterId::new(w)?;
    let seq: u64 = s
        .parse()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| BadRewrite::Seq(s.to_owned()))?;
    Ok((writer, seq))
}

/// The repairs: restores refs a crash or a prune damaged to their newest
/// intact value (saying what was lost; see [`Store::repair_refs`]), adds
/// to `refs/orch/keep` the commits records point at that it misses (when
/// this clone has them), and finishes (or forgets) the checkout moves a
/// crashed landing left. Returns what it did, one line each, and the
/// checkout moves it could not finish.
pub fn repair(store: &Store) -> Result<Repairs, FsckError> {
    // Refs first: nothing else can be read through a damaged one.
    let mut done = store.repair_refs()?;
    let loaded = Loaded::read(store)?;
    let expected = expected_kept(&loaded);
    let mut keep = Vec::new();
    for (i, present) in missing_from_keep(store, &expected)? {
        if present {
            keep.push(expected[i].commit);
            done.push(format!(
                "kept {} ({})",
                &expected[i].commit.to_string()[..12],
                expected[i].what
            ));
        }
    }
    store.keep(&keep, "fsck repair")?;
    for due in missing_records(store, &loaded)? {
        crate::run::notes::add_record(store, due.commit, &due.record)?;
        done.push(format!(
            "wrote the record {:?} on {} again",
            due.name,
            &due.commit.to_string()[..12]
        ));
    }
    let before = crate::merge::checkout::pending(store).len();
    let problems = crate::merge::checkout::recover(store)?;
    let after = crate::merge::checkout::pending(store).len();
    if before > after {
        done.push(format!(
            "settled {} checkout move(s) a landing left",
            before - after
        ));
    }
    for name in store.remove_dead_pins()? {
        done.push(format!(
            "removed {name}, a pin left by a git-orch process that is gone"
        ));
    }
    Ok(Repairs {
        done,
        unsettled: problems,
    })
}

/// What [`repair`] did, and what it left for a person.
#[derive(Debug, Default)]
pub struct Repairs {
    /// One line per repair made.
    pub done: Vec<String>,
    /// Checkouts a landing moved the target under that could not follow.
    pub unsettled: Vec<crate::run::progress::LandingProblem>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrite_values_parse_or_say_why() {
        let (w, s) = parse_rewrite("abc123:7").expect("valid");
        assert_eq!((w.as_str(), s), ("abc123", 7));
        assert!(
            parse_rewrite("abc123")
                .unwrap_err()
                .to_string()
                .contains("<writer>:<seq>")
        );
        assert!(
            parse_rewrite("abc123:0")
                .unwrap_err()
                .to_string()
                .contains("from 1")
        );
        assert!(parse_rewrite("abc123:x").is_err());
        assert!(parse_rewrite("../x:1").is_err());
    }

    #[test]
    fn drivers_are_git_orch_commands_but_not_the_supervisor() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(is_driver(&argv(&["git-orch", "run", "p"])));
        assert!(is_driver(&argv(&["/usr/bin/git-orch", "worker"])));
        assert!(!is_driver(&argv(&[
            "git-orch",
            "supervise",
            "--parent",
            "1"
        ])));
        assert!(!is_driver(&argv(&["git", "orch", "run"])));
        assert!(!is_driver(&argv(&["sleep", "60"])));
    }
}
