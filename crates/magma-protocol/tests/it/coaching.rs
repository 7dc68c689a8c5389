//! The coaching API beyond the verdicts the fixtures pin: constructors that
//! refuse what the parser refuses, the reference's `==` on session
//! configs, `validate_request`, the payloads of `extra_keys.coaching` and
//! the `InternalStep` builder.

use magma_protocol::coaching::{
    CoachingBackendConfig, CoachingKind, CoachingLog, CoachingPayload, CoachingProposal,
    CoachingSessionConfig, CoachingStage, CoachingStatus, CoachingStep, CustomPayload,
    InternalStep, InternalStepOrigin, ReinjectionPoint, ReplaceSay, SpecializedCoachingRequest,
    SpecializedCoachingResponse,
};
use magma_protocol::{
    AgentDecision, AgentInput, AgentInstruction, ErrorKind, Json, Map, NonEmptyString, Object,
    ToolCall,
};

fn request() -> SpecializedCoachingRequest {
    let input = AgentInput::new(0, AgentInstruction::user("hi"));
    SpecializedCoachingRequest::new(
        "run/1 é",
        "r1",
        CoachingKind::Format,
        CoachingStage::new(2, "greet"),
        7,
        vec![
            CoachingStep::new(3, input.clone()),
            CoachingStep::new(7, input.clone()),
        ],
        vec![
            ReinjectionPoint::at_step("replacement", 7),
            ReinjectionPoint::at_input("recovery", input),
        ],
    )
    .unwrap()
}

fn obj(text: &str) -> Object {
    match Json::from_slice(text.as_bytes()).unwrap() {
        Json::Object(o) => o,
        other => panic!("not an object: {other}"),
    }
}

