//! The layering of `src/` (see `docs/architecture.md`), checked on the
//! source text: every path a file writes that starts at `crate`, `$crate`,
//! `self` or `super` is resolved to the module it names, and
//!
//! - a module may use only modules of a lower layer, or its own module:
//!   (`json`, `routes`) < `limits` < `error` < (`validate`, `json_schema`) < `model` <
//!   (`exchange`, `env`, `tools`, `schema`) < `documents` (the registry of
//!   document kinds, which names the models, their exchanges and schemas);
//!   modules of one layer may not use each other;
//! - a file of one model (`model/request.rs` and its children, ...) may use
//!   another model only through the types `model/mod.rs` re-exports, never
//!   through the other file's module (`super::response::...`).
//!
//! Doc links (`[`crate::x`]`) count too: they tie the layers as well.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The layers, lowest first; modules in one entry may not use each other.
const LAYERS: &[&[&str]] = &[
    &["json", "routes"],
    &["limits", "inline_vec"],
    &["error"],
    &["validate", "json_schema"],
    &["model"],
    &["exchange", "env", "tools", "schema"],
    &["documents"],
];

/// Files of `model/` that are not one model's: the registry and the tests
/// that cover every model.
const MODEL_SHARED: &[&str] = &["mod", "tests"];

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Punct(char),
    /// `::`
    Path,
}

/// A token or a comment, with its line.
type Lined<T> = Vec<(T, usize)>;

