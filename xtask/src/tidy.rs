//! Workspace-wide tidy checks that `cargo test --workspace` runs: source
//! comments say why, never which benchmark run (the runs are logged in
//! `bench/runs/`, where a number means something), and xtask stays a crate
//! of thin commands.

use std::fs;
use std::path::{Path, PathBuf};

/// The most lines `xtask/src` may hold: drivers belong in `harness` or
/// `bench`, and xtask parses arguments and calls them.
const XTASK_MAX_LINES: usize = 3000;

/// Every `.rs` file under `dir`, build output and git's folder left out.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.unwrap().path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !matches!(name, "target" | ".git" | "node_modules") && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

/// The comments of a Rust source, each with the line it starts on: line
/// comments (`//`, `///`, `//!`) and block comments (nested as Rust nests
/// them). String, byte-string, raw-string and character literals are
/// skipped, so a `"//"` or test data in a string is not a comment.
fn comments(src: &str) -> Vec<(usize, String)> {
    let b = src.as_bytes();
    let (mut i, mut line) = (0, 1);
    let mut out = Vec::new();
    let count_lines = |from: usize, to: usize| b[from..to].iter().filter(|&&c| c == b'\n').count();
    while i < b.len() {
        let start = i;
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                let end = src[i..].find('\n').map_or(b.len(), |n| i + n);
                out.push((line, src[i..end].to_owned()));
                i = end;
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let (mut depth, mut j) = (1, i + 2);
                while j < b.len() && depth > 0 {
                    if b[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if b[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                out.push((line, src[i..j].to_owned()));
                i = j;
            }
            b'r' | b'b' | b'c' if raw_string_hashes(&b[i..]).is_some() => {
                let (prefix, hashes) = raw_string_hashes(&b[i..]).unwrap();
                let close: Vec<u8> = std::iter::once(b'"')
                    .chain(std::iter::repeat_n(b'#', hashes))
                    .collect();
                let body = i + prefix;
                i = b[body..]
                    .windows(close.len())
                    .position(|w| w == close.as_slice())
                    .map_or(b.len(), |n| body + n + close.len());
            }
            b'"' => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                i = j + 1;
            }
            b'\'' => {
                // A character literal (`'x'`, `'\''`, `'\u{1F600}'`) or a lifetime (`'a`).
                if b.get(i + 1) == Some(&b'\\') {
                    let close = b[i + 3..].iter().position(|&c| c == b'\'');
                    i = close.map_or(b.len(), |n| i + 3 + n + 1);
                } else {
                    let ch = src[i + 1..].chars().next().map_or(1, char::len_utf8);
                    i += if b.get(i + 1 + ch) == Some(&b'\'') {
                        ch + 2
                    } else {
                        1
                    };
                }
            }
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                // A whole identifier, so that `br` or `r` inside one is no literal.
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
            }
            _ => i += 1,
        }
        line += count_lines(start, i.min(b.len()));
    }
    out
}

/// `Some((length of the prefix up to the opening quote, number of #))` when
/// `b` starts a raw string (`r"`, `r#"`, `br"`, `cr#"`, ...).
fn raw_string_hashes(b: &[u8]) -> Option<(usize, usize)> {
    let after = match b {
        [b'b' | b'c', b'r', ..] => 2,
        [b'r', ..] => 1,
        _ => return None,
    };
    let hashes = b[after..].iter().take_while(|&&c| c == b'#').count();
    (b.get(after + hashes) == Some(&b'"')).then_some((after + hashes + 1, hashes))
}

/// Where `comment` cites a benchmark run by its number, if it does: the
/// word run (or runs, either case) then a number, after a space or a
/// hyphen. The verb followed by a count and a noun is not a citation, nor
/// is a quoted run id of test data; the examples are in the tests below.
fn run_citation(comment: &str) -> Option<&str> {
    let b = comment.as_bytes();
    for (at, _) in comment.match_indices("un") {
        let Some(start) = at.checked_sub(1) else {
            continue;
        };
        if !matches!(b[start], b'r' | b'R')
            || start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'"')
        {
            continue;
        }
        let mut i = at + 2;
        let plural = b.get(i) == Some(&b's');
        i += usize::from(plural);
        if !matches!(b.get(i), Some(b' ' | b'-')) {
            continue;
        }
        i += 1;
        if b.get(i) == Some(&b'#') {
            i += 1;
        }
        let digits = b[i.min(b.len())..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 {
            continue;
        }
        let rest = comment[i + digits..].trim_start();
        let next_word: String = rest.chars().take_while(char::is_ascii_alphabetic).collect();
        let cites = !plural
            || next_word.is_empty()
            || (matches!(next_word.as_str(), "and" | "to" | "or")
                && rest[next_word.len()..]
                    .trim_start()
                    .starts_with(|c: char| c.is_ascii_digit()));
        if cites {
            return Some(&comment[start..(i + digits).min(comment.len())]);
        }
    }
    None
}

#[test]
fn no_source_comment_cites_a_benchmark_run() {
    let root = crate::project_root().unwrap();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(files.len() > 100, "found only {} .rs files", files.len());
    let mut found = Vec::new();
    for file in &files {
        let src = fs::read_to_string(file).unwrap();
        for (line, text) in comments(&src) {
            for (k, part) in text.lines().enumerate() {
                if let Some(cited) = run_citation(part) {
                    let place = file.strip_prefix(&root).unwrap_or(file).display();
                    found.push(format!("{place}:{}: {cited:?}", line + k));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "comments cite benchmark runs; say why instead (the runs are logged in bench/runs/):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_run_number_is_told_from_the_verb_and_from_test_data() {
    for cited in [
        "/// measured in docs/performance.md, run 24.",
        "// (run 22)",
        "//! 2% between builds (runs 20 and 24): more",
        "// runs 16-18",
        "// Run 9: the table",
        "// see run-27",
        "/* runs 3, 4 */",
        "// runs 16",
    ] {
        assert!(run_citation(cited).is_some(), "{cited}");
    }
    for clean in [
        "// each layout runs 5 rounds",
        "// a rerun 3 times",
        r#"//!     "run_id": "run-1", "request_id": "r1""#,
        "// the runs of each way alternate",
        "// brun 4",
    ] {
        assert_eq!(run_citation(clean), None, "{clean}");
    }
}

#[test]
fn comments_are_found_outside_literals_only() {
    let src = "let a = \"// not a comment, run 3\"; // one\n\
               let b = r#\"/* nor \"this\" */\"#; let c = '\"'; let d: &'static str = \"x\";\n\
               /* two /* nested */ still two */ let e = b'/'; // three\n";
    let found: Vec<(usize, String)> = comments(src);
    assert_eq!(
        found,
        vec![
            (1, "// one".to_owned()),
            (3, "/* two /* nested */ still two */".to_owned()),
            (3, "// three".to_owned()),
        ]
    );
}

#[test]
fn xtask_stays_a_crate_of_thin_commands() {
    let root = crate::project_root().unwrap();
    let mut files = Vec::new();
    rust_files(&root.join("xtask").join("src"), &mut files);
    let lines: usize = files
        .iter()
        .map(|f| fs::read_to_string(f).unwrap().lines().count())
        .sum();
    assert!(
        lines < XTASK_MAX_LINES,
        "xtask/src holds {lines} lines, the goal is under {XTASK_MAX_LINES}: move the work of a \
         command into harness/ or bench/ and keep the command here"
    );
}
