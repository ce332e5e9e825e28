//! `git orch plan`: write, check, store and read plans.

use std::collections::BTreeMap;
use std::path::Path;

use clap::{Args, Subcommand};

use super::{Cli, CommandError, CommandResult, exit, open_store, output};
use crate::approval::{self, Review};
use crate::ids::PlanId;
use crate::plan::format::{self, MAX_PLAN_BYTES, Plan};
use crate::plan::revisions::{self, Added, PlanRevision};
use crate::plan::{Severity, schema};
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

/// Print a brief for a lead agent: how to split the instruction, the plan
/// skeleton, and a summary of this repository's tree to choose globs from.
#[derive(Debug, Args)]
pub struct NewArgs {
    /// What the plan should achieve.
    pub instruction: String,
}

/// Validate and analyse a plan: ownership overlaps, dependency order,
/// pinch points, fan-out. Exit 0 clean, 3 blocking findings, 1 invalid.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// A plan file (`-` for stdin), or the id of a stored plan.
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
    pub file: String,
    /// Store under this id instead of the file's `id`.
    #[arg(long, value_name = "ID")]
    pub id: Option<String>,
    /// Base used for the analysis shown after storing.
    #[arg(long, value_name = "REF")]
    pub base: Option<String>,
}

/// Show a stored plan revision.
#[derive(Debug, Args)]
pub struct ShowArgs {
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
    pub id: String,
    pub from: Option<u32>,
    pub to: Option<u32>,
}

/// Print the JSON Schema of the plan format.
#[derive(Debug, Args)]
pub struct SchemaArgs {}

pub fn run(cli: &Cli, args: &PlanArgs) -> CommandResult {
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
    format::parse(bytes).map_err(|e| CommandError::error(format!("{origin}: {e}")))
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
        CommandError::error(format!(
            "no file {arg:?}, and it is not a plan id either\nhint: give a plan file, or an id from `git orch plan list`"
        ))
    })?;
    let rev = revisions::latest(store, &id)
        .map_err(|e| CommandError::error(e.to_string()))?
        .ok_or_else(|| {
            CommandError::error(format!(
                "no file {arg:?} and no stored plan {arg}\nhint: `git orch plan list` shows the stored plans"
            ))
        })?;
    Ok((rev.plan, format!("plan {id} revision {}", rev.revision)))
}

fn review(store: &Store, plan: &Plan, base: Option<&str>) -> Result<Review, CommandError> {
    approval::review(store, plan, base).map_err(|e| CommandError::error(e.to_string()))
}

/// Renders findings for people; used by `check`, `add` and `approve`.
pub fn render_findings(review: &Review) -> Vec<String> {
    let mut lines = Vec::new();
    for severity in [Severity::Blocking, Severity::Warning] {
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
        });
        for f in list {
            lines.push(format!("  [{}] {}", f.code, f.message));
        }
    }
    lines
}

fn base_label(review: &Review) -> String {
    match review.base {
        Some(c) => format!("{} ({})", review.base_name, &c.to_string()[..12]),
        None => "an empty tree".into(),
    }
}

fn check(cli: &Cli, args: &CheckArgs) -> CommandResult {
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
        });
        output::Out::new().line(&json.to_string());
    } else {
        let mut out = output::Out::new();
        out.line(&format!(
            "{origin}: plan {} with {} subtasks, checked against {} files of {}",
            plan.id,
            plan.subtasks.len(),
            a.paths_checked,
            base_label(&review)
        ));
        for l in render_findings(&review) {
            out.line(&l);
        }
        if !a.waves.is_empty() {
            out.line("order:");
            for (n, wave) in a.waves.iter().enumerate() {
                out.line(&format!("  wave {}: {}", n + 1, wave.join(", ")));
            }
        }
        if !a.serial.is_empty() {
            out.line(&format!("serial: {}", a.serial.join(", ")));
        }
        out.line(&format!(
            "independent: {} ({})",
            a.independent.len(),
            a.independent.join(", ")
        ));
        let warnings = a.findings.len() - blocking;
        out.line(&format!("{blocking} blocking, {warnings} warnings"));
    }
    Ok(if blocking > 0 {
        exit::BLOCKED
    } else {
        exit::OK
    })
}

