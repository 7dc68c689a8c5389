//! The shape of `src/` (see `docs/architecture.md`), checked on the source
//! text with the test kit's reader:
//!
//! - no import circle between the top-level modules (a module and its
//!   children count as one): every `crate::`, `super::` and `self::` path
//!   in code is resolved to the top-level module it names (through the
//!   crate root's re-exports), and the graph they make has no cycle;
//! - the dispatcher (`handler`) is called by the server and the service
//!   only, never by a route module, and stays a dispatcher (under 500
//!   lines);
//! - no route path is written outside the routing table (`routes.rs`): the
//!   contract's come from `magma_protocol::routes`, the server's own are
//!   the table's;
//! - `docs/architecture.md`'s code map has a row for every file of `src/`,
//!   and no module imports what its row says it may not.
//!
//! Doc links do not count as imports here: the public types document each
//! other (`Agent` and `RequestContext`), which ties no code together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use magma_server::magma_protocol::routes::Endpoint;
use magma_testkit::TempDir;
use magma_testkit::source::{
    literals_outside_tests, module_file, module_of, references, root_names, rust_files,
};

/// The modules that may use the dispatcher: the ones that accept requests.
const DISPATCHER_CALLERS: &[&str] = &["server", "service"];

/// The most lines `handler.rs` may have.
const HANDLER_MAX_LINES: usize = 500;

/// The routing table's file, the one place a route's path is written.
const TABLE_FILE: &str = "routes.rs";

fn src_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The heading of the server's part of the code map.
const CODE_MAP_HEADING: &str = "### crates/magma-server";

/// One use of a module by another: `(from, to)` with where it is first
/// written.
type Edges = BTreeMap<(String, String), String>;

/// A path in a file of one top-level module that names another.
struct Use {
    /// The file, relative to `src/`.
    file: String,
    line: usize,
    path: String,
    from: String,
    to: String,
}

impl Use {
    fn at(&self) -> String {
        format!("{}:{} `{}`", self.file, self.line, self.path)
    }
}

/// Every use between top-level modules of the crate under `src_dir`, and
/// what could not be resolved.
fn uses(src_dir: &Path) -> (Vec<Use>, Vec<String>) {
    let names = root_names(src_dir);
    let (mut found, mut unresolved) = (Vec::new(), Vec::new());
    for file in rust_files(src_dir) {
        let rel = file.strip_prefix(src_dir).expect("under src");
        // The library's root, and the binary's (a crate of its own).
        if rel == Path::new("lib.rs") || rel == Path::new("main.rs") {
            continue;
        }
        let module = module_of(rel);
        let own = module[0].clone();
        let text = std::fs::read_to_string(&file).expect("source file");
        for r in references(&text, &module) {
            let Some(first) = r.path.first().filter(|_| !r.in_comment) else {
                continue;
            };
            let target = if module_file(src_dir, first).is_some() {
                first.clone()
            } else {
                match names.get(first) {
                    // A re-export of the crate's own module, or of another
                    // crate (`magma_protocol`): only the former is a use.
                    Some(m) if module_file(src_dir, m).is_some() => m.clone(),
                    Some(_) => continue,
                    None => {
                        unresolved.push(format!(
                            "{}:{}: `crate::{}` names no module and no re-export of lib.rs",
                            rel.display(),
                            r.line,
                            r.path.join("::")
                        ));
                        continue;
                    }
                }
            };
            if target != own {
                found.push(Use {
                    file: rel.to_string_lossy().into_owned(),
                    line: r.line,
                    path: r.path.join("::"),
                    from: own.clone(),
                    to: target,
                });
            }
        }
    }
    (found, unresolved)
}

/// The uses between top-level modules as a graph, and what could not be
/// resolved.
fn module_graph(src_dir: &Path) -> (Edges, Vec<String>) {
    let (uses, unresolved) = uses(src_dir);
    let mut edges = Edges::new();
    for u in uses {
        edges
            .entry((u.from.clone(), u.to.clone()))
            .or_insert_with(|| u.at());
    }
    (edges, unresolved)
}

