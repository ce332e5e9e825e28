//! Which branches the hooks protect.
//!
//! `orch.protect` (multi-valued; each value one or more branch names or
//! globs separated by spaces or commas, with or without `refs/heads/`),
//! read from the repository's git config over the `[orch]` section of the
//! `.orch/config` committed at `HEAD`. Without it, the configured
//! `orch.target` is protected; without that, `main` and `master`. An empty
//! `orch.protect` protects nothing (the hooks then only guard
//! `refs/orch/*`). A run whose plan names another target is not covered
//! by the default: list that branch in `orch.protect`.
//!
//! Only names under `refs/heads/` are ever protected.

use crate::store::Store;

use super::HookError;

/// Where the protected names came from, for messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `orch.protect`.
    Protect,
    /// `orch.target`.
    Target,
    /// Neither is set: `main` and `master`.
    Default,
}

/// The protected branch patterns.
#[derive(Debug, Clone)]
pub struct Protection {
    pub patterns: Vec<String>,
    pub source: Source,
    matchers: Vec<Option<globset::GlobMatcher>>,
}

impl Protection {
    /// Protection by these patterns.
    pub fn new(patterns: Vec<String>, source: Source) -> Self {
        let matchers = patterns
            .iter()
            .map(|p| {
                crate::plan::glob::compile(p)
                    .ok()
                    .map(|g| g.compile_matcher())
            })
            .collect();
        Self {
            patterns,
            source,
            matchers,
        }
    }

    /// The branch name if `reference` is a protected branch.
    pub fn protects<'r>(&self, reference: &'r str) -> Option<&'r str> {
        let branch = reference.strip_prefix("refs/heads/")?;
        let hit = self
            .patterns
            .iter()
            .zip(&self.matchers)
            .any(|(p, m)| p == branch || m.as_ref().is_some_and(|m| m.is_match(branch)));
        hit.then_some(branch)
    }

    /// One line for messages: which branches, and from where.
    pub fn describe(&self) -> String {
        let list = if self.patterns.is_empty() {
            "no branches".to_owned()
        } else {
            self.patterns.join(", ")
        };
        match self.source {
            Source::Protect => format!("{list} (orch.protect)"),
            Source::Target => format!("{list} (orch.target)"),
            Source::Default => format!("{list} (the default; set orch.protect to change it)"),
        }
    }
}

/// Splits `orch.protect` values into branch patterns.
pub fn parse_patterns(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split([' ', ',', '\t']))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.strip_prefix("refs/heads/").unwrap_or(p).to_owned())
        .collect()
}

/// The protection configured for the repository of `store`.
pub fn protection(store: &Store) -> Result<Protection, HookError> {
    let head = store.resolve_commit("HEAD")?;
    let values = store.project_config(head)?;
    let orch = values.section("orch", None);
    if let Some(protect) = orch.and_then(|s| s.values.get("protect")) {
        return Ok(Protection::new(parse_patterns(protect), Source::Protect));
    }
    if let Some(target) = orch.and_then(|s| s.get("target")).map(str::trim)
        && !target.is_empty()
    {
        return Ok(Protection::new(
            parse_patterns(&[target.to_owned()]),
            Source::Target,
        ));
    }
    Ok(Protection::new(
        vec!["main".into(), "master".into()],
        Source::Default,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_globs_and_prefixes() {
        let p = Protection::new(
            parse_patterns(&["main, refs/heads/release/*".into(), "dev".into()]),
            Source::Protect,
        );
        assert_eq!(p.patterns, ["main", "release/*", "dev"]);
        assert_eq!(p.protects("refs/heads/main"), Some("main"));
        assert_eq!(p.protects("refs/heads/release/2.0"), Some("release/2.0"));
        assert_eq!(p.protects("refs/heads/release/2.0/x"), None);
        assert_eq!(p.protects("refs/heads/feature"), None);
        assert_eq!(p.protects("refs/tags/main"), None);
        assert_eq!(p.protects("refs/orch/log/abc"), None);
        let none = Protection::new(parse_patterns(&[String::new()]), Source::Protect);
        assert_eq!(none.protects("refs/heads/main"), None);
    }
}
