//! Plan analysis: is this plan safe to fan out?
//!
//! Pure and deterministic: given a valid plan, the file paths of the base
//! tree and the pinch rules, it returns findings (blocking or warning) plus
//! the dependency order. Every rule is documented in docs/plans.md; each has
//! a test with the smallest plan that triggers it and one that must not.
//!
//! Ownership is decided twice, exclusions (`!glob`) included. Against the
//! real files: an index of every plain owned glob
//! ([`super::glob::GlobIndex`]) is consulted once per path, so 100,000
//! paths cost one pass, not paths × globs, and a subtask whose exclusion
//! matches the path drops out ([`super::glob::Ownership`]). At pattern
//! level, for files that do not exist yet: [`super::glob::relate_within`]
//! on pairs of globs whose literal directory prefixes are nested (others
//! cannot meet), minus both subtasks' exclusions, each overlap with a
//! witness.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use globset::{Candidate, GlobSetBuilder};
use serde::Serialize;

use super::format::Plan;
use super::glob::{self, Relation};
use super::pinch::{LockedManifest, PinchKind, PinchPoint, PinchRule};

/// How much a finding matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Must be fixed before the plan can be approved.
    Blocking,
    /// Worth a look; does not block.
    Warning,
    /// What the plan relies on, said so a person can check it (ownership
    /// shared by subtasks that the dependencies run one after another).
    Info,
}

/// One thing the analysis found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable identifier of the rule (`ownership-overlap`, …).
    pub code: &'static str,
    pub severity: Severity,
    /// The subtasks concerned.
    pub subtasks: Vec<String>,
    pub message: String,
    /// Rule-specific data (example paths, the cycle, …).
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub details: serde_json::Value,
}

/// The result of analysing a plan.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Analysis {
    pub findings: Vec<Finding>,
    /// A topological order of the subtasks (empty if the graph is broken).
    pub order: Vec<String>,
    /// Subtasks grouped by dependency depth: wave n only depends on waves < n.
    pub waves: Vec<Vec<String>>,
    /// Subtasks that must run alone (declared, or forced by a pinch point).
    pub serial: Vec<String>,
    /// The subsets of `serial` forced by pinch points.
    pub forced_serial: Vec<String>,
    /// Subtasks that could start at once beside each other.
    pub independent: Vec<String>,
    /// How many base-tree paths were checked.
    pub paths_checked: usize,
    /// Every pinch point of the base tree (the list the brief shows).
    pub pinch_points: Vec<PinchPoint>,
}

impl Analysis {
    /// Number of warnings (information not counted).
    pub fn warnings(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Warning)
            .count()
    }

    /// Number of blocking findings.
    pub fn blocking(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Blocking)
            .count()
    }

    /// Whether the dependency graph itself is broken (unknown ids,
    /// self-dependencies, cycles): such a plan cannot even be stored.
    pub fn graph_broken(&self) -> bool {
        self.findings.iter().any(|f| {
            matches!(
                f.code,
                "unknown-dependency" | "self-dependency" | "dependency-cycle"
            )
        })
    }
}

/// Below this many independent subtasks, fanning out is not worth it.
pub const MIN_INDEPENDENT: usize = 3;
/// Example paths reported per overlap.
const EXAMPLES: usize = 5;
/// Automaton states the pattern-level rule may visit for one plan; past
/// it, the remaining pairs are `possible-overlap` warnings.
pub const PATTERN_BUDGET: usize = 1_000_000;

fn finding(
    code: &'static str,
    severity: Severity,
    subtasks: Vec<String>,
    message: String,
    details: serde_json::Value,
) -> Finding {
    Finding {
        code,
        severity,
        subtasks,
        message,
        details,
    }
}

/// Analyses `plan` against the base tree's file `paths`.
pub fn analyse(plan: &Plan, paths: &[String], pinch: &[PinchRule]) -> Analysis {
    let mut out = Analysis {
        paths_checked: paths.len(),
        ..Default::default()
    };
    graph(plan, &mut out);
    let points = super::pinch::present(paths, pinch);
    let locked = super::pinch::locked_manifests(paths, &points);
    let order = Order::new(plan, &out.order);
    let owners = Owners::compute(plan, paths, pinch, &locked);
    let mut ordered = OrderedOverlaps::default();
    owners.report(plan, &order, &mut ordered, &mut out);
    pattern_overlaps(plan, &owners, &order, &mut ordered, &mut out);
    ordered.report(plan, &order, &mut out);
    let pinch_units = pinch_points(plan, pinch, &owners, &order, &mut out);
    serial_and_fan_out(plan, &owners, &order, &pinch_units, &mut out);
    manifests_and_lockfiles(plan, &owners, &order, &pinch_units, &mut out);
    review_warnings(plan, paths, &owners, &out.serial.clone(), &mut out);
    out.pinch_points = points;
    out.findings
        .sort_by(|a, b| (a.severity, a.code, &a.subtasks).cmp(&(b.severity, b.code, &b.subtasks)));
    out
}

/// Unknown ids, self-dependencies, cycles, order and waves.
fn graph(plan: &Plan, out: &mut Analysis) {
    let ids: Vec<&str> = plan.subtasks.iter().map(|s| s.id.as_str()).collect();
    let index: HashMap<&str, usize> = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
    let mut deps: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    let mut broken = false;
    for (i, s) in plan.subtasks.iter().enumerate() {
        for d in &s.depends_on {
            match index.get(d.as_str()) {
                None => {
                    broken = true;
                    out.findings.push(finding(
                        "unknown-dependency",
                        Severity::Blocking,
                        vec![ids[i].into()],
                        format!(
                            "{} depends on {d}, which is not a subtask of this plan",
                            ids[i]
                        ),
                        serde_json::json!({ "unknown": d.as_str() }),
                    ));
                }
                Some(&j) if j == i => {
                    broken = true;
                    out.findings.push(finding(
                        "self-dependency",
                        Severity::Blocking,
                        vec![ids[i].into()],
                        format!("{} depends on itself", ids[i]),
                        serde_json::Value::Null,
                    ));
                }
                Some(&j) => {
                    if !deps[i].contains(&j) {
                        deps[i].push(j);
                    }
                }
            }
        }
    }
    // Kahn, level by level, in plan order within a level (deterministic).
    let mut indegree: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); ids.len()];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependents[d].push(i);
        }
    }
    let mut wave: Vec<usize> = (0..ids.len()).filter(|&i| indegree[i] == 0).collect();
    let mut order = Vec::new();
    let mut waves = Vec::new();
    while !wave.is_empty() {
        let mut next = Vec::new();
        for &i in &wave {
            order.push(i);
            for &d in &dependents[i] {
                indegree[d] -= 1;
                if indegree[d] == 0 {
                    next.push(d);
                }
            }
        }
        next.sort_unstable();
        waves.push(wave.iter().map(|&i| ids[i].to_owned()).collect());
        wave = next;
    }
    if order.len() < ids.len() {
        let left: BTreeSet<usize> = (0..ids.len()).filter(|i| indegree[*i] > 0).collect();
        let cycle = find_cycle(&deps, &left);
        let names: Vec<String> = cycle.iter().map(|&i| ids[i].to_owned()).collect();
        out.findings.push(finding(
            "dependency-cycle",
            Severity::Blocking,
            {
                let mut s = names.clone();
                s.pop();
                s
            },
            format!("dependency cycle: {}", names.join(" → ")),
            serde_json::json!({ "cycle": names }),
        ));
        broken = true;
    }
    if !broken {
        out.order = order.into_iter().map(|i| ids[i].to_owned()).collect();
        out.waves = waves;
    }
}

/// What the dependencies order: subtask `i` runs after every subtask in
/// `reach[i]` has landed (its dependencies, theirs, and so on), so it
/// starts from a base that holds their work. Two subtasks may own the same
/// files when one of them runs after the other: they never work at once,
/// and the later one sees the earlier one's change.
struct Order {
    /// Bit sets: `reach[i]` has bit `j` when `i` depends on `j`, directly
    /// or not.
    reach: Vec<Vec<u64>>,
    /// Each subtask's place in the topological order (plan order when the
    /// graph is broken).
    position: Vec<usize>,
}

