//! Compare-and-swap through a remote: claims, atomic publication, and
//! following a branch.
//!
//! Machines that share a remote coordinate with nothing but non-forced
//! pushes. A push that is not a fast-forward is rejected by every git
//! server, so pushing a commit whose parent is the value we read is a
//! compare-and-swap on the remote ref, and creating a ref that someone else
//! created first fails the same way. Claims (`refs/orch/claims/<run>/<what>`)
//! are small commits whose tree holds `claim.json`; each new holder's claim
//! commit has the previous one as parent, so a claim ref only ever moves
//! forward and its history is the list of holders.
//!
//! Like `sync`, this shells out to the `git` binary for the network so the
//! user's SSH and credential setup applies. It never force-pushes.

use serde::{Deserialize, Serialize};

use super::error::{Result, StoreError};
use super::oid::Oid;
use super::refs::REMOTES_PREFIX;
use super::repository::Store;

/// Where claims live.
pub const CLAIMS_PREFIX: &str = "refs/orch/claims/";
/// The claim of a run's merge queue: `_` cannot start a task id, so no task
/// claim can take this name.
pub const QUEUE_CLAIM: &str = "_queue";

/// The content of a claim commit (`claim.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Claim {
    pub version: u32,
    pub run: String,
    /// The task, or [`QUEUE_CLAIM`] for the merge queue.
    pub what: String,
    /// The attempt the holder runs (0 for the queue).
    pub attempt: u32,
    pub writer: String,
    pub host: String,
    pub pid: u32,
    /// How long the claim holds without a renewal.
    pub lease_secs: u64,
    /// When it was claimed (the holder's wall clock).
    pub claimed_ms: i64,
}

/// Where run starts are claimed: `refs/orch/starts/<plan>`.
pub const STARTS_PREFIX: &str = "refs/orch/starts/";

/// The content of a run-start commit (`start.json`): which run of a plan
/// a clone started. Each start's commit has the previous one as parent,
/// so two clones starting one plan at once race on a non-forced push.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunStart {
    pub version: u32,
    pub plan: String,
    pub run: String,
    pub writer: String,
}

/// What a push that must not be forced came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pushed {
    /// Every ref moved.
    Accepted,
    /// The remote refused: a ref moved meanwhile (not a fast-forward), or a
    /// hook said no. Nothing moved (the push is atomic).
    Rejected(String),
}

impl Pushed {
    /// Whether a rejection only means a ref moved meanwhile (lost a race:
    /// read again and retry), as opposed to a hook or a rule refusing it.
    pub fn lost_race(&self) -> bool {
        match self {
            Pushed::Accepted => false,
            Pushed::Rejected(why) => {
                // Two pushes creating one ref at once: the loser's ref
                // transaction fails to lock or finds the ref made.
                !why.contains("hook declined")
                    && [
                        "non-fast-forward",
                        "fetch first",
                        "stale info",
                        "already exists",
                        "cannot lock ref",
                    ]
                    .iter()
                    .any(|k| why.contains(k))
            }
        }
    }
}

impl Store {
    /// The claim ref of `what` in `run`.
    pub fn claim_ref(run: &str, what: &str) -> String {
        format!("{CLAIMS_PREFIX}{run}/{what}")
    }

    /// The remote's value of `name` as of the last fetch (its tracking copy
    /// under `refs/orch-remotes/<remote>/`).
    pub fn tracked(&self, remote: &str, name: &str) -> Result<Option<Oid>> {
        let Some(rest) = name.strip_prefix(super::refs::ORCH_PREFIX) else {
            return Ok(None);
        };
        self.ref_target(&format!("{REMOTES_PREFIX}{remote}/{rest}"))
    }

    /// Reads a claim commit.
    pub fn read_claim(&self, commit: Oid) -> Result<Claim> {
        let bytes = self
            .file_at(commit, "claim.json")?
            .ok_or_else(|| StoreError::Corrupt(format!("claim {commit} has no claim.json")))?;
        serde_json::from_slice(&bytes)
            .map_err(|e| StoreError::Corrupt(format!("claim {commit}: malformed claim.json: {e}")))
    }

    /// Writes a claim commit on top of `previous` (the value read), without
    /// moving any ref.
    pub fn write_claim(&self, claim: &Claim, previous: Option<Oid>) -> Result<Oid> {
        let bytes = serde_json::to_vec_pretty(claim).expect("claims serialise");
        let blob = self.write_blob(&bytes)?;
        let tree = self.write_tree(&[("claim.json", blob)])?;
        let message = format!(
            "claim {}/{} attempt {} by {}\n\nOrch-Writer: {}\n",
            claim.run, claim.what, claim.attempt, claim.host, claim.writer
        );
        self.write_commit(&message, tree, &previous.into_iter().collect::<Vec<_>>())
    }

    /// Writes the commit that claims the start of `run` of `plan` on top of
    /// `previous` (the value read from the remote), without moving any ref.
    pub fn write_run_start(&self, plan: &str, run: &str, previous: Option<Oid>) -> Result<Oid> {
        let start = RunStart {
            version: 1,
            plan: plan.to_owned(),
            run: run.to_owned(),
            writer: self.writer()?.to_string(),
        };
        let bytes = serde_json::to_vec_pretty(&start).expect("starts serialise");
        let blob = self.write_blob(&bytes)?;
        let tree = self.write_tree(&[("start.json", blob)])?;
        let message = format!(
            "start {run} of plan {plan}\n\nOrch-Writer: {}\n",
            start.writer
        );
        self.write_commit(&message, tree, &previous.into_iter().collect::<Vec<_>>())
    }

