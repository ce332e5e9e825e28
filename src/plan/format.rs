//! The plan format: parsing, validation and canonical bytes.
//!
//! A plan arrives as JSON written by a person or a lead agent, so parsing is
//! strict: unknown fields are errors (with the closest known field as a
//! hint), ids must be kebab-case, globs must compile and stay inside the
//! repository, and sizes are bounded. A plan that parses is *valid*; whether
//! it is *safe to fan out* is the analysis' business ([`super::analysis`]).
//!
//! What is stored and hashed are the canonical bytes: the typed plan
//! serialised with sorted keys, no insignificant whitespace, defaults left
//! out, strings in Unicode NFC with `\n` line ends. Two files that mean the
//! same plan therefore hash the same, and one changed byte of meaning
//! changes the hash. The rule and a test vector are in docs/state-format.md.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use unicode_normalization::UnicodeNormalization;

use crate::ids::{PlanId, TaskId};

/// The plan format version this build reads and writes.
pub const PLAN_VERSION: u32 = 1;
/// Largest plan file accepted, in bytes.
pub const MAX_PLAN_BYTES: usize = 2 * 1024 * 1024;
/// Most subtasks in one plan.
pub const MAX_SUBTASKS: usize = 5_000;
/// Most globs one subtask may own.
pub const MAX_GLOBS: usize = 1_000;
/// Longest single string field (instruction, deliverable, command…).
pub const MAX_TEXT: usize = 64 * 1024;

pub use crate::event::GateMode;

/// A gate setting in a plan: overrides `[gate "NAME"]` of `.orch/config`
/// for the whole plan or one subtask, so what gates a result is part of
/// what was approved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateSetting {
    /// The command to run (for command gates).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<GateMode>,
    /// Seconds before the gate command is stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<u64>,
}

/// One piece of work with sole ownership of a set of files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Subtask {
    pub id: TaskId,
    pub title: String,
    /// Globs (relative to the repository root) of the files this subtask is
    /// the sole writer of.
    pub owned_globs: Vec<String>,
    pub deliverable: String,
    /// A command whose success proves the subtask done.
    pub verification: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<TaskId>,
    /// Must not run beside any other subtask.
    #[serde(default, skip_serializing_if = "is_false")]
    pub serial_only: bool,
    /// Branch name prefix for this subtask's attempts, if not the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// Agent to use for this subtask (a name from `[agent "NAME"]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// Best of N: agents that each make an attempt at once, one per name
    /// (a name may repeat); the gates, then a reviewer, then the smaller
    /// diff choose the one that lands.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<String>,
    /// Retry budget for this subtask (default from config, 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retries: Option<u32>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gates: BTreeMap<String, GateSetting>,
}

/// The most candidates one best-of-N round runs at once.
pub const MAX_CANDIDATES: usize = 8;

/// A plan: one instruction split into subtasks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub version: u32,
    pub id: PlanId,
    pub instruction: String,
    /// The branch results land on (default: the run's `--target` or
    /// `orch.target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    pub subtasks: Vec<Subtask>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gates: BTreeMap<String, GateSetting>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Plan {
    /// The subtask with `id`.
    pub fn subtask(&self, id: &str) -> Option<&Subtask> {
        self.subtasks.iter().find(|s| s.id.as_str() == id)
    }
}