impl Order {
    fn new(plan: &Plan, order: &[String]) -> Self {
        let n = plan.subtasks.len();
        let words = n.div_ceil(64);
        let index: HashMap<&str, usize> = plan
            .subtasks
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.as_str(), i))
            .collect();
        let deps: Vec<Vec<usize>> = plan
            .subtasks
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.depends_on
                    .iter()
                    .filter_map(|d| index.get(d.as_str()).copied())
                    .filter(|&j| j != i)
                    .collect()
            })
            .collect();
        let mut reach = vec![vec![0u64; words]; n];
        let mut position: Vec<usize> = (0..n).collect();
        if order.len() == n {
            // Dependencies first: each subtask's set is its dependencies'
            // sets and themselves.
            for (pos, id) in order.iter().enumerate() {
                let i = index[id.as_str()];
                position[i] = pos;
                for &d in &deps[i] {
                    let (done, bit) = (reach[d].clone(), d);
                    let mine = &mut reach[i];
                    for (w, v) in mine.iter_mut().zip(done) {
                        *w |= v;
                    }
                    mine[bit / 64] |= 1 << (bit % 64);
                }
            }
        } else {
            // A broken graph (the check reports it): a walk from each.
            for (i, set) in reach.iter_mut().enumerate() {
                let mut stack = deps[i].clone();
                while let Some(d) = stack.pop() {
                    if set[d / 64] & (1 << (d % 64)) == 0 {
                        set[d / 64] |= 1 << (d % 64);
                        stack.extend(&deps[d]);
                    }
                }
            }
        }
        Order { reach, position }
    }

    /// Whether `a` depends on `b`, directly or not.
    fn after(&self, a: usize, b: usize) -> bool {
        self.reach[a][b / 64] & (1 << (b % 64)) != 0
    }

    /// Whether the dependencies run `a` and `b` one after the other.
    fn ordered(&self, a: usize, b: usize) -> bool {
        a != b && (self.after(a, b) || self.after(b, a))
    }

    /// Whether every two of `set` run one after the other.
    fn chain(&self, set: &[usize]) -> bool {
        set.iter()
            .enumerate()
            .all(|(n, &a)| set[n + 1..].iter().all(|&b| self.ordered(a, b)))
    }

    /// `set` in the order the dependencies run it.
    fn in_order(&self, set: &BTreeSet<usize>) -> Vec<usize> {
        let mut v: Vec<usize> = set.iter().copied().collect();
        v.sort_by_key(|&i| self.position[i]);
        v
    }
}

/// Ownership shared by subtasks the dependencies order, grouped by who
/// shares it: one finding per group of owners, not one per pair.
#[derive(Default)]
struct OrderedOverlaps {
    /// Owners → (existing files shared, examples of the shared paths).
    groups: BTreeMap<BTreeSet<usize>, (usize, Vec<String>)>,
    /// New files (from the globs), by path, with who would own them.
    new_files: BTreeMap<String, BTreeSet<usize>>,
}

impl OrderedOverlaps {
    fn report(mut self, plan: &Plan, order: &Order, out: &mut Analysis) {
        for (path, owners) in std::mem::take(&mut self.new_files) {
            let e = self.groups.entry(owners).or_default();
            if e.1.len() < EXAMPLES {
                e.1.push(path);
            }
        }
        for (owners, (count, examples)) in self.groups {
            let chain: Vec<String> = order
                .in_order(&owners)
                .iter()
                .map(|&t| plan.subtasks[t].id.to_string())
                .collect();
            let what = match (count, examples.as_slice()) {
                (0, [one]) => format!("the new file {one}"),
                (0, [first, ..]) => format!("new files such as {first}"),
                (1, [one, ..]) => one.clone(),
                (n, [first, ..]) => format!("{n} files such as {first}"),
                (_, []) => "files".to_owned(),
            };
            out.findings.push(finding(
                "ordered-overlap",
                Severity::Info,
                chain.clone(),
                format!(
                    "{what}: owned by {} subtasks that run one after another, in dependency order: {}",
                    chain.len(),
                    chain.join(" → ")
                ),
                serde_json::json!({ "count": count, "examples": examples, "chain": chain }),
            ));
        }
    }
}

/// A cycle among `left` (nodes Kahn could not order), as a closed walk.
fn find_cycle(deps: &[Vec<usize>], left: &BTreeSet<usize>) -> Vec<usize> {
    let start = *left.iter().next().expect("a cycle leaves nodes");
    // Every node left has a dependency that is also left; walk until a
    // node repeats.
    let mut path = vec![start];
    let mut pos: HashMap<usize, usize> = HashMap::from([(start, 0)]);
    let mut at = start;
    loop {
        let next = *deps[at]
            .iter()
            .find(|d| left.contains(d))
            .expect("an unordered node depends on another unordered node");
        if let Some(&p) = pos.get(&next) {
            let mut cycle = path[p..].to_vec();
            cycle.push(next);
            return cycle;
        }
        pos.insert(next, path.len());
        path.push(next);
        at = next;
    }
}

/// Who owns which real files.
struct Owners {
    /// Each subtask's ownership (plain globs minus exclusions).
    ownership: Vec<glob::Ownership>,
    /// Every plain owned glob: (subtask index, glob).
    globs: Vec<(usize, String)>,
    /// Real files owned through each glob.
    glob_hits: Vec<usize>,
    /// Real files per subtask.
    task_hits: Vec<usize>,
    /// Overlapping subtask pairs on real files: count and examples.
    pairs: BTreeMap<(usize, usize), (usize, Vec<String>)>,
    /// Real files owned by more than one subtask, grouped by their owners:
    /// count and examples.
    shared: BTreeMap<BTreeSet<usize>, (usize, Vec<String>)>,
    /// Pinch units owned through real files: (kind, unit) → owners.
    pinch_real: BTreeMap<(PinchKind, String), BTreeSet<usize>>,
    /// Locked manifests each subtask owns: subtask → lockfile → manifests.
    manifests: BTreeMap<usize, BTreeMap<String, Vec<String>>>,
}

impl Owners {
    fn compute(
        plan: &Plan,
        paths: &[String],
        pinch: &[PinchRule],
        locked: &[LockedManifest],
    ) -> Self {
        let ownership: Vec<glob::Ownership> = plan
            .subtasks
            .iter()
            .map(|s| {
                glob::Ownership::new(&s.owned_globs)
                    .expect("globs are validated when the plan is parsed")
            })
            .collect();
        let mut globs = Vec::new();
        for (t, o) in ownership.iter().enumerate() {
            for g in o.includes() {
                globs.push((t, g.clone()));
            }
        }
        let texts: Vec<String> = globs.iter().map(|(_, g)| g.clone()).collect();
        let index = glob::GlobIndex::new(&texts);
        let mut pinch_builder = GlobSetBuilder::new();
        for r in pinch {
            pinch_builder.add(glob::compile(&r.glob).expect("pinch globs are valid"));
        }
        let pinch_set = pinch_builder.build().expect("pinch globs build a set");
        let lock_of: HashMap<&str, &str> = locked
            .iter()
            .map(|l| (l.manifest.as_str(), l.lockfile.as_str()))
            .collect();
        let mut me = Owners {
            glob_hits: vec![0; globs.len()],
            task_hits: vec![0; plan.subtasks.len()],
            ownership,
            globs,
            pairs: BTreeMap::new(),
            shared: BTreeMap::new(),
            pinch_real: BTreeMap::new(),
            manifests: BTreeMap::new(),
        };
        let mut hits = Vec::new();
        let mut owners: Vec<usize> = Vec::new();
        let mut pinch_hits = Vec::new();
        for path in paths {
            index.matches_into(path, &mut hits);
            if hits.is_empty() {
                continue;
            }
            owners.clear();
            for &g in &hits {
                let t = me.globs[g].0;
                // An exclusion of the subtask takes the path back.
                if me.ownership[t].is_excluded(path) {
                    continue;
                }
                me.glob_hits[g] += 1;
                if !owners.contains(&t) {
                    owners.push(t);
                }
            }
            if owners.is_empty() {
                continue;
            }
            for &t in &owners {
                me.task_hits[t] += 1;
            }
            owners.sort_unstable();
            if owners.len() > 1 {
                let e = me
                    .shared
                    .entry(owners.iter().copied().collect())
                    .or_default();
                e.0 += 1;
                if e.1.len() < EXAMPLES {
                    e.1.push(path.clone());
                }
            }
            for (n, &a) in owners.iter().enumerate() {
                for &b in &owners[n + 1..] {
                    let e = me.pairs.entry((a, b)).or_default();
                    e.0 += 1;
                    if e.1.len() < EXAMPLES {
                        e.1.push(path.clone());
                    }
                }
            }
            if let Some(lockfile) = lock_of.get(path.as_str()) {
                for &t in &owners {
                    me.manifests
                        .entry(t)
                        .or_default()
                        .entry((*lockfile).to_owned())
                        .or_default()
                        .push(path.clone());
                }
            }
            pinch_set.matches_candidate_into(&Candidate::new(path), &mut pinch_hits);
            for &r in &pinch_hits {
                let rule = &pinch[r];
                if !rule.applies_to(path) {
                    continue;
                }
                let unit = rule.unit_of(path);
                me.pinch_real
                    .entry((rule.kind, unit))
                    .or_default()
                    .extend(owners.iter().copied());
            }
        }
        me
    }

