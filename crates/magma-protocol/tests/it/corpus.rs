//! Shared machinery: run a case (kind + document) through the crate.

use magma_protocol::{
    AgentHealth, AgentInfo, AgentRequest, AgentResponse, Error, ExchangeError, Issue,
    check_exchange,
};

/// The families where the project deliberately differs from the reference
/// (`docs/conformance.md`). Families are matched exactly or, when the entry
/// ends in `*`, by prefix.
pub(crate) const DEVIATIONS: &[&str] = &[
    "nonfinite.response_memory",
    "nonfinite.response_internal_steps",
    "nonfinite.exchange_response_memory",
    "dup.key.shadow_*",
    "str.lone_surrogate*",
    "int.beyond_i64",
    "int.beyond_u64",
    "int.huge",
    "dup.input_ids.big_distinct",
    "exchange.big_ids",
    "int.digit_limit",
];

pub(crate) fn is_deviation(family: &str) -> bool {
    DEVIATIONS.iter().any(|d| match d.strip_suffix('*') {
        Some(prefix) => family.starts_with(prefix),
        None => family == *d,
    })
}

/// The crate's verdict on one case: `Ok` or the issues.
pub(crate) fn verdict(kind: &str, doc: &str, request: Option<&str>) -> Result<(), Vec<Issue>> {
    let issues = |e: Error| e.issues().to_vec();
    match kind {
        "request" => AgentRequest::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "response" => AgentResponse::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "info" => AgentInfo::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "health" => AgentHealth::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "exchange" => {
            let request = request.unwrap_or_default();
            check_exchange(request.as_bytes(), doc.as_bytes())
                .map_err(|e: ExchangeError| e.issues())
        }
        other => panic!("unknown case kind {other:?}"),
    }
}
