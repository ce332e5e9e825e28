//! `git orch plan`: write, check, store and read plans.

use std::path::{Path, PathBuf};
use tokio_util::sync::CancellationToken;

use clap::{Args, Subcommand};

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;
use crate::approval::{self, Review};
use crate::ids::PlanId;
use crate::lead;
use crate::plan::format::{self, MAX_PLAN_BYTES, Plan};
use crate::plan::revisions::{self, Added, PlanRevision};
use crate::plan::{Severity, brief, schema};
use crate::store::Store;

/// Write, check, store and read plans.
#[derive(Debug, Args)]
pub struct PlanArgs {
    #[command(subcommand)]
    pub command: PlanCommand,
}

#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    New(NewArgs),
    Check(CheckArgs),
    Add(AddArgs),
    Show(ShowArgs),
    List(ListArgs),
    Diff(DiffArgs),
    Schema(SchemaArgs),
}

/// Write a plan for an instruction: print a brief for a lead agent, or run
/// one with --agent until its plan passes `plan check`.
///
/// Without --agent, prints a self-contained brief: the plan format and its
/// rules, the skeleton, a summary of the repository to choose globs from,
/// and the pinch points `plan check` applies here. --skeleton prints only
/// the skeleton.
///
/// With --agent, runs that agent headless (the same adapters, timeout and
/// usage recording as attempts) in a read-only checkout of the base, with
/// the brief as its prompt; it writes the plan to the file the brief names
/// (also in ORCH_PLAN_FILE). git-orch checks the plan; blocking findings go
/// back to the agent as the next round's context. The draft is saved to
/// --out, or under .git/orch/drafts/ (printed), and shown with its check,
/// followed by the commands that store and approve it. Every round is a
/// `plan_round` event. Exit codes: 0 the plan passes the check, 1 it still
/// fails after the last round (the draft is kept), 64 --budget spent, 130
/// interrupted.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// What the plan should achieve.
    #[arg(required_unless_present = "skeleton")]
    pub instruction: Option<String>,
    /// Print only the plan skeleton (JSON, keys in natural order).
    #[arg(long, conflicts_with_all = ["agent", "base"])]
    pub skeleton: bool,
    /// Run this agent as the lead agent (a built-in such as claude, or an
    /// [agent "NAME"] of .orch/config).
    #[arg(long, value_name = "NAME", add = super::completions::agents())]
    pub agent: Option<String>,
    /// Save the plan to this file (it must not exist yet) instead of
    /// .git/orch/drafts/.
    #[arg(long, value_name = "FILE", requires = "agent")]
    pub out: Option<PathBuf>,
    /// Most rounds of check and fix (default 3).
    #[arg(long, value_name = "N", requires = "agent", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub rounds: Option<u32>,
    /// Plan against this commit (default: HEAD).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Stop the agent after this long per round (e.g. 900, 15m; default:
    /// the agent's timeout, else orch.timeout).
    #[arg(long, value_name = "DUR", requires = "agent", value_parser = parse_duration)]
    pub timeout: Option<std::time::Duration>,
    /// Start no new round once reported agent cost reaches this many USD.
    #[arg(long, value_name = "USD", requires = "agent")]
    pub budget: Option<f64>,
}

fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crate::config::parse_duration(s)
        .ok_or_else(|| format!("{s:?} is not a duration (e.g. 900, 15m, 2h)"))
}

/// Validate and analyse a plan: ownership overlaps, dependency order,
/// pinch points, fan-out. Exit 0 clean, 3 blocking findings, 1 invalid.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A plan file (`-` for stdin), or the id of a stored plan.
    #[arg(add = super::completions::plans_or_files())]
    pub plan: String,
    /// Check against this commit's files (default: the plan's target
    /// branch, else HEAD).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
    /// Print the result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Store a plan as a new plan or a new revision under refs/orch/plans/<id>.
///
/// An invalid plan, or one whose dependency graph is broken, writes
/// nothing; identical content is a no-op.
#[derive(Debug, Args)]
pub struct AddArgs {
    /// The plan file (`-` for stdin).
    #[arg(value_hint = clap::ValueHint::FilePath)]
    pub file: String,
    /// Store under this id instead of the file's `id`.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// The commit whose files the plan is checked against before storing
    /// (default: the current branch's tip): a blocking finding is counted
    /// in a warning after storing (`git orch plan check --base` lists
    /// them).
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
}

