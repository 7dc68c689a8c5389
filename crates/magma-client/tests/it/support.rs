//! The servers come from the test kit (`magma_testkit::stub`); here, a
//! small echo agent for them and ways to spoil its answers.

use magma_client::magma_protocol::{
    AgentDecision, AgentInfo, AgentInput, AgentInstruction, AgentRequest, AgentResponse, Candidate,
    Json,
};
pub(crate) use magma_testkit::stub::{Options, RawServer, Recorded, Reply, StubServer, free_port};

pub(crate) fn info_json() -> String {
    AgentInfo::new("test-agent", "1.2.3").to_json_string()
}

/// The correct echo answer to a request: each candidate says
/// `echo: <content> #k` and returns the input memory with `steps` + 1.
pub(crate) fn echo_response(request: &AgentRequest) -> AgentResponse {
    AgentResponse::build(request, |input, k| {
        let mut memory = input.memory.clone();
        let steps = memory.get("steps").and_then(Json::as_i64).unwrap_or(0);
        memory.insert("steps", Json::from(steps + 1));
        Candidate::new(
            memory,
            AgentDecision::say(format!("echo: {} #{k}", input.instruction.content)),
        )
    })
}

/// An agent that answers health, info and responses correctly, letting
/// `spoil` rewrite the candidates array of each response.
pub(crate) fn agent(
    spoil: impl Fn(&mut Vec<Json>) + Send + Sync + 'static,
) -> impl Fn(&Recorded) -> Reply {
    move |rec: &Recorded| match (rec.method.as_str(), rec.path.as_str()) {
        ("GET", p) if p.ends_with("/health") => Reply::json(200, r#"{"status":"ready"}"#),
        ("GET", p) if p.ends_with("/v1/info") => Reply::json(200, info_json()),
        ("POST", p) if p.ends_with("/v1/responses") => match AgentRequest::from_slice(&rec.body) {
            Ok(request) => {
                let text = echo_response(&request).to_json_string();
                let mut value = Json::from_slice(text.as_bytes()).unwrap();
                if let Json::Array(items) = &mut value {
                    spoil(items);
                }
                Reply::json(200, value.to_json_string())
            }
            Err(e) => Reply::json(422, e.to_fastapi_body().to_json_string()),
        },
        _ => Reply::json(404, r#"{"detail":"Not Found"}"#),
    }
}

/// The echo agent, answering correctly.
pub(crate) fn echo_agent() -> impl Fn(&Recorded) -> Reply {
    agent(|_| {})
}

/// A request with `inputs` user instructions (ids 10, 11, ...), each asking
/// for `n` candidates.
pub(crate) fn request(id: &str, inputs: usize, n: u64) -> AgentRequest {
    let inputs = (0..inputs)
        .map(|i| {
            let mut input = AgentInput::new(10 + i as i64, AgentInstruction::user(format!("m{i}")));
            input.num_outputs = std::num::NonZeroU64::new(n).unwrap();
            input
        })
        .collect();
    AgentRequest::new(id, inputs).unwrap()
}

/// The `say` of every candidate, in order.
pub(crate) fn says(response: &AgentResponse) -> Vec<String> {
    response
        .candidates()
        .iter()
        .map(|c| {
            c.outcome
                .decision()
                .map(|d| d.say.clone())
                .unwrap_or_default()
        })
        .collect()
}
