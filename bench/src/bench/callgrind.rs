//! Reading a `valgrind --tool=callgrind` output file: each function's own
//! instructions and, per call edge, the instructions of the call (callee
//! included) and how many calls there were.
//!
//! Only what the instructions section needs: one part, the first event
//! (`Ir`), functions known by their demangled names. Callgrind names a
//! function that recurses through another by its depth (`poll'2`), which
//! keeps a nested poll apart from the outer one.

use std::collections::HashMap;

use anyhow::{Context, Result, bail};

/// One profile: what each function cost.
#[derive(Debug, Default)]
pub(crate) struct Profile {
    /// Every instruction of the run.
    pub(crate) total: u64,
    names: Vec<String>,
    index: HashMap<String, usize>,
    own: Vec<u64>,
    /// Per caller: callee, calls, instructions of those calls.
    edges: Vec<HashMap<usize, (u64, u64)>>,
}

/// A set of functions (a stage), by index.
#[derive(Debug, Clone)]
pub(crate) struct Set(Vec<bool>);

impl Set {
    pub(crate) fn contains(&self, f: usize) -> bool {
        self.0.get(f).copied().unwrap_or(false)
    }

    fn union(&self, other: &Set) -> Set {
        Set(self.0.iter().zip(&other.0).map(|(a, b)| *a || *b).collect())
    }

    /// This set without the functions of `other`.
    pub(crate) fn without(&self, other: &Set) -> Set {
        Set(self
            .0
            .iter()
            .zip(&other.0)
            .map(|(a, b)| *a && !*b)
            .collect())
    }
}

/// The allocator's entry points in a Rust program (name patterns), whichever
/// allocator is global: the count of calls into them from functions outside
/// them is the count of allocations. The Rust shims alone are not enough:
/// with link-time optimisation a caller may have the shim inlined and call
/// the global allocator (`mi_malloc_aligned`) or the system allocator
/// (`__rdl_alloc`, `malloc`) directly. The C entry points are matched by
/// their whole names: the allocators' inner functions (`malloc_consolidate`,
/// called by `free`) are no allocation.
const ALLOCATORS: &[&str] = &[
    "__rustc::__rust_alloc",
    "__rustc::__rust_realloc",
    "__rustc::__rdl_alloc",
    "__rustc::__rdl_realloc",
    "^malloc$",
    "^calloc$",
    "^realloc$",
    "^posix_memalign$",
    "^aligned_alloc$",
    "^mi_malloc_aligned$",
    "^mi_zalloc_aligned$",
    "^mi_realloc_aligned$",
];

impl Profile {
    /// Parses the text of a callgrind output file.
    pub(crate) fn parse(text: &str) -> Result<Profile> {
        let mut p = Profile::default();
        // Name compression: `fn=(12) name` defines 12, `fn=(12)` uses it;
        // `fn` and `cfn` share one table.
        let mut compressed: HashMap<String, usize> = HashMap::new();
        let mut positions = 1usize;
        let mut current: Option<usize> = None;
        let mut callee: Option<usize> = None;
        // A `calls=` line was read: the next cost line is that call's.
        let mut call: Option<(usize, u64)> = None;
        // A `jump=`/`jcnd=` line: the next line is a position, not a cost.
        let mut skip_next = false;
        let mut summary = None;
        for (n, line) in text.lines().enumerate() {
            let at = || format!("line {}", n + 1);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if skip_next {
                skip_next = false;
                continue;
            }
            let first = line.as_bytes()[0];
            if first.is_ascii_digit() || matches!(first, b'+' | b'-' | b'*') {
                let cost = cost_of(line, positions).with_context(at)?;
                let Some(f) = current else {
                    bail!("{}: a cost line before any `fn=`", at());
                };
                match call.take() {
                    Some((g, count)) => {
                        if g != f {
                            let e = p.edges[f].entry(g).or_insert((0, 0));
                            e.0 += count;
                            e.1 += cost;
                        }
                    }
                    None => p.own[f] += cost,
                }
                continue;
            }
            let Some((key, value)) = line.split_once([':', '=']) else {
                continue;
            };
            match key {
                "fn" => current = Some(p.function(&mut compressed, value).with_context(at)?),
                "cfn" | "cfnc" => {
                    callee = Some(p.function(&mut compressed, value).with_context(at)?)
                }
                "calls" => {
                    let count = value
                        .split_whitespace()
                        .next()
                        .and_then(|c| c.parse().ok())
                        .with_context(|| format!("{}: a `calls=` line without a count", at()))?;
                    let g = callee
                        .with_context(|| format!("{}: a `calls=` line without `cfn=`", at()))?;
                    call = Some((g, count));
                }
                "jump" | "jcnd" => skip_next = true,
                "positions" => positions = value.split_whitespace().count().max(1),
                "events" if value.split_whitespace().next() != Some("Ir") => {
                    bail!("{}: the first event is not Ir: {value}", at());
                }
                "totals" | "summary" => {
                    summary = value.split_whitespace().next().and_then(|v| v.parse().ok());
                }
                "part" if value.trim() != "1" => {
                    bail!("{}: more than one part (dump) in the file", at())
                }
                _ => {}
            }
        }
        p.total = match summary {
            Some(t) => t,
            None => p.own.iter().sum(),
        };
        Ok(p)
    }

