//! Progress of `run`, `merge` and `worker` on stderr, from
//! [`Progress`] values.
//!
//! On a terminal ([`Mode::Live`]): one line per task (state, attempt,
//! elapsed time, the current step or the last reason) under a summary
//! line and a line of column headers, redrawn in place with ANSI cursor movement at most ten times a
//! second; lines about the run as a whole (stopping, abandoned attempts)
//! scroll above it, and the last frame stays on screen. Elsewhere
//! ([`Mode::Plain`]): one line per event, append-only, no escape codes.
//! Colour only in live mode and never with `NO_COLOR` set.
//!
//! Row states are the status model's ([`Status`]): the names `git orch
//! status` uses. It knows nothing of how a run is driven: callers feed it
//! `Progress` values and, whenever a task's state changes, the rows the
//! status model derives from the log ([`Renderer::show`]), so that reasons
//! stay and no row is left behind what the log says. It writes to stderr
//! only; stdout stays for data (`--json`).

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::event::Outcome;
use crate::run::progress::Progress;
use crate::run::view::{Status, TaskRow};

use super::output;

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Rows redrawn in place (stderr is a terminal).
    Live,
    /// One line per event.
    Plain,
}

impl Mode {
    /// `GIT_ORCH_PROGRESS=tty|plain`, else live when stderr is a terminal.
    pub fn detect() -> Mode {
        match std::env::var("GIT_ORCH_PROGRESS").as_deref() {
            Ok("tty") => Mode::Live,
            Ok("plain") => Mode::Plain,
            _ if std::io::stderr().is_terminal() => Mode::Live,
            _ => Mode::Plain,
        }
    }
}

/// Shortest time between two frames.
const FRAME: Duration = Duration::from_millis(100);

/// Width of the state column: the longest state name.
const STATE_W: usize = 9;

/// The line `git orch run` printed for an event before live progress, and
/// still prints in plain mode.
pub fn plain_line(p: &Progress) -> String {
    match p {
        Progress::Resumed { run, abandoned: 0 } => format!("run {run}: driving"),
        Progress::Resumed { run, abandoned } => format!(
            "run {run}: driving; {abandoned} attempt(s) left open by a previous driver were abandoned"
        ),
        Progress::Dispatched {
            task,
            attempt,
            agent,
        } => format!("  {task:<24} attempt {attempt} started ({agent})"),
        Progress::Step {
            task,
            attempt,
            step,
        } => format!("  {task:<24} attempt {attempt}: {step}"),
        Progress::Ended {
            task,
            attempt,
            outcome,
            reason,
        } => match reason {
            Some(r) => format!("  {task:<24} attempt {attempt} {}: {r}", outcome.as_str()),
            None => format!("  {task:<24} attempt {attempt} {}", outcome.as_str()),
        },
        Progress::Stopping(why) => format!("stopping: {why}"),
        Progress::Warning(why) => format!("warning: {why}"),
        Progress::Landing { problem, stops } => landing_note(problem, *stops),
        Progress::Landed(label) => {
            let (task, n) = split_label(label);
            match n {
                Some(n) => format!("  {task:<24} attempt {n} landed"),
                None => format!("  {task:<24} landed"),
            }
        }
        Progress::LandingFailed { attempt, reason } => {
            let (task, n) = split_label(attempt);
            match n {
                Some(n) => format!("  {task:<24} attempt {n} could not land: {reason}"),
                None => format!("  {task:<24} could not land: {reason}"),
            }
        }
        Progress::Judged {
            task,
            winner,
            ranking,
        } => {
            let others: Vec<String> = ranking
                .iter()
                .filter(|r| Some(r.attempt) != *winner)
                .map(|r| format!("#{} {}", r.attempt, r.why))
                .collect();
            match winner {
                Some(w) => format!(
                    "  {task:<24} attempt {w} chosen of {} candidates; archived: {}",
                    ranking.len(),
                    others.join("; ")
                ),
                None => format!(
                    "  {task:<24} none of {} candidates passed: {}",
                    ranking.len(),
                    others.join("; ")
                ),
            }
        }
    }
}

/// One task's line.
#[derive(Debug, Clone)]
struct Row {
    task: String,
    state: Status,
    attempt: Option<u32>,
    /// Since when the current state has lasted, while it lasts.
    since: Option<Instant>,
    /// How long the last timed state took, once over.
    took: Option<Duration>,
    /// The current step, or why the attempt ended.
    detail: String,
}

