//! Sharing state through a remote: fetch, integrate, push, repeat.
//!
//! Fetch and push shell out to the `git` binary so the user's SSH and
//! credential setup applies. Fetched refs land in the tracking namespace
//! `refs/orch-remotes/<remote>/…`; integrating then moves each local
//! `refs/orch/…` ref forward by compare-and-swap:
//!
//! * missing locally → created; behind → fast-forwarded; ahead → kept (the
//!   push sends it);
//! * diverged → a merge commit with both sides as parents. For a log ref its
//!   tree is the union of both event indexes by blob, so no event is
//!   dropped, not even when both sides hold different events at one path;
//!   for other refs the local tree is kept and the remote side stays
//!   reachable.
//!
//! A writer's log only ever grows. A copy of another writer's log that
//! arrives as anything but a fast-forward of what this clone held (or of
//! what the remote held at the last fetch) was rewritten somewhere: it is
//! merged keeping both versions, reported in [`SyncReport::rewrites`] (the
//! command exits 3), and `git orch fsck` lists the events that differ.
//!
//! Nothing is ever force-pushed. A push rejected because the remote moved
//! meanwhile starts another round.

use super::error::{Result, StoreError};
use super::lock::{MAX_TRIES, backoff};
use super::log::{LOG_PREFIX, TipPosition, parse_trailers};
use super::oid::Oid;
use super::refs::{Applied, Expected, ORCH_PREFIX, REMOTES_PREFIX, RefUpdate};
use super::repository::Store;
use crate::event::MAX_EVENT_BYTES;

/// How many fetch-integrate-push rounds a sync makes before giving up.
pub const MAX_ROUNDS: u32 = 10;

/// What one `sync` did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SyncReport {
    pub remote: String,
    /// Local refs created from the remote.
    pub created: Vec<String>,
    /// Local refs fast-forwarded to the remote's value.
    pub fast_forwarded: Vec<String>,
    /// Local refs that had diverged and were merged keeping both sides.
    pub merged: Vec<String>,
    /// Whether the final push sent anything.
    pub pushed: bool,
    /// Fetch-integrate-push rounds needed.
    pub rounds: u32,
    /// Things the user should know (a writer id shared by two clones).
    pub warnings: Vec<SyncWarning>,
    /// Other writers' logs that arrived rewritten (not a fast-forward).
    pub rewrites: Vec<Rewrite>,
    /// Logs of the remote not taken in: they gained an event over
    /// [`MAX_EVENT_BYTES`].
    pub refused: Vec<Refused>,
}

/// Something a sync found that the user should know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SyncWarning {
    /// This clone's own log had diverged from the remote's copy: another
    /// clone writes under the same writer id.
    #[error("{reference} had diverged: another clone uses the same writer id (a copied .git?)")]
    WriterIdShared { reference: String },
}

/// A remote's log that `sync` would not take in, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The local log ref it would have updated (`refs/orch/log/<writer>`).
    pub reference: String,
    pub writer: String,
    /// The first event over the limit: its path in the log tree, its blob
    /// and its size in bytes.
    pub path: String,
    pub blob: Oid,
    pub size: u64,
}

/// A writer's log that changed other than by appending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rewrite {
    pub writer: String,
    /// What this clone held (or the remote held at the last fetch).
    pub before: Oid,
    /// What arrived.
    pub after: Oid,
}

impl Store {
    /// Refuses a remote name that is not a configured remote (or could be
    /// mistaken for an option).
    pub fn check_remote(&self, remote: &str) -> Result<()> {
        let store = self;
        let valid = !remote.is_empty()
            && !remote.starts_with('-')
            && remote
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !remote.contains("..");
        if !valid || store.config_get(&format!("remote.{remote}.url"))?.is_none() {
            return Err(StoreError::UnknownRemote {
                remote: remote.to_owned(),
            });
        }
        Ok(())
    }

    /// The remote `sync` uses when none is named: `orch.remote`, else `origin`.
    pub fn default_remote(&self) -> Result<String> {
        Ok(self
            .config_get("orch.remote")?
            .unwrap_or_else(|| "origin".into()))
    }

