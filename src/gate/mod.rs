//! Gates: deciding from the repository itself whether an attempt's result
//! may go on to the merge queue.
//!
//! The scanners (`diffscan`, `secrets`, `placeholders`) are pure. `stack`
//! turns configuration and the approved plan into the list of gates for one
//! subtask; `builtin` evaluates the diff-based gates from git trees;
//! `command` runs command gates (build, test, lint, the verification) in the
//! attempt's worktree; `review` asks an agent for a structured verdict;
//! `context` turns failures into the retry context the next attempt reads;
//! `evaluate` runs a whole stack with the verdict cache, whose key
//! `inputs` defines beyond the tree and the command.

pub mod builtin;
pub mod command;
pub mod context;
pub mod diffscan;
pub mod evaluate;
pub mod inputs;
pub mod masking;
pub mod placeholders;
pub mod review;
pub mod secrets;
pub mod stack;
pub mod tests_output;

pub use evaluate::{StackOutcome, Subject, evaluate};
pub use inputs::GateEnv;
pub use stack::{GateDef, GateKind, stack};
