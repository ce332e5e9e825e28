//! The HTTP server: routes, the access guard in front of all of them, and
//! rendering a page on a blocking thread with its server time in a
//! `Server-Timing` header.
//!
//! Every route is a GET (HEAD too) under `/<token>/`; nothing here changes
//! state. Ctrl-C (or whatever future `serve` is given) ends the live
//! streams, lets answers in flight finish for up to two seconds, and
//! returns.

use std::future::{Future, IntoFuture};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use maud::{Markup, html};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::access;
use super::error::{PageError, WebError};
use super::href::Links;
use super::live::{self, Part};
use super::reader::{Ctx, Reader};
use crate::store::Store;

/// A server bound to its port, not serving yet.
pub struct Server {
    listener: std::net::TcpListener,
    port: u16,
    token: String,
    reader: Reader,
}

impl Server {
    /// Binds 127.0.0.1:`port` (0: any free port) and folds the log of
    /// `store`, read-only.
    pub fn bind(store: &Store, port: u16) -> Result<Self, WebError> {
        let bind = |source| WebError::Bind { port, source };
        let listener = std::net::TcpListener::bind(("127.0.0.1", port)).map_err(bind)?;
        listener.set_nonblocking(true).map_err(bind)?;
        let port = listener.local_addr().map_err(bind)?.port();
        let token = access::new_token();
        let reader = Reader::open(store, Links::new(&token))?;
        Ok(Self {
            listener,
            port,
            token,
            reader,
        })
    }

    /// The URL to open: the only way in.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/{}/", self.port, self.token)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Serves until `shutdown` completes. Needs a tokio runtime with I/O
    /// and time enabled.
    pub async fn serve(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), WebError> {
        let listener = tokio::net::TcpListener::from_std(self.listener).map_err(WebError::Serve)?;
        let cancel = CancellationToken::new();
        let (tx, rx) = watch::channel(0u64);
        let watcher = tokio::spawn(live::watch(self.reader.clone(), tx, cancel.clone()));
        let app = App {
            reader: self.reader,
            token: self.token,
            port: self.port,
            changes: rx,
            cancel: cancel.clone(),
        };
        let stop = cancel.clone();
        let serving = axum::serve(listener, routes(app))
            .with_graceful_shutdown(async move {
                shutdown.await;
                stop.cancel();
            })
            .into_future();
        let done = tokio::select! {
            r = serving => r.map_err(WebError::Serve),
            _ = async {
                cancel.cancelled().await;
                tokio::time::sleep(Duration::from_secs(2)).await;
            } => Ok(()),
        };
        cancel.cancel();
        let _ = watcher.await;
        done
    }
}

/// What every handler shares.
#[derive(Clone)]
struct App {
    reader: Reader,
    token: String,
    port: u16,
    changes: watch::Receiver<u64>,
    cancel: CancellationToken,
}

