//! Control paths: files that configure git-orch, git, CI or the agents
//! themselves. A change to one changes what later runs do: `.orch/config`
//! can turn the sandbox off or swap an agent's command, `.gitattributes`
//! names filters git runs, a hook folder or a CI workflow runs code, an
//! `AGENTS.md` is an instruction every later agent reads. So an agent's
//! change there is never taken as ordinary work:
//!
//! - a subtask may change one only when one of its owned globs *names* it
//!   (mentions it literally: `.orch/config`, `.orch/**`,
//!   `.github/workflows/ci.yml`, `**/AGENTS.md`), never through a glob
//!   that merely matches it (`**`, `*.md`): the scope gate refuses it
//!   otherwise;
//! - a result that changes one lands only once a person approved that
//!   exact result (`git orch approve --branch <its attempt branch>`): the
//!   merge queue holds it until then;
//! - they are pinch points, so `plan check` lists the subtasks that own
//!   them.
//!
//! Pure: matching only.

use std::sync::OnceLock;

use globset::{GlobSet, GlobSetBuilder};

/// One kind of control path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPath {
    /// The files it covers.
    pub glob: &'static str,
    /// What an owned glob must mention, literally, to name it.
    pub anchor: &'static str,
    /// What it controls, for messages.
    pub what: &'static str,
}

/// Every control path.
pub const CONTROL_PATHS: &[ControlPath] = &[
    ControlPath {
        glob: ".orch/**",
        anchor: ".orch/",
        what: "git-orch's project settings (sandbox, agents, gates)",
    },
    ControlPath {
        glob: "**/.gitattributes",
        anchor: ".gitattributes",
        what: "git attributes (filters, diff and merge drivers)",
    },
    ControlPath {
        glob: ".gitmodules",
        anchor: ".gitmodules",
        what: "submodules",
    },
    ControlPath {
        glob: ".githooks/**",
        anchor: ".githooks/",
        what: "git hooks",
    },
    ControlPath {
        glob: ".husky/**",
        anchor: ".husky/",
        what: "git hooks (husky)",
    },
    ControlPath {
        glob: ".pre-commit-config.yaml",
        anchor: ".pre-commit-config.yaml",
        what: "git hooks (pre-commit)",
    },
    ControlPath {
        glob: ".github/workflows/**",
        anchor: ".github/workflows/",
        what: "CI workflows",
    },
    ControlPath {
        glob: ".github/actions/**",
        anchor: ".github/actions/",
        what: "CI actions",
    },
    ControlPath {
        glob: ".gitlab-ci.yml",
        anchor: ".gitlab-ci.yml",
        what: "CI configuration",
    },
    ControlPath {
        glob: ".circleci/**",
        anchor: ".circleci/",
        what: "CI configuration",
    },
    ControlPath {
        glob: ".claude/**",
        anchor: ".claude/",
        what: "Claude Code's project settings",
    },
    ControlPath {
        glob: ".codex/**",
        anchor: ".codex/",
        what: "Codex's project settings",
    },
    ControlPath {
        glob: ".gemini/**",
        anchor: ".gemini/",
        what: "Gemini CLI's project settings",
    },
    ControlPath {
        glob: "**/AGENTS.md",
        anchor: "AGENTS.md",
        what: "instructions every agent reads",
    },
    ControlPath {
        glob: "**/CLAUDE.md",
        anchor: "CLAUDE.md",
        what: "instructions Claude Code reads",
    },
    ControlPath {
        glob: "**/GEMINI.md",
        anchor: "GEMINI.md",
        what: "instructions Gemini CLI reads",
    },
    ControlPath {
        glob: ".mcp.json",
        anchor: ".mcp.json",
        what: "MCP servers agents start",
    },
    ControlPath {
        glob: ".envrc",
        anchor: ".envrc",
        what: "direnv's environment",
    },
    ControlPath {
        glob: ".aider.conf.yml",
        anchor: ".aider.conf.yml",
        what: "Aider's settings",
    },
];

