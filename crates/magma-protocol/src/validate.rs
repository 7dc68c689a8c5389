//! Validation of parsed JSON into the models, with pydantic's semantics.
//!
//! Each model validator takes ownership of the parsed value and moves the
//! accepted parts into the typed result, so the happy path copies nothing.
//! Problems are collected, not returned early: like pydantic, every field is
//! checked in declaration order, then undeclared keys are reported, and a
//! model-level rule runs only when the model's fields are all valid.

use std::collections::HashSet;
use std::num::NonZeroU64;

use crate::error::{Error, ErrorKind, Issue, Location, Segment};
use crate::json::{Json, Map, Object};
use crate::model::{
    AgentDecision, AgentError, AgentHealth, AgentInfo, AgentInput, AgentInstruction, AgentOutput,
    AgentRequest, AgentResponse, InstructionType, NonEmptyString, Outcome, ToolCall,
};

/// How deep a free-form value may nest below a `dict[str, JsonValue]` key in
/// the reference (pydantic-core's recursion guard): a value inside more than
/// 254 containers is refused.
pub const MAX_FREE_FORM_DEPTH: usize = 254;

#[derive(Clone, Copy)]
enum PathSeg {
    Field(&'static str),
    Index(usize),
}

/// The validation context: where we are, and what went wrong so far.
pub(crate) struct Cx {
    model: &'static str,
    path: Vec<PathSeg>,
    issues: Vec<Issue>,
}

impl Cx {
    pub(crate) fn new(model: &'static str) -> Cx {
        Cx {
            model,
            path: Vec::with_capacity(8),
            issues: Vec::new(),
        }
    }

