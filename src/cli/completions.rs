//! `git orch completions <shell>`: print a completion script generated from
//! the clap definitions.
//!
//! Scripts complete the command `git-orch`; each shell's git completion
//! hands `git orch …` over to it: bash's git-completion.bash calls
//! `_git_orch` (added here) and loads a file named `git-orch` on demand,
//! zsh's `_git` calls `_git-orch`; for fish a small function added here
//! forwards `git orch …` (fish's own git completion does so only in newer
//! versions).

use clap::{Args, CommandFactory, ValueEnum};

use super::{Cli, CommandResult, exit, output};

/// Print a shell completion script for bash, zsh or fish on stdout.
///
/// bash: save it as ~/.local/share/bash-completion/completions/git-orch
/// (loaded on demand for both `git orch` and `git-orch`), or source it from
/// ~/.bashrc after git's own completion. zsh: save it as `_git-orch` in a
/// directory of $fpath, before compinit runs. fish: save it as
/// ~/.config/fish/conf.d/git-orch.fish.
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

/// The bridge for fish: its git completion hands `git orch …` to the
/// `git-orch` completion only in newer versions (3.6 looks for a command
/// `git-git-orch`), so this does it whenever the file is loaded, which
/// `conf.d/` does at startup.
const FISH_GIT_BRIDGE: &str = r#"
# `git orch <TAB>`: the words after `orch`, if `orch` is git's command.
function __git_orch_words
    set -l words (commandline -opc)
    set -e words[1]
    while set -q words[1]
        switch $words[1]
            case -C -c --git-dir --work-tree --namespace
                set -e words[1..2]
            case '-*'
                set -e words[1]
            case orch
                set -e words[1]
                printf '%s\n' $words
                return 0
            case '*'
                return 1
        end
    end
    return 1
end
complete -c git -f -n '__git_orch_words >/dev/null' -a '(complete -C (string join " " -- git-orch (__git_orch_words) (commandline -ct)))'
"#;

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    // Hidden commands (`debug`) are not offered: the generators list every
    // subcommand, so the tree is rebuilt from the visible ones.
    let full = Cli::command();
    let mut cmd = clap::Command::default()
        .name("git-orch")
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
    if shell == Shell::Fish {
        text.push_str(FISH_GIT_BRIDGE);
    }
    text
}

pub fn run(_cli: &Cli, args: &CompletionsArgs) -> CommandResult {
    output::Out::new().line(script(args.shell).trim_end());
    Ok(exit::OK)
}
