//! What fuzzing (`fuzz/`, `cargo xtask fuzz`) checks, kept on stable: the
//! fuzz targets' invariants replayed on every document of the reference
//! fixtures, and each input a fuzz run ever found, as its own test.
//!
//! Fuzz findings: none so far (runs recorded in `docs/reliability.md`). A
//! crash input goes here as a `#[test]` named after its target, with the
//! bytes inline and the invariant it broke.

use std::collections::BTreeMap;

use magma_protocol::coaching::CoachingPayload;
use magma_protocol::documents::{CaseKind, DocumentKind, ExchangeKind, Family};
use magma_protocol::tools::ToolDescription;
use magma_protocol::{
    AgentHealth, AgentInfo, AgentRequest, AgentResponse, EnvFeedback, ExchangeError, Json, Object,
    validate_exchange,
};

use crate::corpus::case_kind;

const FIXTURES: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/reference.jsonl"
));

/// The `coaching` and `export` targets' invariants for one kind: the two
/// entry points agree, and an accepted document writes to text that reads
/// back as itself, a fixed point.
fn round_trip(kind: DocumentKind, doc: &[u8]) {
    let direct = kind.parse(doc);
    let two_step = Json::from_slice(doc).and_then(|v| kind.validate(v));
    match (&direct, &two_step) {
        (Ok(a), Ok(b)) => assert_eq!(a, b),
        (Err(_), Err(_)) => {}
        _ => panic!("{kind}: the two entry points disagree: {direct:?} vs {two_step:?}"),
    }
    if let Ok(doc) = direct {
        let text = doc.to_json_string();
        let again = kind
            .parse(text.as_bytes())
            .expect("written document reads back");
        assert_eq!(again, doc, "{text}");
        assert_eq!(again.to_json_string(), text);
    }
}

/// The invariants of a family's target (`coaching`, `export`): every
/// document of the family tried on the bytes; for coaching, the payloads
/// too.
fn family_invariants(family: Family, doc: &[u8]) {
    for kind in DocumentKind::ALL
        .into_iter()
        .filter(|k| k.family() == family)
    {
        round_trip(kind, doc);
    }
    if family != Family::Coaching {
        return;
    }
    if let Ok(value) = Json::from_slice(doc) {
        if let Ok(payload) = CoachingPayload::from_json(&value) {
            let again = CoachingPayload::from_json(&Json::Object(payload.to_object()))
                .expect("a written payload reads back");
            assert_eq!(again, payload);
        }
    }
}

