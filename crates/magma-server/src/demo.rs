//! The deterministic demo agent the `magma-server` binary serves.

use std::time::Duration;

use magma_protocol::coaching::{
    CoachingKind, CoachingPayload, CoachingProposal, SpecializedCoachingRequest,
    SpecializedCoachingResponse,
};
use magma_protocol::{
    AgentDecision, AgentError, AgentInfo, AgentInput, AgentRequest, Candidate, InstructionType,
    Json, NonEmptyString, Object, ToolCall,
};

use crate::RequestContext;
use crate::agent::{Agent, Rejection};
use crate::coaching::{CoachError, CoachingContext};

/// A deterministic agent for trying clients, proxies and deployments without
/// a model.
///
/// For each input, candidate 0 is:
///
/// - a `user` instruction is answered `say: "echo: <content>"`;
/// - an `env` instruction, when the input has tools and
///   `attributes.known_robots` is a non-empty list of names, is answered with
///   a call of the first tool (its `name`, or `function.name` for
///   OpenAI-shaped tools) on the first robot, with arguments `{}`; otherwise
///   like a `user` instruction;
/// - the memory returned is the input memory, every key kept exactly and in
///   order, plus an integer `steps` counter (added as `1`, then incremented);
/// - content `__error__` gives an `error` candidate (code `demo_error`)
///   whose memory is the input memory unchanged;
/// - `extra_keys.delay_ms` (an integer from 0 to
///   [`MAX_DELAY_MS`](DemoAgent::MAX_DELAY_MS)) waits that long first, as a
///   slow model would, without blocking a thread.
///
/// The other candidates behave like a sampling model's. With
/// `extra_keys.inference_mode: true` (BENCH's deterministic decoding), and
/// for error and coached answers, every candidate is candidate 0. Otherwise
/// (GEN's branches) candidate `k` (from 1) is another branch, with
/// candidate 0's memory: `say: "echo: <content> (branch k)"`, or for an
/// `env` instruction with tools and known robots a call of the `k`-th
/// (tool, robot) pair, tools varying first (pair 0 being candidate 0's
/// call). The answer depends on the request alone: the same request is
/// answered the same, whatever came before or runs beside it.
///
/// A `delay_ms` or `memory.steps` of the wrong type or range is rejected
/// with `422 {"detail": "..."}`, which shows an agent-specific rejection.
/// So is a request whose answer (each candidate repeats the input's memory
/// and content) would be larger than the server's response limit
/// ([`RequestContext::max_response_bytes`]): the demo refuses before it
/// builds any candidate, instead of building an answer the server would
/// replace by a `500`.
///
/// Under the real programs (`cargo xtask e2e`, the repository's
/// `docs/e2e.md`), BENCH's episodes end `textual_hallucination`: BENCH's
/// first input is the `user` instruction, which the demo echoes, so its
/// tool-call path is never reached. GEN without coaching saves a graph of
/// echo answers.
///
/// # Coaching
///
/// Unless built [`without_coaching`](DemoAgent::without_coaching), the demo
/// agent takes part in GEN's repair loop and advertises it in `/v1/info`
/// (`specialized_coaching: ["failure", "suboptimal", "format"]`,
/// `coaching_resume: true`, `capabilities.coaching: true`):
///
/// - **`coaching_resume`**: an input whose `extra_keys.coaching` is
///   `{"kind": "replace_say", "text": T}` is answered `say: T`, and one
///   whose payload is `{"kind": "replace_decision", "decision": D}` is
///   answered with exactly `D` (its say or its tool calls), without looking
///   at the instruction; memory as above. Any other payload (another kind,
///   or one that does not read, such as the wrapped `{"coaching": {...}}`)
///   gives an `error` candidate with code `invalid_output`, the reason as
///   message and the input memory unchanged.
/// - **the coach** (`POST /v1/coaching`) answers `corrected` with one
///   proposal per reinjection point, whose `extra_keys` is the payload
///   itself (GEN re-injects it as `extra_keys.coaching`, see
///   [`CoachingProposal`]): for `format`, `{"kind": "replace_decision",
///   "decision": D}` with `D` the demo's own well-formed answer to the
///   point's input (as above: a tool call for an `env` input with tools and
///   robots, else `echo: <content>`); for `failure` and `suboptimal`,
///   `{"kind": "replace_say", "text": T}` with `T` the diagnosis'
///   `expected_decision`, else the stage's `hint`. Without either it answers
///   `abandoned` with the reason. Re-injected, every proposal is answered
///   with exactly the decision it asks for (the `coaching_resume` rule above).
///   `additional_info.delay_ms` (0 to [`MAX_DELAY_MS`](DemoAgent::MAX_DELAY_MS))
///   waits first, as a slow coach would; another value answers
///   `status: "error"`. Each answer records one log (`# Demo coach ...`),
///   returned when the session has `capture_logs: true`.
///
/// What this gives in the real programs: BENCH ends an episode whose stage
/// needs an action `textual_hallucination` (the demo echoes the user), and a
/// `failure` repair that only says is rejected again by GEN on such a stage;
/// `format` repairs re-inject the demo's own answer. The demo shows the
/// wire, not a policy.
#[derive(Debug, Clone)]
pub struct DemoAgent {
    info: AgentInfo,
    coaching: bool,
}

