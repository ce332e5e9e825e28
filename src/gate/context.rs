//! The retry context: what the next attempt is told about the last one's
//! failure, structured, never a story.
//!
//! It is written as JSON to a file the agent can read
//! (`ORCH_RETRY_CONTEXT_FILE`) and rendered into the prompt. Everything in
//! it comes from verdicts, whose text is already masked; secret findings
//! carry locations and kinds, never the secret.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::{Failure, Verdict};

/// One failure the next attempt must fix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextFailure {
    pub gate: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub summary: String,
    /// Masked tail of the gate's output.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tail: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing_tests: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub out_of_scope_paths: Vec<String>,
    /// `path:line (kind)` of each secret, without the secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// Conflicting files, for integration failures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<String>,
    /// Reviewer findings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Value>,
}

/// The whole context handed to a retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryContext {
    pub version: u32,
    pub task: String,
    /// The attempt that failed.
    pub attempt: u32,
    /// Its failure class and reason.
    pub failure: Failure,
    pub failures: Vec<ContextFailure>,
    /// What that attempt changed, so the next one does not start blind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<PreviousWork>,
}

/// The previous attempt's work as the next one sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviousWork {
    /// Its base and result commits.
    pub base: String,
    pub commit: String,
    /// Whether the next attempt's worktree starts from that result (a
    /// content failure) or from the base (scope or secrets: start clean).
    pub continued: bool,
    /// Its diff (masked, at most [`PREVIOUS_DIFF_BYTES`]); empty until the
    /// attempt that reads it fills it in.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub diff: String,
}

/// How much of the previous attempt's diff a retry is shown.
pub const PREVIOUS_DIFF_BYTES: usize = 24 * 1024;

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

impl ContextFailure {
    /// The context entry for a failed verdict.
    pub fn from_verdict(v: &Verdict) -> Self {
        let secrets = v
            .details
            .get("secrets")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|s| {
                        format!(
                            "{}:{} ({})",
                            s["path"].as_str().unwrap_or("?"),
                            s["line"],
                            s["kind"].as_str().unwrap_or("secret")
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        Self {
            gate: v.gate.clone(),
            command: v.command.clone(),
            summary: v.summary.clone(),
            tail: v.tail.clone(),
            failing_tests: strings(&v.details, "failing_tests"),
            out_of_scope_paths: strings(&v.details, "out_of_scope"),
            secrets,
            conflicts: strings(&v.details, "conflicts"),
            findings: v
                .details
                .get("findings")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        }
    }
}

impl RetryContext {
    /// The context for a failed attempt: its blocking verdicts, or, when
    /// no gate failed (the agent crashed, timed out, changed nothing), the
    /// failure itself.
    pub fn new(task: &str, attempt: u32, failure: &Failure, verdicts: &[Verdict]) -> Self {
        let mut failures: Vec<ContextFailure> = verdicts
            .iter()
            .filter(|v| v.blocks())
            .map(ContextFailure::from_verdict)
            .collect();
        if failures.is_empty() {
            failures.push(ContextFailure {
                gate: failure.class.as_str().into(),
                command: None,
                summary: failure.reason.clone(),
                tail: String::new(),
                failing_tests: Vec::new(),
                out_of_scope_paths: Vec::new(),
                secrets: Vec::new(),
                conflicts: Vec::new(),
                findings: Vec::new(),
            });
        }
        Self {
            version: 1,
            task: task.to_owned(),
            attempt,
            failure: failure.clone(),
            failures,
            previous: None,
        }
    }

    /// The section of the next prompt that explains what went wrong.
    pub fn render(&self) -> String {
        let mut s = format!(
            "## Your previous attempt (attempt {}) failed: {}\n\nFix these problems; the same gates will check your result again.\n",
            self.attempt, self.failure.reason
        );
        for f in &self.failures {
            s.push_str(&format!("\n### Gate `{}`: {}\n", f.gate, f.summary));
            if let Some(c) = &f.command {
                s.push_str(&format!("Command: `{c}`\n"));
            }
            if !f.failing_tests.is_empty() {
                s.push_str(&format!("Failing tests: {}\n", f.failing_tests.join(", ")));
            }
            if !f.out_of_scope_paths.is_empty() {
                s.push_str(&format!(
                    "Files you changed outside the files you own (undo these changes): {}\n",
                    f.out_of_scope_paths.join(", ")
                ));
            }
            if !f.secrets.is_empty() {
                s.push_str(&format!(
                    "Secrets you added (remove them; read them from the environment instead): {}\n",
                    f.secrets.join(", ")
                ));
            }
            if !f.conflicts.is_empty() {
                s.push_str(&format!(
                    "Files that conflict with the current target: {}\n",
                    f.conflicts.join(", ")
                ));
            }
            for finding in &f.findings {
                s.push_str(&format!("Reviewer: {finding}\n"));
            }
            if !f.tail.is_empty() {
                s.push_str(&format!(
                    "Output (last lines):\n```\n{}\n```\n",
                    f.tail.trim_end()
                ));
            }
        }
        if let Some(p) = &self.previous {
            if p.continued {
                s.push_str(&format!(
                    "\n## Your worktree starts from that attempt's result\n\nIts changes are already here (commit {}); fix what failed rather than starting over.\n",
                    &p.commit[..12.min(p.commit.len())]
                ));
            } else {
                s.push_str("\n## Your worktree starts clean\n\nThat attempt's changes are not here; its diff is below for reference. Do not repeat what failed.\n");
            }
            if !p.diff.is_empty() {
                s.push_str(&format!(
                    "\nThe previous attempt's diff:\n```diff\n{}\n```\n",
                    p.diff.trim_end()
                ));
            }
        }
        s
    }
}