/// Show a stored plan revision.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// The plan id.
    #[arg(add = super::completions::plans())]
    pub id: String,
    /// Revision number (default: the latest).
    #[arg(long, value_name = "N")]
    pub rev: Option<u32>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// List stored plans with their revisions, hash and approval state.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Show what changed between two revisions of a plan (default: the last
/// two; one REV: that revision against the latest).
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The plan id.
    #[arg(add = super::completions::plans())]
    pub id: String,
    /// The older revision (alone: compared with the latest).
    pub from: Option<u32>,
    /// The newer revision.
    pub to: Option<u32>,
}

/// Print the JSON Schema of the plan format.
#[derive(Debug, Args)]
pub struct SchemaArgs {}

pub fn run(cli: &GlobalArgs, args: &PlanArgs) -> CommandResult {
    match &args.command {
        PlanCommand::Schema(_) => {
            output::Out::new().line(schema::SCHEMA.trim_end());
            Ok(exit::OK)
        }
        PlanCommand::New(a) => new(cli, a),
        PlanCommand::Check(a) => check(cli, a),
        PlanCommand::Add(a) => add(cli, a),
        PlanCommand::Show(a) => show(cli, a),
        PlanCommand::List(a) => list(cli, a),
        PlanCommand::Diff(a) => diff(cli, a),
    }
}

/// Reads a plan file (or stdin for `-`), bounded in size before reading.
pub fn read_plan_file(path: &str) -> Result<Vec<u8>, CommandError> {
    use std::io::Read;
    let limit = MAX_PLAN_BYTES as u64 + 1;
    let mut bytes = Vec::new();
    let result = if path == "-" {
        std::io::stdin().take(limit).read_to_end(&mut bytes)
    } else {
        std::fs::File::open(path).and_then(|f| f.take(limit).read_to_end(&mut bytes))
    };
    result.map_err(|e| CommandError::error(format!("cannot read {path}: {e}")))?;
    Ok(bytes)
}

fn parse_plan(bytes: &[u8], origin: &str) -> Result<Plan, CommandError> {
    format::parse(bytes).map_err(|e| {
        let mut out = CommandError::from(e);
        out.message = format!("{origin}: {}", out.message);
        out
    })
}

fn plan_id(text: &str) -> Result<PlanId, CommandError> {
    PlanId::new(text).map_err(|e| CommandError::error(e.to_string()))
}

/// A plan given as a file or as a stored plan's id.
fn load(store: &Store, arg: &str) -> Result<(Plan, String), CommandError> {
    if arg == "-" || Path::new(arg).is_file() {
        let bytes = read_plan_file(arg)?;
        return Ok((parse_plan(&bytes, arg)?, arg.to_owned()));
    }
    let id = PlanId::new(arg).map_err(|_| {
        super::suggest::with_plan_hint(
            CommandError::error(format!("no file {arg:?}, and it is not a plan id either"))
                .hint("give a plan file, or an id from `git orch plan list`"),
            arg,
            store,
        )
    })?;
    let rev = revisions::latest(store, &id)?.ok_or_else(|| {
        super::suggest::with_plan_hint(
            CommandError::error(format!("no file {arg:?} and no stored plan {arg}"))
                .hint("`git orch plan list` shows the stored plans"),
            arg,
            store,
        )
    })?;
    Ok((rev.plan, format!("plan {id} revision {}", rev.revision)))
}

fn review(store: &Store, plan: &Plan, base: Option<&str>) -> Result<Review, CommandError> {
    approval::review(store, plan, base).map_err(CommandError::from)
}

/// Renders findings for people; used by `check`, `add` and `approve`.
pub fn render_findings(review: &Review) -> Vec<String> {
    let mut lines = Vec::new();
    for severity in [Severity::Blocking, Severity::Warning, Severity::Info] {
        let list: Vec<_> = review
            .analysis
            .findings
            .iter()
            .filter(|f| f.severity == severity)
            .collect();
        if list.is_empty() {
            continue;
        }
        lines.push(match severity {
            Severity::Blocking => format!("blocking ({}):", list.len()),
            Severity::Warning => format!("warnings ({}):", list.len()),
            Severity::Info => format!("relied on ({}):", list.len()),
        });
        for f in list {
            lines.push(format!("  [{}] {}", f.code, f.message));
        }
    }
    lines
}

