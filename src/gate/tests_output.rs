//! Failing test names from a test runner's output, where they can be
//! parsed: cargo test / libtest, pytest, Go, Jest/Vitest, Mocha, and TAP.
//!
//! The names go into the retry context, so the next attempt knows exactly
//! which tests to look at. Unknown formats yield nothing; never a guess.

/// Names of failing tests found in `output`, in order, without duplicates.
pub fn failing_tests(output: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |name: &str| {
        let name = name.trim();
        if !name.is_empty() && name.len() < 300 && !out.iter().any(|n| n == name) {
            out.push(name.to_owned());
        }
    };
    for line in output.lines() {
        let t = line.trim();
        // libtest: "test tests::adds ... FAILED"
        if let Some(rest) = t.strip_prefix("test ")
            && let Some(name) = rest.strip_suffix(" ... FAILED")
        {
            push(name);
            continue;
        }
        // pytest -rA / summary: "FAILED tests/test_x.py::test_y - AssertionError"
        if let Some(rest) = t.strip_prefix("FAILED ") {
            push(rest.split(" - ").next().unwrap_or(rest));
            continue;
        }
        // go test: "--- FAIL: TestThing (0.00s)"
        if let Some(rest) = t.strip_prefix("--- FAIL: ") {
            push(rest.split(" (").next().unwrap_or(rest));
            continue;
        }
        // Jest / Vitest: "✕ adds numbers (3 ms)" or "× adds numbers"
        if let Some(rest) = t.strip_prefix("✕ ").or_else(|| t.strip_prefix("× ")) {
            let name = match rest.rfind(" (") {
                Some(i) if rest.ends_with(')') => &rest[..i],
                _ => rest,
            };
            push(name);
            continue;
        }
        // TAP: "not ok 3 - adds numbers"
        if let Some(rest) = t.strip_prefix("not ok ") {
            let name = rest
                .split_once(" - ")
                .map(|(_, n)| n)
                .unwrap_or(rest)
                .split(" # ")
                .next()
                .unwrap_or_default();
            push(name);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_runners() {
        let cargo = "running 2 tests\ntest math::adds ... ok\ntest math::subtracts ... FAILED\n";
        assert_eq!(failing_tests(cargo), ["math::subtracts"]);
        let pytest = "FAILED tests/test_cart.py::test_total - assert 3 == 4\n";
        assert_eq!(failing_tests(pytest), ["tests/test_cart.py::test_total"]);
        let go = "--- FAIL: TestTotal (0.00s)\n";
        assert_eq!(failing_tests(go), ["TestTotal"]);
        let jest = "  ✕ computes the total (4 ms)\n  ✓ other\n";
        assert_eq!(failing_tests(jest), ["computes the total"]);
        let tap = "ok 1 - a\nnot ok 2 - computes the total # TODO later\n";
        assert_eq!(failing_tests(tap), ["computes the total"]);
    }

    #[test]
    fn unknown_output_yields_nothing() {
        assert!(failing_tests("error: could not compile\nsomething failed\n").is_empty());
    }
}
