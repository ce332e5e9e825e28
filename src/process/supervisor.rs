//! The supervisor that keeps an agent (or gate, or setup command) from
//! outliving the process that started it.
//!
//! A driver killed with SIGKILL cannot stop its children, and their
//! children are re-parented to init and run on. So every long-running
//! command starts as `git-orch supervise --parent PID -- PROGRAM ARGS...`:
//! this same binary in a hidden mode, which
//!
//! - makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`), so every
//!   descendant whose parent dies is re-parented to it rather than to init
//!   and stays within reach, whatever process group or session it moved to;
//! - asks for a signal when its parent dies (`PR_SET_PDEATHSIG`), and also
//!   polls its parent id, because the kernel sends that signal when the
//!   parent *thread* ends, which a multi-threaded driver does without dying;
//! - runs the command in its own process group (the supervisor leads it, so
//!   the driver's `killpg` on a timeout reaches both);
//! - when the command ends, or a stop signal arrives, or the parent is
//!   gone: signals what is left, waits a short grace, then kills every
//!   remaining descendant with SIGKILL, one direct child at a time (a
//!   direct child's pid cannot be reused before it is reaped, so no
//!   unrelated process is ever signalled), until it has no children;
//! - exits with the command's exit code, or dies of the command's signal.
//!
//! Linux only: elsewhere the command runs directly (see `GroupChild`).

use std::ffi::OsString;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// The last stop signal received (0: none).
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// Set when the parent-death signal arrived.
static PARENT_SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The signal the kernel sends when the parent thread ends.
const PARENT_DEATH: libc::c_int = libc::SIGUSR2;

extern "C" fn on_stop(sig: libc::c_int) {
    STOP_SIGNAL.store(sig, Ordering::SeqCst);
}

extern "C" fn on_parent_death(sig: libc::c_int) {
    PARENT_SIGNAL.store(sig, Ordering::SeqCst);
}

/// Does nothing: its only job is to cut [`nap`] short when a child ends.
extern "C" fn on_child(_sig: libc::c_int) {}

/// Sleeps up to `d`, returning early when any handled signal arrives (a
/// child ended, a stop signal, the parent's death), so the command's end
/// is seen at once rather than at the next poll: a gate or agent that
/// runs 5 ms is not made to look like 15. (`std::thread::sleep` sleeps
/// on through signals.) A signal landing just before the call costs one
/// full `d`, as a plain poll would.
fn nap(d: Duration) {
    let ts = libc::timespec {
        tv_sec: d.as_secs() as libc::time_t,
        tv_nsec: d.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `ts` is a valid timespec; the remainder is not wanted.
    unsafe {
        libc::nanosleep(&ts, std::ptr::null_mut());
    }
}

fn install(sig: libc::c_int, handler: extern "C" fn(libc::c_int)) {
    // SAFETY: the handlers only store into atomics, which is
    // async-signal-safe; the sigaction struct is zeroed then filled.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = handler as usize;
        action.sa_flags = 0;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(sig, &action, std::ptr::null_mut());
    }
}

/// What the supervisor needs to know.
#[derive(Debug, Clone)]
pub struct Supervision {
    /// The process that must stay alive for the command to go on.
    pub parent: u32,
    /// How long descendants get between SIGTERM and SIGKILL when the
    /// command is stopped from outside.
    pub grace: Duration,
    pub program: OsString,
    pub args: Vec<OsString>,
}

/// Whether `parent` is still this process's parent. After the parent's
/// death the kernel re-parents this process (to init or a subreaper), so
/// the id changes.
fn parent_alive(parent: u32) -> bool {
    // SAFETY: getppid has no preconditions.
    let ppid = unsafe { libc::getppid() };
    ppid as u32 == parent
}

/// Direct children of this process, read from /proc (every task's
/// `children` file would miss nothing either, but needs a kernel option).
fn direct_children() -> Vec<libc::pid_t> {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name: state ppid …
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<libc::pid_t>().ok());
        if ppid == Some(me) {
            out.push(pid);
        }
    }
    out
}

/// Reaps every child that has ended; returns the main child's status if it
/// was among them. `Err(())` once no child is left at all.
fn reap(main: libc::pid_t, main_status: &mut Option<libc::c_int>) -> Result<(), ()> {
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: waitpid writes only to `status`.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid > 0 {
            if pid == main {
                *main_status = Some(status);
            }
            continue;
        }
        if pid == 0 {
            return Ok(());
        }
        // ECHILD: nothing left to wait for. EINTR: try again.
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        }
        return Err(());
    }
}

