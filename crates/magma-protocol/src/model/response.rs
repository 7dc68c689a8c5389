//! The answer to `POST /v1/responses`: [`AgentResponse`], its candidates
//! ([`AgentOutput`]) and what they hold ([`Outcome`], [`AgentDecision`],
//! [`ToolCall`], [`AgentError`]): the types, the shape the parser follows,
//! the validator, the writer and the serde impls. Matching a response to
//! its request is `exchange.rs`.

use std::ops::Deref;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::error::{Error, ErrorKind};
use crate::json::write::{needs_escape, write_i64, write_str, write_u64};
use crate::json::{Json, Object, Shape, WriteJson, parse_shaped_counted, to_string, to_value};
use crate::limits::{MAX_REPORTED_ERRORS, READ};
use crate::validate::{
    Fields, NonEmptyString, Validate, Validation, free_object, int64, list, literal, model_object,
    non_empty, non_negative_u64, opt_str, strict_str,
};

/// Where a response holds free-form objects, for the parser.
const SHAPE: Shape = Shape::List(&OUTPUT_SHAPE);
/// The models are strict: the declared fields are listed, so that the
/// parser counts a hostile object's unknown keys past the error cap instead
/// of building them (`tests/it/hostile.rs` checks the lists against the
/// validators).
const OUTPUT_SHAPE: Shape = Shape::Model {
    declared: &[
        "request_id",
        "source_id",
        "candidate_index",
        "status",
        "memory",
        "internal_steps",
        "output",
        "error",
    ],
    fields: &[
        ("request_id", Shape::Scalar),
        ("source_id", Shape::Scalar),
        ("candidate_index", Shape::Scalar),
        ("status", Shape::Scalar),
        ("memory", Shape::FreeObject),
        ("internal_steps", Shape::List(&Shape::FreeObject)),
        ("output", DECISION_SHAPE),
        ("error", ERROR_SHAPE),
    ],
};
/// The fields of `DECISION_SHAPE`, in the order the direct reader numbers them.
pub(crate) const DECISION_FIELDS: &[&str] = &["say", "tool_calls"];
/// An `AgentDecision`: also a coaching step's output.
pub(crate) const DECISION_SHAPE: Shape = Shape::Model {
    declared: DECISION_FIELDS,
    fields: &[
        ("say", Shape::Scalar),
        ("tool_calls", Shape::List(&TOOL_CALL_SHAPE)),
    ],
};
/// The fields of `TOOL_CALL_SHAPE`, in the order the direct reader numbers them.
pub(crate) const TOOL_CALL_FIELDS: &[&str] = &["name", "arguments", "target_robot_name"];
const TOOL_CALL_SHAPE: Shape = Shape::Model {
    declared: TOOL_CALL_FIELDS,
    fields: &[
        ("name", Shape::Scalar),
        ("target_robot_name", Shape::Scalar),
        ("arguments", Shape::FreeObject),
    ],
};
/// The fields of `ERROR_SHAPE`, in the order the direct reader numbers them.
pub(crate) const AGENT_ERROR_FIELDS: &[&str] = &["code", "message", "component"];
/// An `AgentError`: also a coaching step's error.
pub(crate) const ERROR_SHAPE: Shape = Shape::Model {
    declared: AGENT_ERROR_FIELDS,
    fields: &[
        ("code", Shape::Scalar),
        ("message", Shape::Scalar),
        ("component", Shape::Scalar),
    ],
};

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
        AgentError {
            code: NonEmptyString::new_or(code, "error"),
            message: NonEmptyString::new_or(message, "error"),
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

    /// Appends the candidate's compact JSON to `out`: the bytes
    /// [`AgentResponse::to_json_string`] writes for it between its commas,
    /// for writing a long response one candidate at a time.
    pub fn write_json_to(&self, out: &mut String) {
        self.write_json(out);
    }

    /// About how many bytes [`write_json_to`](AgentOutput::write_json_to)
    /// appends, without writing them: exact for memory kept as the text it
    /// was read from, an allowance for the rest.
    pub fn json_len_hint(&self) -> usize {
        self.size_hint()
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
        let (value, counted) = parse_shaped_counted(bytes, &SHAPE, READ, MAX_REPORTED_ERRORS)
            .map_err(|e| Error::from(e).with_model("AgentResponse"))?;
        Validation::document_counted("AgentResponse", value, counted, |v, cx| {
            list(v, cx, output).map(AgentResponse::new)
        })
    }

    /// Validates an already parsed value.
    pub fn from_json(value: Json) -> Result<Self, Error> {
        Validation::document("AgentResponse", value, |v, cx| {
            list(v, cx, output).map(AgentResponse::new)
        })
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
        to_string(self)
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

// ---------------------------------------------------------------------------
// Validation, field by field in the reference's declaration order

fn tool_call(v: Json, cx: &mut Validation) -> Option<ToolCall> {
    let obj = model_object(v, "ToolCall", cx)?;
    let mut f = Fields::new(obj, &["name", "target_robot_name"], cx);
    let name = f.required("name", cx, non_empty);
    let arguments = f.optional("arguments", cx, Object::new, free_object);
    let target = f.required("target_robot_name", cx, non_empty);
    f.finish(cx).then_some(())?;
    Some(ToolCall {
        name: name?,
        arguments: arguments?,
        target_robot_name: target?,
    })
}

fn decision(v: Json, cx: &mut Validation) -> Option<Option<AgentDecision>> {
    if v.is_null() {
        return Some(None);
    }
    let obj = model_object(v, "AgentDecision", cx)?;
    let mut f = Fields::new(obj, &[], cx);
    let say = f.optional("say", cx, String::new, strict_str);
    let tool_calls = f.optional("tool_calls", cx, Vec::new, |v, cx| list(v, cx, tool_call));
    f.finish(cx).then_some(())?;
    Some(Some(AgentDecision {
        say: say?,
        tool_calls: tool_calls?,
    }))
}

fn agent_error(v: Json, cx: &mut Validation) -> Option<Option<AgentError>> {
    if v.is_null() {
        return Some(None);
    }
    let obj = model_object(v, "AgentError", cx)?;
    let mut f = Fields::new(obj, &["code", "message"], cx);
    let code = f.required("code", cx, non_empty);
    let message = f.required("message", cx, non_empty);
    let component = f.optional("component", cx, || None, opt_str);
    f.finish(cx).then_some(())?;
    Some(Some(AgentError {
        code: code?,
        message: message?,
        component: component?,
    }))
}

impl Validate for AgentDecision {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        // `decision` reads `null` as absent; a bare decision is never null.
        match v {
            Json::Null => {
                model_object(Json::Null, "AgentDecision", cx)?;
                None
            }
            other => decision(other, cx).flatten(),
        }
    }
}

impl Validate for AgentError {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        match v {
            Json::Null => {
                model_object(Json::Null, "AgentError", cx)?;
                None
            }
            other => agent_error(other, cx).flatten(),
        }
    }
}

