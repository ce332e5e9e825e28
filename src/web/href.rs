//! The links between pages. Every path starts with the server's token (the
//! one secret of the URL), so a page's links work without anything stored
//! in the browser.

use super::text::segment;

/// Makes the paths of one server's pages.
#[derive(Debug, Clone)]
pub struct Links {
    /// `/<token>`.
    base: String,
}

impl Links {
    pub fn new(token: &str) -> Self {
        Self {
            base: format!("/{}", segment(token)),
        }
    }

    /// The list of runs (`page` from 1).
    pub fn runs(&self, page: usize) -> String {
        if page <= 1 {
            format!("{}/", self.base)
        } else {
            format!("{}/?page={page}", self.base)
        }
    }

    pub fn run(&self, run: &str) -> String {
        format!("{}/runs/{}", self.base, segment(run))
    }

    pub fn task(&self, run: &str, task: &str) -> String {
        format!("{}/tasks/{}", self.run(run), segment(task))
    }

    pub fn attempt(&self, run: &str, task: &str, attempt: u32) -> String {
        format!("{}/attempts/{attempt}", self.task(run, task))
    }

    /// A plan, at its newest revision or at `revision`.
    pub fn plan(&self, plan: &str, revision: Option<u32>) -> String {
        match revision {
            Some(r) => format!("{}/plans/{}?rev={r}", self.base, segment(plan)),
            None => format!("{}/plans/{}", self.base, segment(plan)),
        }
    }

    /// A landed commit's provenance.
    pub fn commit(&self, commit: &str) -> String {
        format!("{}/commits/{}", self.base, segment(commit))
    }

    /// The live stream of a page whose path is `page`.
    pub fn live(&self, page: &str) -> String {
        match page.strip_prefix(&self.base) {
            Some(rest) => format!("{}/live{rest}", self.base),
            None => page.to_owned(),
        }
    }

    pub fn asset(&self, name: &str) -> String {
        format!("{}/assets/{}", self.base, segment(name))
    }
}
