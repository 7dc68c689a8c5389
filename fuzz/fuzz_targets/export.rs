//! The export documents' `from_slice` on arbitrary bytes: the graph records
//! GEN saves (`SituationLink`, `CandidateRecord`, `SituationRecord`) and
//! what its export hands an exporter and gets back (`ExportExample`,
//! `ExportRecord`, `ExportResult`).
//!
//! Invariants: nothing panics; `from_slice` and `Json::from_slice` then
//! `from_json` agree; an accepted document re-serializes to text that parses
//! to an equal document, and writing that again gives the same text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::Json;
use magma_protocol::export::{
    CandidateRecord, ExportExample, ExportRecord, ExportResult, SituationLink, SituationRecord,
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
    round_trip!(SituationLink, data);
    round_trip!(CandidateRecord, data);
    round_trip!(SituationRecord, data);
    round_trip!(ExportExample, data);
    round_trip!(ExportRecord, data);
    round_trip!(ExportResult, data);
});
