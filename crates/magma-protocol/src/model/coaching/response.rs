//! The answer to `POST /v1/coaching`: [`SpecializedCoachingResponse`], its
//! [`CoachingStatus`], [`CoachingProposal`]s and [`CoachingLog`]s; the
//! validator with the reference's status rule, `validate_request`, and the
//! writer.

use crate::error::{Error, ErrorKind, Issue};
use crate::json::write::write_str;
use crate::json::{Json, Location, Object, Segment, Shape, WriteJson, to_value};
use crate::limits::READ;
use crate::validate::{
    Fields, NonEmptyString, Validate, Validation, free_object, list, literal, model_object,
    non_empty, opt_str, pattern_str, strict_str,
};

use super::{CoachingPayload, SpecializedCoachingRequest};

/// Where a coaching reply holds free-form objects, for the parser.
const SHAPE: Shape = Shape::Fields(&[("proposals", Shape::List(&PROPOSAL_SHAPE))]);
const PROPOSAL_SHAPE: Shape = Shape::Fields(&[("extra_keys", Shape::FreeObject)]);

const MODEL: &str = "SpecializedCoachingResponse";
const LOG_PATTERN: &str = "^[a-z][a-z0-9_]*$";

/// `^[a-z][a-z0-9_]*$`, where `$` is the very end (`"failure\n"` fails).
fn is_log_type(s: &str) -> bool {
    let mut bytes = s.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

/// `status` of a coaching reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoachingStatus {
    /// `"corrected"`: at least one proposal.
    Corrected,
    /// `"abandoned"`: the coach could not build a proposal; a reason says why.
    Abandoned,
    /// `"error"`: the coach failed; a reason says why.
    Error,
}

impl CoachingStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CoachingStatus::Corrected => "corrected",
            CoachingStatus::Abandoned => "abandoned",
            CoachingStatus::Error => "error",
        }
    }
}

impl std::fmt::Display for CoachingStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A repair: what to re-inject at one reinjection point.
///
/// `extra_keys` **is the payload itself** (`{"kind": "replace_say", "text":
/// …}`): GEN re-injects a proposal by copying the point's input and setting
/// its `extra_keys["coaching"]` to the proposal's `extra_keys`
/// (`AgentCoachingManager._create_injected_node`), with `num_outputs` 1. Build
/// proposals with [`CoachingProposal::new`] from a typed
/// [`CoachingPayload`], so the agent finds at `extra_keys.coaching` a payload
/// it can read; [`CoachingProposal::raw`] takes any object, for tools that
/// must carry whatever a coach sent.
#[derive(Debug, Clone, PartialEq)]
pub struct CoachingProposal {
    /// The id of one of the request's reinjection points.
    pub reinjection_point_id: String,
    /// The payload, as GEN will send it back in `extra_keys.coaching`.
    pub extra_keys: Object,
}

impl CoachingProposal {
    /// A proposal for the point `reinjection_point_id` whose `extra_keys` is
    /// `payload` (a [`ReplaceSay`](super::ReplaceSay), a
    /// [`CoachingPayload::replace_decision`], or the agent's own
    /// [`CustomPayload`](super::CustomPayload)).
    pub fn new(
        reinjection_point_id: impl Into<String>,
        payload: impl Into<CoachingPayload>,
    ) -> Self {
        CoachingProposal {
            reinjection_point_id: reinjection_point_id.into(),
            extra_keys: payload.into().to_object(),
        }
    }

    /// A proposal with any `extra_keys`, unchecked. A proposal GEN can
    /// re-inject is a payload (see [`CoachingProposal::new`]); `magma-validate
    /// check --kind coaching_response` warns on one that is not.
    pub fn raw(reinjection_point_id: impl Into<String>, extra_keys: Object) -> Self {
        CoachingProposal {
            reinjection_point_id: reinjection_point_id.into(),
            extra_keys,
        }
    }

    /// `extra_keys` read as a payload: what the agent will find at
    /// `extra_keys.coaching` when GEN re-injects this proposal. An error
    /// (for example `kind: Field required` for a payload wrapped in a
    /// `coaching` key) is what the agent's own reader will say.
    pub fn payload(&self) -> Result<CoachingPayload, Error> {
        CoachingPayload::from_json(&Json::Object(self.extra_keys.clone()))
    }
}

