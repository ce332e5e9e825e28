//! Which gates check one subtask's results, in which order and mode.
//!
//! The stack is built from three layers, later ones winning: the
//! repository's `[gate "NAME"]` sections (`.orch/config`), the approved
//! plan's `gates`, and the subtask's own `gates`. Because the last two are
//! part of the approved bytes, what gates a result is part of what was
//! approved.
//!
//! Built-in gates always exist unless set to `skip`: `diff` (something
//! changed), `scope` (only owned files changed), `secrets` (no secret
//! added) and `placeholders` (warn by default). Then every command gate
//! from config or plan (`run = …`), the subtask's `verification`, and a
//! reviewer gate when one names an `agent`.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::Settings;
use crate::event::GateMode;
use crate::plan::format::{GateSetting, Plan, Subtask};

/// What a gate checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateKind {
    Diff,
    Scope,
    Secrets,
    Placeholders,
    /// A configured command (build, test, lint, …).
    Command {
        run: String,
    },
    /// The subtask's own verification command.
    Verification {
        run: String,
    },
    /// An agent reviews the diff and answers with a JSON verdict.
    Review {
        agent: String,
    },
}

impl GateKind {
    /// The command a command-like gate runs.
    pub fn command(&self) -> Option<&str> {
        match self {
            GateKind::Command { run } | GateKind::Verification { run } => Some(run),
            _ => None,
        }
    }

    /// Whether it is evaluated from git trees alone (cheap, no worktree).
    pub fn is_builtin(&self) -> bool {
        matches!(
            self,
            GateKind::Diff | GateKind::Scope | GateKind::Secrets | GateKind::Placeholders
        )
    }
}

/// One gate of a stack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GateDef {
    pub name: String,
    pub kind: GateKind,
    pub mode: GateMode,
    pub timeout: Duration,
}

/// Default timeout of command gates.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(900);

/// Layered settings of one gate name.
#[derive(Debug, Clone, Default)]
struct Layer {
    run: Option<String>,
    agent: Option<String>,
    mode: Option<GateMode>,
    timeout: Option<Duration>,
}

impl Layer {
    fn apply(&mut self, s: &GateSetting) {
        if s.run.is_some() {
            self.run = s.run.clone();
        }
        if s.mode.is_some() {
            self.mode = s.mode;
        }
        if let Some(t) = s.timeout {
            self.timeout = Some(Duration::from_secs(t));
        }
    }
}

const BUILTIN: [(&str, GateMode); 4] = [
    ("diff", GateMode::Block),
    ("scope", GateMode::Block),
    ("secrets", GateMode::Block),
    ("placeholders", GateMode::Warn),
];

/// The gate stack for `subtask` of `plan`.
pub fn stack(settings: &Settings, plan: &Plan, subtask: &Subtask) -> Vec<GateDef> {
    let mut layers: BTreeMap<String, Layer> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for (name, g) in &settings.gates {
        let l = layers.entry(name.clone()).or_default();
        l.run = g.run.clone();
        l.agent = g.agent.clone();
        l.mode = Some(g.mode);
        l.timeout = Some(g.timeout);
        order.push(name.clone());
    }
    for (name, g) in plan.gates.iter().chain(&subtask.gates) {
        layers.entry(name.clone()).or_default().apply(g);
        if !order.contains(name) {
            order.push(name.clone());
        }
    }
    let mut out = Vec::new();
    for (name, default_mode) in BUILTIN {
        let l = layers.get(name).cloned().unwrap_or_default();
        let kind = match name {
            "diff" => GateKind::Diff,
            "scope" => GateKind::Scope,
            "secrets" => GateKind::Secrets,
            _ => GateKind::Placeholders,
        };
        out.push(GateDef {
            name: name.into(),
            kind,
            mode: l.mode.unwrap_or(default_mode),
            timeout: l.timeout.unwrap_or(DEFAULT_TIMEOUT),
        });
    }
    let mut review = None;
    for name in order {
        if BUILTIN.iter().any(|(b, _)| *b == name) || name == "verification" {
            continue;
        }
        let l = &layers[&name];
        let kind = match (&l.agent, &l.run) {
            (Some(agent), _) => GateKind::Review {
                agent: agent.clone(),
            },
            (None, Some(run)) => GateKind::Command { run: run.clone() },
            // A mode-only override of a gate that has no command: nothing
            // to run.
            (None, None) => continue,
        };
        let def = GateDef {
            name: name.clone(),
            kind,
            mode: l.mode.unwrap_or(GateMode::Block),
            timeout: l.timeout.unwrap_or(DEFAULT_TIMEOUT),
        };
        if matches!(def.kind, GateKind::Review { .. }) {
            review = Some(def);
        } else {
            out.push(def);
        }
    }
    let v = layers.get("verification").cloned().unwrap_or_default();
    if !subtask.verification.trim().is_empty() {
        out.push(GateDef {
            name: "verification".into(),
            kind: GateKind::Verification {
                run: v.run.unwrap_or_else(|| subtask.verification.clone()),
            },
            mode: v.mode.unwrap_or(GateMode::Block),
            timeout: v.timeout.unwrap_or(DEFAULT_TIMEOUT),
        });
    }
    // The reviewer goes last: it is the most expensive and reads what the
    // other gates found.
    out.extend(review);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::config::parse_config;

    fn plan(json: serde_json::Value) -> Plan {
        crate::plan::parse(json.to_string().as_bytes()).expect("valid")
    }

    #[test]
    fn layers_config_then_plan_then_subtask() {
        let cfg = parse_config(
            b"[gate \"test\"]\n\trun = cargo test\n[gate \"lint\"]\n\trun = cargo clippy\n\tmode = warn\n[gate \"scope\"]\n\tmode = warn\n",
            "t",
        )
        .expect("config");
        let settings = Settings::from_values(&cfg).expect("settings");
        let p = plan(serde_json::json!({
            "version": 1, "id": "p", "instruction": "i",
            "gates": {"lint": {"mode": "block"}},
            "subtasks": [{"id": "a", "title": "a", "owned_globs": ["a/**"], "deliverable": "d",
                "verification": "make a", "gates": {"test": {"mode": "skip"}, "placeholders": {"mode": "block"}}}]
        }));
        let s = stack(&settings, &p, &p.subtasks[0]);
        let find = |n: &str| s.iter().find(|g| g.name == n).expect(n).clone();
        assert_eq!(find("scope").mode, GateMode::Warn);
        assert_eq!(find("placeholders").mode, GateMode::Block);
        assert_eq!(find("lint").mode, GateMode::Block);
        assert_eq!(find("test").mode, GateMode::Skip);
        assert_eq!(find("verification").kind.command(), Some("make a"));
        let names: Vec<&str> = s.iter().map(|g| g.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "diff",
                "scope",
                "secrets",
                "placeholders",
                "lint",
                "test",
                "verification"
            ]
        );
    }

    #[test]
    fn a_reviewer_goes_last() {
        let cfg = parse_config(b"[gate \"review\"]\n\tagent = claude\n", "t").expect("config");
        let settings = Settings::from_values(&cfg).expect("settings");
        let p = plan(serde_json::json!({
            "version": 1, "id": "p", "instruction": "i",
            "subtasks": [{"id": "a", "title": "a", "owned_globs": ["a/**"], "deliverable": "d", "verification": "make a"}]
        }));
        let s = stack(&settings, &p, &p.subtasks[0]);
        assert_eq!(
            s.last().expect("gate").kind,
            GateKind::Review {
                agent: "claude".into()
            }
        );
    }
}