    /// Fetches, integrates and pushes until the remote accepts the push.
    pub fn sync(&self, remote: &str) -> Result<SyncReport> {
        self.check_remote(remote)?;
        let mut report = SyncReport {
            remote: remote.to_owned(),
            ..Default::default()
        };
        for round in 1..=MAX_ROUNDS {
            report.rounds = round;
            self.take_in(remote, &mut report)?;
            if !self.ahead_of(remote, &report.refused)? {
                // Everything here is what the fetch just saw there: a push
                // would only cost a round trip to learn that.
                return Ok(report);
            }
            match self.push(remote, &report.refused)? {
                PushOutcome::Accepted { sent } => {
                    report.pushed |= sent;
                    return Ok(report);
                }
                PushOutcome::Rejected => backoff(round),
            }
        }
        Err(StoreError::Contention {
            reference: format!("{remote} refs/orch/*"),
            attempts: MAX_ROUNDS,
        })
    }

    /// Fetches `remote`'s `refs/orch/*` and integrates them here, pushing
    /// nothing: afterwards this clone holds every record the remote held
    /// when the fetch began.
    pub fn catch_up(&self, remote: &str) -> Result<SyncReport> {
        self.check_remote(remote)?;
        let mut report = SyncReport {
            remote: remote.to_owned(),
            rounds: 1,
            ..Default::default()
        };
        self.take_in(remote, &mut report)?;
        Ok(report)
    }

    /// One fetch of `remote`'s state, checked and integrated.
    fn take_in(&self, remote: &str, report: &mut SyncReport) -> Result<()> {
        let before = self.tracked_logs(remote)?;
        self.fetch(remote)?;
        self.find_rewrites(remote, &before, report)?;
        self.refuse_oversized(remote, &before, report)?;
        self.integrate(remote, report)
    }

    /// The remote's log refs as of the last fetch (tracking copies).
    fn tracked_logs(&self, remote: &str) -> Result<std::collections::HashMap<String, Oid>> {
        let prefix = format!("{REMOTES_PREFIX}{remote}/log/");
        Ok(self.refs_with_prefix(&prefix)?.into_iter().collect())
    }

    /// Records the tracking log refs a fetch moved other than forward.
    fn find_rewrites(
        &self,
        remote: &str,
        before: &std::collections::HashMap<String, Oid>,
        report: &mut SyncReport,
    ) -> Result<()> {
        for (name, after) in self.tracked_logs(remote)? {
            let Some(&old) = before.get(&name) else {
                continue;
            };
            if old != after && !self.is_ancestor(old, after)? {
                let writer = name.rsplit('/').next().unwrap_or_default().to_owned();
                let r = Rewrite {
                    writer,
                    before: old,
                    after,
                };
                if !report.rewrites.contains(&r) {
                    report.rewrites.push(r);
                }
            }
        }
        Ok(())
    }

    /// Refuses the remote's logs that would bring in an event over
    /// [`MAX_EVENT_BYTES`] (what the server hook refuses, and every reader
    /// skips): each event a tracking log holds beyond this clone's copy of
    /// that log is sized from its object header, never read. A refused log
    /// is not integrated, its tracking copy is set back to where it was
    /// before this fetch (removed if it was new), and it is left out of the
    /// push; the rest of the sync goes on.
    fn refuse_oversized(
        &self,
        remote: &str,
        before: &std::collections::HashMap<String, Oid>,
        report: &mut SyncReport,
    ) -> Result<()> {
        let prefix = format!("{REMOTES_PREFIX}{remote}/log/");
        for (tracking, theirs) in self.refs_with_prefix(&prefix)? {
            let writer = tracking[prefix.len()..].to_owned();
            let local = format!("{LOG_PREFIX}{writer}");
            if report.refused.iter().any(|r| r.reference == local) {
                continue;
            }
            let held = self.ref_target(&local)?.or(before.get(&tracking).copied());
            if held == Some(theirs) {
                continue;
            }
            let held_tree = held
                .map(|h| self.commit_info(h))
                .transpose()?
                .map(|i| i.tree);
            let their_tree = self.commit_info(theirs)?.tree;
            let mut over = None;
            for change in self.tree_changes(held_tree, their_tree)? {
                let Some(blob) = change.new else { continue };
                let size = self.object_size(blob)?;
                if size > MAX_EVENT_BYTES {
                    over = Some((change.path, blob, size));
                    break;
                }
            }
            let Some((path, blob, size)) = over else {
                continue;
            };
            let was = before.get(&tracking).copied();
            if was != Some(theirs) {
                let update = match was {
                    Some(was) => RefUpdate::set(
                        &tracking,
                        was,
                        Expected::At(theirs),
                        "orch: sync refused an event over the size limit",
                    ),
                    None => RefUpdate::delete(
                        &tracking,
                        theirs,
                        "orch: sync refused an event over the size limit",
                    ),
                };
                // Lost to a concurrent fetch: that one's sync judges it.
                self.apply(std::slice::from_ref(&update))?;
            }
            report.refused.push(Refused {
                reference: local,
                writer,
                path,
                blob,
                size,
            });
        }
        Ok(())
    }

