//! Advisory file locks under `.git/orch/`.
//!
//! A lock only reduces contention between processes of one clone; the
//! compare-and-swap ref update is what proves an append. The kernel releases
//! an `flock` when its holder dies, so a crash (even `kill -9`) never leaves
//! a lock that needs clearing by hand.
//!
//! The lock file also records its holder (pid, what it does) for messages,
//! and, just before the holder updates refs, the refs it is about to lock
//! (its *intent*). A holder that finishes empties the file; one that dies
//! leaves it. The next holder finds the dead one's intent and may remove the
//! `<ref>.lock` files it left half-way through a ref transaction: nobody else
//! writes those refs while the advisory lock is held.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::error::{Result, StoreError};

/// How long an append waits for the log lock before giving up.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(60);
/// How often an operation is redone after losing a compare-and-swap.
pub const MAX_TRIES: u32 = 64;
/// The advisory lock every append (and every other write of shared refs)
/// takes, under `.git/orch/`.
pub const LOG_LOCK: &str = "lock";

/// Sleeps before retry `attempt`: exponential up to 50 ms, with jitter so
/// racing processes spread out instead of colliding again in lockstep.
pub fn backoff(attempt: u32) {
    let base_us = (500u64 << attempt.min(7)).min(50_000);
    let jitter = u64::from(u16::from_le_bytes(crate::ids::random_bytes::<2>()));
    std::thread::sleep(Duration::from_micros(base_us / 2 + jitter % base_us.max(1)));
}

/// A held exclusive lock; released on drop.
#[derive(Debug)]
pub struct LockGuard {
    file: File,
    path: PathBuf,
    header_len: u64,
    orphaned: Vec<String>,
}

impl LockGuard {
    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Refs a holder that died while holding this lock was about to update.
    pub fn orphaned_intents(&self) -> &[String] {
        &self.orphaned
    }

    /// Records the refs this holder is about to update, so that if it dies
    /// mid-transaction the next holder can clear the ref locks it left.
    pub fn intend<'a>(&mut self, refs: impl IntoIterator<Item = &'a str>) {
        let mut text = String::new();
        for r in refs {
            text.push_str("intent ");
            text.push_str(r);
            text.push('\n');
        }
        // Best effort, like the header: without it a crash leaves a ref lock
        // that the user is told how to remove.
        let _ = self.file.set_len(self.header_len);
        let _ = self.file.write_at(text.as_bytes(), self.header_len);
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        // An empty file tells the next holder this one finished cleanly.
        let _ = self.file.set_len(0);
        let _ = self.file.unlock();
    }
}

fn open(path: &Path) -> Result<File> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| StoreError::io(format!("creating {}", parent.display()), e))?;
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| StoreError::io(format!("opening lock file {}", path.display()), e))
}

/// Turns a freshly locked file into a guard: reads what a dead predecessor
/// left, then writes this holder's header.
fn take(mut file: File, path: &Path, what: &str) -> LockGuard {
    let mut previous = String::new();
    let _ = file.read_to_string(&mut previous);
    let orphaned = previous
        .lines()
        .filter_map(|l| l.strip_prefix("intent "))
        .map(str::to_owned)
        .collect();
    let header = format!("{} {}\n", std::process::id(), what.replace('\n', " "));
    let _ = file.set_len(0);
    let _ = file.write_at(header.as_bytes(), 0);
    LockGuard {
        file,
        path: path.to_owned(),
        header_len: header.len() as u64,
        orphaned,
    }
}

fn read_holder(path: &Path) -> String {
    let mut s = String::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_string(&mut s);
    }
    let first = s.lines().next().unwrap_or("").trim();
    match first.split_once(' ') {
        Some((pid, what)) => format!("pid {}, {}", pid.trim(), what.trim()),
        None if !first.is_empty() => format!("pid {first}"),
        None => "unknown process".into(),
    }
}

