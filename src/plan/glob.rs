//! Owned-glob semantics: compiling globs, owning paths with exclusions
//! ([`Ownership`]), and deciding whether two subtasks can own one path.
//!
//! Globs are compiled by globset with `literal_separator`: `*` and `?`
//! never match `/`, `**` as a whole component matches any number of
//! components (a trailing `**` at least one), `{a,b}` alternates. That is
//! the gitignore-like reading users expect from `src/**/*.rs`. A negated
//! class (`[!a]`) never matches `/` either: globset's own class would, so
//! [`compile`] adds `/` to every negated class before globset sees it.
//!
//! An entry of `owned_globs` starting with `!` is an *exclusion*: a path is
//! owned when some plain glob matches it and no exclusion does, whatever
//! the order of the entries. [`Ownership`] is the one matcher of that rule;
//! the analysis, the scope gate and both hooks use it, so they cannot
//! disagree.
//!
//! [`relate`] and [`relate_owned`] decide whether some path matches two
//! globs (and none of a list of exclusions), with a witness path when one
//! does. They are exact: the globs become automata over path bytes
//! ([`super::automaton`]) and a search of their product either finds a
//! path or proves there is none. Every witness is checked against the real
//! globset matchers before it is believed; if globset disagrees, or the
//! search is too large, the answer is [`Relation::Unknown`] rather than a
//! guess. [`relate_explicit`], for pinch points, keeps a component-wise
//! search (below) because it asks a different question: does one glob
//! *name* the other's files rather than cover them with a wildcard?

use std::borrow::Cow;
use std::collections::{HashSet, VecDeque};

use globset::{Glob, GlobBuilder, GlobMatcher, GlobSet, GlobSetBuilder};

use super::automaton::{self, ClassSpan, Nfa, Search};

/// Most alternatives one glob may expand to before the index and the
/// explicit-naming search give up on expanding it.
pub const MAX_EXPANSIONS: usize = 256;

/// Why a glob cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GlobError {
    /// A `{` without its `}`.
    #[error("has an unclosed '{{'; close the group with '}}', or write a literal brace as '[{{]'")]
    UnclosedBrace,
    /// Brace groups multiply past [`MAX_EXPANSIONS`].
    #[error("expands to more than {MAX_EXPANSIONS} alternatives; split it into several globs")]
    TooManyAlternatives,
    /// globset refuses it.
    #[error("does not compile: {0}")]
    Syntax(String),
    /// `!` with nothing after it.
    #[error(
        "is an exclusion of nothing; write the glob to exclude after the '!' (e.g. \"!src/gen/**\")"
    )]
    EmptyExclusion,
    /// `!!…`: exclusions do not stack.
    #[error(
        "starts with '!!'; an exclusion is one '!' before a glob (to own a file whose name starts with '!', write '\\!')"
    )]
    DoubleExclusion,
}

/// Why a set of owned globs cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OwnershipError {
    /// One entry is not a usable glob.
    #[error("owned glob {glob:?} {reason}")]
    Glob { glob: String, reason: GlobError },
    /// Only exclusions: nothing is owned.
    #[error(
        "owned_globs has only exclusions ('!…'), so it owns nothing; add the globs of the files it owns, then exclude from them"
    )]
    NoInclusion,
}

/// Splits an `owned_globs` entry into (is an exclusion, the glob).
pub fn split_exclusion(entry: &str) -> (bool, &str) {
    match entry.strip_prefix('!') {
        Some(rest) => (true, rest),
        None => (false, entry),
    }
}

/// The glob text globset is given: every negated class also refuses `/`
/// (`[!a]` → `[!a/]`), so that no class matches across components unless
/// it names `/` itself. Everything else is left as written.
pub fn normalise(glob: &str) -> Cow<'_, str> {
    if !glob.contains("[!") && !glob.contains("[^") {
        return Cow::Borrowed(glob);
    }
    let chars: Vec<char> = glob.chars().collect();
    let mut out = String::with_capacity(glob.len() + 4);
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                out.push('\\');
                if let Some(c) = chars.get(i + 1) {
                    out.push(*c);
                }
                i += 2;
            }
            '[' => match automaton::class_span(&chars[i + 1..]) {
                Some(ClassSpan {
                    negated: true,
                    ranges,
                    len,
                }) => {
                    out.push('[');
                    out.push(chars[i + 1]);
                    let emit = |out: &mut String, (lo, hi): (char, char)| {
                        out.push(lo);
                        if lo != hi {
                            out.push('-');
                            out.push(hi);
                        }
                    };
                    // The first item keeps its place (a leading `]` or `-`
                    // is literal only there) and a trailing `-` stays last.
                    let trailing_dash = ranges.len() > 1 && ranges.last() == Some(&('-', '-'));
                    let middle_end = ranges.len() - usize::from(trailing_dash);
                    if let Some(first) = ranges.first() {
                        emit(&mut out, *first);
                    }
                    out.push('/');
                    for r in ranges.iter().take(middle_end).skip(1) {
                        emit(&mut out, *r);
                    }
                    if trailing_dash {
                        out.push('-');
                    }
                    out.push(']');
                    i += 1 + len;
                }
                Some(ClassSpan { len, .. }) => {
                    out.extend(&chars[i..i + 1 + len]);
                    i += 1 + len;
                }
                None => {
                    out.extend(&chars[i..]);
                    break;
                }
            },
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Cow::Owned(out)
}

/// Compiles `glob` with the semantics described in the module docs.
pub fn compile(glob: &str) -> Result<Glob, globset::Error> {
    GlobBuilder::new(&normalise(glob))
        .literal_separator(true)
        .backslash_escape(true)
        .empty_alternates(true)
        .build()
}

/// A matcher for `glob`, which must already have been validated.
pub fn matcher(glob: &str) -> GlobMatcher {
    compile(glob)
        .expect("globs are validated when the plan is parsed")
        .compile_matcher()
}

