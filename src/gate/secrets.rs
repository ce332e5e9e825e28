//! Finds secrets in added lines, and masks them in any text.
//!
//! Two jobs share one set of detectors so they can never disagree:
//!
//! - [`scan`] judges a change: each added line (see `diffscan`) is searched
//!   for credentials with a recognisable shape (private key headers, AWS,
//!   GitHub, GitLab, Slack and Google keys, JWTs) and for assignments of a
//!   high-entropy value to a secret-sounding name, in any file format
//!   (`.env`, shell, YAML, JSON, TOML, most code). Added `.env` files are
//!   flagged as a whole, since their purpose is to hold secrets.
//! - [`mask`] cleans text that is about to be stored or shown (gate output
//!   tails, agent logs, prompts): each secret keeps only the public prefix
//!   that says what it was (`AKIA`, `ghp_`, the assignment's name) and the
//!   rest becomes [`MASK`]. A finding carries its line masked the same way,
//!   and a BLAKE3 fingerprint so two reports of one leak can be matched
//!   without either revealing it.
//!
//! Detection errs towards the specific: a generic assignment needs a
//! secret-sounding name, a value of at least 12 characters with at least
//! [`MIN_ENTROPY`] bits per character, and a value that is neither a
//! stand-in (`${VAR}`, `<your-token>`, `changeme`) nor code or a name
//! (`process.env.X`, `self.tokens[i]`, `x-api-key`), which source files
//! assign to names like `token` all the time.
//!
//! Pure: no I/O, no printing. The tests build every fake secret at run time
//! so that this file holds nothing a secret scanner, this one included,
//! would flag.

use std::collections::HashSet;
use std::ops::Range;
use std::sync::LazyLock;

use regex::{Captures, Regex};

use super::diffscan::AddedLine;

/// What replaces the secret part of a match.
pub const MASK: &str = "[MASKED]";

/// The longest `masked_line` a finding carries, in characters.
pub const MAX_LINE_CHARS: usize = 200;

/// The least Shannon entropy, in bits per character, for the value of a
/// generic assignment to count as a secret. Random tokens score 4 and
/// more; words, version strings and repeated patterns score less.
pub const MIN_ENTROPY: f64 = 3.5;

/// What kind of secret a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    /// A PEM or PGP private key block (its header line).
    PrivateKey,
    /// An AWS access key id (`AKIA…` and the other id prefixes).
    AwsAccessKeyId,
    /// A 40-character AWS secret access key assigned to an `aws…secret` name.
    AwsSecretAccessKey,
    /// A GitHub token (`ghp_`, `gho_`, `ghu_`, `ghs_`, `ghr_`, `github_pat_`).
    GithubToken,
    /// A GitLab personal access token (`glpat-`).
    GitlabToken,
    /// A Slack token (`xoxb-`, `xoxp-`, …).
    SlackToken,
    /// A Slack incoming-webhook URL.
    SlackWebhook,
    /// A Google API key (`AIza…`).
    GoogleApiKey,
    /// A JSON Web Token (three base64url parts, the first two JSON objects).
    Jwt,
    /// A high-entropy value assigned to a secret-sounding name.
    EnvAssignment,
    /// An added `.env` file, flagged as a whole.
    EnvFile,
}

impl SecretKind {
    /// A short human description, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            SecretKind::PrivateKey => "private key",
            SecretKind::AwsAccessKeyId => "AWS access key id",
            SecretKind::AwsSecretAccessKey => "AWS secret access key",
            SecretKind::GithubToken => "GitHub token",
            SecretKind::GitlabToken => "GitLab personal access token",
            SecretKind::SlackToken => "Slack token",
            SecretKind::SlackWebhook => "Slack webhook URL",
            SecretKind::GoogleApiKey => "Google API key",
            SecretKind::Jwt => "JSON Web Token",
            SecretKind::EnvAssignment => "secret-looking assignment",
            SecretKind::EnvFile => ".env file",
        }
    }

    /// When matches overlap the lowest rank is reported: a shape that names
    /// its issuer says more than a generic assignment.
    fn rank(self) -> u8 {
        match self {
            SecretKind::PrivateKey => 0,
            SecretKind::AwsAccessKeyId => 1,
            SecretKind::AwsSecretAccessKey => 2,
            SecretKind::GithubToken => 3,
            SecretKind::GitlabToken => 4,
            SecretKind::SlackWebhook => 5,
            SecretKind::SlackToken => 6,
            SecretKind::GoogleApiKey => 7,
            SecretKind::Jwt => 8,
            SecretKind::EnvAssignment => 9,
            SecretKind::EnvFile => 10,
        }
    }
}

/// One secret found in an added line, or one added `.env` file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SecretFinding {
    /// The file, as in [`AddedLine::path`].
    pub path: String,
    /// 1-based line number in the new file; 0 for an [`SecretKind::EnvFile`].
    pub line: u32,
    /// 1-based byte column where the secret value starts (for an assignment,
    /// the value, not the name); 0 for an [`SecretKind::EnvFile`].
    pub column: u32,
    /// What was found.
    pub kind: SecretKind,
    /// The line with every secret on it masked (see [`mask`]), cut to
    /// [`MAX_LINE_CHARS`] characters; empty for an [`SecretKind::EnvFile`].
    pub masked_line: String,
    /// The first 12 hex digits of the BLAKE3 hash of the secret text (for a
    /// private key, of its body when the change adds one, else its header;
    /// for an `.env` file, of its path).
    pub fingerprint: String,
}

