//! What a confined command must see to start, and how little to show for
//! it: its program as its `PATH` finds it, the interpreter of a `#!`
//! script (through `env` too), the programs and scripts a command line
//! names ([`super::command_line`]), and git-orch itself, which the
//! attempt's commit hook calls back by path.
//!
//! The sandbox replaces `/tmp` and `/var/tmp` with empty folders, so a
//! downloaded binary or a script in a scratch folder would be missing
//! inside. Each such file is shown read-only with the widest of its
//! install folder (the parent of its `bin` folder), its own folder, or the
//! file alone that holds nothing the sandbox hides on purpose (the home
//! folder, the private homes, agent sockets). Files under the home folder
//! are the toolchain roots' business (`super::toolchain_roots`).
//!
//! A `#!` line is only followed for a file no agent can write (outside the
//! worktrees, the repository and every writable bind): otherwise an agent
//! could name any file as its next attempt's interpreter and have it
//! shown. Pure but for reading files' first bytes and the metadata of
//! paths.

use std::path::{Path, PathBuf};

/// The temporary folders the sandbox replaces with private empty ones.
pub const PRIVATE_TEMP: [&str; 2] = ["/tmp", "/var/tmp"];

/// `name` as a shell with `path` finds it: an absolute path as it is, a
/// bare name on the absolute entries of `path`. A relative path names a
/// file of the worktree: `None`.
pub fn find(name: &str, path: Option<&str>) -> Option<PathBuf> {
    if name.contains('/') {
        return name.starts_with('/').then(|| PathBuf::from(name));
    }
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path?)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(name))
        .find(|p| {
            p.metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The interpreter of a script's `#!` line and, when that is `env`, the
/// program it runs (found on `path`).
pub fn interpreters(file: &Path, path: Option<&str>) -> Vec<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let Ok(n) = std::fs::File::open(file).and_then(|mut f| f.read(&mut head)) else {
        return Vec::new();
    };
    let Some(line) = head[..n]
        .strip_prefix(b"#!")
        .and_then(|rest| rest.split(|b| *b == b'\n').next())
        .and_then(|l| std::str::from_utf8(l).ok())
    else {
        return Vec::new();
    };
    let mut words = line.split_whitespace();
    let Some(interpreter) = words.next().filter(|w| w.starts_with('/')) else {
        return Vec::new();
    };
    let mut out = vec![PathBuf::from(interpreter)];
    if interpreter.rsplit('/').next() == Some("env") {
        // `env -S python3 -u`, `env python3`: the first word that is
        // neither an option nor an assignment.
        if let Some(program) = words.find(|w| !w.starts_with('-') && !w.contains('='))
            && let Some(found) = find(program, path)
        {
            out.push(found);
        }
    }
    out
}

/// Every file the command needs for `names`: each found on `path`, as
/// named and resolved (a link and what it points at), with its
/// interpreters, and git-orch itself. A file `trusted` refuses (one an
/// agent can write) is left out with all it would name: where an agent
/// can write, it can see, and a link or `#!` line it wrote must not choose
/// what is shown.
pub fn needed_files(
    names: &[&str],
    path: Option<&str>,
    trusted: &dyn Fn(&Path) -> bool,
) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let add = |p: PathBuf, out: &mut Vec<PathBuf>| {
        for candidate in [p.clone(), canonical(&p)] {
            if !out.contains(&candidate) {
                out.push(candidate);
            }
        }
    };
    for name in names {
        let Some(file) = find(name, path).filter(|f| f.exists()) else {
            continue;
        };
        let real = canonical(&file);
        if !(trusted(&file) && trusted(&real)) {
            continue;
        }
        add(file, &mut out);
        for interpreter in interpreters(&real, path) {
            add(interpreter, &mut out);
        }
    }
    if let Ok(own) = std::env::current_exe() {
        add(own, &mut out);
    }
    out
}

/// Whether `path` lies in one of the private temporary folders.
pub fn in_private_temp(path: &Path) -> bool {
    PRIVATE_TEMP.iter().any(|t| path.starts_with(t))
}

