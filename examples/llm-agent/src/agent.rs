//! The agent: a MAGMA input becomes a chat completions request, the model's
//! answer becomes candidates.
//!
//! - tools become function tools with a required `target_robot` argument,
//!   limited to `attributes.known_robots`;
//! - `memory.memory_list` becomes standing rules in the system message, and
//!   `memory.history` the conversation, appended as the reference agents do
//!   (`{"author": "USER"|"SYSTEM", "content"}`, then `{"author": "MODEL",
//!   "content": "{\"say\": ..., \"action\": ...}"}`);
//! - `extra_keys.inference_mode: true` asks for deterministic decoding
//!   (temperature 0, a fixed seed), otherwise sampling;
//! - provider failures become error candidates with stable codes, the input's
//!   memory and an `internal_steps` record of the prompt and the raw output;
//! - an input GEN re-injects with a coaching payload in
//!   `extra_keys.coaching` (`replace_decision` or `replace_say`) is answered
//!   with exactly that decision, without a model call; the coach that
//!   proposes them is in [`crate::coach`].

use std::sync::Arc;

use magma_server::magma_protocol::Number;
use magma_server::magma_protocol::coaching::{
    CoachingKind, SpecializedCoachingRequest, SpecializedCoachingResponse,
};
use magma_server::magma_protocol::tools::ToolDescription;
use magma_server::{
    Agent, AgentDecision, AgentError, AgentInfo, AgentInput, Candidate, CoachError,
    CoachingContext, InstructionType, Json, NonEmptyString, Object, Rejection, ToolCall, json,
};
use tokio::sync::{AcquireError, OwnedSemaphorePermit, Semaphore};

use crate::coach;

use crate::provider::{Exchange, Failure, Provider};

/// The `component` of error candidates and internal steps.
const COMPONENT: &str = "llm";
/// At most this much of a raw provider answer is kept in an internal step.
const MAX_RAW_IN_STEP: usize = 64 * 1024;

/// How prompts are made.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) model: String,
    pub(crate) system_prompt: String,
    pub(crate) temperature: f64,
    pub(crate) max_tokens: Option<u32>,
}

/// The agent. Provider calls run at most `slots` at once, across requests.
#[derive(Debug)]
pub(crate) struct LlmAgent {
    provider: Provider,
    settings: Settings,
    slots: Arc<Semaphore>,
}

impl LlmAgent {
    pub(crate) fn new(provider: Provider, settings: Settings, concurrency: usize) -> Self {
        LlmAgent {
            provider,
            settings,
            slots: Arc::new(Semaphore::new(concurrency.max(1))),
        }
    }

    pub(crate) fn provider(&self) -> &Provider {
        &self.provider
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// A provider-call slot (see [`LlmAgent::new`]).
    pub(crate) async fn slot(&self) -> Result<OwnedSemaphorePermit, AcquireError> {
        Arc::clone(&self.slots).acquire_owned().await
    }
}

/// The agent's identity, served on `/v1/info` and named by `llm-agent export`.
pub(crate) fn identity() -> AgentInfo {
    let mut info = AgentInfo::new("llm-agent", env!("CARGO_PKG_VERSION"));
    info.capabilities.insert("coaching", false);
    info.coaching_unavailable_reason = Some("llm-agent does not coach".to_owned());
    info
}

impl Agent for LlmAgent {
    fn info(&self) -> AgentInfo {
        identity()
    }

    fn coaching_kinds(&self) -> &[CoachingKind] {
        coach::KINDS
    }

    fn coaching_resume(&self) -> bool {
        true
    }

