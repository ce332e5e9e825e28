//! The one place that says what a gate is given: the subject and the
//! environment of an attempt's gates, whether its run judges it or a
//! person gates it again by hand (`git orch gate`), so that a verdict
//! recorded by one means what the other's would, and the cache may reuse
//! it.
//!
//! The environment is also what the attempt's setup command and agent get
//! ([`AttemptEnv`]); `gate::evaluate` runs what is built here.

use std::path::Path;

use crate::config::Settings;
use crate::gate::Subject;
use crate::ids::{PlanId, RunId};
use crate::plan::Subtask;
use crate::store::{CommitStep, Oid, Store, StoreError};

use super::workspace::{AttemptPaths, gate_scratch};

/// Who an attempt is, for the environment of every process it runs
/// (setup, agent, gates; `git orch gate` too, so a verdict it records
/// means what the run's would).
pub struct AttemptEnv<'a> {
    pub run: &'a RunId,
    pub plan: &'a PlanId,
    pub task: &'a Subtask,
    pub n: u32,
    pub base: Oid,
    pub port: u16,
    /// The agent's name, and what its section sets in the environment.
    pub agent: &'a str,
    pub agent_env: &'a [(String, String)],
    pub paths: &'a AttemptPaths,
    /// Whether it was given a retry context.
    pub retry: bool,
}

impl AttemptEnv<'_> {
    /// The `ORCH_*` variables and `PORT`.
    pub fn vars(&self) -> Vec<(String, String)> {
        let mut env = vec![
            ("ORCH_RUN".into(), self.run.to_string()),
            ("ORCH_PLAN".into(), self.plan.to_string()),
            ("ORCH_TASK".into(), self.task.id.to_string()),
            ("ORCH_ATTEMPT".into(), self.n.to_string()),
            ("ORCH_OWNED_GLOBS".into(), self.task.owned_globs.join("\n")),
            ("ORCH_BASE".into(), self.base.to_string()),
            ("ORCH_PORT".into(), self.port.to_string()),
            ("ORCH_AGENT".into(), self.agent.to_owned()),
            (
                "ORCH_PROMPT_FILE".into(),
                self.paths.prompt.to_string_lossy().into_owned(),
            ),
        ];
        // An explicit PORT wins over the attempt's block.
        let explicit_port =
            std::env::var_os("PORT").is_some() || self.agent_env.iter().any(|(k, _)| k == "PORT");
        if !explicit_port {
            env.push(("PORT".into(), self.port.to_string()));
        }
        if self.retry {
            env.push((
                "ORCH_RETRY_CONTEXT_FILE".into(),
                self.paths.retry_context.to_string_lossy().into_owned(),
            ));
        }
        env
    }
}

/// An attempt's result, as its gates judge it.
pub struct AttemptGates<'a> {
    pub common_dir: &'a Path,
    pub run: &'a RunId,
    pub task: &'a Subtask,
    pub n: u32,
    /// The commit its change is judged against.
    pub base: Oid,
    pub result: Oid,
    pub result_tree: Oid,
    /// The agent that wrote it.
    pub agent: &'a str,
    pub paths: &'a AttemptPaths,
    /// From [`AttemptEnv::vars`].
    pub env: Vec<(String, String)>,
    pub settings: &'a Settings,
}

impl AttemptGates<'_> {
    /// The subject the gate stack judges. `steps`: the commits from the
    /// base to the result when the caller has them already.
    pub fn subject(
        self,
        store: &Store,
        steps: Option<Vec<CommitStep>>,
        on_gate: Option<crate::gate::evaluate::GateStarted>,
    ) -> Result<Subject, StoreError> {
        let steps = match steps {
            Some(steps) => steps,
            None => store.commit_steps(self.base, self.result)?,
        };
        Ok(Subject {
            steps,
            every_commit: self.settings.lands_attempt_commits(),
            common_dir: self.common_dir.to_owned(),
            task: self.task.clone(),
            attempt: self.n,
            base_tree: store.commit_info(self.base)?.tree,
            result_tree: self.result_tree,
            result: self.result,
            scratch: gate_scratch(self.common_dir, self.run, &self.task.id, self.n),
            env: self.env,
            log_dir: self.paths.log_dir.clone(),
            writer_agent: self.agent.to_owned(),
            settings: self.settings.clone(),
            on_gate,
        })
    }
}
