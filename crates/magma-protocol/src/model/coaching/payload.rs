//! What a coach proposes and a coached agent later finds in
//! `extra_keys.coaching` of an inference: [`ReplaceSay`] (the reference's
//! model), full-history's `replace_decision`, and an agent's own kinds
//! ([`CustomPayload`]), read together as a [`CoachingPayload`].
//!
//! One payload travels twice. The coach answers a proposal whose
//! `extra_keys` **is** the payload (`{"kind": "replace_say", "text": …}`);
//! GEN (`AgentCoachingManager._create_injected_node`) copies the original
//! input's `extra_keys` and sets `extra_keys["coaching"]` to the proposal's
//! `extra_keys`, so the agent finds the same object at
//! `extra_keys.coaching`. A proposal that wraps its payload in a `coaching`
//! key reaches the agent as `extra_keys.coaching.coaching`.

use crate::AgentDecision;
use crate::error::{Error, ErrorKind};
use crate::json::write::write_str;
use crate::json::{Json, Object, Shape, WriteJson, to_value};
use crate::limits::READ;
use crate::validate::{
    Fields, NonEmptyString, Validate, Validation, literal, model_object, non_empty, strict_str,
};

/// The `replace_say` payload: say exactly `text` instead of what the model
/// would say. `kind` is always `"replace_say"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplaceSay {
    /// The text to say, non-empty.
    pub text: NonEmptyString,
}

impl ReplaceSay {
    /// The `kind` of this payload.
    pub const KIND: &'static str = "replace_say";

    /// A payload; fails, as the parser would, on an empty text.
    pub fn new(text: impl Into<String>) -> Result<Self, Error> {
        let mut cx = Validation::new("ReplaceSay");
        let text = cx.at_field("text", |cx| non_empty(Json::String(text.into()), cx));
        cx.finish_opt(text.map(|text| ReplaceSay { text }))
    }

    /// `{"kind":"replace_say","text":…}`: the `extra_keys` of a proposal,
    /// and the value of `extra_keys.coaching` when GEN re-injects it.
    pub fn to_object(&self) -> Object {
        let mut o = Object::with_capacity(2);
        o.insert("kind", Json::from(Self::KIND));
        o.insert("text", Json::from(self.text.as_str()));
        o
    }
}

/// A payload: the `extra_keys` of a [`CoachingProposal`](super::CoachingProposal),
/// and the value of `extra_keys.coaching` when GEN re-injects that proposal.
///
/// Build proposals from it ([`CoachingProposal::new`](super::CoachingProposal::new)),
/// so that what GEN sends back is a payload the agent can read:
///
/// ```
/// use magma_protocol::{AgentDecision, Json, NonEmptyString, Object, ToolCall};
/// use magma_protocol::coaching::{CoachingPayload, CoachingProposal, CustomPayload, ReplaceSay};
///
/// let say = CoachingProposal::new("replacement", ReplaceSay::new("Done.").unwrap());
/// assert_eq!(Json::Object(say.extra_keys.clone()).to_json_string(),
///            r#"{"kind":"replace_say","text":"Done."}"#);
///
/// let call = ToolCall {
///     name: NonEmptyString::new("press_button").unwrap(),
///     arguments: Object::new(),
///     target_robot_name: NonEmptyString::new("panda").unwrap(),
/// };
/// let decision = CoachingPayload::replace_decision(AgentDecision::call(vec![call])).unwrap();
/// let fix = CoachingProposal::new("recovery", decision.clone());
/// assert_eq!(fix.payload().unwrap(), decision);
///
/// // An agent's own kind, for state only it reads back.
/// let own = CustomPayload::new("retry_with_plan", Default::default()).unwrap();
/// assert_eq!(CoachingProposal::new("replacement", own).payload().unwrap().kind(), "retry_with_plan");
/// ```
///
/// Reading one (the agent's side):
///
/// ```
/// use magma_protocol::Json;
/// use magma_protocol::coaching::CoachingPayload;
///
/// let v = Json::from_slice(br#"{"kind": "replace_say", "text": "Done."}"#).unwrap();
/// let CoachingPayload::ReplaceSay(say) = CoachingPayload::from_json(&v).unwrap() else {
///     panic!("a replace_say payload");
/// };
/// assert_eq!(say.text, "Done.");
///
/// let bad = Json::from_slice(br#"{"kind": "replace_decision", "decision": {"say": ""}}"#).unwrap();
/// let err = CoachingPayload::from_json(&bad).unwrap_err();
/// assert_eq!(err.first().location().to_string(), "decision");
///
/// // The wrapped shape has no `kind`: GEN would send `extra_keys.coaching.coaching`.
/// let wrapped = Json::from_slice(br#"{"coaching": {"kind": "replace_say", "text": "x"}}"#).unwrap();
/// assert_eq!(CoachingPayload::from_json(&wrapped).unwrap_err().first().location().to_string(), "kind");
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CoachingPayload {
    /// `{"kind":"replace_say","text":…}`: say exactly this text. Every
    /// agent that advertises `coaching_resume` must take it: GEN's own
    /// text-only coach re-injects it.
    ReplaceSay(ReplaceSay),
    /// `{"kind":"replace_decision","decision":{…}}` (full-history's coach,
    /// and GEN's manual coach mode): make exactly this decision, which has
    /// exactly one of a non-empty `say` or tool calls.
    ReplaceDecision(AgentDecision),
    /// An agent's own kind (any other non-empty `kind`), with its other keys
    /// as they are: only the agent that proposed it can read it.
    Custom(CustomPayload),
}

