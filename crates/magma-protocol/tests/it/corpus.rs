//! Shared machinery: run a case (kind + document) through the crate.

use magma_protocol::coaching::{
    CoachingSessionConfig, InternalStep, ReplaceSay, SpecializedCoachingRequest,
    SpecializedCoachingResponse,
};
use magma_protocol::{
    AgentHealth, AgentInfo, AgentRequest, AgentResponse, Error, ExchangeError, Issue,
    validate_exchange,
};

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
            validate_exchange(request.as_bytes(), doc.as_bytes())
                .map_err(|e: ExchangeError| e.issues())
        }
        "coaching_request" => SpecializedCoachingRequest::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "coaching_response" => SpecializedCoachingResponse::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "coaching_session" => CoachingSessionConfig::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "internal_step" => InternalStep::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "replace_say" => ReplaceSay::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "situation_link" => magma_protocol::export::SituationLink::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "candidate_record" => magma_protocol::export::CandidateRecord::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "situation_record" => magma_protocol::export::SituationRecord::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "export_example" => magma_protocol::export::ExportExample::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "export_record" => magma_protocol::export::ExportRecord::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "export_result" => magma_protocol::export::ExportResult::from_slice(doc.as_bytes())
            .map(drop)
            .map_err(issues),
        "coaching_exchange" => {
            let request = request.unwrap_or_default();
            let request =
                SpecializedCoachingRequest::from_slice(request.as_bytes()).map_err(issues)?;
            SpecializedCoachingResponse::from_slice(doc.as_bytes())
                .map_err(issues)?
                .validate_request(&request)
                .map_err(issues)
        }
        other => panic!("unknown case kind {other:?}"),
    }
}