impl DemoAgent {
    /// Longest accepted `extra_keys.delay_ms`: 60 000 ms.
    pub const MAX_DELAY_MS: u64 = 60_000;

    /// The demo agent, `agent_id` `magma-demo-agent`, `agent_version` this
    /// crate's version.
    /// With coaching (see [Coaching](DemoAgent#coaching)).
    pub fn new() -> Self {
        DemoAgent {
            info: AgentInfo::new("magma-demo-agent", env!("CARGO_PKG_VERSION")),
            coaching: true,
        }
    }

    /// The same agent without coaching: `/v1/info` advertises none,
    /// `extra_keys.coaching` is ignored like any other extra key, and
    /// `POST /v1/coaching` answers `503`.
    pub fn without_coaching(mut self) -> Self {
        self.coaching = false;
        self
    }
}

/// The kinds the demo coach handles.
const KINDS: &[CoachingKind] = &[
    CoachingKind::Failure,
    CoachingKind::Suboptimal,
    CoachingKind::Format,
];

impl Default for DemoAgent {
    fn default() -> Self {
        DemoAgent::new()
    }
}

impl Agent for DemoAgent {
    fn info(&self) -> AgentInfo {
        self.info.clone()
    }

    fn exporter(&self) -> Option<&dyn crate::Exporter> {
        Some(&DemoExporter)
    }

    async fn respond(&self, input: &AgentInput) -> Result<Vec<Candidate>, Rejection> {
        fits(std::slice::from_ref(input))?;
        let (delay, steps) = checked(input)?;
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        Ok(answer(input, steps, self.coaching))
    }

    /// Every input at once: the inputs are checked first (the first
    /// rejection in input order wins), then the request waits for its
    /// longest `delay_ms`, as the inputs would waiting side by side, and is
    /// answered. The same answers as the default, without a future per input.
    async fn respond_batch(
        &self,
        request: &AgentRequest,
    ) -> Result<Vec<Vec<Candidate>>, Rejection> {
        fits(request.inputs())?;
        let mut longest = 0;
        let mut steps = Vec::with_capacity(request.inputs().len());
        for input in request.inputs() {
            let (delay, s) = checked(input)?;
            longest = longest.max(delay);
            steps.push(s);
        }
        if longest > 0 {
            tokio::time::sleep(Duration::from_millis(longest)).await;
        }
        Ok(request
            .inputs()
            .iter()
            .zip(steps)
            .map(|(input, steps)| answer(input, steps, self.coaching))
            .collect())
    }

    fn coaching_kinds(&self) -> &[CoachingKind] {
        match self.coaching {
            true => KINDS,
            false => &[],
        }
    }

    fn coaching_resume(&self) -> bool {
        self.coaching
    }

