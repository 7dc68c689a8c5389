//! The validation engine: pydantic's strict python-mode semantics, for any
//! model.
//!
//! A model's validator takes ownership of the parsed value and moves the
//! accepted parts into the typed result, so the happy path copies nothing.
//! Problems are collected, not returned early: like pydantic, every field is
//! checked in declaration order (see [`Fields`]), then undeclared keys are
//! reported, and a model-level rule runs only when the model's fields are
//! all valid. This file knows no concrete model: the models (`model/*.rs`)
//! describe their fields with the pieces here (strict scalars, lists, model
//! objects, free-form objects).

use std::borrow::Cow;
use std::fmt;
use std::num::NonZeroU64;
use std::ops::Deref;

use serde::ser::{Serialize, Serializer};

use crate::error::{Error, ErrorKind, Input, Issue};
use crate::json::{
    Counted, FreeFormProblem, Json, KeptInputs, Location, Map, Number, Object, Parts, Segment,
    check_free_form, parse,
};
use crate::limits::{MAX_FREE_FORM_DEPTH, MAX_REPORTED_ERRORS, READ};

#[derive(Clone, Copy)]
pub(crate) enum PathSeg {
    Field(&'static str),
    Index(usize),
}

/// One validation under way: the model, where it is, and what went wrong so
/// far.
pub(crate) struct Validation {
    model: &'static str,
    path: Vec<PathSeg>,
    issues: Vec<Issue>,
    /// Problems found past [`MAX_REPORTED_ERRORS`]: counted, not kept.
    omitted: usize,
    /// Values of the document read as text, not built: an empty array or
    /// object holds their places in the value being validated.
    kept: KeptInputs,
}

impl Validation {
    pub(crate) fn new(model: &'static str) -> Validation {
        Validation {
            model,
            path: Vec::with_capacity(8),
            issues: Vec::new(),
            omitted: 0,
            kept: KeptInputs::default(),
        }
    }

    pub(crate) fn location(&self, extra: impl IntoIterator<Item = Segment>) -> Location {
        let mut segs: Vec<Segment> = self
            .path
            .iter()
            .map(|s| match *s {
                PathSeg::Field(f) => Segment::Key(f.to_owned()),
                PathSeg::Index(i) => Segment::Index(i),
            })
            .collect();
        segs.extend(extra);
        Location::from(segs)
    }

    pub(crate) fn report(&mut self, kind: ErrorKind, msg: impl Into<String>, input: Json) {
        let issue = Issue::new(kind, self.location([]), msg).with_input(input);
        self.push(issue);
    }

    pub(crate) fn report_ctx(
        &mut self,
        kind: ErrorKind,
        msg: &str,
        input: Json,
        key: &str,
        val: Json,
    ) {
        let issue = Issue::new(kind, self.location([]), msg)
            .with_input(input)
            .with_ctx(key, val);
        self.push(issue);
    }

    pub(crate) fn at<T>(&mut self, seg: PathSeg, f: impl FnOnce(&mut Validation) -> T) -> T {
        self.path.push(seg);
        let out = f(self);
        self.path.pop();
        out
    }

    /// Runs `f` at the field `key` of the current location.
    pub(crate) fn at_field<T>(
        &mut self,
        key: &'static str,
        f: impl FnOnce(&mut Validation) -> T,
    ) -> T {
        self.at(PathSeg::Field(key), f)
    }

    /// Records a problem: kept while fewer than [`MAX_REPORTED_ERRORS`]
    /// are, counted (and dropped, with the input it carried) after. The
    /// value at a location kept as text (an undeclared key's, or a scalar
    /// field's array or object) is the input of the problem there: its
    /// text replaces the empty value that held its place.
    pub(crate) fn push(&mut self, issue: Issue) {
        if self.issues.len() < MAX_REPORTED_ERRORS {
            let issue = match self.kept.get(issue.location()) {
                Some(text) => issue.with_shared_input(Input::text(Parts::kept(text.clone()))),
                None => issue,
            };
            self.issues.push(issue);
        } else {
            self.omitted += 1;
        }
    }

    /// `true` while problems are still kept (fewer than
    /// [`MAX_REPORTED_ERRORS`] so far).
    pub(crate) fn keeps_more(&self) -> bool {
        self.issues.len() < MAX_REPORTED_ERRORS
    }