fn add(cli: &Cli, args: &AddArgs) -> CommandResult {
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
    let added = revisions::add(&store, &plan).map_err(|e| CommandError::error(e.to_string()))?;
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
    result.map_err(|e| CommandError::error(e.to_string()))
}

fn show(cli: &Cli, args: &ShowArgs) -> CommandResult {
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
    let p = &rev.plan;
    out.line(&format!(
        "plan {} revision {} ({})",
        p.id, rev.revision, rev.hash
    ));
    out.line(&format!("instruction: {}", p.instruction));
    if let Some(t) = &p.target {
        out.line(&format!("target: {t}"));
    }
    for s in &p.subtasks {
        out.line("");
        let mut flags = Vec::new();
        if s.serial_only {
            flags.push("serial_only".to_owned());
        }
        if !s.depends_on.is_empty() {
            let deps: Vec<&str> = s.depends_on.iter().map(|d| d.as_str()).collect();
            flags.push(format!("after {}", deps.join(", ")));
        }
        out.line(&format!(
            "{}: {}{}",
            s.id,
            s.title,
            if flags.is_empty() {
                String::new()
            } else {
                format!(" [{}]", flags.join("; "))
            }
        ));
        out.line(&format!("  owns: {}", s.owned_globs.join(", ")));
        out.line(&format!("  deliverable: {}", s.deliverable));
        out.line(&format!("  verification: {}", s.verification));
    }
    Ok(exit::OK)
}

