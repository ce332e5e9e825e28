//! Pinch points: files that parallel agents must never change at once.
//!
//! Lockfiles, migrations, CI and build configuration, deploy manifests and
//! generated barrels are touched by "small" changes of every kind, and two
//! agents changing them in parallel produce conflicts no merge can resolve
//! well (two lockfile regenerations, two migrations numbered 0042). A
//! subtask that owns one is forced `serial_only`; two subtasks owning the
//! same one is blocking.
//!
//! A rule is a glob plus the *unit* it guards: for a file rule the file
//! itself, for a directory rule (`**/migrations/**`) the directory it names
//! (`db/migrations`), so two subtasks adding different files to one
//! migrations directory still collide. The list is extended (or trimmed) in
//! `.orch/config`: `[pinch] path = <glob>` and `[pinch] ignore = <glob>`.
//!
//! Built-in rules skip files inside test-data directories (`tests/`,
//! `testdata/`, `fixtures/`, …): a `Cargo.lock` in a test fixture is data a
//! test reads, not the lockfile of the build. Custom rules always apply.
//!
//! [`present`] lists the pinch points a tree holds; `plan check` and the
//! lead agent's brief both print that one list. [`locked_manifests`] pairs
//! each manifest (`Cargo.toml`, `package.json`, …) with the lockfile that
//! records its resolved dependencies: a crate's `Cargo.toml` is not a pinch
//! point itself (that would make every crate's subtask serial), but
//! changing its dependencies rewrites the workspace `Cargo.lock`, which
//! the analysis must say.

use serde::Serialize;

/// What kind of pinch point a rule guards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PinchKind {
    Lockfile,
    Migration,
    Ci,
    Build,
    Deploy,
    Generated,
    /// A control path (see [`super::control`]): git-orch's, git's, CI's
    /// or the agents' own configuration.
    Control,
    Custom,
}

impl PinchKind {
    pub fn describe(self) -> &'static str {
        match self {
            PinchKind::Lockfile => "lockfile",
            PinchKind::Migration => "migrations",
            PinchKind::Ci => "CI configuration",
            PinchKind::Build => "build configuration",
            PinchKind::Deploy => "deploy manifest",
            PinchKind::Generated => "generated code",
            PinchKind::Control => "control path (needs a person's approval to land)",
            PinchKind::Custom => "pinch point from .orch/config",
        }
    }
}

/// Directory names whose contents are test data, not project configuration.
const TEST_DATA_DIRS: &[&str] = &[
    "tests",
    "test",
    "testdata",
    "test-data",
    "testsuite",
    "fixtures",
    "__fixtures__",
    "__tests__",
];

/// One pinch rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PinchRule {
    pub kind: PinchKind,
    /// Files the rule covers.
    pub glob: String,
    /// For directory rules, the glob of the guarded directory; the unit is
    /// the shortest leading part of a matched path that matches it.
    pub unit: Option<String>,
}