    /// Validates a whole document as the model `model`: `f` reads the value,
    /// and reports every problem before it returns `None`.
    pub(crate) fn document<T>(
        model: &'static str,
        value: Json,
        f: impl FnOnce(Json, &mut Validation) -> Option<T>,
    ) -> Result<T, Error> {
        Validation::document_counted(model, value, Counted::default(), f)
    }

    /// [`document`](Validation::document) of a value read by
    /// [`parse_shaped_counted`](crate::json::parse_shaped_counted) with
    /// [`MAX_REPORTED_ERRORS`] kept: `counted.dropped` scalars and keys
    /// were not built, each an error past the cap (it follows that many
    /// errors of its own list), and the values of `counted.kept` were read
    /// as text.
    pub(crate) fn document_counted<T>(
        model: &'static str,
        value: Json,
        counted: Counted,
        f: impl FnOnce(Json, &mut Validation) -> Option<T>,
    ) -> Result<T, Error> {
        let mut cx = Validation::new(model);
        cx.kept = counted.kept;
        let out = f(value, &mut cx);
        cx.omitted += counted.dropped;
        cx.finish_opt(out)
    }

    /// Problems found so far, kept or only counted.
    pub(crate) fn count(&self) -> usize {
        self.issues.len() + self.omitted
    }

    pub(crate) fn finish<T>(self, value: T) -> Result<T, Error> {
        if self.issues.is_empty() {
            Ok(value)
        } else {
            Err(Error::new(self.model, self.issues).with_omitted(self.omitted))
        }
    }

