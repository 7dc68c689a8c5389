//! `AgentHealth::from_slice` on arbitrary bytes.
//!
//! Invariants: no panic; both entry points agree; an accepted body is a JSON
//! object, and the canonical body it serializes to is accepted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::{AgentHealth, Json};

fuzz_target!(|data: &[u8]| {
    let direct = AgentHealth::from_slice(data);
    let two_step = Json::from_slice(data).and_then(AgentHealth::from_json);
    assert_eq!(
        direct.is_ok(),
        two_step.is_ok(),
        "the two entry points disagree: {direct:?} vs {two_step:?}"
    );
    let Ok(health) = direct else { return };
    assert!(
        matches!(Json::from_slice(data), Ok(Json::Object(_))),
        "a health body that is not an object was accepted"
    );
    let text = health.to_json_string();
    assert_eq!(AgentHealth::from_slice(text.as_bytes()), Ok(health));
});
