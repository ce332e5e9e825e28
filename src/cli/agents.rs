//! `git orch agents`: which agent CLIs are installed here, their versions,
//! whether each passes its preflight (with the line that fixes it), and
//! the sandbox runs would get.

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs};
use super::output;
use crate::agent::preflight::Severity;
use crate::config::Settings;

/// Show the agent CLIs installed here, their versions, whether each can
/// work (API key, login, trust, root), what to configure where one cannot,
/// and the sandbox agents would run in.
///
/// Agents are the four CLIs git-orch knows (claude, codex, gemini, aider)
/// and every `[agent "NAME"]` in .orch/config, or just the NAMEs given.
/// Each is checked with the environment and home files it would really get,
/// and its program is looked for and started (`--version`) inside the
/// sandbox it would run in: one the sandbox hides cannot work here.
/// Exit 3 if an agent named on the command line cannot work.
#[derive(Debug, Args)]
pub struct AgentsArgs {
    /// Only these agents (built-in names or configured sections).
    pub names: Vec<String>,
    /// Print the result as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

/// The settings of the repository here (its .orch/config at HEAD and its
/// `orch.*` keys) and its git folder, or the defaults outside a
/// repository.
fn settings(cli: &GlobalArgs) -> Result<(Settings, Option<std::path::PathBuf>), CommandError> {
    let Ok(store) = crate::store::Store::discover(&super::globals::start_dir(&cli.directory))
    else {
        return Ok((Settings::default(), None));
    };
    let head = store.resolve_commit("HEAD")?;
    let settings = Settings::from_values(&store.project_config(head)?)
        .map_err(|e| CommandError::error(format!("{e}\nhint: fix .orch/config")))?;
    Ok((settings, Some(store.common_dir().to_owned())))
}

pub fn run(cli: &GlobalArgs, args: &AgentsArgs) -> CommandResult {
    let (settings, git_dir) = settings(cli)?;
    let survey = crate::preflight::survey(&settings, git_dir.as_deref(), &args.names, true)?;
    let blocked = !args.names.is_empty() && survey.agents.iter().any(|a| !a.ready());
    let code = if blocked { exit::BLOCKED } else { exit::OK };
    let mut out = output::Out::new();
    // What every checkout gets besides its commit ([worktree]).
    let warm = match &git_dir {
        Some(dir) => crate::sandbox::warm_notices(&settings.sandbox, dir),
        None => Vec::new(),
    };
    if args.json {
        let mut value = serde_json::to_value(&survey).expect("the survey serialises");
        value["worktree"] = serde_json::json!({
            "include": settings.sandbox.worktree.include,
            "cache": settings.sandbox.worktree.cache.iter().map(ToString::to_string).collect::<Vec<_>>(),
            "notices": warm,
        });
        out.line(&value.to_string());
        return Ok(code);
    }
    out.line(&format!("sandbox: {}", survey.sandbox.summary));
    for line in &warm {
        out.line(line);
    }
    for a in &survey.agents {
        let state = if !a.installed {
            "not installed".to_owned()
        } else if a.ready() {
            "ready".to_owned()
        } else {
            "cannot work here".to_owned()
        };
        let version = a.version.as_deref().unwrap_or("-");
        if !out.line(&format!(
            "{:<10} {:<8} {:<32} {}",
            a.name,
            a.kind.as_str(),
            version,
            state
        )) {
            return Ok(code);
        }
        if !a.installed
            && let Some((problem, fix)) = a.blocking()
        {
            out.line(&format!("    problem: {problem}"));
            out.line(&format!("    fix: {fix}"));
        }
        for f in &a.findings {
            let mark = match f.severity {
                Severity::Error => "problem",
                Severity::Note => "note",
            };
            out.line(&format!("    {mark}: {}", f.problem));
            out.line(&format!("    fix: {}", f.fix));
            // Indented, which both git's config syntax and JSON allow, so
            // the block works pasted as it is shown.
            if let Some(paste) = &f.paste {
                out.line(&format!("    paste into {}:", paste.file));
                for l in paste.text.lines() {
                    out.line(&format!("        {l}"));
                }
            }
        }
    }
    Ok(code)
}
