//! Globs as automata over path bytes: the exact answer to "can one path be
//! owned by two subtasks at once?", exclusions included.
//!
//! A glob is read the way globset reads it (this module ports its parser,
//! `**` rules and all) and turned into the regular language globset's regex
//! accepts: bytes, not characters, since globset matches in byte mode (`?`
//! is one byte, a class one byte). [`intersect`] then searches the product
//! of three automata built on the fly by subset construction: the union of
//! one side's globs, the other side's, and the union of every exclusion of
//! both (whose acceptance must be *avoided*). A fourth component keeps the
//! search to real repository paths: valid UTF-8 without NUL, no empty,
//! `.` or `..` component, no leading or trailing `/`.
//!
//! The search runs over byte classes (bytes no automaton tells apart share
//! one representative), breadth first, so the witness is a shortest such
//! path. It is exact: an empty search space proves there is no such path.
//! It gives up (`None` with a reason) only past [`MAX_STATES`] product
//! states, which real plans do not come near. Callers check every witness
//! against the real globset matchers before believing it.
//!
//! This module knows nothing of plans; `glob` wraps it.

use std::collections::{HashMap, VecDeque};

/// Most product states one search may visit before giving up.
pub const MAX_STATES: usize = 100_000;

/// One token of a parsed glob, as globset's parser makes them.
#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Lit(char),
    Any,
    ZeroOrMore,
    RecursivePrefix,
    RecursiveSuffix,
    RecursiveZeroOrMore,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
    Alternates(Vec<Vec<Tok>>),
}

/// A character class as globset parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassSpan {
    /// `[!…]` or `[^…]`.
    pub negated: bool,
    /// Its ranges in order (a single character is a range of one).
    pub ranges: Vec<(char, char)>,
    /// Characters it spans after the `[`, the closing `]` included.
    pub len: usize,
}

/// Parses a class body the way globset does (`rest` starts after the
/// `[`). `None` when globset would refuse it (unclosed, or a range whose
/// end is before its start). Inside a class a backslash is a character.
pub fn class_span(rest: &[char]) -> Option<ClassSpan> {
    let mut i = 0;
    let negated = matches!(rest.first(), Some('!') | Some('^'));
    if negated {
        i += 1;
    }
    let mut ranges: Vec<(char, char)> = Vec::new();
    let mut first = true;
    let mut in_range = false;
    loop {
        let c = *rest.get(i)?;
        i += 1;
        match c {
            ']' if !first => break,
            ']' => ranges.push((']', ']')),
            '-' if first => ranges.push(('-', '-')),
            '-' if in_range => {
                let r = ranges.last_mut()?;
                r.1 = '-';
                if r.1 < r.0 {
                    return None;
                }
                in_range = false;
            }
            '-' => in_range = true,
            c => {
                if in_range {
                    let r = ranges.last_mut()?;
                    r.1 = c;
                    if r.1 < r.0 {
                        return None;
                    }
                } else {
                    ranges.push((c, c));
                }
                in_range = false;
            }
        }
        first = false;
    }
    if in_range {
        ranges.push(('-', '-'));
    }
    Some(ClassSpan {
        negated,
        ranges,
        len: i,
    })
}

/// A port of globset 0.4's parser (`literal_separator`, `backslash_escape`,
/// `empty_alternates` on; unclosed classes are errors). `None` when globset
/// would refuse the glob.
struct Parser {
    chars: Vec<char>,
    pos: usize,
    prev: Option<char>,
    cur: Option<char>,
    stack: Vec<usize>,
    branches: Vec<Vec<Tok>>,
}