/// Sends `sig` to every direct child. Children of a killed child are
/// re-parented here (this process is their subreaper) and get theirs on
/// the next round.
fn signal_children(sig: libc::c_int) {
    for pid in direct_children() {
        // SAFETY: `pid` is a child of this process, not yet reaped, so the
        // id cannot have been reused; kill has no memory effects.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// TERM to every descendant, `grace` for them to go, then KILL until no
/// child is left (bounded, so a process stuck in the kernel cannot hold the
/// supervisor forever).
fn end_descendants(grace: Duration, main: libc::pid_t, main_status: &mut Option<libc::c_int>) {
    // The usual case: the command left nothing behind, and there is no
    // need to scan /proc for children to signal.
    if reap(main, main_status).is_err() {
        return;
    }
    signal_children(libc::SIGTERM);
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if reap(main, main_status).is_err() {
            return;
        }
        // Woken at once when a child ends (a sandbox's init often
        // outlives the sandbox's own process by a moment), not at the
        // next poll.
        nap(Duration::from_millis(10));
    }
    let give_up = Instant::now() + Duration::from_secs(10);
    while Instant::now() < give_up {
        signal_children(libc::SIGKILL);
        nap(Duration::from_millis(5));
        if reap(main, main_status).is_err() {
            return;
        }
    }
}

/// Ends this process the way the command ended: its exit code, or its
/// signal (default action restored, then raised).
fn exit_like(status: Option<libc::c_int>) -> ! {
    let Some(status) = status else {
        std::process::exit(1);
    };
    if libc::WIFEXITED(status) {
        std::process::exit(libc::WEXITSTATUS(status));
    }
    if libc::WIFSIGNALED(status) {
        let sig = libc::WTERMSIG(status);
        // SAFETY: restoring the default action and raising the signal on
        // ourselves; no memory is touched.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
        }
        std::process::exit(128 + sig);
    }
    std::process::exit(1);
}

/// Runs the supervised command to its end; never returns.
pub fn supervise(s: Supervision) -> ! {
    for sig in [libc::SIGTERM, libc::SIGINT, libc::SIGHUP] {
        install(sig, on_stop);
    }
    install(PARENT_DEATH, on_parent_death);
    install(libc::SIGCHLD, on_child);
    // SAFETY: prctl with these options only changes this process's
    // attributes.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        libc::prctl(libc::PR_SET_PDEATHSIG, PARENT_DEATH, 0, 0, 0);
    }
    // The parent may have died before PDEATHSIG was armed.
    if !parent_alive(s.parent) {
        std::process::exit(crate::process::PARENT_GONE_EXIT);
    }
    let child = match std::process::Command::new(&s.program).args(&s.args).spawn() {
        Ok(c) => c,
        Err(e) => {
            // The same codes a shell uses, so callers classify it alike.
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            let _ = std::io::Write::write_all(
                &mut std::io::stderr(),
                format!(
                    "git-orch: could not start `{}`: {e}\n",
                    s.program.to_string_lossy()
                )
                .as_bytes(),
            );
            std::process::exit(code);
        }
    };
    let main = child.id() as libc::pid_t;
    // The status is collected with waitpid below, not through `child`.
    drop(child);
    let mut main_status: Option<libc::c_int> = None;
    loop {
        let _ = reap(main, &mut main_status);
        if main_status.is_some() {
            // The command ended; whatever it left behind goes too.
            end_descendants(s.grace, main, &mut main_status);
            exit_like(main_status);
        }
        // The parent-death signal only wakes this loop early: a thread of
        // the driver ending sends it too, so the parent id decides.
        PARENT_SIGNAL.store(0, Ordering::SeqCst);
        if !parent_alive(s.parent) {
            // Nobody will read the result: stop everything quickly.
            end_descendants(Duration::from_millis(500), main, &mut main_status);
            exit_like(main_status);
        }
        if STOP_SIGNAL.load(Ordering::SeqCst) != 0 {
            // The driver stopped the group (timeout, Ctrl-C): the command
            // got the signal too. Give it the grace, then end the rest
            // before the driver's own SIGKILL takes this process.
            let grace = s.grace.saturating_sub(Duration::from_millis(500));
            let deadline = Instant::now() + grace;
            while Instant::now() < deadline && main_status.is_none() {
                if reap(main, &mut main_status).is_err() {
                    break;
                }
                if !parent_alive(s.parent) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            end_descendants(Duration::ZERO, main, &mut main_status);
            exit_like(main_status);
        }
        nap(Duration::from_millis(20));
    }
}