fn output(v: Json, cx: &mut Validation) -> Option<AgentOutput> {
    let obj = model_object(v, "AgentOutput", cx)?;
    let mut f = Fields::new(
        obj,
        &[
            "request_id",
            "source_id",
            "candidate_index",
            "status",
            "memory",
        ],
        cx,
    );
    let request_id = f.required("request_id", cx, non_empty);
    let source_id = f.required("source_id", cx, int64);
    let index = f.required("candidate_index", cx, non_negative_u64);
    let status = f.required("status", cx, |v, cx| {
        literal(v, cx, &["completed", "error"])
    });
    let memory = f.required("memory", cx, free_object);
    let steps = f.optional("internal_steps", cx, Vec::new, |v, cx| {
        list(v, cx, free_object)
    });
    let decision = f.optional("output", cx, || None, decision);
    let error = f.optional("error", cx, || None, agent_error);
    f.finish(cx).then_some(())?;
    let (request_id, source_id, candidate_index, status, memory, internal_steps) =
        (request_id?, source_id?, index?, status?, memory?, steps?);
    let (decision, error) = (decision?, error?);
    let outcome = match (status, decision, error) {
        (0, Some(d), None) => Outcome::Completed(d),
        (1, None, Some(e)) => Outcome::Error(e),
        (status, decision, error) => {
            let msg = if status == 0 {
                "Value error, Completed candidates require a decision and no error"
            } else {
                "Value error, Failed candidates require an error and no decision"
            };
            let mut o = Object::new();
            o.insert("request_id", Json::String(request_id.into_string()));
            o.insert("source_id", Json::from(source_id));
            o.insert("candidate_index", Json::from(candidate_index));
            o.insert(
                "status",
                Json::from(if status == 0 { "completed" } else { "error" }),
            );
            o.insert("memory", Json::Object(memory));
            o.insert(
                "internal_steps",
                Json::Array(internal_steps.into_iter().map(Json::Object).collect()),
            );
            o.insert(
                "output",
                decision.map_or(Json::Null, |d| to_value(&d, READ)),
            );
            o.insert("error", error.map_or(Json::Null, |e| to_value(&e, READ)));
            cx.report(ErrorKind::ValueError, msg, Json::Object(o));
            return None;
        }
    };
    Some(AgentOutput {
        request_id,
        source_id,
        candidate_index,
        memory,
        internal_steps,
        outcome,
    })
}

