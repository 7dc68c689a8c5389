//! What an agent's answer to an invalid `POST /v1/responses` request says:
//! the contract (and every FastAPI agent on magma-core, and magma-server)
//! answers `422 {"detail": [...]}`. The probe sends invalid requests on
//! purpose; the proxy sees them when a consumer sends one. Both judge the
//! answer here, so that they name a fault the same way.

use magma_client::http::StatusCode;
use magma_protocol::routes::Endpoint;

use crate::report::Finding;

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

/// The finding for an answer of status `status` to an invalid request
/// (`what` says which, `excerpt` is the start of the answer's body); `None`
/// for `422`. `nan`: the request is invalid only for a NaN or an Infinity,
/// which FastAPI itself answers with `500`: the finding says so (and its
/// caller may count it as a warning, since no consumer can send NaN).
pub(crate) fn invalid_request_answer(
    status: u16,
    what: &str,
    excerpt: &str,
    nan: bool,
) -> Option<Finding> {
    let location = format!("POST {}", Endpoint::Responses);
    // "500 Internal Server Error", as the status line says it.
    let shown = StatusCode::from_u16(status).map_or_else(|_| status.to_string(), |s| s.to_string());
    let message = format!("{what}: answered {shown}: {excerpt}");
    let finding = match status {
        422 => return None,
        400..=499 => Finding::warning("http", "not_422", location, message)
            .with_impact(NOT_422_IMPACT)
            .with_fix("answer invalid requests with 422 {\"detail\": [...]}"),
        200..=299 => Finding::error("http", "accepted_invalid_request", location, message)
            .with_impact(INVALID_2XX_IMPACT)
            .with_fix(
                "validate every request as magma-core 2.0.1 does and answer 422 \
                 {\"detail\": [...]} (FastAPI with magma-core's AgentRequest as the body \
                 type, and magma-server, do this)",
            ),
        _ => {
            let (impact, fix) = if nan {
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
            Finding::error("http", "server_error_on_invalid_request", location, message)
                .with_impact(impact)
                .with_fix(fix)
        }
    };
    Some(finding)
}