/// A log of the coach, returned to the caller (`coaching_type` matches
/// `^[a-z][a-z0-9_]*$`, which is why the fields are reached through methods).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoachingLog {
    coaching_type: String,
    content: String,
}

impl CoachingLog {
    /// A log; fails, as the parser would, when `coaching_type` does not
    /// match `^[a-z][a-z0-9_]*$`.
    pub fn new(
        coaching_type: impl Into<String>,
        content: impl Into<String>,
    ) -> Result<Self, Error> {
        let coaching_type = coaching_type.into();
        let mut cx = Validation::new("CoachingLog");
        let ty = cx.at_field("coaching_type", |cx| {
            pattern_str(Json::String(coaching_type), cx, LOG_PATTERN, is_log_type)
        });
        cx.finish_opt(ty.map(|coaching_type| CoachingLog {
            coaching_type,
            content: content.into(),
        }))
    }

    /// What the log is about, e.g. `prompt` or `markdown`.
    pub fn coaching_type(&self) -> &str {
        &self.coaching_type
    }

    /// The text.
    pub fn content(&self) -> &str {
        &self.content
    }
}

/// A `POST /v1/coaching` reply: always valid (`corrected` has proposals;
/// `abandoned` and `error` have a non-empty reason and no proposals), which
/// is why its fields are reached through methods.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecializedCoachingResponse {
    logs: Vec<CoachingLog>,
    request_id: NonEmptyString,
    status: CoachingStatus,
    proposals: Vec<CoachingProposal>,
    reason: Option<String>,
}

impl SpecializedCoachingResponse {
    /// A `corrected` reply; fails on an empty `request_id` or no proposals.
    pub fn corrected(
        request_id: impl Into<String>,
        proposals: Vec<CoachingProposal>,
    ) -> Result<Self, Error> {
        Self::build(
            request_id.into(),
            CoachingStatus::Corrected,
            proposals,
            None,
        )
    }

    /// An `abandoned` reply; fails on an empty `request_id` or `reason`.
    pub fn abandoned(
        request_id: impl Into<String>,
        reason: impl Into<String>,
    ) -> Result<Self, Error> {
        Self::build(
            request_id.into(),
            CoachingStatus::Abandoned,
            Vec::new(),
            Some(reason.into()),
        )
    }

    /// An `error` reply; fails on an empty `request_id` or `reason`.
    pub fn error(request_id: impl Into<String>, reason: impl Into<String>) -> Result<Self, Error> {
        Self::build(
            request_id.into(),
            CoachingStatus::Error,
            Vec::new(),
            Some(reason.into()),
        )
    }

    fn build(
        request_id: String,
        status: CoachingStatus,
        proposals: Vec<CoachingProposal>,
        reason: Option<String>,
    ) -> Result<Self, Error> {
        let mut cx = Validation::new(MODEL);
        let request_id = cx.at_field("request_id", |cx| non_empty(Json::String(request_id), cx));
        let Some(request_id) = request_id else {
            return cx.finish_opt(None);
        };
        let reply = SpecializedCoachingResponse {
            logs: Vec::new(),
            request_id,
            status,
            proposals,
            reason,
        };
        if let Some(issue) = status_issue(&reply) {
            cx.push(issue);
        }
        cx.finish(reply)
    }

    /// Sets the logs.
    pub fn with_logs(mut self, logs: Vec<CoachingLog>) -> Self {
        self.logs = logs;
        self
    }

    /// Appends a log.
    pub fn push_log(&mut self, log: CoachingLog) {
        self.logs.push(log);
    }

    /// The coach's logs.
    pub fn logs(&self) -> &[CoachingLog] {
        &self.logs
    }

    /// Echo of the request's id.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The status.
    pub fn status(&self) -> CoachingStatus {
        self.status
    }

    /// The proposals (none unless `corrected`).
    pub fn proposals(&self) -> &[CoachingProposal] {
        &self.proposals
    }

    /// Why the coach abandoned or failed (may also be set when `corrected`).
    pub fn reason(&self) -> Option<&str> {
        self.reason.as_deref()
    }