/// Built-in rules: (kind, glob, directory unit glob).
const BUILTIN: &[(PinchKind, &str, Option<&str>)] = &[
    // Lockfiles of every major ecosystem.
    (PinchKind::Lockfile, "**/Cargo.lock", None),
    (PinchKind::Lockfile, "**/package-lock.json", None),
    (PinchKind::Lockfile, "**/npm-shrinkwrap.json", None),
    (PinchKind::Lockfile, "**/yarn.lock", None),
    (PinchKind::Lockfile, "**/pnpm-lock.yaml", None),
    (PinchKind::Lockfile, "**/bun.lockb", None),
    (PinchKind::Lockfile, "**/bun.lock", None),
    (PinchKind::Lockfile, "**/deno.lock", None),
    (PinchKind::Lockfile, "**/poetry.lock", None),
    (PinchKind::Lockfile, "**/Pipfile.lock", None),
    (PinchKind::Lockfile, "**/uv.lock", None),
    (PinchKind::Lockfile, "**/pdm.lock", None),
    (PinchKind::Lockfile, "**/Gemfile.lock", None),
    (PinchKind::Lockfile, "**/composer.lock", None),
    (PinchKind::Lockfile, "**/go.sum", None),
    (PinchKind::Lockfile, "**/go.work.sum", None),
    (PinchKind::Lockfile, "**/mix.lock", None),
    (PinchKind::Lockfile, "**/Package.resolved", None),
    (PinchKind::Lockfile, "**/Podfile.lock", None),
    (PinchKind::Lockfile, "**/pubspec.lock", None),
    (PinchKind::Lockfile, "**/flake.lock", None),
    (PinchKind::Lockfile, "**/gradle.lockfile", None),
    (PinchKind::Lockfile, "**/packages.lock.json", None),
    (PinchKind::Lockfile, "**/paket.lock", None),
    (PinchKind::Lockfile, "**/conan.lock", None),
    (PinchKind::Lockfile, "**/stack.yaml.lock", None),
    (PinchKind::Lockfile, "**/cabal.project.freeze", None),
    (PinchKind::Lockfile, "**/renv.lock", None),
    // Migrations: the directory is the unit (numbering is shared).
    (
        PinchKind::Migration,
        "**/migrations/**",
        Some("**/migrations"),
    ),
    (
        PinchKind::Migration,
        "**/db/migrate/**",
        Some("**/db/migrate"),
    ),
    (
        PinchKind::Migration,
        "**/alembic/versions/**",
        Some("**/alembic/versions"),
    ),
    (PinchKind::Migration, "**/flyway/**", Some("**/flyway")),
    (
        PinchKind::Migration,
        "**/liquibase/**",
        Some("**/liquibase"),
    ),
    // CI configuration.
    (
        PinchKind::Ci,
        ".github/workflows/**",
        Some(".github/workflows"),
    ),
    (PinchKind::Ci, ".github/actions/**", Some(".github/actions")),
    (PinchKind::Ci, ".gitlab-ci.yml", None),
    (PinchKind::Ci, ".gitlab/ci/**", Some(".gitlab/ci")),
    (PinchKind::Ci, ".circleci/**", Some(".circleci")),
    (PinchKind::Ci, ".travis.yml", None),
    (PinchKind::Ci, "azure-pipelines.yml", None),
    (PinchKind::Ci, "Jenkinsfile", None),
    (PinchKind::Ci, ".buildkite/**", Some(".buildkite")),
    (PinchKind::Ci, "bitbucket-pipelines.yml", None),
    (PinchKind::Ci, ".drone.yml", None),
    (PinchKind::Ci, ".woodpecker.yml", None),
    (PinchKind::Ci, ".woodpecker/**", Some(".woodpecker")),
    (PinchKind::Ci, "appveyor.yml", None),
    (PinchKind::Ci, ".ci/**", Some(".ci")),
    (PinchKind::Ci, "ci/**", Some("ci")),
    // Build configuration at the repository root (workspace-wide).
    (PinchKind::Build, "Cargo.toml", None),
    (PinchKind::Build, ".cargo/config.toml", None),
    (PinchKind::Build, "rust-toolchain.toml", None),
    (PinchKind::Build, "rust-toolchain", None),
    (PinchKind::Build, "package.json", None),
    (PinchKind::Build, "tsconfig.json", None),
    (PinchKind::Build, "pyproject.toml", None),
    (PinchKind::Build, "setup.py", None),
    (PinchKind::Build, "setup.cfg", None),
    (PinchKind::Build, "go.mod", None),
    (PinchKind::Build, "go.work", None),
    (PinchKind::Build, "pom.xml", None),
    (PinchKind::Build, "build.gradle", None),
    (PinchKind::Build, "build.gradle.kts", None),
    (PinchKind::Build, "settings.gradle", None),
    (PinchKind::Build, "settings.gradle.kts", None),
    (PinchKind::Build, "Makefile", None),
    (PinchKind::Build, "CMakeLists.txt", None),
    (PinchKind::Build, "meson.build", None),
    (PinchKind::Build, "WORKSPACE", None),
    (PinchKind::Build, "WORKSPACE.bazel", None),
    (PinchKind::Build, "MODULE.bazel", None),
    (PinchKind::Build, "Gemfile", None),
    (PinchKind::Build, "composer.json", None),
    (PinchKind::Build, "mix.exs", None),
    (PinchKind::Build, "Directory.Build.props", None),
    (PinchKind::Build, "Directory.Packages.props", None),
    // Deploy manifests.
    (PinchKind::Deploy, "Dockerfile", None),
    (PinchKind::Deploy, "docker-compose*.yml", None),
    (PinchKind::Deploy, "docker-compose*.yaml", None),
    (PinchKind::Deploy, "compose.yml", None),
    (PinchKind::Deploy, "compose.yaml", None),
    (PinchKind::Deploy, "Procfile", None),
    (PinchKind::Deploy, "fly.toml", None),
    (PinchKind::Deploy, "vercel.json", None),
    (PinchKind::Deploy, "netlify.toml", None),
    (PinchKind::Deploy, "app.yaml", None),
    (PinchKind::Deploy, "serverless.yml", None),
    (PinchKind::Deploy, "k8s/**", Some("k8s")),
    (PinchKind::Deploy, "kubernetes/**", Some("kubernetes")),
    (PinchKind::Deploy, "helm/**", Some("helm")),
    (PinchKind::Deploy, "charts/**", Some("charts")),
    (PinchKind::Deploy, "deploy/**", Some("deploy")),
    (PinchKind::Deploy, "terraform/**", Some("terraform")),
    // Generated barrels and generated code.
    (PinchKind::Generated, "**/index.ts", None),
    (PinchKind::Generated, "**/index.js", None),
    (PinchKind::Generated, "**/index.tsx", None),
    (PinchKind::Generated, "**/index.mjs", None),
    (
        PinchKind::Generated,
        "**/generated/**",
        Some("**/generated"),
    ),
    (
        PinchKind::Generated,
        "**/__generated__/**",
        Some("**/__generated__"),
    ),
    (PinchKind::Generated, "**/*.pb.go", None),
    (PinchKind::Generated, "**/*_pb2.py", None),
];

