//! The `git-orch` binary: parse, run, exit. Everything else is in the library.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(git_orch::cli::main())
}
