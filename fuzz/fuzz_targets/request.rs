//! `AgentRequest::from_slice` on arbitrary bytes.
//!
//! Invariants: parsing never panics; the two entry points (`from_slice`, and
//! `Json::from_slice` then `from_json`) give the same verdict and value; an
//! accepted request re-serializes to text that parses to an equal request, and
//! serializing that again gives the same text (a fixed point).
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::{AgentRequest, Json};

fuzz_target!(|data: &[u8]| {
    let direct = AgentRequest::from_slice(data);
    let two_step = Json::from_slice(data).and_then(AgentRequest::from_json);
    match (&direct, &two_step) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "the two entry points disagree on the value"),
        (Err(_), Err(_)) => {}
        _ => panic!("the two entry points disagree: {direct:?} vs {two_step:?}"),
    }
    let Ok(request) = direct else { return };
    // Never an empty request id, never duplicate input ids.
    assert!(!request.request_id().is_empty());
    let mut ids: Vec<i64> = request.inputs().iter().map(|i| i.id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(
        ids.len(),
        request.inputs().len(),
        "duplicate input ids accepted"
    );
    let text = request.to_json_string();
    let again = AgentRequest::from_slice(text.as_bytes())
        .unwrap_or_else(|e| panic!("re-serialized request rejected: {e}\n{text}"));
    assert_eq!(again, request, "round trip changed the request\n{text}");
    assert_eq!(
        again.to_json_string(),
        text,
        "serialization is not a fixed point"
    );
    // Every input's tools decode without panicking (errors are fine).
    for input in request.inputs() {
        let _ = input.tool_descriptions();
        let _ = input.known_robots();
        let _ = input.memory_list();
        let _ = input.instruction.env_feedback();
    }
});