/// The pinch rules in effect: the built-ins, plus `extra` custom globs,
/// minus any built-in whose glob is listed in `ignore`.
pub fn rules(extra: &[String], ignore: &[String]) -> Vec<PinchRule> {
    let mut out: Vec<PinchRule> = BUILTIN
        .iter()
        .filter(|(_, g, _)| !ignore.iter().any(|i| i == g))
        .map(|(kind, glob, unit)| PinchRule {
            kind: *kind,
            glob: (*glob).to_owned(),
            unit: unit.map(str::to_owned),
        })
        .collect();
    // Control paths that are no pinch point of another kind already.
    for c in super::control::CONTROL_PATHS {
        if !BUILTIN.iter().any(|(_, g, _)| *g == c.glob) {
            out.push(PinchRule {
                kind: PinchKind::Control,
                glob: c.glob.to_owned(),
                unit: c.glob.strip_suffix("/**").map(str::to_owned),
            });
        }
    }
    for g in extra {
        let unit = g.strip_suffix("/**").map(str::to_owned);
        out.push(PinchRule {
            kind: PinchKind::Custom,
            glob: g.clone(),
            unit,
        });
    }
    out
}

impl PinchRule {
    /// Whether the rule applies to `path` (which matches [`Self::glob`]):
    /// built-in rules skip test-data directories.
    pub fn applies_to(&self, path: &str) -> bool {
        if self.kind == PinchKind::Custom {
            return true;
        }
        let mut dirs = path.split('/').collect::<Vec<_>>();
        dirs.pop();
        !dirs.iter().any(|d| TEST_DATA_DIRS.contains(d))
    }

    /// The guarded unit containing `path` (which matches [`Self::glob`]).
    pub fn unit_of(&self, path: &str) -> String {
        let Some(unit) = &self.unit else {
            return path.to_owned();
        };
        let m = super::glob::matcher(unit);
        let components: Vec<&str> = path.split('/').collect();
        for n in 1..=components.len() {
            let prefix = components[..n].join("/");
            if m.is_match(&prefix) {
                return prefix;
            }
        }
        path.to_owned()
    }
}

/// A pinch point present in a tree.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct PinchPoint {
    /// The guarded unit: a file, or a directory for directory rules.
    pub unit: String,
    pub kind: PinchKind,
}

/// Every pinch point of `paths` under `rules`, sorted by unit: what `plan
/// check` applies, and what the brief lists.
pub fn present(paths: &[String], rules: &[PinchRule]) -> Vec<PinchPoint> {
    let mut builder = globset::GlobSetBuilder::new();
    for r in rules {
        builder.add(super::glob::compile(&r.glob).expect("pinch globs are valid"));
    }
    let set = builder.build().expect("pinch globs build a set");
    let mut out = std::collections::BTreeSet::new();
    let mut hits = Vec::new();
    for path in paths {
        set.matches_into(path.as_str(), &mut hits);
        for &r in &hits {
            let rule = &rules[r];
            if rule.applies_to(path) {
                out.insert(PinchPoint {
                    unit: rule.unit_of(path),
                    kind: rule.kind,
                });
            }
        }
    }
    out.into_iter().collect()
}