    /// The reference's `validate_request`: the reply answers `request` when
    /// it echoes its `request_id` and every proposal names one of its
    /// reinjection points. The error's kind is
    /// [`ErrorKind::CoachingMismatch`], at `request_id` or at the
    /// proposal's `reinjection_point_id`, with the reference's message.
    pub fn validate_request(&self, request: &SpecializedCoachingRequest) -> Result<(), Error> {
        if self.request_id() != request.request_id() {
            let issue = Issue::new(
                ErrorKind::CoachingMismatch,
                Location::from(vec![Segment::Key("request_id".into())]),
                "Coaching request id mismatch",
            )
            .with_input(Json::from(self.request_id()))
            .with_ctx("expected", Json::from(request.request_id()));
            return Err(Error::new(MODEL, vec![issue]));
        }
        let points = request.reinjection_points();
        for (i, proposal) in self.proposals.iter().enumerate() {
            if !points
                .iter()
                .any(|p| p.id() == proposal.reinjection_point_id)
            {
                let issue = Issue::new(
                    ErrorKind::CoachingMismatch,
                    Location::from(vec![
                        Segment::Key("proposals".into()),
                        Segment::Index(i),
                        Segment::Key("reinjection_point_id".into()),
                    ]),
                    "Unknown reinjection point",
                )
                .with_input(Json::from(proposal.reinjection_point_id.as_str()));
                return Err(Error::new(MODEL, vec![issue]));
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Validation, field by field in the reference's declaration order

impl Validate for CoachingLog {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "CoachingLog", cx)?;
        let mut f = Fields::new(obj, &["coaching_type", "content"], cx);
        let ty = f.required("coaching_type", cx, |v, cx| {
            pattern_str(v, cx, LOG_PATTERN, is_log_type)
        });
        let content = f.required("content", cx, strict_str);
        f.finish(cx).then_some(())?;
        Some(CoachingLog {
            coaching_type: ty?,
            content: content?,
        })
    }
}

impl Validate for CoachingProposal {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "CoachingProposal", cx)?;
        let mut f = Fields::new(obj, &["reinjection_point_id", "extra_keys"], cx);
        let id = f.required("reinjection_point_id", cx, strict_str);
        let extra_keys = f.required("extra_keys", cx, free_object);
        f.finish(cx).then_some(())?;
        Some(CoachingProposal {
            reinjection_point_id: id?,
            extra_keys: extra_keys?,
        })
    }
}

fn status(v: Json, cx: &mut Validation) -> Option<CoachingStatus> {
    literal(v, cx, &["corrected", "abandoned", "error"]).map(|i| match i {
        0 => CoachingStatus::Corrected,
        1 => CoachingStatus::Abandoned,
        _ => CoachingStatus::Error,
    })
}

fn response(v: Json, cx: &mut Validation) -> Option<SpecializedCoachingResponse> {
    let obj = model_object(v, MODEL, cx)?;
    let mut f = Fields::new(obj, &["request_id", "status"], cx);
    let logs = f.optional("logs", cx, Vec::new, |v, cx| {
        list(v, cx, CoachingLog::validate)
    });
    let request_id = f.required("request_id", cx, non_empty);
    let status = f.required("status", cx, status);
    let proposals = f.optional("proposals", cx, Vec::new, |v, cx| {
        list(v, cx, CoachingProposal::validate)
    });
    let reason = f.optional("reason", cx, || None, opt_str);
    f.finish(cx).then_some(())?;
    let reply = SpecializedCoachingResponse {
        logs: logs?,
        request_id: request_id?,
        status: status?,
        proposals: proposals?,
        reason: reason?,
    };
    if let Some(issue) = status_issue(&reply) {
        cx.push(issue);
        return None;
    }
    Some(reply)
}

/// The reference's `validate_status` rule, reported at the root.
fn status_issue(reply: &SpecializedCoachingResponse) -> Option<Issue> {
    let msg = match reply.status {
        CoachingStatus::Corrected if reply.proposals.is_empty() => {
            "Value error, A correction requires proposals"
        }
        CoachingStatus::Corrected => return None,
        _ if !reply.proposals.is_empty() || reply.reason.as_deref().is_none_or(str::is_empty) => {
            "Value error, Abandon/error requires a reason and no proposals"
        }
        _ => return None,
    };
    Some(Issue::new(ErrorKind::ValueError, Location::root(), msg).with_input(to_value(reply, READ)))
}