/// Why a plan is not valid: one variant per situation, each naming the
/// field at fault. What to do about it is the CLI's hint (`cli::error`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the plan is {size} bytes; the limit is {MAX_PLAN_BYTES}")]
    TooLarge { size: usize },
    #[error("the plan is not UTF-8 text (invalid byte at offset {offset})")]
    NotUtf8 { offset: usize },
    #[error("the plan is not valid JSON: {message} at line {line}, column {column}")]
    Syntax {
        message: String,
        line: usize,
        column: usize,
    },
    /// Valid JSON of the wrong shape: a missing or unknown field, a value
    /// of the wrong type.
    #[error("{message} at line {line}, column {column}")]
    Shape {
        message: String,
        line: usize,
        column: usize,
        /// The field the format does not know, if that is the problem.
        unknown_field: Option<String>,
        /// The known field it is closest to, if one is close.
        suggestion: Option<&'static str>,
    },
    #[error("plan version {found} is not supported; this git-orch reads version {PLAN_VERSION}")]
    UnsupportedVersion { found: u32 },
    #[error("{what} is {size} bytes; the limit is {MAX_TEXT}")]
    TextTooLong { what: String, size: usize },
    #[error("{what} contains the control character {character:?}; remove it")]
    ControlCharacter { what: String, character: char },
    #[error("the instruction is empty; say what the plan is for")]
    EmptyInstruction,
    /// `target`, or a subtask's `branch`, is no valid branch name.
    #[error("{what}: {source}")]
    BadBranch {
        what: String,
        #[source]
        source: BranchNameError,
    },
    #[error("the plan has no subtasks; add at least one")]
    NoSubtasks,
    #[error("the plan has {count} subtasks; the limit is {MAX_SUBTASKS}")]
    TooManySubtasks { count: usize },
    #[error("subtask id {id} appears more than once; ids must be unique")]
    DuplicateId { id: String },
    #[error("subtask {id}: the title is empty")]
    EmptyTitle { id: String },
    #[error("subtask {id}: owned_globs is empty; a subtask must own the files it may change")]
    NoOwnedGlobs { id: String },
    #[error("subtask {id}: {count} owned globs; the limit is {MAX_GLOBS}")]
    TooManyGlobs { id: String, count: usize },
    /// One `owned_globs` entry cannot be used.
    #[error("subtask {task}: owned glob {entry:?} {why}")]
    BadGlob {
        task: String,
        entry: String,
        why: String,
    },
    /// The subtask's globs together own nothing.
    #[error("subtask {id}: {source}")]
    BadOwnership {
        id: String,
        #[source]
        source: super::glob::OwnershipError,
    },
    /// An agent or gate name that cannot be an id.
    #[error("{what}: {source}")]
    BadName {
        what: String,
        #[source]
        source: crate::ids::IdError,
    },
    #[error("subtask {id}: {count} candidates; at most {MAX_CANDIDATES} run at once")]
    TooManyCandidates { id: String, count: usize },
}

impl PlanError {
    /// The known field an unknown one is closest to ("did you mean"), for
    /// whoever tells the writer of the plan.
    pub fn suggestion(&self) -> Option<&'static str> {
        match self {
            PlanError::Shape { suggestion, .. } => *suggestion,
            _ => None,
        }
    }
}

/// A name git would not take as a branch (`git check-ref-format --branch`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?} is not a valid branch name (see `git check-ref-format --branch`)")]
pub struct BranchNameError {
    pub name: String,
}

/// Field names the format knows, for "did you mean" hints.
const KNOWN_FIELDS: &[&str] = &[
    "version",
    "id",
    "instruction",
    "target",
    "subtasks",
    "gates",
    "title",
    "owned_globs",
    "deliverable",
    "verification",
    "depends_on",
    "serial_only",
    "branch",
    "agent",
    "candidates",
    "retries",
    "run",
    "mode",
    "timeout",
];

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The field serde says is unknown, and the known field closest to it.
fn unknown_field(message: &str) -> (Option<String>, Option<&'static str>) {
    let Some(rest) = message.strip_prefix("unknown field `") else {
        return (None, None);
    };
    let field = rest.split('`').next().unwrap_or_default();
    let best = KNOWN_FIELDS
        .iter()
        .map(|k| (edit_distance(field, k), *k))
        .min()
        .filter(|(d, _)| *d <= 3)
        .map(|(_, k)| k);
    (Some(field.to_owned()), best)
}

/// Parses and validates plan JSON.
pub fn parse(bytes: &[u8]) -> Result<Plan, PlanError> {
    if bytes.len() > MAX_PLAN_BYTES {
        return Err(PlanError::TooLarge { size: bytes.len() });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| PlanError::NotUtf8 {
        offset: e.valid_up_to(),
    })?;
    // Syntax first, so a broken file is reported as such and not as a
    // missing field.
    if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
        return Err(PlanError::Syntax {
            message: strip_position(&e.to_string()),
            line: e.line(),
            column: e.column(),
        });
    }
    let plan: Plan = serde_json::from_str(text).map_err(|e| {
        let message = strip_position(&e.to_string());
        let (unknown_field, suggestion) = unknown_field(&message);
        PlanError::Shape {
            unknown_field,
            suggestion,
            message: match failing_subtask(text) {
                Some(which) => format!("{which}: {message}"),
                None => message,
            },
            line: e.line(),
            column: e.column(),
        }
    })?;
    validate(&plan)?;
    Ok(plan)
}

