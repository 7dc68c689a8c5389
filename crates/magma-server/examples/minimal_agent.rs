//! A complete MAGMA agent: copy this file, replace `answer` with your model.
//!
//! Run: cargo run -p magma-rs-server --example minimal_agent -- --listen 127.0.0.1:8888
//! Flags (limits, TLS): add `--help`; `--version` prints `minimal-agent 0.1.0 (...)`.

use magma_server::{Agent, AgentDecision, AgentError, AgentInfo, AgentInput, Candidate, Rejection};

struct MinimalAgent;

impl Agent for MinimalAgent {
    /// Served on GET /v1/info: protocol "2.0", capabilities {"inference": true}.
    fn info(&self) -> AgentInfo {
        AgentInfo::new("minimal-agent", "0.1.0")
    }

    /// One input, `num_outputs` candidates. The server fills in request_id,
    /// source_id and candidate_index, and keeps the order.
    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        let mut candidates = Vec::new();
        for k in 0..input.num_outputs.get() {
            // Memory is the only conversation state: return the full new memory.
            let mut memory = input.memory.clone();
            candidates.push(match answer(&input.instruction.content, k) {
                Ok(text) => {
                    memory.insert("last_answer", text.clone().into());
                    Candidate::new(memory, AgentDecision::say(text))
                }
                // A failed candidate stays in its place, with the memory to keep.
                Err(why) => Candidate::new(memory, AgentError::new("invalid_output", why)),
            });
        }
        Ok(candidates)
    }
}

/// Your model goes here.
fn answer(instruction: &str, k: u64) -> Result<String, String> {
    if instruction.trim().is_empty() {
        return Err("empty instruction".to_owned());
    }
    Ok(format!("({k}) I heard: {instruction}"))
}

fn main() -> std::process::ExitCode {
    magma_server::cli::run(MinimalAgent)
}
