//! Validation errors: every problem in a document, each with a location and
//! a stable kind, renderable as the FastAPI/pydantic 422 body.

use std::borrow::Cow;
use std::fmt;
use std::sync::{Arc, OnceLock};

use crate::json::write::{WriteJson, write_str};
use crate::json::{
    Json, Limits, Location, Object, Parts, Position, SyntaxError, parse, segment_json,
};

/// The stable kind of one problem. Its [`as_str`](ErrorKind::as_str) name is
/// the pydantic error `type` the reference reports for the same problem.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The body is not one JSON document (`json_invalid`).
    JsonInvalid,
    /// A required field is absent (`missing`).
    Missing,
    /// A field the model does not declare (`extra_forbidden`).
    ExtraForbidden,
    /// An object was expected for a model (`model_type`).
    ModelType,
    /// An object was expected (`dict_type`).
    DictType,
    /// An array was expected (`list_type`).
    ListType,
    /// A string was expected (`string_type`).
    StringType,
    /// An integer was expected; floats, strings and booleans are refused (`int_type`).
    IntType,
    /// A boolean was expected (`bool_type`).
    BoolType,
    /// Not one of the allowed literal strings (`literal_error`).
    LiteralError,
    /// A string shorter than its minimum (`string_too_short`).
    StringTooShort,
    /// A number not greater than the bound (`greater_than`).
    GreaterThan,
    /// A number below the bound (`greater_than_equal`).
    GreaterThanEqual,
    /// NaN or an infinity (`finite_number`).
    FiniteNumber,
    /// A free-form value nested deeper than the reference allows
    /// (`recursion_depth_exceeded`).
    RecursionDepthExceeded,
    /// A model-level rule failed, e.g. duplicate input ids (`value_error`).
    ValueError,
    /// An integer beyond the 64-bit range of a typed field
    /// (`int_out_of_range`; the reference's integers are unbounded, see
    /// `docs/conformance.md`).
    IntOutOfRange,
    /// The candidates of a response do not match the request
    /// (`candidates_mismatch`).
    CandidatesMismatch,
    /// A number was expected; strings and booleans are refused (`float_type`).
    FloatType,
    /// A string that does not match its pattern (`string_pattern_mismatch`).
    StringPatternMismatch,
    /// A coaching reply does not answer its request: another `request_id`,
    /// or a proposal for an unknown reinjection point (`coaching_mismatch`).
    CoachingMismatch,
}

impl ErrorKind {
    /// Every kind, in declaration order (`docs/validator.md` documents each;
    /// a test of magma-validator checks it).
    pub const ALL: [ErrorKind; 21] = [
        ErrorKind::JsonInvalid,
        ErrorKind::Missing,
        ErrorKind::ExtraForbidden,
        ErrorKind::ModelType,
        ErrorKind::DictType,
        ErrorKind::ListType,
        ErrorKind::StringType,
        ErrorKind::IntType,
        ErrorKind::BoolType,
        ErrorKind::LiteralError,
        ErrorKind::StringTooShort,
        ErrorKind::GreaterThan,
        ErrorKind::GreaterThanEqual,
        ErrorKind::FiniteNumber,
        ErrorKind::RecursionDepthExceeded,
        ErrorKind::ValueError,
        ErrorKind::IntOutOfRange,
        ErrorKind::CandidatesMismatch,
        ErrorKind::FloatType,
        ErrorKind::StringPatternMismatch,
        ErrorKind::CoachingMismatch,
    ];

    /// The stable name, equal to the pydantic error type where one exists.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::JsonInvalid => "json_invalid",
            ErrorKind::Missing => "missing",
            ErrorKind::ExtraForbidden => "extra_forbidden",
            ErrorKind::ModelType => "model_type",
            ErrorKind::DictType => "dict_type",
            ErrorKind::ListType => "list_type",
            ErrorKind::StringType => "string_type",
            ErrorKind::IntType => "int_type",
            ErrorKind::BoolType => "bool_type",
            ErrorKind::LiteralError => "literal_error",
            ErrorKind::StringTooShort => "string_too_short",
            ErrorKind::GreaterThan => "greater_than",
            ErrorKind::GreaterThanEqual => "greater_than_equal",
            ErrorKind::FiniteNumber => "finite_number",
            ErrorKind::RecursionDepthExceeded => "recursion_depth_exceeded",
            ErrorKind::ValueError => "value_error",
            ErrorKind::IntOutOfRange => "int_out_of_range",
            ErrorKind::CandidatesMismatch => "candidates_mismatch",
            ErrorKind::FloatType => "float_type",
            ErrorKind::StringPatternMismatch => "string_pattern_mismatch",
            ErrorKind::CoachingMismatch => "coaching_mismatch",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem found in a document.
#[derive(Debug, Clone, PartialEq)]
pub struct Issue {
    kind: ErrorKind,
    loc: Location,
    msg: String,
    input: Option<Input>,
    ctx: Option<Object>,
    position: Option<Position>,
}

/// An error's `input`, shared: the `missing` errors of one object echo the
/// same object, and a clone of an issue costs a count, not a copy.
#[derive(Debug, Clone)]
pub(crate) enum Input {
    /// A value.
    Value(Arc<Json>),
    /// The compact text of a value that was never built as a tree, or of
    /// an object holding one (see `json/kept.rs`), and the tree, made only
    /// if [`Issue::input`] is asked for it.
    Text(Arc<Parts>, Arc<OnceLock<Json>>),
}

impl Input {
    pub(crate) fn text(text: Parts) -> Input {
        Input::Text(Arc::new(text), Arc::default())
    }

