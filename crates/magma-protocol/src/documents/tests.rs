//! The registry against itself and against the fixtures: names, parsing,
//! and two ways to write, one output, on every fixture document of every
//! kind (the values' own tests are in `json/write.rs`, the models' built by
//! hand in `model/tests.rs`).

use std::collections::BTreeSet;

use super::*;
use crate::ErrorKind;
use crate::json::testing::{on_large_stack, serde};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/reference.jsonl"
);

/// `(kind, doc, request)` of every fixture case.
fn fixture_cases() -> Vec<(String, String, Option<String>)> {
    let text = std::fs::read_to_string(FIXTURES).expect("fixture file");
    let mut lines = text.lines();
    lines.next().expect("header line");
    lines
        .map(|line| {
            let case: serde_json::Value = serde_json::from_str(line).expect("fixture line");
            let text = |k: &str| case.get(k).and_then(|v| v.as_str()).map(str::to_owned);
            (
                text("kind").expect("kind"),
                text("doc").expect("doc"),
                text("request"),
            )
        })
        .collect()
}

#[test]
fn every_name_reads_back_as_its_kind() {
    let names: Vec<&str> = CaseKind::all().map(CaseKind::name).collect();
    assert_eq!(
        names.len(),
        DocumentKind::ALL.len() + ExchangeKind::ALL.len()
    );
    assert_eq!(
        names.iter().collect::<BTreeSet<_>>().len(),
        names.len(),
        "{names:?}"
    );
    for kind in CaseKind::all() {
        assert_eq!(kind.name().parse::<CaseKind>(), Ok(kind));
        if kind.name().contains('_') {
            assert!(kind.name().replace('_', "-").parse::<CaseKind>().is_err());
        }
        assert_eq!(kind.to_string(), kind.name());
        assert!(
            kind.name()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'_'),
            "{kind}"
        );
    }
    for kind in DocumentKind::ALL {
        assert_eq!(kind.name().parse::<DocumentKind>(), Ok(kind));
        assert!(kind.name().parse::<ExchangeKind>().is_err());
    }
    for kind in ExchangeKind::ALL {
        assert_eq!(kind.name().parse::<ExchangeKind>(), Ok(kind));
        assert!(kind.name().parse::<DocumentKind>().is_err());
        assert_eq!(kind.request().family(), kind.response().family());
    }
    let types: BTreeSet<_> = DocumentKind::ALL.iter().map(|k| k.type_name()).collect();
    assert_eq!(types.len(), DocumentKind::ALL.len());
}

#[test]
fn an_unknown_name_is_refused_with_the_names_there_are() {
    let e = "Request".parse::<DocumentKind>().unwrap_err();
    assert_eq!(e.name(), "Request");
    let all: Vec<&str> = DocumentKind::ALL.iter().map(|k| k.name()).collect();
    let (last, rest) = all.split_last().unwrap();
    assert_eq!(
        e.to_string(),
        format!(
            "unknown document kind \"Request\": expected {} or {last}",
            rest.join(", ")
        )
    );
    assert_eq!(
        "".parse::<ExchangeKind>().unwrap_err().to_string(),
        "unknown exchange kind \"\": expected exchange or coaching_exchange"
    );
    let e = "exchanges".parse::<CaseKind>().unwrap_err().to_string();
    assert!(
        e.starts_with("unknown kind \"exchanges\": expected request, response, info, health, "),
        "{e}"
    );
    assert!(
        e.ends_with(", export_result, exchange or coaching_exchange"),
        "{e}"
    );
}

#[test]
fn the_fixtures_hold_exactly_the_registered_kinds() {
    let found: BTreeSet<String> = fixture_cases().into_iter().map(|(k, _, _)| k).collect();
    let registered: BTreeSet<String> = CaseKind::all().map(|k| k.name().to_owned()).collect();
    assert_eq!(found, registered, "harness/python/gen_fixtures.py's kinds");
}

#[test]
fn both_entry_points_give_the_same_document_of_the_kind_asked() {
    let (mut accepted, mut rejected) = (0, 0);
    for (kind, doc, _) in fixture_cases() {
        let Ok(CaseKind::Document(kind)) = kind.parse() else {
            continue;
        };
        let direct = kind.parse(doc.as_bytes());
        let two_step = Json::from_slice(doc.as_bytes()).and_then(|v| kind.validate(v));
        assert_eq!(
            direct.as_ref().ok(),
            two_step.as_ref().ok(),
            "{kind}: {doc}"
        );
        match direct {
            Ok(d) => {
                assert_eq!(d.kind(), kind);
                accepted += 1;
            }
            Err(_) => rejected += 1,
        }
    }
    assert!(accepted > 1500 && rejected > 1500, "{accepted} {rejected}");
}

