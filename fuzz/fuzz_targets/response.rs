//! `AgentResponse::from_slice` on arbitrary bytes.
//!
//! Invariants: no panic; both entry points agree; an accepted response obeys the
//! status rule (`completed` has a decision and no error, `error` the opposite)
//! and round-trips through its serialization to an equal value, at a fixed point.
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::{AgentResponse, CandidateStatus, Json};

fuzz_target!(|data: &[u8]| {
    let direct = AgentResponse::from_slice(data);
    let two_step = Json::from_slice(data).and_then(AgentResponse::from_json);
    match (&direct, &two_step) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "the two entry points disagree on the value"),
        (Err(_), Err(_)) => {}
        _ => panic!("the two entry points disagree: {direct:?} vs {two_step:?}"),
    }
    let Ok(response) = direct else { return };
    for candidate in response.candidates() {
        match candidate.status() {
            CandidateStatus::Completed => {
                assert!(candidate.outcome.decision().is_some());
                assert!(candidate.outcome.error().is_none());
            }
            CandidateStatus::Error => {
                assert!(candidate.outcome.decision().is_none());
                assert!(candidate.outcome.error().is_some());
            }
        }
    }
    let text = response.to_json_string();
    let again = AgentResponse::from_slice(text.as_bytes())
        .unwrap_or_else(|e| panic!("re-serialized response rejected: {e}\n{text}"));
    assert_eq!(again, response, "round trip changed the response\n{text}");
    assert_eq!(
        again.to_json_string(),
        text,
        "serialization is not a fixed point"
    );
});
