//! `POST /v1/responses` request: [`AgentRequest`], its [`AgentInput`]s and
//! their [`AgentInstruction`]: the types, the shape the parser follows, the
//! validator, the writer and the serde impls. The direct reader of the
//! usual valid request is `request/direct.rs`.

use std::collections::HashSet;
use std::num::NonZeroU64;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::error::{Error, ErrorKind, Issue};
use crate::json::write::{write_i64, write_str, write_u64};
use crate::json::{
    Json, Location, Object, Segment, Shape, WriteJson, parse_shaped_counted, to_string, to_value,
};
use crate::limits::{MAX_REPORTED_ERRORS, READ};
use crate::validate::{
    Fields, NonEmptyString, Validate, Validation, free_object, int64, list, literal, model_object,
    non_empty, positive_u64, strict_str,
};

mod direct;

/// The fields of `SHAPE`, in the order the direct reader numbers them.
pub(super) const ROOT_FIELDS: &[&str] = &["request_id", "inputs"];
/// Where a request holds free-form objects, for the parser. The models
/// are strict: their declared fields are listed, so that the parser counts
/// a hostile object's unknown keys past the error cap and keeps an unknown
/// key's array or object as text instead of building it (as the response's
/// models; `tests/it/hostile.rs` checks the lists against the validators).
const SHAPE: Shape = Shape::Model {
    declared: ROOT_FIELDS,
    fields: &[
        ("request_id", Shape::Scalar),
        ("inputs", Shape::List(&INPUT_SHAPE)),
    ],
};
/// The fields of `INPUT_SHAPE`, in the order the direct reader numbers them.
pub(super) const INPUT_FIELDS: &[&str] = &[
    "id",
    "instruction",
    "tools",
    "attributes",
    "memory",
    "num_outputs",
    "extra_keys",
];
/// An `AgentInput`: also a coaching step's input.
pub(crate) const INPUT_SHAPE: Shape = Shape::Model {
    declared: INPUT_FIELDS,
    fields: &[
        ("id", Shape::Scalar),
        ("num_outputs", Shape::Scalar),
        ("instruction", INSTRUCTION_SHAPE),
        ("tools", Shape::List(&Shape::FreeObject)),
        ("attributes", Shape::FreeObject),
        ("memory", Shape::FreeObject),
        ("extra_keys", Shape::FreeObject),
    ],
};
/// The fields of `INSTRUCTION_SHAPE`, in the order the direct reader numbers them.
pub(super) const INSTRUCTION_FIELDS: &[&str] = &["type", "content"];
const INSTRUCTION_SHAPE: Shape = Shape::Model {
    declared: INSTRUCTION_FIELDS,
    fields: &[("type", Shape::Scalar), ("content", Shape::Scalar)],
};

/// Who speaks in an instruction: `"user"` or `"env"` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InstructionType {
    /// A message from the user (`"user"`).
    User,
    /// Feedback from the environment or simulator (`"env"`): the content is
    /// usually a JSON-encoded status object, which `EnvFeedback` decodes.
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
    /// Tool descriptions, free-form objects (the `tools` module reads them).
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
                Location::from(vec![Segment::Key("request_id".into())]),
                "String should have at least 1 character",
            )
            .with_input(Json::from(""))
            .with_ctx("min_length", Json::from(1));
            return Err(Error::new("AgentRequest", vec![issue]));
        };
        let request = AgentRequest { request_id, inputs };
        if let Some(issue) = unique_ids_issue(&request) {
            return Err(Error::new("AgentRequest", vec![issue]));
        }
        Ok(request)
    }

    /// Parses and validates a body, exactly as the reference would.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        // The common case of a valid request, read without building a tree;
        // anything unusual takes the exact path (see `direct.rs`).
        if let Some(request) = direct::read(bytes) {
            return Ok(request);
        }
        let (value, counted) = parse_shaped_counted(bytes, &SHAPE, READ, MAX_REPORTED_ERRORS)
            .map_err(|e| Error::from(e).with_model("AgentRequest"))?;
        Validation::document_counted("AgentRequest", value, counted, request)
    }

    /// Validates an already parsed value.
    pub fn from_json(value: Json) -> Result<Self, Error> {
        Validation::document("AgentRequest", value, request)
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
        to_string(self)
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

// ---------------------------------------------------------------------------
// Validation, field by field in the reference's declaration order

fn instruction(v: Json, cx: &mut Validation) -> Option<AgentInstruction> {
    let obj = model_object(v, "AgentInstruction", cx)?;
    let mut f = Fields::new(obj, &["type", "content"], cx);
    let kind = f.required("type", cx, |v, cx| {
        literal(v, cx, &["user", "env"]).map(|i| {
            if i == 0 {
                InstructionType::User
            } else {
                InstructionType::Env
            }
        })
    });
    let content = f.required("content", cx, strict_str);
    f.finish(cx).then_some(())?;
    Some(AgentInstruction {
        kind: kind?,
        content: content?,
    })
}

fn input(v: Json, cx: &mut Validation) -> Option<AgentInput> {
    let obj = model_object(v, "AgentInput", cx)?;
    let mut f = Fields::new(obj, &["id", "instruction"], cx);
    let id = f.required("id", cx, int64);
    let instruction = f.required("instruction", cx, instruction);
    let tools = f.optional("tools", cx, Vec::new, |v, cx| list(v, cx, free_object));
    let attributes = f.optional("attributes", cx, Object::new, free_object);
    let memory = f.optional("memory", cx, Object::new, free_object);
    let outputs = f.optional("num_outputs", cx, || NonZeroU64::MIN, positive_u64);
    let extra_keys = f.optional("extra_keys", cx, Object::new, free_object);
    f.finish(cx).then_some(())?;
    Some(AgentInput {
        id: id?,
        instruction: instruction?,
        tools: tools?,
        attributes: attributes?,
        memory: memory?,
        num_outputs: outputs?,
        extra_keys: extra_keys?,
    })
}

impl Validate for AgentInput {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        input(v, cx)
    }
}