/// The verdict of a review for people: findings, order, serial and
/// independent subtasks (the fan-out), the pinch points, the totals.
fn review_lines(review: &Review) -> Vec<String> {
    let a = &review.analysis;
    let mut lines = render_findings(review);
    if !a.waves.is_empty() {
        lines.push("order:".into());
        for (n, wave) in a.waves.iter().enumerate() {
            lines.push(format!("  wave {}: {}", n + 1, wave.join(", ")));
        }
    }
    if !a.serial.is_empty() {
        lines.push(format!("serial: {}", a.serial.join(", ")));
    }
    lines.push(format!(
        "independent: {} ({})",
        a.independent.len(),
        a.independent.join(", ")
    ));
    if !a.pinch_points.is_empty() {
        const SHOWN: usize = 20;
        let units: Vec<&str> = a
            .pinch_points
            .iter()
            .take(SHOWN)
            .map(|p| p.unit.as_str())
            .collect();
        lines.push(format!(
            "pinch points here ({}): {}{}",
            a.pinch_points.len(),
            units.join(", "),
            if a.pinch_points.len() > SHOWN {
                ", … (--json lists them all)"
            } else {
                ""
            }
        ));
    }
    let blocking = a.blocking();
    let warnings = a.warnings();
    lines.push(format!(
        "{blocking} blocking, {warnings} warning{}",
        if warnings == 1 { "" } else { "s" }
    ));
    lines
}

fn base_label(review: &Review) -> String {
    match review.base {
        Some(c) => format!("{} ({})", review.base_name, &c.to_string()[..12]),
        None => "an empty tree".into(),
    }
}