/// Checks one glob (not an `owned_globs` entry: no `!`) for use.
pub fn check(glob: &str) -> Result<(), GlobError> {
    compile(glob)
        .map(|_| ())
        .map_err(|e| GlobError::Syntax(e.kind().to_string()))
}

/// The files a subtask owns: its plain globs minus its exclusions.
///
/// Order-independent: a path is owned when some plain glob matches it and
/// no exclusion (`!glob`) does. Every place that asks "may this subtask
/// change this path?" asks this type.
#[derive(Debug, Clone)]
pub struct Ownership {
    include: Vec<String>,
    exclude: Vec<String>,
    /// Built on first use: the analysis matches plain globs through its
    /// index and only asks about exclusions, for a thousand subtasks.
    include_set: std::sync::OnceLock<GlobSet>,
    exclude_set: GlobSet,
}

impl Ownership {
    /// Reads `owned_globs` entries; `!glob` entries are exclusions.
    pub fn new<S: AsRef<str>>(entries: &[S]) -> Result<Self, OwnershipError> {
        let mut include = Vec::new();
        let mut exclude = Vec::new();
        let mut exclude_set = GlobSetBuilder::new();
        for entry in entries {
            let entry = entry.as_ref();
            let fail = |reason| OwnershipError::Glob {
                glob: entry.to_owned(),
                reason,
            };
            let (excluded, glob) = split_exclusion(entry);
            if excluded && glob.is_empty() {
                return Err(fail(GlobError::EmptyExclusion));
            }
            if excluded && glob.starts_with('!') {
                return Err(fail(GlobError::DoubleExclusion));
            }
            let compiled =
                compile(glob).map_err(|e| fail(GlobError::Syntax(e.kind().to_string())))?;
            if excluded {
                exclude.push(glob.to_owned());
                exclude_set.add(compiled);
            } else {
                include.push(glob.to_owned());
            }
        }
        if include.is_empty() {
            return Err(OwnershipError::NoInclusion);
        }
        Ok(Self {
            include,
            exclude,
            include_set: std::sync::OnceLock::new(),
            exclude_set: exclude_set.build().expect("globs that compile build a set"),
        })
    }

    /// Whether `path` (relative to the repository root) is owned.
    pub fn is_owned(&self, path: &str) -> bool {
        let include = self.include_set.get_or_init(|| {
            let mut b = GlobSetBuilder::new();
            for g in &self.include {
                b.add(compile(g).expect("checked when the ownership was made"));
            }
            b.build().expect("globs that compile build a set")
        });
        include.is_match(path) && !self.is_excluded(path)
    }

    /// Whether an exclusion matches `path`.
    pub fn is_excluded(&self, path: &str) -> bool {
        !self.exclude.is_empty() && self.exclude_set.is_match(path)
    }

    /// The plain globs.
    pub fn includes(&self) -> &[String] {
        &self.include
    }

    /// The exclusions, without their `!`.
    pub fn excludes(&self) -> &[String] {
        &self.exclude
    }
}

/// Whether the component contains glob syntax.
fn is_pattern(component: &str) -> bool {
    component.contains(['*', '?', '[', '\\', '{'])
}

/// Expands `{a,b}` alternates into plain globs. A `,` or `}` inside a
/// class or after a backslash is a character, not syntax, as globset reads
/// it (`src/{[,]a,b}` is `src/[,]a` and `src/b`); nested groups expand from
/// the inside out.
pub fn expand_braces(glob: &str) -> Result<Vec<String>, GlobError> {
    let chars: Vec<char> = glob.chars().collect();
    let (out, end) = expand_seq(&chars, 0, false)?;
    debug_assert_eq!(end, chars.len());
    Ok(out)
}

/// Expands from `i` until the end (or, `in_group`, until the `,` or `}`
/// that ends this alternative); returns the alternatives and where it
/// stopped.
fn expand_seq(
    chars: &[char],
    mut i: usize,
    in_group: bool,
) -> Result<(Vec<String>, usize), GlobError> {
    let mut out = vec![String::new()];
    let push_all = |out: &mut Vec<String>, s: &str| {
        for o in out.iter_mut() {
            o.push_str(s);
        }
    };
    while i < chars.len() {
        match chars[i] {
            '\\' => {
                let mut s = String::from('\\');
                if let Some(c) = chars.get(i + 1) {
                    s.push(*c);
                }
                push_all(&mut out, &s);
                i += 2;
            }
            '[' => match automaton::class_span(&chars[i + 1..]) {
                Some(ClassSpan { len, .. }) => {
                    let s: String = chars[i..i + 1 + len].iter().collect();
                    push_all(&mut out, &s);
                    i += 1 + len;
                }
                None => {
                    push_all(&mut out, "[");
                    i += 1;
                }
            },
            '{' => {
                let mut alternatives: Vec<String> = Vec::new();
                let mut j = i + 1;
                loop {
                    let (alts, stop) = expand_seq(chars, j, true)?;
                    alternatives.extend(alts);
                    match chars.get(stop) {
                        Some(',') => j = stop + 1,
                        Some('}') => {
                            j = stop + 1;
                            break;
                        }
                        _ => return Err(GlobError::UnclosedBrace),
                    }
                    if alternatives.len() > MAX_EXPANSIONS {
                        return Err(GlobError::TooManyAlternatives);
                    }
                }
                if out.len() * alternatives.len() > MAX_EXPANSIONS {
                    return Err(GlobError::TooManyAlternatives);
                }
                out = out
                    .iter()
                    .flat_map(|o| alternatives.iter().map(move |a| format!("{o}{a}")))
                    .collect();
                i = j;
            }
            ',' | '}' if in_group => return Ok((out, i)),
            c => {
                push_all(&mut out, c.encode_utf8(&mut [0; 4]));
                i += 1;
            }
        }
    }
    if in_group {
        return Err(GlobError::UnclosedBrace);
    }
    Ok((out, i))
}

