//! The lead agent: `git orch plan new --agent` runs an agent that writes
//! the plan, round by round, until the plan passes the check.
//!
//! A session checks the base out into a detached worktree under
//! `.git/orch/lead/<session>/` (the agent reads the repository there, so
//! nothing it does touches the user's work tree), and runs the agent the
//! way attempts run theirs: the same adapters ([`crate::agent`]), its own
//! process group with a timeout ([`crate::process::GroupChild`]), output
//! masked line by line, usage parsed from what it printed. The prompt is
//! the brief ([`crate::plan::brief`]); it names the file the agent must
//! write the plan to, which is also `ORCH_PLAN_FILE`. git-orch then checks
//! the plan exactly as `plan check` does ([`crate::approval::review`]);
//! when blocking findings remain, they go back to the agent in the next
//! round's prompt, with its plan left in the file to fix.
//!
//! Every round is a `plan_round` event. After every round the draft is
//! saved (to `--out`, or under `.git/orch/drafts/`), so what the agent
//! wrote is never lost. The checkout is removed when the session ends,
//! however it ends. This module never prints; the command renders what it
//! returns and the progress it reports.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::agent::{self, AgentSpec};
use crate::approval::{self, Review};
use crate::event::{AgentUsage, Event, PlanRoundOutcome};
use crate::gate::masking;
use crate::plan::format::{self, MAX_PLAN_BYTES, Plan};
use crate::plan::{brief, pinch};
use crate::process::{Git, GroupChild};
use crate::store::quarantine::CheckoutPaths;
use crate::store::{Oid, Store, StoreError};

/// The folder under the worktree root that holds lead agents' checkouts,
/// one per session (a dot folder: no run is named so).
pub const LEAD_FOLDER: &str = ".lead";

/// Rounds when `--rounds` is not given.
pub const DEFAULT_ROUNDS: u32 = 3;
/// Grace between SIGTERM and SIGKILL when the agent is stopped.
const GRACE: Duration = Duration::from_secs(3);
/// Bytes of agent output kept in a round's event.
const TAIL_BYTES: usize = 2 * 1024;
/// Problems recorded per round in the event (all of them go to the agent),
/// and the bytes kept of each.
const PROBLEMS_RECORDED: usize = 20;
const PROBLEM_BYTES: usize = 500;