fn check(cli: &GlobalArgs, args: &CheckArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let (plan, origin) = match load(&store, &args.plan) {
        Ok(p) => p,
        Err(e) if args.json => {
            let json = serde_json::json!({ "valid": false, "error": e.message });
            output::Out::new().line(&json.to_string());
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let review = review(&store, &plan, args.base.as_deref())?;
    let a = &review.analysis;
    let blocking = a.blocking();
    if args.json {
        let json = serde_json::json!({
            "valid": true,
            "plan_id": plan.id,
            "hash": format::plan_hash(&plan),
            "base": review.base.map(|c| c.to_string()),
            "blocking": blocking,
            "analysis": a,
            "worktree": worktree_json(&store, review.base),
        });
        output::Out::new().line(&json.to_string());
    } else {
        let mut out = output::Out::new();
        out.line(&format!(
            "{origin}: plan {} with {} subtask{}, checked against {} files of {}",
            plan.id,
            plan.subtasks.len(),
            if plan.subtasks.len() == 1 { "" } else { "s" },
            a.paths_checked,
            base_label(&review)
        ));
        for l in review_lines(&review) {
            out.line(&l);
        }
        for l in worktree_lines(&store, review.base) {
            out.line(&l);
        }
    }
    Ok(if blocking > 0 {
        exit::BLOCKED
    } else {
        exit::OK
    })
}

fn add(cli: &GlobalArgs, args: &AddArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let bytes = read_plan_file(&args.file)?;
    let mut plan = parse_plan(&bytes, &args.file)?;
    if let Some(id) = &args.id {
        plan.id = plan_id(id)?;
    }
    let review = review(&store, &plan, args.base.as_deref())?;
    if review.analysis.graph_broken() {
        for l in render_findings(&review) {
            output::status(&l);
        }
        return Err(CommandError::with_code(
            exit::BLOCKED,
            format!(
                "plan {} has a broken dependency graph; nothing was stored\nhint: fix depends_on, then add it again",
                plan.id
            ),
        ));
    }
    let added = revisions::add(&store, &plan)?;
    match added {
        Added::Unchanged(rev) => output::status(&format!(
            "Plan {} is identical to revision {} ({}); nothing was written.",
            rev.plan.id, rev.revision, rev.hash
        )),
        Added::Stored(rev) => {
            output::Out::new().line(&format!("{} {} {}", rev.plan.id, rev.revision, rev.hash));
            output::status(&format!(
                "Stored plan {} revision {} ({}).",
                rev.plan.id, rev.revision, rev.hash
            ));
            let blocking = review.analysis.blocking();
            if blocking > 0 {
                output::status(&format!(
                    "warning: this revision has {blocking} blocking finding(s); approval is refused until they are fixed (`git orch plan check {}` lists them)",
                    rev.plan.id
                ));
            } else {
                output::status(&format!(
                    "Next: review it (`git orch plan show {}`) and approve it (`git orch approve {}`).",
                    rev.plan.id, rev.plan.id
                ));
            }
        }
    }
    Ok(exit::OK)
}

fn revision_of(store: &Store, id: &PlanId, rev: Option<u32>) -> Result<PlanRevision, CommandError> {
    let result = match rev {
        Some(n) => revisions::revision(store, id, n),
        None => revisions::latest(store, id)
            .and_then(|r| r.ok_or_else(|| revisions::RevisionError::NoSuchPlan(id.to_string()))),
    };
    result.map_err(|e| match e {
        revisions::RevisionError::NoSuchPlan(_) => {
            super::suggest::with_plan_hint(e.into(), id.as_str(), store)
        }
        e => e.into(),
    })
}

fn show(cli: &GlobalArgs, args: &ShowArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let id = plan_id(&args.id)?;
    let rev = revision_of(&store, &id, args.rev)?;
    let mut out = output::Out::new();
    if args.json {
        let plan: serde_json::Value =
            serde_json::from_slice(&format::canonical_bytes(&rev.plan)).expect("canonical JSON");
        let json = serde_json::json!({
            "plan_id": rev.plan.id,
            "revision": rev.revision,
            "hash": rev.hash,
            "commit": rev.commit.to_string(),
            "plan": plan,
        });
        out.line(&json.to_string());
        return Ok(exit::OK);
    }
    out.line(&format!(
        "plan {} revision {} ({})",
        rev.plan.id, rev.revision, rev.hash
    ));
    for l in plan_lines(&rev.plan) {
        out.line(&l);
    }
    Ok(exit::OK)
}

/// A plan for people: instruction, then each subtask with what it owns.
fn plan_lines(p: &Plan) -> Vec<String> {
    let mut lines = vec![format!("instruction: {}", p.instruction)];
    if let Some(t) = &p.target {
        lines.push(format!("target: {t}"));
    }
    for s in &p.subtasks {
        lines.push(String::new());
        let mut flags = Vec::new();
        if s.serial_only {
            flags.push("serial_only".to_owned());
        }
        if !s.depends_on.is_empty() {
            let deps: Vec<&str> = s.depends_on.iter().map(|d| d.as_str()).collect();
            flags.push(format!("after {}", deps.join(", ")));
        }
        lines.push(format!(
            "{}: {}{}",
            s.id,
            s.title,
            if flags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", flags.join("; "))
            }
        ));
        lines.push(format!("  owns: {}", s.owned_globs.join(", ")));
        lines.push(format!("  deliverable: {}", s.deliverable));
        lines.push(format!("  verification: {}", s.verification));
    }
    lines
}

fn list(cli: &GlobalArgs, args: &ListArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let mut rows = Vec::new();
    for id in revisions::ids(&store)? {
        let all = revisions::all(&store, &id)?;
        let Some(latest) = all.last() else { continue };
        let state = match crate::run::approval_verdict(&store, &id) {
            Ok(approval::Verdict::Valid { .. }) => "approved",
            Ok(approval::Verdict::NoDecision { .. }) => "unapproved",
            Ok(approval::Verdict::Revise { .. }) => "revise",
            Ok(approval::Verdict::Stale { .. }) => "stale",
            Ok(approval::Verdict::Unsigned { .. }) => "unsigned",
            Ok(approval::Verdict::Unrecorded { .. }) => "unrecorded",
            Err(_) => "unreadable",
        };
        rows.push(serde_json::json!({
            "plan_id": id,
            "revisions": all.len(),
            "revision": latest.revision,
            "hash": latest.hash,
            "subtasks": latest.plan.subtasks.len(),
            "approval": state,
        }));
    }
    let mut out = output::Out::new();
    if args.json {
        for r in rows {
            out.line(&r.to_string());
        }
        return Ok(exit::OK);
    }
    if rows.is_empty() {
        output::status("No plans stored yet; `git orch plan add <file>` stores one.");
    }
    for r in rows {
        out.line(&format!(
            "{:<24} rev {:<3} {:<10} {:>3} subtasks  {}",
            r["plan_id"].as_str().unwrap_or_default(),
            r["revision"],
            r["approval"].as_str().unwrap_or_default(),
            r["subtasks"],
            &r["hash"].as_str().unwrap_or_default()
                [..19.min(r["hash"].as_str().unwrap_or_default().len())],
        ));
    }
    Ok(exit::OK)
}

fn diff(cli: &GlobalArgs, args: &DiffArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let id = plan_id(&args.id)?;
    let all = revisions::all(&store, &id)?;
    let latest = all.last().map(|r| r.revision).ok_or_else(|| {
        super::suggest::with_plan_hint(
            revisions::RevisionError::NoSuchPlan(id.to_string()).into(),
            id.as_str(),
            &store,
        )
    })?;
    let (from, to) = match (args.from, args.to) {
        (Some(a), Some(b)) => (a, b),
        (Some(a), None) => (a, latest),
        (None, _) if latest < 2 => {
            output::status(&format!(
                "Plan {id} has only one revision; nothing to compare."
            ));
            return Ok(exit::OK);
        }
        (None, _) => (latest - 1, latest),
    };
    let a = revision_of(&store, &id, Some(from))?;
    let b = revision_of(&store, &id, Some(to))?;
    let (ta, tb) = (format::pretty(&a.plan), format::pretty(&b.plan));
    let diff = similar::TextDiff::from_lines(&ta, &tb);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(
            &format!("plan {id} revision {from} ({})", a.hash),
            &format!("plan {id} revision {to} ({})", b.hash),
        )
        .to_string();
    let mut out = output::Out::new();
    for l in text.lines() {
        out.line(l);
    }
    Ok(exit::OK)
}

fn new(cli: &GlobalArgs, args: &NewArgs) -> CommandResult {
    if args.skeleton {
        let instruction = args
            .instruction
            .as_deref()
            .unwrap_or("Say what the plan is for");
        output::Out::new().line(&brief::skeleton(instruction));
        // Warm worktrees: what [worktree] this project's files suggest
        // (to stderr: stdout is the plan).
        if let Ok(store) = open_store(&cli.directory)
            && let Some(root) = store.workdir()
            && let Some(text) = crate::config::worktree::suggested(root)
        {
            let configured = store
                .resolve_commit("HEAD")
                .ok()
                .and_then(|head| store.project_config(head).ok())
                .is_some_and(|v| v.section("worktree", None).is_some());
            if !configured {
                output::status(
                    "Suggested for .orch/config, so agents start with warm caches and your local files:",
                );
                for l in text.lines() {
                    output::status(&format!("  {}", l.replace('\t', "    ")));
                }
            }
        }
        return Ok(exit::OK);
    }
    let instruction = args.instruction.clone().unwrap_or_default();
    if instruction.trim().is_empty() {
        return Err(CommandError::with_code(
            exit::USAGE,
            "the instruction is empty\nhint: say what the plan should achieve, e.g. git orch plan new \"Add a checkout flow\"",
        ));
    }
    let store = open_store(&cli.directory)?;
    if let Some(agent) = &args.agent {
        return new_with_agent(cli, &store, args, agent, instruction);
    }
    let (base, base_name) = match &args.base {
        Some(b) => (
            store.resolve_commit(b)?.ok_or_else(|| {
                CommandError::error(format!(
                    "--base {b:?} does not name a commit\nhint: give a branch, tag or commit id"
                ))
            })?,
            b.clone(),
        ),
        None => match store.resolve_commit("HEAD")? {
            Some(c) => (c, "HEAD".to_owned()),
            None => {
                return Err(CommandError::error(
                    "there is no commit to plan against\nhint: commit something first",
                ));
            }
        },
    };
    let paths = store.tree_paths(base)?;
    let settings = crate::config::Settings::from_values(&store.project_config(Some(base))?)
        .map_err(|e| CommandError::error(format!("{e}\nhint: fix .orch/config at {base_name}")))?;
    let rules = crate::plan::pinch::rules(&settings.pinch_paths, &settings.pinch_ignore);
    let base_label = format!("{base_name} ({})", &base.to_string()[..12]);
    let text = brief::render(&brief::BriefInput {
        instruction: &instruction,
        base: &base_label,
        paths: &paths,
        rules: &rules,
        plan_file: None,
    });
    let mut out = output::Out::new();
    for l in text.lines() {
        out.line(l);
    }
    Ok(exit::OK)
}

/// `plan new --agent`: runs the lead agent's session and shows its plan.
fn new_with_agent(
    cli: &GlobalArgs,
    store: &Store,
    args: &NewArgs,
    agent: &str,
    instruction: String,
) -> CommandResult {
    if args.budget.is_some_and(|b| !(b.is_finite() && b >= 0.0)) {
        return Err(CommandError::with_code(
            exit::USAGE,
            "--budget must be a non-negative number",
        ));
    }
    // Checked before the agent runs, so a bad --out costs nothing.
    let out_path = match &args.out {
        Some(p) => {
            let abs = super::globals::start_dir(&cli.directory).join(p);
            let in_work_tree = lead::check_out(store, &abs)?;
            if in_work_tree {
                output::status(&format!(
                    "note: {} is inside the work tree and not ignored: `git orch run` refuses a work tree with untracked files, so remove it (or ignore it) once the plan is stored",
                    abs.display()
                ));
            }
            Some(abs)
        }
        None => None,
    };
    let opts = lead::Options {
        instruction,
        agent: agent.to_owned(),
        rounds: args.rounds.unwrap_or(lead::DEFAULT_ROUNDS),
        base: args.base.clone(),
        out: out_path,
        timeout: args.timeout,
        budget: args.budget,
    };
    let runtime = super::globals::scheduler()?;
    let cancel = CancellationToken::new();
    let tx = cancel.clone();
    let session = runtime.block_on(async {
        // Registered before the agent starts, so a Ctrl-C at any moment is
        // caught and stops it.
        let mut sigint = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
            .map_err(|e| CommandError::error(format!("cannot watch for Ctrl-C: {e}")))?;
        let interrupt = async move {
            if sigint.recv().await.is_some() {
                tx.cancel();
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            s = lead::run_session(store, &opts, &cancel, &show_progress) => {
                s.map_err(CommandError::from)
            }
            _ = interrupt => unreachable!("the interrupt future never completes"),
        }
    });
    let session = session?;
    let mut out = output::Out::new();
    let draft = session.draft.as_ref().map(|d| d.display().to_string());
    if let Some((plan, review)) = &session.plan {
        out.line(&format!(
            "plan {} (draft, not stored yet): {}",
            plan.id,
            draft.as_deref().unwrap_or_default()
        ));
        for l in plan_lines(plan) {
            out.line(&l);
        }
        out.line("");
        out.line(&format!(
            "checked against {} files of {}:",
            review.analysis.paths_checked,
            base_label(review)
        ));
        for l in review_lines(review) {
            out.line(&l);
        }
        let independent = review.analysis.independent.len();
        out.line(&if independent >= crate::plan::analysis::MIN_INDEPENDENT {
            format!("fan-out: {independent} agents can start at once")
        } else {
            format!(
                "fan-out: only {independent} subtask(s) can start at once; one agent doing the whole instruction may be better"
            )
        });
    }
    let rounds = session.rounds.len();
    let spent = if session.cost_usd > 0.0 {
        format!(", {} reported", crate::agent::price::usd(session.cost_usd))
    } else {
        String::new()
    };
    match (&session.end, &session.plan, &draft) {
        (lead::End::Passed, Some((plan, _)), Some(d)) => {
            let d = crate::process::shell_quote(d);
            out.line("");
            out.line("next:");
            out.line(&format!("  git orch plan add {d}"));
            out.line(&format!("  git orch approve {}", plan.id));
            output::status(&format!(
                "The plan passes the check after {rounds} round(s){spent}; session {}.",
                session.id
            ));
            Ok(exit::OK)
        }
        (lead::End::Budget { spent, budget }, _, _) => Err(CommandError::with_code(
            exit::BUDGET,
            format!(
                "stopped after {rounds} round(s): {} reported of a {} budget{}\nhint: rerun with a larger --budget",
                crate::agent::price::usd(*spent),
                crate::agent::price::usd(*budget),
                kept(&draft)
            ),
        )),
        (lead::End::Interrupted, _, _) => Err(CommandError::with_code(
            exit::INTERRUPTED,
            format!("interrupted in round {rounds}{}", kept(&draft)),
        )),
        // The agent's own words are in the round's report above: said once.
        (lead::End::Unavailable { class, reason }, _, _) => {
            let what = match class {
                crate::agent::Availability::Missing => reason.clone(),
                _ => crate::agent::Unavailable {
                    class: *class,
                    evidence: String::new(),
                }
                .reason(),
            };
            Err(CommandError::error(format!(
                "the lead agent {agent} could not work in round {rounds}: {what}{}\nhint: {}",
                kept(&draft),
                unavailable_hint(*class, agent)
            )))
        }
        _ => {
            if let Some(last) = session.rounds.last()
                && session.plan.is_none()
            {
                for p in &last.problems {
                    out.line(p);
                }
            }
            Err(CommandError::error(format!(
                "the plan does not pass the check after {rounds} round(s){}\nhint: {}",
                kept(&draft),
                match &draft {
                    Some(d) => format!(
                        "fix it by hand and check it with `git orch plan check {}`, or run plan new again with more --rounds",
                        crate::process::shell_quote(d)
                    ),
                    None =>
                        "the agent never wrote a plan file; check its output under .git/orch/lead/"
                            .into(),
                }
            )))
        }
    }
}

/// What to do about an agent that could not work: waiting helps a rate
/// limit or an overloaded provider, never a refused key.
fn unavailable_hint(class: crate::agent::Availability, agent: &str) -> String {
    use crate::agent::Availability;
    match class {
        Availability::AuthFailed => format!(
            "check the key or login {agent} uses (`git orch agents {agent}` shows what it gets), or choose another --agent"
        ),
        Availability::Missing => {
            format!(
                "check that {agent} is installed (`git orch agents {agent}`), or choose another --agent"
            )
        }
        Availability::Unreachable => format!(
            "check that {agent}'s provider or gateway is up and its address right, or choose another --agent"
        ),
        Availability::RateLimited | Availability::Overloaded | Availability::Available => {
            "try again later, or choose another --agent".to_owned()
        }
    }
}

fn kept(draft: &Option<String>) -> String {
    match draft {
        Some(d) => format!("; the draft is kept at {d}"),
        None => String::new(),
    }
}

/// Round progress on stderr.
fn show_progress(p: lead::Progress) {
    match p {
        lead::Progress::RoundStarted {
            round,
            rounds,
            agent,
            base,
        } => output::status(&format!(
            "Round {round}/{rounds}: {agent} writes the plan in a read-only checkout of {base}…"
        )),
        lead::Progress::RoundEnded {
            round,
            rounds,
            report,
        } => {
            let what = match report.outcome {
                crate::event::PlanRoundOutcome::Passed => {
                    format!("the plan passes the check ({} warning(s))", report.warnings)
                }
                crate::event::PlanRoundOutcome::Blocked if round < rounds => format!(
                    "{} blocking finding(s); they go back to the agent",
                    report.blocking
                ),
                crate::event::PlanRoundOutcome::Blocked => {
                    format!("{} blocking finding(s)", report.blocking)
                }
                other => other.as_str().replace('_', " "),
            };
            output::status(&format!("Round {round}: {what}"));
            if report.stray > 0 {
                output::status(&format!(
                    "  the agent changed {} file(s) of its read-only checkout; they were thrown away",
                    report.stray
                ));
            }
            if report.outcome != crate::event::PlanRoundOutcome::Passed {
                for p in report
                    .problems
                    .iter()
                    .filter(|p| !p.starts_with("- warning"))
                {
                    output::status(&format!("  {p}"));
                }
            }
        }
    }
}

/// What every attempt's checkout gets besides its commit (`[worktree]`
/// at `base`): so whoever checks a plan sees what its agents get.
fn worktree_lines(store: &Store, base: Option<crate::store::Oid>) -> Vec<String> {
    let Some(settings) = store
        .project_config(base)
        .ok()
        .and_then(|v| crate::config::Settings::from_values(&v).ok())
    else {
        return Vec::new();
    };
    crate::sandbox::warm_notices(&settings.sandbox, store.common_dir())
}

/// [`worktree_lines`] for `--json`.
fn worktree_json(store: &Store, base: Option<crate::store::Oid>) -> serde_json::Value {
    let Some(settings) = store
        .project_config(base)
        .ok()
        .and_then(|v| crate::config::Settings::from_values(&v).ok())
    else {
        return serde_json::Value::Null;
    };
    let w = &settings.sandbox.worktree;
    serde_json::json!({
        "include": w.include,
        "cache": w.cache.iter().map(ToString::to_string).collect::<Vec<_>>(),
        "notices": crate::sandbox::warm_notices(&settings.sandbox, store.common_dir()),
    })
}