/// The directory a glob names literally: its leading literal components,
/// without the last one (which names files). `src/api/*.rs` → `src/api`,
/// `docs/**` → `docs`, `*.md` → `` (the root).
pub fn literal_dir(glob: &str) -> String {
    let components: Vec<&str> = glob.split('/').collect();
    let dir = &components[..components.len().saturating_sub(1)];
    dir.iter()
        .take_while(|c| !is_pattern(c))
        .copied()
        .collect::<Vec<_>>()
        .join("/")
}

/// The leading literal components of a glob (`src/api/**` → `src/api`).
pub fn literal_prefix(glob: &str) -> Vec<&str> {
    glob.split('/').take_while(|c| !is_pattern(c)).collect()
}

/// Finds, for a path, the globs that can match it, without trying every
/// glob: each glob is filed under its leading literal directories plus the
/// literal start of its next component (`tests/m0001_*.rs` under
/// `tests` + `m0001_`), and a path only looks up keys built from its own
/// components. globset's `GlobSet` falls back to one regex per glob for
/// globs like `tests/m0001_*.rs` (it can only require the extension), which
/// for a thousand such globs is a thousand regex runs per path.
pub struct GlobIndex {
    matchers: Vec<GlobMatcher>,
    /// Directory → literal start of the next component → globs.
    keys: std::collections::HashMap<String, std::collections::HashMap<String, Vec<usize>>>,
    /// Every directory prefix under which some key is filed, with `""`.
    dirs: HashSet<String>,
}

impl GlobIndex {
    /// Indexes validated globs; results are indexes into `globs`.
    pub fn new(globs: &[String]) -> Self {
        let mut keys: std::collections::HashMap<
            String,
            std::collections::HashMap<String, Vec<usize>>,
        > = std::collections::HashMap::new();
        let mut dirs: HashSet<String> = HashSet::from([String::new()]);
        for (i, g) in globs.iter().enumerate() {
            // Unexpandable globs are filed where every path looks.
            let variants = expand_braces(g).unwrap_or_else(|_| vec!["**".into()]);
            for v in variants {
                let (dir, next) = index_key(&v);
                let parts: Vec<&str> = dir.split('/').filter(|p| !p.is_empty()).collect();
                for n in 0..=parts.len() {
                    dirs.insert(parts[..n].join("/"));
                }
                let list = keys.entry(dir).or_default().entry(next).or_default();
                if !list.contains(&i) {
                    list.push(i);
                }
            }
        }
        Self {
            matchers: globs.iter().map(|g| matcher(g)).collect(),
            keys,
            dirs,
        }
    }

    /// Indexes of the globs matching `path`, ascending, into `out`.
    pub fn matches_into(&self, path: &str, out: &mut Vec<usize>) {
        out.clear();
        let comps: Vec<&str> = path.split('/').collect();
        let mut dir = String::new();
        for (k, comp) in comps.iter().enumerate() {
            if k > 0 {
                if !dir.is_empty() {
                    dir.push('/');
                }
                dir.push_str(comps[k - 1]);
            }
            if !self.dirs.contains(&dir) {
                break;
            }
            let Some(starts) = self.keys.get(&dir) else {
                continue;
            };
            for end in (0..=comp.len()).filter(|e| comp.is_char_boundary(*e)) {
                if let Some(list) = starts.get(&comp[..end]) {
                    for &g in list {
                        if !out.contains(&g) && self.matchers[g].is_match(path) {
                            out.push(g);
                        }
                    }
                }
            }
        }
        out.sort_unstable();
    }
}

/// Where a brace-free glob is filed: its leading literal directories, and
/// the literal start of the component after them (`""` for `**` or a
/// component starting with a wildcard).
pub fn index_key(glob: &str) -> (String, String) {
    let comps: Vec<&str> = glob.split('/').collect();
    let lit = comps.iter().take_while(|c| !is_pattern(c)).count();
    if lit == comps.len() {
        return (comps[..lit - 1].join("/"), comps[lit - 1].to_owned());
    }
    let c = Component::parse(comps[lit]);
    let start = if c.is_globstar() {
        String::new()
    } else {
        c.affixes().0
    };
    (comps[..lit].join("/"), start)
}

/// Pairs of globs (by index) that may match a common path: everything
/// [`relate`] could find an overlap for, found from the index keys instead
/// of trying all pairs. Two globs can only meet if one's key directory is
/// an ancestor of (or equal to) the other's and the shallower one's next
/// literal start is a prefix of the deeper one's component there.
pub fn candidate_pairs(globs: &[String]) -> Vec<(usize, usize)> {
    use std::collections::{BTreeSet, HashMap};
    let mut keyed: Vec<(usize, Vec<String>, String)> = Vec::new();
    for (i, g) in globs.iter().enumerate() {
        for v in expand_braces(g).unwrap_or_else(|_| vec!["**".into()]) {
            let (dir, start) = index_key(&v);
            let dir: Vec<String> = dir
                .split('/')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect();
            keyed.push((i, dir, start));
        }
    }
    let mut map: HashMap<String, HashMap<&str, Vec<usize>>> = HashMap::new();
    for (i, dir, start) in &keyed {
        map.entry(dir.join("/"))
            .or_default()
            .entry(start.as_str())
            .or_default()
            .push(*i);
    }
    let mut pairs = BTreeSet::new();
    let mut add = |a: usize, b: usize| {
        if a != b {
            pairs.insert((a.min(b), a.max(b)));
        }
    };
    for (i, dir, start) in &keyed {
        // Ancestor directories: their globs must accept our component there.
        for depth in 0..=dir.len() {
            let Some(starts) = map.get(&dir[..depth].join("/")) else {
                continue;
            };
            let probe = if depth < dir.len() {
                &dir[depth]
            } else {
                start
            };
            for end in (0..=probe.len()).filter(|e| probe.is_char_boundary(*e)) {
                if let Some(list) = starts.get(&probe[..end]) {
                    for &j in list {
                        add(*i, j);
                    }
                }
            }
        }
    }
    pairs.into_iter().collect()
}