impl Parser {
    fn parse(glob: &str) -> Option<Vec<Tok>> {
        let mut p = Parser {
            chars: glob.chars().collect(),
            pos: 0,
            prev: None,
            cur: None,
            stack: Vec::new(),
            branches: vec![Vec::new()],
        };
        while let Some(c) = p.bump() {
            match c {
                '?' => p.push(Tok::Any)?,
                '*' => p.star()?,
                '[' => {
                    let span = class_span(&p.chars[p.pos..])?;
                    p.pos += span.len;
                    p.cur = Some(']');
                    p.push(Tok::Class {
                        negated: span.negated,
                        ranges: span.ranges,
                    })?;
                }
                '{' => {
                    p.stack.push(p.branches.len());
                    p.branches.push(Vec::new());
                }
                '}' => {
                    let start = p.stack.pop()?;
                    let alts = Tok::Alternates(p.branches.drain(start..).collect());
                    p.push(alts)?;
                }
                ',' if !p.stack.is_empty() => p.branches.push(Vec::new()),
                '\\' => {
                    let c = p.bump()?;
                    p.push(Tok::Lit(c))?;
                }
                c => p.push(Tok::Lit(c))?,
            }
        }
        if p.branches.len() != 1 {
            return None;
        }
        p.branches.pop()
    }

    fn bump(&mut self) -> Option<char> {
        self.prev = self.cur;
        self.cur = self.chars.get(self.pos).copied();
        if self.cur.is_some() {
            self.pos += 1;
        }
        self.cur
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn push(&mut self, t: Tok) -> Option<()> {
        self.branches.last_mut()?.push(t);
        Some(())
    }

    fn star(&mut self) -> Option<()> {
        let prev = self.prev;
        if self.peek() != Some('*') {
            return self.push(Tok::ZeroOrMore);
        }
        self.bump();
        let sep = |c: char| c == '/';
        if self.branches.last()?.is_empty() {
            if !self.peek().is_none_or(sep) {
                self.push(Tok::ZeroOrMore)?;
                return self.push(Tok::ZeroOrMore);
            }
            self.push(Tok::RecursivePrefix)?;
            self.bump();
            return Some(());
        }
        if !prev.is_some_and(sep)
            && (self.branches.len() <= 1 || (prev != Some(',') && prev != Some('{')))
        {
            self.push(Tok::ZeroOrMore)?;
            return self.push(Tok::ZeroOrMore);
        }
        let is_suffix = match self.peek() {
            None => {
                self.bump();
                true
            }
            Some(',') | Some('}') if self.branches.len() >= 2 => true,
            Some(c) if sep(c) => {
                self.bump();
                false
            }
            _ => {
                self.push(Tok::ZeroOrMore)?;
                return self.push(Tok::ZeroOrMore);
            }
        };
        let last = self.branches.last_mut()?.pop()?;
        let t = match last {
            Tok::RecursivePrefix => Tok::RecursivePrefix,
            Tok::RecursiveSuffix => Tok::RecursiveSuffix,
            _ if is_suffix => Tok::RecursiveSuffix,
            _ => Tok::RecursiveZeroOrMore,
        };
        self.push(t)
    }
}

/// A set of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Bytes([u64; 4]);

impl Bytes {
    const NONE: Bytes = Bytes([0; 4]);
    const ALL: Bytes = Bytes([u64::MAX; 4]);

    fn one(b: u8) -> Self {
        let mut s = Self::NONE;
        s.insert(b);
        s
    }

    fn all_but(b: u8) -> Self {
        let mut s = Self::ALL;
        s.0[usize::from(b / 64)] &= !(1u64 << (b % 64));
        s
    }

    fn insert(&mut self, b: u8) {
        self.0[usize::from(b / 64)] |= 1u64 << (b % 64);
    }

    fn contains(&self, b: u8) -> bool {
        self.0[usize::from(b / 64)] & (1u64 << (b % 64)) != 0
    }

