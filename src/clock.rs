//! Wall-clock time as git-orch records it: milliseconds since the Unix
//! epoch, the unit of every `time_ms` in the log, claims and leases.
//!
//! One place, so that every record and every age computed from one agree
//! on the unit, and a clock before 1970 reads as 0 rather than panicking.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or_default()
}

/// Now, in whole seconds since the Unix epoch (git's commit time).
pub fn now_secs() -> i64 {
    now_ms() / 1000
}
