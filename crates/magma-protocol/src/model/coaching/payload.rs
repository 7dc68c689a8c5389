//! What a coached agent finds in `extra_keys.coaching` of an inference:
//! [`ReplaceSay`] (the reference's model) and full-history's
//! `replace_decision`, read together as a [`CoachingPayload`].

use crate::AgentDecision;
use crate::error::{Error, ErrorKind};
use crate::json::write::write_str;
use crate::json::{Json, Object, Shape, WriteJson, to_value};
use crate::limits::READ;
use crate::validate::{
    Fields, NonEmptyString, Validate, Validation, literal, model_object, non_empty,
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

/// A payload of `extra_keys.coaching`, as GEN re-injects a proposal.
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
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CoachingPayload {
    /// `{"kind":"replace_say","text":…}`: say exactly this text.
    ReplaceSay(ReplaceSay),
    /// `{"kind":"replace_decision","decision":{…}}` (full-history's, used
    /// by GEN's manual coach mode): make exactly this decision, which has
    /// exactly one of a non-empty `say` or tool calls.
    ReplaceDecision(AgentDecision),
}

impl CoachingPayload {
    /// The `kind` of a `replace_decision` payload.
    pub const REPLACE_DECISION: &'static str = "replace_decision";

    /// Reads a payload (the value of `extra_keys.coaching`). Anything else
    /// (not an object, an unknown `kind`, an invalid decision, a decision
    /// with both or neither of `say` and tool calls, an unknown key) is an
    /// error with its location in the payload.
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
        }
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
    let kinds = [ReplaceSay::KIND, CoachingPayload::REPLACE_DECISION];
    let kind = match obj.get("kind") {
        Some(k) => cx.at_field("kind", |cx| literal(k.clone(), cx, &kinds))?,
        None => {
            let input = Json::Object(obj);
            cx.at_field("kind", |cx| {
                cx.report(ErrorKind::Missing, "Field required", input);
            });
            return None;
        }
    };
    if kind == 0 {
        return replace_say(Json::Object(obj), cx).map(CoachingPayload::ReplaceSay);
    }
    let mut f = Fields::new(obj, &["decision"], cx);
    f.required("kind", cx, |_, _| Some(()));
    let decision = f.required("decision", cx, AgentDecision::validate);
    f.finish(cx).then_some(())?;
    let decision = decision?;
    let says = !decision.say.is_empty();
    let calls = !decision.tool_calls.is_empty();
    if says == calls {
        cx.at_field("decision", |cx| {
            cx.report(
                ErrorKind::ValueError,
                "Value error, A replacement decision needs exactly one of a non-empty say or tool calls",
                to_value(&decision, READ),
            );
        });
        return None;
    }
    Some(CoachingPayload::ReplaceDecision(decision))
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