fn request(v: Json, cx: &mut Validation) -> Option<AgentRequest> {
    let obj = model_object(v, "AgentRequest", cx)?;
    let mut f = Fields::new(obj, &["request_id", "inputs"], cx);
    let request_id = f.required("request_id", cx, non_empty);
    let inputs = f.required("inputs", cx, |v, cx| list(v, cx, input));
    f.finish(cx).then_some(())?;
    let req = AgentRequest::from_parts_unchecked(request_id?, inputs?);
    if let Some(issue) = unique_ids_issue(&req) {
        cx.push(issue);
        return None;
    }
    Some(req)
}

/// The reference's `unique_input_ids` rule, reported at the root.
fn unique_ids_issue(req: &AgentRequest) -> Option<Issue> {
    (!ids_unique(req.inputs())).then(|| {
        Issue::new(
            ErrorKind::ValueError,
            Location::root(),
            "Value error, Input ids must be unique within a request",
        )
        .with_input(to_value(req, READ))
    })
}

/// The reference's `unique_input_ids` rule, without its error.
fn ids_unique(inputs: &[AgentInput]) -> bool {
    if inputs.len() <= 16 {
        inputs
            .iter()
            .enumerate()
            .all(|(i, a)| inputs[..i].iter().all(|b| b.id != a.id))
    } else {
        let mut seen = HashSet::with_capacity(inputs.len());
        inputs.iter().all(|a| seen.insert(a.id))
    }
}

// ---------------------------------------------------------------------------
// Writing: the direct writer and the serde impls give the same bytes. Each
// `push_str` literal holds the punctuation and key before a value; each
// `size_hint` counts those literals roughly (20 bytes for an integer).

impl WriteJson for AgentInstruction {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"type\":\"");
        out.push_str(self.kind.as_str());
        out.push_str("\",\"content\":");
        write_str(out, &self.content);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        32 + self.content.len()
    }
}

impl WriteJson for AgentInput {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        write_i64(out, self.id);
        out.push_str(",\"instruction\":");
        self.instruction.write_json(out);
        out.push_str(",\"tools\":");
        self.tools.write_json(out);
        out.push_str(",\"attributes\":");
        self.attributes.write_json(out);
        out.push_str(",\"memory\":");
        self.memory.write_json(out);
        out.push_str(",\"num_outputs\":");
        write_u64(out, self.num_outputs.get());
        out.push_str(",\"extra_keys\":");
        self.extra_keys.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        120 + self.instruction.size_hint()
            + self.tools.size_hint()
            + self.attributes.size_hint()
            + self.memory.size_hint()
            + self.extra_keys.size_hint()
    }
}

impl WriteJson for AgentRequest {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"request_id\":");
        write_str(out, self.request_id());
        out.push_str(",\"inputs\":");
        self.inputs().write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        30 + self.request_id().len() + self.inputs().size_hint()
    }
}

impl Serialize for InstructionType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for AgentInstruction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentInstruction", 2)?;
        st.serialize_field("type", &self.kind)?;
        st.serialize_field("content", &self.content)?;
        st.end()
    }
}

