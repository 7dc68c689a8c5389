//! The models of `magma_core.protocol.agent` 2.0.1.

use std::fmt;
use std::num::NonZeroU64;
use std::ops::Deref;

use crate::error::{Error, ErrorKind, Issue, Location};
use crate::json::{Map, Object};

/// The protocol version this crate implements, as `AgentInfo` advertises it.
pub const PROTOCOL_VERSION: &str = "2.0";

/// A string with at least one character (pydantic `min_length=1`).
///
/// `" "` is valid: the reference counts characters, it does not trim.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NonEmptyString(String);

impl NonEmptyString {
    /// `None` for the empty string.
    pub fn new(s: impl Into<String>) -> Option<Self> {
        let s = s.into();
        (!s.is_empty()).then_some(NonEmptyString(s))
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The owned string.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl Deref for NonEmptyString {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for NonEmptyString {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for NonEmptyString {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for NonEmptyString {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl TryFrom<String> for NonEmptyString {
    type Error = EmptyStringError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        NonEmptyString::new(s).ok_or(EmptyStringError)
    }
}

impl TryFrom<&str> for NonEmptyString {
    type Error = EmptyStringError;
    fn try_from(s: &str) -> Result<Self, Self::Error> {
        NonEmptyString::new(s).ok_or(EmptyStringError)
    }
}

impl From<NonEmptyString> for String {
    fn from(s: NonEmptyString) -> String {
        s.0
    }
}

impl fmt::Debug for NonEmptyString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for NonEmptyString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// An empty string where at least one character is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("string should have at least 1 character")]
pub struct EmptyStringError;

/// Who speaks in an instruction: `"user"` or `"env"` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstructionType {
    /// A message from the user (`"user"`).
    User,
    /// Feedback from the environment or simulator (`"env"`): the content is
    /// usually a JSON-encoded status object, see [`crate::EnvFeedback`].
    Env,
}

impl InstructionType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            InstructionType::User => "user",
            InstructionType::Env => "env",
        }
    }
}

/// What the agent is asked to react to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInstruction {
    /// `type` on the wire.
    pub kind: InstructionType,
    /// The message; may be empty.
    pub content: String,
}

impl AgentInstruction {
    /// A `user` instruction.
    pub fn user(content: impl Into<String>) -> Self {
        AgentInstruction {
            kind: InstructionType::User,
            content: content.into(),
        }
    }

    /// An `env` instruction.
    pub fn env(content: impl Into<String>) -> Self {
        AgentInstruction {
            kind: InstructionType::Env,
            content: content.into(),
        }
    }
}

/// One situation the agent must answer, with `num_outputs` candidates.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInput {
    /// Identifies the input within its request; answers carry it as
    /// `source_id`. Ids are batch positions, reused across requests.
    pub id: i64,
    /// The instruction.
    pub instruction: AgentInstruction,
    /// Tool descriptions, free-form objects (see [`crate::tools`]).
    pub tools: Vec<Object>,
    /// Situation attributes, e.g. `known_robots`.
    pub attributes: Object,
    /// The interaction state; the agent returns a full replacement.
    pub memory: Object,
    /// How many candidates to produce (default 1).
    pub num_outputs: NonZeroU64,
    /// Agent-specific options, e.g. `inference_mode`.
    pub extra_keys: Object,
}

impl AgentInput {
    /// An input with the reference's defaults: no tools, empty attributes,
    /// memory and extra keys, one output.
    pub fn new(id: i64, instruction: AgentInstruction) -> Self {
        AgentInput {
            id,
            instruction,
            tools: Vec::new(),
            attributes: Object::new(),
            memory: Object::new(),
            num_outputs: NonZeroU64::MIN,
            extra_keys: Object::new(),
        }
    }
}

/// A `POST /v1/responses` body: always valid (non-empty `request_id`,
/// unique input ids), which is why its fields are reached through methods.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRequest {
    request_id: NonEmptyString,
    inputs: Vec<AgentInput>,
}

impl AgentRequest {
    /// Builds a request; fails on an empty `request_id` or repeated input ids,
    /// with the same error the parser gives.
    pub fn new(request_id: impl Into<String>, inputs: Vec<AgentInput>) -> Result<Self, Error> {
        let request_id = request_id.into();
        let Some(request_id) = NonEmptyString::new(request_id) else {
            let issue = Issue::new(
                ErrorKind::StringTooShort,
                Location::from(vec![crate::Segment::Key("request_id".into())]),
                "String should have at least 1 character",
            )
            .with_input(crate::Json::from(""))
            .with_ctx("min_length", crate::Json::from(1));
            return Err(Error::new("AgentRequest", vec![issue]));
        };
        let request = AgentRequest { request_id, inputs };
        if let Some(issue) = crate::validate::unique_ids_issue(&request) {
            return Err(Error::new("AgentRequest", vec![issue]));
        }
        Ok(request)
    }