fn list(cli: &Cli, args: &ListArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let require_signed = store
        .config_get("orch.requireSignedApprovals")?
        .is_some_and(|v| v == "true");
    let mut rows = Vec::new();
    for id in revisions::ids(&store).map_err(|e| CommandError::error(e.to_string()))? {
        let all = revisions::all(&store, &id).map_err(|e| CommandError::error(e.to_string()))?;
        let Some(latest) = all.last() else { continue };
        let state = match approval::verify(&store, &id, require_signed) {
            Ok(approval::Verdict::Valid { .. }) => "approved",
            Ok(approval::Verdict::NoDecision { .. }) => "unapproved",
            Ok(approval::Verdict::Revise { .. }) => "revise",
            Ok(approval::Verdict::Stale { .. }) => "stale",
            Ok(approval::Verdict::Unsigned { .. }) => "unsigned",
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

fn diff(cli: &Cli, args: &DiffArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let id = plan_id(&args.id)?;
    let all = revisions::all(&store, &id).map_err(|e| CommandError::error(e.to_string()))?;
    let latest = all.last().map(|r| r.revision).ok_or_else(|| {
        CommandError::error(format!(
            "no plan {id}\nhint: `git orch plan list` shows the stored plans"
        ))
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

/// Counts files per top-level directory (and per subdirectory of large
/// ones), for the brief.
fn tree_summary(paths: &[String]) -> Vec<String> {
    let mut top: BTreeMap<&str, usize> = BTreeMap::new();
    let mut sub: BTreeMap<&str, BTreeMap<&str, usize>> = BTreeMap::new();
    let mut root_files = 0;
    for p in paths {
        let mut parts = p.splitn(3, '/');
        let first = parts.next().unwrap_or_default();
        match parts.next() {
            None => root_files += 1,
            Some(second) => {
                *top.entry(first).or_default() += 1;
                if parts.next().is_some() {
                    *sub.entry(first).or_default().entry(second).or_default() += 1;
                }
            }
        }
    }
    let mut lines = vec![format!("  (root)  {root_files} files")];
    for (dir, n) in top {
        lines.push(format!("  {dir}/  {n} files"));
        if n > 50
            && let Some(children) = sub.get(dir)
        {
            let mut children: Vec<_> = children.iter().collect();
            children.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            for (child, m) in children.iter().take(12) {
                lines.push(format!("    {dir}/{child}/  {m} files"));
            }
            if children.len() > 12 {
                lines.push(format!("    … {} more directories", children.len() - 12));
            }
        }
    }
    lines
}

/// A kebab-case id made from the instruction's first words.
fn slug(instruction: &str) -> String {
    let words: Vec<String> = instruction
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .take(5)
        .map(|w| w.to_ascii_lowercase())
        .collect();
    let s = words.join("-");
    if s.is_empty() {
        "plan".into()
    } else {
        s.chars().take(48).collect()
    }
}

fn new(cli: &Cli, args: &NewArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    if args.instruction.trim().is_empty() {
        return Err(CommandError::with_code(
            exit::USAGE,
            "the instruction is empty",
        ));
    }
    let head = store.resolve_commit("HEAD")?;
    let paths = match head {
        Some(c) => store.tree_paths(c)?,
        None => Vec::new(),
    };
    let rules = crate::plan::pinch::rules(&[], &[]);
    let mut pinch_present: Vec<String> = Vec::new();
    for r in &rules {
        let m = crate::plan::glob::matcher(&r.glob);
        if let Some(p) = paths.iter().find(|p| m.is_match(p.as_str())) {
            let unit = r.unit_of(p);
            if !pinch_present.contains(&unit) {
                pinch_present.push(unit);
            }
        }
    }
    let id = slug(&args.instruction);
    let skeleton = serde_json::json!({
        "version": 1,
        "id": id,
        "instruction": args.instruction,
        "subtasks": [
            {
                "id": "first-piece",
                "title": "What this subtask delivers, in a few words",
                "owned_globs": ["path/to/its/files/**"],
                "deliverable": "What exists when it is done",
                "verification": "a command that fails until it is done, e.g. cargo test -p crate-name"
            },
            {
                "id": "second-piece",
                "title": "…",
                "owned_globs": ["another/disjoint/path/**"],
                "deliverable": "…",
                "verification": "…",
                "depends_on": ["first-piece"]
            }
        ]
    });
    let mut out = output::Out::new();
    let brief = format!(
        "# Plan brief\n\
         \n\
         Instruction: {instruction}\n\
         \n\
         You are the lead agent. Split the instruction into subtasks that coding agents\n\
         will carry out in parallel, each in its own git worktree, and write the plan as\n\
         JSON (format: docs/plans.md; JSON Schema: `git orch plan schema`).\n\
         \n\
         Rules:\n\
         1. Sole ownership: every subtask lists in owned_globs exactly the files it may\n\
            change. No file may be owned by two subtasks, including files that do not\n\
            exist yet. '*' never crosses '/', '**' spans directories.\n\
         2. Pinch points (lockfiles, migrations, CI and build configuration, deploy\n\
            manifests, generated barrels) go to one subtask only, which then runs\n\
            alone (serial_only). Keep them out of the parallel pieces where you can.\n\
         3. Aim for at least three subtasks that can start at once (no depends_on, not\n\
            serial, no shared files); with fewer, one agent is usually better.\n\
         4. Each verification is a real command that fails until the subtask is done\n\
            and checks that subtask only (not `true`, not `echo`, not the same command\n\
            for every subtask).\n\
         5. Use depends_on only where a subtask needs another's result to start.\n\
         \n\
         Skeleton:\n\
         {skeleton}\n\
         \n\
         Repository at {head}: {n} files\n\
         {tree}\n\
         \n\
         Pinch points present: {pinch}\n\
         \n\
         When the plan is written: `git orch plan check plan.json`, then\n\
         `git orch plan add plan.json` and ask for approval.",
        instruction = args.instruction,
        skeleton = serde_json::to_string_pretty(&skeleton).expect("json"),
        head = head.map_or("an empty tree".into(), |c| c.to_string()[..12].to_owned()),
        n = paths.len(),
        tree = tree_summary(&paths).join("\n"),
        pinch = if pinch_present.is_empty() {
            "none".into()
        } else {
            pinch_present.join(", ")
        },
    );
    for l in brief.lines() {
        out.line(l);
    }
    Ok(exit::OK)
}