/// Takes the exclusive lock at `path`, waiting up to `wait`.
///
/// Under contention the wait is a blocking `flock` in a helper thread, so the
/// lock passes to the next waiter the moment it is released instead of at
/// the next poll; if `wait` runs out first, the helper gives up its claim
/// (it releases the lock as soon as it would have got it) and the caller
/// gets [`StoreError::Busy`].
pub fn acquire(path: &Path, what: &str, wait: Duration) -> Result<LockGuard> {
    let file = open(path)?;
    match file.try_lock() {
        Ok(()) => return Ok(take(file, path, what)),
        Err(std::fs::TryLockError::WouldBlock) => {}
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(StoreError::io(format!("locking {}", path.display()), e));
        }
    }
    let start = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let locked = file.lock().map(|()| file);
        // If the caller stopped waiting, the send fails and dropping the
        // file here releases the lock again.
        let _ = tx.send(locked);
    });
    match rx.recv_timeout(wait) {
        Ok(Ok(file)) => Ok(take(file, path, what)),
        Ok(Err(e)) => Err(StoreError::io(format!("locking {}", path.display()), e)),
        Err(_) => Err(StoreError::Busy {
            path: path.to_owned(),
            holder: read_holder(path),
            seconds: start.elapsed().as_secs(),
        }),
    }
}

/// A lock another process holds, and who that is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("held by {holder}")]
pub struct Held {
    /// The holder as it described itself (its pid and what it does).
    pub holder: String,
}

/// Takes the lock at `path` only if it is free; `Ok(Err(_))` says who
/// holds it.
pub fn try_acquire(path: &Path, what: &str) -> Result<Result<LockGuard, Held>> {
    let file = open(path)?;
    match file.try_lock() {
        Ok(()) => Ok(Ok(take(file, path, what))),
        Err(std::fs::TryLockError::WouldBlock) => Ok(Err(Held {
            holder: read_holder(path),
        })),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(StoreError::io(format!("locking {}", path.display()), e))
        }
    }
}

impl super::repository::Store {
    /// Takes the advisory lock `.git/orch/<name>` and removes the ref lock
    /// files a holder that died mid-transaction left behind (see the module
    /// docs). Any other stale `.lock` is left alone and reported when an
    /// update runs into it.
    pub(crate) fn lock(&self, name: &str, what: &str) -> Result<LockGuard> {
        let guard = acquire(&self.orch_dir().join(name), what, DEFAULT_WAIT)?;
        for reference in guard.orphaned_intents() {
            let safe = reference.starts_with("refs/")
                && !reference
                    .split('/')
                    .any(|c| c.is_empty() || c == "." || c == "..");
            if safe {
                let stale = self.common_dir().join(format!("{reference}.lock"));
                // The holder that made it is dead and no one else writes this
                // ref while the advisory lock is held.
                let _ = std::fs::remove_file(stale);
            }
        }
        Ok(guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_holder_is_told_who_holds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("orch/lock");
        let held = acquire(&path, "testing", DEFAULT_WAIT).expect("free lock");
        let other = try_acquire(&path, "second").expect("io works");
        let holder = other.expect_err("lock is held").holder;
        assert!(holder.contains(&std::process::id().to_string()), "{holder}");
        assert!(holder.contains("testing"), "{holder}");
        drop(held);
        assert!(try_acquire(&path, "third").expect("io").is_ok());
    }

    #[test]
    fn a_clean_release_leaves_no_intent_a_crash_does() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lock");
        let mut held = acquire(&path, "first", DEFAULT_WAIT).expect("free");
        held.intend(["refs/orch/log/abc"]);
        drop(held);
        let next = acquire(&path, "second", DEFAULT_WAIT).expect("free");
        assert!(next.orphaned_intents().is_empty());
        drop(next);
        // A holder that dies leaves its file as it was: simulate by writing
        // what a holder writes and never releasing through Drop.
        std::fs::write(&path, "4242 appending\nintent refs/orch/log/abc\n").expect("write");
        let after = acquire(&path, "third", DEFAULT_WAIT).expect("free");
        assert_eq!(after.orphaned_intents(), ["refs/orch/log/abc"]);
    }

    #[test]
    fn waiting_gives_up_with_busy() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lock");
        let _held = acquire(&path, "holder", DEFAULT_WAIT).expect("free lock");
        let err = acquire(&path, "waiter", Duration::from_millis(30)).expect_err("busy");
        assert!(matches!(err, StoreError::Busy { .. }), "{err}");
    }
}
