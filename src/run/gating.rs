//! The one place that says what a gate is given: the subject and the
//! environment of an attempt's gates, whether its run judges it or a
//! person gates it again by hand (`git orch gate`), and the environment
//! of a landing's integration gate (the merge queue's and `git orch
//! land`'s). A verdict recorded by one means what the other's would, and
//! the cache reuses it exactly when the inputs match: every variable is
//! set here as an input of the verdict or as where the gate runs (see
//! [`crate::gate::inputs`]).
//!
//! The attempt's environment is also what its setup command and agent
//! get ([`AttemptEnv::vars`]); `gate::evaluate` and
//! `merge::integration` run what is built here.

use std::path::Path;

use crate::config::Settings;
use crate::gate::{GateEnv, Subject};
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
    /// The `ORCH_*` variables and `PORT`, for every process of the
    /// attempt.
    pub fn vars(&self) -> Vec<(String, String)> {
        self.gate_env().vars()
    }

    /// The same variables, each marked as an input of a gate's verdict
    /// (what the work is: plan, task, owned globs, base, agent, a port the
    /// person chose) or as where it runs (run and attempt number, the
    /// port block, git-orch's files for the attempt).
    pub fn gate_env(&self) -> GateEnv {
        let mut env = GateEnv::default();
        env.placement("ORCH_RUN", self.run.to_string());
        env.input("ORCH_PLAN", self.plan.to_string());
        env.input("ORCH_TASK", self.task.id.to_string());
        env.placement("ORCH_ATTEMPT", self.n.to_string());
        env.input("ORCH_OWNED_GLOBS", self.task.owned_globs.join("\n"));
        env.input("ORCH_BASE", self.base.to_string());
        env.placement("ORCH_PORT", self.port.to_string());
        env.input("ORCH_AGENT", self.agent);
        env.placement("ORCH_PROMPT_FILE", self.paths.prompt.to_string_lossy());
        // An explicit PORT wins over the attempt's block: a port of the
        // person's choosing (for the agent, its section's own wins over
        // both).
        match explicit_port() {
            Some(port) => env.input("PORT", port),
            None if self.agent_env.iter().any(|(k, _)| k == "PORT") => {}
            None => env.placement("PORT", self.port.to_string()),
        }
        if self.retry {
            env.placement(
                "ORCH_RETRY_CONTEXT_FILE",
                self.paths.retry_context.to_string_lossy(),
            );
        }
        env
    }
}

/// The `PORT` git-orch itself was started with: passed to every agent and
/// gate (the environment's allow-list lets it through), and an input of
/// their verdicts.
fn explicit_port() -> Option<String> {
    std::env::var("PORT").ok()
}

/// What a landing's integration gate is told: the candidate, the target
/// it lands on and the tip it is built on; for a candidate that holds one
/// task's result only, that task's variables as its attempt's gates had
/// them, so the landing of exactly the tree its attempt's gates judged
/// (on the tip that attempt started from) reuses their verdicts.
pub struct LandingEnv<'a> {
    /// The run landing (`None`: a person's branch, `git orch land`).
    pub run: Option<&'a RunId>,
    pub plan: Option<&'a PlanId>,
    pub target: &'a str,
    /// The target's tip the candidate is built on.
    pub base: Oid,
    pub candidate: Oid,
    /// The name of a person's landing (`git orch land`).
    pub landing: Option<&'a str>,
    /// The one task whose result the candidate lands, and the agent that
    /// wrote it.
    pub task: Option<(&'a Subtask, &'a str)>,
}

impl LandingEnv<'_> {
    /// The variables, marked as [`AttemptEnv::gate_env`] marks them.
    pub fn gate_env(&self) -> GateEnv {
        let mut env = GateEnv::default();
        if let Some(run) = self.run {
            env.placement("ORCH_RUN", run.to_string());
        }
        if let Some(plan) = self.plan {
            env.input("ORCH_PLAN", plan.to_string());
        }
        if let Some((task, _)) = self.task {
            env.input("ORCH_TASK", task.id.to_string());
            env.input("ORCH_OWNED_GLOBS", task.owned_globs.join("\n"));
        }
        env.input("ORCH_BASE", self.base.to_string());
        if let Some((_, agent)) = self.task {
            env.input("ORCH_AGENT", agent);
        }
        // Named by the tree and the base, which are the key already.
        env.placement("ORCH_CANDIDATE", self.candidate.to_string());
        env.placement("ORCH_TARGET", self.target);
        if let Some(landing) = self.landing {
            env.placement("ORCH_LANDING", landing);
        }
        if let Some(port) = explicit_port() {
            env.input("PORT", port);
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
    /// From [`AttemptEnv::gate_env`].
    pub env: GateEnv,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::SandboxSettings;

    fn subtask() -> Subtask {
        serde_json::from_value(serde_json::json!({
            "id": "a",
            "title": "A",
            "owned_globs": ["src/a/**"],
            "deliverable": "it",
            "verification": "true",
        }))
        .expect("a subtask")
    }

    fn oid(hex: &str) -> Oid {
        Oid::from_hex(hex.repeat(40).as_bytes()).expect("an id")
    }

    #[test]
    fn a_landing_of_one_result_on_its_base_has_its_attempts_inputs() {
        let (run, plan, task) = (
            RunId::new("r-1").expect("id"),
            PlanId::new("p").expect("id"),
            subtask(),
        );
        let paths = super::super::workspace::recorded_paths(
            Path::new("/repo/.git"),
            &run,
            &task.id,
            2,
            "orch/r-1/a/attempt-2",
            "/wt/r-1/a-2".into(),
        );
        let attempt = AttemptEnv {
            run: &run,
            plan: &plan,
            task: &task,
            n: 2,
            base: oid("1"),
            port: 41000,
            agent: "fake",
            agent_env: &[],
            paths: &paths,
            retry: true,
        }
        .gate_env();
        let landing = |base: Oid, task: Option<(&Subtask, &str)>| {
            LandingEnv {
                run: Some(&run),
                plan: Some(&plan),
                target: "main",
                base,
                candidate: oid("2"),
                landing: None,
                task,
            }
            .gate_env()
        };
        let sandbox = SandboxSettings::default();
        let same = landing(oid("1"), Some((&task, "fake")));
        assert_eq!(attempt.fingerprint(&sandbox), same.fingerprint(&sandbox));
        for other in [
            landing(oid("3"), Some((&task, "fake"))),
            landing(oid("1"), Some((&task, "claude"))),
            landing(oid("1"), None),
        ] {
            assert_ne!(attempt.fingerprint(&sandbox), other.fingerprint(&sandbox));
        }
        // Both tell the gate what it judges.
        assert_eq!(attempt.get("ORCH_TASK"), Some("a"));
        assert_eq!(same.get("ORCH_CANDIDATE"), Some(&*"2".repeat(40)));
    }
}