    fn location(&self, extra: impl IntoIterator<Item = Segment>) -> Location {
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

    fn report(&mut self, kind: ErrorKind, msg: impl Into<String>, input: Json) -> &mut Issue {
        let issue = Issue::new(kind, self.location([]), msg).with_input(input);
        self.issues.push(issue);
        let last = self.issues.len() - 1;
        &mut self.issues[last]
    }

    fn report_ctx(&mut self, kind: ErrorKind, msg: &str, input: Json, key: &str, val: Json) {
        let issue = Issue::new(kind, self.location([]), msg)
            .with_input(input)
            .with_ctx(key, val);
        self.issues.push(issue);
    }

    fn at<T>(&mut self, seg: PathSeg, f: impl FnOnce(&mut Cx) -> T) -> T {
        self.path.push(seg);
        let out = f(self);
        self.path.pop();
        out
    }

    fn count(&self) -> usize {
        self.issues.len()
    }

    pub(crate) fn finish<T>(self, value: T) -> Result<T, Error> {
        if self.issues.is_empty() {
            Ok(value)
        } else {
            Err(Error::new(self.model, self.issues))
        }
    }

    fn finish_opt<T>(self, value: Option<T>) -> Result<T, Error> {
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
                Err(Error::new(self.model, issues))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Scalars

fn strict_str(v: Json, cx: &mut Cx) -> Option<String> {
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

fn opt_str(v: Json, cx: &mut Cx) -> Option<Option<String>> {
    match v {
        Json::Null => Some(None),
        other => strict_str(other, cx).map(Some),
    }
}

fn non_empty(v: Json, cx: &mut Cx) -> Option<NonEmptyString> {
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

fn strict_bool(v: Json, cx: &mut Cx) -> Option<bool> {
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
fn strict_int(v: Json, cx: &mut Cx) -> Option<crate::Number> {
    match v {
        Json::Number(n) if n.is_integer() => Some(n),
        other => {
            cx.report(ErrorKind::IntType, "Input should be a valid integer", other);
            None
        }
    }
}

fn out_of_range(n: crate::Number, cx: &mut Cx, what: &str) {
    let msg = format!("Input should fit in {what} (the reference's integers are unbounded)");
    cx.report(ErrorKind::IntOutOfRange, msg, Json::Number(n));
}

fn identifier(v: Json, cx: &mut Cx) -> Option<i64> {
    let n = strict_int(v, cx)?;
    match n.as_i64() {
        Some(i) => Some(i),
        None => {
            out_of_range(n, cx, "a 64-bit signed integer");
            None
        }
    }
}

fn num_outputs(v: Json, cx: &mut Cx) -> Option<NonZeroU64> {
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

fn candidate_index(v: Json, cx: &mut Cx) -> Option<u64> {
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
fn literal(v: Json, cx: &mut Cx, allowed: &[&str]) -> Option<usize> {
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

// ---------------------------------------------------------------------------
// Containers

fn list<T>(
    v: Json,
    cx: &mut Cx,
    mut item: impl FnMut(Json, &mut Cx) -> Option<T>,
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

/// `dict[str, JsonValue]`: an object whose values are finite and not nested
/// deeper than the reference allows.
fn json_object(v: Json, cx: &mut Cx) -> Option<Object> {
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

fn check_object_values(o: &Object, cx: &mut Cx) {
    for (i, (_, value)) in o.entries().iter().enumerate() {
        if matches!(value, Json::Null | Json::Bool(_) | Json::String(_)) {
            continue;
        }
        check_value_at(o, i, value, cx, MAX_FREE_FORM_DEPTH);
    }
}

fn check_value_at(o: &Object, i: usize, value: &Json, cx: &mut Cx, limit: usize) {
    let mut sub = Cx {
        model: cx.model,
        path: Vec::new(),
        issues: Vec::new(),
    };
    check_free_form(value, &mut sub, limit);
    if sub.issues.is_empty() {
        return;
    }
    let prefix = cx.location([Segment::Key(o.entries()[i].0.clone())]);
    cx.issues
        .extend(sub.issues.into_iter().map(|issue| issue.prefixed(&prefix)));
}

/// Checks a free-form value without recursion: every number finite, no
/// container nested more than `limit` levels (the value itself is level 1).
pub(crate) fn check_free_form(root: &Json, cx: &mut Cx, limit: usize) {
    struct Frame<'a> {
        value: &'a Json,
        next: usize,
    }
    fn path_of(cx: &Cx, stack: &[Frame<'_>]) -> Location {
        let segs = stack.iter().filter_map(|f| {
            let i = f.next.checked_sub(1)?;
            match f.value {
                Json::Array(_) => Some(Segment::Index(i)),
                Json::Object(o) => Some(Segment::Key(o.entries()[i].0.clone())),
                _ => None,
            }
        });
        cx.location(segs)
    }
    // Returns true when `v` is a container to descend into. Like pydantic, a
    // value enclosed by more than `limit` containers is refused where it
    // stands (an empty container at the limit is fine: nothing is inside).
    fn visit(v: &Json, stack: &[Frame<'_>], cx: &mut Cx, limit: usize) -> bool {
        if stack.len() > limit {
            let loc = path_of(cx, stack);
            cx.issues.push(
                Issue::new(
                    ErrorKind::RecursionDepthExceeded,
                    loc,
                    "Recursion error - maximum validation depth exceeded",
                )
                .with_input(v.clone()),
            );
            return false;
        }
        match v {
            Json::Number(n) if !n.is_finite() => {
                let loc = path_of(cx, stack);
                cx.issues.push(
                    Issue::new(
                        ErrorKind::FiniteNumber,
                        loc,
                        "Input should be a finite number",
                    )
                    .with_input(v.clone()),
                );
                false
            }
            Json::Array(a) => !a.is_empty(),
            Json::Object(o) => !o.is_empty(),
            _ => false,
        }
    }

    let mut stack: Vec<Frame<'_>> = Vec::new();
    if visit(root, &stack, cx, limit) {
        stack.push(Frame {
            value: root,
            next: 0,
        });
    }
    while let Some(top) = stack.last_mut() {
        let child = match top.value {
            Json::Array(a) => a.get(top.next),
            Json::Object(o) => o.entries().get(top.next).map(|(_, v)| v),
            _ => None,
        };
        match child {
            Some(child) => {
                top.next += 1;
                if visit(child, &stack, cx, limit) {
                    stack.push(Frame {
                        value: child,
                        next: 0,
                    });
                }
            }
            None => {
                stack.pop();
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Models

fn model_object(v: Json, class: &'static str, cx: &mut Cx) -> Option<Object> {
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
struct Fields {
    obj: Object,
    /// The whole object, kept only when a required field is missing: pydantic
    /// reports the object as the `input` of a `missing` error.
    snapshot: Option<Json>,
    start: usize,
}

impl Fields {
    fn new(obj: Object, required: &[&str], cx: &Cx) -> Fields {
        let missing = required.iter().any(|k| !obj.contains_key(k));
        let snapshot = missing.then(|| Json::Object(obj.clone()));
        Fields {
            obj,
            snapshot,
            start: cx.count(),
        }
    }

    fn required<T>(
        &mut self,
        key: &'static str,
        cx: &mut Cx,
        f: impl FnOnce(Json, &mut Cx) -> Option<T>,
    ) -> Option<T> {
        match self.obj.remove(key) {
            Some(v) => cx.at(PathSeg::Field(key), |cx| f(v, cx)),
            None => {
                let input = self.snapshot.clone().unwrap_or_default();
                cx.at(PathSeg::Field(key), |cx| {
                    cx.report(ErrorKind::Missing, "Field required", input);
                });
                None
            }
        }
    }

    fn optional<T>(
        &mut self,
        key: &'static str,
        cx: &mut Cx,
        default: impl FnOnce() -> T,
        f: impl FnOnce(Json, &mut Cx) -> Option<T>,
    ) -> Option<T> {
        match self.obj.remove(key) {
            Some(v) => cx.at(PathSeg::Field(key), |cx| f(v, cx)),
            None => Some(default()),
        }
    }

    /// Reports undeclared keys; `true` if the whole model had no problem.
    fn finish(self, cx: &mut Cx) -> bool {
        for (key, value) in self.obj {
            let loc = cx.location([Segment::Key(key)]);
            cx.issues.push(
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

fn instruction(v: Json, cx: &mut Cx) -> Option<AgentInstruction> {
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

fn input(v: Json, cx: &mut Cx) -> Option<AgentInput> {
    let obj = model_object(v, "AgentInput", cx)?;
    let mut f = Fields::new(obj, &["id", "instruction"], cx);
    let id = f.required("id", cx, identifier);
    let instruction = f.required("instruction", cx, instruction);
    let tools = f.optional("tools", cx, Vec::new, |v, cx| list(v, cx, json_object));
    let attributes = f.optional("attributes", cx, Object::new, json_object);
    let memory = f.optional("memory", cx, Object::new, json_object);
    let outputs = f.optional("num_outputs", cx, || NonZeroU64::MIN, num_outputs);
    let extra_keys = f.optional("extra_keys", cx, Object::new, json_object);
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

pub(crate) fn request(v: Json) -> Result<AgentRequest, Error> {
    let mut cx = Cx::new("AgentRequest");
    let r = request_in(v, &mut cx);
    cx.finish_opt(r)
}

fn request_in(v: Json, cx: &mut Cx) -> Option<AgentRequest> {
    let obj = model_object(v, "AgentRequest", cx)?;
    let mut f = Fields::new(obj, &["request_id", "inputs"], cx);
    let request_id = f.required("request_id", cx, non_empty);
    let inputs = f.required("inputs", cx, |v, cx| list(v, cx, input));
    f.finish(cx).then_some(())?;
    let req = AgentRequest::from_parts_unchecked(request_id?, inputs?);
    if let Some(issue) = unique_ids_issue(&req) {
        cx.issues.push(issue);
        return None;
    }
    Some(req)
}

/// The reference's `unique_input_ids` rule, reported at the root.
pub(crate) fn unique_ids_issue(req: &AgentRequest) -> Option<Issue> {
    let inputs = req.inputs();
    let dup = if inputs.len() <= 16 {
        inputs
            .iter()
            .enumerate()
            .any(|(i, a)| inputs[..i].iter().any(|b| b.id == a.id))
    } else {
        let mut seen = HashSet::with_capacity(inputs.len());
        !inputs.iter().all(|a| seen.insert(a.id))
    };
    dup.then(|| {
        Issue::new(
            ErrorKind::ValueError,
            Location::root(),
            "Value error, Input ids must be unique within a request",
        )
        .with_input(crate::ser::to_json(req))
    })
}

fn tool_call(v: Json, cx: &mut Cx) -> Option<ToolCall> {
    let obj = model_object(v, "ToolCall", cx)?;
    let mut f = Fields::new(obj, &["name", "target_robot_name"], cx);
    let name = f.required("name", cx, non_empty);
    let arguments = f.optional("arguments", cx, Object::new, json_object);
    let target = f.required("target_robot_name", cx, non_empty);
    f.finish(cx).then_some(())?;
    Some(ToolCall {
        name: name?,
        arguments: arguments?,
        target_robot_name: target?,
    })
}

fn decision(v: Json, cx: &mut Cx) -> Option<Option<AgentDecision>> {
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

fn agent_error(v: Json, cx: &mut Cx) -> Option<Option<AgentError>> {
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

fn output(v: Json, cx: &mut Cx) -> Option<AgentOutput> {
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
    let source_id = f.required("source_id", cx, identifier);
    let index = f.required("candidate_index", cx, candidate_index);
    let status = f.required("status", cx, |v, cx| {
        literal(v, cx, &["completed", "error"])
    });
    let memory = f.required("memory", cx, json_object);
    let steps = f.optional("internal_steps", cx, Vec::new, |v, cx| {
        list(v, cx, json_object)
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
                decision.map_or(Json::Null, |d| crate::ser::to_json(&d)),
            );
            o.insert(
                "error",
                error.map_or(Json::Null, |e| crate::ser::to_json(&e)),
            );
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

pub(crate) fn response(v: Json) -> Result<AgentResponse, Error> {
    let mut cx = Cx::new("AgentResponse");
    let r = list(v, &mut cx, output).map(AgentResponse::new);
    cx.finish_opt(r)
}

pub(crate) fn health(v: Json) -> Result<AgentHealth, Error> {
    let mut cx = Cx::new("AgentHealth");
    let r = health_in(v, &mut cx);
    cx.finish_opt(r)
}

fn health_in(v: Json, cx: &mut Cx) -> Option<AgentHealth> {
    let obj = model_object(v, "AgentHealth", cx)?;
    let mut f = Fields::new(obj, &[], cx);
    let status = f.optional("status", cx, || 0, |v, cx| literal(v, cx, &["ready"]));
    f.finish(cx).then_some(())?;
    status.map(|_| AgentHealth)
}

pub(crate) fn info(v: Json) -> Result<AgentInfo, Error> {
    let mut cx = Cx::new("AgentInfo");
    let r = info_in(v, &mut cx);
    cx.finish_opt(r)
}

fn info_in(v: Json, cx: &mut Cx) -> Option<AgentInfo> {
    let obj = model_object(v, "AgentInfo", cx)?;
    let mut f = Fields::new(obj, &["agent_id", "agent_version", "capabilities"], cx);
    let protocol_version = f.optional(
        "protocol_version",
        cx,
        || crate::PROTOCOL_VERSION.to_owned(),
        strict_str,
    );
    let agent_id = f.required("agent_id", cx, strict_str);
    let agent_version = f.required("agent_version", cx, strict_str);
    let coaching = f.optional("specialized_coaching", cx, Vec::new, |v, cx| {
        list(v, cx, strict_str)
    });
    let resume = f.optional("coaching_resume", cx, || false, strict_bool);
    let reason = f.optional("coaching_unavailable_reason", cx, || None, opt_str);
    let capabilities = f.required("capabilities", cx, capabilities);
    f.finish(cx).then_some(())?;
    Some(AgentInfo {
        protocol_version: protocol_version?,
        agent_id: agent_id?,
        agent_version: agent_version?,
        specialized_coaching: coaching?,
        coaching_resume: resume?,
        coaching_unavailable_reason: reason?,
        capabilities: capabilities?,
    })
}

fn capabilities(v: Json, cx: &mut Cx) -> Option<Map<bool>> {
    let Json::Object(o) = v else {
        cx.report(ErrorKind::DictType, "Input should be a valid dictionary", v);
        return None;
    };
    let mut out = Map::with_capacity(o.len());
    let mut ok = true;
    for (key, value) in o {
        match value {
            Json::Bool(b) => out.push_unique(key, b),
            other => {
                ok = false;
                let loc = cx.location([Segment::Key(key)]);
                cx.issues.push(
                    Issue::new(ErrorKind::BoolType, loc, "Input should be a valid boolean")
                        .with_input(other),
                );
            }
        }
    }
    ok.then_some(out)
}
