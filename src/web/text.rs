//! Numbers, times and identifiers for people, as the pages print them (the
//! same forms as the terminal's: UTC times, `3m04s`, `$0.12`).

/// Milliseconds since the epoch as `2026-01-01T00:00:00Z`.
pub fn time(ms: i64) -> String {
    crate::clock::utc_text(ms)
}

/// A duration in milliseconds as `5s`, `3m04s`, `1h02m` (under a second:
/// `0.4s`).
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0) as u64;
    if ms < 1000 {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    crate::clock::duration_text(ms / 1000)
}

/// The first 12 characters of an object id.
pub fn short(id: &str) -> &str {
    &id[..id.len().min(12)]
}

/// A token count as `345`, `12.3k`, `1.5M`.
pub fn tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// `value` fit for one segment of a URL path: everything but unreserved
/// characters percent-encoded. Ids are kebab-case already; this keeps a
/// link a link whatever it is given.
pub fn segment(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Whether `value` is a full object id (40 or 64 hex digits).
pub fn is_object_id(value: &str) -> bool {
    matches!(value.len(), 40 | 64) && value.bytes().all(|b| b.is_ascii_hexdigit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_read_like_the_terminal() {
        assert_eq!(time(0), "1970-01-01T00:00:00Z");
        assert_eq!(time(1_795_000_000_123), "2026-11-18T11:06:40Z");
        assert_eq!(duration(400), "0.4s");
        assert_eq!(duration(184_000), "3m04s");
        assert_eq!(duration(3_720_000), "1h02m");
        assert_eq!(tokens(12_345), "12.3k");
    }

    #[test]
    fn segments_encode_everything_that_could_leave_the_segment() {
        assert_eq!(segment("run-1"), "run-1");
        assert_eq!(segment("a/b?c#d\"<"), "a%2Fb%3Fc%23d%22%3C");
        assert!(is_object_id(&"a".repeat(40)));
        assert!(!is_object_id("HEAD"));
        assert!(!is_object_id(&"g".repeat(40)));
    }
}
