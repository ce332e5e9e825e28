//! `git orch web`: serve the read-only view of this repository's runs on
//! 127.0.0.1 until Ctrl-C. The server is `crate::web`; this prints its URL.

use clap::Args;

use super::error::CommandError;
use super::exit;
use super::globals::{CommandResult, GlobalArgs, open_store};
use super::output;

/// Serve a read-only view of plans, runs, attempts, diffs and verdicts to
/// a browser on this machine.
///
/// Listens on 127.0.0.1 only and prints a URL holding a random token:
/// requests without it are refused (403). Nothing it serves changes the
/// repository; it reads refs/orch and refs/notes/orch alone, so it works
/// on a fresh clone after `git orch sync`. Pages of a running run follow
/// it live. Ctrl-C stops it (exit 0).
#[derive(Debug, Args)]
pub struct WebArgs {
    /// The port to listen on (default: any free port).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub port: u16,
    /// Open the URL in a browser too ($BROWSER, else xdg-open or open).
    #[arg(long)]
    pub open: bool,
}

pub fn run(cli: &GlobalArgs, args: &WebArgs) -> CommandResult {
    let store = open_store(&cli.directory)?;
    let server = crate::web::Server::bind(&store, args.port).map_err(|e| match e {
        crate::web::WebError::Bind { port, .. } if port != 0 => CommandError::error(e.to_string())
            .hint(format!(
                "another program uses port {port}; leave --port out to take any free port"
            )),
        e => CommandError::error(e.to_string()),
    })?;
    drop(store);
    let url = server.url();
    let mut out = output::Out::new();
    out.line(&url);
    out.flush();
    output::status(&format!(
        "serving a read-only view of this repository at {url} (Ctrl-C stops it)"
    ));
    if args.open
        && let Err(e) = crate::process::open_url(&url)
    {
        output::status(&format!(
            "warning: could not open a browser: {e}; open the URL above"
        ));
    }
    // A long-lived process with a few blocking threads: keep its memory
    // to what it uses.
    crate::process::limit_malloc_arenas(2);
    let runtime = super::globals::scheduler()?;
    runtime
        .block_on(server.serve(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async {
                    match term.as_mut() {
                        Some(t) => { t.recv().await; }
                        None => std::future::pending::<()>().await,
                    }
                } => {}
            }
        }))
        .map_err(|e| CommandError::error(e.to_string()))?;
    output::status("stopped");
    Ok(exit::OK)
}