/// What two globs have in common.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relation {
    /// No path matches both.
    Disjoint,
    /// `witness` matches both (checked with globset).
    Overlap { witness: String },
    /// Could not be decided; the reason says why.
    Unknown(String),
}

/// Decides whether some path matches both globs (see the module docs).
pub fn relate(a: &str, b: &str) -> Relation {
    relate_owned::<&str>(a, b, &[])
}

/// Decides whether some path matches both `a` and `b` and none of the
/// `excluded` globs: whether two subtasks, one owning `a` and the other
/// `b`, could both own a path, given the exclusions of both.
pub fn relate_owned<S: AsRef<str>>(a: &str, b: &str, excluded: &[S]) -> Relation {
    let mut budget = automaton::MAX_STATES;
    relate_within(a, b, excluded, &mut budget)
}

/// Like [`relate_owned`], drawing the search from a shared `budget` of
/// automaton states: once it is spent, pairs are [`Relation::Unknown`].
/// One hostile plan can then not keep `plan check` busy for long.
pub fn relate_within<S: AsRef<str>>(
    a: &str,
    b: &str,
    excluded: &[S],
    budget: &mut usize,
) -> Relation {
    // The component-wise pre-check reads `/` as a separator, which a class
    // could match; globs with classes go straight to the automata.
    if !a.contains('[')
        && !b.contains('[')
        && let (Ok(ea), Ok(eb)) = (expand_braces(a), expand_braces(b))
        && !ea.iter().any(|x| eb.iter().any(|y| may_meet(x, y)))
    {
        return Relation::Disjoint;
    }
    let norm = |g: &str| normalise(g).into_owned();
    let excluded: Vec<String> = excluded.iter().map(|e| norm(e.as_ref())).collect();
    let (Some(na), Some(nb), Some(ne)) = (
        Nfa::union(&[norm(a)]),
        Nfa::union(&[norm(b)]),
        Nfa::union(&excluded),
    ) else {
        return Relation::Unknown(format!(
            "{a:?} or {b:?} could not be read as globset reads it"
        ));
    };
    match automaton::intersect(&na, &nb, &ne, budget) {
        Search::Empty => Relation::Disjoint,
        Search::GaveUp(why) => Relation::Unknown(format!("{a:?} vs {b:?}: {why}")),
        Search::Found(witness) => {
            let excluded_by = excluded.iter().find(|e| matcher(e).is_match(&witness));
            if matcher(a).is_match(&witness)
                && matcher(b).is_match(&witness)
                && excluded_by.is_none()
            {
                Relation::Overlap { witness }
            } else {
                Relation::Unknown(format!(
                    "the witness {witness:?} for {a:?} and {b:?} is not confirmed by globset"
                ))
            }
        }
    }
}

/// Like [`relate`], but only counts an overlap where `a` names `b`'s files
/// explicitly rather than covering them with a wildcard: every component of
/// `b` other than `**` is matched by a component of `a` other than `**`,
/// and a literal component of `b` by a literal one. Used
/// for pinch points, so that `src/**` does not "own" a `migrations`
/// directory that does not exist while `db/migrations/*.sql` does.
pub fn relate_explicit(a: &str, b: &str) -> Relation {
    let (ea, eb) = match (expand_braces(a), expand_braces(b)) {
        (Ok(ea), Ok(eb)) => (ea, eb),
        (Err(e), _) => return Relation::Unknown(format!("{a:?} {e}")),
        (_, Err(e)) => return Relation::Unknown(format!("{b:?} {e}")),
    };
    let mut unknown = None;
    for x in &ea {
        for y in &eb {
            if !may_meet(x, y) {
                continue;
            }
            if let Some(witness) = align(x, y, true) {
                // Compiling matchers is the expensive part; only witnesses
                // need it.
                if matcher(a).is_match(&witness) && matcher(b).is_match(&witness) {
                    return Relation::Overlap { witness };
                }
                unknown = Some(format!(
                    "the witness {witness:?} for {a:?} and {b:?} does not match both globs"
                ));
            }
        }
    }
    match unknown {
        Some(reason) => Relation::Unknown(reason),
        None => Relation::Disjoint,
    }
}

/// A cheap necessary condition for two brace-free globs to meet: without
/// `**` they have as many components, and components at the same position
/// (before any `**`) have compatible literal prefixes and suffixes. Most
/// disjoint pairs in real plans (`tests/a_*.rs` vs `tests/b_*.rs`) stop here.
fn may_meet(a: &str, b: &str) -> bool {
    let ca: Vec<&str> = a.split('/').collect();
    let cb: Vec<&str> = b.split('/').collect();
    let star_a = ca.contains(&"**");
    let star_b = cb.contains(&"**");
    if !star_a && !star_b && ca.len() != cb.len() {
        return false;
    }
    for (x, y) in ca.iter().zip(&cb) {
        if *x == "**" || *y == "**" {
            break;
        }
        let (px, sx) = Component::parse(x).affixes();
        let (py, sy) = Component::parse(y).affixes();
        let compatible = |p: &str, q: &str| p.starts_with(q) || q.starts_with(p);
        let compatible_end = |p: &str, q: &str| p.ends_with(q) || q.ends_with(p);
        if !compatible(&px, &py) || !compatible_end(&sx, &sy) {
            return false;
        }
    }
    true
}

/// Components of a brace-free glob; a trailing `**` needs at least one
/// component, so it becomes `*` followed by `**`.
fn components(glob: &str) -> Vec<&str> {
    let mut c: Vec<&str> = glob.split('/').collect();
    if c.last() == Some(&"**") {
        c.pop();
        c.push("*");
        c.push("**");
    }
    c
}