/// The first `max` bytes of `text`, cut at a character boundary, with `…`
/// when cut.
fn head_chars(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// What a session needs.
#[derive(Debug, Clone)]
pub struct Options {
    pub instruction: String,
    /// The agent's name (a built-in or `[agent "NAME"]`).
    pub agent: String,
    /// The most rounds to run (at least 1).
    pub rounds: u32,
    /// The commit to plan against (default `HEAD`).
    pub base: Option<String>,
    /// Where to save the draft; checked with [`check_out`] first.
    pub out: Option<PathBuf>,
    /// How long one round may take (default: the agent's `timeout`, else
    /// `orch.timeout`).
    pub timeout: Option<Duration>,
    /// Stop before another round once reported cost reaches this (USD).
    pub budget: Option<f64>,
}

/// Why a session could not start or went wrong; nothing to keep.
#[derive(Debug, thiserror::Error)]
pub enum LeadError {
    #[error("there is no commit to plan against")]
    NoBase,
    #[error("--base {0:?} does not name a commit")]
    BadBase(String),
    #[error("{0}")]
    Agent(#[from] crate::agent::AgentError),
    #[error("the lead agent {agent} cannot run: `{program}` is not on PATH")]
    Missing { agent: String, program: String },
    #[error("{0}")]
    Out(String),
    #[error("--out {out}: the folder {folder} does not exist")]
    OutFolderMissing { out: PathBuf, folder: PathBuf },
    #[error("--out {0} already exists; git-orch does not overwrite it")]
    OutExists(PathBuf),
    #[error("--out {out} is inside the repository's git folder {git_dir}")]
    OutInGitDir { out: PathBuf, git_dir: PathBuf },
    /// The sandbox `.orch/config` asks for cannot work here.
    #[error("{0}")]
    Sandbox(#[source] crate::sandbox::SandboxError),
    #[error("{0}")]
    Review(#[from] approval::ReviewError),
    #[error("{0}")]
    Config(#[from] crate::config::ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
}

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> LeadError {
    let context = context.into();
    move |source| LeadError::Io { context, source }
}

/// Where a draft may be saved: an absolute path whose folder exists,
/// which is not there yet and is not inside the repository's git folder.
/// Returns whether it is inside the work tree and not ignored there, where
/// an untracked file makes `git orch run` refuse to start.
pub fn check_out(store: &Store, out: &Path) -> Result<bool, LeadError> {
    let bad = |why: String| Err(LeadError::Out(why));
    if !out.is_absolute() {
        return bad(format!("--out {} is not an absolute path", out.display()));
    }
    let Some(name) = out.file_name() else {
        return bad(format!("--out {} names no file", out.display()));
    };
    let parent = out.parent().unwrap_or(Path::new("/"));
    let Ok(parent) = parent.canonicalize() else {
        return Err(LeadError::OutFolderMissing {
            out: out.to_owned(),
            folder: parent.to_owned(),
        });
    };
    let out = parent.join(name);
    if std::fs::symlink_metadata(&out).is_ok() {
        return Err(LeadError::OutExists(out));
    }
    let git_dir = store
        .common_dir()
        .canonicalize()
        .unwrap_or_else(|_| store.common_dir().to_owned());
    if out.starts_with(&git_dir) {
        return Err(LeadError::OutInGitDir { out, git_dir });
    }
    let Some(workdir) = store.workdir() else {
        return Ok(false);
    };
    let workdir = workdir
        .canonicalize()
        .unwrap_or_else(|_| workdir.to_owned());
    if !out.starts_with(&workdir) {
        return Ok(false);
    }
    let ignored = Git::new(&workdir)
        .output([
            std::ffi::OsStr::new("check-ignore"),
            std::ffi::OsStr::new("-q"),
            std::ffi::OsStr::new("--"),
            out.as_os_str(),
        ])
        .is_ok_and(|o| o.status.success());
    Ok(!ignored)
}

/// Progress of a session, for the command to show.
#[derive(Debug, Clone)]
pub enum Progress {
    /// The checkout is ready and the agent starts.
    RoundStarted {
        round: u32,
        rounds: u32,
        agent: String,
        base: String,
    },
    /// The round's plan was checked.
    RoundEnded {
        round: u32,
        rounds: u32,
        report: Round,
    },
}

/// One round, as the command reports it.
#[derive(Debug, Clone)]
pub struct Round {
    pub round: u32,
    pub outcome: PlanRoundOutcome,
    pub blocking: usize,
    pub warnings: usize,
    /// What went back to the agent (or would have).
    pub problems: Vec<String>,
    /// Files it changed in its checkout (discarded).
    pub stray: usize,
    pub usage: AgentUsage,
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq)]
pub enum End {
    /// The last plan passes the check.
    Passed,
    /// The rounds ran out with a plan that still fails (or none).
    Failed,
    /// The agent became unavailable (rate limited, missing, its key
    /// refused) mid-session: what it was, and the reason with its words.
    Unavailable {
        class: agent::Availability,
        reason: String,
    },
    /// Reported cost reached `--budget` before the plan passed.
    Budget { spent: f64, budget: f64 },
    /// Ctrl-C.
    Interrupted,
}

/// What a session produced.
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub end: End,
    pub rounds: Vec<Round>,
    /// Where the draft is (`None` if the agent never wrote a plan file).
    pub draft: Option<PathBuf>,
    /// The last round's plan and its review, when it was a valid plan.
    pub plan: Option<(Plan, Review)>,
    /// The commit checked against, and how it was named.
    pub base: Oid,
    pub base_name: String,
    /// Total reported cost.
    pub cost_usd: f64,
}

/// A fresh drafts path for `instruction`: `.git/orch/drafts/<slug>.json`,
/// numbered when taken.
fn draft_path(store: &Store, instruction: &str) -> PathBuf {
    let dir = store.orch_dir().join("drafts");
    let slug = brief::slug(instruction);
    let mut path = dir.join(format!("{slug}.json"));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{slug}-{n}.json"));
        n += 1;
    }
    path
}

/// Writes `bytes` to `path` through a temporary file and a rename, so a
/// crash never leaves half a draft.
fn save(path: &Path, bytes: &[u8]) -> Result<(), LeadError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(io(format!("creating {}", parent.display())))?;
    }
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes).map_err(io(format!("writing {}", tmp.display())))?;
    std::fs::rename(&tmp, path).map_err(io(format!("writing {}", path.display())))
}

