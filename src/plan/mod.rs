//! Plans: the format, the analysis that proves a plan safe to fan out, and
//! the plan refs that hold every revision.
//!
//! `format` parses and canonicalises; `glob` (owned globs with `!`
//! exclusions, one matcher for every user of the rule), `automaton` (exact
//! overlap decisions) and `pinch` (pinch points, manifests and their
//! lockfiles) hold the ownership semantics; `analysis` is pure; `brief` is
//! the text a lead agent writes a plan from; `revisions` is the only part
//! that touches the store (`refs/orch/plans/<id>`).

pub mod analysis;
pub mod automaton;
pub mod brief;
pub mod control;
pub mod format;
pub mod glob;
pub mod pinch;
pub mod revisions;
pub mod schema;

pub use analysis::{Analysis, Finding, Severity, analyse};
pub use format::{Plan, PlanError, Subtask, canonical_bytes, parse, plan_hash};
pub use revisions::PlanRevision;