/// The circles of the graph: each set of modules that reach each other
/// (more than one), with the uses between them.
fn circles(edges: &Edges) -> Vec<String> {
    let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        next.entry(from).or_default().push(to);
    }
    let reach = |start: &str| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![start];
        while let Some(m) = todo.pop() {
            for n in next.get(m).into_iter().flatten() {
                if seen.insert(*n) {
                    todo.push(n);
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&str, BTreeSet<&str>> = next.keys().map(|m| (*m, reach(m))).collect();
    let mut done = BTreeSet::new();
    let mut found = Vec::new();
    for (m, from_m) in &reached {
        if done.contains(m) || !from_m.contains(m) {
            continue;
        }
        let circle: BTreeSet<&str> = from_m
            .iter()
            .copied()
            .filter(|n| reached.get(n).is_some_and(|r| r.contains(m)))
            .collect();
        let uses: Vec<String> = edges
            .iter()
            .filter(|((a, b), _)| circle.contains(a.as_str()) && circle.contains(b.as_str()))
            .map(|((a, b), at)| format!("  {a} -> {b}: {at}"))
            .collect();
        let members: Vec<&str> = circle.iter().copied().collect();
        found.push(format!(
            "circle between {}:\n{}",
            members.join(", "),
            uses.join("\n")
        ));
        done.extend(circle);
    }
    found
}

#[test]
fn no_import_circle_between_the_servers_modules() {
    let (edges, unresolved) = module_graph(&src_dir());
    assert!(unresolved.is_empty(), "{}", unresolved.join("\n"));
    let found = circles(&edges);
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
    // The graph is the crate's: the dispatcher uses the table.
    assert!(edges.contains_key(&("handler".into(), "routes".into())));
}

#[test]
fn only_the_server_and_the_service_call_the_dispatcher() {
    let (edges, _) = module_graph(&src_dir());
    let callers: Vec<String> = edges
        .iter()
        .filter(|((from, to), _)| to == "handler" && !DISPATCHER_CALLERS.contains(&from.as_str()))
        .map(|((from, _), at)| format!("{from} uses the dispatcher: {at}"))
        .collect();
    assert!(callers.is_empty(), "{}", callers.join("\n"));
    let text = std::fs::read_to_string(src_dir().join("handler.rs")).expect("handler.rs");
    let lines = text.lines().count();
    assert!(
        lines < HANDLER_MAX_LINES,
        "handler.rs has {lines} lines: what is not dispatching belongs in a route module or \
         below them (reply.rs, body.rs, access.rs)"
    );
}

/// The paths no string literal outside the table may start with: the
/// contract's (a session's up to its run id) and the table's own.
fn route_paths(src_dir: &Path) -> Vec<String> {
    let mut paths: Vec<String> = Endpoint::ALL
        .iter()
        .map(|e| e.path().split('{').next().unwrap_or("").to_owned())
        .collect();
    let table = std::fs::read_to_string(src_dir.join(TABLE_FILE)).expect("the routing table");
    paths.extend(
        literals_outside_tests(&table)
            .into_iter()
            .map(|(text, _)| text)
            .filter(|text| text.starts_with('/')),
    );
    paths
}

/// Every string literal outside the table and outside unit tests that
/// starts with a route's path.
fn route_literals(src_dir: &Path) -> Vec<String> {
    let paths = route_paths(src_dir);
    let mut found = Vec::new();
    for file in rust_files(src_dir) {
        let rel = file.strip_prefix(src_dir).expect("under src");
        if rel == Path::new(TABLE_FILE) {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("source file");
        for (literal, line) in literals_outside_tests(&text) {
            if paths.iter().any(|p| literal.starts_with(p.as_str())) {
                found.push(format!("{}:{line}: \"{literal}\"", rel.display()));
            }
        }
    }
    found
}

#[test]
fn no_route_path_is_written_outside_the_table() {
    let src = src_dir();
    let paths = route_paths(&src);
    // The table's own routes are among them, besides the contract's.
    assert!(paths.len() > Endpoint::ALL.len(), "{paths:?}");
    let found = route_literals(&src);
    assert!(
        found.is_empty(),
        "route paths outside {TABLE_FILE} (use `Route` or `magma_protocol::routes`):\n{}",
        found.join("\n")
    );
}

/// The checks themselves, on a small crate written here: each kind of
/// circle and literal is caught, and what is allowed is not.
#[test]
fn the_checks_catch_what_they_should() {
    let dir = TempDir::new("server-tidy");
    let write = |rel: &str, text: &str| {
        let path = dir.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\nmod routes;\nmod handler;\npub use a::Thing;\npub use magma_protocol;\npub use magma_protocol::Json;\n",
    );
    // a -> b through a child module, b -> a through a root re-export: a
    // circle; c -> a only in a doc link and through other crates: none.
    write("a/mod.rs", "mod inner;\npub struct Thing;\n");
    write("a/inner.rs", "use crate::b::helper;\n");
    write(
        "b.rs",
        "pub fn helper() {}\nfn f() -> crate::Thing { todo!() }\n",
    );
    write(
        "c.rs",
        concat!(
            "/// See [`crate::a::Thing`].\nuse crate::Json;\nuse crate::magma_protocol::X;\n",
            "use crate::handler::route;\nconst P: &str = \"/v1/responses\";\nconst Q: &str = \"/own/x\";\n",
            "const FINE: &str = \"see /v1/responses\";\n",
            "#[cfg(test)]\nmod tests {\n    const T: &str = \"/health\";\n    use crate::nothing;\n}\n",
        ),
    );
    write("routes.rs", "const OWN: &str = \"/own\";\n");
    write("handler.rs", "use super::routes::OWN;\n");
    let (edges, unresolved) = module_graph(dir.path());
    let found = circles(&edges);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].starts_with("circle between a, b:"), "{found:#?}");
    assert!(
        found[0].contains("a -> b: a/inner.rs:1 `b::helper`"),
        "{found:#?}"
    );
    assert!(found[0].contains("b -> a: b.rs:2 `Thing`"), "{found:#?}");
    assert!(!edges.keys().any(|(from, to)| from == "c" && to == "a"));
    assert!(edges.contains_key(&("c".into(), "handler".into())));
    assert!(edges.contains_key(&("handler".into(), "routes".into())));
    // Code in unit tests counts as code: `crate::nothing` resolves nowhere.
    assert_eq!(unresolved.len(), 1, "{unresolved:#?}");
    assert!(unresolved[0].starts_with("c.rs:11:"), "{unresolved:#?}");
    let literals = route_literals(dir.path());
    assert_eq!(
        literals,
        ["c.rs:5: \"/v1/responses\"", "c.rs:6: \"/own/x\""],
        "{literals:#?}"
    );
    let map = concat!(
        "### crates/magma-server (x)\n\n| path | owns | may not import |\n|---|---|---|\n",
        "| `src/lib.rs` | root | - |\n",
        "| `src/a/mod.rs`, `src/a/inner.rs` | a | `b` |\n",
        "| `src/b.rs` | b | `c` |\n",
        "| `src/c.rs` | c | anything of the crate |\n",
        "| `src/routes.rs` | table | `nothing_here` |\n",
        "| `src/gone.rs` | x | - |\n",
        "| `tests/it/` | tests | private items |\n",
        "\n### crates/magma-client\n\n| `src/handler.rs` | elsewhere | - |\n",
    );
    let mismatches = code_map_mismatches(dir.path(), map);
    let want = [
        "`src/a/inner.rs` may not import `b`, its row says: a/inner.rs:1 `b::helper`",
        "`src/c.rs` may not import `handler`, its row says: c.rs:4 `handler::route`",
        "[\"routes.rs\"]: the row names `nothing_here`, which is no module",
        "the code map's `src/gone.rs` does not exist",
        "`src/handler.rs` has no row in the code map",
    ];
    assert_eq!(mismatches, want, "{mismatches:#?}");
}

/// The code `` `x` `` spans of a Markdown table cell.
fn code_spans(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

/// The rows of the server's code map in `docs/architecture.md`: the files
/// of each row (`src/...`, relative to `src/`) and the modules it may not
/// import (`None`: nothing of the crate), or what is wrong with the row.
type MapRow = (Vec<String>, Option<Vec<String>>);

fn code_map_rows(map: &str) -> Vec<Result<MapRow, String>> {
    let start = map
        .find(CODE_MAP_HEADING)
        .expect("the server's part of the code map");
    let section = &map[start + CODE_MAP_HEADING.len()..];
    let section = &section[..section.find("\n### ").unwrap_or(section.len())];
    let mut rows = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(files), Some(banned)) = (cells.get(1), cells.get(3)) else {
            rows.push(Err(format!("not a row of three cells: {line}")));
            continue;
        };
        let files: Vec<String> = code_spans(files)
            .into_iter()
            .filter_map(|f| f.strip_prefix("src/"))
            .map(str::to_owned)
            .collect();
        if files.is_empty() {
            continue; // `openapi.json`, examples, tests: not modules.
        }
        let banned = match *banned {
            "-" => Some(Vec::new()),
            "anything of the crate" => None,
            list => {
                let names: Vec<String> = code_spans(list).into_iter().map(str::to_owned).collect();
                if names.is_empty() {
                    rows.push(Err(format!("{files:?}: may not import `{list}`: name the modules in `code`, or write `anything of the crate` or `-`")));
                    continue;
                }
                Some(names)
            }
        };
        rows.push(Ok((files, banned)));
    }
    rows
}

