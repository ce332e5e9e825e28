//! Configuration: the repository's git config (`orch.*`, remotes) and the
//! committed project settings in `.orch/config`.
//!
//! Writes to git config go through the `git config` binary so they follow
//! git's own locking and file layout exactly; `.orch/config` is read with
//! gix's config parser, so it has git-config syntax like `.gitmodules`.

use super::{Result, Store};

impl Store {
    /// All values of `key` in the repository's local config.
    pub fn config_get_all(&self, key: &str) -> Result<Vec<String>> {
        let out = self.git().output(["config", "--local", "--get-all", key])?;
        Ok(String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect())
    }

    /// The last value of `key` as git resolves it (all config scopes).
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
