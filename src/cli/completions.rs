//! `git orch completions <shell>`: print a completion script generated from
//! the clap definitions.
//!
//! Scripts complete the command `git-orch`; each shell's git completion
//! hands `git orch …` over to it: bash's git-completion.bash calls
//! `_git_orch` (added here) and loads a file named `git-orch` on demand,
//! zsh's `_git` calls `_git-orch`, fish's git completion runs the
//! completion of the `git-orch` command.

use clap::{Args, CommandFactory, ValueEnum};

use super::{Cli, CommandResult, exit, output};

/// Print a shell completion script for bash, zsh or fish on stdout.
///
/// bash: save it as ~/.local/share/bash-completion/completions/git-orch
/// (loaded on demand for both `git orch` and `git-orch`), or source it from
/// ~/.bashrc after git's own completion. zsh: save it as `_git-orch` in a
/// directory of $fpath, before compinit runs. fish: save it as
/// ~/.config/fish/completions/git-orch.fish.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Shells with a completion script.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
}

/// The bridge from git's bash completion: git-completion.bash calls
/// `_git_<command>` with `words`, `cword`, `cur` and `__git_cmd_idx` (the
/// index of `orch`) set, and completes with `-o nospace`, adding spaces
/// itself. This runs the `git-orch` completion on the words from `orch` on.
const BASH_GIT_BRIDGE: &str = r#"
# `git orch <TAB>`: git-completion.bash calls _git_orch.
_git_orch ()
{
	local idx=${__git_cmd_idx:-1}
	local COMP_WORDS=("git-orch" "${words[@]:idx+1}")
	local COMP_CWORD=$((cword - idx))
	local before=""
	if [ "$COMP_CWORD" -gt 0 ]; then
		before=${COMP_WORDS[COMP_CWORD-1]}
	fi
	_git__orch git-orch "$cur" "$before"
	local i
	for i in "${!COMPREPLY[@]}"; do
		if [ -d "${COMPREPLY[i]}" ]; then
			COMPREPLY[i]+="/"
		elif [[ ${COMPREPLY[i]} != *= ]]; then
			COMPREPLY[i]+=" "
		fi
	done
}
"#;

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    // Hidden commands (`debug`) are not offered: the generators list every
    // subcommand, so the tree is rebuilt from the visible ones.
    let full = Cli::command();
    let mut cmd = clap::Command::new("git-orch")
        .about(full.get_about().cloned().unwrap_or_default())
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    let mut buf = Vec::new();
    let generator = match shell {
        Shell::Bash => clap_complete::Shell::Bash,
        Shell::Zsh => clap_complete::Shell::Zsh,
        Shell::Fish => clap_complete::Shell::Fish,
    };
    clap_complete::generate(generator, &mut cmd, "git-orch", &mut buf);
    let mut text = String::from_utf8(buf).expect("completion scripts are UTF-8");
    if shell == Shell::Bash {
        // clap_complete spells the state of a subcommand of a hyphenated
        // binary two ways (`git__orch__subcmd__plan` while walking the
        // words, `git__subcmd__orch__subcmd__plan` in the case arms), so
        // nothing past the first word completes (clap-rs/clap#6421).
        text = text.replace("git__subcmd__orch__subcmd__", "git__orch__subcmd__");
        text.push_str(BASH_GIT_BRIDGE);
    }
    text
}

pub fn run(_cli: &Cli, args: &CompletionsArgs) -> CommandResult {
    output::Out::new().line(script(args.shell).trim_end());
    Ok(exit::OK)
}
