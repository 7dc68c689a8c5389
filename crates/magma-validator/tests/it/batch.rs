//! `batch` through the real binary: its verdicts equal magma-protocol's on
//! every case of the reference fixtures, agree with the public corpus
//! outside the deviation families, and every input line gets exactly one
//! output line, whatever the line holds.

use std::collections::BTreeMap;

use magma_validator::magma_protocol::documents::CaseKind;
use magma_validator::magma_protocol::{Error, ErrorKind, ExchangeError, Issue, Segment};
use serde_json::Value;

use crate::support::{code, run, stderr};
use magma_testkit::fixtures::{coaching_corpus, is_deviation, public_corpus};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../magma-protocol/tests/fixtures/reference.jsonl"
);

/// `type@a.0.b` of an issue, written here independently of the crate.
fn reason(issue: &Issue) -> String {
    if issue.kind() == ErrorKind::JsonInvalid {
        return "json_invalid".into();
    }
    let loc: Vec<String> = issue
        .location()
        .segments()
        .iter()
        .map(|s| match s {
            Segment::Key(k) => k.clone(),
            Segment::Index(i) => i.to_string(),
        })
        .collect();
    if loc.is_empty() {
        issue.kind().as_str().to_owned()
    } else {
        format!("{}@{}", issue.kind().as_str(), loc.join("."))
    }
}

/// magma-protocol's own verdict and reason for a case, through its registry
/// of kinds.
fn protocol_verdict(kind: &str, doc: &str, request: Option<&str>) -> (&'static str, String) {
    let doc = doc.as_bytes();
    let first = |e: Error| reason(e.first());
    let kind: CaseKind = kind.parse().unwrap_or_else(|e| panic!("{e}"));
    let result = match kind {
        CaseKind::Document(kind) => kind.parse(doc).map(drop).map_err(first),
        CaseKind::Exchange(kind) => kind
            .validate(request.unwrap().as_bytes(), doc)
            .map_err(|e| match e {
                ExchangeError::Request(e) => format!("request:{}", reason(e.first())),
                ExchangeError::Response(e) => reason(e.first()),
                ExchangeError::Mismatch(_) => "candidates_mismatch".into(),
                ExchangeError::CoachingMismatch(_) => "coaching_mismatch".into(),
                other => panic!("unexpected {other}"),
            }),
        other => panic!("unknown kind {other}"),
    };
    match result {
        Ok(()) => ("accept", "ok".into()),
        Err(r) => ("reject", r),
    }
}

/// Runs `magma-validate batch` on `input`; one parsed output per line.
fn batch(input: &[u8]) -> Vec<Value> {
    let out = run(&["batch"], input);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(out.stdout.ends_with(b"\n"));
    out.stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).expect("output line is JSON"))
        .collect()
}

#[test]
fn verdicts_equal_magma_protocol_on_every_fixture_case() {
    let text = std::fs::read_to_string(FIXTURES).expect("reference fixtures");
    let lines: Vec<&str> = text.lines().collect();
    let started = std::time::Instant::now();
    let outputs = batch(text.as_bytes());
    let elapsed = started.elapsed();
    assert_eq!(outputs.len(), lines.len(), "one output line per input line");
    // The first line is the file's metadata, not a case.
    assert_eq!(outputs[0]["verdict"], "reject");
    assert_eq!(outputs[0]["reason"], "invalid_line:missing_kind");

    let mut cases = 0usize;
    let mut same_verdict = 0usize;
    let mut same_reason = 0usize;
    let mut reference_agree = 0usize;
    let mut reference_deviate: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for (line, got) in lines[1..].iter().zip(&outputs[1..]) {
        let case: Value = serde_json::from_str(line).unwrap();
        let s = |k: &str| case[k].as_str();
        let (kind, doc, family) = (s("kind").unwrap(), s("doc").unwrap(), s("family").unwrap());
        let (want, want_reason) = protocol_verdict(kind, doc, s("request"));
        cases += 1;
        if got["verdict"] != want {
            failures.push(format!(
                "{}: magma-protocol {want}, batch {got}",
                s("id").unwrap()
            ));
            continue;
        }
        same_verdict += 1;
        if got["reason"] == want_reason.as_str() {
            same_reason += 1;
        } else {
            failures.push(format!(
                "{}: reason {want_reason:?}, batch {got}",
                s("id").unwrap()
            ));
        }
        if got["verdict"] == case["verdict"] {
            reference_agree += 1;
        } else {
            assert!(
                is_deviation(family),
                "{}: differs from the reference outside the deviation families",
                s("id").unwrap()
            );
            *reference_deviate.entry(family.to_owned()).or_default() += 1;
        }
    }
    eprintln!(
        "batch on the reference fixtures: {cases} cases in {:.2} s; verdicts equal to \
         magma-protocol {}/{cases}, reasons equal {same_reason}/{cases}; equal to the \
         reference {reference_agree}/{cases}, the rest in deviation families {reference_deviate:?}",
        elapsed.as_secs_f64(),
        same_verdict
    );
    assert!(cases > 4000, "fixture file looks truncated: {cases}");
    assert!(
        failures.is_empty(),
        "{} differences:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
#[cfg_attr(
    public_corpus_missing,
    ignore = "skipped: no public corpus (shared/conformance/public.jsonl beside the repository) when built; set MAGMA_PUBLIC_CORPUS to check it"
)]
fn public_corpus_if_present_verdicts_agree_outside_deviation_families() {
    let Some(path) = public_corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    agree_with_corpus("public corpus", &path, 1000);
}