    /// Parses and validates a body, exactly as the reference would.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        // The common case of a valid request, read without building a tree;
        // anything unusual takes the exact path (see `fast`).
        if let Some(request) = crate::fast::request(bytes) {
            return Ok(request);
        }
        let value = crate::parse::parse_with(bytes, &crate::parse::REQUEST)
            .map_err(|e| e.with_model("AgentRequest"))?;
        Self::from_json(value)
    }

    /// Validates an already parsed value.
    pub fn from_json(value: crate::Json) -> Result<Self, Error> {
        crate::validate::request(value)
    }

    /// The request id, echoed by every candidate.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    pub(crate) fn request_id_typed(&self) -> &NonEmptyString {
        &self.request_id
    }

    /// The inputs, in request order.
    pub fn inputs(&self) -> &[AgentInput] {
        &self.inputs
    }

    /// Takes the request apart.
    pub fn into_parts(self) -> (NonEmptyString, Vec<AgentInput>) {
        (self.request_id, self.inputs)
    }

    /// The total number of candidates a response must hold.
    pub fn expected_candidates(&self) -> u128 {
        self.inputs
            .iter()
            .map(|i| u128::from(i.num_outputs.get()))
            .sum()
    }

    /// Compact JSON, every field emitted, numbers exactly as read.
    pub fn to_json_string(&self) -> String {
        crate::write::to_string(self)
    }

    pub(crate) fn from_parts_unchecked(
        request_id: NonEmptyString,
        inputs: Vec<AgentInput>,
    ) -> Self {
        AgentRequest { request_id, inputs }
    }
}

impl std::str::FromStr for AgentRequest {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::from_slice(s.as_bytes())
    }
}

/// A tool the agent wants a robot to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    /// Tool name, non-empty.
    pub name: NonEmptyString,
    /// Arguments, free-form.
    pub arguments: Object,
    /// The robot that runs it, non-empty.
    pub target_robot_name: NonEmptyString,
}

/// What one candidate says and does. Both may be empty, and both may be set
/// (the reference allows it; BENCH then drops `say`, GEN refuses it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentDecision {
    /// A message for the user (default `""`).
    pub say: String,
    /// Tool calls (default none).
    pub tool_calls: Vec<ToolCall>,
}

impl AgentDecision {
    /// A decision that only speaks.
    pub fn say(text: impl Into<String>) -> Self {
        AgentDecision {
            say: text.into(),
            tool_calls: Vec::new(),
        }
    }

    /// A decision that only calls tools.
    pub fn call(tool_calls: Vec<ToolCall>) -> Self {
        AgentDecision {
            say: String::new(),
            tool_calls,
        }
    }
}

/// Why one candidate failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentError {
    /// Machine-readable code, non-empty (e.g. `invalid_output`).
    pub code: NonEmptyString,
    /// Human message, non-empty.
    pub message: NonEmptyString,
    /// The part of the agent that failed, if known.
    pub component: Option<String>,
}

impl AgentError {
    /// An error; an empty `code` or `message` is replaced by `"error"` so the
    /// value stays valid.
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        let fallback = || NonEmptyString("error".to_owned());
        AgentError {
            code: NonEmptyString::new(code).unwrap_or_else(fallback),
            message: NonEmptyString::new(message).unwrap_or_else(fallback),
            component: None,
        }
    }

    /// Sets the component.
    pub fn with_component(mut self, component: impl Into<String>) -> Self {
        self.component = Some(component.into());
        self
    }
}

/// `status` of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CandidateStatus {
    /// `"completed"`: a decision and no error.
    Completed,
    /// `"error"`: an error and no decision.
    Error,
}

impl CandidateStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CandidateStatus::Completed => "completed",
            CandidateStatus::Error => "error",
        }
    }
}

/// The result of one candidate. The reference's rule ("completed has a
/// decision and no error; error has an error and no decision") is this type.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// `status: "completed"` with its decision.
    Completed(AgentDecision),
    /// `status: "error"` with its error.
    Error(AgentError),
}

impl Outcome {
    /// The wire status.
    pub fn status(&self) -> CandidateStatus {
        match self {
            Outcome::Completed(_) => CandidateStatus::Completed,
            Outcome::Error(_) => CandidateStatus::Error,
        }
    }

    /// The decision, if completed.
    pub fn decision(&self) -> Option<&AgentDecision> {
        match self {
            Outcome::Completed(d) => Some(d),
            Outcome::Error(_) => None,
        }
    }

    /// The error, if failed.
    pub fn error(&self) -> Option<&AgentError> {
        match self {
            Outcome::Completed(_) => None,
            Outcome::Error(e) => Some(e),
        }
    }
}

impl From<AgentDecision> for Outcome {
    fn from(d: AgentDecision) -> Self {
        Outcome::Completed(d)
    }
}

impl From<AgentError> for Outcome {
    fn from(e: AgentError) -> Self {
        Outcome::Error(e)
    }
}

/// One candidate of a response (`AgentOutput`).
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutput {
    /// Echo of the request's id.
    pub request_id: NonEmptyString,
    /// The `id` of the input it answers.
    pub source_id: i64,
    /// 0-based index among that input's candidates.
    pub candidate_index: u64,
    /// The full replacement memory, for errors too.
    pub memory: Object,
    /// Free-form diagnostics.
    pub internal_steps: Vec<Object>,
    /// Decision or error; gives `status`, `output` and `error` on the wire.
    pub outcome: Outcome,
}