/// The checkout of a session (a folder with a git folder of its own, see
/// [`crate::store::quarantine`]); removed on drop, however the session
/// ends.
struct Checkout<'a> {
    store: &'a Store,
    paths: CheckoutPaths,
}

/// The branch of the lead agent's checkout's own git folder.
const LEAD_BRANCH: &str = "orch-lead";

impl Drop for Checkout<'_> {
    fn drop(&mut self) {
        // Its warm caches' layers go with it (warm worktrees, issue 28).
        crate::store::scratch::remove_warm_layers(self.store.common_dir(), &self.paths.dir);
        let _ = self.store.remove_checkout(&self.paths);
        if let Some(parent) = self.paths.dir.parent() {
            // The session folder under the worktree root, once empty.
            let _ = std::fs::remove_dir(parent);
        }
    }
}

/// What reading the plan file gave.
enum Written {
    Nothing,
    Unreadable(String),
    Bytes(Vec<u8>),
}

fn read_plan_file(path: &Path) -> Written {
    use std::io::Read;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(_) => return Written::Nothing,
    };
    if !meta.file_type().is_file() {
        return Written::Unreadable(format!(
            "{} is not a regular file (a link or a folder); write the plan into the file itself",
            path.display()
        ));
    }
    let mut bytes = Vec::new();
    match std::fs::File::open(path)
        .and_then(|f| f.take(MAX_PLAN_BYTES as u64 + 1).read_to_end(&mut bytes))
    {
        Ok(_) => Written::Bytes(bytes),
        Err(e) => Written::Unreadable(format!("{} cannot be read: {e}", path.display())),
    }
}

/// Paths the agent changed in its checkout, other than the plan file, and
/// whether it committed (or otherwise moved its git folder's branch).
/// Asked of git with git-orch's own index, never of the checkout's git
/// folder.
fn stray_changes(store: &Store, checkout: &CheckoutPaths, base: Oid, plan_name: &str) -> usize {
    let changed = store
        .checkout_changes(checkout)
        .unwrap_or_default()
        .into_iter()
        .filter(|(path, _)| path != plan_name)
        .count();
    let moved = store
        .quarantine_tip(&checkout.dir, LEAD_BRANCH)
        .is_ok_and(|tip| tip == base);
    let moved = !moved;
    changed + usize::from(moved)
}

/// Puts the checkout back to the base, keeping nothing the agent changed.
fn reset_checkout(store: &Store, checkout: &CheckoutPaths, base: Oid) -> Result<(), LeadError> {
    store
        .reset_checkout(checkout, base, LEAD_BRANCH)
        .map_err(|e| LeadError::Out(format!("cannot reset the lead agent's checkout: {e}")))
}