/// The control paths' globs, matched without regard to case: on a file
/// system that folds case (macOS, Windows), `.CLAUDE/settings.json` is
/// `.claude/settings.json`.
fn set() -> &'static GlobSet {
    static SET: OnceLock<GlobSet> = OnceLock::new();
    SET.get_or_init(|| {
        let mut b = GlobSetBuilder::new();
        for c in CONTROL_PATHS {
            b.add(
                globset::GlobBuilder::new(c.glob)
                    .literal_separator(true)
                    .case_insensitive(true)
                    .build()
                    .expect("control path globs compile"),
            );
        }
        b.build().expect("control path globs build")
    })
}

/// The folder a control path's glob starts with (`.github/workflows` for
/// `.github/workflows/**`), when it starts with one.
fn folder(c: &ControlPath) -> Option<&'static str> {
    c.glob.strip_suffix("/**").filter(|f| !f.contains('*'))
}

/// The control path `path` (a repository path) is, if any: a file it
/// covers, or the folder it lives in or one above it (`.claude`,
/// `.github`), which a symbolic link there could point elsewhere.
pub fn control_path(path: &str) -> Option<&'static ControlPath> {
    if let Some(&i) = set().matches(path).first() {
        return Some(&CONTROL_PATHS[i]);
    }
    let lower = path.to_ascii_lowercase();
    CONTROL_PATHS.iter().find(|c| {
        folder(c).is_some_and(|f| {
            let f = f.to_ascii_lowercase();
            f == lower || f.starts_with(&format!("{lower}/"))
        })
    })
}

/// Whether `glob` names the control path `c` (mentions it literally, in
/// any case) rather than only matching files under it.
pub fn names(glob: &str, c: &ControlPath) -> bool {
    let anchor = c.anchor.trim_end_matches('/').to_ascii_lowercase();
    glob.to_ascii_lowercase().contains(&anchor)
}

/// The control paths among `paths`, sorted, each once.
pub fn among<'a>(paths: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = paths
        .into_iter()
        .filter(|p| control_path(p).is_some())
        .map(str::to_owned)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Whether one of `owned` (a subtask's include globs) names the control
/// path `path` is and matches it: then the subtask may change it.
pub fn named_by(owned: &[String], path: &str) -> bool {
    let Some(c) = control_path(path) else {
        return true;
    };
    owned
        .iter()
        .any(|g| names(g, c) && super::glob::matcher(g).is_match(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_paths_are_recognised_where_they_live() {
        for (path, what) in [
            (".orch/config", ".orch/"),
            ("src/.gitattributes", ".gitattributes"),
            (".gitattributes", ".gitattributes"),
            (".github/workflows/ci.yml", ".github/workflows/"),
            ("docs/AGENTS.md", "AGENTS.md"),
            (".claude/settings.json", ".claude/"),
            (".mcp.json", ".mcp.json"),
        ] {
            assert_eq!(control_path(path).map(|c| c.anchor), Some(what), "{path}");
        }
        for path in [
            "src/orch/config",
            "README.md",
            "src/agent.md",
            ".github/CODEOWNERS",
        ] {
            assert_eq!(control_path(path), None, "{path}");
        }
        // Another case, and the folders a symbolic link could replace.
        for path in [
            ".CLAUDE/settings.json",
            "docs/agents.MD",
            ".claude",
            ".github",
            ".orch",
        ] {
            assert!(control_path(path).is_some(), "{path}");
        }
    }

    #[test]
    fn only_a_glob_that_names_a_control_path_may_change_it() {
        let owned = |globs: &[&str]| globs.iter().map(|g| (*g).to_owned()).collect::<Vec<_>>();
        assert!(named_by(&owned(&[".orch/config"]), ".orch/config"));
        assert!(named_by(&owned(&[".orch/**"]), ".orch/config"));
        assert!(named_by(&owned(&["**/AGENTS.md"]), "docs/AGENTS.md"));
        assert!(!named_by(&owned(&["**"]), ".orch/config"));
        assert!(!named_by(&owned(&["src/**", "*.md"]), "AGENTS.md"));
        assert!(!named_by(&owned(&["**/*"]), "src/.gitattributes"));
        // Naming one control path does not name another.
        assert!(!named_by(
            &owned(&[".orch/**", "**"]),
            ".github/workflows/ci.yml"
        ));
        // Not a control path: nothing to name.
        assert!(named_by(&owned(&["**"]), "src/main.rs"));
    }
}