/// `(kind, doc, request)` of every fixture case.
fn cases() -> Vec<(String, String, Option<String>)> {
    FIXTURES
        .lines()
        .skip(1)
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

/// The `request` target's invariants.
fn request_invariants(doc: &[u8]) {
    let direct = AgentRequest::from_slice(doc);
    let two_step = Json::from_slice(doc).and_then(AgentRequest::from_json);
    // Same verdict and value; errors may name a different model.
    assert_eq!(
        direct.as_ref().ok(),
        two_step.as_ref().ok(),
        "entry points disagree"
    );
    let Ok(request) = direct else { return };
    let text = request.to_json_string();
    let again = AgentRequest::from_slice(text.as_bytes()).expect("re-serialized request");
    assert_eq!(again, request);
    assert_eq!(again.to_json_string(), text, "not a fixed point");
    for input in request.inputs() {
        for tool in &input.tools {
            tool_invariants(tool);
        }
        if let Ok(fb) = input.instruction.env_feedback() {
            let _ = fb.outcomes();
            let _ = fb.has_failure();
        }
    }
}

/// The `response` target's invariants.
fn response_invariants(doc: &[u8]) {
    let direct = AgentResponse::from_slice(doc);
    let two_step = Json::from_slice(doc).and_then(AgentResponse::from_json);
    assert_eq!(
        direct.as_ref().ok(),
        two_step.as_ref().ok(),
        "entry points disagree"
    );
    let Ok(response) = direct else { return };
    let text = response.to_json_string();
    let again = AgentResponse::from_slice(text.as_bytes()).expect("re-serialized response");
    assert_eq!(again, response);
    assert_eq!(again.to_json_string(), text, "not a fixed point");
}

/// The `info` and `health` targets' invariants.
fn info_health_invariants(kind: DocumentKind, doc: &[u8]) {
    if kind == DocumentKind::Info {
        let direct = AgentInfo::from_slice(doc);
        assert_eq!(
            direct.as_ref().ok(),
            Json::from_slice(doc)
                .and_then(AgentInfo::from_json)
                .as_ref()
                .ok()
        );
        if let Ok(info) = direct {
            let text = info.to_json_string();
            assert_eq!(AgentInfo::from_slice(text.as_bytes()), Ok(info));
        }
    } else {
        let direct = AgentHealth::from_slice(doc);
        assert_eq!(
            direct.is_ok(),
            Json::from_slice(doc)
                .and_then(AgentHealth::from_json)
                .is_ok()
        );
        if let Ok(health) = direct {
            assert_eq!(
                AgentHealth::from_slice(health.to_json_string().as_bytes()),
                Ok(health)
            );
        }
    }
}

/// The `exchange` target's invariants.
fn exchange_invariants(request: &[u8], response: &[u8]) {
    let verdict = validate_exchange(request, response);
    let by_hand = AgentRequest::from_slice(request)
        .map_err(ExchangeError::Request)
        .and_then(|req| {
            let resp = AgentResponse::from_slice(response).map_err(ExchangeError::Response)?;
            resp.validate_request(&req)
                .map_err(ExchangeError::Mismatch)?;
            Ok((req, resp))
        });
    match (&verdict, &by_hand) {
        (Ok(()), Ok((req, resp))) => validate_exchange(
            req.to_json_string().as_bytes(),
            resp.to_json_string().as_bytes(),
        )
        .expect("re-serialized exchange"),
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("validate_exchange disagrees with its steps"),
    }
}

/// The `tool_schema` target's invariants.
fn tool_invariants(tool: &Object) {
    let Ok(desc) = ToolDescription::from_object(tool) else {
        return;
    };
    let schema = desc.parameters_schema();
    assert_eq!(schema.get("type").and_then(Json::as_str), Some("object"));
    let function = desc.to_function_tool();
    let reparsed = Json::from_slice(function.to_json_string().as_bytes()).unwrap();
    assert_eq!(reparsed, function);
    let back = ToolDescription::from_object(reparsed.as_object().unwrap()).unwrap();
    assert_eq!(back.name, desc.name);
    assert_eq!(back.description, desc.description);
    let shape = |d: &ToolDescription| {
        d.parameters
            .iter()
            .map(|p| (p.name.clone(), p.json_type, p.required))
            .collect::<Vec<_>>()
    };
    assert_eq!(shape(&back), shape(&desc));
}

#[test]
fn the_fuzz_invariants_hold_on_every_fixture_document() {
    let mut counted: BTreeMap<CaseKind, usize> = BTreeMap::new();
    for (kind, doc, request) in cases() {
        let (kind, bytes) = (case_kind(&kind), doc.as_bytes());
        let request = request.as_deref().unwrap_or("").as_bytes();
        match kind {
            CaseKind::Document(DocumentKind::Request) => request_invariants(bytes),
            CaseKind::Document(DocumentKind::Response) => response_invariants(bytes),
            CaseKind::Document(k @ (DocumentKind::Info | DocumentKind::Health)) => {
                info_health_invariants(k, bytes);
            }
            CaseKind::Document(k) => family_invariants(k.family(), bytes),
            CaseKind::Exchange(ExchangeKind::Inference) => exchange_invariants(request, bytes),
            CaseKind::Exchange(x) => {
                family_invariants(x.request().family(), request);
                family_invariants(x.response().family(), bytes);
            }
            other => panic!("no fuzz invariants for {other}"),
        }
        *counted.entry(kind).or_default() += 1;
    }
    let missing: Vec<_> = CaseKind::all()
        .filter(|k| !counted.contains_key(k))
        .collect();
    assert!(missing.is_empty(), "no fixture of {missing:?}: {counted:?}");
}

#[test]
fn env_feedback_keeps_every_key_of_odd_contents() {
    for content in [
        r#"{"infos": 5, "previous_tool_call": [], "error": null, "failure_reason": {}, "x": 1}"#,
        r#"{"infos": "no colon here\n: \n a: b c\nr: t succeed", "infos": "r: t failed with message: "}"#,
        r#"{}"#,
    ] {
        let object = Json::from_slice(content.as_bytes()).unwrap();
        let fb = EnvFeedback::parse(content).unwrap();
        let known = usize::from(fb.infos.is_some())
            + usize::from(fb.previous_tool_call.is_some())
            + usize::from(fb.error.is_some())
            + usize::from(fb.failure_reason.is_some());
        assert_eq!(known + fb.other.len(), object.as_object().unwrap().len());
    }
    let fb = EnvFeedback::parse(r#"{"infos": "r: t failed with message: "}"#).unwrap();
    assert!(fb.has_failure());
    for not_object in ["[]", "1", "\"{}\"", "", "{", "NaN"] {
        assert!(EnvFeedback::parse(not_object).is_err(), "{not_object}");
    }
}

#[test]
fn tool_descriptions_nested_as_deep_as_json_allows_are_safe() {
    // `{"function": {"function": ...}}` is followed recursively: at the
    // parser's depth limit it must not exhaust the stack (the budget of
    // `hostile::values_as_deep_as_the_parser_allows_are_safe_on_a_small_stack`:
    // 256 KiB optimised, 2 MiB in a debug build).
    let depth = magma_protocol::MAX_JSON_DEPTH - 2;
    let text = format!(
        "{}{{\"name\": \"deep\"}}{}",
        "{\"function\": ".repeat(depth),
        "}".repeat(depth)
    );
    let handle = std::thread::Builder::new()
        .stack_size(if cfg!(debug_assertions) {
            2 * 1024 * 1024
        } else {
            256 * 1024
        })
        .spawn(move || {
            let tool = Json::from_slice(text.as_bytes()).expect("within the depth limit");
            let desc = ToolDescription::from_object(tool.as_object().unwrap()).unwrap();
            assert_eq!(desc.name, "deep");
        })
        .unwrap();
    handle.join().expect("no stack overflow");
}
