//! A crate's source text as the tidy tests read it: a small Rust lexer
//! (identifiers, punctuation, `::`, string literals; comments apart), the
//! module paths a file refers to, resolved from the crate root, and the
//! names the crate root re-exports.
//!
//! It reads what rustfmt'd code writes, not every Rust program: enough for
//! a layering check to see every `crate::`, `super::` and `self::` path,
//! and for a literal check to see every string literal.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A code token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// An identifier or keyword.
    Ident(String),
    /// One character of punctuation.
    Punct(char),
    /// `::`
    Path,
    /// A string literal's text between its quotes, as written (escapes are
    /// not decoded); byte and raw strings included.
    Str(String),
}

/// Tokens or comments, each with the line it starts on.
pub type Lined<T> = Vec<(T, usize)>;

/// The code tokens of `src` with their line, and its comments (`//` to the
/// end of the line, `/* */` nested as Rust nests them).
pub fn lex(src: &str) -> (Lined<Tok>, Lined<String>) {
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
                let first_line = line;
                j += 1;
                let start = j;
                let mut end = b.len();
                while j < b.len() {
                    if b[j] == '\n' {
                        line += 1;
                    }
                    if !raw && b[j] == '\\' {
                        j += 2;
                        continue;
                    }
                    if b[j] == '"' && (0..hashes).all(|k| at(j + 1 + k) == '#') {
                        end = j;
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                let text = b[start..end.min(b.len())].iter().collect();
                toks.push((Tok::Str(text), first_line));
                i = j;
            }
            '"' => {
                let first_line = line;
                i += 1;
                let start = i;
                while i < b.len() && b[i] != '"' {
                    line += usize::from(b[i] == '\n');
                    i += if b[i] == '\\' { 2 } else { 1 };
                }
                let text = b[start..i.min(b.len())].iter().collect();
                toks.push((Tok::Str(text), first_line));
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

/// The paths of a `use` tree or path expression starting at `toks[i]`: one
/// per leaf of a `{...}` group; a glob's last segment is `*`.
pub fn paths_at(toks: &[(Tok, usize)], i: usize) -> Vec<Vec<String>> {
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
        Some(Tok::Punct('*')) => vec![vec!["*".to_owned()]],
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
pub fn module_of(rel: &Path) -> Vec<String> {
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

/// A module path a file refers to, absolute from the crate root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The path's segments after `crate`: `["json", "parse", "Parser"]`.
    pub path: Vec<String>,
    /// The line it is on.
    pub line: usize,
    /// Written in a comment (a doc link, `crate::x` in prose), not in code.
    pub in_comment: bool,
}

/// Every module path the file of `module` (see [`module_of`]) writes from
/// `crate`, `$crate`, `super` or `self`, in code and, for `crate::` paths,
/// in comments. Inline modules (`mod tests { ... }`) deepen `super`.
pub fn references(src: &str, module: &[String]) -> Vec<Reference> {
    let (toks, comments) = lex(src);
    let mut out = Vec::new();
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
                        out.push(Reference {
                            path: base.iter().cloned().chain(rest).collect(),
                            line: *line,
                            in_comment: false,
                        });
                    }
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
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
            out.push(Reference {
                path,
                line,
                in_comment: true,
            });
        }
    }
    out
}

/// The string literals of `src` with their line, leaving out those inside
/// an inline `mod tests { ... }` (unit tests may write anything).
pub fn literals_outside_tests(src: &str) -> Lined<String> {
    let (toks, _) = lex(src);
    let mut out = Vec::new();
    let mut depth = 0usize;
    // The depth at which the `mod tests` being skipped opened.
    let mut tests_at: Option<usize> = None;
    for (i, (tok, line)) in toks.iter().enumerate() {
        match tok {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth = depth.saturating_sub(1);
                if tests_at == Some(depth) {
                    tests_at = None;
                }
            }
            Tok::Ident(kw) if kw == "mod" && tests_at.is_none() => {
                if let (Some((Tok::Ident(name), _)), Some((Tok::Punct('{'), _))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    if name == "tests" {
                        tests_at = Some(depth);
                    }
                }
            }
            Tok::Str(text) if tests_at.is_none() => out.push((text.clone(), *line)),
            _ => {}
        }
    }
    out
}

/// Every `.rs` file under `dir`, sorted.
pub fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The file of top-level module `name` under `src_dir` (`name.rs` or
/// `name/mod.rs`), if the crate has one.
pub fn module_file(src_dir: &Path, name: &str) -> Option<PathBuf> {
    [
        src_dir.join(format!("{name}.rs")),
        src_dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// Names re-exported at the crate root (`src_dir/lib.rs`), to the first
/// segment of the path they come from: `pub use m::{A, B}` gives `A` and
/// `B` to `m`; for a glob of a module of the crate (`pub use m::*`), the
/// names that module's own `pub use` lines export. A re-exported crate
/// (`pub use other;`, `pub use other::X`) maps to that crate's name.
pub fn root_names(src_dir: &Path) -> BTreeMap<String, String> {
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
        let (Some(module), Some(name)) = (path.first(), path.last()) else {
            continue;
        };
        if name != "*" {
            names.insert(name.clone(), module.clone());
            continue;
        }
        let Some(file) = module_file(src_dir, module) else {
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("glob-exported module");
        for inner in pub_uses(&text) {
            if let Some(name) = inner.last().filter(|n| *n != "*") {
                names.insert(name.clone(), module.clone());
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_are_tokens_and_comments_are_apart() {
        let src = "let a = \"x // y\"; // note\nlet b = r#\"q\"w\"#; /* c */ b\"z\";\n";
        let (toks, comments) = lex(src);
        let strs: Vec<&str> = toks
            .iter()
            .filter_map(|(t, _)| match t {
                Tok::Str(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(strs, ["x // y", "q\"w", "z"]);
        let comments: Vec<&str> = comments.iter().map(|(c, _)| c.as_str()).collect();
        assert_eq!(comments, ["// note", "/* c */"]);
    }

    #[test]
    fn use_trees_give_one_path_per_leaf() {
        let (toks, _) = lex("a::{b, c::{d, *}, self}");
        let paths = paths_at(&toks, 0);
        let want: Vec<Vec<&str>> = vec![
            vec!["a", "b"],
            vec!["a", "c", "d"],
            vec!["a", "c", "*"],
            vec!["a"],
        ];
        assert_eq!(paths, want);
    }

    #[test]
    fn references_resolve_super_through_inline_modules() {
        let src = "use crate::x::Y;\nmod tests {\n    use super::super::z;\n}\n/// [`crate::w`]\n";
        let module = vec!["m".to_owned(), "n".to_owned()];
        let refs = references(src, &module);
        let got: Vec<(String, usize, bool)> = refs
            .iter()
            .map(|r| (r.path.join("::"), r.line, r.in_comment))
            .collect();
        let want = [
            ("x::Y".to_owned(), 1, false),
            ("m::z".to_owned(), 3, false),
            ("w".to_owned(), 5, true),
        ];
        assert_eq!(got, want);
    }

    #[test]
    fn literals_of_unit_tests_are_left_out() {
        let src = "const A: &str = \"/a\";\n#[cfg(test)]\nmod tests {\n    const B: &str = \"/b\";\n    fn f() { g(\"/c\"); }\n}\nconst D: &str = \"/d\";\n";
        let got: Vec<(String, usize)> = literals_outside_tests(src);
        assert_eq!(got, [("/a".to_owned(), 1), ("/d".to_owned(), 7)]);
    }
}
