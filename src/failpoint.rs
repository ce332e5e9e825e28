//! Named failpoints: places where a test can make this process crash,
//! panic or wait, so every crash window is hit exactly, every time, instead
//! of by killing after a guessed delay.
//!
//! A failpoint is a call to [`hit`] with a name. In debug builds (what
//! `cargo test` runs) `ORCH_FAILPOINTS` arms them: a comma-separated list
//! of `name=action`, where the action is
//!
//! * `kill`: the process kills itself with SIGKILL (what `kill -9` does),
//! * `panic`: the current thread panics,
//! * `exit`: the process exits with status 99 at once,
//! * `wait`: the process writes `<name>` to `$ORCH_FAILPOINT_FILE` (when
//!   set) and blocks until that file is removed, so a test can act while it
//!   is exactly there.
//!
//! `name=action@N` fires on the N-th hit only (from 1). Release builds
//! compile every failpoint to nothing: no environment variable can make a
//! user's `git orch` crash on purpose.

/// Reached the failpoint `name`; see the module docs.
#[inline]
pub fn hit(name: &str) {
    #[cfg(debug_assertions)]
    armed::hit(name);
    #[cfg(not(debug_assertions))]
    let _ = name;
}

#[cfg(debug_assertions)]
mod armed {
    use std::collections::HashMap;
    use std::sync::Mutex;

    static HITS: Mutex<Option<HashMap<String, u32>>> = Mutex::new(None);

    pub fn hit(name: &str) {
        let Ok(spec) = std::env::var("ORCH_FAILPOINTS") else {
            return;
        };
        for item in spec.split(',') {
            let Some((point, action)) = item.trim().split_once('=') else {
                continue;
            };
            if point != name {
                continue;
            }
            let (action, nth) = match action.split_once('@') {
                Some((a, n)) => (a, n.parse::<u32>().ok()),
                None => (action, None),
            };
            let count = {
                let mut hits = HITS.lock().unwrap_or_else(|e| e.into_inner());
                let c = hits
                    .get_or_insert_with(HashMap::new)
                    .entry(name.to_owned())
                    .or_default();
                *c += 1;
                *c
            };
            if nth.is_some_and(|n| n != count) {
                continue;
            }
            match action {
                "kill" => {
                    // SAFETY: raising a signal at ourselves has no memory
                    // safety requirements.
                    unsafe {
                        libc::raise(libc::SIGKILL);
                    }
                }
                "panic" => panic!("failpoint {name}"),
                "exit" => std::process::exit(99),
                "wait" => wait_here(name),
                _ => {}
            }
        }
    }

    fn wait_here(name: &str) {
        let Some(file) = std::env::var_os("ORCH_FAILPOINT_FILE") else {
            return;
        };
        let file = std::path::PathBuf::from(file);
        if std::fs::write(&file, name).is_err() {
            return;
        }
        while file.exists() {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}
