//! `EnvFeedback::parse` on arbitrary text.
//!
//! Invariants: no panic; accepted exactly when the text is a JSON object; no
//! key is lost (known keys plus `other` add up to the object's keys); every
//! outcome is a piece of `infos`; `has_failure` agrees with its definition.
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::{EnvFeedback, Json};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let parsed = EnvFeedback::parse(text);
    let json = Json::from_slice(data);
    let object = match (&parsed, json) {
        (Ok(_), Ok(Json::Object(o))) => o,
        (Err(_), Ok(Json::Object(_))) => panic!("a JSON object was refused: {parsed:?}"),
        (Ok(_), _) => panic!("something other than a JSON object was accepted"),
        (Err(_), _) => return,
    };
    let fb = parsed.unwrap();
    let known = usize::from(fb.infos.is_some())
        + usize::from(fb.previous_tool_call.is_some())
        + usize::from(fb.error.is_some())
        + usize::from(fb.failure_reason.is_some());
    assert_eq!(
        known + fb.other.len(),
        object.len(),
        "keys lost or invented"
    );
    let outcomes = fb.outcomes();
    if let Some(infos) = &fb.infos {
        for o in &outcomes {
            assert!(infos.contains(o.robot) && infos.contains(o.tool) && infos.contains(o.message));
        }
    } else {
        assert!(outcomes.is_empty());
    }
    let expected = fb.error.as_ref().is_some_and(|e| !e.is_null())
        || fb.failure_reason.is_some()
        || outcomes.iter().any(|o| !o.succeeded);
    assert_eq!(fb.has_failure(), expected);
});
