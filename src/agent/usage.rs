//! Token and cost accounting reported by an agent CLI, and the small readers
//! the per-CLI parsers share (JSON lines, numbers as the CLIs print them).
//!
//! Parsers here never fail: agents print progress, warnings and their own
//! program's output on stdout too, so anything unrecognised is skipped.

use serde_json::Value;

/// Tokens and cost of one attempt, as far as the CLI reports them.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Usage {
    /// Prompt-side tokens, including cached and cache-creation tokens.
    pub input_tokens: u64,
    /// Generated tokens, including reasoning ("thinking") tokens.
    pub output_tokens: u64,
    /// The part of `input_tokens` read from the provider's prompt cache.
    #[serde(default)]
    pub cache_read_tokens: u64,
    /// The part of `input_tokens` written to the provider's prompt cache.
    #[serde(default)]
    pub cache_write_tokens: u64,
    /// Cost in US dollars, where the CLI computes one (Claude Code, Aider).
    pub cost_usd: Option<f64>,
    /// Model turns or requests, where the CLI counts them.
    pub turns: Option<u32>,
    /// Whether the CLI itself said the run ended in error.
    pub is_error: Option<bool>,
    /// The model the CLI says it used, where it says so.
    #[serde(default)]
    pub model: Option<String>,
}

/// Where a cost figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// The CLI reported it (Claude Code, Aider).
    Reported,
    /// git-orch estimated it from the tokens and the price table.
    Estimated,
}

/// Every line of `text` that parses as a JSON object, in order.
pub(super) fn json_lines(text: &str) -> impl Iterator<Item = Value> + '_ {
    text.lines().filter_map(|line| {
        let line = line.trim();
        if !line.starts_with('{') {
            return None;
        }
        serde_json::from_str::<Value>(line)
            .ok()
            .filter(Value::is_object)
    })
}

/// A non-negative whole number at `key` of `obj`; floats are truncated, and
/// anything else (missing, negative, a string) is `None`.
pub(super) fn count(obj: &Value, key: &str) -> Option<u64> {
    let v = obj.get(key)?;
    v.as_u64().or_else(|| {
        v.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .map(|f| f as u64)
    })
}

/// `count`, with a missing value read as zero.
pub(super) fn count0(obj: &Value, key: &str) -> u64 {
    count(obj, key).unwrap_or(0)
}

/// A finite, non-negative number at `key` of `obj`.
pub(super) fn amount(obj: &Value, key: &str) -> Option<f64> {
    obj.get(key)?
        .as_f64()
        .filter(|f| f.is_finite() && *f >= 0.0)
}

/// A token count as CLIs abbreviate it: `345`, `1.2k`, `12k`, `1.5M`,
/// `1,234`. `None` for anything else.
pub(super) fn abbreviated_count(text: &str) -> Option<u64> {
    let text = text.trim().replace(',', "");
    let (digits, scale) = match text.chars().last()? {
        'k' | 'K' => (&text[..text.len() - 1], 1_000.0),
        'm' | 'M' => (&text[..text.len() - 1], 1_000_000.0),
        'b' | 'B' => (&text[..text.len() - 1], 1_000_000_000.0),
        _ => (text.as_str(), 1.0),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let value: f64 = digits.parse().ok()?;
    Some((value * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_lines_skips_non_objects_and_garbage() {
        let text = "progress...\n{\"a\":1}\n[1,2]\n{broken\n  {\"b\":2}  \n\"str\"\n";
        let lines: Vec<Value> = json_lines(text).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["b"], 2);
    }

    #[test]
    fn counts_accept_integers_and_truncate_floats() {
        let v: Value = serde_json::json!({"a": 5, "b": 2.9, "c": -1, "d": "7", "e": null});
        assert_eq!(count(&v, "a"), Some(5));
        assert_eq!(count(&v, "b"), Some(2));
        assert_eq!(count(&v, "c"), None);
        assert_eq!(count(&v, "d"), None);
        assert_eq!(count(&v, "e"), None);
        assert_eq!(count0(&v, "missing"), 0);
        assert_eq!(amount(&v, "b"), Some(2.9));
        assert_eq!(amount(&v, "c"), None);
    }

    #[test]
    fn abbreviated_counts() {
        assert_eq!(abbreviated_count("345"), Some(345));
        assert_eq!(abbreviated_count("1.2k"), Some(1200));
        assert_eq!(abbreviated_count("12k"), Some(12_000));
        assert_eq!(abbreviated_count("1.5M"), Some(1_500_000));
        assert_eq!(abbreviated_count("1,234"), Some(1234));
        assert_eq!(abbreviated_count(""), None);
        assert_eq!(abbreviated_count("k"), None);
        assert_eq!(abbreviated_count("-5"), None);
        assert_eq!(abbreviated_count("abc"), None);
        assert_eq!(abbreviated_count("1.2.3k"), None);
    }
}
