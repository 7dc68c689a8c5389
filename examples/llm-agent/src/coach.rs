//! The coach: GEN's repair loop (`POST /v1/coaching`), the way
//! full-history-agent takes part in it.
//!
//! For each reinjection point of a request, the coach rebuilds the prompt
//! of the point's input (as [`respond`](crate::agent::LlmAgent) would), adds
//! to the system message why the earlier answer was rejected (the request's
//! kind, the stage's goal and hint, the active errors, the diagnosis, the
//! rejected decision or error and what its execution reported), and asks
//! the session's model backend (the `backends` GEN sent in the session's
//! `PUT`) for a corrected decision. The answer is `corrected` with one
//! proposal per point whose `extra_keys` is the payload itself:
//! `{"kind": "replace_decision", "decision": {"say", "tool_calls"}}`.
//!
//! A backend that cannot be reached or answers an error status gives
//! `status: "error"`; an answer that is not a usable decision gives
//! `status: "abandoned"`; both with the reason.

use std::time::Duration;

use magma_server::magma_protocol::coaching::{
    CoachingBackendConfig, CoachingKind, CoachingPayload, CoachingProposal,
    SpecializedCoachingRequest, SpecializedCoachingResponse,
};
use magma_server::{AgentDecision, AgentInput, CoachError, CoachingContext, Json};

use crate::agent::{LlmAgent, Prompt};
use crate::provider::{Exchange, Failure, Provider};

/// The kinds the coach answers.
pub(crate) const KINDS: &[CoachingKind] = &[
    CoachingKind::Failure,
    CoachingKind::Suboptimal,
    CoachingKind::Format,
];

/// The sentence the system message of a coaching prompt starts its note
/// with.
pub(crate) const REJECTED: &str = "An earlier answer to this situation was rejected";

/// The backend of the session to ask, and the provider for it.
fn backend(context: &CoachingContext) -> Result<(&str, &CoachingBackendConfig, Provider), String> {
    let (name, config) = context
        .config()
        .backends()
        .iter()
        .next()
        .ok_or("the coaching session has no backend")?;
    let endpoint = config.endpoint().trim_end_matches('/');
    let base = endpoint
        .strip_suffix("/chat/completions")
        .unwrap_or(endpoint);
    let timeout = Duration::try_from_secs_f64(config.timeout())
        .map_err(|e| format!("backend {name}: timeout {}: {e}", config.timeout()))?;
    let retries = u32::try_from(config.max_retry()).unwrap_or(u32::MAX);
    let headers: Vec<(&str, &str)> = config
        .headers()
        .iter()
        .map(|(k, v)| (k, v.as_str()))
        .collect();
    let provider = Provider::new(base, None, timeout, retries, Duration::from_millis(500))
        .and_then(|p| p.with_headers(&headers))
        .map_err(|e| format!("backend {name}: {e}"))?;
    Ok((name, config, provider))
}

impl LlmAgent {
    /// Answers a coaching request (see the module's documentation).
    pub(crate) async fn coach_request(
        &self,
        request: &SpecializedCoachingRequest,
        context: &CoachingContext,
    ) -> Result<SpecializedCoachingResponse, CoachError> {
        let id = request.request_id();
        let (name, config, provider) = match backend(context) {
            Ok(found) => found,
            Err(reason) => return Ok(SpecializedCoachingResponse::error(id, reason)?),
        };
        let note = rejection_note(request);
        let mut proposals = Vec::with_capacity(request.reinjection_points().len());
        for point in request.reinjection_points() {
            let Some(input) = request.point_input(point) else {
                let reason = format!("reinjection point `{}` has no input", point.id());
                return Ok(SpecializedCoachingResponse::abandoned(id, reason)?);
            };
            let mut settings = self.settings().clone();
            settings.model = config.default_model().to_owned();
            settings.temperature = 0.0;
            settings.system_prompt = format!("{}\n\n{note}", settings.system_prompt);
            let mut deterministic = input.clone();
            deterministic
                .extra_keys
                .insert("inference_mode", Json::Bool(true));
            let prompt = Prompt::new(&deterministic, &settings);
            let payload = prompt.payload.to_json_string();
            let exchange = self.call(&provider, payload.clone()).await;
            context.log(format!(
                "# llm-agent coach\n\nBackend: {name} ({})\nPoint: {}\n\n## Prompt\n\n{payload}\n\n\
                 ## Answer ({} attempt(s), HTTP {})\n\n{}\n",
                config.endpoint(),
                point.id(),
                exchange.attempts,
                exchange
                    .http_status
                    .map_or_else(|| "none".to_owned(), |s| s.to_string()),
                exchange.raw
            ));
            let body = match exchange.outcome {
                Ok(body) => body,
                Err(failure) => {
                    let reason = format!(
                        "the session's backend {name} failed ({}): {}",
                        failure.code, failure.message
                    );
                    return Ok(SpecializedCoachingResponse::error(id, reason)?);
                }
            };
            let decision = match prompt.decision(&body).and_then(single_kind) {
                Ok(decision) => decision,
                Err(failure) => {
                    let reason = format!(
                        "the session's backend {name} gave no usable decision for point `{}` ({}): {}",
                        point.id(),
                        failure.code,
                        failure.message
                    );
                    return Ok(SpecializedCoachingResponse::abandoned(id, reason)?);
                }
            };
            // The proposal's extra_keys is the payload itself: GEN sends it
            // back as extra_keys.coaching, where `respond` applies it.
            let payload = CoachingPayload::replace_decision(decision)?;
            proposals.push(CoachingProposal::new(point.id(), payload));
        }
        if proposals.is_empty() {
            let reason = "the request has no reinjection point to propose a correction for";
            return Ok(SpecializedCoachingResponse::abandoned(id, reason)?);
        }
        Ok(SpecializedCoachingResponse::corrected(id, proposals)?)
    }

