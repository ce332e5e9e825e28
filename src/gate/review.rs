//! The reviewer gate: another agent reads the diff and the subtask and
//! answers with a structured verdict.
//!
//! The reviewer writes JSON to the file named by `ORCH_REVIEW_FILE`:
//! `{"verdict": "pass" | "fail", "findings": [{"path", "line", "message"}]}`.
//! If it does not, the last JSON object with a `verdict` in its output
//! (or inside a Claude `result` line) is used; no verdict at all is an
//! `error`, never a pass. With independence on (the default), the reviewer
//! must be a different agent from the one that wrote the attempt.

use std::path::Path;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

use serde_json::{Value, json};

use super::stack::GateDef;
use crate::agent::AgentSpec;
use crate::event::{GateMode, GateStatus, Verdict};
use crate::process::GroupChild;

/// The largest verdict file read: the reviewer writes it, and a verdict
/// with its findings is a few kilobytes.
const REVIEW_FILE_MAX: u64 = 1 << 20;

/// Everything the reviewer is shown.
pub struct ReviewInput<'a> {
    pub spec: &'a AgentSpec,
    pub writer_agent: &'a str,
    pub independent: bool,
    pub task: &'a crate::plan::Subtask,
    /// The unified diff of the result, already masked.
    pub diff: &'a str,
    /// One line per verdict so far.
    pub gates_so_far: &'a [String],
    pub worktree: &'a Path,
    pub env: &'a [(String, String)],
    pub log_dir: &'a Path,
    pub attempt: u32,
    /// The sandbox the reviewer runs in (read-only on the repository).
    pub sandbox: &'a crate::sandbox::Sandbox,
    pub common_dir: &'a Path,
}

fn prompt(input: &ReviewInput) -> String {
    let t = input.task;
    format!(
        "You are reviewing a change another coding agent made for one subtask. Do not edit any file.\n\n\
         Subtask {id}: {title}\nDeliverable: {deliverable}\nOwned files: {globs}\nVerification: {verification}\n\n\
         Gates so far:\n{gates}\n\n\
         The change:\n```diff\n{diff}\n```\n\n\
         Decide whether the change delivers the subtask correctly and stays within it. Write your verdict as JSON \
         to the file named in the environment variable ORCH_REVIEW_FILE, exactly in this shape:\n\
         {{\"verdict\": \"pass\" or \"fail\", \"findings\": [{{\"path\": \"file\", \"line\": 1, \"message\": \"what is wrong\"}}]}}\n",
        id = t.id,
        title = t.title,
        deliverable = t.deliverable,
        globs = t.owned_globs.join(", "),
        verification = t.verification,
        gates = input.gates_so_far.join("\n"),
        diff = input.diff,
    )
}

/// Finds a verdict object in free text: the last JSON object with a
/// `verdict` key, looking inside Claude `result` strings too.
pub fn find_verdict(text: &str) -> Option<Value> {
    let mut found = None;
    for line in text.lines() {
        let line = line.trim();
        if !line.starts_with('{') {
            continue;
        }
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if v.get("verdict").is_some() {
            found = Some(v);
        } else if let Some(inner) = v.get("result").and_then(Value::as_str)
            && let Some(v) = find_embedded(inner)
        {
            found = Some(v);
        }
    }
    found
}

fn find_embedded(text: &str) -> Option<Value> {
    let start = text.find('{')?;
    let end = text.rfind('}')?;
    serde_json::from_str::<Value>(&text[start..=end])
        .ok()
        .filter(|v| v.get("verdict").is_some())
}