    fn value(&self) -> &Json {
        match self {
            Input::Value(v) => v,
            Input::Text(text, tree) => tree.get_or_init(|| {
                // The text was written by this crate's writer: valid JSON.
                parse(text.text().as_bytes(), Limits::NONE).unwrap_or_default()
            }),
        }
    }

    fn write(&self, out: &mut String) {
        match self {
            Input::Value(v) => v.write_json(out),
            Input::Text(text, _) => text.write(out),
        }
    }

    fn json_text(&self) -> Cow<'_, str> {
        match self {
            Input::Value(v) => Cow::Owned(v.to_json_string()),
            Input::Text(text, _) => text.text(),
        }
    }
}

impl PartialEq for Input {
    fn eq(&self, other: &Input) -> bool {
        match (self, other) {
            (Input::Value(a), Input::Value(b)) => a == b,
            (Input::Text(a, _), Input::Text(b, _)) => a.text() == b.text(),
            _ => self.json_text() == other.json_text(),
        }
    }
}

impl Issue {
    pub(crate) fn new(kind: ErrorKind, loc: Location, msg: impl Into<String>) -> Issue {
        Issue {
            kind,
            loc,
            msg: msg.into(),
            input: None,
            ctx: None,
            position: None,
        }
    }

    pub(crate) fn with_input(mut self, input: Json) -> Issue {
        self.input = Some(Input::Value(Arc::new(input)));
        self
    }

    /// The input, shared with the other issues that echo the same value.
    pub(crate) fn with_shared_input(mut self, input: Input) -> Issue {
        self.input = Some(input);
        self
    }

    pub(crate) fn with_ctx(mut self, key: &str, value: Json) -> Issue {
        self.ctx.get_or_insert_with(Object::new).insert(key, value);
        self
    }

    fn json_invalid(detail: &str, position: Position) -> Issue {
        let mut issue = Issue::new(
            ErrorKind::JsonInvalid,
            Location::root(),
            "JSON decode error",
        )
        .with_ctx("error", Json::from(detail));
        issue.position = Some(position);
        issue
    }

    pub(crate) fn prefixed(mut self, prefix: &Location) -> Issue {
        let mut segs = prefix.segments().to_vec();
        segs.extend_from_slice(self.loc.segments());
        self.loc = Location::from(segs);
        self
    }

    /// The stable kind.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// Where the problem is (the root for JSON syntax errors; see
    /// [`position`](Issue::position)).
    pub fn location(&self) -> &Location {
        &self.loc
    }

    /// The human message, worded as pydantic words it.
    pub fn message(&self) -> &str {
        &self.msg
    }

    /// The offending value, as pydantic's `input`.
    ///
    /// A large value that is only this error's input (an undeclared key's
    /// array or object) is kept as text and built as a tree on the first
    /// call: [`input_text`](Issue::input_text) and
    /// [`Error::to_fastapi_string`] never build it.
    pub fn input(&self) -> Option<&Json> {
        self.input.as_ref().map(Input::value)
    }

