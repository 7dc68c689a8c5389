//! The documentation names every probe check, lint and error kind the code
//! has, and nothing the code does not have: `docs/validator.md` (probe
//! checks with their severity, lints, contract errors) and
//! `docs/conformance.md` (the deviation families). A check, lint or kind
//! added without its row, or a row left behind, fails here.

use std::collections::BTreeSet;
use std::path::PathBuf;

use magma_validator::Lint;
use magma_validator::magma_protocol::ErrorKind;
use magma_validator::probe::{CheckSeverity, checks};

fn doc(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of the section whose heading is exactly `heading`.
fn section<'a>(text: &'a str, heading: &str) -> Vec<&'a str> {
    let mut lines = text.lines().skip_while(|l| *l != heading);
    assert!(lines.next().is_some(), "no section {heading:?}");
    let level = heading.chars().take_while(|c| *c == '#').count();
    lines
        .take_while(|l| {
            let hashes = l.chars().take_while(|c| *c == '#').count();
            hashes == 0 || hashes > level
        })
        .collect()
}

/// The cells of the table rows (not the header or the rule) of a section
/// whose header's first cell is `first_header`.
fn rows<'a>(lines: &[&'a str], first_header: &str) -> Vec<Vec<&'a str>> {
    let start = lines
        .iter()
        .position(|l| l.starts_with(&format!("| {first_header} |")))
        .unwrap_or_else(|| panic!("no table starting with {first_header:?}"));
    lines[start + 2..]
        .iter()
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
        .collect()
}

/// The names in backquotes of a cell.
fn quoted(cell: &str) -> Vec<&str> {
    cell.split('`').skip(1).step_by(2).collect()
}

fn compare(what: &str, code: BTreeSet<String>, documented: BTreeSet<String>) {
    let missing: Vec<_> = code.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&code).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "{what}: in the code but not documented: {missing:?}; documented but not in the code: {stale:?}"
    );
}

#[test]
fn every_probe_check_is_documented_with_its_severity() {
    let text = doc("validator.md");
    let table = rows(&section(&text, "## Probe checks"), "check");
    let mut documented = BTreeSet::new();
    for row in &table {
        let severity = row[1].trim_matches('*');
        // A row may name several checks of one family: `family/a`, `b`, ...
        let names = quoted(row[0]);
        let family = names[0].split_once('/').map(|(f, _)| f);
        for name in names {
            let name = match family {
                Some(f) if !name.contains('/') => format!("{f}/{name}"),
                _ => name.to_owned(),
            };
            documented.insert(format!("{name} ({severity})"));
        }
    }
    let code = checks()
        .into_iter()
        .map(|c| {
            let severity = match c.severity {
                CheckSeverity::Fail => "fail",
                CheckSeverity::Warn => "warn",
            };
            format!("{} ({severity})", c.name)
        })
        .collect();
    compare("probe checks of docs/validator.md", code, documented);
}

#[test]
fn every_lint_is_documented() {
    let text = doc("validator.md");
    let table = rows(&section(&text, "## Lints"), "lint");
    let documented = table
        .iter()
        .flat_map(|r| quoted(r[0]))
        .map(String::from)
        .collect();
    let code = Lint::ALL.iter().map(|l| l.code().to_owned()).collect();
    compare("lints of docs/validator.md", code, documented);
}

#[test]
fn every_error_kind_is_documented() {
    let text = doc("validator.md");
    let table = rows(&section(&text, "## Contract errors"), "code");
    let documented = table
        .iter()
        .flat_map(|r| quoted(r[0]))
        .map(String::from)
        .collect();
    let code = ErrorKind::ALL
        .iter()
        .map(|k| k.as_str().to_owned())
        .collect();
    compare("error kinds of docs/validator.md", code, documented);
}

#[test]
fn every_deviation_family_is_documented() {
    let text = doc("conformance.md");
    let table = rows(
        &section(&text, "## Deviations"),
        "families in the public corpus",
    );
    let families: BTreeSet<&str> = table.iter().flat_map(|r| quoted(r[0])).collect();
    for family in magma_testkit::fixtures::DEVIATIONS {
        assert!(
            families.contains(*family),
            "deviation family {family:?} (magma_testkit::fixtures::DEVIATIONS) has no row in the \
             deviations of docs/conformance.md"
        );
    }
}

/// `docs/architecture.md`'s validator code map names every file of `src/`
/// and only files that exist.
#[test]
fn the_code_map_names_every_source_file_and_only_files_there_are() {
    use magma_testkit::code_map::{architecture, code_map_problems, repo_root, section};
    let text = architecture(&repo_root(env!("CARGO_MANIFEST_DIR")));
    let rows = section(&text, "### crates/magma-validator ");
    let problems = code_map_problems(&PathBuf::from(env!("CARGO_MANIFEST_DIR")), &rows);
    assert!(
        problems.is_empty(),
        "docs/architecture.md:\n{}",
        problems.join("\n")
    );
}
