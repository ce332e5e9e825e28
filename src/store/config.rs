//! Configuration: the repository's git config (`orch.*`, remotes) and the
//! committed project settings in `.orch/config`.
//!
//! Writes to git config go through the `git config` binary so they follow
//! git's own locking and file layout exactly; `.orch/config` is read with
//! gix's config parser, so it has git-config syntax like `.gitmodules`.

use std::collections::BTreeMap;

use super::error::{Result, StoreError};
use super::oid::Oid;
use super::repository::Store;

/// The values of one config section, keys lower-cased, multi-valued.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Section {
    /// Section name, lower-cased (`gate`).
    pub name: String,
    /// Subsection, case kept (`test` of `[gate "test"]`).
    pub subsection: Option<String>,
    pub values: BTreeMap<String, Vec<String>>,
}

impl Section {
    /// The last value of `key`, as git resolves single-valued keys.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values
            .get(key)
            .and_then(|v| v.last())
            .map(String::as_str)
    }
}

/// Parsed config: sections in file order, same-named ones merged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfigValues {
    pub sections: Vec<Section>,
}

impl ConfigValues {
    /// The section `[name]` or `[name "sub"]`.
    pub fn section(&self, name: &str, subsection: Option<&str>) -> Option<&Section> {
        self.sections
            .iter()
            .find(|s| s.name == name && s.subsection.as_deref() == subsection)
    }

    /// Every `[name "…"]` section.
    pub fn subsections<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Section> + 'a {
        self.sections
            .iter()
            .filter(move |s| s.name == name && s.subsection.is_some())
    }

    fn merge(&mut self, name: String, subsection: Option<String>, key: String, value: String) {
        if let Some(s) = self
            .sections
            .iter_mut()
            .find(|s| s.name == name && s.subsection == subsection)
        {
            s.values.entry(key).or_default().push(value);
            return;
        }
        let mut values = BTreeMap::new();
        values.insert(key, vec![value]);
        self.sections.push(Section {
            name,
            subsection,
            values,
        });
    }
}

/// Parses git-config syntax (as in `.orch/config`). Includes are not
/// followed: a committed file must not read files outside the repository.
pub fn parse_config(bytes: &[u8], origin: &str) -> Result<ConfigValues> {
    let meta = gix::config::file::Metadata::from(gix::config::Source::Api);
    let file = gix::config::File::from_bytes_no_includes(bytes, meta, Default::default()).map_err(
        |e| StoreError::ConfigSyntax {
            origin: origin.to_owned(),
            message: super::error::chain(&e),
        },
    )?;
    let mut out = ConfigValues::default();
    for section in file.sections() {
        let header = section.header();
        let name = header.name().to_string().to_ascii_lowercase();
        let sub = header.subsection_name().map(|s| s.to_string());
        let body = section.body();
        let mut keys: Vec<String> = body.value_names().collect();
        keys.sort();
        keys.dedup();
        for key in keys {
            for value in body.values(&key) {
                out.merge(
                    name.clone(),
                    sub.clone(),
                    key.to_ascii_lowercase(),
                    value.to_string(),
                );
            }
        }
    }
    Ok(out)
}

/// Where committed project settings live in the tree.
pub const PROJECT_CONFIG: &str = ".orch/config";

impl Store {
    /// The project settings committed at `commit` (`.orch/config`), with
    /// `orch.*` keys of the repository's git config layered on top.
    pub fn project_config(&self, commit: Option<Oid>) -> Result<ConfigValues> {
        let mut values = match commit {
            Some(c) => match self.file_at(c, PROJECT_CONFIG)? {
                Some(bytes) => parse_config(&bytes, &format!("{PROJECT_CONFIG} at {c}"))?,
                None => ConfigValues::default(),
            },
            None => ConfigValues::default(),
        };
        // `-z`: each entry is `key\nvalue\0`, so a value holding a newline
        // (a multi-line prompt template) stays one value.
        let out = self
            .git()
            .output(["config", "-z", "--get-regexp", r"^orch\."])?;
        let mut replaced = std::collections::HashSet::new();
        let text = String::from_utf8_lossy(&out.stdout);
        for entry in text.split('\0').filter(|e| !e.is_empty()) {
            let (key, value) = entry.split_once('\n').unwrap_or((entry, ""));
            let key = key
                .strip_prefix("orch.")
                .unwrap_or(key)
                .to_ascii_lowercase();
            // Repository config overrides the committed file: replace its
            // values once, keeping every value of a multi-valued key.
            if replaced.insert(key.clone())
                && let Some(s) = values
                    .sections
                    .iter_mut()
                    .find(|s| s.name == "orch" && s.subsection.is_none())
            {
                s.values.remove(&key);
            }
            values.merge("orch".into(), None, key, value.to_owned());
        }
        Ok(values)
    }

    /// All values of `key` in the repository's local config.
    pub fn config_get_all(&self, key: &str) -> Result<Vec<String>> {
        let out = self
            .git()
            .output(["config", "-z", "--local", "--get-all", key])?;
        // Each value ends in NUL; an empty value is an empty string.
        let text = String::from_utf8_lossy(&out.stdout);
        Ok(match text.strip_suffix('\0') {
            Some(values) => values.split('\0').map(str::to_owned).collect(),
            None => Vec::new(),
        })
    }

    /// The last value of `key` as git resolves it (all config scopes).
    /// The author identity git would use here (`git var GIT_AUTHOR_IDENT`:
    /// the environment, then `user.name`/`user.email`), as (name, email);
    /// `None` when git has none.
    pub fn user_identity(&self) -> Result<Option<(String, String)>> {
        let out = self.git().output(["var", "GIT_AUTHOR_IDENT"])?;
        if !out.status.success() {
            return Ok(None);
        }
        let ident = String::from_utf8_lossy(&out.stdout);
        let Some((name, rest)) = ident.split_once(" <") else {
            return Ok(None);
        };
        let Some((email, _)) = rest.split_once('>') else {
            return Ok(None);
        };
        Ok((!name.trim().is_empty()).then(|| (name.trim().to_owned(), email.trim().to_owned())))
    }

    pub fn config_get(&self, key: &str) -> Result<Option<String>> {
        let out = self.git().output(["config", "--get", key])?;
        let v = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        Ok((out.status.success() && !v.is_empty()).then_some(v))
    }

    /// Sets `key` in the local config; returns whether it changed anything.
    pub fn config_set(&self, key: &str, value: &str) -> Result<bool> {
        if self.config_get_all(key)? == [value] {
            return Ok(false);
        }
        self.git().run(["config", "--local", key, value])?;
        Ok(true)
    }

    /// Adds `value` to multi-valued `key` unless it is already there;
    /// returns whether it added it.
    pub fn config_add(&self, key: &str, value: &str) -> Result<bool> {
        if self.config_get_all(key)?.iter().any(|v| v == value) {
            return Ok(false);
        }
        self.git().run(["config", "--local", "--add", key, value])?;
        Ok(true)
    }
}