    async fn coach(
        &self,
        request: &SpecializedCoachingRequest,
        context: &CoachingContext,
    ) -> Result<SpecializedCoachingResponse, CoachError> {
        self.coach_request(request, context).await
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        check_input(input)?;
        if let Some(coached) = coach::reinjected(input) {
            return Ok(reinjected_candidates(input, coached));
        }
        let prompt = Prompt::new(input, &self.settings);
        let payload = Arc::new(prompt.payload.to_json_string());
        // Start every candidate's call (each waits for a slot), then collect
        // them in order.
        let mut calls = Vec::new();
        for _ in 0..input.num_outputs.get() {
            let permit = Arc::clone(&self.slots)
                .acquire_owned()
                .await
                .map_err(|_| Rejection::new("the agent is shutting down"))?;
            let (tx, rx) = tokio::sync::oneshot::channel();
            let provider = self.provider.clone();
            let payload = Arc::clone(&payload);
            std::thread::spawn(move || {
                let exchange = provider.complete(&payload);
                drop(permit);
                let _ = tx.send(exchange);
            });
            calls.push(rx);
        }
        let mut candidates = Vec::with_capacity(calls.len());
        for (k, call) in calls.into_iter().enumerate() {
            let exchange = call.await.unwrap_or_else(|_| Exchange {
                outcome: Err(Failure::new(
                    "internal_error",
                    "the provider call ended without an answer",
                )),
                attempts: 0,
                http_status: None,
                raw: String::new(),
            });
            candidates.push(prompt.candidate(
                input,
                k,
                &payload,
                exchange,
                self.provider.base_url(),
            ));
        }
        Ok(candidates)
    }
}

/// The candidates of a re-injected input: each exactly the payload's
/// decision, or an `invalid_output` error for an invalid payload.
fn reinjected_candidates(
    input: &AgentInput,
    coached: Result<AgentDecision, String>,
) -> Vec<Candidate> {
    (0..input.num_outputs.get())
        .map(|k| {
            let mut step = Object::new();
            step.insert("id", Json::from(format!("llm-{k}")));
            step.insert("component", Json::from(COMPONENT));
            step.insert("origin", Json::from("coaching"));
            step.insert(
                "input_elements",
                json!({"coaching": input.extra_keys.get("coaching").cloned().unwrap_or(Json::Null)}),
            );
            match &coached {
                Ok(decision) => Candidate::new(remembered(input, decision), decision.clone())
                    .with_step(step),
                Err(why) => Candidate::new(
                    input.memory.clone(),
                    AgentError::new("invalid_output", format!("invalid coaching payload: {why}"))
                        .with_component(COMPONENT),
                )
                .with_step(step),
            }
        })
        .collect()
}

/// Agent-specific checks, answered 422 as the reference agents do.
fn check_input(input: &AgentInput) -> Result<(), Rejection> {
    if let Some(history) = input.memory.get("history") {
        let ok = history
            .as_array()
            .is_some_and(|h| h.iter().all(|e| e.as_object().is_some()));
        if !ok {
            return Err(Rejection::new("memory.history must be a list of objects"));
        }
    }
    if let Some(rules) = input.memory.get("memory_list") {
        let ok = rules
            .as_array()
            .is_some_and(|r| r.iter().all(|e| e.as_str().is_some()));
        if !ok {
            return Err(Rejection::new(
                "memory.memory_list must be a list of strings",
            ));
        }
    }
    if let Some(mode) = input.extra_keys.get("inference_mode") {
        if mode.as_bool().is_none() {
            return Err(Rejection::new(
                "extra_keys.inference_mode must be a boolean",
            ));
        }
    }
    Ok(())
}

/// One input's prompt: the provider payload and what the answer may name.
pub(crate) struct Prompt {
    pub(crate) payload: Json,
    tools: Vec<String>,
    robots: Vec<String>,
}

impl Prompt {
    pub(crate) fn new(input: &AgentInput, settings: &Settings) -> Prompt {
        let robots: Vec<String> = input
            .known_robots()
            .into_iter()
            .map(str::to_owned)
            .collect();
        let mut tools = Vec::new();
        let mut function_tools = Vec::new();
        for tool in input.tool_descriptions() {
            // A tool that defines `target_robot` itself cannot be told apart
            // from the robot the call is for: it is not offered.
            if tool.parameters.iter().any(|p| p.name == "target_robot") {
                tracing::debug!(tool = %tool.name, "tool skipped: it defines target_robot");
                continue;
            }
            function_tools.push(function_tool(&tool, &robots));
            tools.push(tool.name);
        }

        let mut messages = vec![json!({
            "role": "system",
            "content": system_message(input, settings, &robots),
        })];
        if let Some(history) = input.memory.get("history").and_then(Json::as_array) {
            messages.extend(
                history
                    .iter()
                    .filter_map(Json::as_object)
                    .map(history_message),
            );
        }
        messages.push(json!({"role": "user", "content": instruction_text(input)}));

        let deterministic = input
            .extra_keys
            .get("inference_mode")
            .and_then(Json::as_bool)
            .unwrap_or(false);
        let mut payload = Object::new();
        payload.insert("model", Json::from(settings.model.as_str()));
        payload.insert("messages", Json::Array(messages));
        if !function_tools.is_empty() {
            payload.insert("tools", Json::Array(function_tools));
            payload.insert("tool_choice", Json::from("auto"));
        }
        if deterministic {
            payload.insert("temperature", Json::from(0));
            payload.insert("seed", Json::from(0));
        } else if let Some(t) = Number::from_f64(settings.temperature) {
            payload.insert("temperature", Json::Number(t));
        }
        if let Some(max) = settings.max_tokens {
            payload.insert("max_tokens", Json::from(max));
        }
        Prompt {
            payload: Json::Object(payload),
            tools,
            robots,
        }
    }