/// Lockfile names and the manifest names whose dependencies they lock
/// (`*.ext` means any file with that extension).
pub const LOCKS: &[(&str, &[&str])] = &[
    ("Cargo.lock", &["Cargo.toml"]),
    ("package-lock.json", &["package.json"]),
    ("npm-shrinkwrap.json", &["package.json"]),
    ("yarn.lock", &["package.json"]),
    ("pnpm-lock.yaml", &["package.json"]),
    ("bun.lockb", &["package.json"]),
    ("bun.lock", &["package.json"]),
    ("deno.lock", &["deno.json", "deno.jsonc"]),
    ("poetry.lock", &["pyproject.toml"]),
    ("uv.lock", &["pyproject.toml"]),
    ("pdm.lock", &["pyproject.toml"]),
    ("Pipfile.lock", &["Pipfile"]),
    ("Gemfile.lock", &["Gemfile", "*.gemspec"]),
    ("composer.lock", &["composer.json"]),
    ("go.sum", &["go.mod"]),
    ("go.work.sum", &["go.work"]),
    ("mix.lock", &["mix.exs"]),
    ("Package.resolved", &["Package.swift"]),
    ("Podfile.lock", &["Podfile"]),
    ("pubspec.lock", &["pubspec.yaml"]),
    ("flake.lock", &["flake.nix"]),
    ("gradle.lockfile", &["build.gradle", "build.gradle.kts"]),
    ("packages.lock.json", &["*.csproj", "*.fsproj", "*.vbproj"]),
    ("paket.lock", &["paket.dependencies"]),
    ("conan.lock", &["conanfile.txt", "conanfile.py"]),
    ("stack.yaml.lock", &["stack.yaml", "package.yaml"]),
    ("cabal.project.freeze", &["cabal.project", "*.cabal"]),
    ("renv.lock", &["DESCRIPTION"]),
];

/// A manifest and the lockfile that locks its dependencies.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct LockedManifest {
    pub manifest: String,
    pub lockfile: String,
}

/// Whether `path` is named like a lockfile of [`LOCKS`].
pub fn is_lockfile(path: &str) -> bool {
    let name = file_name(path);
    LOCKS.iter().any(|(lock, _)| *lock == name)
}

fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

fn dir_of(path: &str) -> &str {
    path.rfind('/').map_or("", |i| &path[..i])
}

fn names_manifest(pattern: &str, name: &str) -> bool {
    match pattern.strip_prefix('*') {
        Some(ext) => name.len() > ext.len() && name.ends_with(ext),
        None => pattern == name,
    }
}

/// Every path named like a manifest of [`LOCKS`] (`Cargo.toml`,
/// `package.json`, …), outside test-data directories.
pub fn manifests(paths: &[String]) -> Vec<&str> {
    let data_rule = PinchRule {
        kind: PinchKind::Lockfile,
        glob: String::new(),
        unit: None,
    };
    paths
        .iter()
        .filter(|p| {
            let name = file_name(p);
            LOCKS
                .iter()
                .any(|(_, m)| m.iter().any(|m| names_manifest(m, name)))
                && data_rule.applies_to(p)
        })
        .map(String::as_str)
        .collect()
}

