//! The llm-agent's dataset exporter: `llm-agent export` renders each
//! example GEN's export selects as the chat completion the agent would have
//! sent (its own prompt: system message, `memory.history`, the instruction,
//! and the function tools) followed by the candidate's decision as the
//! assistant message, in the OpenAI fine-tuning shape. Dataset `chat`, file
//! `llm_chat.json`.
//!
//! The export needs no provider. Options (GEN's `--options` file):
//! `system_prompt` (default: the agent's default), as given to the agent
//! that generated the data with `--system-prompt`.

use std::process::ExitCode;

use magma_server::cli::ExportArgs;
use magma_server::magma_protocol::export::{ExportExample, ExportRecord, ExportResult};
use magma_server::{
    Agent, AgentDecision, AgentInfo, AgentInput, Candidate, Exporter, Json, Object, Rejection, json,
};

use crate::agent::{Prompt, Settings, identity};

/// Renders examples with the agent's prompt.
pub(crate) struct LlmExporter {
    system_prompt: String,
}

impl Exporter for LlmExporter {
    fn filenames(&self) -> Vec<(String, String)> {
        vec![("chat".to_owned(), "llm_chat.json".to_owned())]
    }

    fn export_example(&self, example: &ExportExample, options: &Object) -> ExportResult {
        let id = &example.example_id;
        let Some(decision) = example.candidate.decision() else {
            return ExportResult::skipped(id, "the candidate has no decision")
                .unwrap_or_else(|e| ExportResult::failed(id, e.to_string()));
        };
        let system_prompt = match options.get("system_prompt") {
            None => self.system_prompt.clone(),
            Some(Json::String(s)) => s.clone(),
            Some(_) => return ExportResult::failed(id, "options.system_prompt must be a string"),
        };
        let settings = Settings {
            model: String::new(),
            system_prompt,
            temperature: 0.0,
            max_tokens: None,
        };
        let data = chat(&example.input, &settings, decision);
        match ExportRecord::new(format!("{id}:chat"), "chat", data) {
            Ok(record) => ExportResult::exported(id, vec![record])
                .unwrap_or_else(|e| ExportResult::failed(id, e.to_string())),
            Err(e) => ExportResult::failed(id, e.to_string()),
        }
    }
}

/// `{"messages": [...prompt, assistant], "tools": [...]}`: the assistant's
/// tool calls as the provider would have returned them (arguments as a JSON
/// string holding `target_robot`).
fn chat(input: &AgentInput, settings: &Settings, decision: &AgentDecision) -> Object {
    let prompt = Prompt::new(input, settings);
    let payload = prompt.payload();
    let mut messages = payload
        .get("messages")
        .and_then(Json::as_array)
        .map(<[Json]>::to_vec)
        .unwrap_or_default();
    let calls: Vec<Json> = decision
        .tool_calls
        .iter()
        .enumerate()
        .map(|(i, call)| {
            let mut arguments = call.arguments.clone();
            arguments.insert("target_robot", Json::from(call.target_robot_name.as_str()));
            json!({
                "id": format!("call_{i}"),
                "type": "function",
                "function": {
                    "name": call.name.as_str(),
                    "arguments": Json::Object(arguments).to_json_string(),
                },
            })
        })
        .collect();
    let mut assistant = Object::new();
    assistant.insert("role", Json::from("assistant"));
    assistant.insert("content", Json::from(decision.say.as_str()));
    if !calls.is_empty() {
        assistant.insert("tool_calls", Json::Array(calls));
    }
    messages.push(Json::Object(assistant));
    let mut data = Object::new();
    data.insert("messages", Json::Array(messages));
    data.insert(
        "tools",
        payload
            .get("tools")
            .cloned()
            .unwrap_or_else(|| Json::Array(Vec::new())),
    );
    data
}

/// The agent as `llm-agent export` sees it: its identity and its exporter;
/// it never serves.
struct ExportOnly(LlmExporter);

impl Agent for ExportOnly {
    fn info(&self) -> AgentInfo {
        identity()
    }

    async fn respond(&self, _: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        Err(Rejection::new("llm-agent export does not serve"))
    }

    fn exporter(&self) -> Option<&dyn Exporter> {
        Some(&self.0)
    }
}

/// `llm-agent export ...`, if the process was started so.
pub(crate) fn invocation() -> Option<ExportArgs> {
    magma_server::cli::export_invocation(&identity())
}

/// Runs `llm-agent export` with the agent's default system prompt.
pub(crate) fn run(args: &ExportArgs, system_prompt: &str) -> ExitCode {
    let agent = ExportOnly(LlmExporter {
        system_prompt: system_prompt.to_owned(),
    });
    magma_server::cli::run_export(&agent, args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_example_renders_as_the_agents_prompt_and_its_decision() {
        let example = ExportExample::from_slice(
            br#"{"example_id": "2:5",
                 "input": {"id": 2, "instruction": {"type": "user", "content": "Fetch the cup."},
                           "tools": [{"name": "pick", "description": "Pick up.", "arguments": {"item": {"type": "str"}}}],
                           "attributes": {"known_robots": ["arm"]},
                           "memory": {"memory_list": ["Be careful."], "history": [{"author": "USER", "content": "Hi"}]}},
                 "candidate": {"id": 5, "parent_id": null, "stage_id": 0, "kind": "agent",
                               "response_status": "completed",
                               "output": {"say": "On it.", "tool_calls": [{"name": "pick", "arguments": {"item": "cup"}, "target_robot_name": "arm"}]},
                               "status": "finished", "execution_finished": true, "origin": "model"}}"#,
        )
        .unwrap();
        let exporter = LlmExporter {
            system_prompt: "SYSTEM PROMPT".to_owned(),
        };
        let result = exporter.export_example(&example, &Object::new());
        let data = result.records()[0].data();
        let messages = data.get("messages").and_then(Json::as_array).unwrap();
        let roles: Vec<&str> = messages
            .iter()
            .filter_map(|m| m.get("role").and_then(Json::as_str))
            .collect();
        assert_eq!(roles, ["system", "user", "user", "assistant"]);
        let system = messages[0].get("content").and_then(Json::as_str).unwrap();
        assert!(system.starts_with("SYSTEM PROMPT"), "{system}");
        assert!(system.contains("Be careful."), "{system}");
        let assistant = messages[3].to_json_string();
        assert!(assistant.contains(r#""content":"On it.""#), "{assistant}");
        // The arguments as the candidate wrote them, plus target_robot.
        assert!(
            assistant.contains(r#""arguments":"{\"item\": \"cup\",\"target_robot\":\"arm\"}""#),
            "{assistant}"
        );
        let tools = data.get("tools").unwrap().to_json_string();
        assert!(tools.contains(r#""name":"pick""#), "{tools}");
        // The options' system prompt wins.
        let mut options = Object::new();
        options.insert("system_prompt", Json::from("OTHER"));
        let result = exporter.export_example(&example, &options);
        let first = result.records()[0]
            .data()
            .get("messages")
            .unwrap()
            .to_json_string();
        assert!(first.contains(r#""content":"OTHER"#), "{first}");
    }
}