impl App {
    /// Renders a page on a blocking thread: HTML with its status, the
    /// time it took in `Server-Timing`.
    async fn page<F>(&self, render: F) -> Response
    where
        F: FnOnce(&mut Ctx<'_>) -> Result<Markup, PageError> + Send + 'static,
    {
        let reader = self.reader.clone();
        let start = Instant::now();
        let rendered = tokio::task::spawn_blocking(move || reader.read(render)).await;
        let took = start.elapsed();
        let (status, body) = match rendered {
            Ok(Ok(page)) => (StatusCode::OK, page.into_string()),
            Ok(Err(e)) => (
                StatusCode::from_u16(e.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                error_page(self.reader.links(), &e).into_string(),
            ),
            Err(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                error_page(
                    self.reader.links(),
                    &PageError::internal("rendering this page failed"),
                )
                .into_string(),
            ),
        };
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        );
        if let Ok(v) =
            HeaderValue::from_str(&format!("render;dur={:.1}", took.as_secs_f64() * 1000.0))
        {
            headers.insert("server-timing", v);
        }
        response
    }
}

fn error_page(links: &Links, e: &PageError) -> Markup {
    super::layout::page(
        links,
        "not shown",
        &[],
        html! {
            h1 { "Cannot show this page" }
            p.failure { (e.message) }
        },
    )
}

fn routes(app: App) -> Router {
    Router::new()
        .route("/{token}", get(runs_page))
        .route("/{token}/", get(runs_page))
        .route("/{token}/runs/{run}", get(run_page))
        .route("/{token}/runs/{run}/tasks/{task}", get(task_page))
        .route(
            "/{token}/runs/{run}/tasks/{task}/attempts/{n}",
            get(attempt_page),
        )
        .route("/{token}/plans/{plan}", get(plan_page))
        .route("/{token}/commits/{commit}", get(commit_page))
        .route("/{token}/assets/{name}", get(asset))
        .route("/{token}/live/runs/{run}", get(live_run))
        .route("/{token}/live/runs/{run}/tasks/{task}", get(live_task))
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Refuses what is not for this server (403: no token, or another host),
/// and anything but GET and HEAD (405); adds the security headers to every
/// answer.
async fn guard(State(app): State<App>, request: Request, next: Next) -> Response {
    let host = request
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok());
    let mut response = if !access::allowed(&app.token, app.port, host, request.uri().path()) {
        (
            StatusCode::FORBIDDEN,
            "403 forbidden: open the URL `git orch web` printed, with its token\n",
        )
            .into_response()
    } else if !matches!(*request.method(), Method::GET | Method::HEAD) {
        (
            StatusCode::METHOD_NOT_ALLOWED,
            [(header::ALLOW, "GET, HEAD")],
            "405: this view is read-only\n",
        )
            .into_response()
    } else {
        next.run(request).await
    };
    for (name, value) in access::HEADERS {
        response
            .headers_mut()
            .insert(name, HeaderValue::from_static(value));
    }
    response
}

#[derive(serde::Deserialize)]
struct PageQuery {
    page: Option<usize>,
}

#[derive(serde::Deserialize)]
struct RevQuery {
    rev: Option<u32>,
}

async fn runs_page(State(app): State<App>, Query(q): Query<PageQuery>) -> Response {
    let n = q.page.unwrap_or(1);
    app.page(move |ctx| super::runs::render(ctx, n)).await
}

async fn run_page(State(app): State<App>, Path((_, run)): Path<(String, String)>) -> Response {
    app.page(move |ctx| super::run::render(ctx, &run)).await
}

async fn task_page(
    State(app): State<App>,
    Path((_, run, task)): Path<(String, String, String)>,
) -> Response {
    app.page(move |ctx| super::task::render(ctx, &run, &task))
        .await
}

async fn attempt_page(
    State(app): State<App>,
    Path((_, run, task, n)): Path<(String, String, String, u32)>,
) -> Response {
    app.page(move |ctx| super::diff::render(ctx, &run, &task, n))
        .await
}

async fn plan_page(
    State(app): State<App>,
    Path((_, plan)): Path<(String, String)>,
    Query(q): Query<RevQuery>,
) -> Response {
    app.page(move |ctx| super::plan::render(ctx, &plan, q.rev))
        .await
}

async fn commit_page(
    State(app): State<App>,
    Path((_, commit)): Path<(String, String)>,
) -> Response {
    app.page(move |ctx| super::commit::render(ctx, &commit))
        .await
}

async fn asset(Path((_, name)): Path<(String, String)>) -> Response {
    match super::assets::get(&name) {
        Some((kind, body)) => ([(header::CONTENT_TYPE, kind)], body).into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset\n").into_response(),
    }
}

async fn live_run(State(app): State<App>, Path((_, run)): Path<(String, String)>) -> Response {
    live::stream(
        app.reader.clone(),
        app.changes.clone(),
        app.cancel.clone(),
        Part::Run { run },
    )
    .into_response()
}

async fn live_task(
    State(app): State<App>,
    Path((_, run, task)): Path<(String, String, String)>,
) -> Response {
    live::stream(
        app.reader.clone(),
        app.changes.clone(),
        app.cancel.clone(),
        Part::Task { run, task },
    )
    .into_response()
}

async fn not_found(State(app): State<App>) -> Response {
    app.page(|_| Err(PageError::not_found("there is no such page")))
        .await
}