    async fn coach(
        &self,
        request: &SpecializedCoachingRequest,
        context: &CoachingContext,
    ) -> Result<SpecializedCoachingResponse, CoachError> {
        let delay = match request.additional_info().get("delay_ms") {
            None => 0,
            Some(v) => v
                .as_number()
                .and_then(|n| n.as_u64())
                .filter(|d| *d <= DemoAgent::MAX_DELAY_MS)
                .ok_or_else(|| {
                    format!(
                        "additional_info.delay_ms must be an integer from 0 to {}",
                        DemoAgent::MAX_DELAY_MS
                    )
                })?,
        };
        if delay > 0 {
            tokio::time::sleep(Duration::from_millis(delay)).await;
        }
        let response = demo_coach(request)?;
        context.log(format!(
            "# Demo coach\n\nKind: {}\nTarget step: {}\nStatus: {}\n",
            request.kind().as_str(),
            request.target_step_id(),
            response.status().as_str()
        ));
        Ok(response)
    }
}

/// The demo coach's answer to `request` (see [`DemoAgent`]).
fn demo_coach(
    request: &SpecializedCoachingRequest,
) -> Result<SpecializedCoachingResponse, CoachError> {
    let id = request.request_id();
    let text = match request.kind() {
        CoachingKind::Format => None,
        _ => {
            let expected = request
                .diagnosis()
                .and_then(|d| d.expected_decision.as_deref())
                .filter(|t| !t.is_empty());
            let hint = request.stage().hint.as_deref().filter(|t| !t.is_empty());
            match expected.or(hint) {
                Some(text) => Some(text.to_owned()),
                None => {
                    let reason = format!(
                        "the demo coach needs a diagnosis with an expected decision or a stage \
                         hint to correct a `{}` step",
                        request.kind().as_str()
                    );
                    return Ok(SpecializedCoachingResponse::abandoned(id, reason)?);
                }
            }
        }
    };
    let mut proposals = Vec::with_capacity(request.reinjection_points().len());
    for point in request.reinjection_points() {
        let payload = match &text {
            Some(text) => CoachingPayload::replace_say(text.as_str())?,
            None => match request.point_input(point) {
                Some(input) => CoachingPayload::replace_decision(decide(input))?,
                None => {
                    let reason =
                        format!("reinjection point `{}` has no input to answer", point.id());
                    return Ok(SpecializedCoachingResponse::abandoned(id, reason)?);
                }
            },
        };
        proposals.push(CoachingProposal::new(point.id(), payload));
    }
    if proposals.is_empty() {
        let reason = "the request has no reinjection point to propose a correction for";
        return Ok(SpecializedCoachingResponse::abandoned(id, reason)?);
    }
    Ok(SpecializedCoachingResponse::corrected(id, proposals)?)
}

/// The decision an `extra_keys.coaching` payload asks for, or the error
/// candidate's error for an invalid one.
fn coached(payload: &Json) -> Result<AgentDecision, AgentError> {
    match CoachingPayload::from_json(payload) {
        Ok(CoachingPayload::ReplaceSay(say)) => Ok(AgentDecision::say(say.text.as_str())),
        Ok(CoachingPayload::ReplaceDecision(decision)) => Ok(decision),
        // An agent's own kind (the demo has none), or one this crate does
        // not know yet.
        Ok(other) => Err(AgentError::new(
            "invalid_output",
            format!(
                "the demo agent takes replace_say and replace_decision payloads, not `{}`",
                other.kind()
            ),
        )
        .with_component("demo")),
        Err(e) => Err(AgentError::new("invalid_output", e.to_string()).with_component("demo")),
    }
}

/// About how long the demo's answer to `inputs` is: per candidate, the
/// memory, the echoed content and the fixed fields.
fn answer_bytes(inputs: &[AgentInput]) -> u128 {
    inputs
        .iter()
        .map(|i| {
            let each = i.memory.json_len_hint() + i.instruction.content.len() + 200;
            u128::from(i.num_outputs.get()) * each as u128
        })
        .sum()
}

/// A rejection when the answer to `inputs` would pass the response limit
/// of the server this inference runs in.
fn fits(inputs: &[AgentInput]) -> Result<(), Rejection> {
    let Some(limit) = RequestContext::current().and_then(|c| c.max_response_bytes()) else {
        return Ok(());
    };
    let bytes = answer_bytes(inputs);
    if bytes <= u128::from(limit) {
        return Ok(());
    }
    Err(Rejection::new(format!(
        "The demo agent's answer would be about {bytes} bytes (every candidate repeats the \
         input's memory and content), more than this server's response limit of {limit} \
         bytes: ask for fewer candidates or send less"
    )))
}

