//! Lints: documents the contract accepts but a real consumer mishandles.

use magma_protocol::coaching::SpecializedCoachingResponse;
use magma_protocol::{
    AgentInfo, AgentInput, AgentRequest, AgentResponse, Json, Location, Outcome, Segment,
};

use crate::dupkeys::find_duplicate_keys;
use crate::explain::Lint;
use crate::report::{Finding, shorten};

fn warn(lint: Lint, document: &str, location: String, message: String) -> Finding {
    Finding::warning(document, lint.code(), location, message)
        .with_impact(lint.impact())
        .with_fix(lint.fix())
}

fn loc(segments: Vec<Segment>) -> String {
    Location::from(segments).to_string()
}

fn key(k: &str) -> Segment {
    Segment::Key(k.to_owned())
}

/// `duplicate_key` warnings for one document.
pub(crate) fn duplicate_keys(document: &str, bytes: &[u8]) -> Vec<Finding> {
    let scan = find_duplicate_keys(bytes);
    let kept: usize = scan.duplicates.iter().map(|d| d.count - 1).sum();
    let mut out: Vec<Finding> = scan
        .duplicates
        .into_iter()
        .map(|d| {
            let mut at = d.object.segments().to_vec();
            let holder = d.object.to_string();
            at.push(Segment::Key(d.key.clone()));
            warn(
                Lint::DuplicateKey,
                document,
                loc(at),
                format!(
                    "key {} appears {} times in the object at {holder}; the last value is used",
                    Json::from(d.key.as_str()),
                    d.count
                ),
            )
        })
        .collect();
    if scan.omitted > 0 {
        out.push(warn(
            Lint::DuplicateKey,
            document,
            "(document)".to_owned(),
            format!(
                "{} more repeated keys are not listed (the first {kept} repeats are)",
                scan.omitted
            ),
        ));
    }
    out
}

/// `proposal_payload` warnings of a coaching reply: each proposal's
/// `extra_keys` is what GEN sends back as `extra_keys.coaching`, so it must
/// be a payload (`kind` and its fields), not a wrapper around one.
pub(crate) fn coaching_response(response: &SpecializedCoachingResponse) -> Vec<Finding> {
    let mut out = Vec::new();
    for (i, proposal) in response.proposals().iter().enumerate() {
        let Err(e) = proposal.payload() else {
            continue;
        };
        let at = vec![Segment::Index(i), key("extra_keys")];
        let sent = shorten(
            &Json::Object(proposal.extra_keys.clone()).to_json_string(),
            80,
        );
        let message = match (
            proposal.extra_keys.get("kind"),
            proposal.extra_keys.get("coaching"),
        ) {
            (None, Some(_)) => format!(
                "proposal {i} wraps its payload in a \"coaching\" key: GEN will send \
                 extra_keys.coaching = {sent}, so the agent finds its payload at \
                 extra_keys.coaching.coaching, with no kind at extra_keys.coaching"
            ),
            (None, None) => format!(
                "proposal {i}'s extra_keys has no \"kind\": GEN will send \
                 extra_keys.coaching = {sent}, and no agent reads a payload without a kind"
            ),
            _ => {
                let first = e.first();
                format!(
                    "proposal {i}'s payload does not read: {} at {} ({}); GEN will send it \
                     as extra_keys.coaching unchanged",
                    first.message(),
                    first.location(),
                    first.kind().as_str()
                )
            }
        };
        let mut location = vec![key("proposals")];
        location.extend(at);
        out.push(
            warn(
                Lint::ProposalPayload,
                "coaching_response",
                loc(location),
                message,
            )
            .with_input(sent),
        );
    }
    out
}

/// Lints of `/v1/info`: protocol version and inference capability.
pub(crate) fn info(info: &AgentInfo) -> Vec<Finding> {
    let mut out = Vec::new();
    if info.protocol_version != magma_protocol::PROTOCOL_VERSION {
        out.push(
            warn(
                Lint::ProtocolVersion,
                "info",
                "protocol_version".into(),
                format!(
                    "protocol_version is {}, the consumers require \"2.0\"",
                    Json::from(info.protocol_version.as_str())
                ),
            )
            .with_input(shorten(
                &Json::from(info.protocol_version.as_str()).to_json_string(),
                80,
            )),
        );
    }
    match info.capabilities.get("inference") {
        Some(true) => {}
        Some(false) => out.push(
            warn(
                Lint::InferenceCapability,
                "info",
                "capabilities.inference".into(),
                "capabilities.inference is false".into(),
            )
            .with_input("false"),
        ),
        None => out.push(warn(
            Lint::InferenceCapability,
            "info",
            "capabilities".into(),
            "capabilities has no \"inference\" flag".into(),
        )),
    }
    out
}