/// The subtask a shape error is in, as a person would name it (`subtask
/// lint`, or `subtask 3` when it has no usable id): serde's "missing
/// field `verification`" points at the end of the object, not at which.
fn failing_subtask(text: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    let subtasks = value.get("subtasks")?.as_array()?;
    subtasks.iter().enumerate().find_map(|(i, sub)| {
        serde_json::from_value::<Subtask>(sub.clone()).err()?;
        Some(match sub.get("id").and_then(|id| id.as_str()) {
            Some(id)
                if !id.is_empty()
                    && id.len() <= 64
                    && id
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')) =>
            {
                format!("subtask {id}")
            }
            _ => format!("subtask {}", i + 1),
        })
    })
}

/// serde_json appends " at line L column C"; the error carries them apart.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

fn check_text(what: &str, value: &str) -> Result<(), PlanError> {
    if value.len() > MAX_TEXT {
        return Err(PlanError::TextTooLong {
            what: what.to_owned(),
            size: value.len(),
        });
    }
    if let Some(c) = value
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
    {
        return Err(PlanError::ControlCharacter {
            what: what.to_owned(),
            character: c,
        });
    }
    Ok(())
}

/// Checks a branch name with git's rules (`git check-ref-format --branch`),
/// without asking git: the plan layer does no I/O.
pub fn check_branch_name(name: &str) -> Result<(), BranchNameError> {
    let bad = name.is_empty()
        || name.starts_with('-')
        || name.starts_with('/')
        || name.ends_with('/')
        || name.ends_with('.')
        || name.ends_with(".lock")
        || name.contains("..")
        || name.contains("//")
        || name.contains("@{")
        || name == "@"
        || name
            .split('/')
            .any(|c| c.starts_with('.') || c.ends_with(".lock"))
        || name
            .chars()
            .any(|c| c.is_control() || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\'));
    if bad {
        return Err(BranchNameError {
            name: name.to_owned(),
        });
    }
    Ok(())
}

/// Checks one `owned_globs` entry: relative, inside the repository,
/// compilable; `!glob` is an exclusion, checked the same way.
pub fn check_glob(task: &str, entry: &str) -> Result<(), PlanError> {
    let fail = |why: &str| {
        Err(PlanError::BadGlob {
            task: task.to_owned(),
            entry: entry.to_owned(),
            why: why.to_owned(),
        })
    };
    let (excluded, glob) = super::glob::split_exclusion(entry);
    if excluded && glob.is_empty() {
        return fail(&super::glob::GlobError::EmptyExclusion.to_string());
    }
    if excluded && glob.starts_with('!') {
        return fail(&super::glob::GlobError::DoubleExclusion.to_string());
    }
    if glob.trim().is_empty() {
        return fail("is empty");
    }
    if glob.starts_with('/') {
        return fail(
            "is absolute; globs are relative to the repository root (drop the leading '/')",
        );
    }
    if glob.starts_with("./") {
        return fail("starts with './'; write it relative to the root without './'");
    }
    if glob.split('/').any(|c| c == ".." || c == ".") {
        return fail("has a '.' or '..' component; globs must stay inside the repository");
    }
    // A backslash only escapes glob syntax; anywhere else it is a Windows
    // separator that would never match.
    let mut chars = glob.chars();
    while let Some(c) = chars.next() {
        if c == '\\'
            && !matches!(
                chars.next(),
                Some('[' | ']' | '{' | '}' | '*' | '?' | '!' | ',')
            )
        {
            return fail(
                "contains '\\'; use '/' as the path separator ('\\' only escapes one of []{}*?!,)",
            );
        }
    }
    if glob.split('/').any(|c| c == ".git") {
        return fail("reaches into .git; git-orch never lets agents own repository internals");
    }
    if glob.chars().any(char::is_control) {
        return fail("contains a control character");
    }
    if let Err(e) = super::glob::check(glob) {
        return fail(&e.to_string());
    }
    Ok(())
}

/// The semantic checks that do not need the repository.
pub fn validate(plan: &Plan) -> Result<(), PlanError> {
    if plan.version != PLAN_VERSION {
        return Err(PlanError::UnsupportedVersion {
            found: plan.version,
        });
    }
    check_text("instruction", &plan.instruction)?;
    if plan.instruction.trim().is_empty() {
        return Err(PlanError::EmptyInstruction);
    }
    if let Some(t) = &plan.target {
        check_branch_name(t).map_err(|source| PlanError::BadBranch {
            what: "target".into(),
            source,
        })?;
    }
    if plan.subtasks.is_empty() {
        return Err(PlanError::NoSubtasks);
    }
    if plan.subtasks.len() > MAX_SUBTASKS {
        return Err(PlanError::TooManySubtasks {
            count: plan.subtasks.len(),
        });
    }
    let mut seen = BTreeSet::new();
    for s in &plan.subtasks {
        let id = s.id.as_str();
        if !seen.insert(id) {
            return Err(PlanError::DuplicateId { id: id.to_owned() });
        }
        check_text(&format!("subtask {id}: title"), &s.title)?;
        check_text(&format!("subtask {id}: deliverable"), &s.deliverable)?;
        check_text(&format!("subtask {id}: verification"), &s.verification)?;
        if s.title.trim().is_empty() {
            return Err(PlanError::EmptyTitle { id: id.to_owned() });
        }
        if s.owned_globs.is_empty() {
            return Err(PlanError::NoOwnedGlobs { id: id.to_owned() });
        }
        if s.owned_globs.len() > MAX_GLOBS {
            return Err(PlanError::TooManyGlobs {
                id: id.to_owned(),
                count: s.owned_globs.len(),
            });
        }
        for g in &s.owned_globs {
            check_glob(id, g)?;
        }
        if let Err(source) = super::glob::Ownership::new(&s.owned_globs) {
            return Err(PlanError::BadOwnership {
                id: id.to_owned(),
                source,
            });
        }
        if let Some(b) = &s.branch {
            check_branch_name(b).map_err(|source| PlanError::BadBranch {
                what: format!("subtask {id}: branch"),
                source,
            })?;
        }
        if let Some(a) = &s.agent {
            crate::ids::check("agent", a).map_err(|source| PlanError::BadName {
                what: format!("subtask {id}"),
                source,
            })?;
        }
        if s.candidates.len() > MAX_CANDIDATES {
            return Err(PlanError::TooManyCandidates {
                id: id.to_owned(),
                count: s.candidates.len(),
            });
        }
        for a in &s.candidates {
            crate::ids::check("agent", a).map_err(|source| PlanError::BadName {
                what: format!("subtask {id}: candidates"),
                source,
            })?;
        }
        for (name, gate) in &s.gates {
            check_gate(&format!("subtask {id}: gate {name:?}"), name, gate)?;
        }
    }
    for (name, gate) in &plan.gates {
        check_gate(&format!("gate {name:?}"), name, gate)?;
    }
    Ok(())
}

fn check_gate(what: &str, name: &str, gate: &GateSetting) -> Result<(), PlanError> {
    crate::ids::check("gate", name).map_err(|source| PlanError::BadName {
        what: what.to_owned(),
        source,
    })?;
    if let Some(run) = &gate.run {
        check_text(what, run)?;
    }
    Ok(())
}

/// Normalises a string for the canonical form: NFC, `\n` line ends.
fn normalise(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n").nfc().collect()
}

/// The canonical bytes of a plan: what is stored and hashed.
pub fn canonical_bytes(plan: &Plan) -> Vec<u8> {
    let value = serde_json::to_value(plan).expect("plans always serialise");
    let value = normalise_value(value);
    serde_json::to_vec(&value).expect("values always serialise")
}

fn normalise_value(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(normalise(&s)),
        Value::Array(a) => Value::Array(a.into_iter().map(normalise_value).collect()),
        Value::Object(o) => {
            // Sort explicitly: serde_json keeps insertion order if any crate
            // in the build enables its `preserve_order` feature.
            let sorted: std::collections::BTreeMap<String, Value> = o
                .into_iter()
                .map(|(k, v)| (normalise(&k), normalise_value(v)))
                .collect();
            Value::Object(sorted.into_iter().collect())
        }
        other => other,
    }
}