#[test]
fn a_built_request_reads_back_as_itself() {
    let req = request().with_additional_info(obj(
        r#"{"delay_ms": 5, "big": 123456789012345678901234567890}"#,
    ));
    let text = req.to_json_string();
    let again = SpecializedCoachingRequest::from_slice(text.as_bytes()).unwrap();
    assert_eq!(again, req);
    assert_eq!(again.to_json_string(), text);
    assert!(
        text.contains(r#""big":123456789012345678901234567890"#),
        "{text}"
    );
    assert_eq!(again.target_step().id, 7);
    let recovery = &again.reinjection_points()[1];
    assert_eq!(recovery.input_step_id(), None);
    assert_eq!(again.point_input(recovery).unwrap().id, 0);
    assert_eq!(
        again
            .point_input(&again.reinjection_points()[0])
            .unwrap()
            .id,
        0
    );
    // serde gives the same bytes and validates on the way in.
    assert_eq!(serde_json::to_string(&again).unwrap(), text);
    // (serde_json's own reader rounds integers beyond 64 bits: `from_slice`
    // is the lossless way in.)
    let plain = request().to_json_string();
    let back: SpecializedCoachingRequest = serde_json::from_str(&plain).unwrap();
    assert_eq!(back, request());
    assert!(serde_json::from_str::<SpecializedCoachingRequest>("{}").is_err());
}

#[test]
fn constructors_refuse_what_the_parser_refuses() {
    let input = AgentInput::new(0, AgentInstruction::user("hi"));
    let err = SpecializedCoachingRequest::new(
        "",
        "r",
        CoachingKind::Failure,
        CoachingStage::new(0, "g"),
        1,
        vec![CoachingStep::new(2, input.clone())],
        vec![],
    )
    .unwrap_err();
    assert_eq!(err.first().kind(), ErrorKind::StringTooShort);
    assert_eq!(err.first().location().to_string(), "run_id");
    let err = SpecializedCoachingRequest::new(
        "run",
        "r",
        CoachingKind::Failure,
        CoachingStage::new(0, "g"),
        1,
        vec![CoachingStep::new(2, input)],
        vec![],
    )
    .unwrap_err();
    assert_eq!(err.first().kind(), ErrorKind::ValueError);
    assert_eq!(
        err.first().message(),
        "Value error, Target step is absent from trajectory"
    );

    let err = SpecializedCoachingResponse::corrected("r1", vec![]).unwrap_err();
    assert_eq!(
        err.first().message(),
        "Value error, A correction requires proposals"
    );
    let err = SpecializedCoachingResponse::abandoned("r1", "").unwrap_err();
    assert_eq!(
        err.first().message(),
        "Value error, Abandon/error requires a reason and no proposals"
    );
    assert!(SpecializedCoachingResponse::error("", "boom").is_err());
    assert!(SpecializedCoachingResponse::error("r1", " ").is_ok());

    let err = CoachingLog::new("Failure", "x").unwrap_err();
    assert_eq!(err.first().kind(), ErrorKind::StringPatternMismatch);
    assert_eq!(err.first().location().to_string(), "coaching_type");
    assert!(CoachingLog::new("failure\n", "x").is_err());
    assert!(CoachingLog::new("format_2", "x").is_ok());

    assert!(CoachingSessionConfig::new(Map::new()).is_err());
    let backend = CoachingBackendConfig::new("openai", "http://x", "m");
    assert!(backend.clone().with_timeout(0.0).is_err());
    assert!(backend.clone().with_timeout(f64::NAN).is_err());
    assert_eq!(backend.with_timeout(0.5).unwrap().timeout(), 0.5);
    assert!(ReplaceSay::new("").is_err());
}

#[test]
fn replies_are_checked_against_their_request() {
    let req = request();
    let say = ReplaceSay::new("Hello").unwrap();
    let mut reply = SpecializedCoachingResponse::corrected(
        "r1",
        vec![
            CoachingProposal::new("replacement", say.clone()),
            CoachingProposal::new("recovery", say.clone()),
        ],
    )
    .unwrap();
    reply.push_log(CoachingLog::new("format", "# Coaching corrected").unwrap());
    assert_eq!(reply.status(), CoachingStatus::Corrected);
    reply.validate_request(&req).unwrap();
    let text = reply.to_json_string();
    assert_eq!(
        text,
        r##"{"logs":[{"coaching_type":"format","content":"# Coaching corrected"}],"request_id":"r1","status":"corrected","proposals":[{"reinjection_point_id":"replacement","extra_keys":{"kind":"replace_say","text":"Hello"}},{"reinjection_point_id":"recovery","extra_keys":{"kind":"replace_say","text":"Hello"}}],"reason":null}"##
    );

    let other = SpecializedCoachingResponse::abandoned("r2", "no idea").unwrap();
    let err = other.validate_request(&req).unwrap_err();
    assert_eq!(err.first().kind(), ErrorKind::CoachingMismatch);
    assert_eq!(err.first().kind().as_str(), "coaching_mismatch");
    assert_eq!(err.first().message(), "Coaching request id mismatch");
    assert_eq!(err.first().location().to_string(), "request_id");

    let unknown =
        SpecializedCoachingResponse::corrected("r1", vec![CoachingProposal::new("p9", say)])
            .unwrap();
    let err = unknown.validate_request(&req).unwrap_err();
    assert_eq!(err.first().message(), "Unknown reinjection point");
    assert_eq!(
        err.first().location().to_string(),
        "proposals[0].reinjection_point_id"
    );
}

#[test]
fn session_configs_compare_as_python_does() {
    let a = CoachingSessionConfig::from_slice(
        br#"{"backends": {"x": {"type": "t", "endpoint": "e", "default_model": "m", "timeout": 30, "headers": {"a": "1", "b": "2"}},
                          "y": {"type": "t", "endpoint": "f", "default_model": "m"}}}"#,
    )
    .unwrap();
    // Other key orders, 30 written as 30.0, defaults spelled out.
    let b = CoachingSessionConfig::from_slice(
        br#"{"capture_logs": true, "backends": {"y": {"type": "t", "endpoint": "f", "default_model": "m", "max_retry": 3},
                          "x": {"headers": {"b": "2", "a": "1"}, "type": "t", "endpoint": "e", "default_model": "m", "timeout": 30.0}}}"#,
    )
    .unwrap();
    assert_eq!(a, b);
    assert_eq!(a.backends().len(), 2);
    assert_eq!(a.backends().get("x").unwrap().timeout(), 30.0);
    let c = CoachingSessionConfig::from_slice(
        br#"{"backends": {"x": {"type": "t", "endpoint": "e", "default_model": "m", "timeout": 30.5, "headers": {"a": "1", "b": "2"}},
                          "y": {"type": "t", "endpoint": "f", "default_model": "m"}}}"#,
    )
    .unwrap();
    assert_ne!(a, c);
    assert_ne!(a, a.clone().with_capture_logs(false));
    // What the server receives is what it sends back: timeout as a float.
    assert!(
        a.to_json_string().contains(r#""timeout":30.0"#),
        "{}",
        a.to_json_string()
    );
}