    /// The compact JSON text of [`input`](Issue::input), borrowed when the
    /// value was kept as text.
    pub fn input_text(&self) -> Option<Cow<'_, str>> {
        self.input.as_ref().map(Input::json_text)
    }

    /// The first `max_chars` characters of [`input_text`](Issue::input_text)
    /// (all of it when shorter), without writing the rest when the value
    /// was kept as text: for messages that show the start of a value.
    pub fn input_text_head(&self, max_chars: usize) -> Option<Cow<'_, str>> {
        let head = |text: &str| match text.char_indices().nth(max_chars) {
            Some((at, _)) => text[..at].to_owned(),
            None => text.to_owned(),
        };
        self.input.as_ref().map(|input| match input {
            Input::Text(parts, _) => Cow::Owned(parts.head(max_chars)),
            Input::Value(_) => Cow::Owned(head(&input.json_text())),
        })
    }

    /// Extra facts about the rule (`{"gt": 0}`, `{"min_length": 1}`, ...).
    pub fn context(&self) -> Option<&Object> {
        self.ctx.as_ref()
    }

    /// For JSON syntax errors, where in the text the problem is.
    pub fn position(&self) -> Option<Position> {
        self.position
    }

    /// For JSON syntax errors, what exactly is wrong.
    pub fn detail(&self) -> Option<&str> {
        self.ctx
            .as_ref()
            .and_then(|c| c.get("error"))
            .and_then(Json::as_str)
    }

    /// One FastAPI 422 `detail` entry: `{"type","loc","msg","input"[,"ctx"]}`,
    /// with `loc` starting at `"body"`.
    pub fn to_fastapi(&self) -> Json {
        let mut loc = vec![Json::from("body")];
        match self.position {
            Some(p) => loc.push(Json::from(p.char_offset)),
            None => loc.extend(self.loc.segments().iter().map(segment_json)),
        }
        let mut o = Object::new();
        o.insert("type", Json::from(self.kind.as_str()));
        o.insert("loc", Json::Array(loc));
        o.insert("msg", Json::from(self.msg.as_str()));
        o.insert(
            "input",
            self.input()
                .cloned()
                .unwrap_or_else(|| Json::Object(Object::new())),
        );
        if let Some(ctx) = &self.ctx {
            o.insert("ctx", Json::Object(ctx.clone()));
        }
        Json::Object(o)
    }

    /// [`to_fastapi`](Issue::to_fastapi) as text, appended to `out`, the
    /// input copied from its text when it was kept as text.
    fn write_fastapi(&self, out: &mut String) {
        out.push_str("{\"type\":");
        write_str(out, self.kind.as_str());
        out.push_str(",\"loc\":[\"body\"");
        match self.position {
            Some(p) => {
                out.push(',');
                Json::from(p.char_offset).write_json(out);
            }
            None => {
                for seg in self.loc.segments() {
                    out.push(',');
                    segment_json(seg).write_json(out);
                }
            }
        }
        out.push_str("],\"msg\":");
        write_str(out, &self.msg);
        out.push_str(",\"input\":");
        match &self.input {
            Some(input) => input.write(out),
            None => out.push_str("{}"),
        }
        if let Some(ctx) = &self.ctx {
            out.push_str(",\"ctx\":");
            ctx.write_json(out);
        }
        out.push('}');
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.position, self.detail()) {
            (Some(p), Some(d)) => {
                write!(
                    f,
                    "line {} column {}: {d} [{}]",
                    p.line, p.column, self.kind
                )
            }
            _ => write!(f, "{}: {} [{}]", self.loc, self.msg, self.kind),
        }
    }
}

/// Why a document was refused: every problem found, never empty.
///
/// `Display` gives a one-line summary; [`issues`](Error::issues) has each
/// problem with its location, and [`to_fastapi_body`](Error::to_fastapi_body)
/// renders the 422 body a FastAPI agent would send.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct Error {
    model: &'static str,
    issues: Vec<Issue>,
    /// Problems found beyond [`MAX_REPORTED_ERRORS`](crate::MAX_REPORTED_ERRORS), counted only.
    omitted: usize,
}

impl Error {
    pub(crate) fn new(model: &'static str, issues: Vec<Issue>) -> Error {
        debug_assert!(!issues.is_empty());
        Error {
            model,
            issues,
            omitted: 0,
        }
    }

    pub(crate) fn with_omitted(mut self, omitted: usize) -> Error {
        self.omitted = omitted;
        self
    }

    pub(crate) fn with_model(mut self, model: &'static str) -> Error {
        self.model = model;
        self
    }

    /// The model that was being validated (`AgentRequest`, ...), or `JSON`
    /// when the text was not JSON.
    pub fn model(&self) -> &'static str {
        self.model
    }

    /// The problems, in the order pydantic reports them: every one, or the
    /// first [`MAX_REPORTED_ERRORS`](crate::MAX_REPORTED_ERRORS) when there were more (see
    /// [`omitted`](Error::omitted)).
    pub fn issues(&self) -> &[Issue] {
        &self.issues
    }

    /// How many problems were found beyond [`issues`](Error::issues) and not
    /// kept (0 unless there were more than [`MAX_REPORTED_ERRORS`](crate::MAX_REPORTED_ERRORS)). A hostile
    /// document cannot make the list grow with its length; this count says
    /// how long the reference's list would have been.
    pub fn omitted(&self) -> usize {
        self.omitted
    }

    /// The first problem.
    pub fn first(&self) -> &Issue {
        &self.issues[0]
    }

    /// `true` if the text was not JSON at all.
    pub fn is_syntax(&self) -> bool {
        self.issues.iter().any(|i| i.kind == ErrorKind::JsonInvalid)
    }

    /// The FastAPI/pydantic 422 body: `{"detail":[{"type","loc","msg","input"}, ...]}`.
    ///
    /// When problems were [`omitted`](Error::omitted), `detail` lists the
    /// first [`MAX_REPORTED_ERRORS`](crate::MAX_REPORTED_ERRORS) exactly as the reference does and a
    /// second member says how many more there were:
    /// `{"detail": [...], "omitted_errors": 4900}`. Clients that read
    /// `detail` only see a shorter list of the same entries.
    pub fn to_fastapi_body(&self) -> Json {
        let mut o = Object::new();
        o.insert(
            "detail",
            Json::Array(self.issues.iter().map(Issue::to_fastapi).collect()),
        );
        if self.omitted > 0 {
            o.insert("omitted_errors", Json::from(self.omitted as u64));
        }
        Json::Object(o)
    }
}

