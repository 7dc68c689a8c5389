//! The agent author's guide against the code, and every page reachable from
//! the README: what a stranger reads must be findable and must count right.

use std::collections::{BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// GitHub's anchor of a heading: lower case, spaces to `-`, punctuation
/// other than `-` and `_` dropped.
fn anchor(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The `## ` headings outside fenced blocks.
fn sections(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && let Some(h) = line.strip_prefix("## ") {
            out.push(h.trim().to_owned());
        }
    }
    out
}

#[test]
fn the_contents_list_of_the_guide_is_its_sections_in_order() {
    let guide = read("docs/server.md");
    let listed: Vec<String> = guide
        .lines()
        .filter_map(|l| l.strip_prefix("- [")?.split_once("](#").map(|(_, a)| a))
        .map(|a| a.trim_end_matches(')').to_owned())
        .collect();
    let headings: Vec<String> = sections(&guide).iter().map(|h| anchor(h)).collect();
    assert_eq!(
        listed, headings,
        "docs/server.md: contents list against its ## headings"
    );
}

/// The methods of `pub trait Agent` in `src/agent.rs`.
fn agent_methods() -> Vec<String> {
    let source = read("crates/magma-server/src/agent.rs");
    let start = source.find("pub trait Agent").expect("pub trait Agent");
    let body = &source[start..];
    let end = body.find("\n}\n").expect("the end of the trait");
    body[..end]
        .lines()
        .filter_map(|l| l.trim_start().strip_prefix("fn "))
        .map(|l| l.split(['(', '<']).next().unwrap_or(l).to_owned())
        .collect()
}

/// The first column (a method in backquotes) of the table after `after`.
fn table_methods(text: &str, after: &str) -> Vec<String> {
    let at = text
        .find(after)
        .unwrap_or_else(|| panic!("{after:?} not in the guide"));
    text[at..]
        .lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .skip(2)
        .filter_map(|row| row.split('`').nth(1))
        .map(|m| m.split('(').next().unwrap_or(m).to_owned())
        .collect()
}

const NUMBERS: [&str; 10] = [
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
];

#[test]
fn the_guide_counts_the_methods_of_the_trait() {
    let methods = agent_methods();
    let guide = read("docs/server.md");
    let total = NUMBERS[methods.len()];
    assert!(
        guide.contains(&format!("The trait has {total} methods.")),
        "docs/server.md must say \"The trait has {total} methods.\" ({methods:?})"
    );
    let serving = table_methods(&guide, "These four serve inferences");
    let coaching = table_methods(&guide, "Five methods of `Agent`, all with defaults");
    assert_eq!(serving.len(), 4, "{serving:?}");
    assert_eq!(coaching.len(), 5, "{coaching:?}");
    let mut documented: Vec<String> = serving.into_iter().chain(coaching).collect();
    let mut actual = methods;
    documented.sort();
    actual.sort();
    assert_eq!(
        documented, actual,
        "the guide's two method tables against the trait"
    );
}

/// Local Markdown links of a page, resolved against its folder.
fn links(page: &Path) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    let dir = page.parent().unwrap();
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|target| target.split('#').next().unwrap_or(target))
        .filter(|t| t.ends_with(".md") && !t.contains("://"))
        .map(|t| dir.join(t))
        .filter_map(|p| p.canonicalize().ok())
        .collect()
}

#[test]
fn every_page_of_docs_is_reachable_from_the_readme() {
    let root = root().canonicalize().unwrap();
    let mut seen = BTreeSet::new();
    let mut queue = VecDeque::from([root.join("README.md")]);
    while let Some(page) = queue.pop_front() {
        if seen.insert(page.clone()) {
            queue.extend(links(&page));
        }
    }
    let unreachable: Vec<String> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .filter(|p| !seen.contains(&p.canonicalize().unwrap()))
        .map(|p| p.display().to_string())
        .collect();
    assert!(
        unreachable.is_empty(),
        "not reachable from README.md by links: {unreachable:?}"
    );
}
