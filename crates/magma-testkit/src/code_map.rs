//! `docs/architecture.md` against the tree, for the crates' tests: a code
//! map (every source file of a crate named in a row, every file a row names
//! there) and a checklist (every path it names there, every identifier it
//! names used by the code its step points at).
//!
//! A code map row names its files in its first cell, in backquotes: a path
//! from the crate's folder (`src/json/parse.rs`, or a folder `src/json/`),
//! then names in the same folder (`src/report.rs`, `render.rs`). A
//! checklist is a numbered list; a step's paths are from the repository's
//! root (`crates/magma-protocol/src/model/<name>.rs` stands for the folder
//! `crates/magma-protocol/src/model/`), its identifiers (`document!`,
//! `Fields::new`, `parse_shaped_counted`) must occur in the code of those
//! paths outside its tests (or, for a step that names no path, of the
//! fallback folders), so that a step naming what only a test uses fails.

use std::path::{Path, PathBuf};

/// The repository's root, from a crate's `CARGO_MANIFEST_DIR`
/// (`crates/<name>`).
pub fn repo_root(manifest_dir: &str) -> PathBuf {
    Path::new(manifest_dir).join("../..")
}

/// `docs/architecture.md`.
pub fn architecture(repo: &Path) -> String {
    let path = repo.join("docs/architecture.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines under the first heading that starts with `heading`, up to the
/// next heading of the same or a higher level.
pub fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with(heading));
    assert!(lines.next().is_some(), "no section {heading:?}");
    let level = heading.chars().take_while(|c| *c == '#').count();
    lines
        .take_while(|l| {
            let hashes = l.chars().take_while(|c| *c == '#').count();
            hashes == 0 || hashes > level
        })
        .collect()
}

/// The spans between backquotes.
fn quoted(text: &str) -> impl Iterator<Item = &str> {
    text.split('`').skip(1).step_by(2)
}

/// What is wrong with the code map rows of a crate: source files under
/// `src/` that no row names, and named files that do not exist.
pub fn code_map_problems(crate_dir: &Path, section: &[&str]) -> Vec<String> {
    let mut named = Vec::new();
    let mut problems = Vec::new();
    for row in section.iter().filter(|l| l.starts_with("| `")) {
        let first = row
            .trim_start_matches('|')
            .split(" | ")
            .next()
            .unwrap_or("");
        let mut dir = PathBuf::new();
        for item in quoted(first) {
            let rel = if item.contains('/') {
                PathBuf::from(item)
            } else {
                dir.join(item)
            };
            let path = crate_dir.join(&rel);
            if item.ends_with('/') {
                dir.clone_from(&rel);
            } else {
                dir = rel.parent().map(Path::to_path_buf).unwrap_or_default();
            }
            if !path.exists() {
                problems.push(format!(
                    "a row names {}, which does not exist",
                    rel.display()
                ));
            }
            named.push(rel);
        }
    }
    for file in rust_files(&crate_dir.join("src")) {
        let rel = file.strip_prefix(crate_dir).expect("under the crate");
        if !named.iter().any(|n| n == rel) {
            problems.push(format!("{} has no row", rel.display()));
        }
    }
    problems
}

/// What is wrong with a checklist: paths that do not exist, identifiers
/// that the code of the step's paths (or `fallback`, folders from the
/// repository's root) does not use outside its tests.
pub fn checklist_problems(repo: &Path, section: &[&str], fallback: &[&str]) -> Vec<String> {
    let mut steps: Vec<String> = Vec::new();
    for line in section {
        let numbered = line
            .split_once(". ")
            .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        match steps.last_mut() {
            Some(step) if !numbered && !line.trim().is_empty() => {
                step.push(' ');
                step.push_str(line.trim());
            }
            _ if numbered => steps.push((*line).to_owned()),
            _ => {}
        }
    }
    let mut problems = Vec::new();
    for step in &steps {
        let mut places = Vec::new();
        for item in quoted(step).filter(|q| q.contains('/') && !q.contains(' ')) {
            // `.../model/<name>.rs` stands for its folder.
            let item = item.split('<').next().unwrap_or(item);
            let path = repo.join(item);
            if path.exists() {
                places.push(path);
            } else {
                problems.push(format!("{item} does not exist ({})", head(step)));
            }
        }
        if places.is_empty() {
            places = fallback.iter().map(|f| repo.join(f)).collect();
        }
        let code: String = places
            .iter()
            .flat_map(|p| code_files(p))
            .map(|f| code_of(&f))
            .collect();
        for ident in quoted(step).filter(|q| is_identifier(q)) {
            let found = if let Some(name) = ident.strip_suffix('!') {
                code.contains(&format!("{name}!"))
            } else {
                ident.split("::").all(|segment| has_word(&code, segment))
            };
            if !found {
                problems.push(format!(
                    "`{ident}` is not in the code the step names, outside its tests ({})",
                    head(step)
                ));
            }
        }
    }
    problems
}