impl From<ReplaceSay> for CoachingPayload {
    fn from(say: ReplaceSay) -> Self {
        CoachingPayload::ReplaceSay(say)
    }
}

impl From<CustomPayload> for CoachingPayload {
    fn from(custom: CustomPayload) -> Self {
        CoachingPayload::Custom(custom)
    }
}

impl CoachingPayload {
    /// The `kind` of a `replace_decision` payload.
    pub const REPLACE_DECISION: &'static str = "replace_decision";

    /// A `replace_say` payload; fails on an empty text.
    pub fn replace_say(text: impl Into<String>) -> Result<Self, Error> {
        ReplaceSay::new(text).map(CoachingPayload::ReplaceSay)
    }

    /// A `replace_decision` payload; fails, at `decision`, unless the
    /// decision has exactly one of a non-empty `say` or tool calls (GEN
    /// treats a decision with both, or neither, as an invalid answer).
    pub fn replace_decision(decision: AgentDecision) -> Result<Self, Error> {
        let mut cx = Validation::new("CoachingPayload");
        let decision = cx.at_field("decision", |cx| one_of_say_or_calls(decision, cx));
        cx.finish_opt(decision.map(CoachingPayload::ReplaceDecision))
    }

    /// The payload's `kind`.
    pub fn kind(&self) -> &str {
        match self {
            CoachingPayload::ReplaceSay(_) => ReplaceSay::KIND,
            CoachingPayload::ReplaceDecision(_) => Self::REPLACE_DECISION,
            CoachingPayload::Custom(custom) => custom.kind(),
        }
    }

    /// The decision the payload asks the agent to make, when it says
    /// (`replace_say`: that text and no tool call; `replace_decision`: that
    /// decision). `None` for an agent's own kind.
    pub fn decision(&self) -> Option<AgentDecision> {
        match self {
            CoachingPayload::ReplaceSay(say) => Some(AgentDecision::say(say.text.as_str())),
            CoachingPayload::ReplaceDecision(decision) => Some(decision.clone()),
            CoachingPayload::Custom(_) => None,
        }
    }

    /// Reads a payload (a proposal's `extra_keys`, or the value of
    /// `extra_keys.coaching`). An object without a string `kind` (the
    /// wrapped `{"coaching": {…}}` shape among them), an empty `kind`, an
    /// invalid `replace_say` or `replace_decision` (a decision with both or
    /// neither of `say` and tool calls, an unknown key) is an error with its
    /// location in the payload. Any other `kind` is an agent's own
    /// ([`CoachingPayload::Custom`]).
    pub fn from_json(value: &Json) -> Result<Self, Error> {
        Validation::document("CoachingPayload", value.clone(), payload)
    }

    /// The payload in `extra_keys.coaching`, if there is one.
    pub fn from_extra_keys(extra_keys: &Object) -> Option<Result<Self, Error>> {
        extra_keys.get("coaching").map(Self::from_json)
    }

    /// The payload as a JSON object.
    pub fn to_object(&self) -> Object {
        match self {
            CoachingPayload::ReplaceSay(say) => say.to_object(),
            CoachingPayload::ReplaceDecision(decision) => {
                let mut o = Object::with_capacity(2);
                o.insert("kind", Json::from(Self::REPLACE_DECISION));
                o.insert("decision", to_value(decision, READ));
                o
            }
            CoachingPayload::Custom(custom) => custom.to_object(),
        }
    }
}

/// An agent's own payload kind: `{"kind": K, …}` with any `K` other than
/// `replace_say` and `replace_decision`, and the other keys kept as they are.
/// GEN hands it back to the agent unread; nothing but the agent that proposed
/// it can act on it, so an agent that meets a kind it does not know answers
/// an `error` candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomPayload {
    /// The whole payload, `kind` among its keys, in the order it came.
    object: Object,
}

