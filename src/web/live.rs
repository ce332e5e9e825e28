//! Pages that follow the log: one watcher per server reads what the log
//! gained (the state index compares the log refs' tips and folds only new
//! records) a few times a second and bumps a generation number; each open
//! page's event stream re-renders that page's live part when the number
//! moves (and every few seconds, for times that run on) and sends it when
//! it differs from what it sent last.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::Stream;
use maud::Markup;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::error::PageError;
use super::reader::{Ctx, Reader};

/// How often the watcher looks at the log's tips: a new event shows within
/// this plus a render.
pub const POLL: Duration = Duration::from_millis(200);
/// How often a live part is rendered again without a new event (elapsed
/// times of running attempts move on).
pub const TICK: Duration = Duration::from_secs(5);

/// Watches the log until `cancel`: `changes` moves on every gain.
pub async fn watch(reader: Reader, changes: watch::Sender<u64>, cancel: CancellationToken) {
    loop {
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep(POLL) => {}
        }
        let r = reader.clone();
        let gained = tokio::task::spawn_blocking(move || r.refresh()).await;
        if matches!(gained, Ok(Ok(true))) {
            changes.send_modify(|g| *g = g.wrapping_add(1));
        }
    }
}

/// The live part of a page.
#[derive(Debug, Clone)]
pub enum Part {
    Run { run: String },
    Task { run: String, task: String },
}

impl Part {
    fn render(&self, ctx: &mut Ctx<'_>) -> Result<Markup, PageError> {
        match self {
            Part::Run { run } => super::run::fragment(ctx, run),
            Part::Task { run, task } => super::task::fragment(ctx, run, task),
        }
    }
}

struct Follow {
    reader: Reader,
    changes: watch::Receiver<u64>,
    cancel: CancellationToken,
    part: Part,
    last: Option<String>,
    started: bool,
}

/// The event stream of `part`: an `update` event with its HTML now, and
/// again whenever it changes, until `cancel`.
pub fn stream(
    reader: Reader,
    changes: watch::Receiver<u64>,
    cancel: CancellationToken,
    part: Part,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let follow = Follow {
        reader,
        changes,
        cancel,
        part,
        last: None,
        started: false,
    };
    let events = futures_util::stream::unfold(follow, |mut f| async move {
        loop {
            if f.started {
                tokio::select! {
                    _ = f.cancel.cancelled() => return None,
                    moved = f.changes.changed() => if moved.is_err() { return None },
                    _ = tokio::time::sleep(TICK) => {}
                }
            }
            f.started = true;
            let (reader, part) = (f.reader.clone(), f.part.clone());
            let rendered = tokio::task::spawn_blocking(move || {
                reader.read(|ctx| part.render(ctx).map(Markup::into_string))
            })
            .await;
            let html = match rendered {
                Ok(Ok(html)) => html,
                Ok(Err(e)) => maud::html! { p.none { (e.message) } }.into_string(),
                Err(_) => continue,
            };
            if f.last.as_deref() != Some(html.as_str()) {
                // A carriage return cannot travel in an event's data.
                let event = Event::default()
                    .event("update")
                    .data(html.replace('\r', ""));
                f.last = Some(html);
                return Some((Ok(event), f));
            }
        }
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}