/// The start of a step, to say which one.
fn head(step: &str) -> String {
    step.chars().take(60).collect()
}

/// `name`, `a::b`, `name!`: a Rust or Python identifier path.
fn is_identifier(s: &str) -> bool {
    let s = s.strip_suffix('!').unwrap_or(s);
    !s.is_empty()
        && s.split("::").all(|seg| {
            seg.chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_')
                && seg.chars().all(|c| c.is_alphanumeric() || c == '_')
        })
}

/// Whether `word` occurs in `text` with no identifier character around it.
fn has_word(text: &str, word: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

/// The `.rs` files under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = walk(dir)
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    files
}

/// The source and documentation files of a path (a file, or every file
/// under a folder) that are not tests.
fn code_files(path: &Path) -> Vec<PathBuf> {
    let code = |f: &PathBuf| {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let ext = f.extension().and_then(|e| e.to_str()).unwrap_or("");
        name != "tests.rs"
            && !f.components().any(|c| c.as_os_str() == "tests")
            && matches!(ext, "rs" | "py" | "toml" | "md")
    };
    walk(path).into_iter().filter(code).collect()
}

fn walk(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    let mut dirs = vec![path.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let p = entry.path();
            if p.is_dir() {
                dirs.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

/// A file's text up to its test module (`#[cfg(test)]`, other attributes,
/// then `mod`).
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let test_module = |i: usize| {
        let mut after = lines[i + 1..].iter().map(|l| l.trim_start());
        lines[i].trim() == "#[cfg(test)]"
            && after
                .find(|l| !l.starts_with("#["))
                .is_some_and(|l| l.starts_with("mod "))
    };
    let end = (0..lines.len())
        .find(|&i| test_module(i))
        .unwrap_or(lines.len());
    let mut code = lines[..end].join("\n");
    code.push('\n');
    code
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_and_words() {
        assert!(is_identifier("document!"));
        assert!(is_identifier("Fields::new"));
        assert!(is_identifier("MODELS"));
        assert!(!is_identifier("cargo xtask codegen"));
        assert!(!is_identifier("mod <name>;"));
        assert!(!is_identifier("src/lib.rs"));
        assert!(has_word(
            "let x = parse_shaped_counted(b)",
            "parse_shaped_counted"
        ));
        assert!(!has_word("let x = parse_shaped_counted(b)", "parse_shaped"));
    }

    /// Both checks on a small tree written here: what is missing or only
    /// in a test is found, the rest is not.
    #[test]
    fn the_checks_catch_what_they_should() {
        let dir = crate::TempDir::new("code-map");
        std::fs::create_dir_all(dir.path().join("c/src/b")).expect("mkdir");
        dir.write("c/src/lib.rs", "mod a;\n");
        dir.write(
            "c/src/a.rs",
            "pub fn used() {}\n#[cfg(test)]\nmod tests {\n    fn only_tested() {}\n}\n",
        );
        dir.write("c/src/b/mod.rs", "");
        let map = [
            "| path | owns |",
            "|---|---|",
            "| `src/lib.rs`, `a.rs` | x |",
            "| `src/gone.rs` | y |",
        ];
        let problems = code_map_problems(&dir.path().join("c"), &map);
        assert_eq!(
            problems,
            [
                "a row names src/gone.rs, which does not exist",
                "src/b/mod.rs has no row"
            ]
        );
        let checklist = [
            "1. `c/src/<name>.rs`: `used`, `a::used` and",
            "   `only_tested`, `macro!`; `cargo test` is no identifier.",
            "2. `c/src/nowhere.rs`.",
            "3. No path: `used` in the fallback.",
        ];
        let problems = checklist_problems(dir.path(), &checklist, &["c/src"]);
        assert_eq!(problems.len(), 3, "{problems:#?}");
        assert!(
            problems[0].starts_with("`only_tested` is not in the code"),
            "{problems:#?}"
        );
        assert!(
            problems[1].starts_with("`macro!` is not in the code"),
            "{problems:#?}"
        );
        assert!(
            problems[2].starts_with("c/src/nowhere.rs does not exist"),
            "{problems:#?}"
        );
    }
}