impl Row {
    fn elapsed(&self, now: Instant) -> Option<Duration> {
        match (self.since, self.took) {
            (Some(s), _) => Some(now.saturating_duration_since(s)),
            (None, t) => t,
        }
    }
}

/// What the renderer knows and has drawn.
struct State {
    mode: Mode,
    colour: bool,
    /// Columns; `None`: ask the terminal at each frame.
    width: Option<usize>,
    out: Box<dyn Write + Send>,
    title: String,
    started: Instant,
    rows: Vec<Row>,
    /// Lines to print above the rows at the next frame.
    notes: Vec<String>,
    stopping: bool,
    /// Lines of the last frame, still on screen below the notes.
    drawn: usize,
    last_frame: Vec<String>,
    finished: bool,
}

/// Shows progress; feed it with [`Renderer::handle`] (it is `Sync`, so
/// `&|p| r.handle(p)` is a `drive` callback) and end it with
/// [`Renderer::finish`] (dropping it does the same).
pub struct Renderer {
    shared: Arc<(Mutex<State>, Condvar)>,
    ticker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// The terminal's columns and rows, if stderr is one that knows its size.
fn terminal_size() -> Option<(usize, usize)> {
    // SAFETY: TIOCGWINSZ only fills the winsize struct passed to it.
    let mut ws: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut ws) } == 0;
    (ok && ws.ws_col > 0 && ws.ws_row > 0).then_some((ws.ws_col as usize, ws.ws_row as usize))
}

/// How much a state matters when not every row fits: live work first,
/// then trouble, then the rest.
fn urgency(state: Status) -> u8 {
    if state.is_live() {
        0
    } else if state.is_trouble() {
        1
    } else {
        2
    }
}

impl Renderer {
    /// A renderer on stderr in the detected mode, titled e.g. `run 1a2b of
    /// plan p`.
    pub fn new(title: impl Into<String>) -> Self {
        let mode = Mode::detect();
        let colour = mode == Mode::Live && !output::no_color();
        Self::with(mode, colour, None, Box::new(std::io::stderr()), title)
    }