    /// Whether some local `refs/orch/*` ref (but the `refused` logs)
    /// differs from the remote's value as of the last fetch (so a push has
    /// something to send).
    fn ahead_of(&self, remote: &str, refused: &[Refused]) -> Result<bool> {
        let prefix = format!("{REMOTES_PREFIX}{remote}/");
        let theirs: std::collections::HashMap<String, Oid> = self
            .refs_with_prefix(&prefix)?
            .into_iter()
            .map(|(name, oid)| (name[prefix.len()..].to_owned(), oid))
            .collect();
        for (name, oid) in self.refs_with_prefix(ORCH_PREFIX)? {
            if refused.iter().any(|r| r.reference == name) {
                continue;
            }
            if theirs.get(&name[ORCH_PREFIX.len()..]) != Some(&oid) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `git fetch` of the remote's `refs/orch/*` into the tracking namespace.
    pub fn fetch(&self, remote: &str) -> Result<()> {
        let refspec = format!("+{ORCH_PREFIX}*:{REMOTES_PREFIX}{remote}/*");
        let args = [
            "fetch",
            "--quiet",
            "--no-write-fetch-head",
            remote,
            &refspec,
        ];
        for attempt in 0..3 {
            let out = self.git().output(args)?;
            if out.status.success() {
                return Ok(());
            }
            let stderr = String::from_utf8_lossy(&out.stderr);
            // git's connectivity check reads every worktree's HEAD; one
            // being added this instant (a scratch worktree of the merge
            // queue) has no valid HEAD yet. That passes in milliseconds.
            let adding_worktree = stderr.contains("bad object worktrees/");
            if !adding_worktree || attempt == 2 {
                return Err(StoreError::Process(crate::process::ProcessError::Failed {
                    command: format!("git {}", args.join(" ")),
                    status: out.status.to_string(),
                    stderr: stderr.trim().to_owned(),
                }));
            }
            backoff(attempt + 4);
        }
        Ok(())
    }

    /// Brings every tracked ref of `remote` into the local `refs/orch/*`.
    pub fn integrate(&self, remote: &str, report: &mut SyncReport) -> Result<()> {
        let prefix = format!("{REMOTES_PREFIX}{remote}/");
        let mut guard = self.lock(super::lock::LOG_LOCK, "syncing")?;
        let own = self.writer_id()?.map(|w| format!("{LOG_PREFIX}{w}"));
        for (tracking, theirs) in self.refs_with_prefix(&prefix)? {
            let local = format!("{ORCH_PREFIX}{}", &tracking[prefix.len()..]);
            if report.refused.iter().any(|r| r.reference == local) {
                continue;
            }
            for attempt in 0..MAX_TRIES {
                let ours = self.ref_target(&local)?;
                let (update, kind) = match ours {
                    None => (
                        RefUpdate::set(&local, theirs, Expected::Absent, "orch: sync create"),
                        &mut report.created,
                    ),
                    Some(o) if o == theirs || self.is_ancestor(theirs, o)? => break,
                    Some(o) if self.is_ancestor(o, theirs)? => (
                        RefUpdate::set(&local, theirs, Expected::At(o), "orch: sync fast-forward"),
                        &mut report.fast_forwarded,
                    ),
                    Some(o) => {
                        if local.starts_with(LOG_PREFIX) && Some(&local) != own.as_ref() {
                            // Another writer's log, changed other than by
                            // appending: somebody rewrote it.
                            let r = Rewrite {
                                writer: local[LOG_PREFIX.len()..].to_owned(),
                                before: o,
                                after: theirs,
                            };
                            if !report.rewrites.contains(&r) {
                                report.rewrites.push(r);
                            }
                        }
                        let merged = self.merge_diverged(&local, o, theirs)?;
                        (
                            RefUpdate::set(&local, merged, Expected::At(o), "orch: sync merge"),
                            &mut report.merged,
                        )
                    }
                };
                guard.intend([update.name.as_str()]);
                if self.apply(std::slice::from_ref(&update))? == Applied::Done {
                    if !kind.contains(&local) {
                        kind.push(local.clone());
                    }
                    break;
                }
                backoff(attempt);
            }
        }
        if let Some(own) = own
            && report.merged.contains(&own)
        {
            report
                .warnings
                .push(SyncWarning::WriterIdShared { reference: own });
        }
        Ok(())
    }

    /// A merge commit of two diverged versions of `name`, keeping both.
    fn merge_diverged(&self, name: &str, ours: Oid, theirs: Oid) -> Result<Oid> {
        let our = self.commit_info(ours)?;
        if !name.starts_with(LOG_PREFIX) {
            let msg = format!("merge diverged {name}\n\nOrch-Merge: {ours} {theirs}\n");
            return self.write_commit(&msg, our.tree, &[ours, theirs]);
        }
        let their = self.commit_info(theirs)?;
        let mut editor = self.tree_editor(our.tree)?;
        // Union by blob: what only they hold is added where they hold it;
        // where both hold a path with different blobs, theirs goes beside
        // ours under its own name (`<seq>-<its blob8>.json`), so neither
        // event is dropped and the reader sees both.
        for change in self.tree_changes(Some(our.tree), their.tree)? {
            let Some(blob) = change.new else { continue };
            let path = match change.old {
                None => change.path,
                Some(_) => {
                    let name = change.path.rsplit('/').next().unwrap_or_default();
                    let Some(seq) = name.split('-').next().and_then(|s| s.parse::<u64>().ok())
                    else {
                        continue;
                    };
                    super::log::event_path(seq, blob)
                }
            };
            if !editor.contains(&path) {
                editor.upsert_blob(&path, blob)?;
            }
        }
        let tree = editor.write()?;
        let a = parse_trailers(&our.message).unwrap_or_default();
        let b = parse_trailers(&their.message).unwrap_or_default();
        let pos = TipPosition {
            seq: a.seq.max(b.seq),
            clock: a.clock.max(b.clock),
        };
        let writer = &name[LOG_PREFIX.len()..];
        let msg = format!(
            "merge diverged log of {writer}\n\nOrch-Writer: {writer}\nOrch-Seq: {}\nOrch-Clock: {}\nOrch-Events: 0\nOrch-Type: merge\nOrch-Format: {}\n",
            pos.seq,
            pos.clock,
            crate::event::FORMAT_VERSION
        );
        self.write_commit(&msg, tree, &[ours, theirs])
    }

    /// Pushes `refs/orch/*` without force, but the `refused` logs (this
    /// clone's copy of them is behind the remote's, which a push would
    /// only have rejected).
    fn push(&self, remote: &str, refused: &[Refused]) -> Result<PushOutcome> {
        let refspec = format!("{ORCH_PREFIX}*:{ORCH_PREFIX}*");
        let mut args = vec!["push".to_owned(), "--porcelain".into(), remote.into()];
        args.push(refspec.clone());
        args.extend(refused.iter().map(|r| format!("^{}", r.reference)));
        let out = self.git().output(&args)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let rejected = stdout.lines().any(|l| l.starts_with('!'));
        let sent = stdout
            .lines()
            .any(|l| l.starts_with(' ') || l.starts_with('+') || l.starts_with('*'));
        if out.status.success() {
            return Ok(PushOutcome::Accepted { sent });
        }
        if rejected
            && stdout.lines().filter(|l| l.starts_with('!')).all(|l| {
                l.contains("non-fast-forward")
                    || l.contains("fetch first")
                    || l.contains("stale info")
            })
        {
            return Ok(PushOutcome::Rejected);
        }
        Err(StoreError::Process(crate::process::ProcessError::Failed {
            command: format!("git push --porcelain {remote} {refspec}"),
            status: out.status.to_string(),
            stderr: format!(
                "{}{}",
                stdout.trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }))
    }
}

enum PushOutcome {
    Accepted { sent: bool },
    Rejected,
}
