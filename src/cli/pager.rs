//! Long outputs (`log`, `plan show`, `plan diff`) through git's pager on
//! a terminal, the way git pages its own: the pager `git var GIT_PAGER`
//! names (`GIT_PAGER`, then `core.pager`, then `PAGER`, then `less`), with
//! `LESS=FRX` and `LV=-c` unless set, none when stdout is not a terminal,
//! when the pager is `cat` or empty, with `--no-pager`, or when
//! `pager.orch` is false.

use std::io::IsTerminal;
use std::os::fd::AsRawFd;

/// A pager that stdout now feeds; [`Pager::wait`] lets it finish.
pub struct Pager {
    child: std::process::Child,
}

/// The pager command for a repository at `dir`, if output should be paged.
fn command(dir: &std::path::Path) -> Option<String> {
    if std::env::var_os("GIT_PAGER_IN_USE").is_some() {
        return None;
    }
    let git = crate::process::Git::new(dir);
    if let Ok(out) = git.output(["config", "--type=bool", "pager.orch"])
        && String::from_utf8_lossy(&out.stdout).trim() == "false"
    {
        return None;
    }
    let out = git.output(["var", "GIT_PAGER"]).ok()?;
    let pager = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !pager.is_empty() && pager != "cat").then_some(pager)
}

/// Starts the pager and points stdout at it, when stdout is a terminal
/// and a pager is configured.
pub fn start(dir: &std::path::Path) -> Option<Pager> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    let pager = command(dir)?;
    let mut env = vec![("GIT_PAGER_IN_USE", "true")];
    if std::env::var_os("LESS").is_none() {
        env.push(("LESS", "FRX"));
    }
    if std::env::var_os("LV").is_none() {
        env.push(("LV", "-c"));
    }
    let mut child = crate::process::spawn_pager(&pager, &env).ok()?;
    let stdin = child.stdin.take()?;
    // SAFETY: fd 1 becomes a copy of the pipe to the pager; the pipe's own
    // descriptor closes when `stdin` drops.
    let ok = unsafe { libc::dup2(stdin.as_raw_fd(), libc::STDOUT_FILENO) } >= 0;
    drop(stdin);
    if !ok {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    Some(Pager { child })
}

impl Pager {
    /// Closes the pager's input and waits for the person to leave it.
    pub fn wait(mut self) {
        // SAFETY: closing fd 1 ends the pager's input; nothing writes to
        // stdout after this.
        unsafe {
            libc::close(libc::STDOUT_FILENO);
        }
        let _ = self.child.wait();
    }
}