    /// The exclusions of subtasks `a` and `b` together.
    fn exclusions(&self, a: usize, b: usize) -> Vec<&str> {
        self.ownership[a]
            .excludes()
            .iter()
            .chain(self.ownership[b].excludes())
            .map(String::as_str)
            .collect()
    }

    /// Overlaps on real files: blocking between subtasks that could run
    /// at once, information (grouped by owners) between subtasks the
    /// dependencies run one after the other.
    fn report(
        &self,
        plan: &Plan,
        order: &Order,
        ordered: &mut OrderedOverlaps,
        out: &mut Analysis,
    ) {
        for (owners, (count, examples)) in &self.shared {
            let set: Vec<usize> = owners.iter().copied().collect();
            if order.chain(&set) {
                let e = ordered.groups.entry(owners.clone()).or_default();
                e.0 += count;
                for x in examples {
                    if e.1.len() < EXAMPLES {
                        e.1.push(x.clone());
                    }
                }
            }
        }
        for (&(a, b), (count, examples)) in &self.pairs {
            if order.ordered(a, b) {
                continue;
            }
            let (ia, ib) = (plan.subtasks[a].id.as_str(), plan.subtasks[b].id.as_str());
            out.findings.push(finding(
                "ownership-overlap",
                Severity::Blocking,
                vec![ia.into(), ib.into()],
                format!(
                    "{ia} and {ib} both own {count} existing file{} (e.g. {})",
                    if *count == 1 { "" } else { "s" },
                    examples.join(", ")
                ),
                serde_json::json!({ "count": count, "examples": examples }),
            ));
        }
    }

    fn overlapping(&self, a: usize, b: usize) -> bool {
        self.pairs.contains_key(&(a.min(b), a.max(b)))
    }
}

/// Overlaps among paths that do not exist yet, decided from the globs
/// minus both subtasks' exclusions (only for pairs
/// [`glob::candidate_pairs`] says can meet). Between subtasks the
/// dependencies order, an overlap is information, grouped by path.
fn pattern_overlaps(
    plan: &Plan,
    own: &Owners,
    order: &Order,
    ordered: &mut OrderedOverlaps,
    out: &mut Analysis,
) {
    let texts: Vec<String> = own.globs.iter().map(|(_, g)| g.clone()).collect();
    let mut reported: HashSet<(usize, usize)> = HashSet::new();
    let mut unknown: BTreeMap<(usize, usize), (String, String, String)> = BTreeMap::new();
    let mut budget = PATTERN_BUDGET;
    for (ga, gb) in glob::candidate_pairs(&texts) {
        let (ta, tb) = (own.globs[ga].0, own.globs[gb].0);
        if ta == tb {
            continue;
        }
        let key = (ta.min(tb), ta.max(tb));
        if own.overlapping(ta, tb) || reported.contains(&key) {
            continue;
        }
        let (a, b) = (&own.globs[ga].1, &own.globs[gb].1);
        let excluded = own.exclusions(ta, tb);
        match glob::relate_within(a, b, &excluded, &mut budget) {
            Relation::Disjoint => {}
            Relation::Overlap { witness } if order.ordered(ta, tb) => {
                let owners = ordered.new_files.entry(witness).or_default();
                owners.insert(ta);
                owners.insert(tb);
            }
            Relation::Overlap { witness } => {
                reported.insert(key);
                unknown.remove(&key);
                let (ia, ib) = (
                    plan.subtasks[key.0].id.as_str(),
                    plan.subtasks[key.1].id.as_str(),
                );
                out.findings.push(finding(
                    "ownership-overlap",
                    Severity::Blocking,
                    vec![ia.into(), ib.into()],
                    format!(
                        "{ia} and {ib} would both own new files such as {witness} ({a:?} and {b:?} overlap)"
                    ),
                    serde_json::json!({ "globs": [a, b], "witness": witness, "count": 0 }),
                ));
            }
            // Undecided, but the dependencies run them one after the
            // other: nothing to warn about either way.
            Relation::Unknown(_) if order.ordered(ta, tb) => {}
            Relation::Unknown(reason) => {
                unknown.entry(key).or_insert((a.clone(), b.clone(), reason));
            }
        }
    }
    for ((ta, tb), (a, b, reason)) in unknown {
        let (ia, ib) = (plan.subtasks[ta].id.as_str(), plan.subtasks[tb].id.as_str());
        out.findings.push(finding(
            "possible-overlap",
            Severity::Warning,
            vec![ia.into(), ib.into()],
            format!("{ia} and {ib} may overlap: {a:?} vs {b:?} could not be decided ({reason})"),
            serde_json::json!({ "globs": [a, b] }),
        ));
    }
}

/// Pinch units each subtask owns (real files, or named explicitly by a
/// glob); reports shared units. Returns owners per unit.
fn pinch_points(
    plan: &Plan,
    rules: &[PinchRule],
    own: &Owners,
    order: &Order,
    out: &mut Analysis,
) -> BTreeMap<(PinchKind, String), BTreeSet<usize>> {
    let mut units = own.pinch_real.clone();
    // Explicit ownership of pinch points that do not exist yet. A glob can
    // only name a rule's files explicitly if it contains all of the rule's
    // literal components, which rules out most pairs cheaply.
    let rule_literals: Vec<Vec<&str>> = rules
        .iter()
        .map(|r| {
            r.glob
                .split('/')
                .filter(|c| !c.contains(['*', '?', '[', '{', '\\']))
                .collect()
        })
        .collect();
    for (t, g) in &own.globs {
        let literals: HashSet<&str> = g.split('/').collect();
        for (r, rule) in rules.iter().enumerate() {
            if !rule_literals[r].iter().all(|l| literals.contains(l)) {
                continue;
            }
            // Named explicitly, and not all excluded again.
            if let Relation::Overlap { witness } = glob::relate_explicit(g, &rule.glob)
                && rule.applies_to(&witness)
                && (own.ownership[*t].excludes().is_empty()
                    || matches!(
                        glob::relate_owned(g, &rule.glob, own.ownership[*t].excludes()),
                        Relation::Overlap { .. }
                    ))
            {
                units
                    .entry((rule.kind, rule.unit_of(&witness)))
                    .or_default()
                    .insert(*t);
            }
        }
    }
    for ((kind, unit), owners) in &units {
        let set: Vec<usize> = owners.iter().copied().collect();
        if owners.len() > 1 && order.chain(&set) {
            // One after the other, each serial: the pinch point is never
            // changed by two at once.
            let chain: Vec<String> = order
                .in_order(owners)
                .iter()
                .map(|&t| plan.subtasks[t].id.to_string())
                .collect();
            out.findings.push(finding(
                "ordered-pinch",
                Severity::Info,
                chain.clone(),
                format!(
                    "pinch point {unit} ({}) is owned by {} subtasks that run one after another, each alone: {}",
                    kind.describe(),
                    chain.len(),
                    chain.join(" → ")
                ),
                serde_json::json!({ "unit": unit, "kind": kind, "chain": chain }),
            ));
        } else if owners.len() > 1 {
            let names: Vec<String> = owners
                .iter()
                .map(|&t| plan.subtasks[t].id.to_string())
                .collect();
            out.findings.push(finding(
                "pinch-shared",
                Severity::Blocking,
                names.clone(),
                format!(
                    "pinch point {unit} ({}) is owned by {}; give it to one subtask, or order them one after another with depends_on",
                    kind.describe(),
                    names.join(" and ")
                ),
                serde_json::json!({ "unit": unit, "kind": kind }),
            ));
        }
    }
    units
}