/// The code tokens of `src` with their line, and its comments.
fn lex(src: &str) -> (Lined<Tok>, Lined<String>) {
    let b: Vec<char> = src.chars().collect();
    let (mut toks, mut comments) = (Vec::new(), Vec::new());
    let (mut i, mut line) = (0, 1);
    let at = |i: usize| b.get(i).copied().unwrap_or('\0');
    while i < b.len() {
        let c = b[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            '/' if at(i + 1) == '/' => {
                let start = i;
                while i < b.len() && b[i] != '\n' {
                    i += 1;
                }
                comments.push((b[start..i].iter().collect(), line));
            }
            '/' if at(i + 1) == '*' => {
                let (start, first_line) = (i, line);
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == '/' && at(i + 1) == '*' {
                        depth += 1;
                        i += 2;
                    } else if b[i] == '*' && at(i + 1) == '/' {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        line += usize::from(b[i] == '\n');
                        i += 1;
                    }
                }
                comments.push((b[start..i.min(b.len())].iter().collect(), first_line));
            }
            'r' | 'b'
                if matches!(
                    (at(i + 1), at(i + 2)),
                    ('#', _) | ('"', _) | ('r', '#' | '"')
                ) =>
            {
                // A raw or byte string: r"..", r#".."#, b"..", br#".."#.
                let mut j = i + 1;
                if c == 'b' && at(j) == 'r' {
                    j += 1;
                }
                let raw = c == 'r' || at(i + 1) == 'r';
                let mut hashes = 0;
                while at(j) == '#' {
                    hashes += 1;
                    j += 1;
                }
                if at(j) != '"' {
                    // `r#ident`: a raw identifier.
                    toks.push((Tok::Ident("r".into()), line));
                    i += 1;
                    continue;
                }
                j += 1;
                loop {
                    if j >= b.len() {
                        break;
                    }
                    if b[j] == '\n' {
                        line += 1;
                    }
                    if !raw && b[j] == '\\' {
                        j += 2;
                        continue;
                    }
                    if b[j] == '"' && (0..hashes).all(|k| at(j + 1 + k) == '#') {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                i = j;
            }
            '"' => {
                i += 1;
                while i < b.len() && b[i] != '"' {
                    line += usize::from(b[i] == '\n');
                    i += if b[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
            }
            '\'' => {
                // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
                if at(i + 1) == '\\' {
                    i += 2;
                    while i < b.len() && b[i] != '\'' {
                        i += 1;
                    }
                    i += 1;
                } else if at(i + 2) == '\'' {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            ':' if at(i + 1) == ':' => {
                toks.push((Tok::Path, line));
                i += 2;
            }
            c if c.is_alphabetic() || c == '_' => {
                let start = i;
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
                toks.push((Tok::Ident(b[start..i].iter().collect()), line));
            }
            c if c.is_whitespace() => i += 1,
            c => {
                toks.push((Tok::Punct(c), line));
                i += 1;
            }
        }
    }
    (toks, comments)
}

/// The paths of a `use` tree or path expression starting at `toks[i]`.
fn paths_at(toks: &[(Tok, usize)], i: usize) -> Vec<Vec<String>> {
    match toks.get(i).map(|t| &t.0) {
        Some(Tok::Punct('{')) => {
            let mut out = Vec::new();
            let mut j = i + 1;
            let mut depth = 0;
            let mut item_start = true;
            while let Some((t, _)) = toks.get(j) {
                match t {
                    Tok::Punct('{') => depth += 1,
                    Tok::Punct('}') if depth == 0 => break,
                    Tok::Punct('}') => depth -= 1,
                    Tok::Punct(',') if depth == 0 => {
                        item_start = true;
                        j += 1;
                        continue;
                    }
                    _ => {}
                }
                if item_start && depth == 0 {
                    out.extend(paths_at(toks, j));
                    item_start = false;
                }
                j += 1;
            }
            out
        }
        Some(Tok::Ident(name)) => {
            let name = if name == "self" {
                vec![]
            } else {
                vec![name.clone()]
            };
            if toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Path) {
                paths_at(toks, i + 2)
                    .into_iter()
                    .map(|rest| name.iter().cloned().chain(rest).collect())
                    .collect()
            } else {
                vec![name]
            }
        }
        _ => vec![vec![]],
    }
}

/// The module path of a file under `src/`: `json/parse.rs` is
/// `["json", "parse"]`, `json/mod.rs` is `["json"]`, `lib.rs` is `[]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_owned());
    }
    parts
}

/// Every module path a file refers to, absolute from the crate root, with
/// its line.
fn references(src: &str, module: &[String]) -> Vec<(Vec<String>, usize)> {
    let (toks, comments) = lex(src);
    let mut out = Vec::new();
    // Inline modules (`mod tests { ... }`) deepen `super`.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let (tok, line) = &toks[i];
        match tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
            }
            Tok::Ident(kw) if kw == "mod" => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    inline.push((name.clone(), depth));
                }
            }
            Tok::Ident(anchor)
                if matches!(anchor.as_str(), "crate" | "super" | "self")
                    && toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Path) =>
            {
                // Not the tail of a longer path (`a::super` does not exist,
                // but `$crate` does: `$` is punctuation, so it passes).
                let after_path = i > 0 && toks[i - 1].0 == Tok::Path;
                if !after_path {
                    let mut base: Vec<String> = module
                        .iter()
                        .cloned()
                        .chain(inline.iter().map(|(n, _)| n.clone()))
                        .collect();
                    let mut j = i;
                    match anchor.as_str() {
                        "crate" => {
                            base.clear();
                            j += 2;
                        }
                        "self" => j += 2,
                        _ => {
                            while matches!(&toks.get(j).map(|t| &t.0), Some(Tok::Ident(s)) if s == "super")
                                && toks.get(j + 1).map(|t| &t.0) == Some(&Tok::Path)
                            {
                                base.pop();
                                j += 2;
                            }
                        }
                    }
                    for rest in paths_at(&toks, j) {
                        out.push((base.iter().cloned().chain(rest).collect(), *line));
                    }
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    // Doc links and other paths in comments: `crate::` ones only.
    for (text, line) in comments {
        for (at, _) in text.match_indices("crate::") {
            let rest = &text[at + "crate::".len()..];
            let path: Vec<String> = rest
                .split("::")
                .map(|seg| {
                    seg.chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect::<String>()
                })
                .take_while(|seg| !seg.is_empty())
                .collect();
            out.push((path, line));
        }
    }
    out
}

/// Names re-exported at the crate root, to the module that defines them:
/// `pub use m::{A, B}` in `lib.rs`, and for `pub use m::*` the `pub use`
/// lines of `m`.
fn root_names(src_dir: &Path) -> BTreeMap<String, String> {
    fn pub_uses(text: &str) -> Vec<Vec<String>> {
        let (toks, _) = lex(text);
        let mut out = Vec::new();
        for w in 0..toks.len() {
            if toks[w].0 == Tok::Ident("pub".into())
                && toks.get(w + 1).map(|t| &t.0) == Some(&Tok::Ident("use".into()))
            {
                out.extend(paths_at(&toks, w + 2));
            }
        }
        out
    }
    let lib = std::fs::read_to_string(src_dir.join("lib.rs")).expect("lib.rs");
    let mut names = BTreeMap::new();
    for path in pub_uses(&lib) {
        let Some(module) = path.first().cloned() else {
            continue;
        };
        match path.last().map(String::as_str) {
            Some(name) if path.len() > 1 => {
                names.insert(name.to_owned(), module);
            }
            _ => {
                // A glob: the names the module itself re-exports.
                let file = src_dir.join(&module).join("mod.rs");
                let text = std::fs::read_to_string(&file).expect("glob-exported module");
                for inner in pub_uses(&text) {
                    if let Some(name) = inner.last() {
                        names.insert(name.clone(), module.clone());
                    }
                }
            }
        }
    }
    names
}

/// What is wrong with the layering of the files under `src_dir`.
fn violations(src_dir: &Path) -> Vec<String> {
    let layer_of = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let names = root_names(src_dir);
    let mut files = Vec::new();
    let mut dirs = vec![src_dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut found = Vec::new();
    for file in files {
        let rel = file.strip_prefix(src_dir).expect("under src");
        let module = module_of(rel);
        let Some(own) = module.first() else { continue }; // lib.rs
        let Some(own_layer) = layer_of(own) else {
            found.push(format!(
                "{}: module `{own}` is in no layer of LAYERS",
                rel.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("source file");
        for (path, line) in references(&text, &module) {
            let Some(first) = path.first() else { continue };
            let target = if first.chars().next().is_some_and(char::is_uppercase)
                || (layer_of(first).is_none() && names.contains_key(first))
            {
                match names.get(first) {
                    Some(m) => m.clone(),
                    None => {
                        found.push(format!(
                            "{}:{line}: `crate::{first}` is not re-exported by lib.rs",
                            rel.display()
                        ));
                        continue;
                    }
                }
            } else {
                first.clone()
            };
            let shown = path.join("::");
            match layer_of(&target) {
                Some(l) if l < own_layer || target == *own => {}
                Some(_) => found.push(format!(
                    "{}:{line}: `{shown}`: `{own}` may not use `{target}` (a layer above it, or beside it)",
                    rel.display()
                )),
                None => found.push(format!("{}:{line}: `{shown}`: unknown module `{target}`", rel.display())),
            }
            // One model's file may not reach into another model's file.
            if own == "model" && target == "model" {
                let mine = module.get(1).map(String::as_str).unwrap_or("mod");
                if let Some(theirs) = path.get(1) {
                    let is_model_file =
                        src_dir.join("model").join(format!("{theirs}.rs")).is_file();
                    if is_model_file && theirs != mine && !MODEL_SHARED.contains(&mine) {
                        found.push(format!(
                            "{}:{line}: `{shown}`: model `{mine}` uses the internals of model `{theirs}`; use the types `model/mod.rs` re-exports",
                            rel.display()
                        ));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn layers_point_one_way_and_models_keep_to_themselves() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

/// The checker itself, on a small tree written here: each forbidden kind of
/// reference is caught, and the allowed ones are not.
#[test]
fn the_layer_check_catches_what_it_should() {
    let dir = std::env::temp_dir().join(format!("magma-tidy-{}", std::process::id()));
    let write = |rel: &str, text: &str| {
        let path: PathBuf = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "lib.rs",
        "pub mod json;\nmod error;\nmod model;\npub use error::Error;\npub use json::Json;\npub use model::*;\n",
    );
    write("error.rs", "use crate::json::Json;\n");
    write("json/mod.rs", "mod parse;\npub use parse::Json;\n");
    write(
        "json/parse.rs",
        concat!(
            "use super::Json;\nuse crate::{json::x, error::Error};\n",
            "/// See [`crate::model::Thing`].\nfn f() {}\n",
            "mod tests {\n    use super::super::Json;\n    use super::super::super::Error;\n",
            "    const S: &str = \"crate::model::Fake\";\n}\n",
            "macro_rules! m { () => { $crate::Json }; }\n",
        ),
    );
    write(
        "model/mod.rs",
        "mod a;\nmod b;\npub use a::A;\npub use b::B;\n",
    );
    write(
        "model/a.rs",
        "use super::B;\nuse super::b::helper;\nuse crate::model::{A, b::Inner};\nuse crate::Error;\n",
    );
    write("model/b.rs", "pub struct B;\nuse crate::json::Json;\n");
    let found = violations(&dir);
    std::fs::remove_dir_all(&dir).ok();
    let lines: Vec<&str> = found.iter().map(String::as_str).collect();
    let has = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    // json/parse.rs: `crate::error` in a use group, the doc link, and
    // `super::super::super::Error` from the inline module; not the string.
    assert_eq!(has("json/parse.rs:2: `error::Error`"), 1, "{lines:#?}");
    assert_eq!(has("json/parse.rs:3: `model::Thing`"), 1, "{lines:#?}");
    assert_eq!(has("json/parse.rs:7: `Error`"), 1, "{lines:#?}");
    assert_eq!(has("json/parse.rs"), 3, "{lines:#?}");
    // model/a.rs: `super::b::helper` and `crate::model::b::Inner`; the
    // re-exported `B`, `A` and the lower layer's `crate::Error` are fine.
    assert_eq!(has("model/a.rs:2: `model::b::helper`"), 1, "{lines:#?}");
    assert_eq!(has("model/a.rs:3: `model::b::Inner`"), 1, "{lines:#?}");
    assert_eq!(has("model/a.rs"), 2, "{lines:#?}");
    assert_eq!(lines.len(), 5, "{lines:#?}");
}