/// Scans added lines for secrets, and flags added `.env` files.
///
/// A file whose name is `.env` or `.env.<anything>` gets one
/// [`SecretKind::EnvFile`] finding, however many lines it adds, unless its
/// last extension marks a template (`.example`, `.sample`, `.template`,
/// `.dist`). Its lines are scanned like any other's too.
///
/// The base64 body lines of a private key block are reported as part of the
/// header's finding, not on their own.
pub fn scan(lines: &[AddedLine]) -> Vec<SecretFinding> {
    let mut findings = Vec::new();
    let mut env_files = HashSet::new();
    let mut block: Option<KeyBlock<'_>> = None;
    for added in lines {
        if is_env_file(&added.path) && env_files.insert(added.path.as_str()) {
            findings.push(SecretFinding {
                path: added.path.clone(),
                line: 0,
                column: 0,
                kind: SecretKind::EnvFile,
                masked_line: String::new(),
                fingerprint: fingerprint(blake3::hash(added.path.as_bytes())),
            });
        }

        if let Some(open) = block.as_mut() {
            if open.continues_at(added) && looks_like_key_body(&added.text) {
                if PRIVATE_KEY_FOOTER.is_match(&added.text) {
                    let done = block.take().expect("the block is open");
                    done.finish(&mut findings);
                } else {
                    open.body.update(added.text.trim().as_bytes());
                    open.next_line += 1;
                }
                continue;
            }
            let done = block.take().expect("the block is open");
            done.finish(&mut findings);
        }

        let secrets = find(&added.text);
        if secrets.is_empty() {
            continue;
        }
        let masked_line: String = apply(&added.text, &secrets)
            .chars()
            .take(MAX_LINE_CHARS)
            .collect();
        for secret in &secrets {
            findings.push(SecretFinding {
                path: added.path.clone(),
                line: added.line,
                column: u32::try_from(secret.start + 1).unwrap_or(u32::MAX),
                kind: secret.kind,
                masked_line: masked_line.clone(),
                fingerprint: fingerprint(blake3::hash(
                    added.text[secret.fingerprinted.clone()].as_bytes(),
                )),
            });
            if secret.kind == SecretKind::PrivateKey && secret.open_block {
                let mut body = blake3::Hasher::new();
                body.update(added.text[secret.masked.clone()].as_bytes());
                block = Some(KeyBlock {
                    path: &added.path,
                    next_line: added.line.saturating_add(1),
                    finding: findings.len() - 1,
                    body,
                });
            }
        }
    }
    if let Some(done) = block {
        done.finish(&mut findings);
    }
    findings
}

/// Replaces every secret in `text` with its mask, leaving every other byte
/// as it was.
///
/// Idempotent: nothing left by a mask matches again. A private key header
/// with no footer after it masks everything to the end of `text`, since a
/// log cut short in the middle of a key still holds key material.
pub fn mask(text: &str) -> String {
    apply(text, &find(text))
}

/// A private key block that began on an added line and has not ended yet:
/// its body lines are hashed into the header's finding instead of being
/// scanned on their own.
struct KeyBlock<'a> {
    path: &'a str,
    next_line: u32,
    finding: usize,
    body: blake3::Hasher,
}

impl KeyBlock<'_> {
    fn continues_at(&self, added: &AddedLine) -> bool {
        added.path == self.path && added.line == self.next_line
    }

    /// Gives the header's finding the fingerprint of the whole body, so two
    /// reports of one key match and reports of two keys do not.
    fn finish(self, findings: &mut [SecretFinding]) {
        if self.next_line > findings[self.finding].line.saturating_add(1) {
            findings[self.finding].fingerprint = fingerprint(self.body.finalize());
        }
    }
}

/// Whether a line can be part of a key block's body: base64, a PEM header
/// field (`Proc-Type: …`), a footer or blank. Any other line ends the block
/// and is scanned on its own, so code that merely mentions a key header
/// cannot hide the lines after it.
fn looks_like_key_body(line: &str) -> bool {
    static BODY: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^\s*(?:[A-Za-z0-9+/=]*|[A-Za-z-]+: .*|-----END .*-----)\s*$")
            .expect("the key body pattern is a valid regex")
    });
    BODY.is_match(line)
}

fn fingerprint(hash: blake3::Hash) -> String {
    hash.to_hex()[..12].to_owned()
}

/// One secret in a text, after overlapping matches were merged.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Secret {
    kind: SecretKind,
    /// Byte offset where the secret starts (the reported column - 1).
    start: usize,
    /// Byte offset where it ends: `start..end` is what overlaps are judged on.
    end: usize,
    /// The bytes replaced by [`MASK`]; empty when nothing here is secret
    /// (a private key header with no body after it).
    masked: Range<usize>,
    /// The bytes hashed into the fingerprint.
    fingerprinted: Range<usize>,
    /// A private key header whose footer is not in this text.
    open_block: bool,
}

/// Every secret in `text`, in order, one per group of overlapping matches.
fn find(text: &str) -> Vec<Secret> {
    let mut hits = private_keys(text);
    for pattern in TOKEN_PATTERNS.iter() {
        for caps in pattern.regex.captures_iter(text) {
            if !(pattern.accept)(&caps) {
                continue;
            }
            let value = caps.name("s").expect("every token pattern has a group `s`");
            hits.push(Secret {
                kind: pattern.kind,
                start: value.start(),
                end: value.end(),
                masked: value.start() + pattern.public_prefix..value.end(),
                fingerprinted: value.range(),
                open_block: false,
            });
        }
    }
    merge(hits)
}

/// Merges overlapping matches: the most specific kind is reported, and
/// the mask covers what any of them would have masked, except the public
/// prefix of the reported one.
fn merge(mut hits: Vec<Secret>) -> Vec<Secret> {
    hits.sort_by_key(|h| (h.start, std::cmp::Reverse(h.end)));
    let mut merged = Vec::new();
    let mut group: Vec<Secret> = Vec::new();
    let mut group_end = 0;
    for hit in hits {
        if !group.is_empty() && hit.start >= group_end {
            merged.push(merge_group(std::mem::take(&mut group)));
        }
        group_end = if group.is_empty() {
            hit.end
        } else {
            group_end.max(hit.end)
        };
        group.push(hit);
    }
    if !group.is_empty() {
        merged.push(merge_group(group));
    }
    merged
}