fn serial_and_fan_out(
    plan: &Plan,
    own: &Owners,
    order: &Order,
    units: &BTreeMap<(PinchKind, String), BTreeSet<usize>>,
    out: &mut Analysis,
) {
    let mut forced: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for ((kind, unit), owners) in units {
        for &t in owners {
            forced
                .entry(t)
                .or_default()
                .push(format!("{unit} ({})", kind.describe()));
        }
    }
    let overlapping: HashSet<usize> = out
        .findings
        .iter()
        .filter(|f| f.code == "ownership-overlap")
        .flat_map(|f| f.subtasks.iter())
        .filter_map(|id| plan.subtasks.iter().position(|s| s.id.as_str() == id))
        .chain(
            own.pairs
                .keys()
                .filter(|(a, b)| !order.ordered(*a, *b))
                .flat_map(|(a, b)| [*a, *b]),
        )
        .collect();
    for (t, s) in plan.subtasks.iter().enumerate() {
        let pinched = forced.get(&t);
        if s.serial_only || pinched.is_some() {
            out.serial.push(s.id.to_string());
        }
        if let Some(list) = pinched
            && !s.serial_only
        {
            out.forced_serial.push(s.id.to_string());
            out.findings.push(finding(
                "pinch-serial",
                Severity::Warning,
                vec![s.id.to_string()],
                format!(
                    "{} owns the pinch point {}: it will run serial_only",
                    s.id,
                    list.join(", ")
                ),
                serde_json::json!({ "units": list }),
            ));
        }
        if !s.serial_only
            && pinched.is_none()
            && s.depends_on.is_empty()
            && !overlapping.contains(&t)
        {
            out.independent.push(s.id.to_string());
        }
    }
    if out.independent.len() < MIN_INDEPENDENT {
        out.findings.push(finding(
            "fan-out",
            Severity::Warning,
            out.independent.clone(),
            format!(
                "only {} of {} subtasks can start independently; below {MIN_INDEPENDENT}, one agent doing the whole instruction is usually faster and cheaper",
                out.independent.len(),
                plan.subtasks.len()
            ),
            serde_json::json!({ "independent": out.independent.len(), "subtasks": plan.subtasks.len() }),
        ));
    }
}

/// Subtasks that own a manifest but not the lockfile that locks it cannot
/// change its dependencies: the rewritten lockfile is outside their scope.
/// The rule git-orch applies (docs/plans.md, "Manifests and lockfiles"):
/// a lockfile is changed only by the one subtask that owns it, which a
/// lockfile's pinch point makes serial; the analysis says so, with the fix,
/// wherever a plan leaves manifest owners without their lockfile.
fn manifests_and_lockfiles(
    plan: &Plan,
    own: &Owners,
    order: &Order,
    units: &BTreeMap<(PinchKind, String), BTreeSet<usize>>,
    out: &mut Analysis,
) {
    let mut by_lockfile: BTreeMap<&str, Vec<(usize, &Vec<String>)>> = BTreeMap::new();
    for (&t, locks) in &own.manifests {
        for (lockfile, manifests) in locks {
            let lock_owners = units.get(&(PinchKind::Lockfile, lockfile.clone()));
            if lock_owners.is_some_and(|o| o.contains(&t)) {
                continue;
            }
            by_lockfile
                .entry(lockfile)
                .or_default()
                .push((t, manifests));
        }
    }
    for (lockfile, without) in by_lockfile {
        let ids: Vec<String> = without
            .iter()
            .map(|(t, _)| plan.subtasks[*t].id.to_string())
            .collect();
        let mut shown: Vec<&str> = without
            .iter()
            .flat_map(|(_, m)| m.iter().map(String::as_str))
            .collect();
        let total = shown.len();
        shown.truncate(3);
        let more = if total > shown.len() {
            format!(" and {} more", total - shown.len())
        } else {
            String::new()
        };
        let (first_task, first_manifests) = &without[0];
        let first_id = plan.subtasks[*first_task].id.as_str();
        let example = first_manifests[0].as_str();
        let owner_index = units
            .get(&(PinchKind::Lockfile, lockfile.to_owned()))
            .and_then(|o| o.iter().next())
            .copied();
        let owner = owner_index.map(|o| plan.subtasks[o].id.to_string());
        let who = if ids.len() == 1 {
            format!("{} owns", ids[0])
        } else {
            format!("{} own", ids.join(", "))
        };
        let fix = match &owner {
            None => format!(
                "to change dependencies, give {lockfile} to the one subtask that makes the change (add \"{lockfile}\" to its owned_globs; it then runs serial_only) and make the subtasks that need the new dependency depend_on it"
            ),
            // The lockfile's owner already runs after this subtask:
            // depending on it would close a cycle; it can make the change
            // itself, owning the manifest too (an ordered overlap).
            Some(o) if owner_index.is_some_and(|oi| order.after(oi, *first_task)) => format!(
                "{lockfile} is owned by {o}, which runs after {first_id}, so make the change there: add \"{example}\" to {o}'s owned_globs"
            ),
            Some(o) => format!(
                "{lockfile} is owned by {o}, so make the change there: add \"{example}\" to {o}'s owned_globs, add \"!{example}\" to {first_id}'s, and make {first_id} depend_on {o}"
            ),
        };
        out.findings.push(finding(
            "manifest-lockfile",
            Severity::Warning,
            ids.clone(),
            format!(
                "{who} {}{more} but not {lockfile}, which locks {}: a dependency or version change rewrites {lockfile}, and the scope gate refuses it; {fix}",
                shown.join(", "),
                if total == 1 { "its dependencies" } else { "their dependencies" }
            ),
            serde_json::json!({
                "lockfile": lockfile,
                "owner": owner,
                "manifests": without
                    .iter()
                    .map(|(t, m)| (plan.subtasks[*t].id.to_string(), (*m).clone()))
                    .collect::<BTreeMap<String, Vec<String>>>(),
                "fix": fix,
            }),
        ));
    }
}

/// Exclusions that remove nothing, or name a directory rather than the
/// files in it (`!src/gen` for `!src/gen/**`): almost always a mistake.
fn useless_exclusions(plan: &Plan, own: &Owners, dirs: &HashSet<&str>, out: &mut Analysis) {
    let mut budget = PATTERN_BUDGET;
    for (t, o) in own.ownership.iter().enumerate() {
        let id = plan.subtasks[t].id.as_str();
        for e in o.excludes() {
            let removes_something = o.includes().iter().any(|g| {
                !matches!(
                    glob::relate_within::<&str>(g, e, &[], &mut budget),
                    Relation::Disjoint
                )
            });
            let why = if !removes_something {
                format!("removes nothing that {id}'s other globs own")
            } else if dirs.contains(e.as_str()) {
                format!(
                    "names the directory {e} itself, not the files in it; write \"!{e}/**\" to exclude them"
                )
            } else {
                continue;
            };
            out.findings.push(finding(
                "useless-exclusion",
                Severity::Warning,
                vec![id.into()],
                format!("{id}'s exclusion \"!{e}\" {why}"),
                serde_json::json!({ "exclusion": e }),
            ));
        }
    }
}

/// Whether a verification command proves nothing.
pub fn is_placeholder_command(cmd: &str) -> bool {
    let c = cmd.trim();
    let lower = c.to_ascii_lowercase();
    c.is_empty()
        || matches!(c, "true" | ":" | "exit 0" | "/bin/true" | "echo" | "pass")
        || lower.starts_with("echo ")
        || lower.starts_with("printf ")
        || c.contains("TODO")
        || c.contains("TBD")
        || c.contains("FIXME")
        || (c.starts_with('<') && c.ends_with('>'))
}

