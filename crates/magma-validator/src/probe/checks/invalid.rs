//! `POST /v1/responses` with invalid requests: answered 422, as magma-core's
//! models and FastAPI do.
//!
//! BENCH and GEN validate every request with magma-core before sending it,
//! so none of these reaches an agent from them. They fail all the same,
//! except NaN: a FastAPI agent on magma-core answers each of them 422
//! without writing a line, so an agent that does not is not validating
//! requests as the contract's models do, and accepts or crashes on input
//! it never checked. NaN is the exception: FastAPI itself cannot render its
//! 422 for it and answers 500, the agent's author cannot fix that, and
//! neither consumer can send NaN (`json.dumps(allow_nan=False)`), so that
//! check warns.

use magma_protocol::routes::Endpoint;

use super::CheckDef;
use crate::probe::requests;
use crate::probe::session::{Session, body_excerpt, transport_finding};
use crate::probe::{Check, CheckSeverity};
use crate::refusal::invalid_request_answer;

const CONSUMERS: &str = "none directly: BENCH and GEN validate before sending; other clients \
     (tools, proxies, hand-written scripts) get a wrong answer to their mistake";
const NAN_CONSUMERS: &str = "none: BENCH and GEN cannot send NaN (json.dumps(allow_nan=False), \
     then magma-core validation)";

macro_rules! invalid {
    ($name:literal, $severity:ident, $consumers:expr) => {
        CheckDef::new(
            concat!("invalid-request/", $name),
            "an invalid request is answered 4xx (422 expected)",
            CheckSeverity::$severity,
            $consumers,
            invalid_request,
        )
    };
}

pub(super) const CHECKS: &[CheckDef] = &[
    invalid!("not-json", Fail, CONSUMERS),
    invalid!("nan", Warn, NAN_CONSUMERS),
    invalid!("string-id", Fail, CONSUMERS),
    invalid!("float-id", Fail, CONSUMERS),
    invalid!("unknown-field", Fail, CONSUMERS),
    invalid!("missing-inputs", Fail, CONSUMERS),
    invalid!("empty-request-id", Fail, CONSUMERS),
    invalid!("duplicate-ids", Fail, CONSUMERS),
    invalid!("zero-outputs", Fail, CONSUMERS),
    invalid!("bad-instruction-type", Fail, CONSUMERS),
    invalid!("array-body", Fail, CONSUMERS),
];

fn invalid_request(s: &mut Session, check: &mut Check) {
    let short = check.name().trim_start_matches("invalid-request/");
    let Some((name, what, body)) = requests::invalid_bodies()
        .into_iter()
        .find(|(n, _, _)| *n == short)
    else {
        check.skip("skipped: no request defined for this check");
        return;
    };
    let answer = match s.post_json(Endpoint::Responses.path(), body) {
        Ok(a) => a,
        Err(e) => {
            check.push(transport_finding(&e));
            return;
        }
    };
    let status = answer.status();
    match invalid_request_answer(status.as_u16(), what, &body_excerpt(&answer), name == "nan") {
        None => check.verified(format!("{what}: 422")),
        Some(finding) => check.push(finding),
    }
}