// ---------------------------------------------------------------------------
// Writing, every field in the reference's order

impl WriteJson for CoachingLog {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"coaching_type\":");
        write_str(out, &self.coaching_type);
        out.push_str(",\"content\":");
        write_str(out, &self.content);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        32 + self.coaching_type.len() + self.content.len()
    }
}

impl WriteJson for CoachingProposal {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"reinjection_point_id\":");
        write_str(out, &self.reinjection_point_id);
        out.push_str(",\"extra_keys\":");
        self.extra_keys.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        44 + self.reinjection_point_id.len() + self.extra_keys.size_hint()
    }
}

impl WriteJson for SpecializedCoachingResponse {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"logs\":");
        self.logs.write_json(out);
        out.push_str(",\"request_id\":");
        write_str(out, &self.request_id);
        out.push_str(",\"status\":\"");
        out.push_str(self.status.as_str());
        out.push_str("\",\"proposals\":");
        self.proposals.write_json(out);
        out.push_str(",\"reason\":");
        self.reason.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        80 + self.logs.size_hint()
            + self.request_id.len()
            + self.proposals.size_hint()
            + self.reason.size_hint()
    }
}

document!(SpecializedCoachingResponse, &SHAPE, response);
document!(CoachingLog, &Shape::Any, CoachingLog::validate);
document!(
    CoachingProposal,
    &PROPOSAL_SHAPE,
    CoachingProposal::validate
);

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::{CoachingLog, CoachingProposal, LOG_PATTERN, SpecializedCoachingResponse};
    use crate::json::{Json, Object};
    use crate::json_schema::{HasSchema, Refs, S, free_form, model, non_empty, nullable, strings};

    impl HasSchema for CoachingLog {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "CoachingLog",
                "A log of the coach.",
                vec![
                    (
                        "coaching_type",
                        S::ty("string")
                            .set("pattern", LOG_PATTERN)
                            .doc("What the log is about; `$` is the very end of the string."),
                    ),
                    ("content", S::ty("string").doc("The text.")),
                ],
                &["coaching_type", "content"],
            )
        }
    }

    impl HasSchema for CoachingProposal {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "CoachingProposal",
                "A repair: what to re-inject at one reinjection point.",
                vec![
                    (
                        "reinjection_point_id",
                        S::ty("string").doc("The id of one of the request's reinjection points."),
                    ),
                    (
                        "extra_keys",
                        S::ty("object").doc(&free_form(
                            "The payload GEN re-injects as `extra_keys.coaching`.",
                        )),
                    ),
                ],
                &["reinjection_point_id", "extra_keys"],
            )
        }
    }

    impl HasSchema for SpecializedCoachingResponse {
        fn schema(refs: &Refs<'_>) -> Object {
            model(
                "SpecializedCoachingResponse",
                "The body of a 200 answer to `POST /v1/coaching`. Not expressible here: \
                 `corrected` needs at least one proposal; `abandoned` and `error` need a \
                 non-empty `reason` and no proposals; `request_id` echoes the request's and \
                 every proposal names one of its reinjection points (`validate_request`).",
                vec![
                    (
                        "logs",
                        S::ty("array")
                            .set("items", refs.to("CoachingLog"))
                            .set("default", Json::Array(Vec::new()))
                            .doc("The coach's logs."),
                    ),
                    ("request_id", non_empty("Echo of the request's id.")),
                    (
                        "status",
                        S::ty("string")
                            .set("enum", strings(&["corrected", "abandoned", "error"]))
                            .doc("The outcome."),
                    ),
                    (
                        "proposals",
                        S::ty("array")
                            .set("items", refs.to("CoachingProposal"))
                            .set("default", Json::Array(Vec::new()))
                            .doc("The proposals (none unless `corrected`)."),
                    ),
                    (
                        "reason",
                        nullable(S::ty("string"), "Why the coach abandoned or failed."),
                    ),
                ],
                &["request_id", "status"],
            )
        }
    }
}