    /// One provider call on a plain thread, within the agent's slots.
    async fn call(&self, provider: &Provider, payload: String) -> Exchange {
        let lost = || Exchange {
            outcome: Err(Failure::new(
                "internal_error",
                "the backend call ended without an answer",
            )),
            attempts: 0,
            http_status: None,
            raw: String::new(),
        };
        let Ok(permit) = self.slot().await else {
            return lost();
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let provider = provider.clone();
        std::thread::spawn(move || {
            let exchange = provider.complete(&payload);
            drop(permit);
            let _ = tx.send(exchange);
        });
        rx.await.unwrap_or_else(|_| lost())
    }
}

/// A `replace_decision` holds exactly one of a non-empty `say` or tool
/// calls: with tool calls, the text that came with them is dropped.
fn single_kind(mut decision: AgentDecision) -> Result<AgentDecision, Failure> {
    if !decision.tool_calls.is_empty() {
        decision.say.clear();
    }
    if decision.say.is_empty() && decision.tool_calls.is_empty() {
        return Err(Failure::new("invalid_output", "an empty decision"));
    }
    Ok(decision)
}

/// What the model is told about the rejected answer.
fn rejection_note(request: &SpecializedCoachingRequest) -> String {
    let mut note = format!(
        "{REJECTED} ({} repair). Answer the same situation again with a corrected decision.",
        request.kind().as_str()
    );
    let stage = request.stage();
    if !stage.goal.is_empty() {
        note.push_str(&format!("\nGoal of the stage: {}", stage.goal));
    }
    if let Some(hint) = stage.hint.as_deref().filter(|h| !h.is_empty()) {
        note.push_str(&format!("\nHint: {hint}"));
    }
    for error in request.active_errors() {
        note.push_str(&format!("\nError ({}): {}", error.code, error.description));
    }
    if let Some(diagnosis) = request.diagnosis() {
        note.push_str(&format!("\nDiagnosis: {}", diagnosis.explanation));
        if let Some(expected) = diagnosis.expected_decision.as_deref() {
            note.push_str(&format!("\nExpected: {expected}"));
        }
    }
    let target = request.target_step();
    if let Some(output) = &target.output {
        note.push_str(&format!("\nThe rejected answer: {}", decision_text(output)));
    }
    if let Some(error) = &target.error {
        note.push_str(&format!(
            "\nThe rejected answer was invalid ({}): {}",
            error.code, error.message
        ));
    }
    if let Some(results) = target
        .execution
        .get("execution_results")
        .and_then(Json::as_array)
    {
        for result in results {
            if let Some(message) = result.get("message").and_then(Json::as_str) {
                note.push_str(&format!("\nWhat its execution reported: {message}"));
            }
        }
    }
    note
}

/// A decision in a line: its text, or its calls.
fn decision_text(decision: &AgentDecision) -> String {
    if decision.tool_calls.is_empty() {
        return format!("said {:?}", decision.say);
    }
    let calls: Vec<String> = decision
        .tool_calls
        .iter()
        .map(|c| {
            format!(
                "{}({}) on {}",
                c.name.as_str(),
                Json::Object(c.arguments.clone()),
                c.target_robot_name.as_str()
            )
        })
        .collect();
    format!("called {}", calls.join(", "))
}

/// The decision a re-injected input asks for (`extra_keys.coaching`), if it
/// carries one: exactly that decision, or why the payload is invalid.
pub(crate) fn reinjected(input: &AgentInput) -> Option<Result<AgentDecision, String>> {
    let payload = CoachingPayload::from_extra_keys(&input.extra_keys)?;
    Some(match payload {
        Ok(CoachingPayload::ReplaceSay(say)) => Ok(AgentDecision::say(say.text.as_str())),
        Ok(CoachingPayload::ReplaceDecision(decision)) => Ok(decision),
        Ok(other) => Err(format!(
            "unsupported coaching payload {}",
            Json::Object(other.to_object())
        )),
        Err(e) => Err(e.to_string()),
    })
}
