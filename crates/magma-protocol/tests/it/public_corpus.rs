//! The public corpora of reference verdicts (`shared/conformance/public.jsonl`
//! beside the repository, or `$MAGMA_PUBLIC_CORPUS`; and the coaching one,
//! `coaching-public.jsonl` beside it, or `$MAGMA_COACHING_CORPUS`).
//!
//! The corpora are not part of the repository. When one is absent (and
//! neither its variable nor `CI=true` is set) its test is built as ignored
//! (`build.rs`), so `cargo test` lists it as skipped with the reason; under
//! `CI=true` or with a variable set, a missing file is a failure.

use std::collections::BTreeMap;
use std::path::Path;

use magma_protocol::ErrorKind;

use crate::corpus::verdict;
use magma_testkit::fixtures::{coaching_corpus, is_deviation, public_corpus};

#[test]
#[cfg_attr(
    public_corpus_missing,
    ignore = "skipped: no public corpus (shared/conformance/public.jsonl beside the repository) when built; set MAGMA_PUBLIC_CORPUS to check it"
)]
fn public_corpus_if_present_verdicts_match_outside_deviation_families() {
    let Some(path) = public_corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    check_corpus("public corpus", &path, 1000);
}

#[test]
#[cfg_attr(
    coaching_corpus_missing,
    ignore = "skipped: no coaching corpus (shared/conformance/coaching-public.jsonl beside the repository) when built; set MAGMA_COACHING_CORPUS to check it"
)]
fn coaching_corpus_if_present_verdicts_match_outside_deviation_families() {
    let Some(path) = coaching_corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    check_corpus("coaching corpus", &path, 2000);
}

/// Every case of a corpus: the verdict equals the reference's outside the
/// deviation families, and a rejection names the reference's error type.
fn check_corpus(name: &str, path: &Path, min_cases: usize) {
    let text = std::fs::read_to_string(path).expect("read the corpus");
    let mut disagreements = Vec::new();
    let mut per_family: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut reason_agree = (0usize, 0usize);
    let mut cases = 0;
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let case: serde_json::Value = serde_json::from_str(line).expect("corpus line is JSON");
        let s = |k: &str| case.get(k).and_then(|v| v.as_str());
        let (id, family, kind, doc) = (
            s("id").unwrap(),
            s("family").unwrap(),
            s("kind").unwrap(),
            s("doc").unwrap(),
        );
        let expected = s("expected").unwrap();
        cases += 1;
        let got = verdict(kind, doc, s("request"));
        let got_word = if got.is_ok() { "accept" } else { "reject" };
        let entry = per_family.entry(family.to_owned()).or_default();
        entry.0 += 1;
        if got_word == expected {
            entry.1 += 1;
        } else if !is_deviation(family) {
            let why = match &got {
                Ok(()) => "accepted".to_owned(),
                Err(issues) => issues
                    .iter()
                    .map(|i| i.to_string())
                    .collect::<Vec<_>>()
                    .join("; "),
            };
            disagreements.push(format!(
                "{id} [{family}] expected {expected} ({}), got {got_word}: {why}",
                s("expected_reason").unwrap_or("")
            ));
        }
        // The hint names the pydantic error type of the first problem
        // (`int_type@inputs.0.id`, `request:missing@...`, `value_error: ...`):
        // outside the deviation families, the crate must report that type too.
        if let (Err(issues), Some(reason), false) =
            (&got, s("expected_reason"), is_deviation(family))
        {
            let ty = reason.strip_prefix("request:").unwrap_or(reason);
            let ty = ty.split(['@', ':']).next().unwrap_or_default().trim();
            reason_agree.1 += 1;
            // A 64-bit limit or a lone surrogate (both documented deviations)
            // can be found before what the reference reports.
            let deviated = issues.iter().any(|i| {
                i.kind() == ErrorKind::IntOutOfRange
                    || i.detail().is_some_and(|d| d.contains("lone surrogate"))
            });
            if deviated || issues.iter().any(|i| i.kind().as_str() == ty) {
                reason_agree.0 += 1;
            } else {
                disagreements.push(format!(
                    "{id} [{family}] expected type {ty}, got {}",
                    issues[0]
                ));
            }
        }
    }
    let deviating: Vec<String> = per_family
        .iter()
        .filter(|(_, (n, ok))| n != ok)
        .map(|(f, (n, ok))| format!("{f}: {ok}/{n}"))
        .collect();
    eprintln!(
        "{name}: {cases} cases; families with differences: {deviating:?}; \
         rejection type agreement (outside deviations) {}/{}",
        reason_agree.0, reason_agree.1
    );
    assert!(
        cases >= min_cases,
        "the corpus looks truncated: {cases} cases"
    );
    assert!(
        disagreements.is_empty(),
        "{} disagreements outside the deviation families:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}
