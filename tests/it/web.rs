//! `git orch web` in a real headless Chromium (Debian's `chromium` and
//! `chromium-driver`, driven through WebDriver): a finished run's task
//! states and an attempt's diff as a person sees them, a running run's
//! task changing state on the open page within 2 s of the event, 403
//! without the token, hostile titles, file names and diff lines shown as
//! text with nothing run (a probe in the page looks), secrets masked in
//! diffs, and nothing under `.git` changed while every page is served
//! (ARCHITECTURE.md, invariant 2: a reader writes nothing at all).
//!
//! Under `GIT_ORCH_BLESS=1` the finished run's page is saved as the
//! screenshot of docs/web.md (`docs/web.png`).

use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Sandbox, needs, stderr};
use serde_json::{Value, json};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Whether the browser is here (under CI=true it must be).
fn have_browser() -> bool {
    needs(
        Path::new(CHROMIUM).is_file() && Path::new(CHROMEDRIVER).is_file(),
        "Chromium and chromedriver",
        "apt-get install chromium chromium-driver",
    )
}

/// A running `git orch web`, stopped with SIGINT (Ctrl-C) when dropped.
struct Web {
    child: Child,
    url: String,
    port: u16,
    token: String,
}

impl Web {
    fn start(sb: &Sandbox, repo: &Path) -> Web {
        // The binary itself, not through `git`: Ctrl-C in a terminal
        // reaches the whole process group, a signal from here only the
        // process it is sent to.
        let mut child = sb
            .command("git-orch", repo)
            .arg("web")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("git orch web starts");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("git orch web printed its URL");
        let url = line.trim().to_owned();
        let rest = url
            .strip_prefix("http://127.0.0.1:")
            .unwrap_or_else(|| panic!("the URL is on 127.0.0.1: {url:?}"));
        let (port, token) = rest.split_once('/').expect("port/token");
        Web {
            port: port.parse().expect("port"),
            token: token.trim_end_matches('/').to_owned(),
            url: url.clone(),
            child,
        }
    }

    /// A path under the token.
    fn at(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{}{path}", self.port, self.token)
    }

