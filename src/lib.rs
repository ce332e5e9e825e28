//! git-orch: a Git-native orchestrator for parallel coding agents.
//!
//! Layers, each using only those below it (see ARCHITECTURE.md):
//! `process`, `ids`, `oid`, `event` → `store` (the only user of gix) → domain
//! modules → `cli` (the only code that prints).

pub mod agent;
pub mod approval;
pub mod cli;
pub mod clock;
pub mod config;
pub mod demo;
pub mod event;
pub mod failpoint;
pub mod fsck;
pub mod gate;
pub mod hooks;
pub mod ids;
pub mod launch;
pub mod lead;
pub mod merge;
pub mod oid;
pub mod plan;
pub mod preflight;
pub mod process;
pub mod run;
pub mod sandbox;
pub mod state;
pub mod store;
pub mod web;
pub mod worker;