    fn function(&mut self, compressed: &mut HashMap<String, usize>, value: &str) -> Result<usize> {
        let (id, name) = match value.strip_prefix('(') {
            Some(rest) => {
                let (id, name) = rest.split_once(')').context("an unclosed `(id)`")?;
                (Some(id), name.strip_prefix(' '))
            }
            None => (None, Some(value)),
        };
        match (id, name) {
            (Some(id), None) => compressed
                .get(id)
                .copied()
                .with_context(|| format!("function ({id}) used before it was named")),
            (id, Some(name)) => {
                let f = match self.index.get(name) {
                    Some(&f) => f,
                    None => {
                        let f = self.names.len();
                        self.names.push(name.to_owned());
                        self.index.insert(name.to_owned(), f);
                        self.own.push(0);
                        self.edges.push(HashMap::new());
                        f
                    }
                };
                if let Some(id) = id {
                    compressed.insert(id.to_owned(), f);
                }
                Ok(f)
            }
            (None, None) => bail!("an empty function name"),
        }
    }

    /// The functions whose names contain one of `patterns` (see
    /// [`name_matches`]).
    pub(crate) fn matching(&self, patterns: &[&str]) -> Set {
        Set(self
            .names
            .iter()
            .map(|name| patterns.iter().any(|p| name_matches(name, p)))
            .collect())
    }

    /// The names of the functions of `set`, the costliest first, with
    /// their own instructions and those of their calls outside `every`.
    pub(crate) fn members(&self, set: &Set, every: &Set) -> Vec<(&str, u64)> {
        let mut out: Vec<(&str, u64)> = (0..self.names.len())
            .filter(|&f| set.contains(f))
            .map(|f| (self.names[f].as_str(), self.cost_of_function(f, every)))
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        out
    }

    fn cost_of_function(&self, f: usize, every: &Set) -> u64 {
        self.own[f]
            + self.edges[f]
                .iter()
                .filter(|(g, _)| !every.contains(**g))
                .map(|(_, (_, cost))| cost)
                .sum::<u64>()
    }

    /// What `set` costs: its functions' own instructions plus their calls
    /// to functions outside `every` (the union of all stages), callees
    /// included. Exact as long as no function outside `every` that the set
    /// calls leads back into `every` (see [`Profile::leaks`]).
    pub(crate) fn cost(&self, set: &Set, every: &Set) -> u64 {
        (0..self.names.len())
            .filter(|&f| set.contains(f))
            .map(|f| self.cost_of_function(f, every))
            .sum()
    }

    /// Every allocation of the run.
    pub(crate) fn allocations(&self) -> u64 {
        let allocators = self.matching(ALLOCATORS);
        self.edges
            .iter()
            .enumerate()
            .filter(|(f, _)| !allocators.contains(*f))
            .flat_map(|(_, e)| e.iter())
            .filter(|(g, _)| allocators.contains(**g))
            .map(|(_, (calls, _))| calls)
            .sum()
    }

    /// The calls out of `set` into functions outside `every` that lead
    /// back into `every` (through anything): where [`Profile::cost`] may
    /// count instructions twice. As (caller, callee, instructions of those
    /// calls). Functions are known by name, so two functions of one name
    /// (instances of a generic) count as one here, and some of these ways
    /// back are only apparent.
    pub(crate) fn leaks(&self, set: &Set, every: &Set) -> Vec<(String, String, u64)> {
        // Which functions reach `every`, found backwards from it.
        let mut callers: Vec<Vec<usize>> = vec![Vec::new(); self.names.len()];
        for (f, e) in self.edges.iter().enumerate() {
            for &g in e.keys() {
                callers[g].push(f);
            }
        }
        let mut reaches = vec![false; self.names.len()];
        let mut stack: Vec<usize> = (0..self.names.len())
            .filter(|&f| every.contains(f))
            .collect();
        while let Some(g) = stack.pop() {
            for &f in &callers[g] {
                if !every.contains(f) && !reaches[f] {
                    reaches[f] = true;
                    stack.push(f);
                }
            }
        }
        let mut out = Vec::new();
        for f in (0..self.names.len()).filter(|&f| set.contains(f)) {
            for (&g, &(_, cost)) in &self.edges[f] {
                if !every.contains(g) && reaches[g] {
                    out.push((self.names[f].clone(), self.names[g].clone(), cost));
                }
            }
        }
        out.sort();
        out
    }

