//! `validate_request` and the constructors that cannot get the order wrong.

use std::num::NonZeroU64;

use magma_protocol::{
    AgentDecision, AgentError, AgentInput, AgentInstruction, AgentRequest, AgentResponse,
    AssembleError, Candidate, Object,
};

fn request() -> AgentRequest {
    // The ordering example: ids 7 and 3 asking for 2 and 1 candidates.
    let mut a = AgentInput::new(7, AgentInstruction::user("a"));
    a.num_outputs = NonZeroU64::new(2).unwrap();
    let b = AgentInput::new(3, AgentInstruction::env("{}"));
    AgentRequest::new("req-1", vec![a, b]).unwrap()
}

fn keys(r: &AgentResponse) -> Vec<(String, i64, u64)> {
    r.iter()
        .map(|c| (c.request_id.to_string(), c.source_id, c.candidate_index))
        .collect()
}

#[test]
fn build_and_assemble_produce_the_only_valid_order() {
    let req = request();
    let built = AgentResponse::build(&req, |input, k| {
        Candidate::new(
            input.memory.clone(),
            AgentDecision::say(format!("{} #{k}", input.id)),
        )
    });
    let want = vec![
        ("req-1".to_owned(), 7, 0),
        ("req-1".to_owned(), 7, 1),
        ("req-1".to_owned(), 3, 0),
    ];
    assert_eq!(keys(&built), want);
    built.validate_request(&req).unwrap();

    let c = |s: &str| Candidate::new(Object::new(), AgentDecision::say(s));
    let assembled = AgentResponse::assemble(
        &req,
        vec![
            vec![c("a0"), c("a1")],
            vec![Candidate::new(
                Object::new(),
                AgentError::new("boom", "failed"),
            )],
        ],
    )
    .unwrap();
    assert_eq!(keys(&assembled), want);
    assembled.validate_request(&req).unwrap();

    let wrong = AgentResponse::assemble(&req, vec![vec![c("a0")], vec![c("b0")]]);
    assert_eq!(
        wrong.unwrap_err(),
        AssembleError::CandidateCount {
            input: 0,
            source_id: 7,
            expected: 2,
            found: 1
        }
    );
    assert!(matches!(
        AgentResponse::assemble(&req, vec![]),
        Err(AssembleError::InputCount {
            expected: 2,
            found: 0
        })
    ));
}

#[test]
fn validate_request_names_the_first_difference() {
    let req = request();
    let good = AgentResponse::build(&req, |_, _| {
        Candidate::new(Object::new(), AgentDecision::default())
    });
    let mut items = good.clone().into_candidates();
    items.swap(1, 2);
    let err = AgentResponse::new(items)
        .validate_request(&req)
        .unwrap_err();
    assert_eq!(err.position, 1);
    assert_eq!(
        err.expected
            .as_ref()
            .map(|k| (k.source_id, k.candidate_index)),
        Some((7, 1))
    );
    assert_eq!(
        err.found.as_ref().map(|k| (k.source_id, k.candidate_index)),
        Some((3, 0))
    );
    assert!(err.to_string().contains("candidate 1 should be"), "{err}");

    let mut items = good.clone().into_candidates();
    items.pop();
    let err = AgentResponse::new(items)
        .validate_request(&req)
        .unwrap_err();
    assert_eq!((err.position, err.found.is_none()), (2, true));

    let mut items = good.clone().into_candidates();
    items.push(items[0].clone());
    let err = AgentResponse::new(items)
        .validate_request(&req)
        .unwrap_err();
    assert_eq!((err.position, err.expected.is_none()), (3, true));

    let mut items = good.into_candidates();
    items[0].request_id = "other".try_into().unwrap();
    assert_eq!(
        AgentResponse::new(items)
            .validate_request(&req)
            .unwrap_err()
            .position,
        0
    );
}

#[test]
fn huge_num_outputs_costs_nothing_to_check() {
    let text = br#"{"request_id":"r","inputs":[{"id":1,"instruction":{"type":"user","content":"x"},"num_outputs":18446744073709551615}]}"#;
    let req = AgentRequest::from_slice(text).unwrap();
    assert_eq!(req.expected_candidates(), u128::from(u64::MAX));
    let err = AgentResponse::default().validate_request(&req).unwrap_err();
    assert_eq!(err.position, 0);
}

#[test]
fn empty_inputs_take_an_empty_response() {
    let req = AgentRequest::from_slice(br#"{"request_id":" ","inputs":[]}"#).unwrap();
    AgentResponse::default().validate_request(&req).unwrap();
    assert_eq!(
        AgentResponse::build(&req, |_, _| unreachable!()).to_json_string(),
        "[]"
    );
}

#[test]
fn request_constructor_enforces_the_model_rules() {
    let a = AgentInput::new(1, AgentInstruction::user("x"));
    assert!(AgentRequest::new("", vec![a.clone()]).is_err());
    let err = AgentRequest::new("r", vec![a.clone(), a]).unwrap_err();
    assert!(err.to_string().contains("unique"), "{err}");
}