/// Whether a verification is a sentence about a command rather than one
/// (the skeleton's "a command that fails until it is done, e.g. …"): its
/// first word is an article or a word no program is named, or it gives an
/// example. Run as a command it fails every attempt for a reason no agent
/// can fix.
pub fn is_prose(cmd: &str) -> bool {
    const SENTENCE_STARTS: [&str; 10] = [
        "a", "an", "the", "ensure", "should", "must", "it", "all", "every", "when",
    ];
    let first = cmd.split_whitespace().next().unwrap_or_default();
    let lower = cmd.to_ascii_lowercase();
    cmd.split_whitespace().count() > 1
        && (SENTENCE_STARTS.contains(&first.to_ascii_lowercase().as_str())
            || lower.contains("e.g.")
            || lower.contains("i.e."))
}

fn review_warnings(
    plan: &Plan,
    paths: &[String],
    own: &Owners,
    serial: &[String],
    out: &mut Analysis,
) {
    let mut by_command: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for s in &plan.subtasks {
        if is_prose(&s.verification) {
            out.findings.push(finding(
                "prose-verification",
                Severity::Blocking,
                vec![s.id.to_string()],
                format!(
                    "{}'s verification {:?} reads as a description, not a command: it would fail every attempt; write the command itself (e.g. `cargo test {}`)",
                    s.id, s.verification, s.id
                ),
                serde_json::Value::Null,
            ));
        } else if is_placeholder_command(&s.verification) {
            out.findings.push(finding(
                "placeholder-verification",
                Severity::Warning,
                vec![s.id.to_string()],
                format!(
                    "{}'s verification {:?} proves nothing; give it a command that fails when the deliverable is missing",
                    s.id, s.verification
                ),
                serde_json::Value::Null,
            ));
        } else {
            by_command
                .entry(s.verification.trim())
                .or_default()
                .push(s.id.to_string());
        }
        for d in &s.depends_on {
            if serial.iter().any(|x| x == d.as_str()) {
                out.findings.push(finding(
                    "depends-on-serial",
                    Severity::Warning,
                    vec![s.id.to_string(), d.to_string()],
                    format!(
                        "{} depends on {d}, which runs serial_only: {} cannot start until it has run alone",
                        s.id, s.id
                    ),
                    serde_json::Value::Null,
                ));
            }
        }
    }
    for (cmd, tasks) in by_command {
        if tasks.len() > 1 {
            out.findings.push(finding(
                "shared-verification",
                Severity::Warning,
                tasks.clone(),
                format!(
                    "{} share the verification {cmd:?}: when it fails it cannot say which subtask broke it",
                    tasks.join(", ")
                ),
                serde_json::json!({ "command": cmd }),
            ));
        }
    }
    // A glob matching nothing is fine for new files in an existing
    // directory; in a directory that does not exist it is likely a typo.
    let mut dirs: HashSet<&str> = HashSet::from([""]);
    for p in paths {
        let mut end = p.len();
        while let Some(i) = p[..end].rfind('/') {
            if !dirs.insert(&p[..i]) {
                break;
            }
            end = i;
        }
    }
    useless_exclusions(plan, own, &dirs, out);
    for (g, (t, text)) in own.globs.iter().enumerate() {
        if own.glob_hits[g] > 0 {
            continue;
        }
        let dir = glob::literal_dir(text);
        if dirs.contains(dir.as_str()) {
            continue;
        }
        // A new directory is what many subtasks make; a typo is a name
        // close to one that exists beside it.
        let Some((missing, near)) = near_miss(&dir, &dirs) else {
            continue;
        };
        let id = plan.subtasks[*t].id.as_str();
        out.findings.push(finding(
            "glob-matches-nothing",
            Severity::Warning,
            vec![id.into()],
            format!(
                "{id}'s glob {text:?} matches no file, and its directory {missing} does not exist but {near} does: a typo?"
            ),
            serde_json::json!({ "glob": text, "directory": missing, "near": near }),
        ));
    }
}

