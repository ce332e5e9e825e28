//! Finding the culprit of a speculative batch that failed the integration
//! gate, by bisection: with K candidates stacked on the target and the
//! whole stack failing, the gate is run on prefixes until the longest
//! passing prefix and the first failing candidate are known, in about
//! log2(K) gate runs instead of K.
//!
//! Kept apart from the queue so the search itself, which decides what
//! lands and whom the failure is charged to, is tested without git.

/// The search for the longest passing prefix of a `len`-candidate stack
/// whose whole failed, and the candidate right after it, to which the
/// failure belongs. The queue asks [`Bisection::next`] which prefix to
/// gate, gates it, and tells [`Bisection::record`] the verdict, until
/// `next` says the culprit is known ([`Bisection::found`]).
///
/// A failure is taken to stay once its candidate is in the prefix: the
/// stack's later candidates build on the earlier ones, so a prefix with the
/// culprit in it is not expected to pass.
#[derive(Debug)]
pub struct Bisection<V> {
    /// The first `passing` candidates pass together (0 trivially).
    passing: usize,
    /// The first `failing` candidates fail together (the whole stack did).
    failing: usize,
    /// The verdicts of the shortest failing prefix gated so far.
    verdicts: V,
}

impl<V> Bisection<V> {
    /// The search over a stack of `len` (at least 1) whose whole failed
    /// with `verdicts`.
    pub fn new(len: usize, verdicts: V) -> Self {
        Bisection {
            passing: 0,
            failing: len.max(1),
            verdicts,
        }
    }

    /// How many candidates to gate next, from the bottom of the stack;
    /// `None` once the culprit is known.
    pub fn next(&self) -> Option<usize> {
        (self.failing - self.passing > 1).then(|| self.passing + (self.failing - self.passing) / 2)
    }

    /// The verdict of gating the first `n` candidates.
    pub fn record(&mut self, n: usize, passed: bool, verdicts: V) {
        if passed {
            self.passing = self.passing.max(n);
        } else if n < self.failing {
            self.failing = n;
            self.verdicts = verdicts;
        }
    }

    /// What the search found (meaningful once [`Bisection::next`] is
    /// `None`).
    pub fn found(self) -> Culprit<V> {
        Culprit {
            passing: self.passing,
            index: self.failing - 1,
            verdicts: self.verdicts,
        }
    }
}

/// What a [`Bisection`] found.
#[derive(Debug, PartialEq, Eq)]
pub struct Culprit<V> {
    /// How many candidates, from the bottom of the stack, pass together.
    pub passing: usize,
    /// The failing candidate's place in the stack.
    pub index: usize,
    /// The verdicts of the shortest failing prefix gated: the one that
    /// ends with the culprit.
    pub verdicts: V,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bisects a stack where `bad` candidates break the gate; returns what
    /// was found and the prefixes gated, in order. A prefix's verdicts are
    /// its length.
    fn bisect(len: usize, bad: &[usize]) -> (Culprit<usize>, Vec<usize>) {
        let mut search = Bisection::new(len, len);
        let mut gated = Vec::new();
        while let Some(n) = search.next() {
            gated.push(n);
            search.record(n, !bad.iter().any(|&b| b < n), n);
        }
        (search.found(), gated)
    }

    #[test]
    fn every_culprit_of_every_stack_is_found_in_log2_gate_runs() {
        for len in 1..=17 {
            let bound = (len as f64).log2().ceil() as usize;
            for bad in 0..len {
                let (found, gated) = bisect(len, &[bad]);
                assert_eq!(
                    (found.passing, found.index),
                    (bad, bad),
                    "stack of {len}, culprit {bad}"
                );
                // The verdicts are those of the shortest failing prefix:
                // the one that ends with the culprit.
                assert_eq!(found.verdicts, bad + 1, "stack of {len}, culprit {bad}");
                assert!(
                    gated.len() <= bound,
                    "stack of {len}: {} gate runs, more than {bound}",
                    gated.len()
                );
                assert!(gated.iter().all(|&n| 0 < n && n < len), "{gated:?}");
            }
        }
    }

    #[test]
    fn with_several_culprits_the_lowest_is_charged_and_what_is_below_it_lands() {
        let (found, _) = bisect(8, &[2, 5, 6]);
        assert_eq!((found.passing, found.index), (2, 2));
        let (found, gated) = bisect(8, &[0, 7]);
        assert_eq!((found.passing, found.index), (0, 0));
        assert_eq!(gated, [4, 2, 1]);
    }

    #[test]
    fn a_stack_of_one_needs_no_more_gate_runs() {
        let search = Bisection::new(1, "the whole stack's verdicts");
        assert_eq!(search.next(), None);
        assert_eq!(
            search.found(),
            Culprit {
                passing: 0,
                index: 0,
                verdicts: "the whole stack's verdicts"
            }
        );
    }
}
