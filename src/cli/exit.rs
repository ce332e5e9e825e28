//! Exit codes shared by every command (docs/cli.md, exit codes).

pub const OK: u8 = 0;
pub const ERROR: u8 = 1;
pub const USAGE: u8 = 2;
pub const BLOCKED: u8 = 3;
pub const BUDGET: u8 = 64;
pub const BREAKER: u8 = 65;
/// git-orch cannot do its own work here (the disk is full, or the
/// same internal failure repeats): sysexits' `EX_IOERR`.
pub const BROKEN: u8 = 74;
/// An agent or the sandbox cannot work as configured (an unknown
/// agent, its program missing or hidden, no key or a refused one, a
/// bad bind): sysexits' `EX_CONFIG`. No retry can fix it.
pub const CONFIG: u8 = 78;
pub const INTERRUPTED: u8 = 130;