    pub(crate) fn finish_opt<T>(self, value: Option<T>) -> Result<T, Error> {
        match value {
            Some(v) if self.issues.is_empty() => Ok(v),
            _ => {
                let mut issues = self.issues;
                if issues.is_empty() {
                    // Unreachable by construction: every `None` reports first.
                    issues.push(Issue::new(
                        ErrorKind::ValueError,
                        Location::root(),
                        "invalid",
                    ));
                }
                Err(Error::new(self.model, issues).with_omitted(self.omitted))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Scalars

pub(crate) fn strict_str(v: Json, cx: &mut Validation) -> Option<String> {
    match v {
        Json::String(s) => Some(s),
        other => {
            cx.report(
                ErrorKind::StringType,
                "Input should be a valid string",
                other,
            );
            None
        }
    }
}

pub(crate) fn opt_str(v: Json, cx: &mut Validation) -> Option<Option<String>> {
    match v {
        Json::Null => Some(None),
        other => strict_str(other, cx).map(Some),
    }
}

pub(crate) fn non_empty(v: Json, cx: &mut Validation) -> Option<NonEmptyString> {
    let s = strict_str(v, cx)?;
    if s.is_empty() {
        cx.report_ctx(
            ErrorKind::StringTooShort,
            "String should have at least 1 character",
            Json::String(s),
            "min_length",
            Json::from(1),
        );
        return None;
    }
    NonEmptyString::new(s)
}

pub(crate) fn strict_bool(v: Json, cx: &mut Validation) -> Option<bool> {
    match v {
        Json::Bool(b) => Some(b),
        other => {
            cx.report(
                ErrorKind::BoolType,
                "Input should be a valid boolean",
                other,
            );
            None
        }
    }
}

/// A strict integer: an integer lexeme, never a float, string or boolean.
pub(crate) fn strict_int(v: Json, cx: &mut Validation) -> Option<Number> {
    match v {
        Json::Number(n) if n.is_integer() => Some(n),
        other => {
            cx.report(ErrorKind::IntType, "Input should be a valid integer", other);
            None
        }
    }
}

fn out_of_range(n: Number, cx: &mut Validation, what: &str) {
    let msg = format!("Input should fit in {what} (the reference's integers are unbounded)");
    cx.report(ErrorKind::IntOutOfRange, msg, Json::Number(n));
}

pub(crate) fn int64(v: Json, cx: &mut Validation) -> Option<i64> {
    let n = strict_int(v, cx)?;
    match n.as_i64() {
        Some(i) => Some(i),
        None => {
            out_of_range(n, cx, "a 64-bit signed integer");
            None
        }
    }
}

pub(crate) fn positive_u64(v: Json, cx: &mut Validation) -> Option<NonZeroU64> {
    let n = strict_int(v, cx)?;
    if n.is_negative_integer() || n.as_u64() == Some(0) {
        cx.report_ctx(
            ErrorKind::GreaterThan,
            "Input should be greater than 0",
            Json::Number(n),
            "gt",
            Json::from(0),
        );
        return None;
    }
    match n.as_u64().and_then(NonZeroU64::new) {
        Some(v) => Some(v),
        None => {
            out_of_range(n, cx, "a 64-bit unsigned integer");
            None
        }
    }
}

pub(crate) fn non_negative_u64(v: Json, cx: &mut Validation) -> Option<u64> {
    let n = strict_int(v, cx)?;
    if n.is_negative_integer() {
        cx.report_ctx(
            ErrorKind::GreaterThanEqual,
            "Input should be greater than or equal to 0",
            Json::Number(n),
            "ge",
            Json::from(0),
        );
        return None;
    }
    match n.as_u64() {
        Some(v) => Some(v),
        None => {
            out_of_range(n, cx, "a 64-bit unsigned integer");
            None
        }
    }
}

/// A string literal among `allowed`; returns its index.
pub(crate) fn literal(v: Json, cx: &mut Validation, allowed: &[&str]) -> Option<usize> {
    if let Json::String(s) = &v {
        if let Some(i) = allowed.iter().position(|a| a == s) {
            return Some(i);
        }
    }
    let expected = match allowed {
        [one] => format!("'{one}'"),
        _ => {
            let (last, head) = allowed.split_last().unwrap_or((&"", &[]));
            let head: Vec<String> = head.iter().map(|a| format!("'{a}'")).collect();
            format!("{} or '{last}'", head.join(", "))
        }
    };
    let msg = format!("Input should be {expected}");
    cx.report_ctx(
        ErrorKind::LiteralError,
        &msg,
        v,
        "expected",
        Json::String(expected),
    );
    None
}

/// A strict float (`float` in pydantic's strict mode): a finite JSON
/// number, integers included (`30` is `30.0`); strings and booleans are
/// refused. A number too large for an `f64` is refused as not finite, one
/// too small becomes `0.0`, as Python's `float()` does.
pub(crate) fn strict_float(v: Json, cx: &mut Validation) -> Option<f64> {
    match v {
        Json::Number(n) => match n.as_f64() {
            Some(f) if f.is_finite() => Some(f),
            _ => {
                cx.report(
                    ErrorKind::FiniteNumber,
                    "Input should be a finite number",
                    Json::Number(n),
                );
                None
            }
        },
        other => {
            cx.report(
                ErrorKind::FloatType,
                "Input should be a valid number",
                other,
            );
            None
        }
    }
}

/// A strict float greater than 0 (`Field(gt=0)`).
pub(crate) fn positive_float(v: Json, cx: &mut Validation) -> Option<f64> {
    let input = v.clone();
    let f = strict_float(v, cx)?;
    if f > 0.0 {
        return Some(f);
    }
    cx.report_ctx(
        ErrorKind::GreaterThan,
        "Input should be greater than 0",
        input,
        "gt",
        Json::from(0),
    );
    None
}

/// A strict integer, `None` for `null` (`int | None`).
pub(crate) fn opt_int64(v: Json, cx: &mut Validation) -> Option<Option<i64>> {
    match v {
        Json::Null => Some(None),
        other => int64(other, cx).map(Some),
    }
}

/// A string matching a pattern (`Field(pattern=...)`): `matches` decides,
/// `pattern` is how the reference spells it in its error.
pub(crate) fn pattern_str(
    v: Json,
    cx: &mut Validation,
    pattern: &'static str,
    matches: fn(&str) -> bool,
) -> Option<String> {
    let s = strict_str(v, cx)?;
    if matches(&s) {
        return Some(s);
    }
    cx.report_ctx(
        ErrorKind::StringPatternMismatch,
        &format!("String should match pattern '{pattern}'"),
        Json::String(s),
        "pattern",
        Json::from(pattern),
    );
    None
}

/// `dict[str, str]`: an object whose values are all strings.
pub(crate) fn str_map(v: Json, cx: &mut Validation) -> Option<Map<String>> {
    scalar_map(
        v,
        cx,
        ErrorKind::StringType,
        "Input should be a valid string",
        |v| match v {
            Json::String(s) => Ok(s),
            other => Err(other),
        },
    )
}

/// `dict[str, bool]`: an object whose values are all (strict) booleans.
pub(crate) fn bool_map(v: Json, cx: &mut Validation) -> Option<Map<bool>> {
    scalar_map(
        v,
        cx,
        ErrorKind::BoolType,
        "Input should be a valid boolean",
        |v| match v {
            Json::Bool(b) => Ok(b),
            other => Err(other),
        },
    )
}

/// `dict[str, T]` for a scalar `T`: `take` gives the value back when it is
/// not a `T`, which is reported at its key through the capped
/// [`Validation::push`] (a hostile object of a million wrong values keeps
/// the first errors and counts the rest).
fn scalar_map<T>(
    v: Json,
    cx: &mut Validation,
    kind: ErrorKind,
    msg: &'static str,
    take: impl Fn(Json) -> Result<T, Json>,
) -> Option<Map<T>> {
    let Json::Object(o) = v else {
        cx.report(ErrorKind::DictType, "Input should be a valid dictionary", v);
        return None;
    };
    let mut out = Map::with_capacity(o.len());
    let mut ok = true;
    for (key, value) in o {
        match take(value) {
            Ok(t) => out.push_unique(key, t),
            Err(other) => {
                ok = false;
                let loc = cx.location([Segment::Key(key)]);
                cx.push(Issue::new(kind, loc, msg).with_input(other));
            }
        }
    }
    ok.then_some(out)
}

/// `dict[str, Model]`: an object whose values each validate as `item`,
/// reported at their key.
pub(crate) fn model_map<T>(
    v: Json,
    cx: &mut Validation,
    mut item: impl FnMut(Json, &mut Validation) -> Option<T>,
) -> Option<Map<T>> {
    let Json::Object(o) = v else {
        cx.report(ErrorKind::DictType, "Input should be a valid dictionary", v);
        return None;
    };
    let mut out = Map::with_capacity(o.len());
    let mut ok = true;
    for (key, value) in o {
        let mut sub = Validation {
            model: cx.model,
            path: Vec::new(),
            issues: Vec::new(),
            omitted: 0,
            // The documents with a `dict[str, Model]` are read without a
            // model shape: nothing is kept as text in them (and `cx.push`
            // below would put a kept text back by its whole location).
            kept: KeptInputs::default(),
        };
        match item(value, &mut sub) {
            Some(t) if sub.issues.is_empty() && sub.omitted == 0 => {
                if ok {
                    out.push_unique(key, t);
                }
            }
            _ => {
                ok = false;
                let prefix = cx.location([Segment::Key(key)]);
                cx.omitted += sub.omitted;
                for issue in sub.issues {
                    cx.push(issue.prefixed(&prefix));
                }
            }
        }
    }
    ok.then_some(out)
}

/// A model that other models embed: its validator, reachable through the
/// type so that one model's file can validate another's without reaching
/// into that file (`tests/it/tidy.rs`).
pub(crate) trait Validate: Sized {
    /// Validates `v` as this model, reporting at the current location.
    fn validate(v: Json, cx: &mut Validation) -> Option<Self>;

    /// `Model | None`: `null` is `None`.
    fn validate_opt(v: Json, cx: &mut Validation) -> Option<Option<Self>> {
        match v {
            Json::Null => Some(None),
            other => Self::validate(other, cx).map(Some),
        }
    }
}

// ---------------------------------------------------------------------------
// Containers

pub(crate) fn list<T>(
    v: Json,
    cx: &mut Validation,
    mut item: impl FnMut(Json, &mut Validation) -> Option<T>,
) -> Option<Vec<T>> {
    match v {
        Json::Array(items) => {
            let mut out = Vec::with_capacity(items.len());
            let mut ok = true;
            for (i, element) in items.into_iter().enumerate() {
                match cx.at(PathSeg::Index(i), |cx| item(element, cx)) {
                    Some(t) if ok => out.push(t),
                    Some(_) => {}
                    None => ok = false,
                }
            }
            ok.then_some(out)
        }
        other => {
            cx.report(ErrorKind::ListType, "Input should be a valid list", other);
            None
        }
    }
}

/// `dict[str, JsonValue]` (a free-form object): an object whose values are
/// finite and not nested deeper than the reference allows.
pub(crate) fn free_object(v: Json, cx: &mut Validation) -> Option<Object> {
    match v {
        // Text kept by the parser was validated while it was scanned.
        Json::Object(o) if o.is_validated_text() => Some(o),
        Json::Object(o) => {
            let before = cx.count();
            check_object_values(&o, cx);
            (cx.count() == before).then_some(o)
        }
        other => {
            cx.report(
                ErrorKind::DictType,
                "Input should be a valid dictionary",
                other,
            );
            None
        }
    }
}

fn check_object_values(o: &Object, cx: &mut Validation) {
    for (i, (_, value)) in o.entries().iter().enumerate() {
        if matches!(value, Json::Null | Json::Bool(_) | Json::String(_)) {
            continue;
        }
        check_value_at(o, i, value, cx, MAX_FREE_FORM_DEPTH);
    }
}

fn check_value_at(o: &Object, i: usize, value: &Json, cx: &mut Validation, limit: usize) {
    let mut sub = Validation {
        model: cx.model,
        path: Vec::new(),
        issues: Vec::new(),
        omitted: 0,
        kept: KeptInputs::default(),
    };
    check_free_form_at(value, &mut sub, limit);
    if sub.issues.is_empty() {
        return;
    }
    let prefix = cx.location([Segment::Key(o.entries()[i].0.clone())]);
    for issue in sub.issues {
        cx.push(issue.prefixed(&prefix));
    }
    cx.omitted += sub.omitted;
}

/// Checks a free-form value (see [`check_free_form`]), reporting each
/// problem at its location below the current one.
fn check_free_form_at(root: &Json, cx: &mut Validation, limit: usize) {
    check_free_form(root, limit, |problem, segs, value| {
        let (kind, msg) = match problem {
            FreeFormProblem::NotFinite => {
                (ErrorKind::FiniteNumber, "Input should be a finite number")
            }
            FreeFormProblem::TooDeep => (
                ErrorKind::RecursionDepthExceeded,
                "Recursion error - maximum validation depth exceeded",
            ),
        };
        let loc = cx.location(segs);
        cx.push(Issue::new(kind, loc, msg).with_input(value.clone()));
    });
}

// ---------------------------------------------------------------------------
// Models

pub(crate) fn model_object(v: Json, class: &'static str, cx: &mut Validation) -> Option<Object> {
    match v {
        Json::Object(o) => Some(o),
        other => {
            let msg = format!("Input should be a valid dictionary or instance of {class}");
            cx.report_ctx(
                ErrorKind::ModelType,
                &msg,
                other,
                "class_name",
                Json::from(class),
            );
            None
        }
    }
}

/// The fields of one model object being validated.
pub(crate) struct Fields {
    obj: Object,
    /// The whole object, kept only when a required field is missing: pydantic
    /// reports the object as the `input` of a `missing` error. One copy,
    /// shared by those errors; its text when it holds values kept as text.
    snapshot: Option<Input>,
    start: usize,
}

impl Fields {
    pub(crate) fn new(obj: Object, required: &[&str], cx: &Validation) -> Fields {
        // Past the error cap, the `missing` errors are only counted.
        let missing = cx.keeps_more() && required.iter().any(|k| !obj.contains_key(k));
        let snapshot = missing.then(|| {
            let text = if cx.kept.is_empty() {
                None
            } else {
                cx.kept.text_of(&cx.location([]), &obj)
            };
            match text {
                Some(text) => Input::text(text),
                None => Input::Value(std::sync::Arc::new(Json::Object(obj.clone()))),
            }
        });
        Fields {
            obj,
            snapshot,
            start: cx.count(),
        }
    }

    pub(crate) fn required<T>(
        &mut self,
        key: &'static str,
        cx: &mut Validation,
        f: impl FnOnce(Json, &mut Validation) -> Option<T>,
    ) -> Option<T> {
        match self.obj.remove(key) {
            Some(v) => cx.at(PathSeg::Field(key), |cx| f(v, cx)),
            None => {
                cx.at(PathSeg::Field(key), |cx| {
                    let issue = Issue::new(ErrorKind::Missing, cx.location([]), "Field required");
                    cx.push(match &self.snapshot {
                        Some(input) => issue.with_shared_input(input.clone()),
                        // Past the error cap: counted only.
                        None => issue,
                    });
                });
                None
            }
        }
    }

    pub(crate) fn optional<T>(
        &mut self,
        key: &'static str,
        cx: &mut Validation,
        default: impl FnOnce() -> T,
        f: impl FnOnce(Json, &mut Validation) -> Option<T>,
    ) -> Option<T> {
        match self.obj.remove(key) {
            Some(v) => cx.at(PathSeg::Field(key), |cx| f(v, cx)),
            None => Some(default()),
        }
    }

    /// Reports undeclared keys; `true` if the whole model had no problem.
    pub(crate) fn finish(self, cx: &mut Validation) -> bool {
        for (key, value) in self.obj {
            let loc = cx.location([Segment::Key(key)]);
            cx.push(
                Issue::new(
                    ErrorKind::ExtraForbidden,
                    loc,
                    "Extra inputs are not permitted",
                )
                .with_input(value),
            );
        }
        cx.count() == self.start
    }
}

// ---------------------------------------------------------------------------
// Constrained strings

/// A string with at least one character (pydantic `min_length=1`).
///
/// `" "` is valid: the reference counts characters, it does not trim.
///
/// A short string read straight from a document (a tool's or a robot's
/// name, up to 15 bytes) is held in the value itself, without an
/// allocation of its own: each decision of a GEN trajectory holds two such
/// names, and their allocations were about half of what the decisions
/// cost the coaching request's parse.
/// Which way a string is held never shows: equality, order, hashing,
/// `Debug`, `Display` and the JSON written are those of the text.
#[derive(Clone)]
pub struct NonEmptyString(Repr);

/// How a [`NonEmptyString`] holds its text.
#[derive(Clone)]
enum Repr {
    /// At most [`INLINE`] bytes of UTF-8, checked when made, followed by
    /// zeros up to the last byte, which is the length: see [`packed`].
    Inline([u8; INLINE + 1]),
    /// Any length.
    Heap(String),
}

/// The longest text held inline: the most that keeps a [`NonEmptyString`]
/// (and an `Option` of one) the size of a `String`.
const INLINE: usize = 15;

/// `text` (1 to [`INLINE`] bytes, else `None`) laid out as
/// [`Repr::Inline`] holds it.
///
/// The 16 bytes are put together in one integer from at most three loads
/// of `text` and written at once. Copying them byte by byte into an array
/// (a `memcpy` of a variable length) left them in several small stores,
/// and the copies of the new value that a reader makes right after (into
/// its option, its struct, its vector) then had to wait for each of them:
/// a load that spans several pending stores cannot take its bytes from
/// them. Written at once, a GEN decision (two such names) reads 11-16%
/// faster.
#[inline(always)]
fn packed(text: &[u8]) -> Option<[u8; INLINE + 1]> {
    let n = text.len();
    if n == 0 || n > INLINE {
        return None;
    }
    // `w` bytes of `text` from `i`, as the low bytes of an integer.
    let load = |i: usize, w: usize| -> Option<u128> {
        let b = text.get(i..i + w)?;
        Some(match w {
            8 => u128::from(u64::from_le_bytes(b.try_into().ok()?)),
            4 => u128::from(u32::from_le_bytes(b.try_into().ok()?)),
            _ => u128::from(*b.first()?),
        })
    };
    // Two loads of `w` bytes, one at each end, cover any length from `w`
    // to `2w`; where they overlap they hold the same bytes.
    let v = if n >= 8 {
        load(0, 8)? | load(n - 8, 8)? << (8 * (n - 8))
    } else if n >= 4 {
        load(0, 4)? | load(n - 4, 4)? << (8 * (n - 4))
    } else {
        load(0, 1)? | load(n / 2, 1)? << (8 * (n / 2)) | load(n - 1, 1)? << (8 * (n - 1))
    };
    let len = u128::from(u8::try_from(n).ok()?);
    Some((v | len << (8 * INLINE)).to_le_bytes())
}

impl NonEmptyString {
    /// `None` for the empty string.
    pub fn new(s: impl Into<String>) -> Option<Self> {
        let s = s.into();
        (!s.is_empty()).then_some(NonEmptyString(Repr::Heap(s)))
    }

    /// A copy of `s`, `None` when it is empty; held inline when it is
    /// short enough.
    #[inline(always)]
    pub(crate) fn copied(s: &str) -> Option<Self> {
        if s.is_empty() {
            return None;
        }
        let repr = match packed(s.as_bytes()) {
            Some(bytes) => Repr::Inline(bytes),
            None => Repr::Heap(s.to_owned()),
        };
        Some(NonEmptyString(repr))
    }

    /// `text` (`None` when empty), copied when borrowed (held inline when
    /// short), taken when owned.
    #[inline(always)]
    pub(crate) fn from_text(text: Cow<'_, str>) -> Option<Self> {
        match text {
            Cow::Borrowed(s) => NonEmptyString::copied(s),
            Cow::Owned(s) => NonEmptyString::new(s),
        }
    }

    /// `s`, or `fallback` (not empty) when `s` is empty.
    pub(crate) fn new_or(s: impl Into<String>, fallback: &'static str) -> Self {
        let s = s.into();
        debug_assert!(!fallback.is_empty());
        NonEmptyString(Repr::Heap(if s.is_empty() {
            fallback.to_owned()
        } else {
            s
        }))
    }

    /// The string.
    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Valid UTF-8 of that length by construction (`copied`), so
            // neither check can fail; the workspace forbids `unsafe`, and
            // checking at most 15 bytes is cheap.
            Repr::Inline(bytes) => bytes
                .get(..usize::from(bytes[INLINE]))
                .and_then(|b| std::str::from_utf8(b).ok())
                .unwrap_or_default(),
            Repr::Heap(s) => s,
        }
    }

    /// The length in bytes (at least 1), read without looking at the text:
    /// a writer's size estimates ask it of every name.
    #[allow(
        clippy::len_without_is_empty,
        reason = "never empty; `is_empty` of the text (through `Deref`) is always false"
    )]
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Inline(bytes) => usize::from(bytes[INLINE]),
            Repr::Heap(s) => s.len(),
        }
    }

    /// The owned string.
    pub fn into_string(self) -> String {
        match self.0 {
            Repr::Inline(_) => self.as_str().to_owned(),
            Repr::Heap(s) => s,
        }
    }
}

