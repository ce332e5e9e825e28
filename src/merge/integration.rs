//! The integration gate: the command gates that judge a candidate on top
//! of the target in a scratch worktree, shared by the merge queue and
//! hand landings (`git orch land`), so both judge alike.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::event::{GateMode, GateStatus, Verdict};
use crate::gate::command::Place;
use crate::gate::{GateDef, GateKind};
use crate::state::{VerdictCache, VerdictKey};

/// The gates `[integration] run` configures (one per value), if any: they
/// replace every other source of integration gates.
pub fn configured(settings: &Settings) -> Option<Vec<GateDef>> {
    if settings.integration.is_empty() {
        return None;
    }
    let one = settings.integration.len() == 1;
    Some(
        settings
            .integration
            .iter()
            .enumerate()
            .map(|(i, run)| GateDef {
                name: if one {
                    "integration".into()
                } else {
                    format!("integration-{}", i + 1)
                },
                kind: GateKind::Command { run: run.clone() },
                mode: GateMode::Block,
                timeout: crate::gate::stack::DEFAULT_TIMEOUT,
            })
            .collect(),
    )
}

/// The verdict of a candidate with no blocking command gate to run: it
/// merged cleanly, which is all there is to judge.
pub fn clean_merge() -> Verdict {
    Verdict {
        gate: "integration".into(),
        mode: GateMode::Block,
        status: GateStatus::Pass,
        cached_pass: None,
        inputs: None,
        command: None,
        duration_ms: 0,
        summary: "no blocking command gate is configured; the candidate merged cleanly".into(),
        tail: String::new(),
        details: serde_json::Value::Null,
    }
}

/// Runs `defs` on the candidate tree `tree` checked out at `place`, in
/// order, stopping at the first that blocks. A verdict recorded before for
/// the same tree, command and `inputs` (the fingerprint of the gate's
/// environment, see [`crate::gate::inputs`]) is reused (as `cached`)
/// instead of running the command again. Returns the verdicts and how
/// many commands ran.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    defs: &[GateDef],
    tree: &str,
    cache: &VerdictCache,
    place: &Place<'_>,
    inputs: &str,
    settings: &Settings,
    common_dir: &Path,
    cancel: &CancellationToken,
) -> (Vec<Verdict>, usize) {
    let mut verdicts = Vec::new();
    let mut ran = 0;
    for def in defs {
        let cmd = def
            .kind
            .command()
            .expect("integration gates are commands")
            .to_owned();
        let key = VerdictKey {
            tree: tree.to_owned(),
            gate: def.name.clone(),
            command: cmd.clone(),
            inputs: inputs.to_owned(),
        };
        let v = match cache.get(&key) {
            Some(prev) => Verdict::reused(prev, &def.name, def.mode),
            None => {
                ran += 1;
                let v =
                    crate::gate::command::run_in(def, &cmd, place, settings, common_dir, cancel)
                        .await;
                Verdict {
                    inputs: Some(inputs.to_owned()),
                    ..v
                }
            }
        };
        let blocks = v.blocks();
        verdicts.push(v);
        if blocks {
            break;
        }
    }
    (verdicts, ran)
}