impl Serialize for AgentInput {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentInput", 7)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("instruction", &self.instruction)?;
        st.serialize_field("tools", &self.tools)?;
        st.serialize_field("attributes", &self.attributes)?;
        st.serialize_field("memory", &self.memory)?;
        st.serialize_field("num_outputs", &self.num_outputs.get())?;
        st.serialize_field("extra_keys", &self.extra_keys)?;
        st.end()
    }
}

impl Serialize for AgentRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentRequest", 2)?;
        st.serialize_field("request_id", self.request_id())?;
        st.serialize_field("inputs", self.inputs())?;
        st.end()
    }
}

impl<'de> serde::Deserialize<'de> for AgentRequest {
    /// Deserializes any value and validates it as the reference does.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AgentRequest, D::Error> {
        let value = <Json as serde::Deserialize>::deserialize(d)?;
        AgentRequest::from_json(value).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::{AgentInput, AgentInstruction, AgentRequest};
    use crate::json::{Json, Object};
    use crate::json_schema::{
        HasSchema, Refs, S, free_form, int64, integer, model, non_empty, object, strings,
    };
    use crate::limits::MAX_JSON_DEPTH;

    impl HasSchema for AgentRequest {
        fn schema(refs: &Refs<'_>) -> Object {
            model(
                "AgentRequest",
                &format!(
                    "The body of `POST /v1/responses`. Not expressible here: the `id`s of \
                 `inputs` must be unique (else 422 `value_error`, \"Input ids must be \
                 unique within a request\"), and the document nests at most \
                 {MAX_JSON_DEPTH} containers deep."
                ),
                vec![
                    (
                        "request_id",
                        non_empty("Identifies the request; every candidate echoes it."),
                    ),
                    (
                        "inputs",
                        S::ty("array").set("items", refs.to("AgentInput")).doc(
                            "The situations to answer, in order; may be empty. Their `id`s \
                         must be unique.",
                        ),
                    ),
                ],
                &["request_id", "inputs"],
            )
        }
    }

    impl HasSchema for AgentInput {
        fn schema(refs: &Refs<'_>) -> Object {
            model(
                "AgentInput",
                "One situation to answer with `num_outputs` candidates.",
                vec![
                    (
                        "id",
                        int64(
                            "Identifies the input within its request (unique there); its \
                         candidates carry it as `source_id`.",
                        ),
                    ),
                    (
                        "instruction",
                        refs.to("AgentInstruction").doc("What the agent reacts to."),
                    ),
                    (
                        "tools",
                        S::ty("array")
                            .set("items", S::ty("object"))
                            .set("default", Json::Array(Vec::new()))
                            .doc(&free_form(
                                "Tool descriptions, each a free-form object (`name`, \
                             `description`, and `arguments` or `parameters`).",
                            )),
                    ),
                    (
                        "attributes",
                        object("Situation attributes, e.g. `known_robots`."),
                    ),
                    (
                        "memory",
                        object(
                            "The interaction state, owned by the agent: candidates return a full \
                            replacement.",
                        ),
                    ),
                    (
                        "num_outputs",
                        S::ty("integer")
                            .set("exclusiveMinimum", 0)
                            .set("maximum", u64::MAX)
                            .set("default", 1)
                            .doc(&integer("How many candidates to produce.", "unsigned ")),
                    ),
                    (
                        "extra_keys",
                        object("Agent-specific options, e.g. `inference_mode`."),
                    ),
                ],
                &["id", "instruction"],
            )
        }
    }

    impl HasSchema for AgentInstruction {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "AgentInstruction",
                "What the agent is asked to react to.",
                vec![
                    (
                        "type",
                        S::ty("string").set("enum", strings(&["user", "env"])).doc(
                            "`user`: a message from the user; `env`: feedback from the \
                         environment, usually a JSON-encoded status object.",
                        ),
                    ),
                    ("content", S::ty("string").doc("The message; may be empty.")),
                ],
                &["type", "content"],
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;
    use crate::json::parse::tricky_text;

    use magma_testkit::fixtures::bench_like_request;

    fn parse_shaped_request(body: &[u8]) -> Result<Json, Error> {
        crate::json::parse_shaped(body, &SHAPE, READ).map_err(Error::from)
    }

    fn free_objects_kept_as_text(v: &Json) -> (usize, usize) {
        let mut kept = 0;
        let mut trees = 0;
        let input = v.get("inputs").and_then(Json::as_array).unwrap();
        for i in input {
            for key in ["attributes", "memory", "extra_keys"] {
                match i.get(key) {
                    Some(Json::Object(o)) if o.is_validated_text() => kept += 1,
                    Some(_) => trees += 1,
                    None => {}
                }
            }
        }
        (kept, trees)
    }

