//! A run's history written event by event, for unit tests of the fold and
//! of the decisions made from it (the scheduler, the worker's claims).
//!
//! The fold is the one place that says what events mean, so tests of the
//! scheduler build their state the way a run does: from records, not by
//! filling in state structs that the fold might never produce.

use crate::event::{
    Candidate, Control, Event, FORMAT_VERSION, Failure, FailureClass, Outcome, Record, RunSettings,
};
use crate::ids::{PlanId, RunId, TaskId, WriterId};

use super::{RunState, fold};

/// One run's records, in order; each record's time is its sequence
/// number times ten milliseconds unless [`History::at`] says otherwise.
pub struct History {
    run: RunId,
    records: Vec<Record>,
    time_ms: i64,
}

/// A run's settings with room for everything: cap 2, one retry, the
/// breaker at 5 agent failures, 20 retries and 3 empty results.
pub fn settings() -> RunSettings {
    RunSettings {
        cap: 2,
        agent: "fake".into(),
        fallback: vec![],
        timeout_secs: 60,
        budget_usd: None,
        retries: 1,
        breaker_failures: 5,
        breaker_retries: 20,
        breaker_empty: 3,
        workers: false,
        best_of: 1,
    }
}

/// A task id; panics on an invalid one (tests name their own tasks).
pub fn task(id: &str) -> TaskId {
    TaskId::new(id).expect("a valid task id")
}

impl History {
    /// Run `r1` of plan `p` started with `settings`.
    pub fn started(settings: RunSettings) -> Self {
        let run = RunId::new("r1").expect("id");
        let mut h = History {
            run: run.clone(),
            records: Vec::new(),
            time_ms: 0,
        };
        h.push(Event::RunStarted {
            run_id: run,
            plan_id: PlanId::new("p").expect("id"),
            revision: 1,
            plan_hash: "h".into(),
            approval: "a".repeat(40).parse().expect("hex"),
            target: "main".into(),
            base: "b".repeat(40).parse().expect("hex"),
            settings,
            carried: Default::default(),
            by: None,
        });
        h
    }

    pub fn run_id(&self) -> &RunId {
        &self.run
    }

    /// The next records happen at `ms`.
    pub fn at(&mut self, ms: i64) -> &mut Self {
        self.time_ms = ms;
        self
    }

    pub fn push(&mut self, event: Event) -> &mut Self {
        let seq = self.records.len() as u64 + 1;
        if self.time_ms < seq as i64 * 10 {
            self.time_ms = seq as i64 * 10;
        }
        self.records.push(Record {
            version: FORMAT_VERSION,
            writer: WriterId::new("w").expect("id"),
            seq,
            clock: seq,
            time_ms: self.time_ms,
            event,
        });
        self
    }

    /// Attempt `n` of `task` opens with `agent`.
    pub fn created(&mut self, task: &str, n: u32, agent: &str) -> &mut Self {
        self.opened(task, n, agent, None)
    }

    /// Attempt `n` of `task` opens as a candidate of a best-of round.
    pub fn candidate(&mut self, task: &str, n: u32, round: u32, of: u32) -> &mut Self {
        self.opened(task, n, "fake", Some(Candidate { round, of }))
    }

    fn opened(
        &mut self,
        task_id: &str,
        n: u32,
        agent: &str,
        candidate: Option<Candidate>,
    ) -> &mut Self {
        let event = Event::AttemptCreated {
            run_id: self.run.clone(),
            task: task(task_id),
            attempt: n,
            branch: format!("orch/{}/{task_id}/attempt-{n}", self.run),
            base: "b".repeat(40).parse().expect("hex"),
            start: None,
            worktree: "/w".into(),
            port: 20000,
            agent: agent.into(),
            candidate,
            foreign_branch: false,
        };
        self.push(event)
    }

    /// Attempt `n` of `task` ends; a failure class gives it a failure.
    pub fn finished(
        &mut self,
        task_id: &str,
        n: u32,
        outcome: Outcome,
        class: Option<FailureClass>,
    ) -> &mut Self {
        let event = Event::AttemptFinished {
            run_id: self.run.clone(),
            task: task(task_id),
            attempt: n,
            outcome,
            failure: class.map(|class| Failure {
                class,
                reason: "x".into(),
            }),
        };
        self.push(event)
    }

    /// Attempt `n` of `task` lands on `main`.
    pub fn landed(&mut self, task_id: &str, n: u32) -> &mut Self {
        let event = Event::Landed {
            run_id: self.run.clone(),
            task: task(task_id),
            attempt: n,
            target: "main".into(),
            old: "0".repeat(40).parse().expect("hex"),
            new: "e".repeat(40).parse().expect("hex"),
            strategy: "squash".into(),
            commits: vec!["e".repeat(40).parse().expect("hex")],
        };
        self.push(event)
    }

    /// A person's `skip`, `cancel` or `retry` of `task`.
    pub fn control(&mut self, task_id: &str, action: Control) -> &mut Self {
        let event = Event::TaskControl {
            run_id: self.run.clone(),
            task: task(task_id),
            action,
            by: "me".into(),
        };
        self.push(event)
    }

    /// The run as the fold sees it now.
    pub fn state(&self) -> RunState {
        fold(&self.records)
            .remove(&self.run)
            .expect("the run started")
    }
}