impl Error {
    /// About how long [`to_fastapi_string`](Error::to_fastapi_string) is,
    /// without writing it: exact for the inputs kept as text (the long
    /// ones a hostile document makes), an estimate for the others. A
    /// server can count the bytes of a `422` before it writes it.
    pub fn fastapi_len_hint(&self) -> usize {
        64 + self
            .issues
            .iter()
            .map(|i| {
                160 + i.msg.len()
                    + match &i.input {
                        Some(Input::Text(t, _)) => t.len(),
                        Some(Input::Value(v)) => v.size_hint(),
                        None => 2,
                    }
            })
            .sum::<usize>()
    }

    /// The text of [`to_fastapi_body`](Error::to_fastapi_body), byte for
    /// byte, written without building the body as a tree: an input kept as
    /// text is copied, so a `422` that echoes a large value costs that text,
    /// not a tree of it.
    pub fn to_fastapi_string(&self) -> String {
        let mut out = String::with_capacity(self.fastapi_len_hint());
        out.push_str("{\"detail\":[");
        for (n, issue) in self.issues.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            issue.write_fastapi(&mut out);
        }
        out.push(']');
        if self.omitted > 0 {
            out.push_str(",\"omitted_errors\":");
            Json::from(self.omitted as u64).write_json(&mut out);
        }
        out.push('}');
        out
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_syntax() {
            return write!(f, "invalid JSON: {}", self.issues[0]);
        }
        let n = self.issues.len() + self.omitted;
        write!(f, "invalid {}: ", self.model)?;
        if n > 1 {
            write!(f, "{n} problems: ")?;
        }
        for (i, issue) in self.issues.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{issue}")?;
        }
        if self.omitted > 0 {
            write!(f, "; and {} more not listed", self.omitted)?;
        }
        Ok(())
    }
}

impl From<SyntaxError> for Error {
    /// Text that is not JSON: one `json_invalid` issue with its position.
    fn from(e: SyntaxError) -> Error {
        Error {
            model: "JSON",
            issues: vec![Issue::json_invalid(e.detail, e.position)],
            omitted: 0,
        }
    }
}

#[cfg(test)]
mod kind_tests {
    use super::ErrorKind;

    /// `ALL` holds every kind once, in declaration order. The match has no
    /// wildcard: a new kind does not compile here until it is given its
    /// place, which the loop then requires in `ALL`.
    #[test]
    fn all_holds_every_kind_in_declaration_order() {
        let place = |k: ErrorKind| match k {
            ErrorKind::JsonInvalid => 0,
            ErrorKind::Missing => 1,
            ErrorKind::ExtraForbidden => 2,
            ErrorKind::ModelType => 3,
            ErrorKind::DictType => 4,
            ErrorKind::ListType => 5,
            ErrorKind::StringType => 6,
            ErrorKind::IntType => 7,
            ErrorKind::BoolType => 8,
            ErrorKind::LiteralError => 9,
            ErrorKind::StringTooShort => 10,
            ErrorKind::GreaterThan => 11,
            ErrorKind::GreaterThanEqual => 12,
            ErrorKind::FiniteNumber => 13,
            ErrorKind::RecursionDepthExceeded => 14,
            ErrorKind::ValueError => 15,
            ErrorKind::IntOutOfRange => 16,
            ErrorKind::CandidatesMismatch => 17,
            ErrorKind::FloatType => 18,
            ErrorKind::StringPatternMismatch => 19,
            ErrorKind::CoachingMismatch => 20,
        };
        for (i, k) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(place(*k), i, "{k} out of place in ErrorKind::ALL");
        }
        // The kind declared last has the highest place: none is left out.
        assert_eq!(place(ErrorKind::CoachingMismatch) + 1, ErrorKind::ALL.len());
    }
}