/// For a directory that does not exist: its first missing folder, and an
/// existing folder beside it whose name is within two edits of it (a
/// likely typo), if there is one.
fn near_miss(dir: &str, dirs: &HashSet<&str>) -> Option<(String, String)> {
    let mut parent = String::new();
    for part in dir.split('/') {
        let here = if parent.is_empty() {
            part.to_owned()
        } else {
            format!("{parent}/{part}")
        };
        if !dirs.contains(here.as_str()) {
            let prefix = if parent.is_empty() {
                String::new()
            } else {
                format!("{parent}/")
            };
            let mut near: Vec<&str> = dirs
                .iter()
                .filter_map(|d| d.strip_prefix(prefix.as_str()))
                .filter(|name| !name.is_empty() && !name.contains('/'))
                .filter(|name| {
                    // Short names are near each other by chance.
                    let allowed = match part.len() {
                        0..=2 => 0,
                        3..=5 => 1,
                        _ => 2,
                    };
                    strsim::damerau_levenshtein(name, part) <= allowed && *name != part
                })
                .collect();
            near.sort_unstable();
            return near.first().map(|n| (here.clone(), format!("{prefix}{n}")));
        }
        parent = here;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::format::parse;

    /// A compact subtask spec: (id, globs, verification, deps, serial).
    type Spec = (
        &'static str,
        &'static [&'static str],
        &'static str,
        &'static [&'static str],
        bool,
    );

    fn plan(tasks: &[Spec]) -> Plan {
        let subtasks: Vec<serde_json::Value> = tasks
            .iter()
            .map(|(id, globs, verify, deps, serial)| {
                serde_json::json!({
                    "id": id, "title": id, "owned_globs": globs, "deliverable": "x",
                    "verification": verify, "depends_on": deps, "serial_only": serial,
                })
            })
            .collect();
        let v =
            serde_json::json!({"version": 1, "id": "p", "instruction": "i", "subtasks": subtasks});
        parse(v.to_string().as_bytes()).expect("valid test plan")
    }

    fn paths(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn codes(a: &Analysis) -> Vec<&'static str> {
        a.findings.iter().map(|f| f.code).collect()
    }

    fn rules() -> Vec<PinchRule> {
        super::super::pinch::rules(&[], &[])
    }

    fn three_clean() -> Vec<Spec> {
        vec![
            ("a", &["src/a/**"], "make a", &[], false),
            ("b", &["src/b/**"], "make b", &[], false),
            ("c", &["src/c/**"], "make c", &[], false),
        ]
    }

    #[test]
    fn a_clean_plan_has_no_findings() {
        let p = plan(&three_clean());
        let a = analyse(
            &p,
            &paths(&["src/a/x.rs", "src/b/y.rs", "src/c/z.rs"]),
            &rules(),
        );
        assert!(a.findings.is_empty(), "{:?}", a.findings);
        assert_eq!(a.independent, ["a", "b", "c"]);
        assert_eq!(a.waves, vec![vec!["a", "b", "c"]]);
    }

    #[test]
    fn unknown_and_self_dependencies() {
        let mut t = three_clean();
        t[0].3 = &["nope"];
        t[1].3 = &["b"];
        let a = analyse(&plan(&t), &[], &rules());
        assert!(codes(&a).contains(&"unknown-dependency"));
        assert!(codes(&a).contains(&"self-dependency"));
        assert!(a.graph_broken());
        let mut ok = three_clean();
        ok[2].3 = &["a"];
        let a = analyse(&plan(&ok), &paths(&["src/a/x"]), &rules());
        assert!(!a.graph_broken());
        assert_eq!(a.waves, vec![vec!["a", "b"], vec!["c"]]);
    }

    #[test]
    fn cycles_are_printed() {
        let mut t = three_clean();
        t[0].3 = &["c"];
        t[1].3 = &["a"];
        t[2].3 = &["b"];
        let a = analyse(&plan(&t), &[], &rules());
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "dependency-cycle")
            .expect("cycle");
        assert!(f.message.contains("→"), "{}", f.message);
        let cycle = f.details["cycle"].as_array().expect("cycle list");
        assert_eq!(cycle.first(), cycle.last());
        assert_eq!(cycle.len(), 4);
        assert!(a.order.is_empty());
    }

    #[test]
    fn overlap_on_real_files_reports_examples_and_count() {
        let mut t = three_clean();
        t[1].1 = &["src/**/*.rs"];
        let a = analyse(
            &plan(&t),
            &paths(&["src/a/x.rs", "src/a/y.rs", "src/a/z.md"]),
            &rules(),
        );
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "ownership-overlap")
            .expect("overlap");
        assert_eq!(f.subtasks, ["a", "b"]);
        assert_eq!(f.details["count"], 2);
        assert_eq!(f.severity, Severity::Blocking);
        // Disjoint globs over the same files do not trigger.
        let a = analyse(
            &plan(&three_clean()),
            &paths(&["src/a/x.rs", "src/b/x.rs"]),
            &rules(),
        );
        assert!(!codes(&a).contains(&"ownership-overlap"));
    }

    #[test]
    fn overlap_at_pattern_level_for_files_not_yet_there() {
        let mut t = three_clean();
        t[1].1 = &["src/a/new/*.rs"];
        let a = analyse(&plan(&t), &[], &rules());
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "ownership-overlap")
            .expect("overlap");
        let w = f.details["witness"].as_str().expect("witness");
        assert!(w.starts_with("src/a/new/") && w.ends_with(".rs"), "{w}");
        // Same directory, disjoint extensions: no overlap.
        let mut t = three_clean();
        t[0].1 = &["web/*.ts"];
        t[1].1 = &["web/*.css"];
        let a = analyse(&plan(&t), &[], &rules());
        assert!(
            !codes(&a).contains(&"ownership-overlap"),
            "{:?}",
            a.findings
        );
    }

    /// Four nested groups of four alternatives, 4^4 = 256 combinations:
    /// exactly as many as the pattern-level rule will expand.
    const AT_LIMIT: &str = "gen/{a,b,c,d}/{a,b,c,d}/{a,b,c,d}/{a,b,c,d}/x.rs";
    /// The same with one more two-way group: 512 combinations, past what
    /// the index expands; the automata read braces as they are.
    const PAST_LIMIT: &str = "gen/{a,b,c,d}/{a,b,c,d}/{a,b,c,d}/{a,b,c,d}/{x,y}.rs";

    fn brace_plan(big: &'static [&'static str], small: &'static [&'static str]) -> Plan {
        plan(&[
            ("a", big, "make a", &[], false),
            ("b", small, "make b", &[], false),
            ("c", &["src/c/**"], "make c", &[], false),
        ])
    }

    #[test]
    fn an_undecidable_glob_pair_is_a_possible_overlap_warning_not_a_block() {
        // Which of 2^18 positions held the `a`: no finite search of this
        // size can rule it out, so the rule gives up on this pair.
        let q = "?".repeat(18);
        let a_glob: &'static str = Box::leak(format!("gen/*a{q}").into_boxed_str());
        let b_glob: &'static str = Box::leak(format!("gen/*b{q}").into_boxed_str());
        let big: &'static [&'static str] = Box::leak(vec![a_glob].into_boxed_slice());
        let small: &'static [&'static str] = Box::leak(vec![b_glob].into_boxed_slice());
        // No file exists yet, so only the pattern-level rule can speak.
        let a = analyse(&brace_plan(big, small), &[], &rules());
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "possible-overlap" && f.subtasks == ["a", "b"])
            .unwrap_or_else(|| panic!("no possible-overlap for a and b: {:?}", a.findings));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.details["globs"], serde_json::json!([a_glob, b_glob]));
        assert!(f.message.contains("states"), "{}", f.message);
        // It does not pose as a decided overlap, and approval is not blocked.
        assert!(
            !codes(&a).contains(&"ownership-overlap"),
            "{:?}",
            a.findings
        );
        assert_eq!(a.blocking(), 0, "{:?}", a.findings);
    }

    #[test]
    fn braces_past_the_expansion_limit_are_still_decided_exactly() {
        assert_eq!(glob::expand_braces(AT_LIMIT).expect("at limit").len(), 256);
        assert!(glob::expand_braces(PAST_LIMIT).is_err());
        let a = analyse(
            &brace_plan(&[PAST_LIMIT], &["gen/a/b/c/d/x.rs"]),
            &[],
            &rules(),
        );
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "ownership-overlap")
            .unwrap_or_else(|| panic!("{:?}", a.findings));
        assert_eq!(f.details["witness"], "gen/a/b/c/d/x.rs");
        let a = analyse(
            &brace_plan(&[PAST_LIMIT], &["gen/a/b/c/d/z.rs"]),
            &[],
            &rules(),
        );
        assert_eq!(a.blocking(), 0, "{:?}", a.findings);
        assert!(!codes(&a).contains(&"possible-overlap"), "{:?}", a.findings);
    }

    #[test]
    fn a_decidable_brace_glob_pair_gets_a_definite_answer() {
        // At the limit, overlapping: a blocking overlap with a witness.
        let a = analyse(
            &brace_plan(&[AT_LIMIT], &["gen/a/b/c/d/x.rs"]),
            &[],
            &rules(),
        );
        assert!(!codes(&a).contains(&"possible-overlap"), "{:?}", a.findings);
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "ownership-overlap")
            .expect("overlap");
        assert_eq!(f.subtasks, ["a", "b"]);
        assert_eq!(f.severity, Severity::Blocking);
        assert_eq!(f.details["witness"], "gen/a/b/c/d/x.rs");
        // At the limit, disjoint (the file name differs): no finding at all.
        let a = analyse(
            &brace_plan(&[AT_LIMIT], &["gen/a/b/c/d/y.rs"]),
            &[],
            &rules(),
        );
        assert!(!codes(&a).contains(&"possible-overlap"), "{:?}", a.findings);
        assert!(
            !codes(&a).contains(&"ownership-overlap"),
            "{:?}",
            a.findings
        );
        assert_eq!(a.blocking(), 0, "{:?}", a.findings);
    }

    #[test]
    fn pinch_points_force_serial_and_block_when_shared() {
        let mut t = three_clean();
        t[0].1 = &["src/a/**", "Cargo.lock"];
        let a = analyse(&plan(&t), &paths(&["src/a/x", "Cargo.lock"]), &rules());
        assert_eq!(a.forced_serial, ["a"]);
        assert!(codes(&a).contains(&"pinch-serial"));
        assert!(!a.independent.contains(&"a".to_owned()));
        // Two subtasks adding files to one migrations directory collide.
        let mut t = three_clean();
        t[0].1 = &["db/migrations/0003_*.sql"];
        t[1].1 = &["db/migrations/0004_*.sql"];
        let a = analyse(
            &plan(&t),
            &paths(&["db/migrations/0001_init.sql"]),
            &rules(),
        );
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "pinch-shared")
            .expect("shared");
        assert_eq!(f.details["unit"], "db/migrations");
        assert_eq!(f.severity, Severity::Blocking);
    }

    #[test]
    fn a_broad_glob_is_not_flagged_for_a_pinch_directory_that_does_not_exist() {
        let mut t = three_clean();
        t[0].1 = &["src/**"];
        t[1].1 = &["docs/**"];
        t[2].1 = &["tests/**"];
        let a = analyse(
            &plan(&t),
            &paths(&["src/main.rs", "docs/x.md", "tests/t.rs"]),
            &rules(),
        );
        assert!(a.forced_serial.is_empty(), "{:?}", a.findings);
        // ... but it is when the pinch file exists under it.
        let a = analyse(
            &plan(&t),
            &paths(&[
                "src/main.rs",
                "src/migrations/0001.sql",
                "docs/x.md",
                "tests/t.rs",
            ]),
            &rules(),
        );
        assert_eq!(a.forced_serial, ["a"]);
    }

    #[test]
    fn fan_out_below_three_is_a_warning() {
        let mut t = three_clean();
        t[2].3 = &["a"];
        let a = analyse(&plan(&t), &paths(&["src/a/x"]), &rules());
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "fan-out")
            .expect("fan-out");
        assert_eq!(f.severity, Severity::Warning);
        assert!(
            !codes(&analyse(
                &plan(&three_clean()),
                &paths(&["src/a/x"]),
                &rules()
            ))
            .contains(&"fan-out")
        );
    }

    #[test]
    fn a_verification_that_describes_a_command_blocks() {
        let mut t = three_clean();
        t[0].2 = "a command that fails until it is done, e.g. cargo test first";
        let a = analyse(&plan(&t), &paths(&["src/a/x"]), &rules());
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "prose-verification")
            .expect("prose-verification");
        assert_eq!(f.severity, Severity::Blocking);
        for cmd in [
            "The tests pass",
            "ensure the build works",
            "run it, i.e. make",
        ] {
            assert!(is_prose(cmd), "{cmd:?}");
        }
        for cmd in ["cargo test first", "test -s docs/first.md", "make all", "a"] {
            assert!(!is_prose(cmd), "{cmd:?}");
        }
    }

    #[test]
    fn review_warnings() {
        let mut t = three_clean();
        t[0].2 = "true";
        t[1].2 = "cargo test";
        t[2].2 = "cargo test";
        let a = analyse(
            &plan(&t),
            &paths(&["src/a/x", "src/b/x", "src/c/x"]),
            &rules(),
        );
        let c = codes(&a);
        assert!(c.contains(&"placeholder-verification"));
        assert!(c.contains(&"shared-verification"));
        for cmd in ["", "echo done", "TODO", "exit 0", ":"] {
            assert!(is_placeholder_command(cmd), "{cmd:?}");
        }
        for cmd in ["cargo test -p a", "pytest tests/test_a.py", "npm test -- a"] {
            assert!(!is_placeholder_command(cmd), "{cmd:?}");
        }
    }

    #[test]
    fn overlaps_between_subtasks_the_dependencies_order_are_information() {
        // A chain a → b → c all editing the changelog; c and d (after c)
        // a new file; e beside them all.
        let t: Vec<Spec> = vec![
            ("a", &["src/a/**", "CHANGELOG.md"], "make a", &[], false),
            ("b", &["src/b/**", "CHANGELOG.md"], "make b", &["a"], false),
            (
                "c",
                &["src/c/**", "CHANGELOG.md", "src/new.rs"],
                "make c",
                &["b"],
                false,
            ),
            ("d", &["src/d/**", "src/new.rs"], "make d", &["c"], false),
            ("e", &["src/e/**"], "make e", &[], false),
        ];
        let files = paths(&["CHANGELOG.md", "src/a/x", "src/b/x", "src/c/x", "src/d/x"]);
        let a = analyse(&plan(&t), &files, &rules());
        assert_eq!(a.blocking(), 0, "{:?}", a.findings);
        let ordered: Vec<&Finding> = a
            .findings
            .iter()
            .filter(|f| f.code == "ordered-overlap")
            .collect();
        // One finding per group of owners, not one per pair.
        assert_eq!(ordered.len(), 2, "{ordered:?}");
        let changelog = ordered
            .iter()
            .find(|f| f.details["examples"][0] == "CHANGELOG.md")
            .expect("the changelog");
        assert_eq!(changelog.subtasks, ["a", "b", "c"]);
        assert_eq!(changelog.severity, Severity::Info);
        assert!(
            changelog.message.contains("a → b → c"),
            "{}",
            changelog.message
        );
        let new = ordered
            .iter()
            .find(|f| f.details["examples"][0] == "src/new.rs")
            .expect("the new file");
        assert_eq!(new.subtasks, ["c", "d"]);
        // a is still independent; the overlap does not hide it.
        assert!(
            a.independent.contains(&"a".to_owned()),
            "{:?}",
            a.independent
        );

        // Without the order, the same overlap blocks, pair by pair.
        let t: Vec<Spec> = vec![
            ("a", &["src/a/**", "CHANGELOG.md"], "make a", &[], false),
            ("b", &["src/b/**", "CHANGELOG.md"], "make b", &["a"], false),
            ("c", &["src/c/**", "CHANGELOG.md"], "make c", &[], false),
        ];
        let a = analyse(&plan(&t), &files, &rules());
        let blocking: Vec<&Vec<String>> = a
            .findings
            .iter()
            .filter(|f| f.code == "ownership-overlap")
            .map(|f| &f.subtasks)
            .collect();
        assert_eq!(
            blocking,
            [
                &vec!["a".to_owned(), "c".to_owned()],
                &vec!["b".to_owned(), "c".to_owned()]
            ]
        );
    }

    #[test]
    fn a_pinch_point_shared_by_ordered_subtasks_runs_serial_without_blocking() {
        let t: Vec<Spec> = vec![
            ("a", &["src/a/**", "Cargo.lock"], "make a", &[], false),
            ("b", &["src/b/**", "Cargo.lock"], "make b", &["a"], false),
            ("c", &["src/c/**"], "make c", &[], false),
        ];
        let files = paths(&["Cargo.lock", "Cargo.toml", "src/a/x", "src/b/x", "src/c/x"]);
        let a = analyse(&plan(&t), &files, &rules());
        assert_eq!(a.blocking(), 0, "{:?}", a.findings);
        assert!(codes(&a).contains(&"ordered-pinch"), "{:?}", a.findings);
        assert_eq!(a.serial, ["a", "b"]);
        // Unordered, it blocks as before.
        let t: Vec<Spec> = vec![
            ("a", &["src/a/**", "Cargo.lock"], "make a", &[], false),
            ("b", &["src/b/**", "Cargo.lock"], "make b", &[], false),
        ];
        let a = analyse(&plan(&t), &files, &rules());
        assert!(codes(&a).contains(&"pinch-shared"), "{:?}", a.findings);
    }

    #[test]
    fn a_new_directory_is_not_taken_for_a_typo() {
        let mut t = three_clean();
        t[0].1 = &["docs/guide/intro.md"];
        let a = analyse(
            &plan(&t),
            &paths(&["src/a/x", "src/b/x", "src/c/x"]),
            &rules(),
        );
        assert!(
            !codes(&a).contains(&"glob-matches-nothing"),
            "{:?}",
            a.findings
        );
    }

    #[test]
    fn typo_globs_warn_only_when_the_directory_is_missing() {
        let mut t = three_clean();
        t[0].1 = &["scr/a/**"];
        let a = analyse(
            &plan(&t),
            &paths(&["src/a/x", "src/b/x", "src/c/x"]),
            &rules(),
        );
        assert!(codes(&a).contains(&"glob-matches-nothing"));
        let mut t = three_clean();
        t[0].1 = &["src/a/new_file.rs"];
        let a = analyse(
            &plan(&t),
            &paths(&["src/a/x", "src/b/x", "src/c/x"]),
            &rules(),
        );
        assert!(
            !codes(&a).contains(&"glob-matches-nothing"),
            "{:?}",
            a.findings
        );
    }

    #[test]
    fn depending_on_a_serial_subtask_warns() {
        let mut t = three_clean();
        t[0].4 = true;
        t[1].3 = &["a"];
        let a = analyse(
            &plan(&t),
            &paths(&["src/a/x", "src/b/x", "src/c/x"]),
            &rules(),
        );
        assert!(codes(&a).contains(&"depends-on-serial"));
        let a = analyse(&plan(&three_clean()), &paths(&["src/a/x"]), &rules());
        assert!(!codes(&a).contains(&"depends-on-serial"));
    }

    #[test]
    fn exclusions_remove_real_and_pattern_overlaps() {
        let mut t = three_clean();
        t[0].1 = &["src/**", "!src/b/**", "!src/c/**"];
        let files = paths(&["src/a/x.rs", "src/b/y.rs", "src/c/z.rs", "src/top.rs"]);
        let a = analyse(&plan(&t), &files, &rules());
        assert!(
            !codes(&a).contains(&"ownership-overlap"),
            "{:?}",
            a.findings
        );
        assert_eq!(a.independent, ["a", "b", "c"]);
        // Without the exclusions it overlaps both on files and patterns.
        t[0].1 = &["src/**"];
        let a = analyse(&plan(&t), &files, &rules());
        assert_eq!(
            a.findings
                .iter()
                .filter(|f| f.code == "ownership-overlap")
                .count(),
            2
        );
        // `!` under `**`: every tests directory at any depth.
        let mut t = three_clean();
        t[0].1 = &["**/*.rs", "!**/tests/**", "!src/b/**", "!src/c/**"];
        t[1].1 = &["src/b/**", "crates/*/tests/**"];
        let a = analyse(
            &plan(&t),
            &paths(&["crates/x/tests/t.rs", "crates/x/lib.rs"]),
            &rules(),
        );
        assert!(
            !codes(&a).contains(&"ownership-overlap"),
            "{:?}",
            a.findings
        );
    }

    #[test]
    fn useless_exclusions_warn() {
        let mut t = three_clean();
        t[0].1 = &["src/a/**", "!docs/**", "!src/a/gen"];
        let a = analyse(
            &plan(&t),
            &paths(&["src/a/gen/x.rs", "src/b/x", "src/c/x"]),
            &rules(),
        );
        let msgs: Vec<&str> = a
            .findings
            .iter()
            .filter(|f| f.code == "useless-exclusion")
            .map(|f| f.message.as_str())
            .collect();
        assert_eq!(msgs.len(), 2, "{msgs:?}");
        assert!(
            msgs.iter()
                .any(|m| m.contains("\"!docs/**\" removes nothing")),
            "{msgs:?}"
        );
        assert!(
            msgs.iter().any(|m| m.contains("write \"!src/a/gen/**\"")),
            "{msgs:?}"
        );
    }

    #[test]
    fn owning_a_manifest_without_its_lockfile_says_how_to_change_dependencies() {
        let tree = paths(&[
            "Cargo.toml",
            "Cargo.lock",
            "crates/a/Cargo.toml",
            "crates/a/src/lib.rs",
            "crates/b/Cargo.toml",
            "crates/c/Cargo.toml",
        ]);
        let t = vec![
            ("a", &["crates/a/**"][..], "cargo test -p a", &[][..], false),
            ("b", &["crates/b/**"][..], "cargo test -p b", &[][..], false),
            ("c", &["crates/c/**"][..], "cargo test -p c", &[][..], false),
        ];
        let a = analyse(&plan(&t), &tree, &rules());
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "manifest-lockfile")
            .unwrap_or_else(|| panic!("{:?}", a.findings));
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.subtasks, ["a", "b", "c"]);
        assert!(
            f.message.contains("add \"Cargo.lock\" to its owned_globs"),
            "{}",
            f.message
        );
        // The fix: the subtask that changes dependencies owns the lockfile
        // and runs serial; the others' manifests are then someone else's
        // business, which is still said.
        let t = vec![
            (
                "a",
                &["crates/a/**", "Cargo.lock"][..],
                "cargo test -p a",
                &[][..],
                false,
            ),
            (
                "b",
                &["crates/b/**", "!crates/b/Cargo.toml"][..],
                "cargo test -p b",
                &["a"][..],
                false,
            ),
            (
                "c",
                &["crates/c/**", "!crates/c/Cargo.toml"][..],
                "cargo test -p c",
                &["a"][..],
                false,
            ),
        ];
        let a = analyse(&plan(&t), &tree, &rules());
        assert!(
            !codes(&a).contains(&"manifest-lockfile"),
            "{:?}",
            a.findings
        );
        assert_eq!(a.forced_serial, ["a"]);
        assert_eq!(a.blocking(), 0, "{:?}", a.findings);
        // With the lockfile owned elsewhere, the fix names the owner.
        let t = vec![
            (
                "lock",
                &["Cargo.lock"][..],
                "cargo check --locked",
                &[][..],
                false,
            ),
            ("b", &["crates/b/**"][..], "cargo test -p b", &[][..], false),
            (
                "c",
                &["crates/c/**", "!crates/c/Cargo.toml"][..],
                "cargo test -p c",
                &[][..],
                false,
            ),
        ];
        let a = analyse(&plan(&t), &tree, &rules());
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "manifest-lockfile")
            .unwrap_or_else(|| panic!("{:?}", a.findings));
        assert_eq!(f.subtasks, ["b"]);
        assert_eq!(f.details["owner"], "lock");
        assert!(
            f.message.contains("add \"!crates/b/Cargo.toml\" to b's"),
            "{}",
            f.message
        );
        // When the lockfile's owner already runs after b, "make b depend
        // on it" would close a cycle: the fix is the owner's alone.
        let t = vec![
            ("b", &["crates/b/**"][..], "cargo test -p b", &[][..], false),
            (
                "lock",
                &["Cargo.lock"][..],
                "cargo check --locked",
                &["b"][..],
                false,
            ),
        ];
        let a = analyse(&plan(&t), &tree, &rules());
        let f = a
            .findings
            .iter()
            .find(|f| f.code == "manifest-lockfile")
            .unwrap_or_else(|| panic!("{:?}", a.findings));
        assert!(!f.message.contains("depend_on"), "{}", f.message);
        assert!(
            f.message.contains("lock, which runs after b"),
            "{}",
            f.message
        );
    }

    #[test]
    fn the_pinch_point_list_is_reported() {
        let a = analyse(
            &plan(&three_clean()),
            &paths(&["Cargo.lock", "fuzz/Cargo.lock", ".github/workflows/ci.yml"]),
            &rules(),
        );
        let units: Vec<&str> = a.pinch_points.iter().map(|p| p.unit.as_str()).collect();
        assert_eq!(
            units,
            [".github/workflows", "Cargo.lock", "fuzz/Cargo.lock"]
        );
    }

    /// A glob matching exactly `path`.
    fn literal_glob(path: &str) -> String {
        let mut out = String::new();
        for c in path.chars() {
            if "[]{}*?!,".contains(c) {
                out.push('\\');
            }
            out.push(c);
        }
        out
    }

    #[test]
    fn overlap_with_a_literal_path_follows_the_ownership_table() {
        for (globs, path, owned) in crate::plan::glob::tests::ownership_cases() {
            let literal = literal_glob(&path);
            let subtasks = serde_json::json!([
                {"id": "a", "title": "a", "owned_globs": globs, "deliverable": "x", "verification": "make a"},
                {"id": "b", "title": "b", "owned_globs": [literal], "deliverable": "x", "verification": "make b"},
            ]);
            let v = serde_json::json!({"version": 1, "id": "p", "instruction": "i", "subtasks": subtasks});
            let p = parse(v.to_string().as_bytes()).expect("valid table plan");
            // Decided on the real file, and at pattern level before it exists.
            for tree in [vec![path.clone()], Vec::new()] {
                let a = analyse(&p, &tree, &[]);
                let overlap = codes(&a).contains(&"ownership-overlap");
                assert_eq!(
                    overlap, owned,
                    "{globs:?} vs {path} (tree {tree:?}): {:?}",
                    a.findings
                );
                assert!(!codes(&a).contains(&"possible-overlap"), "{:?}", a.findings);
            }
        }
    }

    #[test]
    fn an_exclusion_that_removes_the_only_overlap_leaves_none() {
        let t = vec![
            (
                "flags",
                &["crates/core/flags/**", "!crates/core/flags/complete/**"][..],
                "make f",
                &[][..],
                false,
            ),
            (
                "complete",
                &["crates/core/flags/complete/**"][..],
                "make c",
                &[][..],
                false,
            ),
            ("other", &["crates/other/**"][..], "make o", &[][..], false),
        ];
        let files = paths(&[
            "crates/core/flags/mod.rs",
            "crates/core/flags/complete/bash.rs",
            "crates/other/x.rs",
        ]);
        for tree in [files, Vec::new()] {
            let a = analyse(&plan(&t), &tree, &rules());
            assert_eq!(a.blocking(), 0, "{:?}", a.findings);
            assert_eq!(a.independent, ["flags", "complete", "other"]);
        }
        let mut t = t;
        t[0].1 = &["crates/core/flags/**"];
        let a = analyse(&plan(&t), &[], &rules());
        assert!(codes(&a).contains(&"ownership-overlap"), "{:?}", a.findings);
    }
}
