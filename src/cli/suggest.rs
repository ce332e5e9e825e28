//! "Did you mean": the nearest known plan, run or task id to a mistyped
//! one, as a hint line on the error that named it.

use super::error::CommandError;
use crate::state::StateIndex;
use crate::store::Store;

/// The known id nearest to `given`, if one is near enough to be a typo:
/// a different case, or an edit distance (a swap of two neighbours counts
/// as one edit) of at most a third of its length.
pub fn nearest<'a>(given: &str, known: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (given.chars().count() / 3).max(1);
    known
        .into_iter()
        .filter(|k| *k != given)
        .map(|k| {
            let d = if k.eq_ignore_ascii_case(given) {
                0
            } else {
                strsim::damerau_levenshtein(given, k)
            };
            (d, k)
        })
        .filter(|(d, k)| *d <= limit || k.starts_with(given) && given.len() >= 3)
        .min_by_key(|(d, k)| (*d, k.len()))
        .map(|(_, k)| k)
}

/// Words people type for a command that has another name here.
const SYNONYMS: &[(&str, &str)] = &[
    ("show", "plan show"),
    ("list", "plan list"),
    ("ls", "status --all"),
    ("runs", "status --all"),
    ("check", "plan check"),
    ("add", "plan add"),
    ("new", "plan new"),
    ("ps", "status"),
];

/// A `did you mean` for a mistyped command or option that clap found no
/// suggestion for itself (`git orch rn`, `git orch show`, `run --cpa`):
/// the nearest command, or the nearest long option of the command given.
pub fn for_usage_error(
    error: &clap::Error,
    argv: &[String],
    command: clap::Command,
) -> Option<String> {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let suggested = |kind| {
        matches!(
            error.get(kind),
            Some(ContextValue::String(_) | ContextValue::Strings(_))
        )
    };
    let given = match error
        .get(ContextKind::InvalidSubcommand)
        .or_else(|| error.get(ContextKind::InvalidArg))
    {
        Some(ContextValue::String(s)) => s.clone(),
        _ => return None,
    };
    match error.kind() {
        ErrorKind::InvalidSubcommand if !suggested(ContextKind::SuggestedSubcommand) => {
            if let Some((_, to)) = SYNONYMS.iter().find(|(word, _)| *word == given) {
                return Some(format!("did you mean `git orch {to}`?"));
            }
            let names: Vec<&str> = command.get_subcommands().map(|c| c.get_name()).collect();
            nearest(&given, names).map(|n| format!("did you mean `git orch {n}`?"))
        }
        ErrorKind::UnknownArgument if !suggested(ContextKind::SuggestedArg) => {
            let flag = given.split('=').next().unwrap_or(&given);
            let name = flag.strip_prefix("--")?;
            // The deepest command named on the line, to look in its options.
            let mut cmd = &command;
            for word in argv.iter().skip(1).filter(|w| !w.starts_with('-')) {
                match cmd.find_subcommand(word) {
                    Some(c) => cmd = c,
                    None => break,
                }
            }
            let longs: Vec<&str> = cmd
                .get_arguments()
                .chain(command.get_arguments())
                .filter_map(|a| a.get_long())
                .collect();
            let path = if cmd.get_name() == command.get_name() {
                String::new()
            } else {
                format!(" {}", cmd.get_name())
            };
            nearest(name, longs).map(|n| format!("did you mean `--{n}` (see `git orch{path} -h`)?"))
        }
        _ => None,
    }
}

/// `error` with a `did you mean …?` hint first among its hints, when one
/// of `known` is near `given`.
pub fn with_hint<'a>(
    mut error: CommandError,
    given: &str,
    what: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> CommandError {
    if let Some(k) = nearest(given, known) {
        error.hints.insert(0, format!("did you mean {what} `{k}`?"));
    }
    error
}

/// The stored plan ids.
pub fn plan_ids(store: &Store) -> Vec<String> {
    crate::plan::revisions::ids(store)
        .map(|ids| ids.into_iter().map(|i| i.to_string()).collect())
        .unwrap_or_default()
}

/// `error` with a plan id hint.
pub fn with_plan_hint(error: CommandError, given: &str, store: &Store) -> CommandError {
    let ids = plan_ids(store);
    with_hint(error, given, "plan", ids.iter().map(String::as_str))
}

/// `error` with a run id hint (`given` may be `None`: nothing to hint).
pub fn with_run_hint(
    error: CommandError,
    given: Option<&str>,
    index: &mut StateIndex,
) -> CommandError {
    let Some(given) = given else {
        return error;
    };
    let ids: Vec<String> = index
        .all_briefs()
        .map(|b| b.into_iter().map(|b| b.id.to_string()).collect())
        .unwrap_or_default();
    with_hint(error, given, "run", ids.iter().map(String::as_str))
}

/// `error` with a task id hint from the tasks of `plans` (every stored
/// plan when empty).
pub fn with_task_hint(
    error: CommandError,
    given: &str,
    store: &Store,
    plans: &[crate::ids::PlanId],
) -> CommandError {
    let all;
    let plans = if plans.is_empty() {
        all = crate::plan::revisions::ids(store).unwrap_or_default();
        &all[..]
    } else {
        plans
    };
    let mut tasks = Vec::new();
    for id in plans {
        if let Ok(Some(rev)) = crate::plan::revisions::latest(store, id) {
            tasks.extend(rev.plan.subtasks.iter().map(|s| s.id.to_string()));
        }
    }
    with_hint(error, given, "task", tasks.iter().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_find_their_id() {
        let known = ["max-line-length", "api", "web-frontend"];
        assert_eq!(nearest("max-line-lenght", known), Some("max-line-length"));
        assert_eq!(nearest("API", known), Some("api"));
        assert_eq!(nearest("web-fronted", known), Some("web-frontend"));
        assert_eq!(nearest("web", known), Some("web-frontend"));
        assert_eq!(nearest("database", known), None);
        assert_eq!(nearest("ab", known), None);
    }

    #[test]
    fn the_suggestion_comes_first_among_the_hints() {
        let e = with_hint(
            CommandError::error("no plan x-y").hint("`git orch plan list`"),
            "x-y",
            "plan",
            ["x-z"],
        );
        assert_eq!(
            e.render(),
            "no plan x-y\nhint: did you mean plan `x-z`?\nhint: `git orch plan list`"
        );
        let far = with_hint(CommandError::error("no plan q"), "q", "plan", ["x-z"]);
        assert_eq!(far.render(), "no plan q");
    }
}