/// `extra_keys.delay_ms` and `memory.steps` of `input`, or the rejection.
fn checked(input: &AgentInput) -> Result<(u64, u64), Rejection> {
    Ok((delay_ms(&input.extra_keys)?, steps(&input.memory)?))
}

/// The candidates for `input`, whose memory counts `steps` so far.
fn answer(input: &AgentInput, steps: u64, resume: bool) -> Vec<Candidate> {
    let n = input.num_outputs.get();
    let content = &input.instruction.content;
    let payload = resume.then(|| input.extra_keys.get("coaching")).flatten();
    let candidate = if let Some(payload) = payload {
        match coached(payload) {
            Ok(decision) => {
                let mut memory = input.memory.clone();
                memory.insert("steps", Json::from(steps + 1));
                Candidate::new(memory, decision)
            }
            Err(error) => Candidate::new(input.memory.clone(), error),
        }
    } else if content == "__error__" {
        let error = AgentError::new("demo_error", "the instruction asked for an error")
            .with_component("demo");
        Candidate::new(input.memory.clone(), error)
    } else {
        let mut memory = input.memory.clone();
        memory.insert("steps", Json::from(steps + 1));
        Candidate::new(memory, decide(input))
    };
    // `n` is at most the server's max_candidates.
    let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(1));
    let sampling = payload.is_none() && content != "__error__" && !inference_mode(input);
    if sampling && n > 1 {
        // Candidates 1.. are other branches, with candidate 0's memory.
        out.extend((1..n).map(|k| Candidate::new(candidate.memory.clone(), branch(input, k))));
        out.insert(0, candidate);
        return out;
    }
    // Every candidate the same; the last takes the original, not a copy.
    out.extend((1..n).map(|_| candidate.clone()));
    out.push(candidate);
    out
}

/// `extra_keys.inference_mode` is `true` (BENCH's deterministic decoding).
fn inference_mode(input: &AgentInput) -> bool {
    matches!(
        input.extra_keys.get("inference_mode"),
        Some(Json::Bool(true))
    )
}

/// Branch `k` (1 or more) of a sampling answer: a `user` instruction (or
/// an `env` one the demo cannot act on) says `echo: <content> (branch k)`;
/// an `env` instruction with tools and known robots calls the `k`-th pair
/// of (tool, robot), tools varying first, counting candidate 0's pair
/// (the first tool on the first robot) as pair 0.
fn branch(input: &AgentInput, k: u64) -> AgentDecision {
    let echo = || AgentDecision::say(format!("echo: {} (branch {k})", input.instruction.content));
    if input.instruction.kind != InstructionType::Env {
        return echo();
    }
    let robots: Vec<NonEmptyString> = match input.attributes.get("known_robots") {
        Some(Json::Array(robots)) => robots
            .iter()
            .map_while(|r| r.as_str().and_then(NonEmptyString::new))
            .collect(),
        _ => Vec::new(),
    };
    let tools: Vec<NonEmptyString> = input.tools.iter().map_while(tool_name).collect();
    if robots.is_empty() || tools.is_empty() {
        return echo();
    }
    let pairs = (tools.len() * robots.len()) as u64;
    let pair = usize::try_from(k % pairs).unwrap_or(0);
    AgentDecision::call(vec![ToolCall {
        name: tools[pair % tools.len()].clone(),
        arguments: Object::new(),
        target_robot_name: robots[pair / tools.len()].clone(),
    }])
}

fn decide(input: &AgentInput) -> AgentDecision {
    // Two copies into a buffer of the right size: `format!` would run its
    // formatting machinery for them.
    let echo = || {
        let content = input.instruction.content.as_str();
        let mut say = String::with_capacity("echo: ".len() + content.len());
        say.push_str("echo: ");
        say.push_str(content);
        AgentDecision::say(say)
    };
    if input.instruction.kind != InstructionType::Env {
        return echo();
    }
    // The first robot's name, read in place: neither the list nor the
    // name is built before the one copy the call keeps.
    let robot = input
        .attributes
        .get_str_item("known_robots", 0)
        .and_then(|name| NonEmptyString::try_from(name).ok());
    let tool = input.tools.first().and_then(tool_name);
    match (tool, robot) {
        (Some(name), Some(target_robot_name)) => AgentDecision::call(vec![ToolCall {
            name,
            arguments: Object::new(),
            target_robot_name,
        }]),
        _ => echo(),
    }
}

