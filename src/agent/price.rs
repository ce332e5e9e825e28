//! Turning tokens into an estimated cost, so that `--budget` can stop every
//! agent, not only the CLIs that print a cost.
//!
//! Prices are US dollars per million tokens, per model. A model matches the
//! longest table entry that its name starts with, after dropping a
//! provider prefix (`openai/`, `anthropic/`, `gemini/`, …) and a bracketed
//! suffix (`[1m]`); so `claude-sonnet-4-5-20250929` uses
//! `claude-sonnet-4-5`. The defaults are the providers' published list
//! prices for well-known models; `[price "MODEL"]` sections in
//! `.orch/config` override or extend them. An estimate ignores discounts,
//! batch pricing and long-context surcharges: it is for budgets, not
//! invoices.

use std::collections::BTreeMap;

use super::usage::Usage;

/// What one model costs, in US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Price {
    pub input: f64,
    pub output: f64,
    /// Reading from the prompt cache (defaults to `input`).
    pub cache_read: f64,
    /// Writing to the prompt cache (defaults to `input`).
    pub cache_write: f64,
}

impl Price {
    const fn new(input: f64, output: f64, cache_read: f64, cache_write: f64) -> Price {
        Price {
            input,
            output,
            cache_read,
            cache_write,
        }
    }
}

/// The built-in table (list prices, USD per million tokens).
pub const DEFAULTS: &[(&str, Price)] = &[
    // Anthropic: cache writes at 1.25x input, reads at 0.1x.
    ("claude-opus-4-5", Price::new(5.0, 25.0, 0.5, 6.25)),
    ("claude-opus-4-1", Price::new(15.0, 75.0, 1.5, 18.75)),
    ("claude-opus-4", Price::new(15.0, 75.0, 1.5, 18.75)),
    ("claude-sonnet-4", Price::new(3.0, 15.0, 0.3, 3.75)),
    ("claude-3-7-sonnet", Price::new(3.0, 15.0, 0.3, 3.75)),
    ("claude-3-5-sonnet", Price::new(3.0, 15.0, 0.3, 3.75)),
    ("claude-haiku-4-5", Price::new(1.0, 5.0, 0.1, 1.25)),
    ("claude-3-5-haiku", Price::new(0.8, 4.0, 0.08, 1.0)),
    // OpenAI: cached input at a tenth (GPT-5) or a quarter (GPT-4.1, o-series).
    ("gpt-5-nano", Price::new(0.05, 0.4, 0.005, 0.05)),
    ("gpt-5-mini", Price::new(0.25, 2.0, 0.025, 0.25)),
    ("gpt-5", Price::new(1.25, 10.0, 0.125, 1.25)),
    ("gpt-4.1-nano", Price::new(0.1, 0.4, 0.025, 0.1)),
    ("gpt-4.1-mini", Price::new(0.4, 1.6, 0.1, 0.4)),
    ("gpt-4.1", Price::new(2.0, 8.0, 0.5, 2.0)),
    ("gpt-4o-mini", Price::new(0.15, 0.6, 0.075, 0.15)),
    ("gpt-4o", Price::new(2.5, 10.0, 1.25, 2.5)),
    ("o4-mini", Price::new(1.1, 4.4, 0.275, 1.1)),
    ("o3", Price::new(2.0, 8.0, 0.5, 2.0)),
    ("codex-mini", Price::new(1.5, 6.0, 0.375, 1.5)),
    // Google (prompts up to 200k tokens).
    ("gemini-2.5-pro", Price::new(1.25, 10.0, 0.31, 1.25)),
    ("gemini-2.5-flash-lite", Price::new(0.1, 0.4, 0.025, 0.1)),
    ("gemini-2.5-flash", Price::new(0.3, 2.5, 0.075, 0.3)),
    ("gemini-2.0-flash", Price::new(0.1, 0.4, 0.025, 0.1)),
];

/// A model name as the table knows it: lower case, without a provider
/// prefix or a bracketed suffix.
pub fn normalize(model: &str) -> String {
    let mut m = model.trim().to_ascii_lowercase();
    if let Some(i) = m.find('[') {
        m.truncate(i);
    }
    if let Some((_, rest)) = m.rsplit_once('/') {
        m = rest.to_owned();
    }
    m
}