/// Every manifest of `paths` that a lockfile pinch point locks: the
/// lockfile of its ecosystem in its own directory or, failing that, the
/// nearest directory above it (a Cargo or npm workspace keeps one lockfile
/// at its root). `points` are the tree's pinch points ([`present`]), so
/// lockfiles that are not pinch points (trimmed in `.orch/config`, or test
/// data) lock nothing here.
pub fn locked_manifests(paths: &[String], points: &[PinchPoint]) -> Vec<LockedManifest> {
    // Lockfile rules guard files, so their units are the lockfiles' paths.
    let lockfiles: std::collections::HashSet<&str> = points
        .iter()
        .filter(|p| p.kind == PinchKind::Lockfile)
        .map(|p| p.unit.as_str())
        .collect();
    if lockfiles.is_empty() {
        return Vec::new();
    }
    let data_rule = PinchRule {
        kind: PinchKind::Lockfile,
        glob: String::new(),
        unit: None,
    };
    let mut out = Vec::new();
    for path in paths {
        let name = file_name(path);
        let locks: Vec<&str> = LOCKS
            .iter()
            .filter(|(_, manifests)| manifests.iter().any(|m| names_manifest(m, name)))
            .map(|(lock, _)| *lock)
            .collect();
        if locks.is_empty() || !data_rule.applies_to(path) {
            continue;
        }
        let mut dir = dir_of(path);
        let found = loop {
            let hit = locks.iter().find_map(|lock| {
                let candidate = if dir.is_empty() {
                    (*lock).to_owned()
                } else {
                    format!("{dir}/{lock}")
                };
                lockfiles.contains(candidate.as_str()).then_some(candidate)
            });
            if hit.is_some() || dir.is_empty() {
                break hit;
            }
            dir = dir_of(dir);
        };
        if let Some(lockfile) = found {
            out.push(LockedManifest {
                manifest: path.clone(),
                lockfile,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_compile() {
        for r in rules(&[], &[]) {
            super::super::glob::compile(&r.glob).expect("builtin glob compiles");
            if let Some(u) = &r.unit {
                super::super::glob::compile(u).expect("unit glob compiles");
            }
        }
    }

    #[test]
    fn directory_units() {
        let all = rules(&[], &[]);
        let mig = all
            .iter()
            .find(|r| r.glob == "**/migrations/**")
            .expect("rule");
        assert_eq!(mig.unit_of("db/migrations/0001_init.sql"), "db/migrations");
        let lock = all
            .iter()
            .find(|r| r.glob == "**/Cargo.lock")
            .expect("rule");
        assert_eq!(lock.unit_of("Cargo.lock"), "Cargo.lock");
    }

    #[test]
    fn test_data_is_not_a_pinch_point() {
        let all = rules(&[], &[]);
        let lock = all
            .iter()
            .find(|r| r.glob == "**/Cargo.lock")
            .expect("rule");
        assert!(lock.applies_to("Cargo.lock"));
        assert!(lock.applies_to("frontend/Cargo.lock"));
        assert!(!lock.applies_to("tests/testsuite/x/in/Cargo.lock"));
        let custom = rules(&["tests/golden/**".into()], &[]);
        let c = custom
            .iter()
            .find(|r| r.kind == PinchKind::Custom)
            .expect("custom");
        assert!(c.applies_to("tests/golden/a"));
    }

    #[test]
    fn config_extends_and_trims() {
        let r = rules(&["schema/**".into()], &["**/Cargo.lock".into()]);
        assert!(
            r.iter()
                .any(|r| r.glob == "schema/**" && r.kind == PinchKind::Custom)
        );
        assert!(!r.iter().any(|r| r.glob == "**/Cargo.lock"));
    }

    fn paths(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn present_lists_every_unit_once() {
        let p = paths(&[
            "Cargo.lock",
            "fuzz/Cargo.lock",
            "tests/data/Cargo.lock",
            "db/migrations/1.sql",
            "db/migrations/2.sql",
            "src/main.rs",
        ]);
        let units: Vec<String> = present(&p, &rules(&[], &[]))
            .into_iter()
            .map(|p| p.unit)
            .collect();
        assert_eq!(units, ["Cargo.lock", "db/migrations", "fuzz/Cargo.lock"]);
    }

    #[test]
    fn manifests_are_locked_by_the_nearest_lockfile_of_their_ecosystem() {
        let p = paths(&[
            "Cargo.toml",
            "Cargo.lock",
            "crates/a/Cargo.toml",
            "fuzz/Cargo.toml",
            "fuzz/Cargo.lock",
            "web/package.json",
            "tests/fixture/Cargo.toml",
            "tools/go.mod",
        ]);
        let locked = locked_manifests(&p, &present(&p, &rules(&[], &[])));
        let pairs: Vec<(&str, &str)> = locked
            .iter()
            .map(|l| (l.manifest.as_str(), l.lockfile.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("Cargo.toml", "Cargo.lock"),
                ("crates/a/Cargo.toml", "Cargo.lock"),
                ("fuzz/Cargo.toml", "fuzz/Cargo.lock"),
            ]
        );
        // A lockfile switched off in .orch/config locks nothing.
        let trimmed = rules(&[], &["**/Cargo.lock".into()]);
        assert!(locked_manifests(&p, &present(&p, &trimmed)).is_empty());
    }
}