#[test]
fn exchanges_say_which_part_failed() {
    let request = br#"{"request_id": "r", "inputs": [{"id": 1, "instruction": {"type": "user", "content": "hi"}}]}"#;
    let none = b"[]";
    assert!(matches!(
        ExchangeKind::Inference.validate(request, none),
        Err(ExchangeError::Mismatch(_))
    ));
    assert!(matches!(
        ExchangeKind::Inference.validate(b"{}", none),
        Err(ExchangeError::Request(_))
    ));
    let coaching = br#"{"run_id": "run", "request_id": "r1", "kind": "format",
        "stage": {"id": 0, "goal": "g"}, "target_step_id": 1,
        "trajectory": [{"id": 1, "input": {"id": 0, "instruction": {"type": "user", "content": "hi"}}}],
        "reinjection_points": [{"id": "p1", "input_step_id": 1}]}"#;
    let reply = |id: &str| {
        format!(
            r#"{{"request_id": "{id}", "status": "corrected", "proposals": [{{"reinjection_point_id": "p1", "extra_keys": {{}}}}]}}"#
        )
    };
    assert_eq!(
        ExchangeKind::Coaching.validate(coaching, reply("r1").as_bytes()),
        Ok(())
    );
    let Err(ExchangeError::CoachingMismatch(e)) =
        ExchangeKind::Coaching.validate(coaching, reply("r2").as_bytes())
    else {
        panic!("a reply to another request is a mismatch");
    };
    assert_eq!(e.first().kind(), ErrorKind::CoachingMismatch);
    assert!(matches!(
        ExchangeKind::Coaching.validate(coaching, b"[]"),
        Err(ExchangeError::Response(_))
    ));
    assert!(matches!(
        ExchangeKind::Coaching.validate(request, b"[]"),
        Err(ExchangeError::Request(_))
    ));
}

#[cfg(feature = "schema")]
#[test]
fn the_inference_and_coaching_documents_publish_their_schema() {
    for kind in DocumentKind::ALL {
        match kind.schema() {
            Some(schema) => assert_eq!(schema.name(), kind.type_name()),
            None => assert_eq!(kind.family(), Family::Export, "{kind} has no schema"),
        }
    }
}

#[test]
fn every_fixture_writes_as_serde_json_does() {
    on_large_stack(every_fixture);
}

/// The document written by its own writer and by serde, the same bytes;
/// an accepted one reads back as itself, a rejected one's 422 body writes
/// alike too. Returns how many values were checked.
fn check_document(kind: DocumentKind, doc: &str) -> usize {
    let bytes = doc.as_bytes();
    let mut checked = 1;
    match kind.parse(bytes) {
        Ok(v) => {
            let text = v.to_json_string();
            assert_eq!(text, serde(&v), "{kind} document {doc}");
            let again = kind
                .parse(text.as_bytes())
                .expect("a written document reads back");
            assert_eq!(again, v, "{text}");
        }
        Err(e) => {
            let body = e.to_fastapi_body();
            assert_eq!(body.to_json_string(), serde(&body), "{kind} document {doc}");
        }
    }
    // The same document as free-form JSON, validated and not (the
    // latter keeps NaN and 1e400).
    if let Ok(v) = Json::from_slice(bytes) {
        assert_eq!(v.to_json_string(), serde(&v), "{doc}");
        checked += 1;
    }
    if let Ok(v) = crate::json::parse(bytes, crate::limits::READ) {
        assert_eq!(crate::json::to_string(&v), serde(&v), "{doc}");
        checked += 1;
    }
    checked
}

fn every_fixture() {
    let (mut cases, mut checked) = (0, 0);
    let mut kinds = BTreeSet::new();
    for (kind, doc, request) in fixture_cases() {
        let kind: CaseKind = kind.parse().unwrap_or_else(|e| panic!("fixture: {e}"));
        kinds.insert(kind);
        checked += match (kind, request) {
            (CaseKind::Document(kind), _) => check_document(kind, &doc),
            (CaseKind::Exchange(x), Some(request)) => {
                check_document(x.request(), &request) + check_document(x.response(), &doc)
            }
            (CaseKind::Exchange(x), None) => panic!("a {x} case without its request"),
        };
        cases += 1;
    }
    assert!(cases >= 4000, "{cases} fixture cases");
    assert!(checked >= 2 * cases, "{checked} values checked");
    assert_eq!(kinds.len(), CaseKind::all().count());
}