fn merge_group(group: Vec<Secret>) -> Secret {
    let best = group
        .iter()
        .min_by_key(|h| (h.kind.rank(), std::cmp::Reverse(h.end - h.start)))
        .expect("a group is never empty")
        .clone();
    let mut masked: Option<Range<usize>> = None;
    for hit in group.iter().filter(|h| !h.masked.is_empty()) {
        // Another match may start inside the reported one's public prefix
        // (`GITHUB_TOKEN=ghp_…` is also an assignment); the prefix stays.
        let start = if hit.masked.start < best.start || best.masked.is_empty() {
            hit.masked.start
        } else {
            hit.masked.start.max(best.masked.start)
        };
        masked = Some(match masked {
            None => start..hit.masked.end,
            Some(m) => m.start.min(start)..m.end.max(hit.masked.end),
        });
    }
    Secret {
        masked: masked.unwrap_or(best.masked.start..best.masked.start),
        ..best
    }
}

/// `text` with every secret's masked bytes replaced by [`MASK`].
fn apply(text: &str, secrets: &[Secret]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    for secret in secrets.iter().filter(|s| !s.masked.is_empty()) {
        out.push_str(&text[copied..secret.masked.start]);
        out.push_str(MASK);
        copied = secret.masked.end;
    }
    out.push_str(&text[copied..]);
    out
}

// --- Private keys ----------------------------------------------------------

static PRIVATE_KEY_HEADER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----BEGIN (?:(?:RSA|EC|DSA|OPENSSH|ENCRYPTED|PGP) )?PRIVATE KEY(?: BLOCK)?-----")
        .expect("the private key header pattern is a valid regex")
});

static PRIVATE_KEY_FOOTER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"-----END (?:(?:RSA|EC|DSA|OPENSSH|ENCRYPTED|PGP) )?PRIVATE KEY(?: BLOCK)?-----")
        .expect("the private key footer pattern is a valid regex")
});

/// Private key blocks: the header is public (it names the format), the body
/// up to the footer (or the end of `text`) is masked.
fn private_keys(text: &str) -> Vec<Secret> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(header) = PRIVATE_KEY_HEADER.find_at(text, from) {
        let footer = PRIVATE_KEY_FOOTER.find_at(text, header.end());
        let body_end = footer.map_or(text.len(), |f| f.start());
        let body = key_body(text, header.end()..body_end);
        found.push(Secret {
            kind: SecretKind::PrivateKey,
            start: header.start(),
            end: body_end.max(header.end()),
            fingerprinted: if body.is_empty() {
                header.range()
            } else {
                body.clone()
            },
            masked: body,
            open_block: footer.is_none(),
        });
        from = footer.map_or(text.len(), |f| f.end());
    }
    found
}

/// The part of a key block's body to mask: without the whitespace, quotes,
/// separators and `\n` escapes around it, so a key in a JSON string or a
/// quoted header-only line keeps its punctuation.
fn key_body(text: &str, body: Range<usize>) -> Range<usize> {
    const ESCAPES: [&str; 3] = ["\\n", "\\r", "\\t"];
    let is_edge = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | ',' | ';');
    let mut s = &text[body.clone()];
    loop {
        if let Some(rest) = ESCAPES.iter().find_map(|e| s.strip_prefix(e)) {
            s = rest;
        } else if let Some(rest) = s.strip_prefix(is_edge) {
            s = rest;
        } else {
            break;
        }
    }
    let start = body.end - s.len();
    loop {
        if let Some(rest) = ESCAPES.iter().find_map(|e| s.strip_suffix(e)) {
            s = rest;
        } else if let Some(rest) = s.strip_suffix(is_edge) {
            s = rest;
        } else {
            break;
        }
    }
    start..start + s.len()
}

// --- Tokens and assignments --------------------------------------------------

/// A secret with a recognisable shape. Each regex captures the secret value
/// as group `s`; a trailing non-capturing class stands in for `\b` where the
/// value may end in `-`, which `\b` would not treat as a word end.
struct TokenPattern {
    kind: SecretKind,
    regex: Regex,
    /// Leading bytes of the value that name its kind and are kept by the mask.
    public_prefix: usize,
    /// A further test on a match, for shapes that also fit harmless text.
    accept: fn(&Captures<'_>) -> bool,
}

static TOKEN_PATTERNS: LazyLock<Vec<TokenPattern>> = LazyLock::new(|| {
    fn pattern(
        kind: SecretKind,
        regex: &str,
        public_prefix: usize,
        accept: fn(&Captures<'_>) -> bool,
    ) -> TokenPattern {
        TokenPattern {
            kind,
            regex: Regex::new(regex).expect("the token patterns are valid regexes"),
            public_prefix,
            accept,
        }
    }
    fn any(_: &Captures<'_>) -> bool {
        true
    }
    vec![
        pattern(
            SecretKind::AwsAccessKeyId,
            r"\b(?P<s>(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[A-Z0-9]{16})\b",
            4,
            // AWS's documentation uses ids ending in EXAMPLE; copies of it
            // are everywhere and are not keys.
            |c| !c["s"].contains("EXAMPLE"),
        ),
        pattern(
            SecretKind::AwsSecretAccessKey,
            concat!(
                r#"(?i)(?P<name>[a-z0-9_.-]*(?:aws[a-z0-9_.-]*secret|secret[a-z0-9_.-]*aws)[a-z0-9_.-]*)"#,
                r#"["']?[ \t]*(?::=|=>|[:=])[ \t]*["']?(?P<s>[a-z0-9/+=]{40})(?:[^a-z0-9/+=]|$)"#,
            ),
            0,
            |c| !is_stand_in(&c["s"]),
        ),
        pattern(
            SecretKind::GithubToken,
            r"\b(?P<s>gh[pousr]_[A-Za-z0-9]{36,255})\b",
            4,
            any,
        ),
        pattern(
            SecretKind::GithubToken,
            r"\b(?P<s>github_pat_[A-Za-z0-9_]{22,255})\b",
            "github_pat_".len(),
            any,
        ),
        pattern(
            SecretKind::GitlabToken,
            r"\b(?P<s>glpat-[A-Za-z0-9_-]{20,})(?:[^A-Za-z0-9_-]|$)",
            "glpat-".len(),
            any,
        ),
        pattern(
            SecretKind::SlackToken,
            r"\b(?P<s>xox[abposr]-[A-Za-z0-9-]{10,})",
            "xoxb-".len(),
            any,
        ),
        pattern(
            SecretKind::SlackWebhook,
            r"(?P<s>https://hooks\.slack\.com/services/T[A-Z0-9]+/B[A-Z0-9]+/[A-Za-z0-9]+)",
            "https://hooks.slack.com/services/".len(),
            any,
        ),
        pattern(
            SecretKind::GoogleApiKey,
            r"\b(?P<s>AIza[0-9A-Za-z_-]{35})(?:[^0-9A-Za-z_-]|$)",
            4,
            any,
        ),
        pattern(
            SecretKind::Jwt,
            r"\b(?P<s>eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
            3,
            any,
        ),
        pattern(
            SecretKind::EnvAssignment,
            concat!(
                // At the start of a line, after an optional diff or list
                // marker and declaration keywords (`export`, `const`, …).
                r#"(?mi)^[ \t]*(?:[-+>][ \t]*)?"#,
                r#"(?:(?:export|env|arg|set|let|mut|const|var|readonly|local|declare)[ \t]+)*"#,
                // The name, optionally quoted (JSON, YAML), holding a keyword.
                r#"["']?(?P<name>[a-z0-9_.-]*"#,
                r#"(?:secret|token|passw(?:or)?d|pwd|api[_-]?key|apikey|private[_-]?key|access[_-]?key|auth|credential)"#,
                r#"[a-z0-9_.-]*)["']?"#,
                // The value may not start with `:` or `=`: that is a path
                // (`Kind::Variant`) or a comparison, not an assignment.
                r#"[ \t]*(?::=|=>|[:=])[ \t]*["']?(?P<s>[^\s"'#:=][^\s"'#]{11,})"#,
            ),
            0,
            |c| names_a_secret(&c["name"]) && is_secret_value(&c["s"]),
        ),
    ]
});

/// Whether an assignment's name (already known to hold a keyword) is about
/// a secret: `author` holds `auth` but names a person.
fn names_a_secret(name: &str) -> bool {
    static KEYWORD: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(
            r"secret|token|passw(?:or)?d|pwd|api[_-]?key|apikey|private[_-]?key|access[_-]?key|auth|credential",
        )
        .expect("the keyword pattern is a valid regex")
    });
    let lower = name
        .to_ascii_lowercase()
        .replace("authoriz", "auth")
        .replace("author", "");
    KEYWORD.is_match(&lower)
}

