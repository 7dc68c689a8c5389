//! Two ways to write, one output, for every model: the direct writer
//! (`to_json_string`) and `serde_json` through the `Serialize` impls give
//! the same bytes, on models built by hand and on generated values. (Every
//! fixture document of every kind: `documents/tests.rs`; the values' own
//! tests: `json/write.rs`.)

use proptest::prelude::*;

use crate::inline_vec::InlineVec;
use crate::json::testing::*;
use crate::json::{Json, Object, WriteJson, to_string};
use crate::validate::NonEmptyString;
use crate::{
    AgentDecision, AgentError, AgentHealth, AgentInfo, AgentInput, AgentInstruction, AgentOutput,
    AgentRequest, AgentResponse, Outcome, ToolCall,
};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/reference.jsonl"
);

fn nes(s: &str) -> NonEmptyString {
    NonEmptyString::new(s).unwrap()
}

fn request() -> AgentRequest {
    let mut a = AgentInput::new(-3, AgentInstruction::env("{\"infos\": \"a\\nb\"}"));
    a.tools = vec![raw(r#"{"name":"t","arguments":{}}"#), sample_object()];
    a.attributes = raw(r#"{"known_robots":["panda"]}"#);
    a.memory = sample_object();
    a.num_outputs = std::num::NonZeroU64::new(u64::MAX).unwrap();
    a.extra_keys.insert("inference_mode", Json::Bool(true));
    let b = AgentInput::new(i64::MIN, AgentInstruction::user("\u{1f}😀/"));
    AgentRequest::new("r\"1", vec![a, b]).unwrap()
}

fn candidates() -> Vec<AgentOutput> {
    let call = ToolCall {
        name: nes("move\tto"),
        arguments: sample_object(),
        target_robot_name: nes("pánda"),
    };
    let outcomes = [
        Outcome::Completed(AgentDecision::default()),
        Outcome::Completed(AgentDecision::say("hi \"there\"")),
        Outcome::Completed(AgentDecision {
            say: "both".into(),
            tool_calls: vec![call.clone(), call].into(),
        }),
        Outcome::Error(AgentError::new("", "")),
        Outcome::Error(AgentError::new("demo_error", "bad\u{0}").with_component("dé\\mo")),
    ];
    outcomes
        .into_iter()
        .enumerate()
        .map(|(i, outcome)| AgentOutput {
            request_id: nes("req/é"),
            source_id: i as i64 - 2,
            candidate_index: u64::MAX - i as u64,
            memory: if i % 2 == 0 {
                sample_object()
            } else {
                raw(r#"{"m": []}"#)
            },
            internal_steps: vec![Object::new(), raw(r#"{"s":1}"#), sample_object()].into(),
            outcome,
        })
        .collect()
}

#[test]
fn models_built_by_hand() {
    let req = request();
    assert_eq!(req.to_json_string(), serde(&req));
    for input in req.inputs() {
        same(input);
        same(&input.instruction);
    }
    let outputs = candidates();
    for c in &outputs {
        same(c);
        same(&c.outcome);
        if let Some(d) = c.outcome.decision() {
            same(d);
            for t in &d.tool_calls {
                same(t);
            }
        }
        if let Some(e) = c.outcome.error() {
            same(e);
        }
    }
    let response = AgentResponse::new(outputs);
    assert_eq!(response.to_json_string(), serde(&response));
    assert_eq!(AgentResponse::default().to_json_string(), "[]");
    assert_eq!(AgentHealth.to_json_string(), serde(&AgentHealth));
    assert_eq!(AgentHealth.to_json_string(), r#"{"status":"ready"}"#);

    let mut info = AgentInfo::new("agent \"x\"", "1.0\n");
    assert_eq!(info.to_json_string(), serde(&info));
    info.specialized_coaching = vec!["failure".into(), "é\u{1}".into()];
    info.coaching_resume = true;
    info.coaching_unavailable_reason = Some("no \\ coach".into());
    info.capabilities.insert("streaming", false);
    info.protocol_version = String::new();
    assert_eq!(info.to_json_string(), serde(&info));
    assert_eq!(
        AgentInfo::new("a", "1").to_json_string(),
        r#"{"protocol_version":"2.0","agent_id":"a","agent_version":"1","specialized_coaching":[],"coaching_resume":false,"coaching_unavailable_reason":null,"capabilities":{"inference":true}}"#
    );
    assert_eq!(every_kind().to_json_string(), serde(&every_kind()));
}

#[test]
fn the_first_allocation_is_usually_enough() {
    on_large_stack(first_allocation);
}

fn first_allocation() {
    /// Written without growing the first buffer.
    fn fits<T: WriteJson + ?Sized>(v: &T) -> bool {
        to_string(v).capacity() == crate::json::write::capacity_for(v.size_hint())
    }
    let text = std::fs::read_to_string(FIXTURES).expect("fixture file");
    let (mut models, mut models_fit, mut values, mut values_fit) = (0, 0, 0, 0);
    for line in text.lines().skip(1) {
        let case: serde_json::Value = serde_json::from_str(line).expect("fixture line");
        let doc = case["doc"].as_str().expect("doc").as_bytes();
        let mut model = |fit: bool| {
            models += 1;
            models_fit += usize::from(fit);
        };
        if let Ok(v) = AgentRequest::from_slice(doc) {
            model(fits(&v));
        }
        if let Ok(v) = AgentResponse::from_slice(doc) {
            model(fits(&v));
        }
        if let Ok(v) = AgentInfo::from_slice(doc) {
            model(fits(&v));
        }
        if let Ok(v) = Json::from_slice(doc) {
            values += 1;
            values_fit += usize::from(fits(&v));
        }
    }
    assert!(models > 1500 && values > 3000, "{models} {values}");
    assert!(
        models_fit * 100 >= models * 99,
        "{models_fit} of {models} models fit"
    );
    // Whole documents read as `Json` are trees of maps: most still fit.
    assert!(
        values_fit * 2 >= values,
        "{values_fit} of {values} values fit"
    );
    let response = AgentResponse::new(candidates());
    assert!(fits(&response));
    // What magma-server's demo agent answers: the memory changed, so a
    // map holding arrays of maps.
    let inputs: Vec<String> = (0..8)
        .map(|i| {
            format!(
                r#"{{"id":{i},"instruction":{{"type":"env","content":"{{\"infos\": \"ok\"}}"}},"memory":{{"memory_list":[],"history":[{{"author":"USER","content":"Press sw{i}."}},{{"author":"MODEL","content":"Pressing sw{i}."}}]}}}}"#
            )
        })
        .collect();
    let body = format!(
        r#"{{"request_id":"7c9e6679742540de944be07fc1f90ae7","inputs":[{}]}}"#,
        inputs.join(",")
    );
    let request = AgentRequest::from_slice(body.as_bytes()).unwrap();
    let candidates = request
        .inputs()
        .iter()
        .map(|input| {
            let mut memory: Object = input.memory.as_map().clone().into();
            memory.insert("steps", Json::from(1));
            let call = ToolCall {
                name: nes("cancel_current_action"),
                arguments: Object::new(),
                target_robot_name: nes("panda"),
            };
            AgentOutput {
                request_id: nes(request.request_id()),
                source_id: input.id,
                candidate_index: 0,
                memory,
                internal_steps: InlineVec::new(),
                outcome: Outcome::Completed(AgentDecision::call(vec![call])),
            }
        })
        .collect();
    let response = AgentResponse::new(candidates);
    assert!(response[0].memory.raw_text().is_none());
    assert!(fits(&response), "{}", response.to_json_string());
    assert!(response.size_hint() <= 2 * response.to_json_string().len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Parsed values, as `Json` and inside a request (where objects
    /// stay text), write as the serde path does.
    #[test]
    fn parsed_values_write_as_serde_json_does(text in json_text()) {
        if let Ok(v) = Json::from_slice(text.as_bytes()) {
            prop_assert_eq!(v.to_json_string(), serde(&v));
        }
        if let Ok(v) = crate::json::parse(text.as_bytes(), crate::limits::READ) {
            prop_assert_eq!(to_string(&v), serde(&v));
        }
        let object = if text.starts_with('{') { text.as_str() } else { "{}" };
        let body = format!(
            r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{{"m":{text}}},"attributes":{object},"tools":[{object}]}}]}}"#
        );
        if let Ok(req) = AgentRequest::from_slice(body.as_bytes()) {
            prop_assert_eq!(req.to_json_string(), serde(&req));
        }
    }

    /// Values built by hand write as the serde path does, alone and
    /// as every free-form and string field of a candidate.
    #[test]
    fn built_values_write_as_serde_json_does(
        v in json_value(),
        s in tricky_string(),
        steps in proptest::collection::vec(json_value(), 0..3),
    ) {
        prop_assert_eq!(v.to_json_string(), serde(&v));
        let object = |v: &Json| match v {
            Json::Object(o) => o.clone(),
            other => [(s.clone(), other.clone())].into_iter().collect(),
        };
        let name = NonEmptyString::new(format!("{s}x")).unwrap();
        let call = ToolCall {
            name: name.clone(),
            arguments: object(&v),
            target_robot_name: name.clone(),
        };
        let error = AgentError::new(s.clone(), s.clone()).with_component(s.clone());
        let response = AgentResponse::new(
            [Outcome::Completed(AgentDecision { say: s.clone(), tool_calls: [call].into() }),
             Outcome::Error(error)]
            .into_iter()
            .map(|outcome| AgentOutput {
                request_id: name.clone(),
                source_id: -1,
                candidate_index: 1,
                memory: object(&v),
                internal_steps: steps.iter().map(object).collect(),
                outcome,
            })
            .collect(),
        );
        prop_assert_eq!(response.to_json_string(), serde(&response));
    }
}
