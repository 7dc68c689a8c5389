//! The export documents: constructors that cannot build what the reference
//! refuses, free-form values kept exactly, errors with their location.

use magma_protocol::export::{
    CandidateRecord, ExportExample, ExportRecord, ExportResult, ExportStatus, SituationRecord,
};
use magma_protocol::{AgentDecision, ErrorKind, Json, Object, Outcome};

const SITUATION: &str = r#"{"id":4,"stage_id":1,"parent_id":3,"input":{"id":4,"instruction":{"type":"env","content":"{\"infos\": \"ok\"}"},"tools":[],"attributes":{"known_robots":["rover"]},"memory":{"b":1.0,"a":123456789012345678901234567890,"b":2},"num_outputs":1,"extra_keys":{}},"candidates":[{"id":5,"parent_id":3,"stage_id":1,"kind":"agent","response_status":"completed","output":{"say":"s","tool_calls":[]},"error":null,"internal_steps":[{"z":1e300,"a":[1.50]}],"execution":{},"status":"finished","execution_finished":true,"score":{"stage_1":{"optimal":1,"total_child":2}},"coaching":{},"coaching_source":{},"coaching_attempt_ids":[1,2],"origin":"model","links":[{"situation_id":6,"kind":"alternative"}]}]}"#;

#[test]
fn a_situation_keeps_its_free_form_values_exactly() {
    let record = SituationRecord::from_slice(SITUATION.as_bytes()).unwrap();
    let written = record.to_json_string();
    // The repeated key keeps its first place with its last value, as json.loads.
    assert!(
        written.contains(r#""memory":{"b":2,"a":123456789012345678901234567890}"#),
        "{written}"
    );
    assert!(
        written.contains(r#""internal_steps":[{"z":1e300,"a":[1.50]}]"#),
        "{written}"
    );
    let again = SituationRecord::from_slice(written.as_bytes()).unwrap();
    assert_eq!(again, record);
    assert_eq!(again.to_json_string(), written);
    assert_eq!(serde_json::to_string(&record).unwrap(), written);
    let candidate = &record.candidates[0];
    assert_eq!(candidate.decision().map(|d| d.say.as_str()), Some("s"));
    assert!(candidate.error().is_none());
}

#[test]
fn the_candidate_rule_is_reported_at_the_nested_candidate() {
    let bad = SITUATION.replace(r#""error":null"#, r#""error":{"code":"c","message":"m"}"#);
    let err = SituationRecord::from_slice(bad.as_bytes()).unwrap_err();
    assert_eq!(err.issues().len(), 1);
    let issue = err.first();
    assert_eq!(issue.kind(), ErrorKind::ValueError);
    assert_eq!(issue.location().to_string(), "candidates[0]");
    assert_eq!(
        issue.message(),
        "Value error, A completed response requires output and no error"
    );
}

#[test]
fn constructors_refuse_what_the_reference_refuses() {
    let err = ExportRecord::new("r", "chat.json", Object::new()).unwrap_err();
    assert_eq!(err.first().kind(), ErrorKind::StringPatternMismatch);
    assert_eq!(err.first().location().to_string(), "dataset");
    assert!(ExportRecord::new("", "chat", Object::new()).is_err());
    assert!(ExportRecord::new("r", "chat\n", Object::new()).is_err());
    let record = ExportRecord::new("r", "chat-2_b", Object::new()).unwrap();
    assert!(ExportResult::exported("e", Vec::new()).is_err());
    assert!(ExportResult::skipped("e", "").is_err());
    assert!(ExportResult::error("e", "").is_err());
    let failed = ExportResult::failed("e", "");
    assert_eq!(failed.reason(), Some("unknown error"));
    assert_eq!(failed.status(), ExportStatus::Error);
    let ok = ExportResult::exported("e", vec![record]).unwrap();
    let text = ok.to_json_string();
    assert_eq!(
        text,
        r#"{"example_id":"e","status":"exported","records":[{"record_id":"r","dataset":"chat-2_b","data":{}}],"reason":null}"#
    );
    assert_eq!(ExportResult::from_slice(text.as_bytes()).unwrap(), ok);
}

#[test]
fn an_example_built_in_rust_reads_back() {
    let record = SituationRecord::from_slice(SITUATION.as_bytes()).unwrap();
    let mut candidate = CandidateRecord::new(9, 1, Outcome::Completed(AgentDecision::default()));
    candidate
        .score
        .insert("stage_1", Json::Object(Object::new()));
    let example = ExportExample {
        example_id: "4:9".to_owned(),
        input: record.input,
        candidate,
    };
    let text = example.to_json_string();
    assert_eq!(ExportExample::from_slice(text.as_bytes()).unwrap(), example);
}
