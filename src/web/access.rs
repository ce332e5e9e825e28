//! Who may read: only requests to this server's address (a `Host` of
//! 127.0.0.1 or localhost with its port, which keeps a DNS-rebinding page
//! out) whose path starts with the random token printed in the URL. Every
//! answer, a refusal included, carries the headers that keep a page from
//! loading or running anything not served here.

/// The Content-Security-Policy of every answer: scripts, styles and
/// connections only from this server (its two built-in files and its live
/// streams), nothing inline, no frames, no forms, no other origin.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// The headers every answer carries.
pub const HEADERS: [(&str, &str); 6] = [
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("x-frame-options", "DENY"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cache-control", "no-store"),
];

/// A new token: 128 random bits as 32 hex digits.
pub fn new_token() -> String {
    crate::ids::random_bytes::<16>()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Whether a request for `path` with `host` may be answered: the host is
/// this server's and the path's first segment is `token` (compared in
/// constant time).
pub fn allowed(token: &str, port: u16, host: Option<&str>, path: &str) -> bool {
    let host_ok =
        host.is_some_and(|h| h == format!("127.0.0.1:{port}") || h == format!("localhost:{port}"));
    let first = path
        .strip_prefix('/')
        .unwrap_or(path)
        .split('/')
        .next()
        .unwrap_or_default();
    host_ok & same(first.as_bytes(), token.as_bytes())
}

/// Equality that takes the same time wherever the first difference is.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_token_on_this_host_gets_in() {
        let t = new_token();
        assert_eq!(t.len(), 32);
        assert_ne!(t, new_token());
        let host = Some("127.0.0.1:8080");
        assert!(allowed(&t, 8080, host, &format!("/{t}/runs/x")));
        assert!(allowed(&t, 8080, Some("localhost:8080"), &format!("/{t}")));
        assert!(!allowed(&t, 8080, host, "/"));
        assert!(!allowed(&t, 8080, host, "/runs/x"));
        assert!(!allowed(&t, 8080, host, &format!("/{}/", &t[..31])));
        assert!(!allowed(&t, 8080, host, &format!("/{t}x/")));
        assert!(!allowed(
            &t,
            8080,
            Some("evil.example:8080"),
            &format!("/{t}/")
        ));
        assert!(!allowed(
            &t,
            8080,
            Some("127.0.0.1:8081"),
            &format!("/{t}/")
        ));
        assert!(!allowed(&t, 8080, None, &format!("/{t}/")));
    }
}