/// Lints of a valid response; those that need the request run only when it
/// is given. Candidates are matched to inputs by `source_id`.
pub(crate) fn response(response: &AgentResponse, request: Option<&AgentRequest>) -> Vec<Finding> {
    let mut out = Vec::new();
    for (i, cand) in response.candidates().iter().enumerate() {
        let input = request.and_then(|r| r.inputs().iter().find(|inp| inp.id == cand.source_id));
        if let Outcome::Completed(decision) = &cand.outcome {
            let output = || vec![Segment::Index(i), key("output")];
            let says = !decision.say.is_empty();
            let calls = !decision.tool_calls.is_empty();
            if says && calls {
                out.push(
                    warn(
                        Lint::SayWithToolCalls,
                        "response",
                        loc(output()),
                        format!(
                            "candidate {i} says something and calls {} tool(s)",
                            decision.tool_calls.len()
                        ),
                    )
                    .with_input(shorten(
                        &Json::from(decision.say.as_str()).to_json_string(),
                        80,
                    )),
                );
            }
            if !says && !calls {
                out.push(warn(
                    Lint::EmptyDecision,
                    "response",
                    loc(output()),
                    format!("candidate {i} neither says anything nor calls a tool"),
                ));
            }
            if let Some(input) = input {
                tool_calls(&mut out, i, decision, input);
            }
        }
        if let Some(input) = input {
            if input.memory_list().is_some() && !cand.memory.contains_key("memory_list") {
                out.push(warn(
                    Lint::MemoryListDropped,
                    "response",
                    loc(vec![Segment::Index(i), key("memory")]),
                    format!(
                        "input {} sent memory.memory_list, candidate {i}'s memory has none",
                        input.id
                    ),
                ));
            }
        }
    }
    out
}

fn tool_calls(
    out: &mut Vec<Finding>,
    i: usize,
    decision: &magma_protocol::AgentDecision,
    input: &AgentInput,
) {
    let names = input.tool_names();
    let robots: Option<Vec<&str>> = input
        .attributes
        .get("known_robots")
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_str).collect());
    for (j, call) in decision.tool_calls.iter().enumerate() {
        let at = |field: &str| {
            loc(vec![
                Segment::Index(i),
                key("output"),
                key("tool_calls"),
                Segment::Index(j),
                key(field),
            ])
        };
        if !names.iter().any(|n| n == call.name.as_str()) {
            let offered = if names.is_empty() {
                "the input offers no tools".to_owned()
            } else {
                format!("the input offers {}", list(&names))
            };
            out.push(
                warn(
                    Lint::UnknownTool,
                    "response",
                    at("name"),
                    format!(
                        "candidate {i} calls {} which is not among input {}'s tools; {offered}",
                        Json::from(call.name.as_str()),
                        input.id
                    ),
                )
                .with_input(shorten(
                    &Json::from(call.name.as_str()).to_json_string(),
                    80,
                )),
            );
        }
        if let Some(robots) = &robots {
            if !robots.contains(&call.target_robot_name.as_str()) {
                let known = if robots.is_empty() {
                    "known_robots is empty".to_owned()
                } else {
                    format!("known_robots is {}", list(robots))
                };
                out.push(
                    warn(
                        Lint::UnknownRobot,
                        "response",
                        at("target_robot_name"),
                        format!(
                            "candidate {i} targets robot {} which input {} does not know; {known}",
                            Json::from(call.target_robot_name.as_str()),
                            input.id
                        ),
                    )
                    .with_input(shorten(
                        &Json::from(call.target_robot_name.as_str()).to_json_string(),
                        80,
                    )),
                );
            }
        }
    }
}

fn list<S: AsRef<str>>(items: &[S]) -> String {
    let shown: Vec<String> = items
        .iter()
        .take(8)
        .map(|s| Json::from(s.as_ref()).to_json_string())
        .collect();
    let more = if items.len() > 8 {
        format!(" and {} more", items.len() - 8)
    } else {
        String::new()
    };
    format!("[{}]{more}", shown.join(", "))
}

/// `true` for an error candidate; the probe reports those.
pub(crate) fn error_candidates(response: &AgentResponse) -> Vec<Finding> {
    response
        .candidates()
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let Outcome::Error(e) = &c.outcome else {
                return None;
            };
            Some(warn(
                Lint::ErrorCandidate,
                "response",
                loc(vec![Segment::Index(i), key("error")]),
                format!(
                    "candidate {i} is an error: {}: {}",
                    e.code.as_str(),
                    shorten(e.message.as_str(), 200)
                ),
            ))
        })
        .collect()
}