/// Searches for a path matching both component sequences; returns it.
fn align(a: &str, b: &str, explicit: bool) -> Option<String> {
    let ca = components(a);
    let cb = components(b);
    let pa: Vec<Component> = ca.iter().map(|c| Component::parse(c)).collect();
    let pb: Vec<Component> = cb.iter().map(|c| Component::parse(c)).collect();
    // Breadth-first over (i, j); each step records how it got there.
    // Position → (previous position, component added on the way).
    type Step = ((usize, usize), Option<String>);
    let mut prev: std::collections::HashMap<(usize, usize), Step> =
        std::collections::HashMap::new();
    let mut queue = VecDeque::from([(0usize, 0usize)]);
    let mut seen = HashSet::from([(0usize, 0usize)]);
    let mut push = |from: (usize, usize),
                    to: (usize, usize),
                    part: Option<String>,
                    queue: &mut VecDeque<(usize, usize)>| {
        if seen.insert(to) {
            prev.insert(to, (from, part));
            queue.push_back(to);
        }
    };
    while let Some((i, j)) = queue.pop_front() {
        if i == pa.len() && j == pb.len() {
            let mut parts = Vec::new();
            let mut at = (i, j);
            while let Some((from, part)) = prev.get(&at) {
                if let Some(p) = part {
                    parts.push(p.clone());
                }
                at = *from;
            }
            parts.reverse();
            return Some(parts.join("/"));
        }
        let a_star = pa.get(i).is_some_and(Component::is_globstar);
        let b_star = pb.get(j).is_some_and(Component::is_globstar);
        if a_star {
            push((i, j), (i + 1, j), None, &mut queue);
            // Explicitly naming `b` means no wildcard of `a` may stand in
            // for one of `b`'s components.
            if let Some(c) = pb.get(j).filter(|c| !c.is_globstar())
                && !explicit
                && let Some(w) = c.sample()
            {
                push((i, j), (i, j + 1), Some(w), &mut queue);
            }
        }
        if b_star {
            push((i, j), (i, j + 1), None, &mut queue);
            if let Some(c) = pa.get(i).filter(|c| !c.is_globstar())
                && let Some(w) = c.sample()
            {
                push((i, j), (i + 1, j), Some(w), &mut queue);
            }
        }
        if let (Some(x), Some(y)) = (pa.get(i), pb.get(j))
            && !x.is_globstar()
            && !y.is_globstar()
        {
            if explicit && !x.names(y) {
                continue;
            }
            if let Some(w) = x.intersect(y) {
                push((i, j), (i + 1, j + 1), Some(w), &mut queue);
            }
        }
    }
    None
}

/// One token of a component pattern.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Lit(char),
    Any,
    Star,
    Class {
        ranges: Vec<(char, char)>,
        negated: bool,
    },
}

impl Token {
    /// A character this token accepts together with `other`, if any.
    fn common(&self, other: &Token) -> Option<char> {
        match (self, other) {
            (Token::Star, _) | (_, Token::Star) => None,
            (Token::Lit(a), t) | (t, Token::Lit(a)) => t.accepts(*a).then_some(*a),
            (Token::Any, t) | (t, Token::Any) => t.some_char(),
            (a, b) => candidate_chars(a, b)
                .into_iter()
                .find(|c| a.accepts(*c) && b.accepts(*c)),
        }
    }

    fn accepts(&self, c: char) -> bool {
        if c == '/' {
            return false;
        }
        match self {
            Token::Lit(x) => *x == c,
            Token::Any | Token::Star => true,
            Token::Class { ranges, negated } => {
                ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&c)) != *negated
            }
        }
    }

    fn some_char(&self) -> Option<char> {
        match self {
            Token::Lit(c) => Some(*c),
            Token::Any | Token::Star => Some('x'),
            Token::Class { .. } => ('!'..='~').chain(['é', 'ß']).find(|c| self.accepts(*c)),
        }
    }
}

/// Characters worth trying for two classes: every range end and its
/// neighbours (an intersection of ranges, if any, contains one of them),
/// plus printable ASCII for negated classes.
fn candidate_chars(a: &Token, b: &Token) -> Vec<char> {
    let mut out: Vec<char> = ('!'..='~').collect();
    for t in [a, b] {
        if let Token::Class { ranges, .. } = t {
            for (lo, hi) in ranges {
                for c in [*lo, *hi] {
                    out.push(c);
                    if let Some(n) = char::from_u32(c as u32 + 1) {
                        out.push(n);
                    }
                    if let Some(p) = (c as u32).checked_sub(1).and_then(char::from_u32) {
                        out.push(p);
                    }
                }
            }
        }
    }
    out
}

/// A component pattern as tokens, or `**`.
#[derive(Debug, Clone)]
struct Component {
    globstar: bool,
    tokens: Vec<Token>,
}