impl CustomPayload {
    /// A payload of the agent's own `kind` with `fields` beside it. Fails on
    /// an empty `kind`, on the two standard kinds (build those with
    /// [`ReplaceSay`] and [`CoachingPayload::replace_decision`], which check
    /// them), and on a `kind` key in `fields`.
    pub fn new(kind: impl Into<String>, fields: Object) -> Result<Self, Error> {
        let mut cx = Validation::new("CoachingPayload");
        let kind = cx.at_field("kind", |cx| {
            let kind = non_empty(Json::String(kind.into()), cx)?;
            if matches!(
                kind.as_str(),
                ReplaceSay::KIND | CoachingPayload::REPLACE_DECISION
            ) {
                cx.report(
                    ErrorKind::ValueError,
                    "Value error, a standard kind is built with its own type \
                     (ReplaceSay, CoachingPayload::replace_decision)",
                    Json::from(kind.as_str()),
                );
                return None;
            }
            Some(kind)
        });
        if let Some(k) = fields.get("kind") {
            let k = k.clone();
            cx.at_field("kind", |cx| {
                cx.report(
                    ErrorKind::ValueError,
                    "Value error, `kind` is given once, as the first argument",
                    k,
                );
            });
        }
        let ok = cx.count() == 0;
        let object = kind.filter(|_| ok).map(|kind| {
            let mut o = Object::with_capacity(1 + fields.len());
            o.insert("kind", Json::from(kind.as_str()));
            for (k, v) in fields {
                o.insert(k, v);
            }
            CustomPayload { object: o }
        });
        cx.finish_opt(object)
    }

    /// The agent's kind.
    pub fn kind(&self) -> &str {
        self.object.get_str("kind").unwrap_or_default()
    }

    /// A key of the payload (`kind` included).
    pub fn get(&self, key: &str) -> Option<&Json> {
        self.object.get(key)
    }

    /// The whole payload, `kind` included, keys in the order they came.
    pub fn as_object(&self) -> &Object {
        &self.object
    }

    /// The whole payload as a JSON object.
    pub fn to_object(&self) -> Object {
        self.object.clone()
    }
}

fn replace_say(v: Json, cx: &mut Validation) -> Option<ReplaceSay> {
    let obj = model_object(v, "ReplaceSay", cx)?;
    let mut f = Fields::new(obj, &["text"], cx);
    let kind = f.optional(
        "kind",
        cx,
        || 0,
        |v, cx| literal(v, cx, &[ReplaceSay::KIND]),
    );
    let text = f.required("text", cx, non_empty);
    f.finish(cx).then_some(())?;
    kind?;
    Some(ReplaceSay { text: text? })
}

fn payload(v: Json, cx: &mut Validation) -> Option<CoachingPayload> {
    let obj = model_object(v, "CoachingPayload", cx)?;
    let kind = match obj.get("kind") {
        Some(Json::String(k)) if k.is_empty() => {
            let k = Json::from(k.as_str());
            cx.at_field("kind", |cx| non_empty(k, cx));
            return None;
        }
        Some(Json::String(k)) => k.clone(),
        Some(other) => {
            let other = other.clone();
            cx.at_field("kind", |cx| strict_str(other, cx))?;
            return None;
        }
        None => {
            let input = Json::Object(obj);
            cx.at_field("kind", |cx| {
                cx.report(ErrorKind::Missing, "Field required", input);
            });
            return None;
        }
    };
    match kind.as_str() {
        ReplaceSay::KIND => replace_say(Json::Object(obj), cx).map(CoachingPayload::ReplaceSay),
        CoachingPayload::REPLACE_DECISION => {
            let mut f = Fields::new(obj, &["decision"], cx);
            f.required("kind", cx, |_, _| Some(()));
            let decision = f.required("decision", cx, AgentDecision::validate);
            f.finish(cx).then_some(())?;
            let decision = cx.at_field("decision", |cx| one_of_say_or_calls(decision?, cx))?;
            Some(CoachingPayload::ReplaceDecision(decision))
        }
        _ => Some(CoachingPayload::Custom(CustomPayload { object: obj })),
    }
}

/// `decision` when it has exactly one of a non-empty `say` or tool calls.
fn one_of_say_or_calls(decision: AgentDecision, cx: &mut Validation) -> Option<AgentDecision> {
    let says = !decision.say.is_empty();
    let calls = !decision.tool_calls.is_empty();
    if says == calls {
        cx.report(
            ErrorKind::ValueError,
            "Value error, A replacement decision needs exactly one of a non-empty say or tool calls",
            to_value(&decision, READ),
        );
        return None;
    }
    Some(decision)
}

impl WriteJson for ReplaceSay {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"kind\":\"replace_say\",\"text\":");
        write_str(out, &self.text);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        32 + self.text.len()
    }
}

impl Validate for ReplaceSay {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        replace_say(v, cx)
    }
}

document!(ReplaceSay, &Shape::Any, replace_say);

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::ReplaceSay;
    use crate::json::Object;
    use crate::json_schema::{HasSchema, Refs, S, model, non_empty};

    impl HasSchema for ReplaceSay {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "ReplaceSay",
                "The `replace_say` payload of a proposal (`extra_keys`), re-injected as \
                 `extra_keys.coaching`: say exactly `text`.",
                vec![
                    (
                        "kind",
                        S::ty("string")
                            .set("const", "replace_say")
                            .set("default", "replace_say")
                            .doc("Always `replace_say`."),
                    ),
                    ("text", non_empty("The text to say.")),
                ],
                &["text"],
            )
        }
    }
}