impl Deref for NonEmptyString {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for NonEmptyString {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for NonEmptyString {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for NonEmptyString {}

impl PartialOrd for NonEmptyString {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for NonEmptyString {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for NonEmptyString {
    /// As the text's (and so as a `String`'s) hash.
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl PartialEq<str> for NonEmptyString {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for NonEmptyString {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
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
        NonEmptyString::copied(s).ok_or(EmptyStringError)
    }
}

impl From<NonEmptyString> for String {
    fn from(s: NonEmptyString) -> String {
        s.into_string()
    }
}

impl fmt::Debug for NonEmptyString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for NonEmptyString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An empty string where at least one character is required.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("string should have at least 1 character")]
pub struct EmptyStringError;

impl Serialize for NonEmptyString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self)
    }
}

// ---------------------------------------------------------------------------
// Free-form documents

impl Json {
    /// Parses one JSON document from UTF-8 bytes, as the reference's
    /// `json.loads` would, and checks that every number is finite.
    ///
    /// Duplicate keys keep the last value in the position of the first, as a
    /// Python `dict` does.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        let value = parse(bytes, READ)?;
        let mut cx = Validation::new("Json");
        check_free_form_at(&value, &mut cx, usize::MAX);
        cx.finish(value)
    }
}

impl std::str::FromStr for Json {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Json::from_slice(s.as_bytes())
    }
}