    fn complement(self) -> Self {
        Bytes(self.0.map(|w| !w))
    }
}

/// A regular expression over bytes, as globset's regex reads.
#[derive(Debug, Clone)]
enum Re {
    Byte(Bytes),
    Seq(Vec<Re>),
    Alt(Vec<Re>),
    Star(Box<Re>),
}

fn utf8(c: char) -> Vec<u8> {
    let mut buf = [0u8; 4];
    c.encode_utf8(&mut buf).as_bytes().to_vec()
}

/// The bytes a class matches. globset writes a class's characters as
/// escaped UTF-8 bytes into a byte-mode regex class, so a multi-byte
/// character is several one-byte members and a range spans the last byte
/// of its start to the first byte of its end.
fn class_bytes(negated: bool, ranges: &[(char, char)]) -> Bytes {
    let mut set = Bytes::NONE;
    for &(lo, hi) in ranges {
        if lo == hi {
            for b in utf8(lo) {
                set.insert(b);
            }
            continue;
        }
        let (a, z) = (utf8(lo), utf8(hi));
        let (a_last, a_init) = a.split_last().expect("a character has a byte");
        let (z_first, z_rest) = z.split_first().expect("a character has a byte");
        for &b in a_init.iter().chain(z_rest) {
            set.insert(b);
        }
        for b in *a_last..=*z_first {
            set.insert(b);
        }
    }
    if negated { set.complement() } else { set }
}

fn not_slash() -> Bytes {
    Bytes::all_but(b'/')
}

/// `.` of a byte-mode regex: anything but a newline.
fn dot() -> Bytes {
    Bytes::all_but(b'\n')
}

fn to_re(tokens: &[Tok]) -> Re {
    // globset's special case: the glob `**` alone matches everything.
    if tokens == [Tok::RecursivePrefix] {
        return Re::Star(Box::new(Re::Byte(dot())));
    }
    seq(tokens)
}

fn seq(tokens: &[Tok]) -> Re {
    let slash = || Re::Byte(Bytes::one(b'/'));
    let any_dots = || Re::Star(Box::new(Re::Byte(dot())));
    Re::Seq(
        tokens
            .iter()
            .map(|t| match t {
                Tok::Lit(c) => Re::Seq(
                    utf8(*c)
                        .into_iter()
                        .map(|b| Re::Byte(Bytes::one(b)))
                        .collect(),
                ),
                Tok::Any => Re::Byte(not_slash()),
                Tok::ZeroOrMore => Re::Star(Box::new(Re::Byte(not_slash()))),
                Tok::RecursivePrefix => Re::Alt(vec![
                    Re::Seq(Vec::new()),
                    slash(),
                    Re::Seq(vec![any_dots(), slash()]),
                ]),
                Tok::RecursiveSuffix => Re::Seq(vec![slash(), any_dots()]),
                Tok::RecursiveZeroOrMore => {
                    Re::Alt(vec![slash(), Re::Seq(vec![slash(), any_dots(), slash()])])
                }
                Tok::Class { negated, ranges } => Re::Byte(class_bytes(*negated, ranges)),
                Tok::Alternates(branches) => Re::Alt(branches.iter().map(|b| seq(b)).collect()),
            })
            .collect(),
    )
}

/// A Thompson automaton: each state has epsilon moves and at most one byte
/// move.
#[derive(Debug, Default, Clone)]
pub struct Nfa {
    eps: Vec<Vec<u32>>,
    byte: Vec<Option<(Bytes, u32)>>,
    start: u32,
    accept: u32,
}

impl Nfa {
    fn state(&mut self) -> u32 {
        self.eps.push(Vec::new());
        self.byte.push(None);
        (self.eps.len() - 1) as u32
    }

    fn fragment(&mut self, re: &Re) -> (u32, u32) {
        match re {
            Re::Byte(set) => {
                let (s, e) = (self.state(), self.state());
                self.byte[s as usize] = Some((*set, e));
                (s, e)
            }
            Re::Seq(parts) => {
                let s = self.state();
                let mut end = s;
                for p in parts {
                    let (ps, pe) = self.fragment(p);
                    self.eps[end as usize].push(ps);
                    end = pe;
                }
                (s, end)
            }
            Re::Alt(parts) => {
                let (s, e) = (self.state(), self.state());
                for p in parts {
                    let (ps, pe) = self.fragment(p);
                    self.eps[s as usize].push(ps);
                    self.eps[pe as usize].push(e);
                }
                (s, e)
            }
            Re::Star(inner) => {
                let (s, e) = (self.state(), self.state());
                let (is, ie) = self.fragment(inner);
                self.eps[s as usize].extend([is, e]);
                self.eps[ie as usize].extend([is, e]);
                (s, e)
            }
        }
    }

    /// The automaton of the union of `globs` (each already normalised the
    /// way `glob::compile` feeds globset). `None` if globset would refuse
    /// one of them.
    pub fn union<S: AsRef<str>>(globs: &[S]) -> Option<Nfa> {
        let mut nfa = Nfa::default();
        let (start, accept) = (nfa.state(), nfa.state());
        nfa.start = start;
        nfa.accept = accept;
        for g in globs {
            let re = to_re(&Parser::parse(g.as_ref())?);
            let (s, e) = nfa.fragment(&re);
            nfa.eps[start as usize].push(s);
            nfa.eps[e as usize].push(accept);
        }
        Some(nfa)
    }

