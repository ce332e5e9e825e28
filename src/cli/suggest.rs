//! "Did you mean": the nearest known plan, run or task id to a mistyped
//! one, as a hint line on the error that named it.

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

/// `message` with a `hint: did you mean …?` line right after its first
/// line, when one of `known` is near `given`.
pub fn with_hint<'a>(
    message: &str,
    given: &str,
    what: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> String {
    match nearest(given, known) {
        Some(k) => {
            let (first, rest) = message.split_once('\n').unwrap_or((message, ""));
            let hint = format!("hint: did you mean {what} `{k}`?");
            if rest.is_empty() {
                format!("{first}\n{hint}")
            } else {
                format!("{first}\n{hint}\n{rest}")
            }
        }
        None => message.to_owned(),
    }
}

/// The stored plan ids.
pub fn plan_ids(store: &Store) -> Vec<String> {
    crate::plan::revisions::ids(store)
        .map(|ids| ids.into_iter().map(|i| i.to_string()).collect())
        .unwrap_or_default()
}

/// `message` with a plan id hint.
pub fn with_plan_hint(message: &str, given: &str, store: &Store) -> String {
    let ids = plan_ids(store);
    with_hint(message, given, "plan", ids.iter().map(String::as_str))
}

/// `message` with a run id hint (`given` may be `None`: nothing to hint).
pub fn with_run_hint(message: &str, given: Option<&str>, index: &mut StateIndex) -> String {
    let Some(given) = given else {
        return message.to_owned();
    };
    let ids: Vec<String> = index
        .all_briefs()
        .map(|b| b.into_iter().map(|b| b.id.to_string()).collect())
        .unwrap_or_default();
    with_hint(message, given, "run", ids.iter().map(String::as_str))
}

/// `message` with a task id hint from the tasks of `plans` (every stored
/// plan when empty).
pub fn with_task_hint(
    message: &str,
    given: &str,
    store: &Store,
    plans: &[crate::ids::PlanId],
) -> String {
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
    with_hint(message, given, "task", tasks.iter().map(String::as_str))
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
    fn the_hint_follows_the_first_line() {
        let m = with_hint(
            "no plan x-y\nhint: `git orch plan list`",
            "x-y",
            "plan",
            ["x-z"],
        );
        assert_eq!(
            m,
            "no plan x-y\nhint: did you mean plan `x-z`?\nhint: `git orch plan list`"
        );
    }
}
