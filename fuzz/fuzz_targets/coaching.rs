//! The coaching documents' `from_slice` on arbitrary bytes: the request,
//! reply and session config of the coaching routes, `InternalStep`,
//! `ReplaceSay`, and `CoachingPayload` on whatever JSON the bytes hold.
//!
//! Invariants: nothing panics; `from_slice` and `Json::from_slice` then
//! `from_json` agree; an accepted document re-serializes to text that parses
//! to an equal document, and writing that again gives the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::Json;
use magma_protocol::coaching::{
    CoachingPayload, CoachingSessionConfig, InternalStep, ReplaceSay, SpecializedCoachingRequest,
    SpecializedCoachingResponse,
};

macro_rules! round_trip {
    ($ty:ty, $data:expr) => {{
        let direct = <$ty>::from_slice($data);
        let two_step = Json::from_slice($data).and_then(<$ty>::from_json);
        match (&direct, &two_step) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "the two entry points disagree on the value"),
            (Err(_), Err(_)) => {}
            _ => panic!("the two entry points disagree: {direct:?} vs {two_step:?}"),
        }
        if let Ok(doc) = direct {
            let text = doc.to_json_string();
            let again = <$ty>::from_slice(text.as_bytes())
                .unwrap_or_else(|e| panic!("re-serialized document rejected: {e}\n{text}"));
            assert_eq!(again, doc, "round trip changed the document\n{text}");
            assert_eq!(again.to_json_string(), text, "not a fixed point");
        }
    }};
}

fuzz_target!(|data: &[u8]| {
    round_trip!(SpecializedCoachingRequest, data);
    round_trip!(SpecializedCoachingResponse, data);
    round_trip!(CoachingSessionConfig, data);
    round_trip!(InternalStep, data);
    round_trip!(ReplaceSay, data);
    if let Ok(value) = Json::from_slice(data) {
        if let Ok(payload) = CoachingPayload::from_json(&value) {
            let again = CoachingPayload::from_json(&Json::Object(payload.to_object()))
                .expect("a written payload reads back");
            assert_eq!(again, payload);
        }
    }
});
