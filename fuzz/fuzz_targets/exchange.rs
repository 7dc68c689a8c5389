//! `validate_exchange` on a request and a response, split at the first NUL byte
//! (`request \0 response`; the seeds are written that way).
//!
//! Invariants: no panic; the verdict equals parsing both documents and calling
//! `validate_request`; an accepted exchange is still accepted after both
//! documents are re-serialized.
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::{AgentRequest, AgentResponse, ExchangeError, validate_exchange};

fuzz_target!(|data: &[u8]| {
    let (request, response) = match data.iter().position(|&b| b == 0) {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &b"[]"[..]),
    };
    let verdict = validate_exchange(request, response);
    let by_hand = AgentRequest::from_slice(request)
        .map_err(ExchangeError::Request)
        .and_then(|req| {
            let resp = AgentResponse::from_slice(response).map_err(ExchangeError::Response)?;
            resp.validate_request(&req)
                .map_err(ExchangeError::Mismatch)?;
            Ok((req, resp))
        });
    match (&verdict, &by_hand) {
        (Ok(()), Ok(_)) => {}
        (Err(a), Err(b)) => {
            assert_eq!(a, b, "validate_exchange and the steps give different errors");
            assert!(!a.issues().is_empty(), "a refusal without issues");
        }
        _ => panic!("validate_exchange disagrees with its steps: {verdict:?} vs {by_hand:?}"),
    }
    let Ok((req, resp)) = by_hand else { return };
    let req_text = req.to_json_string();
    let resp_text = resp.to_json_string();
    validate_exchange(req_text.as_bytes(), resp_text.as_bytes())
        .unwrap_or_else(|e| panic!("re-serialized exchange refused: {e}"));
});
