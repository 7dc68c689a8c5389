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

use magma_client::http::StatusCode;
use magma_protocol::routes::Endpoint;

use super::CheckDef;
use crate::probe::requests;
use crate::probe::session::{Session, body_excerpt, transport_finding};
use crate::probe::{Check, CheckSeverity};
use crate::report::Finding;

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

const INVALID_2XX_IMPACT: &str = "the contract requires 422 for an invalid request: an agent \
     that answers 2xx guesses what a broken client meant, so the client's bug goes unnoticed \
     and its episode continues on made-up input";
const INVALID_5XX_IMPACT: &str = "a 5xx says the agent crashed: a client that sent this is \
     told the agent failed instead of what is wrong with its request";
const NAN_5XX_IMPACT: &str = "BENCH and GEN never send NaN, so they are not affected; a client \
     that does is told the agent crashed instead of what is wrong with its request. Stock \
     FastAPI agents answer 500 here: FastAPI cannot render its 422 for NaN";
const NOT_422_IMPACT: &str = "any 4xx stops the client, but 422 with {\"detail\": ...} is \
     what FastAPI agents and magma-server send, and what clients display";

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
    if status == StatusCode::UNPROCESSABLE_ENTITY {
        check.verified(format!("{what}: 422"));
    } else if status.is_client_error() {
        check.push(
            Finding::warning(
                "http",
                "not_422",
                format!("POST {}", Endpoint::Responses),
                format!(
                    "{what}: answered {status}, 4xx but not 422: {}",
                    body_excerpt(&answer)
                ),
            )
            .with_impact(NOT_422_IMPACT)
            .with_fix("answer invalid requests with 422 {\"detail\": [...]}"),
        );
    } else if status.is_success() {
        check.push(
            Finding::error(
                "http",
                "accepted_invalid_request",
                format!("POST {}", Endpoint::Responses),
                format!("{what}: answered {status}: {}", body_excerpt(&answer)),
            )
            .with_impact(INVALID_2XX_IMPACT)
            .with_fix(
                "validate every request as magma-core 2.0.1 does and answer 422 \
                 {\"detail\": [...]} (FastAPI with magma-core's AgentRequest as the body \
                 type, and magma-server, do this)",
            ),
        );
    } else {
        let (impact, fix) = if name == "nan" {
            (
                NAN_5XX_IMPACT,
                "to answer 422, refuse NaN and Infinity before FastAPI echoes the input in \
                 its 422 (e.g. a RequestValidationError handler that drops the input), or \
                 waive this check with --skip invalid-request/nan",
            )
        } else {
            (
                INVALID_5XX_IMPACT,
                "validate the request before running the agent and answer 422 \
                 {\"detail\": [...]}",
            )
        };
        check.push(
            Finding::error(
                "http",
                "server_error_on_invalid_request",
                format!("POST {}", Endpoint::Responses),
                format!("{what}: answered {status}: {}", body_excerpt(&answer)),
            )
            .with_impact(impact)
            .with_fix(fix),
        );
    }
}
