//! What a command gate's verdict rests on besides its tree and command:
//! the environment git-orch gives it and the sandbox it runs in.
//!
//! A verdict is cached under (tree, gate name, command, inputs), where
//! `inputs` is [`GateEnv::fingerprint`]: a hash of every variable that
//! tells the gate about the work it judges (plan, task, owned globs, the
//! commit the change is judged against, the agent that wrote it, a port
//! the person chose) and of the sandbox settings. The variables that only
//! say where and as which try the gate runs (run and attempt number, the
//! port block, the paths of git-orch's own files, the candidate's name)
//! are given to the gate but left out: a retry that made the same files,
//! the same attempt gated again by hand, and the landing of exactly the
//! judged tree reuse the verdict, while a gate that would see other
//! inputs runs its command again.
//!
//! Who builds a [`GateEnv`] for a run, a re-gate and a landing is
//! `run::gating`; this module only says what the two kinds of variables
//! are and how they are hashed.

use std::collections::BTreeMap;

use crate::config::SandboxSettings;

/// Version of the fingerprint's hashed form: a change makes earlier
/// verdicts miss the cache once, never match wrongly.
const FINGERPRINT_VERSION: u32 = 1;

/// The environment git-orch gives one gate, each variable marked as an
/// input of its verdict or as where it runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GateEnv {
    vars: Vec<(String, String, Role)>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Can change the verdict: part of the fingerprint.
    Input,
    /// Says where or as which try the gate runs: given, not hashed.
    Placement,
}

impl GateEnv {
    /// Sets `name`, a variable that can change the verdict.
    pub fn input(&mut self, name: &str, value: impl Into<String>) {
        self.set(name, value.into(), Role::Input);
    }

    /// Sets `name`, a variable that only says where the gate runs.
    pub fn placement(&mut self, name: &str, value: impl Into<String>) {
        self.set(name, value.into(), Role::Placement);
    }

    fn set(&mut self, name: &str, value: String, role: Role) {
        self.vars.retain(|(n, _, _)| n != name);
        self.vars.push((name.to_owned(), value, role));
    }

    /// Every variable, in the order they were set.
    pub fn vars(&self) -> Vec<(String, String)> {
        self.vars
            .iter()
            .map(|(n, v, _)| (n.clone(), v.clone()))
            .collect()
    }

    /// The value of `name`, if it is set.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.vars
            .iter()
            .find(|(n, _, _)| n == name)
            .map(|(_, v, _)| v.as_str())
    }

    /// The hash of the inputs and of the sandbox settings: 32 hex digits
    /// (blake3 of their canonical JSON).
    pub fn fingerprint(&self, sandbox: &SandboxSettings) -> String {
        let inputs: BTreeMap<&str, &str> = self
            .vars
            .iter()
            .filter(|(_, _, role)| *role == Role::Input)
            .map(|(n, v, _)| (n.as_str(), v.as_str()))
            .collect();
        let paths = |list: &[std::path::PathBuf]| -> Vec<String> {
            list.iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect()
        };
        let canonical = serde_json::json!({
            "version": FINGERPRINT_VERSION,
            "env": inputs,
            "sandbox": {
                "mode": sandbox.mode.as_str(),
                "network": sandbox.network,
                "pass_env": sandbox.pass_env,
                "bind": paths(&sandbox.bind),
                "ro_bind": paths(&sandbox.ro_bind),
            },
        });
        let bytes = serde_json::to_vec(&canonical).expect("JSON values serialise");
        blake3::hash(&bytes).to_hex()[..32].to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(vars: &[(&str, &str, bool)]) -> GateEnv {
        let mut e = GateEnv::default();
        for (n, v, input) in vars {
            if *input {
                e.input(n, *v);
            } else {
                e.placement(n, *v);
            }
        }
        e
    }

    #[test]
    fn only_inputs_and_the_sandbox_change_the_fingerprint() {
        let sandbox = SandboxSettings::default();
        let a = env(&[("ORCH_TASK", "a", true), ("ORCH_ATTEMPT", "1", false)]);
        let retry = env(&[("ORCH_ATTEMPT", "2", false), ("ORCH_TASK", "a", true)]);
        assert_eq!(a.fingerprint(&sandbox), retry.fingerprint(&sandbox));
        let other = env(&[("ORCH_TASK", "b", true), ("ORCH_ATTEMPT", "1", false)]);
        assert_ne!(a.fingerprint(&sandbox), other.fingerprint(&sandbox));
        let more = env(&[
            ("ORCH_TASK", "a", true),
            ("ORCH_ATTEMPT", "1", false),
            ("PORT", "4711", true),
        ]);
        assert_ne!(a.fingerprint(&sandbox), more.fingerprint(&sandbox));
        let offline = SandboxSettings {
            network: !sandbox.network,
            ..sandbox.clone()
        };
        assert_ne!(a.fingerprint(&sandbox), a.fingerprint(&offline));
        assert_eq!(a.fingerprint(&sandbox).len(), 32);
    }

    #[test]
    fn setting_a_variable_again_replaces_it() {
        let mut e = env(&[("PORT", "1", false)]);
        e.input("PORT", "2");
        assert_eq!(e.vars(), vec![("PORT".to_owned(), "2".to_owned())]);
        assert_eq!(e.get("PORT"), Some("2"));
    }
}