/// Runs the reviewer to a verdict.
pub async fn run(def: &GateDef, input: &ReviewInput<'_>, cancel: &CancellationToken) -> Verdict {
    let start = Instant::now();
    let base = Verdict {
        gate: def.name.clone(),
        mode: def.mode,
        status: GateStatus::Error,
        cached_pass: None,
        inputs: None,
        command: None,
        duration_ms: 0,
        summary: String::new(),
        tail: String::new(),
        details: Value::Null,
    };
    if input.independent && input.spec.name == input.writer_agent {
        return Verdict {
            summary: format!(
                "the reviewer {} also wrote this attempt; independent review needs another agent (or orch.reviewerIndependent=false)",
                input.spec.name
            ),
            ..base
        };
    }
    // The reviewer writes only its verdict, in a folder of its own.
    let review_dir = input.log_dir.join("review");
    let _ = std::fs::create_dir_all(&review_dir);
    let prompt_file = input.log_dir.join("review-prompt.md");
    let review_file = review_dir.join("review.json");
    let _ = std::fs::remove_file(&review_file);
    let text = prompt(input);
    if let Err(e) = std::fs::write(&prompt_file, &text) {
        return Verdict {
            summary: format!("could not write the review prompt: {e}"),
            ..base
        };
    }
    let mut env = input.env.to_vec();
    env.push((
        "ORCH_PROMPT_FILE".into(),
        prompt_file.to_string_lossy().into(),
    ));
    env.push((
        "ORCH_REVIEW_FILE".into(),
        review_file.to_string_lossy().into(),
    ));
    env.push(("ORCH_REVIEW".into(), "1".into()));
    let launch = crate::launch::agent(&crate::launch::AgentJob {
        spec: input.spec,
        sandbox: input.sandbox,
        prompt: &text,
        prompt_file: &prompt_file,
        worktree: input.worktree,
        common_dir: input.common_dir,
        readable: Vec::new(),
        log_dir: input.log_dir,
        log_name: "review",
        task: input.task.id.as_str(),
        attempt: input.attempt,
        env: &env,
        allowed_commands: Vec::new(),
        filter: super::masking::line_filter(),
        writable: vec![review_dir.clone()],
    });
    let spawned = launch.and_then(|l| Ok((GroupChild::spawn(&l.group)?, l)));
    let (mut child, launch) = match spawned {
        Ok(c) => c,
        Err(e) => {
            return Verdict {
                summary: format!("the reviewer could not start: {e}"),
                ..base
            };
        }
    };
    let ended = child
        .wait(
            tokio::time::Instant::now() + def.timeout,
            cancel,
            super::command::GRACE,
        )
        .await;
    let stdout = String::from_utf8_lossy(&crate::process::tail_bytes(
        &launch.group.stdout,
        crate::launch::OUTPUT_READ,
    ))
    .into_owned();
    let verdict = crate::process::read_written(&review_file, REVIEW_FILE_MAX)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .and_then(|t| {
            serde_json::from_str::<Value>(&t)
                .ok()
                .or_else(|| find_embedded(&t))
        })
        .or_else(|| find_verdict(&stdout));
    let duration_ms = start.elapsed().as_millis() as u64;
    let tail = super::command::tail_chars(&stdout, super::command::TAIL_BYTES);
    let Some(v) = verdict else {
        return Verdict {
            duration_ms,
            tail,
            summary: if ended.timed_out {
                "the reviewer timed out without a verdict".into()
            } else {
                "the reviewer gave no verdict (expected JSON with \"verdict\")".into()
            },
            ..base
        };
    };
    let findings = v.get("findings").cloned().unwrap_or_else(|| json!([]));
    let n = findings.as_array().map_or(0, Vec::len);
    let (status, summary) = match v.get("verdict").and_then(Value::as_str) {
        Some("pass") => (
            GateStatus::Pass,
            format!("{} approves ({n} finding(s))", input.spec.name),
        ),
        Some("fail") => (
            if def.mode == GateMode::Warn {
                GateStatus::Warn
            } else {
                GateStatus::Fail
            },
            format!("{} rejects with {n} finding(s)", input.spec.name),
        ),
        other => (
            GateStatus::Error,
            format!("the reviewer's verdict {other:?} is neither pass nor fail"),
        ),
    };
    Verdict {
        status,
        duration_ms,
        summary,
        tail,
        details: json!({ "reviewer": input.spec.name, "findings": findings }),
        ..base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_verdicts_in_plain_and_claude_output() {
        let plain = "thinking\n{\"verdict\": \"fail\", \"findings\": []}\n";
        assert_eq!(find_verdict(plain).expect("found")["verdict"], "fail");
        let claude =
            r#"{"type":"result","result":"Done. {\"verdict\": \"pass\", \"findings\": []}"}"#;
        assert_eq!(find_verdict(claude).expect("found")["verdict"], "pass");
        assert!(find_verdict("no json here").is_none());
    }
}
