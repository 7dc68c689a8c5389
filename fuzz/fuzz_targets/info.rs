//! `AgentInfo::from_slice` on arbitrary bytes.
//!
//! Invariants: no panic; both entry points agree; an accepted info round-trips
//! through its serialization to an equal value, at a fixed point; the
//! compatibility check never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::{AgentInfo, Json};

fuzz_target!(|data: &[u8]| {
    let direct = AgentInfo::from_slice(data);
    let two_step = Json::from_slice(data).and_then(AgentInfo::from_json);
    match (&direct, &two_step) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "the two entry points disagree on the value"),
        (Err(_), Err(_)) => {}
        _ => panic!("the two entry points disagree: {direct:?} vs {two_step:?}"),
    }
    let Ok(info) = direct else { return };
    let _ = info.check_compatible();
    let text = info.to_json_string();
    let again = AgentInfo::from_slice(text.as_bytes())
        .unwrap_or_else(|e| panic!("re-serialized info rejected: {e}\n{text}"));
    assert_eq!(again, info, "round trip changed the info\n{text}");
    assert_eq!(
        again.to_json_string(),
        text,
        "serialization is not a fixed point"
    );
});
