//! Errors carry a location and a stable kind, and render as FastAPI's 422.

use magma_protocol::{AgentInfo, AgentRequest, AgentResponse, ErrorKind, Json};

fn kinds_and_locs(err: &magma_protocol::Error) -> Vec<(ErrorKind, String)> {
    err.issues()
        .iter()
        .map(|i| (i.kind(), i.location().to_string()))
        .collect()
}

#[test]
fn every_problem_is_reported_in_pydantic_order() {
    let doc = br#"{"zz":1,"request_id":"","inputs":[{"id":1.0,"instruction":{"type":"User","content":null},"tools":[1,{}],"memory":null,"num_outputs":0,"a":1}],"b":2}"#;
    let err = AgentRequest::from_slice(doc).unwrap_err();
    use ErrorKind::*;
    let want = [
        (StringTooShort, "request_id"),
        (IntType, "inputs[0].id"),
        (LiteralError, "inputs[0].instruction.type"),
        (StringType, "inputs[0].instruction.content"),
        (DictType, "inputs[0].tools[0]"),
        (DictType, "inputs[0].memory"),
        (GreaterThan, "inputs[0].num_outputs"),
        (ExtraForbidden, "inputs[0].a"),
        (ExtraForbidden, "zz"),
        (ExtraForbidden, "b"),
    ];
    let want: Vec<(ErrorKind, String)> = want.iter().map(|(k, l)| (*k, (*l).to_owned())).collect();
    assert_eq!(kinds_and_locs(&err), want);
}

#[test]
fn the_422_body_has_fastapi_shape() {
    let err = AgentRequest::from_slice(
        br#"{"request_id":"r","inputs":[{"id":"7","instruction":{"type":"user","content":"x"}}]}"#,
    )
    .unwrap_err();
    assert_eq!(
        err.to_fastapi_body().to_json_string(),
        r#"{"detail":[{"type":"int_type","loc":["body","inputs",0,"id"],"msg":"Input should be a valid integer","input":"7"}]}"#
    );
    let err = AgentRequest::from_slice(br#"{"request_id":"r","inputs":[{"id":7,"instruction":{"type":"user","content":"x"},"num_outputs":-3}]}"#).unwrap_err();
    assert_eq!(
        err.to_fastapi_body().to_json_string(),
        r#"{"detail":[{"type":"greater_than","loc":["body","inputs",0,"num_outputs"],"msg":"Input should be greater than 0","input":-3,"ctx":{"gt":0}}]}"#
    );
}

#[test]
fn missing_fields_report_the_object_and_non_finite_numbers_their_path() {
    let err = AgentRequest::from_slice(br#"{"request_id":"r","inputs":[{"instruction":{"type":"user","content":"x"},"memory":{"a":[1,NaN],"b":{"c":-Infinity},"d":1e400}}]}"#).unwrap_err();
    use ErrorKind::*;
    assert_eq!(
        kinds_and_locs(&err),
        [
            (Missing, "inputs[0].id".to_owned()),
            (FiniteNumber, "inputs[0].memory.a[1]".to_owned()),
            (FiniteNumber, "inputs[0].memory.b.c".to_owned()),
            (FiniteNumber, "inputs[0].memory.d".to_owned()),
        ]
    );
    let missing = &err.issues()[0];
    assert_eq!(
        missing
            .input()
            .and_then(|i| i.get("instruction"))
            .and_then(|i| i.get("type")),
        Some(&Json::from("user"))
    );
}

#[test]
fn model_rules_run_only_when_fields_are_valid() {
    // Duplicate ids with -0 and 0, reported at the root.
    let err = AgentRequest::from_slice(br#"{"request_id":"r","inputs":[{"id":0,"instruction":{"type":"user","content":"x"}},{"id":-0,"instruction":{"type":"env","content":"y"}}]}"#).unwrap_err();
    assert_eq!(
        kinds_and_locs(&err),
        [(ErrorKind::ValueError, "(root)".to_owned())]
    );
    assert!(err.first().message().contains("Input ids must be unique"));
    // Status rule per candidate, only once the candidate's fields are valid.
    let err = AgentResponse::from_slice(br#"[{"request_id":"r","source_id":1,"candidate_index":0,"status":"completed","memory":{}},{"request_id":"r","source_id":1,"candidate_index":1,"status":"error","memory":{},"output":{},"error":{"code":"","message":"m"}}]"#).unwrap_err();
    assert_eq!(
        kinds_and_locs(&err),
        [
            (ErrorKind::ValueError, "[0]".to_owned()),
            (ErrorKind::StringTooShort, "[1].error.code".to_owned())
        ]
    );
}

#[test]
fn info_is_strict_about_bools_and_unknown_keys() {
    let err = AgentInfo::from_slice(br#"{"agent_id":"a","agent_version":"1","capabilities":{"inference":1},"coaching_session_version":"1"}"#).unwrap_err();
    assert_eq!(
        kinds_and_locs(&err),
        [
            (ErrorKind::BoolType, "capabilities.inference".to_owned()),
            (
                ErrorKind::ExtraForbidden,
                "coaching_session_version".to_owned()
            )
        ]
    );
    let info =
        AgentInfo::from_slice(br#"{"agent_id":"","agent_version":"","capabilities":{}}"#).unwrap();
    assert_eq!(info.protocol_version, "2.0");
    assert!(info.check_compatible().is_err());
    assert_eq!(
        info.to_json_string(),
        r#"{"protocol_version":"2.0","agent_id":"","agent_version":"","specialized_coaching":[],"coaching_resume":false,"coaching_unavailable_reason":null,"capabilities":{}}"#
    );
}

#[test]
fn locations_print_readably() {
    let err = AgentRequest::from_slice(br#"{"request_id":"r","inputs":[{"id":1,"instruction":{"type":"user","content":"x"},"attributes":{"odd key":{"x.y":[NaN]}}}]}"#).unwrap_err();
    assert_eq!(
        err.first().location().to_string(),
        r#"inputs[0].attributes["odd key"]["x.y"][0]"#
    );
    assert_eq!(
        err.to_string(),
        r#"invalid AgentRequest: inputs[0].attributes["odd key"]["x.y"][0]: Input should be a finite number [finite_number]"#
    );
}