impl Component {
    fn parse(text: &str) -> Self {
        if text == "**" {
            return Self {
                globstar: true,
                tokens: Vec::new(),
            };
        }
        let mut tokens = Vec::new();
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\\' => tokens.push(Token::Lit(chars.next().unwrap_or('\\'))),
                '?' => tokens.push(Token::Any),
                '*' => {
                    if tokens.last() != Some(&Token::Star) {
                        tokens.push(Token::Star);
                    }
                }
                '[' => {
                    let negated = matches!(chars.peek(), Some('!') | Some('^'));
                    if negated {
                        chars.next();
                    }
                    let mut ranges = Vec::new();
                    let mut first = true;
                    while let Some(c) = chars.next() {
                        if c == ']' && !first {
                            break;
                        }
                        first = false;
                        if chars.peek() == Some(&'-') {
                            let mut look = chars.clone();
                            look.next();
                            if let Some(hi) = look.next().filter(|h| *h != ']') {
                                chars.next();
                                chars.next();
                                ranges.push((c, hi));
                                continue;
                            }
                        }
                        ranges.push((c, c));
                    }
                    tokens.push(Token::Class { ranges, negated });
                }
                c => tokens.push(Token::Lit(c)),
            }
        }
        Self {
            globstar: false,
            tokens,
        }
    }

    fn is_globstar(&self) -> bool {
        self.globstar
    }

    fn is_literal(&self) -> bool {
        !self.globstar && self.tokens.iter().all(|t| matches!(t, Token::Lit(_)))
    }

    /// The literal characters before the first and after the last wildcard.
    fn affixes(&self) -> (String, String) {
        let lit = |t: &Token| match t {
            Token::Lit(c) => Some(*c),
            _ => None,
        };
        let prefix: String = self.tokens.iter().map_while(lit).collect();
        let mut suffix: Vec<char> = self.tokens.iter().rev().map_while(lit).collect();
        suffix.reverse();
        (prefix, suffix.into_iter().collect())
    }

    /// Whether this component names `other`'s files explicitly: it is
    /// literal, or it keeps `other`'s literal prefix and suffix (`*.pb.go`
    /// and `api_*.pb.go` name `*.pb.go`; `*` does not). A sufficient test
    /// of "is a subset of" for the patterns pinch rules use.
    fn names(&self, other: &Component) -> bool {
        if self.is_literal() {
            return true;
        }
        if other.is_literal() {
            return false;
        }
        let (p, s) = self.affixes();
        let (op, os) = other.affixes();
        p.starts_with(&op) && s.ends_with(&os)
    }

    /// A non-empty component this pattern matches.
    fn sample(&self) -> Option<String> {
        self.intersect(&Component {
            globstar: false,
            tokens: vec![Token::Star],
        })
    }

    /// A non-empty string both patterns match: breadth-first search of the
    /// product automaton over (token index, token index, non-empty yet).
    fn intersect(&self, other: &Component) -> Option<String> {
        let (a, b) = (&self.tokens, &other.tokens);
        type State = (usize, usize, bool);
        let mut prev: std::collections::HashMap<State, (State, Option<char>)> =
            std::collections::HashMap::new();
        let start: State = (0, 0, false);
        let mut seen = HashSet::from([start]);
        let mut queue = VecDeque::from([start]);
        while let Some(s @ (i, j, nonempty)) = queue.pop_front() {
            if i == a.len() && j == b.len() && nonempty {
                let mut out = Vec::new();
                let mut at = s;
                while let Some((from, c)) = prev.get(&at) {
                    if let Some(c) = c {
                        out.push(*c);
                    }
                    at = *from;
                }
                out.reverse();
                return Some(out.into_iter().collect());
            }
            let mut moves: Vec<(State, Option<char>)> = Vec::new();
            let (ta, tb) = (a.get(i), b.get(j));
            // A star may match nothing.
            if ta == Some(&Token::Star) {
                moves.push(((i + 1, j, nonempty), None));
            }
            if tb == Some(&Token::Star) {
                moves.push(((i, j + 1, nonempty), None));
            }
            if let (Some(x), Some(y)) = (ta, tb) {
                let c = match (x, y) {
                    (Token::Star, Token::Star) => Some('x'),
                    (Token::Star, t) | (t, Token::Star) => t.some_char(),
                    (x, y) => x.common(y),
                };
                if let Some(c) = c {
                    let ni = if *x == Token::Star { i } else { i + 1 };
                    let nj = if *y == Token::Star { j } else { j + 1 };
                    moves.push(((ni, nj, true), Some(c)));
                }
            }
            for (next, c) in moves {
                if seen.insert(next) {
                    prev.insert(next, (s, c));
                    queue.push_back(next);
                }
            }
        }
        None
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn overlap(a: &str, b: &str) -> Option<String> {
        match relate(a, b) {
            Relation::Overlap { witness } => Some(witness),
            Relation::Disjoint => None,
            Relation::Unknown(r) => panic!("undecided {a} vs {b}: {r}"),
        }
    }

    #[test]
    fn decides_overlaps_with_a_witness_both_globs_match() {
        for (a, b) in [
            ("src/**", "src/api/*.rs"),
            ("src/**/*.rs", "src/api/**"),
            ("**/Cargo.toml", "crates/*/Cargo.toml"),
            ("a*", "*s"),
            ("*.rs", "main.*"),
            ("docs/{a,b}.md", "docs/b.*"),
            ("src/[a-m]*.rs", "src/[k-z]*.rs"),
            ("**/a/**", "**/b/**"),
            ("src/**/mod.rs", "src/mod.rs"),
            ("?", "[xyz]"),
        ] {
            let w = overlap(a, b).unwrap_or_else(|| panic!("{a} and {b} overlap"));
            assert!(matcher(a).is_match(&w) && matcher(b).is_match(&w), "{w}");
        }
    }

    #[test]
    fn decides_disjoint_globs() {
        for (a, b) in [
            ("src/api/**", "src/web/**"),
            ("*.rs", "*.ts"),
            ("a*", "b*"),
            ("src/*.rs", "src/sub/*.rs"),
            ("docs/**", "docs"),
            ("src/[a-f]*", "src/[g-z]*"),
            ("tests/**/*.py", "src/**"),
            ("x/*/y", "x/y"),
            ("{a,b}/**", "c/**"),
        ] {
            assert_eq!(overlap(a, b), None, "{a} vs {b}");
        }
    }

    #[test]
    fn explicit_relation_ignores_broad_wildcards() {
        let explicit = |a, b| matches!(relate_explicit(a, b), Relation::Overlap { .. });
        assert!(explicit("db/migrations/*.sql", "**/migrations/**"));
        assert!(explicit("Cargo.lock", "**/Cargo.lock"));
        assert!(!explicit("src/**", "**/migrations/**"));
        assert!(!explicit("**", "**/Cargo.lock"));
        assert!(!explicit("*.lock", "**/Cargo.lock"));
        assert!(!explicit("src/a/**", "**/*.pb.go"));
        assert!(explicit("api/*.pb.go", "**/*.pb.go"));
    }

    #[test]
    fn literal_dirs_and_prefixes() {
        assert_eq!(literal_dir("src/api/*.rs"), "src/api");
        assert_eq!(literal_dir("docs/**"), "docs");
        assert_eq!(literal_dir("*.md"), "");
        assert_eq!(literal_dir("src/*/x.rs"), "src");
        assert_eq!(literal_prefix("src/api/**"), ["src", "api"]);
    }

    #[test]
    fn the_index_finds_exactly_what_matchers_find() {
        let globs: Vec<String> = [
            "src/**",
            "src/api/*.rs",
            "tests/m01_*.rs",
            "tests/m02_*.rs",
            "**/Cargo.toml",
            "docs/{a,b}/**",
            "Cargo.lock",
            "*.md",
            "x/[ab]*/y",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let index = GlobIndex::new(&globs);
        let paths = [
            "src/api/x.rs",
            "src/main.rs",
            "tests/m01_a.rs",
            "tests/m02_b.rs",
            "tests/m03.rs",
            "crates/a/Cargo.toml",
            "Cargo.toml",
            "docs/a/i.md",
            "docs/c/i.md",
            "Cargo.lock",
            "README.md",
            "x/b1/y",
            "x/c1/y",
        ];
        let mut out = Vec::new();
        for p in paths {
            index.matches_into(p, &mut out);
            let expected: Vec<usize> = globs
                .iter()
                .enumerate()
                .filter(|(_, g)| matcher(g).is_match(p))
                .map(|(i, _)| i)
                .collect();
            assert_eq!(out, expected, "{p}");
        }
    }

    #[test]
    fn candidate_pairs_cover_every_overlap() {
        let globs: Vec<String> = [
            "src/**",
            "src/api/*.rs",
            "tests/m01_*.rs",
            "tests/m02_*.rs",
            "**/Cargo.toml",
            "crates/a/Cargo.toml",
            "docs/{a,b}/**",
            "docs/a/x.md",
            "tests/m0*",
            "web/*.ts",
            "web/*.css",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        let pairs = candidate_pairs(&globs);
        for i in 0..globs.len() {
            for j in i + 1..globs.len() {
                if matches!(relate(&globs[i], &globs[j]), Relation::Overlap { .. }) {
                    assert!(
                        pairs.contains(&(i, j)),
                        "{} vs {} missed",
                        globs[i],
                        globs[j]
                    );
                }
            }
        }
        assert!(
            !pairs.contains(&(2, 3)),
            "tests/m01_* and tests/m02_* are not candidates"
        );
    }

    #[test]
    fn brace_expansion_is_bounded() {
        assert_eq!(expand_braces("{a,b}/{c,d}").expect("ok").len(), 4);
        assert_eq!(
            expand_braces(&"{a,b,c,d}/".repeat(5)),
            Err(GlobError::TooManyAlternatives)
        );
        assert_eq!(expand_braces("[{]x").expect("ok"), ["[{]x"]);
        assert_eq!(expand_braces("a{b"), Err(GlobError::UnclosedBrace));
    }

    #[test]
    fn brace_expansion_respects_classes_escapes_and_nesting() {
        assert_eq!(
            expand_braces("src/{[,]a,b}").expect("ok"),
            ["src/[,]a", "src/b"]
        );
        assert_eq!(
            expand_braces("src/{[}]a,b}").expect("ok"),
            ["src/[}]a", "src/b"]
        );
        assert_eq!(
            expand_braces(r"src/{\,a,b}").expect("ok"),
            [r"src/\,a", "src/b"]
        );
        assert_eq!(expand_braces("{a,{b,c}}x").expect("ok"), ["ax", "bx", "cx"]);
        assert_eq!(expand_braces("{a,}x").expect("ok"), ["ax", "x"]);
        // Every expansion means what globset means by the whole.
        for g in ["src/{[,]a,b}", r"src/{\,a,b}", "{a,{b,c}}x", "{a,}x"] {
            let m = matcher(g);
            for v in expand_braces(g).expect("ok") {
                let path = v.replace(['[', ']', '\\'], "");
                assert!(m.is_match(&path), "{g}: {path}");
            }
        }
    }

    #[test]
    fn negated_classes_never_match_a_separator() {
        assert_eq!(normalise("a[!b]c"), "a[!b/]c");
        assert_eq!(normalise("a[!]b]c"), "a[!]/b]c");
        assert_eq!(normalise("a[!b-]c"), "a[!b/-]c");
        assert_eq!(normalise("a[!-b]c"), "a[!-/b]c");
        assert_eq!(normalise("a[^x-z]"), "a[^x-z/]");
        assert_eq!(normalise(r"\[!b]"), r"\[!b]");
        assert_eq!(normalise("[ab]"), "[ab]");
        let m = matcher("a[!b]c");
        assert!(m.is_match("axc"));
        assert!(!m.is_match("abc"));
        assert!(!m.is_match("a/c"));
        for (g, yes, no) in [
            ("a[!]b]c", "axc", "a]c"),
            ("a[!b-]c", "axc", "a-c"),
            ("a[!-b]c", "axc", "a-c"),
        ] {
            assert!(matcher(g).is_match(yes), "{g} {yes}");
            assert!(!matcher(g).is_match(no), "{g} {no}");
            assert!(!matcher(g).is_match("a/c"), "{g}");
        }
    }

    #[test]
    fn ownership_subtracts_exclusions_in_any_order() {
        let own = Ownership::new(&["crates/core/flags/**", "!crates/core/flags/complete/**"])
            .expect("valid");
        let reversed = Ownership::new(&["!crates/core/flags/complete/**", "crates/core/flags/**"])
            .expect("valid");
        for (path, owned) in [
            ("crates/core/flags/mod.rs", true),
            ("crates/core/flags/doc/x.md", true),
            ("crates/core/flags/complete/bash.rs", false),
            ("crates/core/flags/complete", true),
            ("crates/core/main.rs", false),
        ] {
            assert_eq!(own.is_owned(path), owned, "{path}");
            assert_eq!(reversed.is_owned(path), owned, "{path}");
        }
        assert_eq!(own.excludes(), ["crates/core/flags/complete/**"]);
        assert_eq!(
            Ownership::new(&["!a/**"]).err(),
            Some(OwnershipError::NoInclusion)
        );
        for (bad, reason) in [
            ("!", GlobError::EmptyExclusion),
            ("!!a", GlobError::DoubleExclusion),
        ] {
            assert_eq!(
                Ownership::new(&["a/**", bad]).err(),
                Some(OwnershipError::Glob {
                    glob: bad.into(),
                    reason
                })
            );
        }
        assert!(matches!(
            Ownership::new(&["a/**", "![z-a]"]),
            Err(OwnershipError::Glob {
                reason: GlobError::Syntax(_),
                ..
            })
        ));
        // An escaped '!' is a file name, not an exclusion.
        let bang = Ownership::new(&[r"\!notes.md"]).expect("valid");
        assert!(bang.is_owned("!notes.md"));
    }

    /// The table every owner of the rule is tested against (the scope
    /// gate, both hooks and the analysis read it too).
    pub(crate) fn ownership_cases() -> Vec<(Vec<String>, String, bool)> {
        let cases: Vec<serde_json::Value> =
            serde_json::from_str(include_str!("../../fixtures/data/ownership-cases.json"))
                .expect("the table is JSON");
        cases
            .iter()
            .map(|c| {
                let globs = c["globs"]
                    .as_array()
                    .expect("globs")
                    .iter()
                    .map(|g| g.as_str().expect("glob").to_owned())
                    .collect();
                let path = c["path"].as_str().expect("path").to_owned();
                (globs, path, c["owned"].as_bool().expect("owned"))
            })
            .collect()
    }

    #[test]
    fn ownership_follows_the_table() {
        for (globs, path, owned) in ownership_cases() {
            let o = Ownership::new(&globs).expect("valid");
            assert_eq!(o.is_owned(&path), owned, "{globs:?} {path}");
        }
    }

    #[test]
    fn exclusions_can_remove_an_overlap_exactly() {
        let ex = |e: &[&str], a, b| relate_owned(a, b, e);
        assert_eq!(
            ex(
                &["crates/core/flags/complete/**"],
                "crates/core/flags/**",
                "crates/core/flags/complete/**"
            ),
            Relation::Disjoint
        );
        // `**` under an exclusion: every tests folder at any depth.
        assert_eq!(
            ex(&["**/tests/**"], "**/*.rs", "crates/*/tests/**"),
            Relation::Disjoint
        );
        // Excluding part of the overlap leaves the rest.
        let Relation::Overlap { witness } = ex(&["src/api/**"], "src/**", "src/**/*.rs") else {
            panic!("src/**/*.rs outside src/api still overlaps");
        };
        assert!(!witness.starts_with("src/api/"), "{witness}");
        // An exclusion naming a file, not the directory, removes little.
        assert!(matches!(
            ex(&["src/api"], "src/**", "src/api/**"),
            Relation::Overlap { .. }
        ));
        // Exclusions from both sides count together.
        assert_eq!(
            ex(&["a/x/**", "a/y/**"], "a/{x,y}/**", "a/*/**"),
            Relation::Disjoint
        );
    }

    /// A tiny deterministic generator (xorshift), so the property test
    /// needs no dependency and fails the same way every time.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
            &items[(self.next() % items.len() as u64) as usize]
        }
    }

    fn random_glob(rng: &mut Rng) -> String {
        const PARTS: &[&str] = &[
            "a", "b", "ab", "*", "?", "[ab]", "[!a]", "a*", "*b", "**", "{a,b}", "{a,}", "a?",
            "[a-c]*", "{a,b*}", "c",
        ];
        let n = 1 + rng.next() % 4;
        (0..n)
            .map(|_| *rng.pick(PARTS))
            .collect::<Vec<_>>()
            .join("/")
    }

    fn all_paths() -> Vec<String> {
        let names = ["a", "b", "c", "ab", "ba", "aa", "bb", "x", "abc"];
        let mut out: Vec<String> = names.iter().map(|s| (*s).to_owned()).collect();
        let mut last = out.clone();
        for _ in 0..3 {
            let mut next = Vec::new();
            for p in &last {
                for n in &names[..6] {
                    next.push(format!("{p}/{n}"));
                }
            }
            out.extend(next.iter().cloned());
            last = next;
        }
        out
    }

    /// The pattern-level check against globset itself: whenever a generated
    /// path is owned by both sides, the check must not say "disjoint", and
    /// every witness it gives must be owned by both.
    #[test]
    fn pattern_level_overlap_agrees_with_globset_on_generated_paths() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let paths = all_paths();
        for case in 0..400 {
            let (a, b) = (random_glob(&mut rng), random_glob(&mut rng));
            let excluded: Vec<String> = if case % 2 == 0 {
                vec![random_glob(&mut rng)]
            } else {
                Vec::new()
            };
            let (ma, mb) = (matcher(&a), matcher(&b));
            let mex: Vec<GlobMatcher> = excluded.iter().map(|e| matcher(e)).collect();
            let owned_by_both =
                |p: &str| ma.is_match(p) && mb.is_match(p) && !mex.iter().any(|m| m.is_match(p));
            let example = paths.iter().find(|p| owned_by_both(p));
            match relate_owned(&a, &b, &excluded) {
                Relation::Disjoint => assert!(
                    example.is_none(),
                    "{a} vs {b} minus {excluded:?} said disjoint, but {example:?} is owned by both"
                ),
                Relation::Overlap { witness } => assert!(
                    owned_by_both(&witness),
                    "{a} vs {b} minus {excluded:?}: bad witness {witness}"
                ),
                Relation::Unknown(why) => panic!("{a} vs {b} minus {excluded:?} undecided: {why}"),
            }
        }
    }
}