#[test]
fn coaching_payloads_are_read_with_located_errors() {
    let read = |text: &str| CoachingPayload::from_json(&Json::from_slice(text.as_bytes()).unwrap());
    match read(r#"{"kind": "replace_say", "text": "Done."}"#).unwrap() {
        CoachingPayload::ReplaceSay(say) => assert_eq!(say.text, "Done."),
        other => panic!("{other:?}"),
    }
    let calls = r#"{"kind": "replace_decision", "decision": {"tool_calls": [{"name": "pick", "target_robot_name": "panda", "arguments": {"id": 1}}]}}"#;
    match read(calls).unwrap() {
        CoachingPayload::ReplaceDecision(d) => {
            assert_eq!(d.say, "");
            assert_eq!(d.tool_calls[0].name, "pick");
        }
        other => panic!("{other:?}"),
    }
    let cases = [
        (
            r#"{"kind": "replace_say", "text": ""}"#,
            "string_too_short",
            "text",
        ),
        (r#"{"kind": "replace_say"}"#, "missing", "text"),
        (
            r#"{"kind": "replace_say", "text": "x", "extra": 1}"#,
            "extra_forbidden",
            "extra",
        ),
        (r#"{"kind": "", "text": "x"}"#, "string_too_short", "kind"),
        (r#"{"kind": 1, "text": "x"}"#, "string_type", "kind"),
        (r#"{"text": "x"}"#, "missing", "kind"),
        // The wrapped shape: GEN would send `extra_keys.coaching.coaching`.
        (
            r#"{"coaching": {"kind": "replace_say", "text": "x"}}"#,
            "missing",
            "kind",
        ),
        (r#"[]"#, "model_type", "(root)"),
        (
            r#"{"kind": "replace_decision", "decision": {"say": ""}}"#,
            "value_error",
            "decision",
        ),
        (
            r#"{"kind": "replace_decision", "decision": {"say": "a", "tool_calls": [{"name": "n", "target_robot_name": "r"}]}}"#,
            "value_error",
            "decision",
        ),
        (
            r#"{"kind": "replace_decision", "decision": {"say": 1}}"#,
            "string_type",
            "decision.say",
        ),
        (r#"{"kind": "replace_decision"}"#, "missing", "decision"),
        (
            r#"{"kind": "replace_decision", "decision": null}"#,
            "model_type",
            "decision",
        ),
    ];
    for (text, kind, loc) in cases {
        let err = read(text).unwrap_err();
        let first = err.first();
        assert_eq!(
            (first.kind().as_str(), first.location().to_string().as_str()),
            (kind, loc),
            "{text}"
        );
    }
    let extra = obj(r#"{"coaching": {"kind": "replace_say", "text": "hi"}, "delay_ms": 1}"#);
    assert!(CoachingPayload::from_extra_keys(&extra).unwrap().is_ok());
    assert!(CoachingPayload::from_extra_keys(&Object::new()).is_none());
    let payload = read(calls).unwrap();
    assert_eq!(
        CoachingPayload::from_json(&Json::Object(payload.to_object())).unwrap(),
        payload
    );
    // Any other kind is the agent's own, kept whole and in order.
    let own = r#"{"plan": [1, 2], "kind": "retry_with_plan", "note": 1.0}"#;
    match read(own).unwrap() {
        CoachingPayload::Custom(custom) => {
            assert_eq!(custom.kind(), "retry_with_plan");
            assert_eq!(
                Json::Object(custom.to_object()).to_json_string(),
                r#"{"plan":[1,2],"kind":"retry_with_plan","note":1.0}"#
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn proposals_are_built_from_payloads_gen_can_reinject() {
    let call = ToolCall {
        name: NonEmptyString::new("press_button").unwrap(),
        arguments: Object::new(),
        target_robot_name: NonEmptyString::new("panda").unwrap(),
    };
    let say = CoachingProposal::new("replacement", ReplaceSay::new("Done.").unwrap());
    assert_eq!(
        Json::Object(say.extra_keys.clone()).to_json_string(),
        r#"{"kind":"replace_say","text":"Done."}"#
    );
    assert_eq!(
        say.payload().unwrap().decision(),
        Some(AgentDecision::say("Done."))
    );

    let decision = CoachingPayload::replace_decision(AgentDecision::call(vec![call.clone()]));
    let fix = CoachingProposal::new("recovery", decision.unwrap());
    assert_eq!(fix.payload().unwrap().kind(), "replace_decision");
    assert_eq!(
        fix.payload().unwrap().decision(),
        Some(AgentDecision::call(vec![call.clone()]))
    );
    // GEN treats both, or neither, as an invalid answer.
    let both = AgentDecision {
        say: "and".into(),
        tool_calls: vec![call],
    };
    for bad in [both, AgentDecision::say("")] {
        let err = CoachingPayload::replace_decision(bad).unwrap_err();
        assert_eq!(err.first().location().to_string(), "decision");
        assert_eq!(err.first().kind().as_str(), "value_error");
    }

    let mut fields = Object::new();
    fields.insert("plan", Json::from("left first"));
    let own = CustomPayload::new("retry_with_plan", fields.clone()).unwrap();
    let proposal = CoachingProposal::new("replacement", own.clone());
    assert_eq!(
        Json::Object(proposal.extra_keys.clone()).to_json_string(),
        r#"{"kind":"retry_with_plan","plan":"left first"}"#
    );
    assert_eq!(proposal.payload().unwrap(), CoachingPayload::Custom(own));
    assert_eq!(proposal.payload().unwrap().decision(), None);
    for kind in ["", "replace_say", "replace_decision"] {
        let err = CustomPayload::new(kind, Object::new()).unwrap_err();
        assert_eq!(err.first().location().to_string(), "kind", "{kind:?}");
    }
    fields.insert("kind", Json::from("twice"));
    assert!(CustomPayload::new("retry_with_plan", fields).is_err());

    // The raw form carries anything; reading it says what the agent will.
    let mut wrapped = Object::new();
    wrapped.insert(
        "coaching",
        Json::Object(ReplaceSay::new("x").unwrap().to_object()),
    );
    let raw = CoachingProposal::raw("replacement", wrapped);
    let err = raw.payload().unwrap_err();
    assert_eq!(err.first().location().to_string(), "kind");
    assert_eq!(err.first().kind().as_str(), "missing");
}

#[test]
fn internal_steps_build_the_objects_of_the_inference_wire() {
    let step = InternalStep::builder("call-1", "planner")
        .full_prompt("prompt")
        .input_element("turn", Json::from(3))
        .output_raw("raw")
        .origin(InternalStepOrigin::Coaching)
        .build();
    let object = step.to_object();
    assert_eq!(
        Json::Object(object.clone()).to_json_string(),
        r#"{"id":"call-1","component":"planner","origin":"coaching","full_prompt":"prompt","input_elements":{"turn":3},"output_raw":"raw"}"#
    );
    assert_eq!(InternalStep::from_json(Json::Object(object)).unwrap(), step);
    let minimal = InternalStep::builder("i", "c").build_object();
    let back = InternalStep::from_json(Json::Object(minimal)).unwrap();
    assert_eq!(back.origin, InternalStepOrigin::Model);
    assert_eq!(back.input_elements, Object::new());
}

/// The reference's `validate_references`, written here with sets: what the
/// request rules say of these ids, or `None`.
fn references_problem(
    steps: &[i64],
    points: &[(String, Option<i64>)],
    target: i64,
) -> Option<&'static str> {
    use std::collections::HashSet;
    let step_ids: HashSet<i64> = steps.iter().copied().collect();
    let point_ids: HashSet<&str> = points.iter().map(|(id, _)| id.as_str()).collect();
    if step_ids.len() != steps.len() || point_ids.len() != points.len() {
        return Some("Step and reinjection point ids must be unique");
    }
    if !step_ids.contains(&target) {
        return Some("Target step is absent from trajectory");
    }
    points
        .iter()
        .any(|(_, at)| at.is_some_and(|id| !step_ids.contains(&id)))
        .then_some("Unknown reinjection input reference")
}

/// The request rules over step ids in order, out of order and repeated,
/// few and many points (the rules take another way for ids in order and
/// for up to 8 points), through `from_slice` (the direct reader, and the
/// exact path for what it leaves), against [`references_problem`].
#[test]
fn the_request_rules_hold_whatever_the_order_of_the_ids() {
    let input = r#"{"id":0,"instruction":{"type":"user","content":"a"}}"#;
    let trajectories: &[&[i64]] = &[
        &[0],
        &[0, 1, 2],
        &[-5, 3, 40],
        &[2, 0, 1],
        &[0, 1, 1],
        &[1, 0, 1],
        &[3, 3],
        &[0, 2, 1, 3, 4, 5, 6, 7, 8, 9],
    ];
    let mut checked = 0;
    for &steps in trajectories {
        for n_points in [1, 2, 8, 9, 12] {
            for repeat_point in [false, true] {
                for (target, unknown_at) in [(0, None), (1, None), (7, None), (0, Some(99))] {
                    let mut points: Vec<(String, Option<i64>)> =
                        (0..n_points).map(|i| (format!("p{i}"), None)).collect();
                    if repeat_point && n_points > 1 {
                        points[n_points - 1].0 = "p0".to_owned();
                    }
                    // The first point refers to a step, known or not.
                    points[0].1 = Some(unknown_at.unwrap_or(steps[0]));
                    let steps_text: Vec<String> = steps
                        .iter()
                        .map(|id| format!(r#"{{"id":{id},"input":{input}}}"#))
                        .collect();
                    let points_text: Vec<String> = points
                        .iter()
                        .map(|(id, at)| match at {
                            Some(at) => format!(r#"{{"id":"{id}","input_step_id":{at}}}"#),
                            None => format!(r#"{{"id":"{id}","input":{input}}}"#),
                        })
                        .collect();
                    let body = format!(
                        r#"{{"run_id":"r","request_id":"q","kind":"failure","stage":{{"id":1,"goal":"g"}},"target_step_id":{target},"trajectory":[{}],"reinjection_points":[{}]}}"#,
                        steps_text.join(","),
                        points_text.join(",")
                    );
                    let expected = references_problem(steps, &points, target);
                    let got = SpecializedCoachingRequest::from_slice(body.as_bytes());
                    match (expected, &got) {
                        (None, Ok(_)) => {}
                        (Some(msg), Err(e)) => {
                            let shown = e.to_string();
                            assert!(shown.contains(msg), "{body}\nexpected {msg:?}, got {shown}");
                        }
                        _ => panic!("{body}\nexpected {expected:?}, got {got:?}"),
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, trajectories.len() * 5 * 2 * 4);
}