// ---------------------------------------------------------------------------
// Writing: the direct writer and the serde impls give the same bytes. Each
// `push_str` literal holds the punctuation and key before a value; each
// `size_hint` counts those literals roughly (20 bytes for an integer).

impl WriteJson for ToolCall {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"name\":");
        write_str(out, &self.name);
        // An empty map writes `{}` (kept text is written as it was read).
        if self.arguments.raw_text().is_none() && self.arguments.is_empty() {
            out.push_str(",\"arguments\":{},\"target_robot_name\":");
        } else {
            out.push_str(",\"arguments\":");
            self.arguments.write_json(out);
            out.push_str(",\"target_robot_name\":");
        }
        write_str(out, &self.target_robot_name);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        48 + self.name.len() + self.arguments.size_hint() + self.target_robot_name.len()
    }
}

impl WriteJson for AgentDecision {
    fn write_json(&self, out: &mut String) {
        if self.say.is_empty() {
            out.push_str("{\"say\":\"\",\"tool_calls\":");
        } else {
            out.push_str("{\"say\":");
            write_str(out, &self.say);
            out.push_str(",\"tool_calls\":");
        }
        self.tool_calls.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        28 + self.say.len() + self.tool_calls.size_hint()
    }
}

impl WriteJson for AgentError {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"code\":");
        write_str(out, &self.code);
        out.push_str(",\"message\":");
        write_str(out, &self.message);
        out.push_str(",\"component\":");
        self.component.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        40 + self.code.len() + self.message.len() + self.component.size_hint()
    }
}

/// `"status":"…",` of a candidate.
fn write_status_field(out: &mut String, outcome: &Outcome) {
    out.push_str("\"status\":\"");
    out.push_str(outcome.status().as_str());
    out.push_str("\",");
}

/// `"output":…,"error":…` of a candidate.
fn write_output_and_error(out: &mut String, outcome: &Outcome) {
    out.push_str("\"output\":");
    outcome.decision().write_json(out);
    out.push_str(",\"error\":");
    outcome.error().write_json(out);
}

fn outcome_size_hint(outcome: &Outcome) -> usize {
    44 + outcome.decision().size_hint() + outcome.error().size_hint()
}

impl WriteJson for Outcome {
    fn write_json(&self, out: &mut String) {
        out.push('{');
        write_status_field(out, self);
        write_output_and_error(out, self);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        outcome_size_hint(self)
    }
}

impl WriteJson for AgentOutput {
    fn write_json(&self, out: &mut String) {
        let id = OutputId::new(&self.request_id);
        write_output(out, id, self.source_id, self.candidate_index, self.parts());
    }

    fn size_hint(&self) -> usize {
        output_size_hint(self.request_id.len(), self.parts())
    }
}

impl AgentOutput {
    fn parts(&self) -> OutputParts<'_> {
        OutputParts {
            memory: &self.memory,
            internal_steps: &self.internal_steps,
            outcome: &self.outcome,
        }
    }
}

/// A candidate's request id as its writer writes it: as it is when it
/// needs no escape (checked once for all the candidates of an answer).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutputId<'a> {
    id: &'a str,
    plain: bool,
}

