//! Identifiers that end up inside ref names, branch names and paths.
//!
//! Every id a user or a record can supply (plan, task, run, writer) is checked
//! here once, at the edge, so that the layers above can build
//! `refs/orch/plans/<id>` or `orch/<run>/<task>/attempt-<n>` by plain string
//! formatting without ever producing a ref git would refuse, a path that
//! escapes its folder (`..`, `/`), or a name that is a prefix of another.
//!
//! The rule is deliberately narrow: kebab-case (`[a-z0-9]+(-[a-z0-9]+)*`), at
//! most 64 bytes. It is a subset of what `git check-ref-format` accepts and of
//! what every common filesystem accepts, so nothing downstream has to escape.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

/// The longest id accepted, in bytes.
pub const MAX_ID_LEN: usize = 64;

/// Why a string is not a valid id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} id {shown} is invalid: {reason}")]
pub struct IdError {
    /// What the id names (`plan`, `task`, …), for the message.
    pub kind: &'static str,
    /// The offending input, escaped so control characters are visible.
    pub shown: String,
    /// What rule it breaks, ending with the fix.
    pub reason: String,
}

/// Checks `value` against the kebab-case rule, naming `kind` in the error.
pub fn check(kind: &'static str, value: &str) -> Result<(), IdError> {
    let fail = |reason: &str| IdError {
        kind,
        shown: format!("{value:?}"),
        reason: reason.to_owned(),
    };
    if value.is_empty() {
        return Err(fail(
            "it is empty; use lower-case letters, digits and single dashes",
        ));
    }
    if value.len() > MAX_ID_LEN {
        return Err(fail(&format!(
            "it is {} bytes long; the limit is {MAX_ID_LEN}",
            value.len()
        )));
    }
    if let Some(c) = value
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        let what = match c {
            '/' => "'/' would make it a path".to_owned(),
            '.' => "'.' is not allowed (no '..', no extensions)".to_owned(),
            ' ' => "spaces are not allowed".to_owned(),
            c if c.is_ascii_uppercase() => "upper-case letters are not allowed".to_owned(),
            c if c.is_control() => "control characters are not allowed".to_owned(),
            c => format!("{c:?} is not allowed"),
        };
        return Err(fail(&format!(
            "{what}; use lower-case letters, digits and single dashes (kebab-case)"
        )));
    }
    if value.starts_with('-') || value.ends_with('-') || value.contains("--") {
        return Err(fail(
            "dashes must separate words: no leading, trailing or doubled dash",
        ));
    }
    Ok(())
}

macro_rules! kebab_id {
    ($(#[$doc:meta])* $name:ident, $kind:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// Validates and wraps `value`.
            pub fn new(value: impl Into<String>) -> Result<Self, IdError> {
                let value = value.into();
                check($kind, &value)?;
                Ok(Self(value))
            }

            /// The id as a string slice.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::new(s)
            }
        }

        /// Deserialising validates too, so a record read back from git can
        /// never smuggle in a name the writer side would have refused.
        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                Self::new(s).map_err(serde::de::Error::custom)
            }
        }
    };
}

kebab_id!(
    /// The id of a plan; names `refs/orch/plans/<id>`.
    PlanId,
    "plan"
);
kebab_id!(
    /// The id of a subtask, unique within its plan.
    TaskId,
    "task"
);
kebab_id!(
    /// The id of a run; part of attempt branch names.
    RunId,
    "run"
);
kebab_id!(
    /// The id of one clone's event log writer (`orch.writerId`).
    WriterId,
    "writer"
);

impl WriterId {
    /// A fresh random writer id: 12 hex digits, 48 bits, so two clones
    /// colliding is not a practical concern.
    pub fn random() -> Self {
        let bytes = random_bytes::<6>();
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Self(hex)
    }
}

/// Random bytes from the operating system, with a time-and-pid fallback that
/// is still unique enough for ids when `/dev/urandom` is unavailable.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    use std::io::Read;
    let mut out = [0u8; N];
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut out));
    if from_os.is_err() {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let mut hasher = blake3::Hasher::new();
        hasher.update(&now.to_le_bytes());
        hasher.update(&std::process::id().to_le_bytes());
        hasher.update(&(&out as *const _ as usize).to_le_bytes());
        let digest = hasher.finalize();
        out.copy_from_slice(&digest.as_bytes()[..N]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_kebab_case() {
        for ok in ["a", "add-auth", "x1-y2-z3", "0", &"a".repeat(64)] {
            assert!(check("plan", ok).is_ok(), "{ok}");
        }
    }

    #[test]
    fn refuses_everything_that_could_escape_or_break_a_ref() {
        let bad = [
            "",
            "..",
            "a..b",
            "a/b",
            "../x",
            "has space",
            "Upper",
            "tab\there",
            "nul\0",
            "-lead",
            "trail-",
            "dou--ble",
            "a.lock",
            "@{x}",
            "a~1",
            "a^",
            "a:b",
            "a?",
            "a*",
            "a[b",
            "a\\b",
            "é",
        ];
        for b in bad {
            assert!(check("task", b).is_err(), "{b:?} should be refused");
        }
        assert!(check("task", &"a".repeat(65)).is_err());
    }

    #[test]
    fn error_names_the_kind_and_the_fix() {
        let e = check("task", "a/b").unwrap_err().to_string();
        assert!(e.contains("task id \"a/b\""), "{e}");
        assert!(e.contains("kebab-case"), "{e}");
    }

    #[test]
    fn deserialising_validates() {
        assert!(serde_json::from_str::<PlanId>("\"ok-id\"").is_ok());
        assert!(serde_json::from_str::<PlanId>("\"../etc\"").is_err());
    }

    #[test]
    fn random_writer_ids_are_valid_and_differ() {
        let a = WriterId::random();
        let b = WriterId::random();
        assert_ne!(a, b);
        assert_eq!(a.as_str().len(), 12);
        check("writer", a.as_str()).expect("random ids are kebab-case");
    }
}