    /// The union of `sets`.
    pub(crate) fn union(&self, sets: &[Set]) -> Set {
        sets.iter()
            .fold(Set(vec![false; self.names.len()]), |acc, s| acc.union(s))
    }
}

/// `pattern` is a fragment of `name`; `^` anchors it at the start, `$` at
/// the end.
fn name_matches(name: &str, pattern: &str) -> bool {
    let (start, pattern) = match pattern.strip_prefix('^') {
        Some(p) => (true, p),
        None => (false, pattern),
    };
    let (end, pattern) = match pattern.strip_suffix('$') {
        Some(p) => (true, p),
        None => (false, pattern),
    };
    match (start, end) {
        (true, true) => name == pattern,
        (true, false) => name.starts_with(pattern),
        (false, true) => name.ends_with(pattern),
        (false, false) => name.contains(pattern),
    }
}

/// The first event of a cost line, after its `positions` position fields.
fn cost_of(line: &str, positions: usize) -> Result<u64> {
    let mut fields = line.split_whitespace().skip(positions);
    match fields.next() {
        None => Ok(0),
        Some(v) => v
            .parse()
            .with_context(|| format!("not a count: {v:?} in {line:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up run: `main` calls `stage` (which allocates and calls a
    /// helper) and `other`; `stage` is also reached again through `poll`.
    const FILE: &str = "# callgrind format
version: 1
positions: line
events: Ir
summary: 970

ob=(1) /bin/x
fl=(1) a.rs
fn=(1) main
10 100
cfn=(2) stage
calls=2 20
11 450
cfn=(3) other_fn
calls=1 30
12 300
cfn=(5) poll
calls=1 30
+1 70

fn=(2)
20 200
cfn=(4) helper
calls=4 40
+2 250
cfn=(6) __rustc::__rust_alloc
calls=3 50
* 50

fn=(4)
40 150
cfn=(6)
calls=1 50
* 100
cfn=(7) malloc
calls=2 60
* 20

fn=(6)
50 150
cfn=(7)
calls=4 60
* 30

fn=(7)
60 50

fn=(3)
30 300

fn=(5)
30 20
cfn=(2)
calls=1 20
* 50
";

    #[test]
    fn costs_and_calls_are_read() {
        let p = Profile::parse(FILE).unwrap();
        assert_eq!(p.total, 970);
        let stage = p.matching(&["stage"]);
        let other = p.matching(&["_fn$"]);
        let every = p.union(&[stage.clone(), other.clone()]);
        // Own 200 plus helper (250) and the allocator (50): 500, the
        // instructions of the calls from main (450) and from poll (50).
        assert_eq!(p.cost(&stage, &every), 500);
        assert_eq!(p.cost(&other, &every), 300);
        // Three calls of the shim, one more from `helper`, and two of
        // `malloc` straight from `helper` (an inlined shim); the shim's own
        // calls of `malloc` are the same allocations.
        assert_eq!(p.allocations(), 6);
        // `$` anchors the end; a plain pattern is a substring.
        assert_eq!(p.cost(&p.matching(&["other$"]), &every), 0);
        assert_eq!(p.cost(&p.matching(&["other"]), &every), 300);
        assert_eq!(p.cost(&p.matching(&["^other_fn$"]), &every), 300);
        assert_eq!(p.cost(&p.matching(&["^ther_fn"]), &every), 0);
        assert_eq!(p.members(&stage, &every), vec![("stage", 500)]);
    }

    #[test]
    fn a_way_back_into_the_stages_is_found() {
        let p = Profile::parse(FILE).unwrap();
        let main = p.matching(&["main"]);
        let stage = p.matching(&["stage"]);
        let every = p.union(&[main.clone(), stage.clone()]);
        // main -> poll -> stage: main's cost would count stage twice.
        assert_eq!(
            p.leaks(&main, &every),
            vec![("main".to_owned(), "poll".to_owned(), 70)]
        );
        assert!(p.leaks(&stage, &every).is_empty());
    }

    #[test]
    fn bad_files_are_errors_with_a_line() {
        let err = Profile::parse("events: Ir\n10 5\n").unwrap_err();
        assert!(format!("{err:#}").contains("line 2"), "{err:#}");
        let err = Profile::parse("events: Ir\nfn=(1)\n").unwrap_err();
        assert!(
            format!("{err:#}").contains("before it was named"),
            "{err:#}"
        );
        let err = Profile::parse("events: Ir\nfn=(1) f\n1 x\n").unwrap_err();
        assert!(format!("{err:#}").contains("not a count"), "{err:#}");
    }
}