/// The content hash of canonical bytes: `blake3:<64 hex digits>`.
pub fn hash_bytes(canonical: &[u8]) -> String {
    format!("blake3:{}", blake3::hash(canonical).to_hex())
}

/// The content hash of a plan.
pub fn plan_hash(plan: &Plan) -> String {
    hash_bytes(&canonical_bytes(plan))
}

/// Pretty JSON of the canonical form, for `show` and `diff`.
pub fn pretty(plan: &Plan) -> String {
    let value: serde_json::Value =
        serde_json::from_slice(&canonical_bytes(plan)).expect("canonical bytes are JSON");
    serde_json::to_string_pretty(&value).expect("values always serialise")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> String {
        r#"{"version":1,"id":"p","instruction":"do it","subtasks":[
            {"id":"a","title":"A","owned_globs":["src/a/**"],"deliverable":"a","verification":"make a"}]}"#
            .into()
    }

    #[test]
    fn parses_a_minimal_plan() {
        let p = parse(minimal().as_bytes()).expect("valid");
        assert_eq!(p.subtasks[0].id.as_str(), "a");
    }

    #[test]
    fn syntax_errors_give_line_and_column() {
        let err = parse(b"{\n  \"version\": 1,\n  \"id\": \n}").expect_err("broken");
        match err {
            PlanError::Syntax { line, column, .. } => {
                assert_eq!(line, 4);
                assert_eq!(column, 1);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_field_names_its_subtask() {
        let two = minimal().replace(
            "]}",
            r#",{"id":"lint","title":"L","owned_globs":["l/**"],"deliverable":"l"}]}"#,
        );
        let err = parse(two.as_bytes()).expect_err("missing").to_string();
        assert!(
            err.starts_with("subtask lint: missing field `verification`"),
            "{err}"
        );
        // An id that is no id is named by position, never printed.
        let hostile = two.replace("\"lint\"", "\"\\u001b[2Jx\"");
        let err = parse(hostile.as_bytes()).expect_err("missing").to_string();
        assert!(err.starts_with("subtask 2: "), "{err}");
        assert!(!err.contains('\u{1b}'), "{err}");
    }

    #[test]
    fn unknown_fields_are_errors_with_a_suggestion() {
        let text = minimal().replace("\"owned_globs\"", "\"owned_glob\"");
        let err = parse(text.as_bytes()).expect_err("unknown field");
        assert!(
            err.to_string().contains("unknown field `owned_glob`"),
            "{err}"
        );
        assert_eq!(err.suggestion(), Some("owned_globs"), "{err}");
    }

    #[test]
    fn hostile_ids_are_refused_naming_the_rule() {
        for bad in [
            "../x",
            "a/b",
            "has space",
            "Upper",
            "tab\\tx",
            "a..b",
            "x.lock",
            "-x",
        ] {
            let text = minimal().replace("\"id\":\"a\"", &format!("\"id\":\"{bad}\""));
            let err = parse(text.as_bytes()).expect_err(bad).to_string();
            assert!(err.contains("task id"), "{bad}: {err}");
        }
    }

    #[test]
    fn invalid_globs_name_the_glob() {
        for bad in [
            "src/[a",
            "/abs/**",
            "../up/**",
            "src/../x",
            "./src/**",
            ".git/config",
            "a{b",
            "!",
            "!!src/**",
            "!/abs/**",
            "!../up/**",
            "!.git/**",
            "!src/[a",
        ] {
            let text = minimal().replace("src/a/**", bad);
            let err = parse(text.as_bytes()).expect_err(bad).to_string();
            assert!(err.contains(&format!("{bad:?}")), "{bad}: {err}");
        }
    }

    #[test]
    fn exclusions_need_something_to_exclude_from() {
        let only = minimal().replace("[\"src/a/**\"]", "[\"!src/a/**\"]");
        let err = parse(only.as_bytes())
            .expect_err("only exclusions")
            .to_string();
        assert!(err.contains("only exclusions"), "{err}");
        let ok = minimal().replace("[\"src/a/**\"]", "[\"!src/a/gen/**\", \"src/a/**\"]");
        let plan = parse(ok.as_bytes()).expect("exclusion after a glob");
        assert_eq!(plan.subtasks[0].owned_globs, ["!src/a/gen/**", "src/a/**"]);
        let escaped = minimal().replace("[\"src/a/**\"]", r#"["src/\\!a.md"]"#);
        parse(escaped.as_bytes()).expect("an escaped ! is a file name");
        for bad in [r"src\x", r"!src\x", r"src\"] {
            let globs = serde_json::to_string(&[bad]).expect("json");
            let text = minimal().replace("[\"src/a/**\"]", &globs);
            let err = parse(text.as_bytes()).expect_err(bad).to_string();
            assert!(
                err.contains("use '/' as the path separator"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn duplicates_empty_and_huge_are_refused() {
        let dup = minimal().replace(
            "]}",
            r#",{"id":"a","title":"B","owned_globs":["b/**"],"deliverable":"b","verification":"make b"}]}"#,
        );
        assert!(
            parse(dup.as_bytes())
                .expect_err("dup")
                .to_string()
                .contains("more than once")
        );
        let empty = r#"{"version":1,"id":"p","instruction":"x","subtasks":[]}"#;
        assert!(
            parse(empty.as_bytes())
                .expect_err("empty")
                .to_string()
                .contains("no subtasks")
        );
        let huge = vec![b' '; MAX_PLAN_BYTES + 1];
        assert!(matches!(parse(&huge), Err(PlanError::TooLarge { .. })));
        let no_globs = minimal().replace("[\"src/a/**\"]", "[]");
        assert!(parse(no_globs.as_bytes()).is_err());
    }

    #[test]
    fn canonical_bytes_ignore_layout_and_defaults() {
        let a = parse(minimal().as_bytes()).expect("valid");
        let spaced = r#"{
          "subtasks": [ { "verification": "make a", "deliverable": "a",
                          "owned_globs": ["src/a/**"], "title": "A", "id": "a",
                          "serial_only": false, "depends_on": [] } ],
          "instruction": "do it", "id": "p", "version": 1 }"#;
        let b = parse(spaced.as_bytes()).expect("valid");
        assert_eq!(canonical_bytes(&a), canonical_bytes(&b));
        assert_eq!(plan_hash(&a), plan_hash(&b));
        let mut c = a.clone();
        c.subtasks[0].title = "A.".into();
        assert_ne!(plan_hash(&a), plan_hash(&c));
    }

    #[test]
    fn canonical_strings_are_nfc_with_unix_newlines() {
        let decomposed = minimal().replace("do it", "cafe\u{301}\\r\\nline");
        let composed = minimal().replace("do it", "caf\u{e9}\\nline");
        let a = parse(decomposed.as_bytes()).expect("valid");
        let b = parse(composed.as_bytes()).expect("valid");
        assert_eq!(canonical_bytes(&a), canonical_bytes(&b));
    }

    /// The test vector of docs/state-format.md: if this changes, every
    /// stored plan hash changes, and the doc must say so.
    const VECTOR_INPUT: &str = r#"{
  "version": 1,
  "id": "demo",
  "instruction": "Cafe\u0301 menu\r\nand prices",
  "subtasks": [
    {
      "id": "menu",
      "title": "Menu page",
      "owned_globs": ["web/menu/**"],
      "deliverable": "A menu page",
      "verification": "npm test -- menu",
      "serial_only": false,
      "depends_on": []
    }
  ]
}"#;
    const VECTOR_CANONICAL: &str = r#"{"id":"demo","instruction":"Café menu\nand prices","subtasks":[{"deliverable":"A menu page","id":"menu","owned_globs":["web/menu/**"],"title":"Menu page","verification":"npm test -- menu"}],"version":1}"#;

    #[test]
    fn the_documented_test_vector_holds() {
        let plan = parse(VECTOR_INPUT.as_bytes()).expect("vector parses");
        let bytes = canonical_bytes(&plan);
        assert_eq!(
            String::from_utf8(bytes.clone()).expect("utf8"),
            VECTOR_CANONICAL
        );
        let hash = hash_bytes(&bytes);
        let doc = include_str!("../../docs/state-format.md");
        assert!(
            doc.contains(VECTOR_INPUT),
            "docs/state-format.md lacks the vector input"
        );
        assert!(
            doc.contains(VECTOR_CANONICAL),
            "docs/state-format.md lacks the canonical bytes"
        );
        assert!(
            doc.contains(&hash),
            "docs/state-format.md lacks the hash {hash}"
        );
    }

    #[test]
    fn branch_names_follow_git_rules() {
        for ok in ["main", "feature/x", "release-1.2"] {
            assert!(check_branch_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-x",
            "a..b",
            "a b",
            "a~1",
            "x.lock",
            "a/.hidden",
            "a//b",
            "a@{1}",
            "a:b",
        ] {
            assert!(check_branch_name(bad).is_err(), "{bad}");
        }
    }
}