/// The plan file's name at the checkout's root: `<id>.json`, the id the
/// brief's skeleton proposes for the instruction (so the file is named
/// like the draft and the stored plan), numbered when the base tree holds
/// a file or folder of that name. In the checkout's root because that is
/// where every agent may write, with or without the sandbox: each CLI's
/// milder permission mode (Claude's `acceptEdits`, Gemini's `auto_edit`,
/// Codex's `workspace-write`) accepts edits in its working folder, and
/// some refuse anything under a `.git` folder.
fn plan_name(instruction: &str, paths: &[String]) -> String {
    let slug = brief::slug(instruction);
    let taken = |name: &str| {
        paths
            .iter()
            .any(|p| p == name || p.strip_prefix(name).is_some_and(|r| r.starts_with('/')))
    };
    let mut name = format!("{slug}.json");
    let mut n = 2;
    while taken(&name) {
        name = format!("{slug}-{n}.json");
        n += 1;
    }
    name
}

/// Runs a planning session to its end: the lead agent writes a plan, the
/// plan is checked as `plan check` checks it, and what the check found
/// goes back to the agent for the next round, until a plan passes, the
/// rounds or the budget run out, or the agent cannot work.
pub async fn run_session(
    store: &Store,
    opts: &Options,
    cancel: &CancellationToken,
    progress: &dyn Fn(Progress),
) -> Result<Session, LeadError> {
    let setting = Setting::prepare(store, opts)?;
    let mut session = setting.new_session();
    let mut carried = Carried::default();
    for round in 1..=opts.rounds.max(1) {
        if round > 1
            && let Some(end) = budget_spent(opts, &session)
        {
            session.end = end;
            break;
        }
        let (prompt, prompt_file, round_dir) = setting.write_prompt(round, &carried)?;
        progress(Progress::RoundStarted {
            round,
            rounds: opts.rounds,
            agent: setting.spec.name.clone(),
            base: setting.base_label.clone(),
        });
        let ran = setting
            .run_round_agent(round, &prompt, &prompt_file, &round_dir, cancel)
            .await;
        let stray = stray_changes(
            store,
            &setting.checkout.paths,
            setting.base,
            &setting.plan_name,
        );
        session.cost_usd += ran.usage.cost_usd.unwrap_or(0.0);
        let judged = setting.judge(&ran, stray, &mut session, &mut carried)?;
        let report = setting.record_round(round, &judged, &carried.problems, stray, &ran)?;
        session.rounds.push(report.clone());
        progress(Progress::RoundEnded {
            round,
            rounds: opts.rounds,
            report,
        });
        if let Some(end) = round_end(&ran, judged.outcome) {
            session.end = end;
            break;
        }
    }
    // Failed with rounds left: the budget is what stopped it.
    if session.end == End::Failed
        && session.rounds.len() < opts.rounds as usize
        && let Some(end) = budget_spent(opts, &session)
    {
        session.end = end;
    }
    drop(setting);
    Ok(session)
}

/// What a session works with, settled once before its first round: the
/// base it plans against, the agent and its limits, the read-only
/// checkout (removed when this is dropped), and the brief every round's
/// prompt starts from.
struct Setting<'a> {
    store: &'a Store,
    opts: &'a Options,
    id: String,
    base: Oid,
    base_name: String,
    /// The base as the agent and the progress lines name it.
    base_label: String,
    settings: crate::config::Settings,
    sandbox: crate::sandbox::Sandbox,
    spec: AgentSpec,
    timeout: Duration,
    session_dir: PathBuf,
    /// Where each round's plan is saved for the person.
    draft: PathBuf,
    checkout: Checkout<'a>,
    plan_name: String,
    plan_file: PathBuf,
    plan_file_text: String,
    brief_text: String,
}

/// What one round hands the next: the plan the agent last wrote (written
/// back into the fresh checkout) and the problems found in it.
#[derive(Default)]
struct Carried {
    last_bytes: Option<Vec<u8>>,
    problems: Vec<String>,
}

/// What the checks made of one round's plan file.
struct Judged {
    outcome: PlanRoundOutcome,
    blocking: usize,
    warnings: usize,
    plan_id: Option<crate::ids::PlanId>,
    hash: Option<String>,
}

/// Whether the budget is spent: the session ends before another round
/// would spend more.
fn budget_spent(opts: &Options, session: &Session) -> Option<End> {
    let budget = opts.budget?;
    (session.cost_usd >= budget).then_some(End::Budget {
        spent: session.cost_usd,
        budget,
    })
}