/// `name`, or `function.name` for `{"type": "function", "function": {...}}`.
fn tool_name(tool: &Object) -> Option<NonEmptyString> {
    let direct = tool.get_str("name");
    let nested = || {
        tool.get("function")
            .and_then(Json::as_object)
            .and_then(|f| f.get_str("name"))
    };
    direct
        .or_else(nested)
        .and_then(|name| NonEmptyString::try_from(name).ok())
}

fn delay_ms(extra_keys: &Object) -> Result<u64, Rejection> {
    match extra_keys.get("delay_ms") {
        None => Ok(0),
        Some(v) => v
            .as_number()
            .and_then(|n| n.as_u64())
            .filter(|d| *d <= DemoAgent::MAX_DELAY_MS)
            .ok_or_else(|| {
                Rejection::new(format!(
                    "extra_keys.delay_ms must be an integer from 0 to {}",
                    DemoAgent::MAX_DELAY_MS
                ))
            }),
    }
}

fn steps(memory: &Object) -> Result<u64, Rejection> {
    let bad = || Rejection::new("memory.steps must be a non-negative integer below 2^64 - 1");
    match memory.get("steps") {
        None => Ok(0),
        Some(v) => v
            .as_number()
            .and_then(|n| n.as_u64())
            .filter(|s| *s < u64::MAX)
            .ok_or_else(bad),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use magma_protocol::{AgentInstruction, Outcome, json};

    fn obj(v: Json) -> Object {
        match v {
            Json::Object(o) => o,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn tool_names_in_both_shapes() {
        assert_eq!(tool_name(&obj(json!({"name": "press"}))).unwrap(), "press");
        let openai = obj(json!({"type": "function", "function": {"name": "grab"}}));
        assert_eq!(tool_name(&openai).unwrap(), "grab");
        assert!(tool_name(&obj(json!({"name": ""}))).is_none());
        assert!(tool_name(&obj(json!({"description": "x"}))).is_none());
    }

    #[tokio::test]
    async fn env_without_robots_falls_back_to_echo() {
        let mut input = AgentInput::new(0, AgentInstruction::env("{}"));
        input.tools = vec![obj(json!({"name": "press"}))];
        let out = DemoAgent::new().respond(&input).await.unwrap();
        assert_eq!(
            out[0].outcome,
            Outcome::Completed(AgentDecision::say("echo: {}"))
        );
    }

    /// The batch path answers what the per-input path answers, rejects
    /// with the first bad input, and waits for the longest delay only.
    #[tokio::test(start_paused = true)]
    async fn batches_answer_as_single_inputs_do() {
        let body = r#"{"request_id": "r", "inputs": [
            {"id": 0, "instruction": {"type": "env", "content": "{}"},
             "tools": [{"name": "press", "arguments": {}}],
             "attributes": {"objects": ["a"], "known_robots": ["panda", "ur5e"]},
             "memory": {"steps": 2, "note": "x\ny"}, "extra_keys": {"delay_ms": 40}},
            {"id": 1, "instruction": {"type": "user", "content": "hi"}, "num_outputs": 3,
             "extra_keys": {"delay_ms": 25}},
            {"id": 2, "instruction": {"type": "user", "content": "__error__"},
             "memory": {}}
        ]}"#;
        let request = AgentRequest::from_slice(body.as_bytes()).unwrap();
        let agent = DemoAgent::new();
        let start = tokio::time::Instant::now();
        let batch = agent.respond_batch(&request).await.unwrap();
        assert_eq!(start.elapsed(), Duration::from_millis(40));
        let mut single = Vec::new();
        for input in request.inputs() {
            single.push(agent.respond(input).await.unwrap());
        }
        assert_eq!(batch, single);
        assert_eq!(batch.iter().map(Vec::len).collect::<Vec<_>>(), [1, 3, 1]);
        let call = AgentDecision::call(vec![ToolCall {
            name: NonEmptyString::new("press").unwrap(),
            arguments: Object::new(),
            target_robot_name: NonEmptyString::new("panda").unwrap(),
        }]);
        assert_eq!(batch[0][0].outcome, Outcome::Completed(call));
        assert_eq!(batch[0][0].memory.get("steps"), Some(&Json::from(3u64)));

        let bad = body
            .replace(r#""delay_ms": 25"#, r#""delay_ms": -1"#)
            .replace(r#""memory": {}"#, r#""memory": {"steps": "x"}"#);
        let request = AgentRequest::from_slice(bad.as_bytes()).unwrap();
        let start = tokio::time::Instant::now();
        let err = agent.respond_batch(&request).await.unwrap_err();
        assert!(err.detail().contains("delay_ms"), "{}", err.detail());
        assert_eq!(start.elapsed(), Duration::ZERO, "rejected before any wait");
    }

    /// Branches differ when sampling; with inference_mode every candidate
    /// is candidate 0, which is the same in both modes.
    #[tokio::test]
    async fn candidates_sample_unless_inference_mode() {
        let agent = DemoAgent::new();
        let mut env = AgentInput::new(0, AgentInstruction::env("{}"));
        env.tools = vec![obj(json!({"name": "press"})), obj(json!({"name": "go"}))];
        env.attributes = obj(json!({"known_robots": ["panda", "rover"]}));
        env.num_outputs = std::num::NonZeroU64::new(4).unwrap(); // 2 tools x 2 robots
        let mut user = AgentInput::new(1, AgentInstruction::user("hi"));
        user.num_outputs = std::num::NonZeroU64::new(3).unwrap();
        for input in [env, user] {
            let sampled = agent.respond(&input).await.unwrap();
            let mut deterministic = input.clone();
            deterministic
                .extra_keys
                .insert("inference_mode", Json::Bool(true));
            let same = agent.respond(&deterministic).await.unwrap();
            assert_eq!(sampled[0], same[0]);
            assert!(same.iter().all(|c| *c == same[0]));
            assert!(sampled.iter().all(|c| c.memory == sampled[0].memory));
            for (i, a) in sampled.iter().enumerate() {
                for b in &sampled[i + 1..] {
                    assert_ne!(a.outcome, b.outcome, "{sampled:?}");
                }
            }
            assert_eq!(agent.respond(&input).await.unwrap(), sampled);
        }
        let user = agent
            .respond(&{
                let mut i = AgentInput::new(0, AgentInstruction::user("hi"));
                i.num_outputs = std::num::NonZeroU64::new(2).unwrap();
                i
            })
            .await
            .unwrap();
        assert_eq!(
            user[1].outcome,
            Outcome::Completed(AgentDecision::say("echo: hi (branch 1)"))
        );
    }

    #[test]
    fn bad_delays_and_steps_are_rejected() {
        assert_eq!(delay_ms(&obj(json!({}))).unwrap(), 0);
        assert_eq!(delay_ms(&obj(json!({"delay_ms": 60000}))).unwrap(), 60_000);
        for bad in [
            json!({"delay_ms": 60001}),
            json!({"delay_ms": (-1)}),
            json!({"delay_ms": 1.5}),
        ] {
            assert!(delay_ms(&obj(bad)).is_err());
        }
        assert_eq!(steps(&obj(json!({"steps": 4}))).unwrap(), 4);
        assert!(steps(&obj(json!({"steps": "4"}))).is_err());
        assert!(steps(&obj(json!({"steps": 18446744073709551615u64}))).is_err());
    }
}

// ---------------------------------------------------------------------------
// Dataset export

/// The demo agent's dataset exporter, run by `magma-server export` (see
/// [`Exporter`](crate::Exporter)). Each example with a decision gives:
///
/// - one record in dataset `chat` (file `chat.json`): `{"example_id",
///   "messages", "tools"}` where `messages` is a system message made of the
///   input's `memory.memory_list` strings (one per line; omitted when there
///   are none), the instruction as a `user` message (`env` instructions are
///   prefixed `[env] `), and the decision as the `assistant` message: its
///   `say` as `content` and its tool calls as `tool_calls` (`{"name",
///   "target_robot_name", "arguments"}`); `tools` are the input's tools;
/// - one record in dataset `internal_steps` (file `internal_steps.json`)
///   per record of the candidate's `internal_steps` that has the
///   [`InternalStep`](magma_protocol::InternalStep) shape: `{"example_id",
///   "component", "origin", "prompt", "completion"}`; records of another
///   shape are left out.
///
/// An example without a decision is `skipped`. For tests of the export
/// path, an instruction content of `__export_panic__` makes the exporter
/// panic and one of `__export_abort__` makes the process abort; both are
/// reported by the caller as an `error` result for that example.
#[derive(Debug, Clone, Copy, Default)]
pub struct DemoExporter;

impl crate::Exporter for DemoExporter {
    fn filenames(&self) -> Vec<(String, String)> {
        vec![
            ("chat".to_owned(), "chat.json".to_owned()),
            (
                "internal_steps".to_owned(),
                "internal_steps.json".to_owned(),
            ),
        ]
    }

    fn export_example(
        &self,
        example: &magma_protocol::export::ExportExample,
        _options: &Object,
    ) -> magma_protocol::export::ExportResult {
        use magma_protocol::export::{ExportRecord, ExportResult};
        let id = &example.example_id;
        let content = example.input.instruction.content.as_str();
        match content {
            "__export_panic__" => panic!("demo exporter: asked to panic on {id}"),
            "__export_abort__" => std::process::abort(),
            _ => {}
        }
        let Some(decision) = example.candidate.decision() else {
            return ExportResult::skipped(id, "the candidate has no decision")
                .unwrap_or_else(|e| ExportResult::failed(id, e.to_string()));
        };
        let mut messages = Vec::with_capacity(3);
        let rules: Vec<&str> = example
            .input
            .memory_list()
            .unwrap_or_default()
            .iter()
            .filter_map(Json::as_str)
            .collect();
        if !rules.is_empty() {
            messages.push(message("system", Json::from(rules.join("\n"))));
        }
        let user = match example.input.instruction.kind {
            InstructionType::Env => format!("[env] {content}"),
            _ => content.to_owned(),
        };
        messages.push(message("user", Json::String(user)));
        let mut assistant = message("assistant", Json::from(decision.say.as_str()));
        if let Json::Object(o) = &mut assistant {
            let calls: Vec<Json> = decision
                .tool_calls
                .iter()
                .map(|call| {
                    let mut c = Object::with_capacity(3);
                    c.insert("name", Json::from(call.name.as_str()));
                    c.insert(
                        "target_robot_name",
                        Json::from(call.target_robot_name.as_str()),
                    );
                    c.insert("arguments", Json::Object(call.arguments.clone()));
                    Json::Object(c)
                })
                .collect();
            o.insert("tool_calls", Json::Array(calls));
        }
        messages.push(assistant);
        let mut chat = Object::with_capacity(3);
        chat.insert("example_id", Json::from(id.as_str()));
        chat.insert("messages", Json::Array(messages));
        chat.insert(
            "tools",
            Json::Array(
                example
                    .input
                    .tools
                    .iter()
                    .cloned()
                    .map(Json::Object)
                    .collect(),
            ),
        );
        let mut records = Vec::with_capacity(1 + example.candidate.internal_steps.len());
        match ExportRecord::new(format!("{id}:chat"), "chat", chat) {
            Ok(r) => records.push(r),
            Err(e) => return ExportResult::failed(id, e.to_string()),
        }
        for (n, step) in example.candidate.internal_steps.iter().enumerate() {
            let Ok(step) = magma_protocol::InternalStep::from_json(Json::Object(step.clone()))
            else {
                continue;
            };
            let mut data = Object::with_capacity(5);
            data.insert("example_id", Json::from(id.as_str()));
            data.insert("component", Json::String(step.component));
            data.insert("origin", Json::from(step.origin.as_str()));
            data.insert("prompt", Json::String(step.full_prompt));
            data.insert("completion", Json::String(step.output_raw));
            match ExportRecord::new(format!("{id}:step:{n}"), "internal_steps", data) {
                Ok(r) => records.push(r),
                Err(e) => return ExportResult::failed(id, e.to_string()),
            }
        }
        ExportResult::exported(id, records)
            .unwrap_or_else(|e| ExportResult::failed(id, e.to_string()))
    }
}

fn message(role: &str, content: Json) -> Json {
    let mut o = Object::with_capacity(3);
    o.insert("role", Json::from(role));
    o.insert("content", content);
    Json::Object(o)
}
