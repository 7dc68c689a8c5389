//! The coaching documents' parsers on arbitrary bytes: every kind of the
//! coaching family in magma-protocol's registry (the request, reply and
//! session config of the coaching routes, `InternalStep`, `ReplaceSay`, and
//! any registered since), and `CoachingPayload` on whatever JSON the bytes
//! hold.
//!
//! Invariants: nothing panics; `parse` and `Json::from_slice` then
//! `validate` agree; an accepted document re-serializes to text that parses
//! to an equal document, and writing that again gives the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::Json;
use magma_protocol::coaching::CoachingPayload;
use magma_protocol::documents::{DocumentKind, Family};

fn round_trip(kind: DocumentKind, data: &[u8]) {
    let direct = kind.parse(data);
    let two_step = Json::from_slice(data).and_then(|v| kind.validate(v));
    match (&direct, &two_step) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "{kind}: the two entry points disagree on the value"),
        (Err(_), Err(_)) => {}
        _ => panic!("{kind}: the two entry points disagree: {direct:?} vs {two_step:?}"),
    }
    if let Ok(doc) = direct {
        let text = doc.to_json_string();
        let again = kind
            .parse(text.as_bytes())
            .unwrap_or_else(|e| panic!("{kind}: re-serialized document rejected: {e}\n{text}"));
        assert_eq!(again, doc, "{kind}: round trip changed the document\n{text}");
        assert_eq!(again.to_json_string(), text, "{kind}: not a fixed point");
    }
}

fuzz_target!(|data: &[u8]| {
    for kind in DocumentKind::ALL.into_iter().filter(|k| k.family() == Family::Coaching) {
        round_trip(kind, data);
    }
    if let Ok(value) = Json::from_slice(data) {
        if let Ok(payload) = CoachingPayload::from_json(&value) {
            let again = CoachingPayload::from_json(&Json::Object(payload.to_object()))
                .expect("a written payload reads back");
            assert_eq!(again, payload);
        }
    }
});