/// How a round ends the session, if it does: interrupted, an agent that
/// cannot work (no further round would go better), or a plan that passed.
fn round_end(ran: &Ran, outcome: PlanRoundOutcome) -> Option<End> {
    if ran.interrupted {
        return Some(End::Interrupted);
    }
    if let Some((class, reason)) = &ran.unavailable {
        return Some(End::Unavailable {
            class: *class,
            reason: reason.clone(),
        });
    }
    (outcome == PlanRoundOutcome::Passed).then_some(End::Passed)
}

impl<'a> Setting<'a> {
    /// Resolves the base, the project's settings there, the sandbox and
    /// the agent (refusing one whose program is missing before anything
    /// is made), then makes the checkout and renders the brief.
    fn prepare(store: &'a Store, opts: &'a Options) -> Result<Setting<'a>, LeadError> {
        let (base, base_name) = match &opts.base {
            Some(b) => (
                store
                    .resolve_commit(b)?
                    .ok_or_else(|| LeadError::BadBase(b.clone()))?,
                b.clone(),
            ),
            None => (
                store.resolve_commit("HEAD")?.ok_or(LeadError::NoBase)?,
                "HEAD".to_owned(),
            ),
        };
        let settings = crate::config::Settings::from_values(&store.project_config(Some(base))?)?;
        let sandbox = crate::sandbox::resolve(&settings.sandbox).map_err(LeadError::Sandbox)?;
        let spec = AgentSpec::resolve(&opts.agent, &settings.agents)?;
        if let Some(program) = agent::probe_program(&spec)
            && !crate::process::on_path(&program)
        {
            return Err(LeadError::Missing {
                agent: spec.name.clone(),
                program,
            });
        }
        let timeout = opts
            .timeout
            .or(spec.timeout_secs.map(Duration::from_secs))
            .unwrap_or(settings.timeout);
        let paths = store.tree_paths(base)?;
        let rules = pinch::rules(&settings.pinch_paths, &settings.pinch_ignore);
        let id: String = crate::ids::random_bytes::<6>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let session_dir = store.orch_dir().join("lead").join(&id);
        let draft = opts
            .out
            .clone()
            .unwrap_or_else(|| draft_path(store, &opts.instruction));
        let base_label = format!("{base_name} ({})", &base.to_string()[..12]);
        // Outside the git folder: some agents refuse to edit anything under
        // `.git/`, where the plan file would then be.
        let checkout = Checkout {
            store,
            paths: CheckoutPaths {
                dir: crate::config::worktree_root(store.common_dir(), &settings)
                    .join(LEAD_FOLDER)
                    .join(&id),
                index: session_dir.join("checkout.index"),
            },
        };
        store.make_checkout(&checkout.paths, base, LEAD_BRANCH)?;
        let plan_name = plan_name(&opts.instruction, &paths);
        let plan_file = checkout.paths.dir.join(&plan_name);
        let plan_file_text = plan_file.to_string_lossy().into_owned();
        let brief_text = brief::render(&brief::BriefInput {
            instruction: &opts.instruction,
            base: &base_label,
            paths: &paths,
            rules: &rules,
            plan_file: Some(&plan_file_text),
        });
        Ok(Setting {
            store,
            opts,
            id,
            base,
            base_name,
            base_label,
            settings,
            sandbox,
            spec,
            timeout,
            session_dir,
            draft,
            checkout,
            plan_name,
            plan_file,
            plan_file_text,
            brief_text,
        })
    }

    /// The session before its first round: failed until a round says
    /// otherwise.
    fn new_session(&self) -> Session {
        Session {
            id: self.id.clone(),
            end: End::Failed,
            rounds: Vec::new(),
            draft: None,
            plan: None,
            base: self.base,
            base_name: self.base_name.clone(),
            cost_usd: 0.0,
        }
    }

    /// Makes the round's folder and writes its prompt (masked): the brief,
    /// and after the first round the checkout put back with the last plan
    /// in it and what was wrong with that plan. Gives the prompt, its
    /// file and the round's folder.
    fn write_prompt(
        &self,
        round: u32,
        carried: &Carried,
    ) -> Result<(String, PathBuf, PathBuf), LeadError> {
        let round_dir = self.session_dir.join(format!("round-{round}"));
        std::fs::create_dir_all(&round_dir)
            .map_err(io(format!("creating {}", round_dir.display())))?;
        let mut prompt = self.brief_text.clone();
        if round > 1 {
            reset_checkout(self.store, &self.checkout.paths, self.base)?;
            if let Some(bytes) = &carried.last_bytes {
                std::fs::write(&self.plan_file, bytes)
                    .map_err(io(format!("writing {}", self.plan_file.display())))?;
            }
            prompt.push_str(&brief::round_context(
                round,
                self.opts.rounds,
                &self.plan_file_text,
                &carried.problems,
            ));
        }
        let prompt = masking::mask_text(&prompt);
        let prompt_file = round_dir.join("prompt.md");
        std::fs::write(&prompt_file, &prompt)
            .map_err(io(format!("writing {}", prompt_file.display())))?;
        Ok((prompt, prompt_file, round_dir))
    }

    /// Runs the lead agent for one round in the session's checkout.
    async fn run_round_agent(
        &self,
        round: u32,
        prompt: &str,
        prompt_file: &Path,
        round_dir: &Path,
        cancel: &CancellationToken,
    ) -> Ran {
        run_agent(
            &self.spec,
            AgentRun {
                prompt,
                prompt_file,
                workdir: &self.checkout.paths.dir,
                log_dir: round_dir,
                round,
                rounds: self.opts.rounds,
                plan_file: &self.plan_file,
                base: self.base,
                session: &self.id,
                timeout: self.timeout,
                sandbox: &self.sandbox,
                common_dir: self.store.common_dir(),
                prices: &self.settings.prices,
            },
            cancel,
        )
        .await
    }

    /// Checks what the agent wrote as `plan check` checks it: the draft
    /// saved, the session's plan set when it was a valid plan, and the
    /// problems for the next round (with stray changes and the agent's own
    /// failure) in `carried`.
    fn judge(
        &self,
        ran: &Ran,
        stray: usize,
        session: &mut Session,
        carried: &mut Carried,
    ) -> Result<Judged, LeadError> {
        let mut judged = Judged {
            outcome: PlanRoundOutcome::Missing,
            blocking: 0,
            warnings: 0,
            plan_id: None,
            hash: None,
        };
        session.plan = None;
        match read_plan_file(&self.plan_file) {
            // An agent that could not work wrote nothing: that is the
            // problem, not the missing file.
            Written::Nothing if ran.failed.is_some() => {
                carried.problems = Vec::new();
            }
            Written::Nothing => {
                carried.problems = vec![format!(
                    "- you wrote no plan: the file {} does not exist",
                    self.plan_file_text
                )];
            }
            Written::Unreadable(why) => {
                judged.outcome = PlanRoundOutcome::Invalid;
                carried.problems = vec![format!("- {why}")];
            }
            Written::Bytes(bytes) => {
                save(&self.draft, &bytes)?;
                session.draft = Some(self.draft.clone());
                match format::parse(&bytes) {
                    Err(e) => {
                        judged.outcome = PlanRoundOutcome::Invalid;
                        let suggestion = e
                            .suggestion()
                            .map(|k| format!(" (did you mean `{k}`?)"))
                            .unwrap_or_default();
                        carried.problems =
                            vec![format!("- the file is not a valid plan: {e}{suggestion}")];
                    }
                    Ok(plan) => {
                        let mut review =
                            approval::review(self.store, &plan, Some(&self.base.to_string()))?;
                        review.base_name = self.base_name.clone();
                        judged.blocking = review.analysis.blocking();
                        judged.warnings = review.analysis.warnings();
                        judged.outcome = if judged.blocking == 0 {
                            PlanRoundOutcome::Passed
                        } else {
                            PlanRoundOutcome::Blocked
                        };
                        carried.problems = brief::findings_text(&review.analysis);
                        judged.plan_id = Some(plan.id.clone());
                        judged.hash = Some(format::plan_hash(&plan));
                        session.plan = Some((plan, review));
                    }
                }
                carried.last_bytes = Some(bytes);
            }
        }
        if stray > 0 {
            carried.problems.push(format!(
                "- you changed {stray} file(s) of the checkout besides the plan; they were thrown away (the checkout is read-only)"
            ));
        }
        if let Some(why) = &ran.failed {
            carried.problems.insert(0, format!("- the agent {why}"));
            if judged.outcome != PlanRoundOutcome::Passed {
                judged.outcome = PlanRoundOutcome::AgentFailed;
            }
        }
        if ran.interrupted {
            judged.outcome = PlanRoundOutcome::Interrupted;
        }
        Ok(judged)
    }

    /// Records the round in the log (problems masked and bounded) and
    /// gives its report.
    fn record_round(
        &self,
        round: u32,
        judged: &Judged,
        problems: &[String],
        stray: usize,
        ran: &Ran,
    ) -> Result<Round, LeadError> {
        let problems_masked: Vec<String> = problems.iter().map(|p| masking::mask_text(p)).collect();
        self.store.append(vec![Event::PlanRound {
            session: self.id.clone(),
            round,
            rounds: self.opts.rounds,
            agent: self.spec.name.clone(),
            base: self.base,
            outcome: judged.outcome,
            plan_id: judged.plan_id.clone(),
            hash: judged.hash.clone(),
            blocking: judged.blocking,
            warnings: judged.warnings,
            problems: problems_masked
                .iter()
                .take(PROBLEMS_RECORDED)
                .map(|p| head_chars(p, PROBLEM_BYTES))
                .collect(),
            draft: self.draft.to_string_lossy().into_owned(),
            stray,
            exit: ran.exit,
            timed_out: ran.timed_out,
            duration_ms: ran.duration_ms,
            usage: ran.usage.clone(),
            tail: ran.tail.clone(),
        }])?;
        Ok(Round {
            round,
            outcome: judged.outcome,
            blocking: judged.blocking,
            warnings: judged.warnings,
            problems: problems_masked,
            stray,
            usage: ran.usage.clone(),
        })
    }
}