#[test]
#[cfg_attr(
    coaching_corpus_missing,
    ignore = "skipped: no coaching corpus (shared/conformance/coaching-public.jsonl beside the repository) when built; set MAGMA_COACHING_CORPUS to check it"
)]
fn coaching_corpus_if_present_verdicts_agree_outside_deviation_families() {
    let Some(path) = coaching_corpus(env!("CARGO_MANIFEST_DIR")) else {
        return;
    };
    agree_with_corpus("coaching corpus", &path, 2000);
}

/// `batch` on every case of a corpus: the verdict equals the reference's
/// outside the deviation families, and a rejection names its error type.
fn agree_with_corpus(name: &str, path: &std::path::Path, min_cases: usize) {
    let text = std::fs::read_to_string(path).expect("read the corpus");
    let lines: Vec<&str> = text.lines().collect();
    let outputs = batch(text.as_bytes());
    assert_eq!(outputs.len(), lines.len());
    let mut agree = 0usize;
    let mut type_agree = (0usize, 0usize);
    let mut deviating: BTreeMap<String, usize> = BTreeMap::new();
    let mut disagreements = Vec::new();
    for (line, got) in lines.iter().zip(&outputs) {
        let case: Value = serde_json::from_str(line).unwrap();
        let family = case["family"].as_str().unwrap();
        if got["verdict"] == case["expected"] {
            agree += 1;
            // Outside the deviations, a rejection names the reference's error type.
            if got["verdict"] == "reject" && !is_deviation(family) {
                let want = case["expected_reason"].as_str().unwrap_or_default();
                let ty = |r: &str| {
                    r.trim_start_matches("request:")
                        .split(['@', ':'])
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_owned()
                };
                let ours = got["reason"].as_str().unwrap();
                type_agree.1 += 1;
                if ty(want) == ty(ours) {
                    type_agree.0 += 1;
                } else if !(ours.contains("int_out_of_range") || ours.ends_with("json_invalid")) {
                    // Only a documented deviation (64-bit integers, lone
                    // surrogates) may be found before what the reference reports.
                    disagreements.push(format!(
                        "{} [{family}] expected type {want}, batch {ours}",
                        case["id"]
                    ));
                }
            }
        } else if is_deviation(family) {
            *deviating.entry(family.to_owned()).or_default() += 1;
        } else {
            disagreements.push(format!(
                "{} [{family}] expected {} ({}), batch {got}",
                case["id"], case["expected"], case["expected_reason"]
            ));
        }
    }
    eprintln!(
        "batch on the {name}: {} cases, {agree} agree; differing only in deviation \
         families: {deviating:?}; first-error type equal on {}/{} rejections outside them",
        lines.len(),
        type_agree.0,
        type_agree.1
    );
    assert!(lines.len() >= min_cases, "the corpus looks truncated");
    assert!(
        disagreements.is_empty(),
        "{} disagreements outside the deviation families:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
}

#[test]
fn every_line_gets_exactly_one_answer_whatever_it_holds() {
    let huge_doc = format!(
        r#"{{"kind":"request","doc":"{{\"request_id\":\"r\",\"inputs\":[],\"pad\":\"{}\"}}"}}"#,
        "x".repeat(8 << 20)
    );
    let deep_doc = format!(
        r#"{{"kind":"response","doc":"{}{}"}}"#,
        "[".repeat(200_000),
        "]".repeat(200_000)
    );
    let deep_line = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let mut input: Vec<u8> = Vec::new();
    let lines: Vec<&[u8]> = vec![
        br#"{"kind":"health","doc":"{}","id":"a","expected":"accept"}"#,
        b"",
        b"garbage",
        b"\xff\xfe\x00\x01",
        br#"[{"kind":"health","doc":"{}"}]"#,
        br#"{"kind":"health"}"#,
        br#"{"kind":"exchange","doc":"[]"}"#,
        br#"{"kind":"teapot","doc":"{}"}"#,
        br#"{"kind":"health","doc":{"status":"ready"}}"#,
        huge_doc.as_bytes(),
        deep_doc.as_bytes(),
        deep_line.as_bytes(),
        br#"{"kind":"health","doc":"{\"status\":\"ready\"}"}"#,
    ];
    for l in &lines {
        input.extend_from_slice(l);
        input.extend_from_slice(b"\r\n");
    }
    let out = batch(&input);
    let reasons: Vec<&str> = out.iter().map(|v| v["reason"].as_str().unwrap()).collect();
    assert_eq!(
        reasons,
        [
            "ok",
            "invalid_line:empty",
            "invalid_line:not_json",
            "invalid_line:not_json",
            "invalid_line:not_object",
            "invalid_line:missing_doc",
            "invalid_line:missing_request",
            "invalid_line:unknown_kind",
            "invalid_line:bad_fields",
            "extra_forbidden@pad",
            "json_invalid",
            "invalid_line:not_object",
            "ok",
        ]
    );
    assert_eq!(out[0]["verdict"], "accept");
    assert!(out[1..12].iter().all(|v| v["verdict"] == "reject"));
    // Exactly the two keys.
    assert_eq!(out[0].as_object().unwrap().len(), 2);
}