/// Whether a generic assignment's value looks like a secret rather than a
/// stand-in, a piece of code, a name or ordinary text.
fn is_secret_value(value: &str) -> bool {
    !is_stand_in(value) && !is_code_or_name(value) && shannon_entropy(value) >= MIN_ENTROPY
}

/// Values that stand for a secret without being one: what a mask leaves,
/// references to where the secret lives (`$VAR`, `${VAR}`), template slots
/// (`{{ … }}`, `<your-token>`) and documentation stand-ins (`changeme`,
/// `xxxx…`, AWS's `…EXAMPLE…` keys).
fn is_stand_in(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    let mut chars = value.chars();
    let first = chars.next();
    value.contains(MASK)
        || value.starts_with('$')
        || value.contains("${")
        || value.contains("{{")
        || value.starts_with('<')
        || lower.starts_with("your")
        || [
            "changeme",
            "change_me",
            "change-me",
            "example",
            "placeholder",
            "redacted",
            "xxxx",
        ]
        .iter()
        .any(|w| lower.contains(w))
        || first.is_some_and(|c| chars.all(|d| d == c))
}

/// Values that are code or names, which a generic assignment pattern also
/// matches in source files: `token = self.tokens[i]`, `api_key:
/// Option<String>`, `paren_token = parenthesized!(…)`, `x-api-key`,
/// `CommitRefIter`, URLs without credentials and file paths.
///
/// The shapes are ones random tokens almost never have: a leading
/// operator, an identifier path from a lower-case root, a call, or words
/// whose capitals each start a lower-case hump.
fn is_code_or_name(value: &str) -> bool {
    static CODE: LazyLock<Regex> = LazyLock::new(|| {
        let ident = r"[A-Za-z_$][A-Za-z0-9_$]*";
        let segment = r"[A-Za-z0-9_$]+";
        let sep = r"(?:\.|::|->)";
        // A word as names spell them: lower-case, an acronym, capitalised
        // humps, digits only at the end (`idx1`, `RSAPrivateKey`, `OID`).
        let word = r"_*[a-z]*[A-Z]*(?:[A-Z][a-z]+)*[A-Z]*[0-9]*";
        Regex::new(&format!(
            concat!(
                // A path from a lower-case root, maybe followed by an
                // operator: `process.env.API_TOKEN`, `self.0.tokens`,
                // `self.taken+len(x)`.
                r"^(?:[a-z_$]+(?:{sep}{segment})+(?:[-+*/%|&<>=!?:;,)\]}}].*)?",
                // A call, index, macro or generic type: `get_token(`,
                // `Token![let](span)`, `quote! {{`, `Vec<String>`.
                r"|{ident}(?:{sep}{segment})*(?:!|!?[(\[{{<].*)",
                // Names: `x-api-key`, `Proxy-Authorization`,
                // `Name.Function`, `CERTIFICATE_PRIVATE_KEY_TYPES,`.
                r"|{word}(?:[._-]{word})*[;,:)\]}}]*",
                r")$"
            ),
            sep = sep,
            segment = segment,
            ident = ident,
            word = word,
        ))
        .expect("the code pattern is a valid regex")
    });
    // A URL is an address, not a credential, unless it carries user info or
    // a query string.
    static PLAIN_URL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^[A-Za-z][A-Za-z0-9+.-]*://[^@?]*$").expect("the URL pattern is a valid regex")
    });
    // Operators and brackets start expressions (`&self.x`, `(a - b)`,
    // `[1, 2]`) and never a token.
    value.starts_with(['&', '*', '(', '[', '{', '!', '%', '@'])
        || (value.contains('<') && value.contains('>'))
        || CODE.is_match(value)
        || PLAIN_URL.is_match(value)
        || is_path(value)
}

