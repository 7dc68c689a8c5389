//! `cargo xtask conformance [--check]`: the project's differential fixtures.
//!
//! Builds the reference venv (magma-core 2.0.1 with exactly pinned pydantic), runs
//! `harness/python/gen_fixtures.py`, which asks the real reference for the verdict of every
//! generated document, and writes `crates/magma-protocol/tests/fixtures/reference.jsonl`.
//! With `--check` the file is regenerated into a scratch file and compared with the committed
//! one instead; any difference fails with a diff summary.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use anyhow::{Context, Result, bail};

use crate::python;

const FIXTURE: &str = "crates/magma-protocol/tests/fixtures/reference.jsonl";
const GENERATOR: &str = "harness/python/gen_fixtures.py";
const REQUIREMENTS: &str = "harness/python/requirements-reference.txt";
/// Installed with `--no-deps`: its declared dependencies (torch, ...) are not needed by the models.
const REFERENCE_PACKAGE: &str = "magma-core==2.0.1";
const FIX_HINT: &str = "run `cargo xtask conformance` and commit the result";

pub fn run(check: bool) -> Result<()> {
    let root = crate::project_root()?;
    let python = python::ensure_venv("reference", &root.join(REQUIREMENTS), &[REFERENCE_PACKAGE])?;

    let scratch_dir = crate::xtask_dir()?;
    fs::create_dir_all(&scratch_dir)
        .with_context(|| format!("creating {}", scratch_dir.display()))?;
    let scratch = scratch_dir.join(format!("reference.{}.jsonl", std::process::id()));
    let generated = generate(&root, &python, &scratch);
    let removed = fs::remove_file(&scratch);
    let generated = generated?;
    if let Err(err) = removed {
        eprintln!("xtask: could not remove {}: {err}", scratch.display());
    }
    let summary = validate(&generated)?;

    let fixture = root.join(FIXTURE);
    if check {
        let committed = match fs::read(&fixture) {
            Ok(bytes) => bytes,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                bail!("{} does not exist; {FIX_HINT}", fixture.display())
            }
            Err(err) => return Err(err).with_context(|| format!("reading {}", fixture.display())),
        };
        let committed = String::from_utf8(committed)
            .with_context(|| format!("{} is not UTF-8; {FIX_HINT}", fixture.display()))?;
        let committed = committed.replace("\r\n", "\n");
        if committed != generated {
            bail!(
                "{} is out of date:\n{}\n{FIX_HINT}",
                fixture.display(),
                diff_summary(&committed, &generated)
            );
        }
        println!("{FIXTURE} is up to date ({summary})");
        return Ok(());
    }

    let unchanged = fs::read(&fixture).is_ok_and(|old| old == generated.as_bytes());
    if unchanged {
        println!("{FIXTURE} unchanged ({summary})");
    } else {
        if let Some(parent) = fixture.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        fs::write(&fixture, &generated)
            .with_context(|| format!("writing {}", fixture.display()))?;
        println!("{FIXTURE} written ({summary})");
    }
    Ok(())
}

/// Runs the generator into `out` and returns the file's text.
fn generate(root: &Path, python: &Path, out: &Path) -> Result<String> {
    let mut cmd = python::command(python);
    cmd.current_dir(root)
        .arg(root.join(GENERATOR))
        .arg("--out")
        .arg(out);
    let output = python::run(&mut cmd).context("generating the conformance fixtures")?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    for line in stderr.lines() {
        eprintln!("gen_fixtures: {line}");
    }
    let text =
        fs::read_to_string(out).with_context(|| format!("reading generated {}", out.display()))?;
    Ok(text)
}

/// Every line must be a JSON object that Rust's serde_json accepts (no lone surrogates, no
/// NaN), the meta line must count the cases, and ids must be unique. Returns a summary.
fn validate(text: &str) -> Result<String> {
    let mut lines = text.lines();
    let meta_line = lines.next().context("the generated file is empty")?;
    let meta: serde_json::Value =
        serde_json::from_str(meta_line).context("parsing the meta line")?;
    let declared = meta
        .get("cases")
        .and_then(serde_json::Value::as_u64)
        .context("the meta line has no integer `cases`")?;
    let mut ids = std::collections::BTreeSet::new();
    let (mut accept, mut reject) = (0_u64, 0_u64);
    for (n, line) in lines.enumerate() {
        let case: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("line {} is not valid JSON for serde_json", n + 2))?;
        let id = case
            .get("id")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        if !ids.insert(id.to_owned()) {
            bail!("line {}: duplicate or missing id {id:?}", n + 2);
        }
        match case.get("verdict").and_then(serde_json::Value::as_str) {
            Some("accept") => accept += 1,
            Some("reject") => reject += 1,
            other => bail!("line {}: bad verdict {other:?}", n + 2),
        }
    }
    if accept + reject != declared {
        bail!(
            "the meta line declares {declared} cases, the file holds {}",
            accept + reject
        );
    }
    Ok(format!(
        "{declared} cases: {accept} accept, {reject} reject; {} bytes",
        text.len()
    ))
}