/// Every repeated key in a document, at the location of each later
/// occurrence (the value that wins), in document order: the first
/// [`MAX_REPORTED_ERRORS`] of them, the others counted
/// ([`DuplicateKeys::omitted`]). The reference's `json.loads` keeps the last
/// value without a word; validators and lints use this to say so. Errors
/// are the parser's, for text that is not JSON.
///
/// No tree is built: the memory used is the keys of the objects open at a
/// time and the locations kept, whatever the size of the document.
pub fn duplicate_keys(src: &[u8]) -> Result<DuplicateKeys, Error> {
    let found = crate::json::duplicate_keys(src, READ, MAX_REPORTED_ERRORS).map_err(Error::from)?;
    Ok(DuplicateKeys {
        locations: found.found,
        omitted: found.omitted,
    })
}

/// The repeated keys of a document, from [`duplicate_keys`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DuplicateKeys {
    locations: Vec<Location>,
    omitted: usize,
}

impl DuplicateKeys {
    /// The locations of the repeats (each later occurrence of a key), in
    /// document order, at most [`MAX_REPORTED_ERRORS`].
    pub fn locations(&self) -> &[Location] {
        &self.locations
    }

    /// Repeats found past the ones kept, counted only.
    pub fn omitted(&self) -> usize {
        self.omitted
    }