impl<'a> OutputId<'a> {
    pub(crate) fn new(id: &'a str) -> OutputId<'a> {
        OutputId {
            id,
            plain: !needs_escape(id),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.id.len()
    }
}

/// What a candidate holds besides its ids: an [`AgentOutput`]'s, or an
/// agent's candidate written as one (`exchange.rs`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutputParts<'a> {
    pub(crate) memory: &'a Object,
    pub(crate) internal_steps: &'a [Object],
    pub(crate) outcome: &'a Outcome,
}

/// The compact JSON of a candidate (an `AgentOutput`) from its parts.
/// The punctuation and keys between two values go out as one piece: a
/// candidate has about a dozen of them, each a capacity check and a copy.
pub(crate) fn write_output(
    out: &mut String,
    id: OutputId<'_>,
    source_id: i64,
    candidate_index: u64,
    parts: OutputParts<'_>,
) {
    if id.plain {
        out.push_str("{\"request_id\":\"");
        out.push_str(id.id);
        out.push_str("\",\"source_id\":");
    } else {
        out.push_str("{\"request_id\":");
        write_str(out, id.id);
        out.push_str(",\"source_id\":");
    }
    write_i64(out, source_id);
    out.push_str(",\"candidate_index\":");
    write_u64(out, candidate_index);
    out.push_str(match parts.outcome {
        Outcome::Completed(_) => ",\"status\":\"completed\",\"memory\":",
        Outcome::Error(_) => ",\"status\":\"error\",\"memory\":",
    });
    parts.memory.write_json(out);
    if parts.internal_steps.is_empty() {
        out.push_str(",\"internal_steps\":[],\"output\":");
    } else {
        out.push_str(",\"internal_steps\":");
        parts.internal_steps.write_json(out);
        out.push_str(",\"output\":");
    }
    match parts.outcome {
        Outcome::Completed(decision) => {
            decision.write_json(out);
            out.push_str(",\"error\":null}");
        }
        Outcome::Error(error) => {
            out.push_str("null,\"error\":");
            error.write_json(out);
            out.push('}');
        }
    }
}

/// [`WriteJson::size_hint`] of a candidate from its parts.
pub(crate) fn output_size_hint(id_len: usize, parts: OutputParts<'_>) -> usize {
    130 + id_len
        + parts.memory.size_hint()
        + parts.internal_steps.size_hint()
        + outcome_size_hint(parts.outcome)
}

impl WriteJson for AgentResponse {
    fn write_json(&self, out: &mut String) {
        self.candidates().write_json(out);
    }

    fn size_hint(&self) -> usize {
        self.candidates().size_hint()
    }
}

impl Serialize for CandidateStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ToolCall", 3)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("arguments", &self.arguments)?;
        st.serialize_field("target_robot_name", &self.target_robot_name)?;
        st.end()
    }
}

impl Serialize for AgentDecision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentDecision", 2)?;
        st.serialize_field("say", &self.say)?;
        st.serialize_field("tool_calls", &self.tool_calls)?;
        st.end()
    }
}

impl Serialize for AgentError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentError", 3)?;
        st.serialize_field("code", &self.code)?;
        st.serialize_field("message", &self.message)?;
        st.serialize_field("component", &self.component)?;
        st.end()
    }
}

impl Serialize for AgentOutput {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentOutput", 8)?;
        st.serialize_field("request_id", &self.request_id)?;
        st.serialize_field("source_id", &self.source_id)?;
        st.serialize_field("candidate_index", &self.candidate_index)?;
        st.serialize_field("status", &self.outcome.status())?;
        st.serialize_field("memory", &self.memory)?;
        st.serialize_field("internal_steps", &self.internal_steps)?;
        st.serialize_field("output", &self.outcome.decision())?;
        st.serialize_field("error", &self.outcome.error())?;
        st.end()
    }
}

impl Serialize for Outcome {
    /// `{"status", "output", "error"}` as they appear in a candidate.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Outcome", 3)?;
        st.serialize_field("status", &self.status())?;
        st.serialize_field("output", &self.decision())?;
        st.serialize_field("error", &self.error())?;
        st.end()
    }
}

impl Serialize for AgentResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.candidates().serialize(s)
    }
}

impl<'de> serde::Deserialize<'de> for AgentResponse {
    /// Deserializes any value and validates it as the reference does.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AgentResponse, D::Error> {
        let value = <Json as serde::Deserialize>::deserialize(d)?;
        AgentResponse::from_json(value).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::{AgentDecision, AgentError, AgentOutput, AgentResponse, ToolCall};
    use crate::json::{Json, Object};
    use crate::json_schema::{
        HasSchema, Refs, S, free_form, int64, integer, model, non_empty, nullable, object, strings,
    };

