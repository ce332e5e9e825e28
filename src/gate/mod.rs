//! Content gates: checks a change must pass before it may merge.
//!
//! This module so far holds only the pure scanners the gates are built on:
//! `diffscan` turns two versions of a file into the lines a change added,
//! and `secrets` and `placeholders` look for what must not be added. They do
//! no I/O, touch no git objects and print nothing; reading blobs belongs to
//! `store`, deciding a verdict to the gate stack, showing it to `cli`.

pub mod diffscan;
pub mod placeholders;
pub mod secrets;