    /// `true` when no key repeats.
    pub fn is_empty(&self) -> bool {
        self.locations.is_empty()
    }
}

#[cfg(test)]
impl NonEmptyString {
    /// Whether the text is held inline (no allocation of its own).
    pub(crate) fn is_inline(&self) -> bool {
        matches!(self.0, Repr::Inline(_))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    use super::NonEmptyString;

    fn hash(v: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        v.hash(&mut h);
        h.finish()
    }

    /// Texts around the inline limit, multi-byte characters across it
    /// included: `copied` holds the short ones inline, `new` never does,
    /// and nothing that can be observed tells the two apart.
    #[test]
    fn inline_and_heap_strings_are_the_same_value() {
        let texts = [
            "a",
            "panda",
            "move_to",
            "fifteen_bytes__",
            "sixteen_bytes___",
            "éééééé\u{1F916}",              // 16 bytes: on the heap
            "ééééééé",                      // 14 bytes: inline
            "\u{1F916}\u{1F916}\u{1F916}x", // 13 bytes, four-byte characters
            " ",
            "a\"quote\\and\u{0}nul",
            "cancel_current_action",
        ];
        for t in texts {
            let inline = NonEmptyString::copied(t).unwrap();
            let heap = NonEmptyString::new(t).unwrap();
            assert_eq!(inline.is_inline(), t.len() <= 15, "{t:?}");
            assert!(!heap.is_inline());
            assert_eq!(inline.as_str(), t);
            assert_eq!((inline.len(), heap.len()), (t.len(), t.len()), "{t:?}");
            assert_eq!(&*inline, t);
            assert_eq!(inline, heap);
            assert_eq!(inline, t);
            assert_eq!(hash(&inline), hash(&heap));
            assert_eq!(hash(&inline), hash(&t.to_owned()));
            assert_eq!(format!("{inline:?}"), format!("{t:?}"));
            assert_eq!(inline.to_string(), t);
            assert_eq!(
                serde_json::to_string(&inline).unwrap(),
                serde_json::to_string(t).unwrap()
            );
            assert_eq!(inline.clone().into_string(), t);
            assert_eq!(String::from(inline.clone()), t);
            assert_eq!(NonEmptyString::try_from(t).unwrap(), heap);
            for other in texts {
                let o = NonEmptyString::copied(other).unwrap();
                assert_eq!(inline.cmp(&o), t.cmp(other), "{t:?} against {other:?}");
                assert_eq!(inline == o, t == other);
            }
        }
        assert!(NonEmptyString::copied("").is_none());
        assert!(NonEmptyString::new("").is_none());
        assert_eq!(NonEmptyString::new_or("", "error"), "error");
        assert_eq!(NonEmptyString::new_or("x", "error"), "x");
    }

    /// Every length the inline form takes, each byte of each position
    /// distinct, so that a load from the wrong place or a shift by the
    /// wrong amount shows: the text reads back whole, and so does every
    /// prefix of a text of multi-byte characters.
    #[test]
    fn every_inline_length_reads_back() {
        let digits = "0123456789abcdefg";
        let wide = "é\u{1F916}ü\u{20AC}x";
        for n in 0..=17 {
            let t = &digits[..n];
            let s = NonEmptyString::copied(t);
            assert_eq!(s.as_ref().map(NonEmptyString::as_str), (n > 0).then_some(t));
            assert_eq!(
                s.is_some_and(|s| s.is_inline()),
                (1..=15).contains(&n),
                "{n}"
            );
        }
        for (end, _) in wide.char_indices().skip(1).chain([(wide.len(), 'x')]) {
            let t = &wide[..end];
            assert_eq!(NonEmptyString::copied(t).unwrap().as_str(), t);
        }
    }

    /// Held inline or not, a `NonEmptyString` (and an `Option` of one)
    /// stays the size of a `String`.
    #[test]
    fn a_non_empty_string_is_the_size_of_a_string() {
        assert_eq!(size_of::<NonEmptyString>(), size_of::<String>());
        assert_eq!(size_of::<Option<NonEmptyString>>(), size_of::<String>());
    }
}