/// A unified-style diff summary, case by case: every line is keyed by its `id` (the meta line
/// by `meta`), so a changed verdict shows as one small hunk wherever it is in the file.
fn diff_summary(old: &str, new: &str) -> String {
    const SHOW: usize = 12;
    const WIDTH: usize = 160;
    let old_cases = keyed_lines(old);
    let new_cases = keyed_lines(new);
    let old_index: BTreeMap<&str, (usize, &str)> = old_cases
        .iter()
        .map(|(k, n, l)| (k.as_str(), (*n, *l)))
        .collect();
    let new_index: BTreeMap<&str, (usize, &str)> = new_cases
        .iter()
        .map(|(k, n, l)| (k.as_str(), (*n, *l)))
        .collect();

    let mut hunks = Vec::new();
    let (mut changed, mut removed, mut added) = (0_usize, 0_usize, 0_usize);
    for (key, line_no, line) in &old_cases {
        match new_index.get(key.as_str()) {
            Some((new_no, new_line)) if new_line != line => {
                changed += 1;
                let from = first_difference(line, new_line).saturating_sub(WIDTH / 4);
                hunks.push(format!(
                    "@@ -{line_no} +{new_no} @@ {key}\n-{}\n+{}\n",
                    excerpt(line, from, WIDTH),
                    excerpt(new_line, from, WIDTH)
                ));
            }
            Some(_) => {}
            None => {
                removed += 1;
                hunks.push(format!(
                    "@@ -{line_no} @@ {key}\n-{}\n",
                    truncate(line, WIDTH)
                ));
            }
        }
    }
    for (key, line_no, line) in &new_cases {
        if !old_index.contains_key(key.as_str()) {
            added += 1;
            hunks.push(format!(
                "@@ +{line_no} @@ {key}\n+{}\n",
                truncate(line, WIDTH)
            ));
        }
    }
    let mut out = format!(
        "--- {FIXTURE} (committed, {} lines)\n+++ {FIXTURE} (regenerated, {} lines)\n\
         {changed} cases changed, {removed} removed, {added} added\n",
        old_cases.len(),
        new_cases.len()
    );
    for hunk in hunks.iter().take(SHOW) {
        out.push_str(hunk);
    }
    if hunks.len() > SHOW {
        out.push_str(&format!("[... {} more hunks ...]\n", hunks.len() - SHOW));
    }
    if hunks.is_empty() {
        out.push_str(
            "(the lines are equal; the order of the cases or the final newline differs)\n",
        );
    }
    out
}

/// `(key, 1-based line number, line)`: the key is the case `id`, `meta` for a line without
/// one that comes first, else `line N`.
fn keyed_lines(text: &str) -> Vec<(String, usize, &str)> {
    let mut seen = BTreeMap::new();
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            let id = serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| {
                    v.get("id")
                        .and_then(serde_json::Value::as_str)
                        .map(str::to_owned)
                });
            let mut key = match id {
                Some(id) => id,
                None if n == 0 => "meta".to_owned(),
                None => format!("line {}", n + 1),
            };
            // keep keys unique even if ids repeat
            let count = seen.entry(key.clone()).or_insert(0_usize);
            *count += 1;
            if *count > 1 {
                key = format!("{key} (#{count})");
            }
            (key, n + 1, line)
        })
        .collect()
}

/// Index (in chars) of the first char where `a` and `b` differ.
fn first_difference(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
}

/// `width` chars of `line` from char `from`, with `...` where something was cut.
fn excerpt(line: &str, from: usize, width: usize) -> String {
    if from == 0 {
        return truncate(line, width);
    }
    let rest: String = line.chars().skip(from).collect();
    format!("...{}", truncate(&rest, width))
}

fn truncate(line: &str, width: usize) -> String {
    match line.char_indices().nth(width) {
        Some((cut, _)) => format!("{}...", &line[..cut]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_summary_reports_cases_by_id() {
        let old = "{\"cases\":2}\n{\"id\":\"a/1\",\"v\":1}\n{\"id\":\"a/2\",\"v\":2}\n";
        let new = "{\"cases\":2}\n{\"id\":\"a/1\",\"v\":9}\n{\"id\":\"a/3\",\"v\":3}\n";
        let diff = diff_summary(old, new);
        assert!(
            diff.contains("1 cases changed, 1 removed, 1 added"),
            "{diff}"
        );
        assert!(
            diff.contains(
                "@@ -2 +2 @@ a/1\n-{\"id\":\"a/1\",\"v\":1}\n+{\"id\":\"a/1\",\"v\":9}\n"
            ),
            "{diff}"
        );
        assert!(diff.contains("@@ -3 @@ a/2\n"), "{diff}");
        assert!(diff.contains("@@ +3 @@ a/3\n"), "{diff}");
    }

    #[test]
    fn diff_summary_shows_where_a_long_line_changed() {
        let tail = "x".repeat(400);
        let old = format!("{{\"id\":\"a/1\",\"doc\":\"{tail}\",\"verdict\":\"accept\"}}\n");
        let new = format!("{{\"id\":\"a/1\",\"doc\":\"{tail}\",\"verdict\":\"reject\"}}\n");
        let diff = diff_summary(&old, &new);
        assert!(diff.contains("\"verdict\":\"accept\"}\n+..."), "{diff}");
        assert!(diff.contains("\"verdict\":\"reject\"}\n"), "{diff}");
    }

    #[test]
    fn diff_summary_reports_the_meta_line() {
        let diff = diff_summary("{\"cases\":1}\n", "{\"cases\":2}\n");
        assert!(diff.contains("@@ -1 +1 @@ meta"), "{diff}");
    }

    #[test]
    fn validate_counts_cases() {
        let text = "{\"cases\":2}\n{\"id\":\"a/1\",\"verdict\":\"accept\"}\n{\"id\":\"a/2\",\"verdict\":\"reject\"}\n";
        let summary = validate(text).expect("valid");
        assert!(
            summary.starts_with("2 cases: 1 accept, 1 reject"),
            "{summary}"
        );
        assert!(validate("{\"cases\":1}\n{\"id\":\"a\",\"verdict\":\"accept\"}\n{\"id\":\"a\",\"verdict\":\"accept\"}\n").is_err());
    }
}