/// What to show read-only for `file`, which sits in a private temporary
/// folder: the widest of its install folder (the parent of the `bin`
/// folder it is in), its folder and the file itself that is not a
/// temporary folder itself and holds none of `protected`.
pub fn temp_bind(file: &Path, protected: &[PathBuf]) -> Option<PathBuf> {
    if !in_private_temp(file) {
        return None;
    }
    let folder = file.parent()?;
    let install = folder
        .ancestors()
        .take_while(|a| in_private_temp(a))
        .find(|a| a.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent);
    let holds_nothing_hidden = |dir: &Path| {
        !PRIVATE_TEMP.iter().any(|t| dir == Path::new(t))
            && in_private_temp(dir)
            && !protected.iter().any(|p| p.starts_with(dir))
    };
    install
        .into_iter()
        .chain([folder])
        .find(|d| holds_nothing_hidden(d))
        .map(Path::to_owned)
        .or_else(|| (!protected.iter().any(|p| p == file)).then(|| file.to_owned()))
}

fn canonical(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_program_shows_its_install_folder_unless_that_holds_something_hidden() {
        let none: [PathBuf; 0] = [];
        assert_eq!(
            temp_bind(Path::new("/tmp/dl/tool/bin/tool"), &none),
            Some(PathBuf::from("/tmp/dl/tool"))
        );
        assert_eq!(
            temp_bind(Path::new("/tmp/scratch/agent.sh"), &none),
            Some(PathBuf::from("/tmp/scratch"))
        );
        // The install folder holds the home folder: the bin folder only.
        let home = [PathBuf::from("/tmp/u/home")];
        assert_eq!(
            temp_bind(Path::new("/tmp/u/bin/git-orch"), &home),
            Some(PathBuf::from("/tmp/u/bin"))
        );
        // Its folder holds a socket: the file alone.
        let sock = [PathBuf::from("/tmp/u/agent.sock")];
        assert_eq!(
            temp_bind(Path::new("/tmp/u/agent.sh"), &sock),
            Some(PathBuf::from("/tmp/u/agent.sh"))
        );
        // Right in /tmp: never /tmp itself.
        assert_eq!(
            temp_bind(Path::new("/tmp/agent.sh"), &none),
            Some(PathBuf::from("/tmp/agent.sh"))
        );
        assert_eq!(temp_bind(Path::new("/usr/bin/git"), &none), None);
        // A `bin` above /tmp is not an install folder in it.
        assert_eq!(
            temp_bind(Path::new("/var/tmp/x/y"), &none),
            Some(PathBuf::from("/var/tmp/x"))
        );
    }

    #[test]
    fn shebangs_name_the_interpreter_and_what_env_runs() {
        let dir = tempfile::tempdir().expect("tmp");
        let bin = dir.path().join("bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        let python = bin.join("python9");
        std::fs::write(&python, "").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&python, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let path = bin.to_string_lossy().into_owned();
        let script = dir.path().join("s");
        std::fs::write(&script, "#!/usr/bin/env -S python9 -u\nprint()\n").expect("write");
        assert_eq!(
            interpreters(&script, Some(&path)),
            [PathBuf::from("/usr/bin/env"), python.clone()]
        );
        std::fs::write(&script, format!("#! {} -x\n", python.display())).expect("write");
        assert_eq!(
            interpreters(&script, Some(&path)),
            std::slice::from_ref(&python)
        );
        std::fs::write(&script, "\x7fELF#!/bin/sh").expect("write");
        assert!(interpreters(&script, Some(&path)).is_empty());
        // Relative names and relative PATH entries find nothing.
        assert_eq!(find("./x", Some(&path)), None);
        assert_eq!(find("python9", Some(".")), None);
        assert_eq!(find("python9", Some(&path)), Some(python));
    }

    #[test]
    fn an_untrusted_script_names_nothing() {
        let dir = tempfile::tempdir().expect("tmp");
        let script = dir.path().join("agent");
        std::fs::write(&script, "#!/secret/interpreter\n").expect("write");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/bin/sh", &link).expect("symlink");
        let name = script.to_string_lossy().into_owned();
        let all = needed_files(&[&name], None, &|_| true);
        assert!(
            all.contains(&PathBuf::from("/secret/interpreter")),
            "{all:?}"
        );
        assert!(all.contains(&script));
        // An agent wrote them: neither the script, nor its `#!` line, nor
        // where a link points chooses anything to show.
        let outside_what_agents_write = |p: &Path| !p.starts_with(dir.path());
        let none = needed_files(&[&name], None, &outside_what_agents_write);
        assert!(!none.contains(&PathBuf::from("/secret/interpreter")));
        assert!(!none.contains(&script));
        let link_name = link.to_string_lossy().into_owned();
        let target = PathBuf::from("/bin/sh").canonicalize().expect("sh");
        assert!(needed_files(&[&link_name], None, &|_| true).contains(&target));
        let none = needed_files(&[&link_name], None, &outside_what_agents_write);
        assert!(!none.contains(&target), "{none:?}");
    }
}