    #[test]
    fn clean_free_form_objects_are_kept_as_text() {
        let body = bench_like_request(3);
        let v = parse_shaped_request(body.as_bytes()).unwrap();
        assert_eq!(free_objects_kept_as_text(&v), (9, 0));
        // The generic parse builds trees, and both read the same.
        let tree = parse(body.as_bytes(), READ).unwrap();
        assert_eq!(free_objects_kept_as_text(&tree), (0, 9));
        assert_eq!(tree, v);
    }

    #[test]
    fn unusual_keys_are_kept_as_normal_text_and_errors_as_trees() {
        // Repeated and escaped keys are kept as the text their tree writes.
        for (memory, written) in [
            (r#"{"a":1,"a":2}"#, r#"{"a":2}"#),
            (
                r#"{"\u0061":1, "b":{"c":0,"c":"\u00e9"}}"#,
                r#"{"a":1,"b":{"c":"é"}}"#,
            ),
        ] {
            let body = format!(
                r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{memory}}}]}}"#
            );
            let v = parse_shaped_request(body.as_bytes()).unwrap();
            assert_eq!(free_objects_kept_as_text(&v), (1, 0), "{memory}");
            let memory = v.get("inputs").and_then(|i| i.as_array()).unwrap()[0].get("memory");
            assert_eq!(memory.unwrap().to_json_string(), written);
            assert_eq!(v, parse(body.as_bytes(), READ).unwrap());
        }
        for memory in [r#"{"a":1e400}"#, r#"{"a":"\ud800"}"#, r#"{"a":[1,]}"#] {
            let body = format!(
                r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{memory}}}]}}"#
            );
            match parse_shaped_request(body.as_bytes()) {
                Ok(v) => assert_eq!(free_objects_kept_as_text(&v), (0, 1), "{memory}"),
                Err(e) => assert!(e.is_syntax(), "{memory}: {e}"),
            }
        }
        let with_depth = |n: usize| {
            let deep = "[".repeat(n) + &"]".repeat(n);
            let body = format!(
                r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{{"a":{deep}}}}}]}}"#
            );
            free_objects_kept_as_text(&parse_shaped_request(body.as_bytes()).unwrap())
        };
        assert_eq!(with_depth(254), (1, 0));
        // 255 empty-innermost containers still validate, so may stay text.
        assert_eq!(with_depth(255), (1, 0));
        assert_eq!(with_depth(256), (0, 1));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2000))]

        /// Keeping clean objects as text never changes a verdict or a value.
        #[test]
        fn the_text_path_agrees_with_the_tree_path(value in tricky_text(), deep in 0usize..3) {
            let value = match deep {
                1 => format!("{}{value}{}", "[".repeat(253), "]".repeat(253)),
                2 => format!("{}{value}{}", "[".repeat(254), "]".repeat(254)),
                _ => value,
            };
            let body = format!(
                r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":""}},"memory":{{"m":{value}}},"attributes":{value2}}}]}}"#,
                value2 = if value.starts_with('{') { value.as_str() } else { "{}" },
            );
            let fast = parse_shaped_request(body.as_bytes()).and_then(AgentRequest::from_json);
            let slow = parse(body.as_bytes(), READ)
                .map_err(Error::from)
                .and_then(AgentRequest::from_json);
            match (fast, slow) {
                (Ok(a), Ok(b)) => {
                    // Same value, and the kept text reads back the same
                    // (a duplicate key kept verbatim would differ here).
                    let (ta, tb) = (a.to_json_string(), b.to_json_string());
                    proptest::prop_assert_eq!(&a, &b);
                    let back = parse(ta.as_bytes(), READ).unwrap();
                    proptest::prop_assert_eq!(&back, &parse(tb.as_bytes(), READ).unwrap());
                    proptest::prop_assert!(crate::duplicate_keys(ta.as_bytes()).unwrap().is_empty());
                    proptest::prop_assert_eq!(
                        Json::from_slice(ta.as_bytes()).map(|v| v.to_json_string()).ok(),
                        Some(tb),
                    );
                }
                (Err(a), Err(b)) => proptest::prop_assert_eq!(a.issues(), b.issues()),
                (a, b) => proptest::prop_assert!(false, "paths disagree on {body}: {a:?} vs {b:?}"),
            }
        }
    }
}