/// The price of `model`: the longest matching prefix among `overrides`
/// (from the config) and the defaults, overrides first on equal length.
pub fn lookup(model: &str, overrides: &BTreeMap<String, Price>) -> Option<Price> {
    let m = normalize(model);
    let configured = overrides
        .iter()
        .map(|(k, p)| (normalize(k), *p))
        .filter(|(k, _)| m.starts_with(k.as_str()));
    let builtin = DEFAULTS
        .iter()
        .map(|(k, p)| ((*k).to_owned(), *p))
        .filter(|(k, _)| m.starts_with(k.as_str()));
    let mut best: Option<(String, Price)> = None;
    for (k, p) in configured.chain(builtin) {
        if best.as_ref().is_none_or(|(b, _)| k.len() > b.len()) {
            best = Some((k, p));
        }
    }
    best.map(|(_, p)| p)
}

/// The estimated cost of `usage` at `price`, in US dollars.
pub fn estimate(usage: &Usage, price: &Price) -> f64 {
    let cached = usage.cache_read_tokens + usage.cache_write_tokens;
    let plain = usage.input_tokens.saturating_sub(cached);
    let per = |tokens: u64, usd: f64| tokens as f64 * usd / 1_000_000.0;
    per(plain, price.input)
        + per(usage.cache_read_tokens, price.cache_read)
        + per(usage.cache_write_tokens, price.cache_write)
        + per(usage.output_tokens, price.output)
}

/// An amount of US dollars for people: two decimals from a cent up;
/// below a cent, enough decimals for two significant digits (`$0.0042`,
/// `$0.00012`), so a cheap run never reads `$0.00` as if it were free.
pub fn usd(amount: f64) -> String {
    let a = amount.abs();
    let decimals = if !a.is_finite() || a == 0.0 || a >= 0.01 {
        2
    } else {
        ((-a.log10()).floor() as usize + 2).min(10)
    };
    format!("${amount:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_cent_amounts_keep_two_significant_digits() {
        assert_eq!(usd(0.0), "$0.00");
        assert_eq!(usd(0.5), "$0.50");
        assert_eq!(usd(12.345), "$12.35");
        assert_eq!(usd(0.01), "$0.01");
        assert_eq!(usd(0.0042), "$0.0042");
        assert_eq!(usd(0.000_123), "$0.00012");
        assert_eq!(usd(0.009_9), "$0.0099");
        assert_eq!(usd(1e-12), "$0.0000000000");
    }

    #[test]
    fn longest_prefix_wins_and_names_are_normalized() {
        let none = BTreeMap::new();
        let p = lookup("claude-sonnet-4-5-20250929", &none).expect("known");
        assert_eq!(p.input, 3.0);
        assert_eq!(
            lookup("anthropic/claude-opus-4-1", &none)
                .expect("known")
                .output,
            75.0
        );
        assert_eq!(
            lookup("claude-opus-4-5[1m]", &none).expect("known").input,
            5.0
        );
        assert_eq!(lookup("gpt-5-mini", &none).expect("known").input, 0.25);
        assert_eq!(
            lookup("openai/gpt-5-codex", &none).expect("known").input,
            1.25
        );
        assert_eq!(
            lookup("gemini-2.5-flash-lite", &none).expect("known").input,
            0.1
        );
        assert_eq!(lookup("mystery-model", &none), None);
    }

    #[test]
    fn config_overrides_and_extends() {
        let mut o = BTreeMap::new();
        o.insert("gpt-5".to_owned(), Price::new(2.0, 20.0, 0.2, 2.0));
        o.insert("mystery".to_owned(), Price::new(1.0, 1.0, 1.0, 1.0));
        assert_eq!(lookup("gpt-5-codex", &o).expect("known").input, 2.0);
        // A longer built-in entry still beats a shorter override.
        assert_eq!(lookup("gpt-5-mini", &o).expect("known").input, 0.25);
        assert_eq!(lookup("mystery-model", &o).expect("known").output, 1.0);
    }

    #[test]
    fn estimates_split_cached_tokens() {
        let usage = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
            cache_read_tokens: 500_000,
            cache_write_tokens: 100_000,
            ..Usage::default()
        };
        let price = Price::new(3.0, 15.0, 0.3, 3.75);
        let cost = estimate(&usage, &price);
        // 400k plain at 3, 500k read at 0.3, 100k write at 3.75, 100k out at 15.
        let expected = 1.2 + 0.15 + 0.375 + 1.5;
        assert!((cost - expected).abs() < 1e-9, "{cost}");
    }
}