/// A file path rather than a base64 value that happens to start with `/`:
/// it has more than one separator and none of base64's `+` and `=`.
fn is_path(value: &str) -> bool {
    let relative = ["~/", "./", "../"].iter().any(|p| value.starts_with(p));
    let absolute = value.starts_with('/') && value[1..].contains('/');
    let windows = value.len() > 2 && value.as_bytes()[1] == b':' && value.as_bytes()[2] == b'\\';
    (relative || absolute || windows) && !value.contains('+') && !value.contains('=')
}

/// Shannon entropy in bits per byte.
fn shannon_entropy(value: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in value.bytes() {
        counts[usize::from(b)] += 1;
    }
    let len = value.len() as f64;
    counts
        .iter()
        .filter(|&&n| n > 0)
        .map(|&n| {
            let p = f64::from(n) / len;
            -p * p.log2()
        })
        .sum()
}

/// `.env` and `.env.<anything>`, except templates meant to be committed.
fn is_env_file(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
    if name == ".env" {
        return true;
    }
    let Some(rest) = name.strip_prefix(".env.") else {
        return false;
    };
    let last = rest.rsplit('.').next().unwrap_or(rest);
    !rest.is_empty() && !matches!(last, "example" | "sample" | "template" | "dist")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    const UPPER: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

    /// A deterministic pseudo-random string: fake secrets must look random
    /// to pass the entropy test, and must be built at run time so that this
    /// file never holds one.
    fn fake(alphabet: &str, len: usize, seed: u64) -> String {
        let chars: Vec<char> = alphabet.chars().collect();
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..len)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                chars[usize::try_from(x % chars.len() as u64).expect("index fits")]
            })
            .collect()
    }

    fn private_key_header() -> String {
        format!("-----{} RSA PRIVATE KEY-----", "BEGIN")
    }
    fn private_key_footer() -> String {
        format!("-----{} RSA PRIVATE KEY-----", "END")
    }
    fn aws_key_id() -> String {
        format!("AKIA{}", fake(UPPER, 16, 1))
    }
    fn aws_secret() -> String {
        fake(&format!("{ALNUM}/+"), 40, 2)
    }
    fn github_token() -> String {
        format!("ghp_{}", fake(ALNUM, 36, 3))
    }
    fn github_pat() -> String {
        format!("github_{}_{}", "pat", fake(ALNUM, 82, 4))
    }
    fn gitlab_token() -> String {
        format!("glpat-{}", fake(ALNUM, 20, 5))
    }
    fn slack_token() -> String {
        format!("xoxb-{}-{}", fake("0123456789", 12, 6), fake(ALNUM, 24, 7))
    }
    fn slack_webhook() -> String {
        format!(
            "https://hooks.{}.com/services/T{}/B{}/{}",
            "slack",
            fake(UPPER, 10, 8),
            fake(UPPER, 10, 9),
            fake(ALNUM, 24, 10)
        )
    }
    fn google_key() -> String {
        format!("AIza{}", fake(&format!("{ALNUM}_-"), 35, 11))
    }
    fn jwt() -> String {
        let b64 = format!("{ALNUM}_-");
        format!(
            "eyJ{}.eyJ{}.{}",
            fake(&b64, 30, 12),
            fake(&b64, 40, 13),
            fake(&b64, 43, 14)
        )
    }
    fn env_value() -> String {
        fake(ALNUM, 32, 15)
    }

    fn line_at(path: &str, line: u32, text: &str) -> AddedLine {
        AddedLine {
            path: path.to_owned(),
            line,
            text: text.to_owned(),
        }
    }

    fn kinds(text: &str) -> Vec<SecretKind> {
        scan(&[line_at("src/config.txt", 1, text)])
            .into_iter()
            .map(|f| f.kind)
            .collect()
    }

    fn assert_found(text: &str, kind: SecretKind) {
        assert_eq!(kinds(text), [kind], "in {text:?}");
    }

    fn assert_clean(text: &str) {
        assert_eq!(kinds(text), [], "in {text:?}");
        assert_eq!(mask(text), text, "mask changed {text:?}");
    }

    #[test]
    fn private_key_headers_are_found() {
        assert_found(&private_key_header(), SecretKind::PrivateKey);
        let pgp = format!("-----{} PGP PRIVATE KEY BLOCK-----", "BEGIN");
        assert_found(&pgp, SecretKind::PrivateKey);
        let bare = format!("key = \"-----{} PRIVATE KEY-----\"", "BEGIN");
        assert_found(&bare, SecretKind::PrivateKey);
    }

    #[test]
    fn public_keys_and_certificates_are_not_private_keys() {
        assert_clean(&format!("-----{} PUBLIC KEY-----", "BEGIN"));
        assert_clean(&format!("-----{} CERTIFICATE-----", "BEGIN"));
        assert_clean("// parse the private key block below");
    }

    #[test]
    fn aws_access_key_ids_are_found() {
        assert_found(
            &format!("aws_access_key_id = {}", aws_key_id()),
            SecretKind::AwsAccessKeyId,
        );
        assert_found(
            &format!("role: ASIA{}", fake(UPPER, 16, 20)),
            SecretKind::AwsAccessKeyId,
        );
    }

    #[test]
    fn aws_id_look_alikes_are_not_found() {
        assert_clean(&format!("see AKIA{} in the docs", "EXAMPLE"));
        assert_clean(&format!("id = AKIA{}EXAMPLE", "IOSFODNN7"));
        assert_clean(&format!("X{}", aws_key_id()));
        assert_clean(&format!("akia{}", fake("abcdef0123456789", 16, 21)));
    }

    #[test]
    fn aws_secret_access_keys_are_found() {
        for name in [
            "AWS_SECRET_ACCESS_KEY=",
            "aws_secret_access_key = ",
            "\"awsSecretKey\": \"",
            "aws.secret-key: ",
            "secret_for_aws => '",
        ] {
            assert_found(
                &format!("{name}{}", aws_secret()),
                SecretKind::AwsSecretAccessKey,
            );
        }
    }

    #[test]
    fn aws_secret_look_alikes_are_not_found() {
        // A commit id under a name that is not about an AWS secret.
        let sha = fake("0123456789abcdef", 40, 22);
        assert_clean(&format!("aws_deploy_commit = \"{sha}\""));
        assert_clean("aws_secret_access_key = ${AWS_SECRET_ACCESS_KEY}");
        assert_clean("aws_secret_access_key = os.environ[\"AWS_SECRET_ACCESS_KEY\"]");
        let docs = format!("wJalrXUtnFEMI/K7MDENG/bPxRfiCY{}KEY", "EXAMPLE");
        assert_clean(&format!("aws_secret_access_key = {docs}"));
    }

    #[test]
    fn github_tokens_are_found() {
        assert_found(
            &format!("export GH_TOKEN={}", github_token()),
            SecretKind::GithubToken,
        );
        assert_found(
            &format!("curl -H 'Authorization: token {}'", github_pat()),
            SecretKind::GithubToken,
        );
        assert_found(
            &format!("x gho_{} y", fake(ALNUM, 40, 23)),
            SecretKind::GithubToken,
        );
    }

    #[test]
    fn github_look_alikes_are_not_found() {
        assert_clean(&format!("ghp_{}", fake(ALNUM, 20, 24)));
        assert_clean(&format!("commit {}", fake("0123456789abcdef", 40, 25)));
        assert_clean("github_pat_ is the prefix of fine-grained tokens");
        assert_clean(&format!("ghx_{}", fake(ALNUM, 36, 26)));
    }

    #[test]
    fn gitlab_tokens_are_found() {
        assert_found(
            &format!("  private-token: {}", gitlab_token()),
            SecretKind::GitlabToken,
        );
    }

    #[test]
    fn gitlab_look_alikes_are_not_found() {
        assert_clean("glpat-short123");
        assert_clean("use a glpat- token with api scope");
    }

    #[test]
    fn slack_tokens_and_webhooks_are_found() {
        assert_found(
            &format!("client = WebClient({})", slack_token()),
            SecretKind::SlackToken,
        );
        assert_found(
            &format!("url: {}", slack_webhook()),
            SecretKind::SlackWebhook,
        );
    }

    #[test]
    fn slack_look_alikes_are_not_found() {
        assert_clean("xoxb-123");
        assert_clean(&format!("xoxz-{}", fake(ALNUM, 20, 27)));
        assert_clean("post to https://hooks.slack.com/services/ with your URL");
        assert_clean("docs: https://api.slack.com/messaging/webhooks");
    }

    #[test]
    fn google_api_keys_are_found() {
        assert_found(
            &format!("const MAPS = \"{}\";", google_key()),
            SecretKind::GoogleApiKey,
        );
    }

    #[test]
    fn google_look_alikes_are_not_found() {
        assert_clean(&format!("AIza{}", fake(ALNUM, 20, 28)));
        assert_clean("AIzawesome prose is not a key");
    }

    #[test]
    fn jwts_are_found() {
        assert_found(&format!("Authorization: Bearer {}", jwt()), SecretKind::Jwt);
    }

    #[test]
    fn base64_json_that_is_not_a_jwt_is_not_found() {
        // base64 of `{"alg":"HS256"}`: JSON, but one part, not three.
        assert_clean("data = \"eyJhbGciOiJIUzI1NiJ9\"");
        assert_clean(&format!(
            "eyJ{}.eyJ{}",
            fake(ALNUM, 20, 29),
            fake(ALNUM, 20, 30)
        ));
    }

    #[test]
    fn secret_assignments_are_found_in_many_formats() {
        let v = env_value();
        for text in [
            format!("API_TOKEN={v}"),
            format!("export DB_PASSWORD=\"{v}\""),
            format!("  password: {v}"),
            format!("  - password: '{v}'"),
            format!("    \"api_key\": \"{v}\","),
            format!("client_secret = \"{v}\""),
            format!("const apiKey = '{v}';"),
            format!("ENV AUTH_HEADER_VALUE {v}")
                .replace(" AUTH_HEADER_VALUE ", " AUTH_HEADER_VALUE="),
            format!("Authorization: {v}"),
            format!("'credentials' => '{v}',"),
            format!("token := \"{v}\""),
            // Lower-case hex is a common key format and not a word.
            format!("api_key: {}", fake("0123456789abcdef", 32, 16)),
        ] {
            assert_found(&text, SecretKind::EnvAssignment);
        }
    }

    #[test]
    fn harmless_assignments_are_not_found() {
        let uuid = format!(
            "{}-{}-{}-{}-{}",
            fake("0123456789abcdef", 8, 31),
            fake("0123456789abcdef", 4, 32),
            fake("0123456789abcdef", 4, 33),
            fake("0123456789abcdef", 4, 34),
            fake("0123456789abcdef", 12, 35)
        );
        for text in [
            "password = \"changeme\"".to_owned(),
            "token: ${GITHUB_TOKEN}".to_owned(),
            "token: ${{ secrets.GITHUB_TOKEN }}".to_owned(),
            "const API_KEY_NAME = \"x-api-key\"".to_owned(),
            "API_KEY_HEADER=authorization-header-name".to_owned(),
            "API_TOKEN=process.env.API_TOKEN".to_owned(),
            "secret_key = settings.SECRET_KEY".to_owned(),
            "let token = std::env::var(\"API_TOKEN\")?;".to_owned(),
            "token = get_token_from_keyring(user)".to_owned(),
            "    api_key: Option<String>,".to_owned(),
            "PASSWORD=<your-password-here>".to_owned(),
            "api_key = \"your-api-key-goes-here\"".to_owned(),
            "api_key = \"xxxxxxxxxxxxxxxxxxxxxxxx\"".to_owned(),
            "SECRET=aaaaaaaaaaaaaaaaaaaa".to_owned(),
            "TOKEN=abababababababababab".to_owned(),
            "AUTH_URL=https://auth.myapp.io/oauth/callback".to_owned(),
            "SSH_PRIVATE_KEY_PATH=/Users/alice/.ssh/id_ed25519".to_owned(),
            "author = \"jane.doe@users.noreply.github.com\"".to_owned(),
            format!("request_id = \"{uuid}\""),
            format!("commit: {}", fake("0123456789abcdef", 40, 36)),
            format!("API_TOKEN=[MASKED]{}", ""),
            "password: hunter2".to_owned(),
            // Code and names that source files assign to secret-sounding
            // names all the time.
            "    auth_header = 'Proxy-Authorization'".to_owned(),
            "                token = Name.Function".to_owned(),
            "        paren_token: parenthesized!(content in input),".to_owned(),
            "        struct_token: Token![struct],".to_owned(),
            "        private_key: CERTIFICATE_PRIVATE_KEY_TYPES,".to_owned(),
            "    let tokens = quote_spanned! {span=>".to_owned(),
            "    let mut tokens: Vec<AnsiString<'_>> = Vec::new();".to_owned(),
            "    token_number = self.tokens_taken+len(self.tokens)".to_owned(),
            "    let current_tokens = &self.current_tokens;".to_owned(),
            "            SecretKind::GithubToken => \"GitHub token\",".to_owned(),
            "OID_CLIENT_AUTH = ExtendedKeyUsageOID.CLIENT_AUTH".to_owned(),
            "echo the token is {} chars long".to_owned(),
        ] {
            assert_clean(&text);
        }
    }

    #[test]
    fn env_files_are_flagged_once_templates_are_not() {
        let v = env_value();
        let lines = [
            line_at(".env", 1, "DEBUG=1"),
            line_at(".env", 2, &format!("API_TOKEN={v}")),
            line_at(".env", 3, "PORT=8080"),
            line_at("deploy/.env.production", 1, "HOST=example.org"),
            line_at(".env.example", 1, "API_TOKEN=<your token>"),
            line_at("app/.env.sample", 1, "X=1"),
            line_at(".env.template", 1, "X=1"),
            line_at(".env.dist", 1, "X=1"),
            line_at(".env.local.example", 1, "X=1"),
            line_at(".envrc", 1, "use flake"),
            line_at("docs/env.md", 1, "X=1"),
        ];
        let found: Vec<(&str, SecretKind)> = scan(&lines)
            .iter()
            .map(|f| (f.path.as_str(), f.kind))
            .collect::<Vec<_>>()
            .into_iter()
            .map(|(p, k)| {
                (
                    lines
                        .iter()
                        .find(|l| l.path == p)
                        .expect("known")
                        .path
                        .as_str(),
                    k,
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                (".env", SecretKind::EnvFile),
                (".env", SecretKind::EnvAssignment),
                ("deploy/.env.production", SecretKind::EnvFile),
            ]
        );
        let env_file = &scan(&lines)[0];
        assert_eq!((env_file.line, env_file.column), (0, 0));
        assert!(env_file.masked_line.is_empty());
        assert_eq!(env_file.fingerprint.len(), 12);
    }

    #[test]
    fn a_span_matched_by_several_patterns_is_reported_once_as_the_most_specific() {
        let token = github_token();
        let found = scan(&[line_at("ci.env", 4, &format!("GITHUB_TOKEN={token}"))]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, SecretKind::GithubToken);
        assert_eq!(found[0].masked_line, "GITHUB_TOKEN=ghp_[MASKED]");

        let secret = aws_secret();
        let found = scan(&[line_at("f", 1, &format!("AWS_SECRET_ACCESS_KEY={secret}"))]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].kind, SecretKind::AwsSecretAccessKey);
    }

    #[test]
    fn findings_point_at_the_value_and_carry_a_masked_line() {
        let v = env_value();
        let token = github_token();
        let text = format!("export API_TOKEN=\"{v}\" # and {token}");
        let found = scan(&[line_at("run.sh", 12, &text)]);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].column, 19);
        assert_eq!(&text[18..18 + v.len()], v);
        assert_eq!(
            found[1].column as usize,
            text.find(&token).expect("present") + 1
        );
        let masked = "export API_TOKEN=\"[MASKED]\" # and ghp_[MASKED]";
        assert!(
            found
                .iter()
                .all(|f| f.masked_line == masked && f.line == 12)
        );
        assert_eq!(
            found[0].fingerprint,
            blake3::hash(v.as_bytes()).to_hex()[..12]
        );
        assert_ne!(found[0].fingerprint, found[1].fingerprint);
    }

    #[test]
    fn masked_lines_are_cut_to_the_limit() {
        let text = format!("API_TOKEN={} {}", env_value(), "word ".repeat(100));
        let found = scan(&[line_at("f", 1, &text)]);
        assert_eq!(found[0].masked_line.chars().count(), MAX_LINE_CHARS);
        assert!(found[0].masked_line.starts_with("API_TOKEN=[MASKED] word"));
    }

    #[test]
    fn mask_keeps_only_the_public_prefix_of_each_kind() {
        let v = env_value();
        let s = aws_secret();
        let cases = [
            (aws_key_id(), "AKIA[MASKED]"),
            (github_token(), "ghp_[MASKED]"),
            (github_pat(), "github_pat_[MASKED]"),
            (gitlab_token(), "glpat-[MASKED]"),
            (slack_token(), "xoxb-[MASKED]"),
            (slack_webhook(), "https://hooks.slack.com/services/[MASKED]"),
            (google_key(), "AIza[MASKED]"),
            (jwt(), "eyJ[MASKED]"),
            (format!("API_TOKEN={v}"), "API_TOKEN=[MASKED]"),
            (
                format!("aws_secret_access_key: \"{s}\""),
                "aws_secret_access_key: \"[MASKED]\"",
            ),
        ];
        for (text, want) in cases {
            let text = format!("before\n{text}\nafter");
            let masked = mask(&text);
            assert_eq!(masked, format!("before\n{want}\nafter"));
        }
    }

    #[test]
    fn mask_removes_every_secret_body() {
        let v = env_value();
        let s = aws_secret();
        let bodies = [
            (aws_key_id(), 4),
            (github_token(), 4),
            (github_pat(), 11),
            (gitlab_token(), 6),
            (slack_token(), 5),
            (slack_webhook(), 33),
            (google_key(), 4),
            (jwt(), 3),
        ];
        let mut text = format!("API_TOKEN={v}\naws_secret_access_key={s}\n");
        for (secret, _) in &bodies {
            text.push_str(&format!("log: {secret} done\n"));
        }
        let masked = mask(&text);
        assert!(!masked.contains(&v));
        assert!(!masked.contains(&s));
        for (secret, prefix) in &bodies {
            let body = &secret[*prefix..];
            assert!(!masked.contains(body), "{body} survived in {masked}");
            // Not even a 5-character piece of it is left.
            for i in 0..body.len().saturating_sub(4) {
                assert!(!masked.contains(&body[i..i + 5]), "{body} leaked");
            }
        }
    }

    #[test]
    fn mask_removes_private_key_bodies() {
        let body: Vec<String> = (0..5)
            .map(|i| fake(&format!("{ALNUM}+/"), 64, 40 + i))
            .collect();
        let block = format!(
            "{}\n{}\n{}\n",
            private_key_header(),
            body.join("\n"),
            private_key_footer()
        );
        let text = format!("config loaded\n{block}next step\n");
        let masked = mask(&text);
        assert_eq!(
            masked,
            format!(
                "config loaded\n{}\n[MASKED]\n{}\nnext step\n",
                private_key_header(),
                private_key_footer()
            )
        );

        // A key in a JSON string, as in a cloud service account file.
        let json = format!(
            "  \"private_key\": \"{}\\n{}\\n{}\\n\",",
            private_key_header(),
            body.join("\\n"),
            private_key_footer()
        );
        assert_eq!(
            mask(&json),
            format!(
                "  \"private_key\": \"{}\\n[MASKED]\\n{}\\n\",",
                private_key_header(),
                private_key_footer()
            )
        );

        // A log cut short inside the key: everything after the header goes.
        let cut = format!("{}\n{}\n{}", private_key_header(), body[0], body[1]);
        assert_eq!(mask(&cut), format!("{}\n[MASKED]", private_key_header()));
    }

    #[test]
    fn private_key_body_lines_belong_to_the_header_finding() {
        let body: Vec<String> = (0..3)
            .map(|i| fake(&format!("{ALNUM}+/"), 64, 50 + i))
            .collect();
        let mut lines = vec![line_at("id_rsa", 1, &private_key_header())];
        for (i, b) in body.iter().enumerate() {
            lines.push(line_at("id_rsa", 2 + i as u32, b));
        }
        lines.push(line_at("id_rsa", 5, &private_key_footer()));
        lines.push(line_at("id_rsa", 6, &format!("API_TOKEN={}", env_value())));
        let found = scan(&lines);
        let kinds: Vec<_> = found.iter().map(|f| (f.line, f.kind)).collect();
        assert_eq!(
            kinds,
            [(1, SecretKind::PrivateKey), (6, SecretKind::EnvAssignment)]
        );
        assert_eq!(found[0].masked_line, private_key_header());
        assert_eq!(found[0].column, 1);

        // The fingerprint is the body's: another key's header alone differs.
        let other = scan(&[line_at("k", 1, &private_key_header())]);
        assert_ne!(found[0].fingerprint, other[0].fingerprint);
    }

    #[test]
    fn code_after_a_mentioned_key_header_is_still_scanned() {
        let header = private_key_header();
        let lines = [
            line_at("pem.rs", 10, &format!("if s.starts_with(\"{header}\") {{")),
            line_at(
                "pem.rs",
                11,
                &format!("    let t = \"{}\";", github_token()),
            ),
        ];
        let kinds: Vec<_> = scan(&lines).iter().map(|f| f.kind).collect();
        assert_eq!(kinds, [SecretKind::PrivateKey, SecretKind::GithubToken]);
    }

    #[test]
    fn mask_is_idempotent() {
        let texts = [
            format!("GITHUB_TOKEN={}", github_token()),
            format!("API_TOKEN=\"{}\" {}", env_value(), jwt()),
            format!("aws_secret_access_key={}", aws_secret()),
            format!(
                "{}\n{}\n{}",
                private_key_header(),
                fake(ALNUM, 64, 60),
                private_key_footer()
            ),
            format!("{}\n{}", private_key_header(), fake(ALNUM, 64, 61)),
            format!("SLACK_WEBHOOK_URL={}", slack_webhook()),
            format!("password: {}{}", google_key(), aws_key_id()),
            format!("x {} {} {}", gitlab_token(), slack_token(), github_pat()),
        ];
        for text in texts {
            let once = mask(&text);
            assert_ne!(once, text, "nothing masked in {text:?}");
            assert_eq!(mask(&once), once, "masking {once:?} again changed it");
        }
    }

    #[test]
    fn text_without_secrets_is_unchanged() {
        let text = "running 12 tests\nerror[E0308]: mismatched types\n  --> src/main.rs:4:5\n\
                    commit 3f2a9c1 by author=ci token count: 4096\n\u{00e9}t\u{00e9} \u{1F600}\n";
        assert_eq!(mask(text), text);
        assert_eq!(mask(""), "");
    }

    #[test]
    fn kinds_describe_themselves_and_serialise_in_snake_case() {
        assert_eq!(SecretKind::AwsAccessKeyId.describe(), "AWS access key id");
        let json = serde_json::to_string(&SecretKind::AwsSecretAccessKey).expect("serialise");
        assert_eq!(json, "\"aws_secret_access_key\"");
        let back: SecretKind = serde_json::from_str("\"env_file\"").expect("deserialise");
        assert_eq!(back, SecretKind::EnvFile);
    }

    #[test]
    fn this_file_holds_no_secret() {
        let source = include_str!("secrets.rs");
        let lines: Vec<AddedLine> = source
            .lines()
            .enumerate()
            .map(|(i, t)| line_at("src/gate/secrets.rs", i as u32 + 1, t))
            .collect();
        assert_eq!(scan(&lines), []);
    }
}