    /// Ctrl-C, then the exit code (within 10 s).
    fn stop(mut self) -> Option<i32> {
        let pid = self.child.id() as libc::pid_t;
        assert!(pid > 1);
        // SAFETY: our own child, not reaped yet.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                let mut err = String::new();
                if let Some(mut e) = self.child.stderr.take() {
                    let _ = e.read_to_string(&mut err);
                }
                assert!(err.contains("stopped"), "stderr: {err}");
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                return None;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Web {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One HTTP/1.0 request by hand: status, headers (lower-case names), body.
fn raw(port: u16, method: &str, path: &str, host: &str) -> (u16, BTreeMap<String, String>, String) {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(s, "{method} {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").expect("request");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("response");
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("a status line: {head}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

/// The start of an event stream: its head and first event.
fn stream_start(port: u16, path: &str, host: &str) -> String {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    write!(s, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").expect("request");
    let mut text = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&text).contains("event: update") {
        let n = s.read(&mut buf).expect("the stream sends its first event");
        assert!(
            n > 0,
            "the stream ended: {}",
            String::from_utf8_lossy(&text)
        );
        text.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// Every file under `dir` with its size, modification time and content.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (u64, std::time::SystemTime, String)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let meta = e.metadata().expect("metadata");
            if meta.is_dir() {
                stack.push(e.path());
            } else {
                let bytes = std::fs::read(e.path()).unwrap_or_default();
                out.insert(
                    e.path().strip_prefix(dir).expect("under").to_owned(),
                    (
                        meta.len(),
                        meta.modified().expect("mtime"),
                        blake3::hash(&bytes).to_hex().to_string(),
                    ),
                );
            }
        }
    }
    out
}

/// Headless Chromium through chromedriver, both ended when dropped.
struct Browser {
    runtime: tokio::runtime::Runtime,
    client: Option<fantoccini::Client>,
    driver: Child,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start(sb: &Sandbox) -> Browser {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut driver = sb
            .command(CHROMEDRIVER, sb.path())
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        common::wait_until("chromedriver to listen", Duration::from_secs(30), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        let profile = tempfile::Builder::new()
            .prefix("orch-chromium-")
            .tempdir()
            .expect("profile dir");
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        let client = runtime.block_on(async {
            fantoccini::ClientBuilder::new(
                hyper_util::client::legacy::connect::HttpConnector::new(),
            )
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
        });
        let client = match client {
            Ok(c) => c,
            Err(e) => {
                let _ = driver.kill();
                let _ = driver.wait();
                panic!("Chromium did not start through chromedriver: {e}");
            }
        };
        Browser {
            runtime,
            client: Some(client),
            driver,
            _profile: profile,
        }
    }

    fn client(&self) -> &fantoccini::Client {
        self.client.as_ref().expect("open")
    }

    fn goto(&self, url: &str) {
        self.runtime
            .block_on(self.client().goto(url))
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// Runs `script` in the page (its `return` value).
    fn js(&self, script: &str) -> Value {
        self.runtime
            .block_on(self.client().execute(script, vec![]))
            .unwrap_or_else(|e| panic!("script {script}: {e}"))
    }

    fn text(&self) -> String {
        self.js("return document.body.innerText;")
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn source(&self) -> String {
        self.runtime
            .block_on(self.client().source())
            .expect("page source")
    }

    /// The probe: whether anything of the page's hostile content ran or
    /// became markup. Every payload sets `window.__pwned`; no element may
    /// carry an event handler attribute, and the only script element is
    /// the page's own `app.js`.
    fn assert_nothing_ran(&self, page: &str) {
        let probe = self.js(
            "const handlers = [...document.querySelectorAll('*')].filter(e => \
               [...e.attributes].some(a => a.name.startsWith('on'))).length; \
             const scripts = [...document.scripts].map(s => s.getAttribute('src') || 'inline'); \
             return { pwned: window.__pwned === undefined ? null : window.__pwned, \
                      handlers: handlers, scripts: scripts, \
                      imgs: document.images.length };",
        );
        assert_eq!(
            probe["pwned"],
            Value::Null,
            "{page}: a payload ran: {probe}"
        );
        assert_eq!(probe["handlers"], 0, "{page}: a handler attribute: {probe}");
        assert_eq!(probe["imgs"], 0, "{page}: an image element: {probe}");
        let scripts = probe["scripts"].as_array().expect("scripts");
        assert!(
            scripts.len() == 1
                && scripts[0]
                    .as_str()
                    .is_some_and(|s| s.ends_with("/assets/app.js")),
            "{page}: scripts {probe}"
        );
    }

    fn screenshot(&self) -> Vec<u8> {
        self.runtime
            .block_on(self.client().screenshot())
            .expect("screenshot")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self.runtime.block_on(c.close());
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// Title, file name and diff line an agent or a plan could write, each a
/// payload that sets `window.__pwned` if the page ran it.
const HOSTILE_TITLE: &str = "Ship it <script>window.__pwned='title'</script><img src=x onerror=\"window.__pwned='title-img'\">";
const HOSTILE_FILE: &str = "src/alpha/<img src=x onerror=window.__pwned=1>.txt";
const HOSTILE_LINE: &str =
    "<script>window.__pwned='line'</script><img src=x onerror=window.__pwned=2>";

/// A project whose plan has a hostile title, and a finished run: `alpha`
/// writes a file with a hostile name and line and lands, `beta` after it
/// lands, `leaky` adds a secret and fails (no retries).
fn finished_run(sb: &mut Sandbox) -> (PathBuf, String) {
    let repo = sb.repo("proj");
    for t in ["alpha", "beta", "leaky"] {
        std::fs::create_dir_all(repo.join("src").join(t)).expect("mkdir");
        std::fs::write(repo.join("src").join(t).join("README"), "x\n").expect("write");
    }
    std::fs::create_dir_all(repo.join(".orch")).expect("mkdir");
    std::fs::write(repo.join(".orch/config"), "[orch]\n    retries = 0\n").expect("config");
    sb.git(&repo, &["add", "."]);
    sb.git(&repo, &["commit", "-q", "-m", "project"]);
    let sub = |id: &str, title: &str, deps: &[&str]| {
        json!({"id": id, "title": title, "owned_globs": [format!("src/{id}/**")],
               "deliverable": format!("{id} done"), "verification": format!("test -f src/{id}/done"),
               "depends_on": deps})
    };
    let plan = json!({"version": 1, "id": "proj", "instruction": "Show <b>it</b>",
        "subtasks": [sub("alpha", HOSTILE_TITLE, &[]), sub("beta", "Beta", &["alpha"]),
                     sub("leaky", "Leaky", &[])]});
    let file = sb.path().join("plan.json");
    std::fs::write(&file, plan.to_string()).expect("plan");
    sb.orch_ok(&repo, &["plan", "add", &file.to_string_lossy()]);
    sb.orch_ok(&repo, &["approve", "proj"]);
    let scripts = sb.path().join("scripts");
    std::fs::create_dir_all(&scripts).expect("scripts");
    sb.set_env("FAKE_AGENT_DIR", &scripts.to_string_lossy());
    std::fs::write(
        scripts.join("alpha.script"),
        format!("write src/alpha/done yes\nwrite '{HOSTILE_FILE}' \"{HOSTILE_LINE}\"\ncost 0.25\n"),
    )
    .expect("script");
    std::fs::write(scripts.join("beta.script"), "write src/beta/done yes\n").expect("script");
    std::fs::write(
        scripts.join("leaky.script"),
        "write src/leaky/done yes\nsecret src/leaky/creds.txt\n",
    )
    .expect("script");
    let out = sb.orch(&repo, &["run", "proj", "--agent", "fake"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let status = common::status_json(sb, &repo);
    let run = status["run"].as_str().expect("run id").to_owned();
    (repo, run)
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as i64
}

fn state_of(b: &Browser, task: &str) -> String {
    b.js(&format!(
        "const r = document.querySelector('tr[data-task=\"{task}\"]'); return r ? r.dataset.state : null;"
    ))
    .as_str()
    .unwrap_or_default()
    .to_owned()
}

#[test]
fn a_finished_run_its_diffs_and_provenance_show_in_a_browser_and_nothing_is_written() {
    if !have_browser() {
        return;
    }
    let mut sb = Sandbox::new();
    let (repo, run) = finished_run(&mut sb);
    // A cold start: a reader that saves would rebuild the cache here.
    std::fs::remove_dir_all(repo.join(".git/orch/state")).expect("no cache");
    let before = snapshot(&repo.join(".git"));
    let refs_before = sb.refs(&repo);
    let web = Web::start(&sb, &repo);
    let browser = Browser::start(&sb);

    // The runs page, through the printed URL.
    browser.goto(&web.url);
    let text = browser.text();
    assert!(text.contains(&run), "{text}");
    browser.assert_nothing_ran("runs");

    // The run page: task states, the graph coloured by them.
    browser.goto(&web.at(&format!("/runs/{run}")));
    assert_eq!(state_of(&browser, "alpha"), "done");
    assert_eq!(state_of(&browser, "beta"), "done");
    assert_eq!(state_of(&browser, "leaky"), "failed");
    let node = browser
        .js("return document.querySelector('[data-node=\"leaky\"] rect').getAttribute('class');");
    assert_eq!(node, "node s-failed");
    browser.assert_nothing_ran("run");
    if std::env::var("GIT_ORCH_BLESS").is_ok_and(|v| v == "1") {
        let png = browser.screenshot();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(common::repo_root().join("docs/web.png"), png).expect("write screenshot");
    }

    // The task with the hostile title: shown as text, run nowhere.
    browser.goto(&web.at(&format!("/runs/{run}/tasks/alpha")));
    let text = browser.text();
    assert!(text.contains(HOSTILE_TITLE), "{text}");
    assert!(text.contains("fake"), "the agent is named: {text}");
    browser.assert_nothing_ran("task");

    // The attempt's diff: the hostile file name and line as text, owned.
    browser.goto(&web.at(&format!("/runs/{run}/tasks/alpha/attempts/1")));
    let text = browser.text();
    assert!(text.contains(HOSTILE_FILE), "{text}");
    assert!(text.contains(HOSTILE_LINE), "{text}");
    let scope = browser.js(&format!(
        "return [...document.querySelectorAll('section.file')].find(s => s.dataset.path === {}).dataset.scope;",
        json!(HOSTILE_FILE)
    ));
    assert_eq!(scope, "owned");
    let added = browser
        .js("return [...document.querySelectorAll('tr.add')].map(r => r.innerText).join('\\n');");
    assert!(
        added.as_str().is_some_and(|a| a.contains(HOSTILE_LINE)),
        "{added}"
    );
    browser.assert_nothing_ran("diff");

    // The leaked secret is masked in its diff, as in the terminal.
    let key = format!("{}{}", "AK", "IALEAKY0123456789A");
    browser.goto(&web.at(&format!("/runs/{run}/tasks/leaky/attempts/1")));
    assert!(!browser.source().contains(&key), "the secret is shown");
    browser.goto(&web.at(&format!("/runs/{run}/tasks/leaky")));
    let text = browser.text();
    assert!(
        text.contains("secrets"),
        "the failing gate is shown: {text}"
    );
    assert!(!browser.source().contains(&key), "the secret is shown");

    // The landed commit's provenance, linked from the run.
    browser.goto(&web.at(&format!("/runs/{run}")));
    let href =
        browser.js("return document.querySelector('table.landed a.commit').getAttribute('href');");
    browser.goto(&format!(
        "http://127.0.0.1:{}{}",
        web.port,
        href.as_str().expect("a commit link")
    ));
    let verdict = browser.js("return document.querySelector('p.verdict').dataset.ok;");
    assert_eq!(verdict, "true", "{}", browser.text());
    assert!(browser.text().contains(&run));

    // The plan: its revision, hash, waves and approval.
    browser.goto(&web.at("/plans/proj"));
    let text = browser.text();
    assert!(text.contains("blake3:"), "{text}");
    assert!(text.contains("alpha, leaky"), "wave 1: {text}");
    assert!(text.contains("approved"), "{text}");
    browser.assert_nothing_ran("plan");

    // Without the token: refused, in the browser as for any client.
    browser.goto(&format!("http://127.0.0.1:{}/", web.port));
    assert!(browser.text().contains("403"), "{}", browser.text());
    browser.goto(&format!("http://127.0.0.1:{}/runs/{run}", web.port));
    assert!(browser.text().contains("403"), "{}", browser.text());

    // Served every page, a live stream included: nothing changed.
    let start = stream_start(
        web.port,
        &format!("/{}/live/runs/{run}/tasks/alpha", web.token),
        &format!("127.0.0.1:{}", web.port),
    );
    assert!(
        start
            .lines()
            .next()
            .is_some_and(|l| l.split_whitespace().nth(1) == Some("200")),
        "{start}"
    );
    assert!(start.contains("text/event-stream"), "{start}");
    assert!(
        !start.contains("<script>window"),
        "escaped in the stream too: {start}"
    );
    drop(browser);
    assert_eq!(web.stop(), Some(0), "Ctrl-C stops it cleanly");
    assert_eq!(sb.refs(&repo), refs_before, "a ref moved");
    assert_eq!(
        snapshot(&repo.join(".git")),
        before,
        "a file under .git changed"
    );
}

#[test]
fn a_running_run_s_page_changes_a_task_s_state_within_two_seconds_of_the_event() {
    if !have_browser() {
        return;
    }
    let mut sb = Sandbox::new();
    let p = common::project(
        &mut sb,
        &[("first", &[], "true"), ("second", &["first"], "true")],
        None,
    );
    // `first` runs until the file the test writes appears.
    let gate = sb.path().join("go");
    p.script(
        "first",
        &format!(
            "run sh -c 'while [ ! -e {} ]; do sleep 0.05; done'\nwrite src/first/done yes\n",
            gate.display()
        ),
    );
    p.script("second", "write src/second/done yes\n");
    let mut driver = sb
        .command("git", &p.repo)
        .args(["orch", "run", "proj", "--agent", "fake"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run starts");
    common::wait_until("first to run", Duration::from_secs(60), || {
        let out = sb.orch(&p.repo, &["status", "--json"]);
        out.status.success()
            && serde_json::from_slice::<Value>(&out.stdout).is_ok_and(|s| {
                s["tasks"].as_array().is_some_and(|ts| {
                    ts.iter()
                        .any(|t| t["task"] == "first" && t["status"] == "running")
                })
            })
    });
    let run = common::status_json(&sb, &p.repo)["run"]
        .as_str()
        .expect("run")
        .to_owned();
    let web = Web::start(&sb, &p.repo);
    let browser = Browser::start(&sb);
    browser.goto(&web.at(&format!("/runs/{run}")));
    assert_eq!(state_of(&browser, "first"), "running");
    assert_eq!(state_of(&browser, "second"), "pending");
    // The live stream is open before the event happens.
    common::wait_until("the live stream to open", Duration::from_secs(10), || {
        browser.js("return document.documentElement.dataset.liveState || null;") == "open"
    });
    browser.js("window.__probe = 42; return null;");
    std::fs::write(&gate, "").expect("let first finish");
    let deadline = Instant::now() + Duration::from_secs(60);
    let seen_ms = loop {
        if state_of(&browser, "first") != "running" {
            break now_ms();
        }
        assert!(Instant::now() < deadline, "the page never changed");
        std::thread::sleep(Duration::from_millis(25));
    };
    assert_eq!(
        browser.js("return window.__probe;"),
        42,
        "the page changed in place, without a reload"
    );
    let finished = common::events(&sb, &p.repo)
        .into_iter()
        .find(|e| e["type"] == "attempt_finished" && e["task"] == "first")
        .expect("first finished");
    let event_ms = finished["time_ms"].as_i64().expect("time");
    let lag = seen_ms - event_ms;
    assert!(
        lag <= 2000,
        "the page showed the change {lag} ms after the event"
    );
    // And it goes on following to the end of the run.
    common::wait_until("second done on the page", Duration::from_secs(60), || {
        state_of(&browser, "second") == "done"
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    while driver.try_wait().expect("wait").is_none() {
        assert!(Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(browser);
    assert_eq!(web.stop(), Some(0));
}

#[test]
fn strangers_writes_and_bad_addresses_are_refused_with_clear_answers() {
    let mut sb = Sandbox::new();
    let p = common::project(&mut sb, &[("a", &[], "true")], None);
    p.script("a", "write src/a/done yes\n");
    sb.orch_ok(&p.repo, &["run", "proj", "--agent", "fake"]);
    let run = common::status_json(&sb, &p.repo)["run"]
        .as_str()
        .expect("run")
        .to_owned();
    let web = Web::start(&sb, &p.repo);
    let host = format!("127.0.0.1:{}", web.port);
    let t = web.token.clone();
    // The token, on this host, GET or HEAD: nothing else.
    assert_eq!(raw(web.port, "GET", "/", &host).0, 403);
    assert_eq!(raw(web.port, "GET", &format!("/runs/{run}"), &host).0, 403);
    let wrong = format!("{}0", &t[..t.len() - 1]);
    let wrong = if wrong == t {
        format!("{}1", &t[..t.len() - 1])
    } else {
        wrong
    };
    assert_eq!(raw(web.port, "GET", &format!("/{wrong}/"), &host).0, 403);
    assert_eq!(
        raw(web.port, "GET", &format!("/{t}/"), "evil.example").0,
        403
    );
    let (status, headers, body) = raw(web.port, "GET", &format!("/{t}/runs/{run}"), &host);
    assert_eq!(status, 200, "{body}");
    assert!(headers["content-security-policy"].contains("script-src 'self'"));
    assert!(!headers["content-security-policy"].contains("unsafe"));
    assert!(
        headers["server-timing"].starts_with("render;dur="),
        "{headers:?}"
    );
    assert_eq!(
        raw(web.port, "POST", &format!("/{t}/runs/{run}"), &host).0,
        405
    );
    assert_eq!(raw(web.port, "DELETE", &format!("/{t}/"), &host).0, 405);
    assert_eq!(raw(web.port, "HEAD", &format!("/{t}/"), &host).0, 200);
    // Malformed and unknown addresses: a clear page, never a crash.
    for (path, want, says) in [
        (format!("/{t}/runs/Not_An_Id"), 400, "kebab-case"),
        (format!("/{t}/runs/no-such-run"), 404, "no run no-such-run"),
        (format!("/{t}/runs/{run}/tasks/zz"), 404, "no task zz"),
        (
            format!("/{t}/runs/{run}/tasks/a/attempts/9"),
            404,
            "no attempt 9",
        ),
        (format!("/{t}/runs/{run}/tasks/a/attempts/x"), 400, ""),
        (format!("/{t}/plans/nope"), 404, "no stored plan nope"),
        (format!("/{t}/commits/HEAD"), 400, "not a full commit id"),
        (format!("/{t}/commits/{}", "0".repeat(40)), 404, "no commit"),
        (format!("/{t}/?page=99"), 404, "no page 99"),
        (format!("/{t}/?page=-1"), 400, ""),
        (format!("/{t}/nothing/here"), 404, "no such page"),
        (format!("/{t}/assets/evil.js"), 404, ""),
    ] {
        let (status, headers, body) = raw(web.port, "GET", &path, &host);
        assert_eq!(status, want, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
        assert!(headers.contains_key("content-security-policy"), "{path}");
    }
    assert_eq!(web.stop(), Some(0));
    // A port that is taken: a clear error, exit 1.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = taken.local_addr().expect("addr").port().to_string();
    let out = sb.orch(&p.repo, &["web", "--port", &port]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("127.0.0.1:{port}")),
        "{}",
        stderr(&out)
    );
    assert!(stderr(&out).contains("hint:"), "{}", stderr(&out));
    let out = sb.orch(&p.repo, &["web", "--port", "http"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}