    /// The provider payload (`model`, `messages`, `tools`, ...).
    pub(crate) fn payload(&self) -> &Json {
        &self.payload
    }

    /// Candidate `k` from its provider exchange.
    fn candidate(
        &self,
        input: &AgentInput,
        k: usize,
        payload: &str,
        exchange: Exchange,
        provider_url: &str,
    ) -> Candidate {
        let decision = exchange
            .outcome
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|body| self.decision(body));
        let mut step = Object::new();
        step.insert("id", Json::from(format!("llm-{k}")));
        step.insert("component", Json::from(COMPONENT));
        step.insert("origin", Json::from("model"));
        step.insert("full_prompt", Json::from(payload));
        step.insert("output_raw", Json::from(capped(&exchange.raw)));
        step.insert("attempts", Json::from(exchange.attempts));
        step.insert(
            "http_status",
            exchange.http_status.map_or(Json::Null, Json::from),
        );
        match decision {
            Ok(decision) => {
                let memory = remembered(input, &decision);
                Candidate::new(memory, decision).with_step(step)
            }
            Err(failure) => {
                step.insert(
                    "error",
                    json!({"code": failure.code, "message": failure.message.as_str()}),
                );
                // The operator reads this in magma-server's error-candidate warning:
                // name the provider.
                let url = provider_url;
                let message = if failure.message.contains(url) {
                    failure.message
                } else {
                    format!("{} (provider {url})", failure.message)
                };
                let error = AgentError::new(failure.code, message).with_component(COMPONENT);
                Candidate::new(input.memory.clone(), error).with_step(step)
            }
        }
    }

    /// The decision in a chat completions answer: text becomes `say`, tool
    /// calls become [`ToolCall`]s on the robot of their `target_robot`.
    pub(crate) fn decision(&self, body: &str) -> Result<AgentDecision, Failure> {
        let invalid = |why: &str| Failure::new("invalid_response", why.to_owned());
        let answer = Json::from_slice(body.as_bytes())
            .map_err(|e| invalid(&format!("the provider's answer is not JSON: {e}")))?;
        let message = answer
            .get("choices")
            .and_then(Json::as_array)
            .and_then(<[Json]>::first)
            .and_then(|choice| choice.get("message"))
            .and_then(Json::as_object)
            .ok_or_else(|| invalid("the provider's answer has no choices[0].message"))?;
        let say = message_text(message.get("content")).trim().to_owned();
        let mut tool_calls = Vec::new();
        if let Some(calls) = message.get("tool_calls") {
            let calls = calls
                .as_array()
                .ok_or_else(|| invalid("tool_calls is not a list"))?;
            for (i, call) in calls.iter().enumerate() {
                tool_calls.push(self.tool_call(call).map_err(|why| {
                    Failure::new("invalid_output", format!("tool call {i}: {why}"))
                })?);
            }
        }
        if say.is_empty() && tool_calls.is_empty() {
            let finish = answer
                .get("choices")
                .and_then(Json::as_array)
                .and_then(<[Json]>::first)
                .and_then(|c| c.get("finish_reason"))
                .and_then(Json::as_str)
                .unwrap_or("none");
            return Err(Failure::new(
                "invalid_output",
                format!("the model gave neither text nor a tool call (finish_reason: {finish})"),
            ));
        }
        Ok(AgentDecision { say, tool_calls })
    }

