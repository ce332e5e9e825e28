//! Warm worktrees (issue 28) for an attempt: its fresh worktree gets the
//! main checkout's local files and, where caches are copies rather than
//! overlays, its cache folders (see `sandbox::warm`). Its overlays are
//! mounted per command by the sandbox; their layers go with the
//! attempt's cleanup (`run::control`).

use std::path::Path;

use super::context::RunContext;
use crate::sandbox::warm::WarmError;

/// Warms the attempt worktree at `worktree`, just made.
pub async fn worktree(ctx: &RunContext, worktree: &Path) -> Result<(), WarmError> {
    let settings = ctx.settings.sandbox.clone();
    if settings.worktree.is_empty() {
        return Ok(());
    }
    let (common, dir) = (ctx.common_dir.clone(), worktree.to_owned());
    tokio::task::spawn_blocking(move || {
        crate::sandbox::warm_checkout(&settings, &common, &dir).map(|_| ())
    })
    .await
    .expect("warming does not panic")
}