/// What the code map says that the code under `src_dir` does not keep.
fn code_map_mismatches(src_dir: &Path, map: &str) -> Vec<String> {
    let (uses, _) = uses(src_dir);
    let mut found = Vec::new();
    let mut mapped = BTreeSet::new();
    for row in code_map_rows(map) {
        let (files, banned) = match row {
            Ok(row) => row,
            Err(e) => {
                found.push(e);
                continue;
            }
        };
        for name in banned.iter().flatten() {
            if module_file(src_dir, name).is_none() {
                found.push(format!(
                    "{files:?}: the row names `{name}`, which is no module"
                ));
            }
        }
        for file in files {
            if !src_dir.join(&file).is_file() {
                found.push(format!("the code map's `src/{file}` does not exist"));
            }
            let forbidden = |to: &String| banned.as_ref().is_none_or(|names| names.contains(to));
            for u in uses.iter().filter(|u| u.file == file && forbidden(&u.to)) {
                found.push(format!(
                    "`src/{file}` may not import `{}`, its row says: {}",
                    u.to,
                    u.at()
                ));
            }
            mapped.insert(file);
        }
    }
    for file in rust_files(src_dir) {
        let rel = file.strip_prefix(src_dir).expect("under src");
        let rel = rel.to_string_lossy().into_owned();
        if !mapped.contains(&rel) {
            found.push(format!("`src/{rel}` has no row in the code map"));
        }
    }
    found
}

#[test]
fn the_code_map_has_every_file_and_its_rules_hold() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/architecture.md");
    let map = std::fs::read_to_string(path).expect("docs/architecture.md");
    let found = code_map_mismatches(&src_dir(), &map);
    assert!(
        found.is_empty(),
        "docs/architecture.md, {CODE_MAP_HEADING}:\n{}",
        found.join("\n")
    );
}
