//! `git orch web`: a local, read-only view of plans, runs, attempts, diffs
//! and verdicts in a browser, served from the refs and notes alone.
//!
//! The server ([`server`]) listens on 127.0.0.1 only and answers only
//! requests whose path starts with the random token of the URL it printed
//! ([`access`]); it has no endpoint that changes anything, and reads the
//! state through an index that never saves ([`reader`]), so the repository
//! is byte for byte what it was while it serves. Pages are HTML made by
//! compile-time templates that escape every string they are given
//! ([`layout`], [`runs`], [`run`], [`task`], [`diff`], [`plan`],
//! [`commit`], [`dag`]); the only script and style are the two files of
//! [`assets`], built into the binary, and a strict Content-Security-Policy
//! forbids anything else. Pages of a run follow it live ([`live`]): one
//! watcher reads what the log gained, and each open page gets its part
//! re-rendered through server-sent events.
//!
//! This module presents state; it must not write any. It never prints
//! either: `cli::web` prints the URL and maps errors to exit codes.

pub mod access;
pub mod assets;
pub mod commit;
pub mod dag;
pub mod diff;
pub mod error;
pub mod href;
pub mod layout;
pub mod live;
pub mod plan;
pub mod reader;
pub mod run;
pub mod runs;
pub mod server;
pub mod task;
pub mod text;

pub use error::{PageError, WebError};
pub use server::Server;