    fn tool_call(&self, call: &Json) -> Result<ToolCall, String> {
        let function = call
            .get("function")
            .and_then(Json::as_object)
            .ok_or("no function")?;
        let name = function
            .get("name")
            .and_then(Json::as_str)
            .ok_or("no function name")?;
        if !self.tools.iter().any(|t| t == name) {
            return Err(format!("{name:?} is not one of the input's tools"));
        }
        let mut arguments = match function.get("arguments") {
            None | Some(Json::Null) => Object::new(),
            Some(Json::Object(o)) => o.clone(),
            Some(Json::String(text)) if text.trim().is_empty() => Object::new(),
            Some(Json::String(text)) => match Json::from_slice(text.as_bytes()) {
                Ok(Json::Object(o)) => o,
                Ok(other) => {
                    return Err(format!(
                        "{name}: arguments are {}, not an object",
                        other.type_name()
                    ));
                }
                Err(e) => return Err(format!("{name}: arguments are not JSON: {e}")),
            },
            Some(other) => return Err(format!("{name}: arguments are {}", other.type_name())),
        };
        let robot = match arguments.remove("target_robot") {
            Some(Json::String(robot)) if !robot.is_empty() => robot,
            _ => return Err(format!("{name}: no target_robot")),
        };
        if !self.robots.is_empty() && !self.robots.contains(&robot) {
            return Err(format!(
                "{name}: target_robot {robot:?} is not among the known robots {:?}",
                self.robots
            ));
        }
        Ok(ToolCall {
            name: NonEmptyString::new(name).ok_or("empty function name")?,
            arguments,
            target_robot_name: NonEmptyString::new(robot).ok_or("empty target_robot")?,
        })
    }
}

/// An OpenAI function tool for `tool`, with a required `target_robot`
/// string argument (one of `robots` when there are any).
fn function_tool(tool: &ToolDescription, robots: &[String]) -> Json {
    let mut function_tool = tool.to_function_tool();
    let parameters = function_tool
        .as_object_mut()
        .and_then(|t| t.get_mut("function"))
        .and_then(Json::as_object_mut)
        .and_then(|f| f.get_mut("parameters"))
        .and_then(Json::as_object_mut);
    if let Some(parameters) = parameters {
        let mut target = Object::new();
        target.insert("type", Json::from("string"));
        target.insert("description", Json::from("The robot that runs this tool."));
        if !robots.is_empty() {
            let names = robots.iter().map(|r| Json::from(r.as_str())).collect();
            target.insert("enum", Json::Array(names));
        }
        if !matches!(parameters.get("properties"), Some(Json::Object(_))) {
            parameters.insert("properties", Json::Object(Object::new()));
        }
        if let Some(Json::Object(properties)) = parameters.get_mut("properties") {
            properties.insert("target_robot", Json::Object(target));
        }
        if !matches!(parameters.get("required"), Some(Json::Array(_))) {
            parameters.insert("required", Json::Array(Vec::new()));
        }
        if let Some(Json::Array(required)) = parameters.get_mut("required") {
            required.push(Json::from("target_robot"));
        }
    }
    function_tool
}