    /// A renderer with everything chosen by the caller (tests pick the
    /// mode, colour, width and where the bytes go).
    pub fn with(
        mode: Mode,
        colour: bool,
        width: Option<usize>,
        out: Box<dyn Write + Send>,
        title: impl Into<String>,
    ) -> Self {
        let state = State {
            mode,
            colour,
            width,
            out,
            title: title.into(),
            started: Instant::now(),
            rows: Vec::new(),
            notes: Vec::new(),
            stopping: false,
            drawn: 0,
            last_frame: Vec::new(),
            finished: false,
        };
        let shared = Arc::new((Mutex::new(state), Condvar::new()));
        let ticker = (mode == Mode::Live).then(|| {
            let shared = shared.clone();
            std::thread::spawn(move || tick(&shared))
        });
        Self {
            shared,
            ticker: Mutex::new(ticker),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while drawing leaves nothing half-updated that matters.
        self.shared.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds or updates a task's row without an event (a resumed run's
    /// finished tasks, what waits in a merge queue). Rows keep the order
    /// in which they first appear.
    pub fn task(&self, task: &str, state: Status, attempt: Option<u32>) {
        let mut s = self.state();
        if s.finished {
            return;
        }
        let row = s.row(task);
        let same = row.state == state && (attempt.is_none() || row.attempt == attempt);
        row.state = state;
        if attempt.is_some() {
            row.attempt = attempt;
        }
        if !same {
            if state.is_live() {
                row.since = Some(Instant::now());
                row.took = None;
            } else if let Some(since) = row.since.take() {
                row.took = Some(since.elapsed());
            }
            row.detail.clear();
        }
        drop(s);
        self.shared.1.notify_one();
    }

    /// Sets a task's row from the status model: its state, attempt, time
    /// and reason. A running row keeps its clock and current step while
    /// the same attempt runs; a row being landed stays `landing` until the
    /// log says how the landing ended.
    pub fn show(&self, r: &TaskRow) {
        let mut s = self.state();
        if s.finished {
            return;
        }
        let now = Instant::now();
        let row = s.row(r.task.as_str());
        let same_attempt = row.attempt == r.attempt;
        if row.state == Status::Landing && r.status == Status::Passed && same_attempt {
            return;
        }
        let took = r
            .elapsed_ms
            .map(|ms| Duration::from_millis(ms.max(0) as u64));
        if r.status.is_live() {
            if !(row.state == r.status && same_attempt && row.since.is_some()) {
                row.since = Some(took.map_or(now, |t| now.checked_sub(t).unwrap_or(now)));
                row.detail = r.detail().unwrap_or_default().to_owned();
            }
            row.took = None;
        } else {
            row.since = None;
            row.took = match r.status {
                Status::Pending | Status::Blocked | Status::Skipped | Status::Cancelled
                    if r.attempt.is_none() =>
                {
                    None
                }
                _ => took,
            };
            row.detail = match (r.status, r.detail()) {
                (_, Some(d)) if r.failure.is_some() => d.to_owned(),
                (Status::Passed, _) => "waiting to land".to_owned(),
                (_, d) => d.unwrap_or_default().to_owned(),
            };
        }
        row.state = r.status;
        row.attempt = r.attempt;
        drop(s);
        self.shared.1.notify_one();
    }

    /// How progress is shown.
    pub fn mode(&self) -> Mode {
        self.state().mode
    }

    /// Whether a task has a row.
    pub fn has_row(&self, task: &str) -> bool {
        self.state().rows.iter().any(|r| r.task == task)
    }

    /// A line about the whole run: above the rows, or a plain line.
    pub fn note(&self, line: &str) {
        let mut s = self.state();
        if s.finished {
            return;
        }
        match s.mode {
            Mode::Live => {
                s.notes.push(line.to_owned());
                drop(s);
                self.shared.1.notify_one();
            }
            Mode::Plain => s.write_line(line),
        }
    }

    /// Takes in one event.
    pub fn handle(&self, p: Progress) {
        let mut s = self.state();
        if s.finished {
            return;
        }
        if s.mode == Mode::Plain {
            let line = plain_line(&p);
            s.write_line(&line);
            return;
        }
        let now = Instant::now();
        match p {
            Progress::Resumed { abandoned, .. } => {
                if abandoned > 0 {
                    s.notes.push(format!(
                        "{abandoned} attempt(s) left open by a previous driver were abandoned"
                    ));
                }
            }
            Progress::Dispatched {
                task,
                attempt,
                agent,
            } => {
                let row = s.row(&task);
                row.state = Status::Running;
                row.attempt = Some(attempt);
                row.since = Some(now);
                row.took = None;
                row.detail = format!("agent {agent}");
            }
            Progress::Step {
                task,
                attempt,
                step,
            } => {
                let row = s.row(&task);
                // A step of an attempt that has ended already is stale.
                if row.attempt == Some(attempt) && row.state == Status::Running {
                    row.detail = step;
                }
            }
            Progress::Ended {
                task,
                attempt,
                outcome,
                reason,
            } => {
                let row = s.row(&task);
                // A candidate that ended while a later one of its round
                // still runs: the task is still running.
                if row.state == Status::Running && row.attempt.is_some_and(|a| a > attempt) {
                    row.detail = format!("candidate {attempt} {}", outcome.as_str());
                    self.shared.1.notify_one();
                    return;
                }
                // The attempt's end; what it means for the task (a retry
                // due, or the budget spent) comes with the model's rows.
                row.state = match outcome {
                    Outcome::Passed => Status::Passed,
                    Outcome::Failed => Status::Retrying,
                    Outcome::Abandoned => Status::Stopped,
                };
                row.attempt = Some(attempt);
                if let Some(since) = row.since.take() {
                    row.took = Some(now.saturating_duration_since(since));
                }
                row.detail = match (outcome, reason) {
                    (_, Some(r)) => r,
                    (Outcome::Passed, None) => "waiting to land".into(),
                    (_, None) => String::new(),
                };
            }
            Progress::Stopping(why) => {
                s.stopping = true;
                s.notes.push(format!("stopping: {why}"));
            }
            Progress::Warning(why) => s.notes.push(format!("warning: {why}")),
            Progress::Landing { problem, stops } => {
                s.stopping |= stops;
                s.notes.push(landing_note(&problem, stops));
            }
            Progress::Landed(label) => {
                let (task, attempt) = split_label(&label);
                let row = s.row(task);
                row.state = Status::Done;
                row.attempt = attempt.or(row.attempt);
                if let Some(since) = row.since.take() {
                    row.took = Some(now.saturating_duration_since(since));
                }
                row.detail.clear();
            }
            Progress::LandingFailed { attempt, reason } => {
                let (task, n) = split_label(&attempt);
                let row = s.row(task);
                row.state = Status::Retrying;
                row.attempt = n.or(row.attempt);
                if let Some(since) = row.since.take() {
                    row.took = Some(now.saturating_duration_since(since));
                }
                row.detail = format!("could not land: {reason}");
            }
            Progress::Judged {
                task,
                winner,
                ranking,
            } => {
                let row = s.row(&task);
                match winner {
                    Some(w) => {
                        row.state = Status::Passed;
                        row.attempt = Some(w);
                        row.detail = format!("chosen of {} candidates", ranking.len());
                    }
                    None => {
                        row.state = Status::Retrying;
                        row.detail = format!("none of {} candidates passed", ranking.len());
                    }
                }
            }
        }
        // The ticker draws; wake it so a change shows within one frame.
        self.shared.1.notify_one();
    }

    /// Draws the last frame and leaves it on screen; later events are
    /// not shown.
    pub fn finish(&self) {
        {
            let mut s = self.state();
            if s.finished {
                return;
            }
            s.finished = true;
        }
        self.shared.1.notify_one();
        let ticker = self.ticker.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(t) = ticker {
            let _ = t.join();
        }
        let mut s = self.state();
        if s.mode == Mode::Live {
            s.draw(Instant::now(), true);
        }
    }
}

impl Drop for Renderer {
    fn drop(&mut self) {
        self.finish();
    }
}

/// `task/3` → (`task`, Some(3)).
fn split_label(label: &str) -> (&str, Option<u32>) {
    match label.rsplit_once('/') {
        Some((task, n)) => (task, n.parse().ok()),
        None => (label, None),
    }
}

/// The ticker: redraws when something changed, at most once a frame, and
/// every second for the clocks.
fn tick(shared: &(Mutex<State>, Condvar)) {
    let (lock, wake) = shared;
    // The first frame waits one frame, for the caller to add its rows.
    let mut last = Instant::now();
    let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        if s.finished {
            return;
        }
        let since = last.elapsed();
        if since < FRAME {
            s = wake
                .wait_timeout(s, FRAME - since)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            continue;
        }
        s.draw(Instant::now(), false);
        last = Instant::now();
        s = wake
            .wait_timeout(s, Duration::from_secs(1))
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}

/// SGR colour of a state.
pub fn state_colour(state: Status) -> &'static str {
    match state {
        Status::Running | Status::Landing => "\x1b[33m",
        Status::Passed => "\x1b[32m",
        Status::Done => "\x1b[1;32m",
        Status::Failed | Status::Retrying => "\x1b[31m",
        Status::Stopped | Status::Cancelled | Status::Blocked => "\x1b[35m",
        Status::Pending | Status::Skipped => "\x1b[2m",
    }
}

/// Cuts `s` to `width` characters, marking the cut with `…`.
fn fit(s: &str, width: usize) -> String {
    let s = super::output::clean(s);
    if s.chars().count() <= width {
        return s.into_owned();
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

impl State {
    fn row(&mut self, task: &str) -> &mut Row {
        let i = match self.rows.iter().position(|r| r.task == task) {
            Some(i) => i,
            None => {
                self.rows.push(Row {
                    task: task.to_owned(),
                    state: Status::Pending,
                    attempt: None,
                    since: None,
                    took: None,
                    detail: String::new(),
                });
                self.rows.len() - 1
            }
        };
        &mut self.rows[i]
    }

    fn write_line(&mut self, line: &str) {
        let _ = writeln!(self.out, "{}", super::output::clean(line));
    }

    /// The summary line and one line per row, each cut to the width, with
    /// the states coloured when colour is on.
    fn frame(&self, now: Instant, every_row: bool) -> Vec<String> {
        let size = terminal_size();
        let width = self.width.or(size.map(|s| s.0)).unwrap_or(80).max(20) - 1;
        // The cursor cannot move above the screen: a frame taller than the
        // terminal would smear, so it keeps the rows that matter most. The
        // last frame is never redrawn and may scroll.
        let height = match size {
            Some((_, rows)) if !every_row => rows.max(4),
            _ => usize::MAX,
        };
        self.frame_in(now, width, height, !every_row)
    }

    /// [`Self::frame`] for a `width` × `height` screen (each line at most
    /// `width` characters, at most `height - 1` lines). The last frame
    /// (`cut` false) keeps each row whole: it is never redrawn, so a long
    /// failure reason may wrap instead of losing its end.
    fn frame_in(&self, now: Instant, width: usize, height: usize, cut: bool) -> Vec<String> {
        let counts = crate::run::view::counts(self.rows.iter().map(|r| &r.state));
        let summary = counts
            .iter()
            .map(|(s, n)| format!("{n} {s}"))
            .collect::<Vec<_>>()
            .join(", ");
        let clock = output::format_duration(now.saturating_duration_since(self.started).as_secs());
        let mut head = if summary.is_empty() {
            format!("{} · {clock}", self.title)
        } else {
            format!("{}: {summary} · {clock}", self.title)
        };
        if self.stopping {
            head.push_str(" · stopping");
        }
        let mut lines = vec![fit(&head, width)];
        let task_w = self
            .rows
            .iter()
            .map(|r| r.task.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(4, 24);
        if !self.rows.is_empty() {
            lines.push(fit(
                format!(
                    "  {:<task_w$} {:<STATE_W$} {:>7} {:>6}  DETAIL",
                    "TASK", "STATE", "ATTEMPT", "TIME"
                )
                .trim_end(),
                width,
            ));
        }
        let room = height.saturating_sub(3).max(1);
        let mut shown: Vec<&Row> = self.rows.iter().collect();
        let mut hidden = 0;
        if shown.len() > room {
            let mut by_urgency: Vec<usize> = (0..shown.len()).collect();
            by_urgency.sort_by_key(|&i| urgency(shown[i].state));
            let keep: std::collections::BTreeSet<usize> =
                by_urgency.into_iter().take(room - 1).collect();
            hidden = shown.len() - keep.len();
            shown = keep.into_iter().map(|i| shown[i]).collect();
        }
        for r in shown {
            let attempt = r.attempt.map(|n| format!("#{n}")).unwrap_or_default();
            let elapsed = r
                .elapsed(now)
                .map(|d| output::format_duration(d.as_secs()))
                .unwrap_or_default();
            let task = fit(&r.task, task_w);
            let before = format!("  {task:<task_w$} ");
            let state = format!("{:<STATE_W$}", r.state.as_str());
            let after = format!(" {attempt:>7} {elapsed:>6}  {}", r.detail);
            let whole = format!("{before}{state}{after}");
            let line = if cut {
                fit(&whole, width)
            } else {
                output::clean(&whole).into_owned()
            };
            let line = line.trim_end().to_owned();
            let coloured = line
                .strip_prefix(before.as_str())
                .and_then(|rest| rest.strip_prefix(r.state.as_str()))
                .filter(|_| self.colour)
                .map(|rest| format!("{before}{}{}\x1b[0m{rest}", state_colour(r.state), r.state));
            lines.push(coloured.unwrap_or(line));
        }
        if hidden > 0 {
            lines.push(fit(
                &format!("  … and {hidden} more (`git orch status` lists every task)"),
                width,
            ));
        }
        lines
    }

    /// Writes pending notes and, if it changed (or `last`), the frame,
    /// over the previous one; the `last` frame shows every row.
    fn draw(&mut self, now: Instant, last: bool) {
        let force = last;
        let lines = self.frame(now, last);
        if !force && self.notes.is_empty() && lines == self.last_frame {
            return;
        }
        let mut buf = String::new();
        if self.drawn > 0 {
            buf.push_str(&format!("\r\x1b[{}A", self.drawn));
        }
        for note in self.notes.drain(..) {
            buf.push_str("\x1b[2K");
            buf.push_str(&super::output::clean(&note));
            buf.push('\n');
        }
        for line in &lines {
            buf.push_str("\x1b[2K");
            buf.push_str(line);
            buf.push('\n');
        }
        // Anything a longer frame left below.
        buf.push_str("\x1b[J");
        let _ = self.out.write_all(buf.as_bytes());
        let _ = self.out.flush();
        self.drawn = lines.len();
        self.last_frame = lines;
    }
}

/// A refused landing (the run stops) or a checkout that could not follow
/// one, with what to do about it.
fn landing_note(problem: &crate::run::progress::LandingProblem, stops: bool) -> String {
    let what = if stops { "stopping" } else { "warning" };
    format!(
        "{what}: {problem}\nhint: {}",
        super::error::landing_hint(problem)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Outcome;

    /// A writer whose bytes the test can read.
    #[derive(Clone, Default)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl Write for Sink {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Sink {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().expect("sink")).into_owned()
        }
    }

    fn events() -> Vec<Progress> {
        vec![
            Progress::Resumed {
                run: "r1".into(),
                abandoned: 1,
            },
            Progress::Dispatched {
                task: "api".into(),
                attempt: 1,
                agent: "fake".into(),
            },
            Progress::Step {
                task: "api".into(),
                attempt: 1,
                step: "gate tests".into(),
            },
            Progress::Ended {
                task: "api".into(),
                attempt: 1,
                outcome: Outcome::Passed,
                reason: None,
            },
            // Late: the attempt has ended.
            Progress::Step {
                task: "api".into(),
                attempt: 1,
                step: "gate lint".into(),
            },
            Progress::Landed("api/1".into()),
        ]
    }

    #[test]
    fn plain_mode_prints_one_line_per_event_without_escapes() {
        let sink = Sink::default();
        let r = Renderer::with(Mode::Plain, false, None, Box::new(sink.clone()), "run r1");
        for e in events() {
            r.handle(e);
        }
        r.finish();
        let text = sink.text();
        assert!(!text.contains('\x1b'), "{text:?}");
        assert_eq!(text.lines().count(), 6, "{text}");
        assert!(text.contains("api                      attempt 1 started (fake)"));
        assert!(text.contains("api                      attempt 1: gate tests"));
        assert!(
            text.ends_with("  api                      attempt 1 landed\n"),
            "{text}"
        );
    }

    #[test]
    fn live_frames_show_state_attempt_and_step_and_ignore_late_steps() {
        let sink = Sink::default();
        let r = Renderer::with(
            Mode::Live,
            false,
            Some(60),
            Box::new(sink.clone()),
            "run r1",
        );
        r.task("web", Status::Done, Some(2));
        r.handle(events()[1].clone());
        r.handle(events()[2].clone());
        let mid = r.state().frame(Instant::now(), false);
        assert!(
            mid[0].starts_with("run r1: 1 done, 1 running · "),
            "{mid:?}"
        );
        assert_eq!(mid[1], "  TASK STATE     ATTEMPT   TIME  DETAIL", "{mid:?}");
        assert!(mid[3].starts_with("  api  running        #1 "), "{mid:?}");
        assert!(mid[3].ends_with("gate tests"), "{mid:?}");
        for e in events().into_iter().skip(3) {
            r.handle(e);
        }
        let end = r.state().frame(Instant::now(), false);
        assert!(end[3].starts_with("  api  done           #1"), "{end:?}");
        assert!(!end[3].contains("gate lint"), "{end:?}");
        r.finish();
        let text = sink.text();
        assert!(text.contains("\x1b[2K"), "{text:?}");
        assert!(text.ends_with("\x1b[J"), "the final frame stays: {text:?}");
        assert!(!text.contains("\x1b[3"), "no colour asked for: {text:?}");
    }

    #[test]
    fn live_redraws_move_the_cursor_back_over_the_last_frame() {
        let sink = Sink::default();
        let r = Renderer::with(Mode::Live, true, Some(60), Box::new(sink.clone()), "merge");
        r.task("a", Status::Landing, Some(1));
        // The ticker draws the first frame; wait until it has.
        let deadline = Instant::now() + Duration::from_secs(10);
        while !sink.text().contains("landing") {
            assert!(Instant::now() < deadline, "no first frame drawn");
            std::thread::sleep(Duration::from_millis(5));
        }
        r.handle(Progress::Landed("a/1".into()));
        r.note("stopping: nothing else");
        r.finish();
        let text = sink.text();
        // Three lines (summary, headers and row) drawn, then redrawn from
        // the top.
        assert!(text.contains("\r\x1b[3A"), "{text:?}");
        assert!(text.contains("\x1b[33mlanding"), "{text:?}");
        assert!(text.contains("\x1b[1;32mdone"), "{text:?}");
        let note = text.find("stopping: nothing else").expect("note");
        assert!(note < text.rfind("done").expect("final frame"), "{text:?}");
    }

    #[test]
    fn a_short_terminal_keeps_running_rows_and_counts_the_rest() {
        let r = Renderer::with(
            Mode::Live,
            false,
            Some(80),
            Box::new(Sink::default()),
            "run",
        );
        for i in 0..10 {
            r.task(&format!("t{i}"), Status::Pending, None);
        }
        r.task("t7", Status::Running, Some(1));
        let lines = r.state().frame_in(Instant::now(), 79, 6, true);
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert!(lines[0].contains("1 running, 9 pending"), "{lines:?}");
        assert!(
            lines
                .iter()
                .any(|l| l.contains("t7") && l.contains("running"))
        );
        assert!(lines[4].contains("and 8 more"), "{lines:?}");
    }

    #[test]
    fn the_last_frame_keeps_a_long_failure_reason_whole() {
        let r = Renderer::with(
            Mode::Live,
            false,
            Some(80),
            Box::new(Sink::default()),
            "run",
        );
        let reason = format!("retry budget exhausted: {} the end", "x".repeat(120));
        r.show(&row("web", Status::Failed, Some(3), Some(&reason)));
        let live = r.state().frame_in(Instant::now(), 79, 40, true);
        assert!(live.iter().all(|l| l.chars().count() <= 79), "{live:?}");
        let last = r.state().frame_in(Instant::now(), 79, 40, false);
        assert!(last.iter().any(|l| l.ends_with("the end")), "{last:?}");
    }

    fn row(task: &str, status: Status, attempt: Option<u32>, failure: Option<&str>) -> TaskRow {
        TaskRow {
            task: crate::ids::TaskId::new(task).expect("id"),
            status,
            attempt,
            attempts: attempt.map_or(0, |n| n as usize),
            agent: None,
            elapsed_ms: Some(3_000),
            cost_usd: None,
            usage: Default::default(),
            attempt_usage: Vec::new(),
            worktree: None,
            workspace: None,
            port: None,
            gate: Some("tests fail".into()),
            failure: failure.map(str::to_owned),
            writer: None,
            candidates: Vec::new(),
            attempt_rows: Vec::new(),
        }
    }

    #[test]
    fn rows_from_the_model_keep_reasons_and_replace_stale_states() {
        let r = Renderer::with(
            Mode::Live,
            false,
            Some(100),
            Box::new(Sink::default()),
            "worker",
        );
        r.handle(events()[1].clone());
        r.handle(Progress::Ended {
            task: "api".into(),
            attempt: 1,
            outcome: Outcome::Passed,
            reason: None,
        });
        // Another process landed it: the model says done.
        r.show(&row("api", Status::Done, Some(1), None));
        r.show(&row(
            "web",
            Status::Failed,
            Some(3),
            Some("retry budget exhausted: tests fail"),
        ));
        r.show(&row("docs", Status::Blocked, None, Some("depends on web")));
        let lines = r.state().frame(Instant::now(), true);
        assert!(
            lines[0].contains("1 done, 1 blocked, 1 failed"),
            "{lines:?}"
        );
        assert!(lines[2].contains("api  done"), "{lines:?}");
        assert!(!lines[2].contains("waiting to land"), "{lines:?}");
        assert!(
            lines[3].ends_with("retry budget exhausted: tests fail"),
            "{lines:?}"
        );
        assert!(lines[3].contains("#3"), "{lines:?}");
        assert!(lines[4].ends_with("depends on web"), "{lines:?}");
        // A row being landed stays `landing` while the log still says
        // passed; the log's word wins once it changes.
        r.task("web", Status::Landing, Some(4));
        r.show(&row("web", Status::Passed, Some(4), None));
        assert_eq!(r.state().rows[1].state, Status::Landing);
        r.show(&row(
            "web",
            Status::Retrying,
            Some(4),
            Some("could not land"),
        ));
        assert_eq!(r.state().rows[1].state, Status::Retrying);
    }

    #[test]
    fn long_lines_are_cut_to_the_width() {
        let r = Renderer::with(
            Mode::Live,
            false,
            Some(30),
            Box::new(Sink::default()),
            "run",
        );
        r.handle(Progress::Ended {
            task: "a-very-long-task-name-indeed".into(),
            attempt: 3,
            outcome: Outcome::Failed,
            reason: Some("gate tests failed: 3 of 120 tests failed in the suite".into()),
        });
        for line in r.state().frame(Instant::now(), false) {
            assert!(line.chars().count() <= 29, "{line:?}");
        }
    }
}