    fn closure(&self, mut set: Vec<u32>) -> Vec<u32> {
        let mut seen = vec![false; self.eps.len()];
        let mut stack = set.clone();
        for s in &set {
            seen[*s as usize] = true;
        }
        while let Some(s) = stack.pop() {
            for &t in &self.eps[s as usize] {
                if !seen[t as usize] {
                    seen[t as usize] = true;
                    set.push(t);
                    stack.push(t);
                }
            }
        }
        set.sort_unstable();
        set
    }

    fn step(&self, set: &[u32], b: u8) -> Vec<u32> {
        let next: Vec<u32> = set
            .iter()
            .filter_map(|s| self.byte[*s as usize])
            .filter(|(bytes, _)| bytes.contains(b))
            .map(|(_, t)| t)
            .collect();
        if next.is_empty() {
            next
        } else {
            self.closure(next)
        }
    }

    /// Every byte set the automaton tests, for the alphabet's classes.
    fn byte_sets(&self) -> impl Iterator<Item = &Bytes> {
        self.byte.iter().flatten().map(|(b, _)| b)
    }
}

/// Subset construction on demand: interned state sets and their moves.
struct Subsets<'a> {
    nfa: &'a Nfa,
    ids: HashMap<Vec<u32>, u32>,
    sets: Vec<Vec<u32>>,
    moves: HashMap<(u32, u8), u32>,
}

impl<'a> Subsets<'a> {
    fn new(nfa: &'a Nfa) -> Self {
        let mut me = Self {
            nfa,
            ids: HashMap::new(),
            sets: Vec::new(),
            moves: HashMap::new(),
        };
        me.intern(Vec::new()); // id 0: the dead set
        me
    }

    fn intern(&mut self, set: Vec<u32>) -> u32 {
        if let Some(&id) = self.ids.get(&set) {
            return id;
        }
        let id = self.sets.len() as u32;
        self.ids.insert(set.clone(), id);
        self.sets.push(set);
        id
    }

    fn start(&mut self) -> u32 {
        let set = self.nfa.closure(vec![self.nfa.start]);
        self.intern(set)
    }

    fn step(&mut self, id: u32, b: u8) -> u32 {
        if let Some(&to) = self.moves.get(&(id, b)) {
            return to;
        }
        let next = self.nfa.step(&self.sets[id as usize], b);
        let to = self.intern(next);
        self.moves.insert((id, b), to);
        to
    }

    fn accepts(&self, id: u32) -> bool {
        self.sets[id as usize]
            .binary_search(&self.nfa.accept)
            .is_ok()
    }
}

/// Where a path is, for the rules of real repository paths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PathState {
    /// Continuation bytes still expected, and the range the next must be in.
    pending: u8,
    lo: u8,
    hi: u8,
    /// The current component so far: 0 empty, 1 `.`, 2 `..`, 3 anything else.
    component: u8,
}

impl PathState {
    const START: PathState = PathState {
        pending: 0,
        lo: 0,
        hi: 0,
        component: 0,
    };

    fn step(self, b: u8) -> Option<PathState> {
        let mut next = self;
        if self.pending > 0 {
            if !(self.lo..=self.hi).contains(&b) {
                return None;
            }
            next.pending -= 1;
            (next.lo, next.hi) = (0x80, 0xBF);
            next.component = 3;
            return Some(next);
        }
        let (pending, lo, hi) = match b {
            0x00 => return None,
            0x01..=0x7F => (0, 0, 0),
            0xC2..=0xDF => (1, 0x80, 0xBF),
            0xE0 => (2, 0xA0, 0xBF),
            0xE1..=0xEC | 0xEE..=0xEF => (2, 0x80, 0xBF),
            0xED => (2, 0x80, 0x9F),
            0xF0 => (3, 0x90, 0xBF),
            0xF1..=0xF3 => (3, 0x80, 0xBF),
            0xF4 => (3, 0x80, 0x8F),
            _ => return None,
        };
        (next.pending, next.lo, next.hi) = (pending, lo, hi);
        next.component = match (b, self.component) {
            (b'/', 3) => 0,
            (b'/', _) => return None,
            (b'.', 0) => 1,
            (b'.', 1) => 2,
            _ => 3,
        };
        Some(next)
    }