    /// Reads a run-start commit (`refs/orch/starts/<plan>`).
    pub fn read_run_start(&self, commit: Oid) -> Result<RunStart> {
        let bytes = self
            .file_at(commit, "start.json")?
            .ok_or_else(|| StoreError::Corrupt(format!("run start {commit} has no start.json")))?;
        serde_json::from_slice(&bytes).map_err(|e| {
            StoreError::Corrupt(format!("run start {commit}: malformed start.json: {e}"))
        })
    }

    /// Pushes `updates` (commit, full ref name) to `remote` in one atomic,
    /// non-forced push.
    pub fn push_atomic(&self, remote: &str, updates: &[(Oid, String)]) -> Result<Pushed> {
        self.push_fenced(remote, updates, None)
    }

    /// Like [`Store::push_atomic`], and only while `fence` (a ref name and
    /// the value this clone holds there, such as its claim) is still that
    /// value on the remote: the fence is pushed to itself with
    /// `--force-with-lease=<name>:<value>`, which is a no-op while it holds
    /// and refuses the whole atomic push ("stale info") once someone moved
    /// it. A holder that was frozen past its lease so cannot publish after
    /// another took its claim.
    pub fn push_fenced(
        &self,
        remote: &str,
        updates: &[(Oid, String)],
        fence: Option<(&str, Oid)>,
    ) -> Result<Pushed> {
        self.check_remote(remote)?;
        let mut args = vec![
            "push".to_owned(),
            "--atomic".into(),
            "--porcelain".into(),
            "--quiet".into(),
        ];
        let full_name = |name: &str| {
            if !name.starts_with("refs/") || name.starts_with('-') {
                return Err(StoreError::Corrupt(format!(
                    "{name:?} is not a full ref name"
                )));
            }
            Ok(())
        };
        if let Some((name, held)) = fence {
            full_name(name)?;
            args.push(format!("--force-with-lease={name}:{held}"));
        }
        args.push(remote.to_owned());
        for (oid, name) in updates {
            full_name(name)?;
            args.push(format!("{oid}:{name}"));
        }
        if let Some((name, held)) = fence {
            args.push(format!("{held}:{name}"));
        }
        let out = self.git().output(&args)?;
        if out.status.success() {
            return Ok(Pushed::Accepted);
        }
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let refused: Vec<&str> = stdout.lines().filter(|l| l.starts_with('!')).collect();
        if refused.is_empty() {
            // Not a refusal of a ref: the remote is unreachable or broken.
            return Err(StoreError::Process(crate::process::ProcessError::Failed {
                command: format!("git {}", args.join(" ")),
                status: out.status.to_string(),
                stderr: format!("{}{}", stdout.trim(), stderr.trim()),
            }));
        }
        let why = refused
            .iter()
            .map(|l| l.split('\t').next_back().unwrap_or(l).trim())
            .collect::<Vec<_>>()
            .join("; ");
        let hook: Vec<&str> = stderr
            .lines()
            .filter_map(|l| l.strip_prefix("remote: "))
            .collect();
        Ok(Pushed::Rejected(if hook.is_empty() {
            why
        } else {
            format!("{why}: {}", hook.join(" "))
        }))
    }

    /// The value of `name` on `remote` now (`git ls-remote`: no objects
    /// are fetched), `None` when the remote has no such ref.
    pub fn remote_value(&self, remote: &str, name: &str) -> Result<Option<Oid>> {
        self.check_remote(remote)?;
        if !name.starts_with("refs/") || name.starts_with('-') {
            return Err(StoreError::Corrupt(format!(
                "{name:?} is not a full ref name"
            )));
        }
        let out = self.git().run(["ls-remote", "--", remote, name])?;
        for line in out.lines() {
            if let Some((oid, found)) = line.split_once('\t')
                && found == name
            {
                return self.parse_oid(oid.trim()).map(Some);
            }
        }
        Ok(None)
    }

    /// Fetches `refs/heads/<branch>` of `remote` into its usual
    /// remote-tracking ref (`refs/remotes/<remote>/<branch>`, as `git fetch`
    /// does) and returns its value, `None` when the remote has no such
    /// branch. No local branch moves.
    pub fn fetch_branch(&self, remote: &str, branch: &str) -> Result<Option<Oid>> {
        self.check_remote(remote)?;
        let tracking = format!("refs/remotes/{remote}/{branch}");
        let spec = format!("+refs/heads/{branch}:{tracking}");
        let out =
            self.git()
                .output(["fetch", "--quiet", "--no-write-fetch-head", remote, &spec])?;
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            if stderr.contains("couldn't find remote ref") {
                return Ok(None);
            }
            return Err(StoreError::Process(crate::process::ProcessError::Failed {
                command: format!("git fetch {remote} {spec}"),
                status: out.status.to_string(),
                stderr: stderr.trim().to_owned(),
            }));
        }
        self.ref_target(&tracking)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn races_are_told_from_refusals() {
        for race in [
            "[rejected] (fetch first)",
            "[rejected] (non-fast-forward)",
            "[remote rejected] (atomic transaction failed): error: cannot lock ref 'refs/orch/claims/r/t': reference already exists",
        ] {
            assert!(Pushed::Rejected(race.into()).lost_race(), "{race}");
        }
        for refusal in [
            "[remote rejected] (pre-receive hook declined): git-orch: refs/heads/main: not landed",
            "[remote rejected] (atomic transaction failed); [remote rejected] (pre-receive hook declined)",
            "[remote rejected] (deny updating a hidden ref)",
        ] {
            assert!(!Pushed::Rejected(refusal.into()).lost_race(), "{refusal}");
        }
        assert!(!Pushed::Accepted.lost_race());
    }
}