impl AgentOutput {
    /// The wire status.
    pub fn status(&self) -> CandidateStatus {
        self.outcome.status()
    }
}

/// The body of a `POST /v1/responses` answer: a JSON array of candidates.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentResponse(Vec<AgentOutput>);

impl AgentResponse {
    /// Wraps candidates as they are; see
    /// [`validate_request`](AgentResponse::validate_request) and
    /// [`assemble`](AgentResponse::assemble).
    pub fn new(candidates: Vec<AgentOutput>) -> Self {
        AgentResponse(candidates)
    }

    /// Parses and validates a body, exactly as the reference would.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        let value = crate::parse::parse_with(bytes, &crate::parse::RESPONSE)
            .map_err(|e| e.with_model("AgentResponse"))?;
        Self::from_json(value)
    }

    /// Validates an already parsed value.
    pub fn from_json(value: crate::Json) -> Result<Self, Error> {
        crate::validate::response(value)
    }

    /// The candidates.
    pub fn candidates(&self) -> &[AgentOutput] {
        &self.0
    }

    /// The candidates, owned.
    pub fn into_candidates(self) -> Vec<AgentOutput> {
        self.0
    }

    /// Compact JSON, every field emitted, numbers exactly as read.
    pub fn to_json_string(&self) -> String {
        crate::write::to_string(self)
    }
}

impl Deref for AgentResponse {
    type Target = [AgentOutput];
    fn deref(&self) -> &[AgentOutput] {
        &self.0
    }
}

impl std::str::FromStr for AgentResponse {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Self::from_slice(s.as_bytes())
    }
}

/// The body of `GET /health`: `{"status":"ready"}`. `{}` is valid too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentHealth;

impl AgentHealth {
    /// Parses and validates a body, exactly as the reference would.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        let value = crate::parse::parse(bytes).map_err(|e| e.with_model("AgentHealth"))?;
        Self::from_json(value)
    }

    /// Validates an already parsed value.
    pub fn from_json(value: crate::Json) -> Result<Self, Error> {
        crate::validate::health(value)
    }

    /// `{"status":"ready"}`.
    pub fn to_json_string(&self) -> String {
        crate::write::to_string(self)
    }
}

/// `capabilities` of [`AgentInfo`]: names to flags, in order.
pub type Capabilities = Map<bool>;

/// The body of `GET /v1/info`.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInfo {
    /// Default `"2.0"`; the model takes any string, clients require `"2.0"`.
    pub protocol_version: String,
    /// The agent's name (may be empty in the model).
    pub agent_id: String,
    /// The agent's version.
    pub agent_version: String,
    /// Coaching kinds handled (`failure`, `suboptimal`, `format`).
    pub specialized_coaching: Vec<String>,
    /// Whether coached decisions can be replayed through `extra_keys.coaching`.
    pub coaching_resume: bool,
    /// Why coaching is off, if it is.
    pub coaching_unavailable_reason: Option<String>,
    /// Capability flags; BENCH requires `inference: true`.
    pub capabilities: Capabilities,
}

impl AgentInfo {
    /// Info for an agent that can answer inferences: protocol `2.0`,
    /// `capabilities: {"inference": true}`, coaching off.
    pub fn new(agent_id: impl Into<String>, agent_version: impl Into<String>) -> Self {
        let mut capabilities = Capabilities::new();
        capabilities.insert("inference", true);
        AgentInfo {
            protocol_version: PROTOCOL_VERSION.to_owned(),
            agent_id: agent_id.into(),
            agent_version: agent_version.into(),
            specialized_coaching: Vec::new(),
            coaching_resume: false,
            coaching_unavailable_reason: None,
            capabilities,
        }
    }

    /// Parses and validates a body, exactly as the reference would.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        let value = crate::parse::parse(bytes).map_err(|e| e.with_model("AgentInfo"))?;
        Self::from_json(value)
    }

    /// Validates an already parsed value.
    pub fn from_json(value: crate::Json) -> Result<Self, Error> {
        crate::validate::info(value)
    }

    /// What BENCH checks before a run: protocol `2.0` and `inference: true`.
    pub fn check_compatible(&self) -> Result<(), IncompatibleAgent> {
        if self.protocol_version != PROTOCOL_VERSION {
            return Err(IncompatibleAgent::ProtocolVersion(
                self.protocol_version.clone(),
            ));
        }
        if self.capabilities.get("inference") != Some(&true) {
            return Err(IncompatibleAgent::NoInference);
        }
        Ok(())
    }

    /// Compact JSON with every field, as FastAPI would send it.
    pub fn to_json_string(&self) -> String {
        crate::write::to_string(self)
    }
}

/// Why an agent's `/v1/info` does not satisfy what BENCH requires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IncompatibleAgent {
    /// `protocol_version` is not `2.0`.
    #[error("agent speaks protocol {0:?}, expected \"2.0\"")]
    ProtocolVersion(String),
    /// `capabilities.inference` is missing or false.
    #[error("agent does not advertise capabilities.inference = true")]
    NoInference,
}