    fn accepts(self) -> bool {
        self.pending == 0 && self.component == 3
    }

    /// Bytes where the rules above change behaviour.
    const BOUNDARIES: [u8; 18] = [
        0x00,
        0x01,
        b'.',
        b'.' + 1,
        b'/',
        b'/' + 1,
        0x80,
        0x90,
        0xA0,
        0xC0,
        0xC2,
        0xE0,
        0xE1,
        0xED,
        0xEE,
        0xF0,
        0xF1,
        0xF4,
    ];
}

/// One representative byte per class of bytes that every automaton (and
/// the path rules) treat alike, nicest first so witnesses read well.
fn alphabet(nfas: &[&Nfa]) -> Vec<u8> {
    let mut cut = [false; 257];
    for b in PathState::BOUNDARIES {
        cut[usize::from(b)] = true;
    }
    cut[0xF5] = true;
    for nfa in nfas {
        for set in nfa.byte_sets() {
            for b in 1..=255u8 {
                if set.contains(b) != set.contains(b - 1) {
                    cut[usize::from(b)] = true;
                }
            }
        }
    }
    let starts: Vec<usize> = (0..256usize).filter(|b| *b == 0 || cut[*b]).collect();
    let mut reps = Vec::new();
    for (n, &start) in starts.iter().enumerate() {
        let end = starts.get(n + 1).copied().unwrap_or(256);
        let range = start as u8..=(end - 1) as u8;
        let nice = [b'x', b'a', b'0', b'A', b'_']
            .into_iter()
            .find(|b| range.contains(b))
            .or_else(|| range.clone().find(|b| b.is_ascii_alphanumeric()))
            .unwrap_or(*range.start());
        reps.push(nice);
    }
    reps.sort_by_key(|b| {
        (
            *b != b'x',
            !b.is_ascii_alphanumeric(),
            !b.is_ascii_lowercase(),
            *b,
        )
    });
    reps
}

/// What the product search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Search {
    /// A shortest path in both languages and in no exclusion.
    Found(String),
    /// No such path exists.
    Empty,
    /// The search was stopped; the reason says why.
    GaveUp(String),
}

/// Searches for a real path accepted by `a` and `b` and by no glob of
/// `excluded`, visiting at most [`MAX_STATES`] product states and no more
/// than `budget` (which is reduced by what the search used), so that a
/// caller comparing many pairs bounds its total work.
pub fn intersect(a: &Nfa, b: &Nfa, excluded: &Nfa, budget: &mut usize) -> Search {
    let limit = MAX_STATES.min(*budget);
    let result = search(a, b, excluded, limit);
    *budget = budget.saturating_sub(result.1);
    result.0
}

