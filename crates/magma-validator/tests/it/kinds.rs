//! Every kind magma-protocol's registry holds, through the real binary:
//! `check --kind` takes its name (and the `-` spelling) and gives the
//! reference's verdict on a valid and an invalid document of it, `batch`
//! does the same for every document and exchange kind, and
//! `docs/validator.md` names each one. A kind registered in
//! `magma_protocol::documents` is covered here without a line of its own.

use std::collections::BTreeMap;

use magma_testkit::fixtures::is_deviation;
use magma_validator::DocumentKind;
use magma_validator::magma_protocol::documents::CaseKind;
use serde_json::Value;

use crate::support::{code, run, stderr, stdout};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../magma-protocol/tests/fixtures/reference.jsonl"
);

/// One case of the reference fixtures.
struct Case {
    line: String,
    doc: String,
}

/// For every kind of the fixtures, its first accepted and its first
/// rejected case outside the deviation families, as the reference judged
/// them.
fn accepted_and_rejected() -> BTreeMap<String, (Case, Case)> {
    let text = std::fs::read_to_string(FIXTURES).expect("reference fixtures");
    let mut found: BTreeMap<String, (Option<Case>, Option<Case>)> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let v: Value = serde_json::from_str(line).expect("fixture line");
        let s = |k: &str| v[k].as_str().unwrap_or_default().to_owned();
        if is_deviation(&s("family")) {
            continue;
        }
        let slot = found.entry(s("kind")).or_default();
        let case = || Case {
            line: line.to_owned(),
            doc: s("doc"),
        };
        match s("verdict").as_str() {
            "accept" if slot.0.is_none() => slot.0 = Some(case()),
            "reject" if slot.1.is_none() => slot.1 = Some(case()),
            _ => {}
        }
    }
    found
        .into_iter()
        .map(|(kind, (a, r))| {
            let both = a.zip(r);
            (
                kind.clone(),
                both.unwrap_or_else(|| panic!("{kind}: no accepted and rejected case")),
            )
        })
        .collect()
}

#[test]
fn check_takes_every_registered_kind_and_judges_it_as_the_reference_does() {
    let cases = accepted_and_rejected();
    for kind in DocumentKind::ALL {
        let (accepted, rejected) = cases
            .get(kind.name())
            .unwrap_or_else(|| panic!("no fixture of {kind}"));
        for spelling in [kind.name().to_owned(), kind.name().replace('_', "-")] {
            let args = ["check", "--kind", &spelling, "--format", "json", "-"];
            for (case, want) in [(accepted, 0), (rejected, 1)] {
                let out = run(&args, case.doc.as_bytes());
                assert_eq!(
                    code(&out),
                    want,
                    "{spelling}: {}{}",
                    stdout(&out),
                    stderr(&out)
                );
                let report: Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
                assert_eq!(report["kind"], kind.name(), "{report}");
                let errors = report["summary"]["errors"].as_u64().unwrap();
                assert_eq!(errors > 0, want == 1, "{spelling}: {report}");
            }
        }
    }
}

#[test]
fn batch_takes_every_registered_kind_and_judges_it_as_the_reference_does() {
    let cases = accepted_and_rejected();
    let mut input = String::new();
    let mut expected = Vec::new();
    for kind in CaseKind::all() {
        let (accepted, rejected) = cases
            .get(kind.name())
            .unwrap_or_else(|| panic!("no fixture of {kind}"));
        for (case, want) in [(accepted, "accept"), (rejected, "reject")] {
            input.push_str(&case.line);
            input.push('\n');
            expected.push((kind.name(), want));
        }
    }
    let out = run(&["batch"], input.as_bytes());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let verdicts: Vec<Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(verdicts.len(), expected.len());
    for ((kind, want), got) in expected.iter().zip(&verdicts) {
        assert_eq!(got["verdict"], *want, "{kind}: {got}");
        assert_ne!(got["reason"], "invalid_line:unknown_kind", "{kind}");
    }
}

#[test]
fn the_guide_names_every_registered_kind_for_check_and_batch() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/validator.md");
    let text = std::fs::read_to_string(path).expect("docs/validator.md");
    let section = |heading: &str| -> String {
        let mut lines = text.lines().skip_while(|l| *l != heading);
        assert!(lines.next().is_some(), "no section {heading}");
        lines
            .take_while(|l| !l.starts_with("## "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let (check, batch) = (section("## check"), section("## batch"));
    let batch_kinds = batch
        .lines()
        .find(|l| l.starts_with("| `kind` |"))
        .expect("batch's `kind` row");
    for kind in CaseKind::all() {
        let quoted = format!("`{}`", kind.name());
        if let CaseKind::Document(_) = kind {
            assert!(
                check.contains(&quoted),
                "check's section does not name {quoted}"
            );
        }
        assert!(
            batch_kinds.contains(&quoted),
            "batch's `kind` row does not name {quoted}"
        );
    }
}