/// The system message: the operator's prompt, the robots and their
/// statuses, and the scenario's standing rules (`memory.memory_list`).
fn system_message(input: &AgentInput, settings: &Settings, robots: &[String]) -> String {
    let mut text = settings.system_prompt.clone();
    if !robots.is_empty() {
        text.push_str("\n\nRobots: ");
        text.push_str(&robots.join(", "));
        text.push('.');
    }
    if let Some(Json::Object(statuses)) = input.attributes.get("robot_statuses") {
        text.push_str("\nRobot statuses:");
        for (robot, status) in statuses.iter() {
            let status = status
                .as_str()
                .map_or_else(|| status.to_json_string(), str::to_owned);
            text.push_str(&format!("\n- {robot}: {status}"));
        }
    }
    let rules: Vec<&str> = input
        .memory_list()
        .unwrap_or_default()
        .iter()
        .filter_map(Json::as_str)
        .collect();
    if !rules.is_empty() {
        text.push_str("\n\nStanding rules (always follow them):");
        for rule in rules {
            text.push_str("\n- ");
            text.push_str(rule);
        }
    }
    text
}

/// The current instruction as the user message.
fn instruction_text(input: &AgentInput) -> String {
    match input.instruction.kind {
        InstructionType::Env => format!("Environment feedback: {}", input.instruction.content),
        _ => input.instruction.content.clone(),
    }
}

/// One `memory.history` entry as a chat message.
fn history_message(entry: &Object) -> Json {
    let content = match entry.get("content") {
        Some(Json::String(s)) => s.clone(),
        Some(other) => other.to_json_string(),
        None => String::new(),
    };
    match entry.get("author").and_then(Json::as_str) {
        Some("MODEL") => json!({"role": "assistant", "content": content}),
        Some("SYSTEM") => {
            json!({"role": "user", "content": format!("Environment feedback: {content}")})
        }
        _ => json!({"role": "user", "content": content}),
    }
}

/// The text of a message's `content`: a string, or the text parts of a
/// list of parts.
fn message_text(content: Option<&Json>) -> String {
    match content {
        Some(Json::String(s)) => s.clone(),
        Some(Json::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Json::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// The new memory of a completed candidate: the input's, every key kept,
/// with two entries appended to `history`.
fn remembered(input: &AgentInput, decision: &AgentDecision) -> Object {
    let mut memory = input.memory.clone();
    let mut history = match memory.get("history") {
        Some(Json::Array(h)) => h.clone(),
        _ => Vec::new(),
    };
    let author = match input.instruction.kind {
        InstructionType::Env => "SYSTEM",
        _ => "USER",
    };
    history.push(json!({"author": author, "content": input.instruction.content.as_str()}));
    let said = json!({"say": decision.say.as_str(), "action": action(&decision.tool_calls)});
    history.push(json!({"author": "MODEL", "content": said.to_json_string()}));
    memory.insert("history", Json::Array(history));
    memory
}

/// `{robot: {"name", "arguments"}}`, or a list of single-robot maps when a
/// robot has several calls (as the reference agents record it).
fn action(calls: &[ToolCall]) -> Json {
    let one = |c: &ToolCall| json!({"name": c.name.as_str(), "arguments": c.arguments.clone()});
    let mut by_robot = Object::new();
    for call in calls {
        if by_robot.contains_key(call.target_robot_name.as_str()) {
            let list = calls
                .iter()
                .map(|c| {
                    let mut single = Object::new();
                    single.insert(c.target_robot_name.as_str(), one(c));
                    Json::Object(single)
                })
                .collect();
            return Json::Array(list);
        }
        by_robot.insert(call.target_robot_name.as_str(), one(call));
    }
    Json::Object(by_robot)
}

fn capped(raw: &str) -> String {
    if raw.len() <= MAX_RAW_IN_STEP {
        return raw.to_owned();
    }
    let mut cut = MAX_RAW_IN_STEP;
    while !raw.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}... ({} bytes in all)", &raw[..cut], raw.len())
}