    impl HasSchema for ToolCall {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "ToolCall",
                "A tool the agent wants a robot to run.",
                vec![
                    ("name", non_empty("The tool's name.")),
                    ("arguments", object("The tool's arguments.")),
                    (
                        "target_robot_name",
                        non_empty("The robot that runs the tool."),
                    ),
                ],
                &["name", "target_robot_name"],
            )
        }
    }

    impl HasSchema for AgentDecision {
        fn schema(refs: &Refs<'_>) -> Object {
            model(
                "AgentDecision",
                "What one candidate says and does. Both may be empty and both may be set \
             (BENCH then drops `say`, GEN refuses the answer).",
                vec![
                    (
                        "say",
                        S::ty("string")
                            .set("default", "")
                            .doc("A message for the user."),
                    ),
                    (
                        "tool_calls",
                        S::ty("array")
                            .set("items", refs.to("ToolCall"))
                            .set("default", Json::Array(Vec::new()))
                            .doc("Tool calls for the robots."),
                    ),
                ],
                &[],
            )
        }
    }

    impl HasSchema for AgentError {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "AgentError",
                "Why one candidate failed.",
                vec![
                    (
                        "code",
                        non_empty("Machine-readable code, e.g. `invalid_output`."),
                    ),
                    ("message", non_empty("Human-readable message.")),
                    (
                        "component",
                        S::new()
                            .set("type", strings(&["string", "null"]))
                            .set("default", Json::Null)
                            .doc("The part of the agent that failed, if known."),
                    ),
                ],
                &["code", "message"],
            )
        }
    }

    impl HasSchema for AgentOutput {
        fn schema(refs: &Refs<'_>) -> Object {
            {
                let mut body = model(
                    "AgentOutput",
                    "One candidate. `status` decides which of `output` and `error` is set \
                 (the `oneOf`): `completed` needs a decision in `output` and no `error`, \
                 `error` needs an `error` and no `output`; absent and `null` are the same. \
                 `request_id`, `source_id` and `candidate_index` follow the request, see \
                 AgentResponse.",
                    vec![
                        (
                            "request_id",
                            non_empty("Echo of the request's `request_id`."),
                        ),
                        (
                            "source_id",
                            int64("The `id` of the input this candidate answers."),
                        ),
                        (
                            "candidate_index",
                            S::ty("integer")
                                .set("minimum", 0)
                                .set("maximum", u64::MAX)
                                .doc(&integer(
                                    "0-based index among the input's candidates.",
                                    "unsigned ",
                                )),
                        ),
                        (
                            "status",
                            S::ty("string")
                                .set("enum", strings(&["completed", "error"]))
                                .doc("Whether the candidate has a decision or an error."),
                        ),
                        (
                            "memory",
                            S::ty("object")
                                .doc(&free_form("The full replacement memory, for errors too.")),
                        ),
                        (
                            "internal_steps",
                            S::ty("array")
                                .set("items", S::ty("object"))
                                .set("default", Json::Array(Vec::new()))
                                .doc(&free_form(
                                    "Diagnostics (prompts, raw model output), each a free-form \
                                 object.",
                                )),
                        ),
                        (
                            "output",
                            nullable(
                                refs.to("AgentDecision"),
                                "The decision; set if and only if `status` is `completed`.",
                            ),
                        ),
                        (
                            "error",
                            nullable(
                                refs.to("AgentError"),
                                "The error; set if and only if `status` is `error`.",
                            ),
                        ),
                    ],
                    &[
                        "request_id",
                        "source_id",
                        "candidate_index",
                        "status",
                        "memory",
                    ],
                );
                let branch = |status: &str, set: &str, decision: &str, unset: &str| {
                    let mut props = Object::new();
                    props.insert("status", S::new().set("const", status).build());
                    props.insert(set, refs.to(decision).build());
                    props.insert(unset, S::ty("null").build());
                    S::new()
                        .set("title", status)
                        .set("properties", props)
                        .set("required", strings(&[set]))
                        .build()
                };
                body.insert(
                    "oneOf",
                    Json::Array(vec![
                        branch("completed", "output", "AgentDecision", "error"),
                        branch("error", "error", "AgentError", "output"),
                    ]),
                );
                body
            }
        }
    }

    impl HasSchema for AgentResponse {
        fn schema(refs: &Refs<'_>) -> Object {
            {
                S::new()
                    .set("title", "AgentResponse")
                    .set(
                        "description",
                        "The body of a 200 answer to `POST /v1/responses`: the candidates, in \
                 order. Not expressible here: for each input of the request in order, and \
                 for k = 0 .. num_outputs - 1, exactly one candidate with `request_id`, \
                 `source_id` and `candidate_index` equal to the request's `request_id`, the \
                 input's `id` and k; nothing else (the reference's \
                 `AgentResponse.validate_request`). A request without inputs gets `[]`.",
                    )
                    .set("type", "array")
                    .set("items", refs.to("AgentOutput"))
                    .into_object()
            }
        }
    }
}