fn search(a: &Nfa, b: &Nfa, excluded: &Nfa, limit: usize) -> (Search, usize) {
    let alphabet = alphabet(&[a, b, excluded]);
    let mut sa = Subsets::new(a);
    let mut sb = Subsets::new(b);
    let mut se = Subsets::new(excluded);
    type Key = (u32, u32, u32, PathState);
    let start: Key = (sa.start(), sb.start(), se.start(), PathState::START);
    // Dial's algorithm: each byte costs 1, and a component starting with
    // `.` costs 2 more, so witnesses are short and read like ordinary
    // paths (`src/x.rs`, not `src/.rs`) unless only a dotfile will do.
    let mut parent: HashMap<Key, (Key, u8)> = HashMap::new();
    let mut best: HashMap<Key, usize> = HashMap::from([(start, 0)]);
    let mut buckets: Vec<VecDeque<Key>> = vec![VecDeque::from([start])];
    let mut cost = 0;
    while cost < buckets.len() {
        let Some(key) = buckets[cost].pop_front() else {
            cost += 1;
            continue;
        };
        if best.get(&key).is_some_and(|c| *c < cost) {
            continue;
        }
        let (ia, ib, ie, ps) = key;
        if sa.accepts(ia) && sb.accepts(ib) && !se.accepts(ie) && ps.accepts() {
            let mut bytes = Vec::new();
            let mut at = key;
            while let Some(&(from, byte)) = parent.get(&at) {
                bytes.push(byte);
                at = from;
            }
            bytes.reverse();
            let found = match String::from_utf8(bytes) {
                Ok(s) => Search::Found(s),
                Err(_) => Search::GaveUp("the witness is not UTF-8".into()),
            };
            return (found, best.len());
        }
        for &byte in &alphabet {
            let Some(nps) = ps.step(byte) else { continue };
            let na = sa.step(ia, byte);
            if na == 0 {
                continue;
            }
            let nb = sb.step(ib, byte);
            if nb == 0 {
                continue;
            }
            let ne = se.step(ie, byte);
            let next = (na, nb, ne, nps);
            let step = if byte == b'.' && ps.component == 0 {
                3
            } else {
                1
            };
            let c = cost + step;
            if best.get(&next).is_none_or(|old| c < *old) {
                if best.len() > limit {
                    let why = format!("the search passed {limit} states");
                    return (Search::GaveUp(why), best.len());
                }
                best.insert(next, c);
                parent.insert(next, (key, byte));
                if buckets.len() <= c {
                    buckets.resize_with(c + 1, VecDeque::new);
                }
                buckets[c].push_back(next);
            }
        }
    }
    (Search::Empty, best.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn find(a: &[&str], b: &[&str], ex: &[&str]) -> Search {
        intersect(
            &Nfa::union(a).expect("a"),
            &Nfa::union(b).expect("b"),
            &Nfa::union(ex).expect("ex"),
            &mut { usize::MAX },
        )
    }

    #[test]
    fn parses_like_globset() {
        assert_eq!(Parser::parse("**"), Some(vec![Tok::RecursivePrefix]));
        assert_eq!(
            Parser::parse("a/**"),
            Some(vec![Tok::Lit('a'), Tok::RecursiveSuffix])
        );
        assert_eq!(
            Parser::parse("a/**/b"),
            Some(vec![Tok::Lit('a'), Tok::RecursiveZeroOrMore, Tok::Lit('b')])
        );
        assert_eq!(
            Parser::parse("a**"),
            Some(vec![Tok::Lit('a'), Tok::ZeroOrMore, Tok::ZeroOrMore])
        );
        assert_eq!(Parser::parse("{a,b"), None);
        assert_eq!(Parser::parse("[a"), None);
        assert_eq!(Parser::parse("a}"), None);
        assert_eq!(Parser::parse("[z-a]"), None);
    }

    #[test]
    fn finds_shortest_real_paths() {
        assert_eq!(
            find(&["src/**"], &["**/*.rs"], &[]),
            Search::Found("src/x.rs".into())
        );
        assert_eq!(find(&["**"], &["**"], &[]), Search::Found("x".into()));
        assert_eq!(find(&["a/*"], &["*/b"], &[]), Search::Found("a/b".into()));
        // `.` and `..` are not components of real paths.
        assert_eq!(find(&["a/?/b"], &["a/[.]/b"], &[]), Search::Empty);
    }

    #[test]
    fn exclusions_remove_paths() {
        assert_eq!(
            find(&["src/**"], &["src/api/**"], &["src/api/**"]),
            Search::Empty
        );
        let Search::Found(w) = find(&["src/*.rs"], &["src/*"], &["src/x.rs"]) else {
            panic!("src/*.rs minus src/x.rs still overlaps src/*");
        };
        assert_ne!(w, "src/x.rs");
        assert!(w.starts_with("src/") && w.ends_with(".rs"), "{w}");
    }

    #[test]
    fn gives_up_within_its_budget() {
        let q = "?".repeat(18);
        let (a, b) = (format!("*a{q}"), format!("*b{q}"));
        let mut budget = 50_000;
        let found = intersect(
            &Nfa::union(&[a]).expect("a"),
            &Nfa::union(&[b]).expect("b"),
            &Nfa::union::<&str>(&[]).expect("none"),
            &mut budget,
        );
        assert!(matches!(found, Search::GaveUp(_)), "{found:?}");
        assert_eq!(budget, 0);
    }
}