/// One agent run's inputs.
struct AgentRun<'a> {
    prompt: &'a str,
    prompt_file: &'a Path,
    workdir: &'a Path,
    log_dir: &'a Path,
    round: u32,
    rounds: u32,
    plan_file: &'a Path,
    base: Oid,
    session: &'a str,
    timeout: Duration,
    sandbox: &'a crate::sandbox::Sandbox,
    common_dir: &'a Path,
    prices: &'a std::collections::BTreeMap<String, crate::agent::price::Price>,
}

/// How the agent's run went.
struct Ran {
    exit: Option<i32>,
    timed_out: bool,
    interrupted: bool,
    duration_ms: u64,
    usage: AgentUsage,
    tail: String,
    /// Why the run did not succeed, in words after "the agent".
    failed: Option<String>,
    /// Set when the agent cannot run at all now (missing, rate limited,
    /// its key refused): what it is, and the reason.
    unavailable: Option<(agent::Availability, String)>,
}

/// Runs the agent once exactly as attempts run theirs (see
/// [`crate::launch`]): the same command line, sandbox, environment
/// allow-list, supervisor, stream watch and usage reading.
async fn run_agent(spec: &AgentSpec, run: AgentRun<'_>, cancel: &CancellationToken) -> Ran {
    let env: Vec<(String, String)> = vec![
        ("ORCH_ROLE".into(), "lead".into()),
        ("ORCH_TASK".into(), "lead".into()),
        ("ORCH_ATTEMPT".into(), run.round.to_string()),
        ("ORCH_ROUND".into(), run.round.to_string()),
        ("ORCH_ROUNDS".into(), run.rounds.to_string()),
        ("ORCH_SESSION".into(), run.session.to_owned()),
        ("ORCH_BASE".into(), run.base.to_string()),
        ("ORCH_AGENT".into(), spec.name.clone()),
        (
            "ORCH_PLAN_FILE".into(),
            run.plan_file.to_string_lossy().into_owned(),
        ),
        (
            "ORCH_PROMPT_FILE".into(),
            run.prompt_file.to_string_lossy().into_owned(),
        ),
    ];
    let failed = |why: String| Ran {
        exit: None,
        timed_out: false,
        interrupted: false,
        duration_ms: 0,
        usage: AgentUsage::default(),
        tail: String::new(),
        failed: Some(why.clone()),
        unavailable: Some((agent::Availability::Missing, why)),
    };
    let launch = match crate::launch::agent(&crate::launch::AgentJob {
        spec,
        sandbox: run.sandbox,
        prompt: run.prompt,
        prompt_file: run.prompt_file,
        worktree: run.workdir,
        common_dir: run.common_dir,
        readable: Vec::new(),
        log_dir: run.log_dir,
        log_name: "agent",
        task: "lead",
        attempt: run.round,
        env: &env,
        allowed_commands: Vec::new(),
        filter: masking::line_filter(),
        writable: Vec::new(),
    }) {
        Ok(l) => l,
        Err(e) => return failed(format!("could not start: {e}")),
    };
    let start = Instant::now();
    let mut child = match GroupChild::spawn(&launch.group) {
        Ok(c) => c,
        Err(e) => return failed(format!("could not start: {e}")),
    };
    let ended = child
        .wait(tokio::time::Instant::now() + run.timeout, cancel, GRACE)
        .await;
    let tail = format!(
        "{}{}",
        crate::process::tail_of(&launch.group.stdout, TAIL_BYTES),
        crate::process::tail_of(&launch.group.stderr, TAIL_BYTES)
    );
    let read = crate::launch::read(spec, &ended, &launch, run.prices, &tail);
    let unavailable = if ended.timed_out || ended.cancelled {
        None
    } else {
        read.unavailable.clone().map(|why| (read.availability, why))
    };
    let failed = if ended.timed_out {
        Some(format!(
            "was stopped after {}s (the round's timeout)",
            run.timeout.as_secs()
        ))
    } else if ended.cancelled {
        Some("was interrupted".to_owned())
    } else if let Some((_, why)) = &unavailable {
        Some(format!("is unavailable: {why}"))
    } else if ended.exit != Some(0) {
        Some(match ended.exit {
            Some(c) => format!("exited with status {c}"),
            None => "was killed by a signal".to_owned(),
        })
    } else {
        None
    };
    // The cause once: an unavailable agent's reason quotes it already.
    let failed = match (failed, &read.cause) {
        (Some(f), Some(cause)) if !f.contains(cause.as_str()) => {
            Some(format!("{f}: {}", masking::mask_text(cause)))
        }
        (f, _) => f,
    };
    Ran {
        exit: ended.exit,
        timed_out: ended.timed_out,
        interrupted: ended.cancelled,
        duration_ms: start.elapsed().as_millis() as u64,
        usage: read.usage,
        tail: masking::mask_text(&crate::gate::command::tail_chars(&tail, TAIL_BYTES)),
        failed,
        unavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recorded_problems_keep_their_start() {
        assert_eq!(head_chars("short", 10), "short");
        assert_eq!(head_chars("ééééé", 5), "éé…");
    }

    #[test]
    fn the_plan_file_is_named_for_the_plan_id_and_avoids_the_tree() {
        assert_eq!(
            plan_name("Add a checkout flow", &[]),
            "add-a-checkout-flow.json"
        );
        assert_eq!(
            plan_name(
                "Package",
                &["package.json".into(), "package-2.json/x".into()]
            ),
            "package-3.json"
        );
    }
}
