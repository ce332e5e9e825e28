//! `git-orch warm-mount` (hidden): mounts a command's warm caches
//! (`[worktree] cache`) as overlays in a mount namespace of its own, then
//! becomes the command (bubblewrap). Started by the sandbox's command
//! line, never by people; the work is in `sandbox::warm`.

use std::ffi::OsString;

use clap::Args;

/// Mount warm caches for one command, then run it (internal).
#[derive(Debug, Args)]
pub struct WarmMountArgs {
    /// Only check that overlays can be mounted here.
    #[arg(long)]
    pub probe: bool,
    /// `--overlay LOWER UPPER WORK BASE REL`… `-- PROGRAM ARGS…`
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<OsString>,
}

pub fn run(args: &WarmMountArgs) -> ! {
    if args.probe {
        match crate::sandbox::warm::probe_here() {
            Ok(()) => std::process::exit(0),
            Err(why) => {
                eprintln!("error: {why}");
                std::process::exit(1)
            }
        }
    }
    let fail = |why: String| -> ! {
        eprintln!("error: git-orch warm-mount: {why}");
        std::process::exit(super::exit::ERROR.into())
    };
    let (overlays, command) = match crate::sandbox::warm::parse_args(&args.args) {
        Ok(parsed) => parsed,
        Err(why) => fail(why.to_string()),
    };
    let Some((program, rest)) = command.split_first() else {
        fail("no command".into())
    };
    if let Err(why) = crate::sandbox::warm::enter(&overlays) {
        fail(why.to_string());
    }
    let e = crate::process::exec(program, rest);
    fail(format!("{}: {e}", program.to_string_lossy()))
}
