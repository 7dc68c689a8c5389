//! The direct reader of [`SpecializedCoachingRequest::from_slice`]: the
//! usual valid coaching request, read straight into typed values.
//!
//! The exact path (the parser following the request's `SHAPE`, then the
//! request's validator) builds a [`crate::Json`] tree of the typed levels
//! (the stage, the errors, the steps, their inputs and decisions, the
//! points) and then takes it apart field by field. [`read`] reads the body
//! straight into the typed values instead, as the inference request's
//! direct reader (`model/request/direct.rs`) does, and gives up (`None`) at
//! the first thing it does not expect; `from_slice` then takes the exact
//! path, which reports errors as before.
//!
//! # The contract
//!
//! The inference reader's: `read(b)` returns `Some(x)` only when the exact
//! path returns `Ok(y)` with `x == y`, every free-form object kept as
//! validated text exactly when the exact path keeps it so, with the same
//! text. The tests below check it on every coaching request of the
//! reference fixtures (and the coaching corpus when present), on mutations
//! of each valid one and on the benchmark bodies.
//!
//! # What it accepts
//!
//! Exactly this shape, anything else is `None`:
//!
//! - what the inference reader accepts around the document (UTF-8 without
//!   a byte-order mark, the parser's whitespace, nothing after the root);
//! - at every typed level (the root, `stage`, `active_errors`' items,
//!   `diagnosis`, steps, their `input`, `output` and its tool calls,
//!   `error`, points and their `input`), only the model's own keys, written
//!   without escapes and never repeated;
//! - strings where the model has strings (non-empty where it says so),
//!   `kind` one of its three names, integer lexemes that fit `i64` for ids,
//!   and `null` only where the model reads it as absent: `stage.hint`,
//!   `diagnosis` and its `expected_decision`, a step's `output` and
//!   `error`, `error.component`, a point's `input_step_id` and `input`;
//! - inputs as the inference reader reads them (`AgentInput::read_direct`,
//!   called with the parser's depth at an input of a step or point);
//! - free-form objects (`details`, `arguments`, `internal_steps`' items,
//!   `execution`, `additional_info`, the inputs' ones) that the free-form
//!   scan accepts at that position, with the parser's depth there;
//! - each point with exactly one of `input_step_id` and `input`, and the
//!   request's rules holding (unique ids, the target step and every
//!   `input_step_id` in the trajectory).

use super::super::step::{DIAGNOSIS_FIELDS, ERROR_FIELDS, POINT_FIELDS, STAGE_FIELDS, STEP_FIELDS};
use super::super::{
    CoachingDiagnosis, CoachingError, CoachingStage, CoachingStep, ReinjectionPoint,
};
use super::{CoachingKind, ROOT_FIELDS, SpecializedCoachingRequest, rules_problem};
use crate::json::{Cursor, Object};
use crate::limits::READ;
use crate::model::{AGENT_ERROR_FIELDS, DECISION_FIELDS, TOOL_CALL_FIELDS};
use crate::validate::NonEmptyString;
use crate::{AgentDecision, AgentError, AgentInput, ToolCall};

/// The parser's stack depth at `additional_info`: the root object is open.
const ROOT_DEPTH: usize = 1;
/// At an active error's `details`: the root, `active_errors`, the error.
const ERROR_DEPTH: usize = 3;
/// At a step's `execution` (the root, `trajectory`, the step); its
/// `internal_steps` items are one deeper (the array).
const STEP_DEPTH: usize = 3;
/// At the free-form fields of a step's or a point's `input`: the root, the
/// list, the step or point, the input.
const INPUT_DEPTH: usize = 4;
/// At a tool call's `arguments`: the root, `trajectory`, the step,
/// `output`, `tool_calls`, the call.
const ARGUMENTS_DEPTH: usize = 6;

/// The values of `kind`, in the order of [`CoachingKind::ALL`].
const KINDS: &[&str] = &["failure", "suboptimal", "format"];

/// The common case of a valid coaching request, read straight into typed
/// values. `None` whenever anything is unusual; the caller then takes the
/// exact path.
pub(super) fn read(src: &[u8]) -> Option<SpecializedCoachingRequest> {
    let mut c = Cursor::new(src, READ)?;
    let request = request(&mut c).filter(|_| c.at_end())?;
    rules_problem(&request).is_none().then_some(request)
}

/// `null` (absent) or what `read` reads.
fn nullable<'a, T>(
    c: &mut Cursor<'a>,
    read: impl FnOnce(&mut Cursor<'a>) -> Option<T>,
) -> Option<Option<T>> {
    if c.null() {
        Some(None)
    } else {
        read(c).map(Some)
    }
}

/// An integer lexeme that fits `i64`.
fn int64(c: &mut Cursor<'_>) -> Option<i64> {
    c.integer()?.parse::<i64>().ok()
}

#[inline(always)]
fn non_empty(c: &mut Cursor<'_>) -> Option<NonEmptyString> {
    NonEmptyString::from_text(c.string_cow()?)
}

fn stage(c: &mut Cursor<'_>) -> Option<CoachingStage> {
    let (mut id, mut goal, mut hint) = (None, None, None);
    c.object(STAGE_FIELDS, |c, i| {
        match i {
            0 => id = Some(int64(c)?),
            1 => goal = Some(c.string()?),
            _ => hint = nullable(c, Cursor::string)?,
        }
        Some(())
    })?;
    Some(CoachingStage {
        id: id?,
        goal: goal?,
        hint,
    })
}

fn active_error(c: &mut Cursor<'_>) -> Option<CoachingError> {
    let (mut code, mut description, mut details) = (None, None, None);
    c.object(ERROR_FIELDS, |c, i| {
        match i {
            0 => code = Some(c.string()?),
            1 => description = Some(c.string()?),
            _ => details = Some(c.free_object(ERROR_DEPTH)?),
        }
        Some(())
    })?;
    Some(CoachingError {
        code: code?,
        description: description?,
        details: details.unwrap_or_default(),
    })
}

fn diagnosis(c: &mut Cursor<'_>) -> Option<CoachingDiagnosis> {
    let (mut explanation, mut expected) = (None, None);
    c.object(DIAGNOSIS_FIELDS, |c, i| {
        if i == 0 {
            explanation = Some(c.string()?);
        } else {
            expected = nullable(c, Cursor::string)?;
        }
        Some(())
    })?;
    Some(CoachingDiagnosis {
        explanation: explanation?,
        expected_decision: expected,
    })
}

fn tool_call(c: &mut Cursor<'_>) -> Option<ToolCall> {
    let (mut name, mut arguments, mut target) = (None, None, None);
    c.object(TOOL_CALL_FIELDS, |c, i| {
        match i {
            0 => name = Some(non_empty(c)?),
            1 => arguments = Some(c.free_object(ARGUMENTS_DEPTH)?),
            _ => target = Some(non_empty(c)?),
        }
        Some(())
    })?;
    Some(ToolCall {
        name: name?,
        arguments: arguments.unwrap_or_default(),
        target_robot_name: target?,
    })
}

fn decision(c: &mut Cursor<'_>) -> Option<AgentDecision> {
    let mut d = AgentDecision::default();
    c.object(DECISION_FIELDS, |c, i| {
        if i == 0 {
            d.say = c.string()?;
        } else {
            c.array(|c| {
                let call = tool_call(c)?;
                if d.tool_calls.capacity() == 0 {
                    // GEN's decisions hold one call: room for exactly that
                    // (a fourth of the default first allocation).
                    d.tool_calls = Vec::with_capacity(1);
                }
                d.tool_calls.push(call);
                Some(())
            })?;
        }
        Some(())
    })?;
    Some(d)
}

fn agent_error(c: &mut Cursor<'_>) -> Option<AgentError> {
    let (mut code, mut message, mut component) = (None, None, None);
    c.object(AGENT_ERROR_FIELDS, |c, i| {
        match i {
            0 => code = Some(non_empty(c)?),
            1 => message = Some(non_empty(c)?),
            _ => component = nullable(c, Cursor::string)?,
        }
        Some(())
    })?;
    Some(AgentError {
        code: code?,
        message: message?,
        component,
    })
}

fn step_input(c: &mut Cursor<'_>) -> Option<AgentInput> {
    AgentInput::read_direct(c, INPUT_DEPTH)
}

fn step(c: &mut Cursor<'_>) -> Option<CoachingStep> {
    let (mut id, mut input_) = (None, None);
    let (mut output, mut error) = (None, None);
    let mut internal_steps = Vec::new();
    let mut execution = None;
    c.object(STEP_FIELDS, |c, i| {
        match i {
            0 => id = Some(int64(c)?),
            1 => input_ = Some(step_input(c)?),
            2 => output = nullable(c, decision)?,
            3 => error = nullable(c, agent_error)?,
            4 => c.array(|c| {
                let item = c.free_object(STEP_DEPTH + 1)?;
                if internal_steps.capacity() == 0 {
                    // Usually one entry per step, as for the tool calls.
                    internal_steps = Vec::with_capacity(1);
                }
                internal_steps.push(item);
                Some(())
            })?,
            _ => execution = Some(c.free_object(STEP_DEPTH)?),
        }
        Some(())
    })?;
    Some(CoachingStep {
        id: id?,
        input: input_?,
        output,
        error,
        internal_steps,
        execution: execution.unwrap_or_default(),
    })
}

fn point(c: &mut Cursor<'_>) -> Option<ReinjectionPoint> {
    let (mut id, mut step_id, mut input_) = (None, None, None);
    c.object(POINT_FIELDS, |c, i| {
        match i {
            0 => id = Some(c.string()?),
            1 => step_id = nullable(c, int64)?,
            _ => input_ = nullable(c, step_input)?,
        }
        Some(())
    })?;
    // Exactly one of the two; anything else is the exact path's error.
    match (id?, step_id, input_) {
        (id, Some(step), None) => Some(ReinjectionPoint::at_step(id, step)),
        (id, None, Some(input)) => Some(ReinjectionPoint::at_input(id, input)),
        _ => None,
    }
}

/// An array of what `element` reads.
fn list<'a, T>(
    c: &mut Cursor<'a>,
    mut element: impl FnMut(&mut Cursor<'a>) -> Option<T>,
) -> Option<Vec<T>> {
    let mut items = Vec::new();
    c.array(|c| {
        items.push(element(c)?);
        Some(())
    })?;
    Some(items)
}

/// The most steps [`trajectory_steps`] makes room for at once.
const STEPS_RESERVED_AT_MOST: usize = 1024;

/// The trajectory: [`list`] of [`step`]s, with room made after the first
/// step for as many more as the rest of the document would hold steps of
/// its size. A GEN trajectory's steps are alike, and a vector of steps of
/// 384 bytes grown by doubling copied most of them once more: sized at
/// once, a 50-step request parses about 0.4% faster. At most
/// [`STEPS_RESERVED_AT_MOST`], however small the first step.
fn trajectory_steps(c: &mut Cursor<'_>) -> Option<Vec<CoachingStep>> {
    let mut steps = Vec::new();
    c.array(|c| {
        let start = c.position();
        steps.push(step(c)?);
        if steps.len() == 1 {
            let first = c.position().saturating_sub(start).max(1);
            steps.reserve((c.remaining() / first).min(STEPS_RESERVED_AT_MOST));
        }
        Some(())
    })?;
    Some(steps)
}

fn request(c: &mut Cursor<'_>) -> Option<SpecializedCoachingRequest> {
    let (mut run_id, mut request_id, mut kind, mut stage_) = (None, None, None, None);
    let (mut active_errors, mut diagnosis_) = (Vec::new(), None);
    let (mut target, mut trajectory, mut points) = (None, None, None);
    let mut additional_info: Option<Object> = None;
    c.object(ROOT_FIELDS, |c, i| {
        match i {
            0 => run_id = Some(non_empty(c)?),
            1 => request_id = Some(non_empty(c)?),
            2 => kind = Some(CoachingKind::ALL[c.literal(KINDS)?]),
            3 => stage_ = Some(stage(c)?),
            4 => active_errors = list(c, active_error)?,
            5 => diagnosis_ = nullable(c, diagnosis)?,
            6 => target = Some(int64(c)?),
            7 => trajectory = Some(trajectory_steps(c)?),
            8 => points = Some(list(c, point)?),
            _ => additional_info = Some(c.free_object(ROOT_DEPTH)?),
        }
        Some(())
    })?;
    Some(SpecializedCoachingRequest {
        run_id: run_id?,
        request_id: request_id?,
        kind: kind?,
        stage: stage_?,
        active_errors,
        diagnosis: diagnosis_,
        target_step_id: target?,
        trajectory: trajectory?,
        reinjection_points: points?,
        additional_info: additional_info.unwrap_or_default(),
    })
}

#[cfg(test)]
#[allow(clippy::print_stderr)] // the tests report what they counted
mod tests {
    use std::path::Path;

    use super::*;

    use magma_testkit::fixtures::{
        StepParts, coaching_corpus, decision_dense_coaching_request, gen_like_coaching_body,
        gen_like_coaching_request, gen_like_coaching_request_without_decisions,
    };
    include!("../../../../tests/support/corpus_docs.rs");

    /// The exact path, as `from_slice` runs it when this reader says `None`.
    fn exact(b: &[u8]) -> Result<SpecializedCoachingRequest, crate::Error> {
        crate::json::parse_shaped(b, &super::super::SHAPE, READ)
            .map_err(|e| crate::Error::from(e).with_model("SpecializedCoachingRequest"))
            .and_then(SpecializedCoachingRequest::from_json)
    }

    /// Every free-form object of `r`, in order, as `Some(text)` for
    /// validated text and `None` for a tree.
    fn representations(r: &SpecializedCoachingRequest) -> Vec<Option<String>> {
        let input = |i: &AgentInput| -> Vec<Object> {
            let mut v = i.tools.clone();
            v.extend([i.attributes.clone(), i.memory.clone(), i.extra_keys.clone()]);
            v
        };
        let mut all: Vec<Object> = r.active_errors.iter().map(|e| e.details.clone()).collect();
        for s in &r.trajectory {
            all.extend(input(&s.input));
            if let Some(d) = &s.output {
                all.extend(d.tool_calls.iter().map(|t| t.arguments.clone()));
            }
            all.extend(s.internal_steps.iter().cloned());
            all.push(s.execution.clone());
        }
        for p in &r.reinjection_points {
            all.extend(p.input().map(input).unwrap_or_default());
        }
        all.push(r.additional_info.clone());
        all.iter()
            .map(|o| o.raw_text().map(str::to_owned))
            .collect()
    }

    /// Checks the contract on one body: `from_slice` gives exactly the exact
    /// path's result (value or error list), and the direct reader answers
    /// only with the exact path's value, represented alike. Returns whether
    /// the exact path accepts the body and whether the direct reader answered.
    fn check(body: &[u8]) -> Result<(bool, bool), String> {
        let shown = || {
            String::from_utf8_lossy(body)
                .chars()
                .take(1500)
                .collect::<String>()
        };
        let exact = exact(body);
        if SpecializedCoachingRequest::from_slice(body) != exact {
            return Err(format!(
                "from_slice differs from the exact path\n{}",
                shown()
            ));
        }
        let Some(f) = read(body) else {
            return Ok((exact.is_ok(), false));
        };
        let e = exact.map_err(|err| {
            format!(
                "the direct reader accepts what the exact path refuses ({err}):\n{}",
                shown()
            )
        })?;
        if f != e {
            return Err(format!("values differ: {f:?} vs {e:?}\n{}", shown()));
        }
        if representations(&f) != representations(&e) {
            return Err(format!("representations differ\n{}", shown()));
        }
        if f.to_json_string() != e.to_json_string() {
            return Err(format!("serializations differ\n{}", shown()));
        }
        Ok((true, true))
    }

    fn fixture_docs() -> Vec<(String, String)> {
        let docs = fixture_docs_of("coaching_request");
        assert!(docs.len() > 300, "{} coaching request fixtures", docs.len());
        docs
    }

    #[test]
    fn the_direct_reader_agrees_with_the_exact_path_on_the_corpora() {
        let mut corpora = vec![("fixtures", fixture_docs())];
        if let Some(p) = coaching_corpus(env!("CARGO_MANIFEST_DIR")) {
            corpora.push(("coaching corpus", corpus_docs(&p, "coaching_request")));
        }
        let mut failures = Vec::new();
        for (name, docs) in corpora {
            let (mut valid, mut fast, mut slow_valid) = (0, 0, Vec::new());
            for (id, doc) in &docs {
                match check(doc.as_bytes()) {
                    Ok((ok, f)) => {
                        valid += usize::from(ok);
                        fast += usize::from(f);
                        if ok && !f {
                            slow_valid.push(id.as_str());
                        }
                    }
                    Err(e) => failures.push(format!("{name} {id}: {e}")),
                }
            }
            eprintln!(
                "{name}: {} coaching requests, {valid} valid, {fast} of them on the direct \
                 reader; valid ones on the exact path: {slow_valid:?}",
                docs.len()
            );
            assert!(
                fast * 10 >= valid * 8,
                "{name}: only {fast} of {valid} valid requests take the direct reader"
            );
        }
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }

    /// Replacements for a member's value: absent, `null`, other types,
    /// numbers the readers must agree on.
    const REPLACEMENTS: &[Option<&str>] = &[
        None,
        Some("null"),
        Some("1"),
        Some("-0"),
        Some("1.0"),
        Some("9223372036854775808"),
        Some("\"\""),
        Some("\"x\""),
        Some("\"failure\""),
        Some("[]"),
        Some("{}"),
        Some("true"),
    ];

    /// The paths (keys and indexes) of every object member of `v`.
    fn member_paths(v: &serde_json::Value, path: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, x) in m {
                    path.push(k.clone());
                    out.push(path.clone());
                    member_paths(x, path, out);
                    path.pop();
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    path.push(i.to_string());
                    member_paths(x, path, out);
                    path.pop();
                }
            }
            _ => {}
        }
    }

    /// `v` with the member at `path` removed (`None`) or replaced.
    fn mutated(v: &serde_json::Value, path: &[String], with: Option<&str>) -> String {
        let mut v = v.clone();
        let (last, parents) = path.split_last().expect("a member path");
        let mut at = &mut v;
        for p in parents {
            at = match at {
                serde_json::Value::Array(a) => &mut a[p.parse::<usize>().expect("an index")],
                other => &mut other[p.as_str()],
            };
        }
        let obj = at.as_object_mut().expect("an object");
        match with {
            None => {
                obj.remove(last);
            }
            Some(text) => {
                let mut raw = serde_json::Value::Null;
                if text != "null" {
                    raw = serde_json::Value::String(format!("\u{0}RAW{text}\u{0}"));
                }
                obj.insert(last.clone(), raw);
            }
        }
        // Raw replacements are spliced in as text, so that `-0`, `1.0` and
        // out-of-range integers reach both readers as written.
        let text = v.to_string();
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(start) = rest.find("\"\\u0000RAW") {
            out.push_str(&rest[..start]);
            let after = &rest[start + "\"\\u0000RAW".len()..];
            let end = after.find("\\u0000\"").expect("the raw marker's end");
            out.push_str(&after[..end].replace("\\\"", "\""));
            rest = &after[end + "\\u0000\"".len()..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn mutations_of_the_valid_fixtures_keep_the_contract() {
        let mut bodies = 0usize;
        let (mut valid, mut fast) = (0usize, 0usize);
        let mut failures = Vec::new();
        let mut docs = fixture_docs();
        docs.push(("bench 3 steps".into(), gen_like_coaching_request(3)));
        let mut valid_docs = 0;
        for (id, doc) in &docs {
            if exact(doc.as_bytes()).is_err() {
                continue;
            }
            valid_docs += 1;
            let value: serde_json::Value = serde_json::from_str(doc).expect("valid JSON");
            let mut paths = Vec::new();
            member_paths(&value, &mut Vec::new(), &mut paths);
            // At most 40 members per document, spread over it.
            let stride = paths.len().div_ceil(40).max(1);
            let mut variants: Vec<String> = vec![
                doc.replacen('{', "{\"run_id\":\"dup\",", 1),
                doc.replacen('{', "{\"unknown\":1,", 1),
                doc.replacen("\"run_id\"", "\"\\u0072un_id\"", 1),
                format!("{doc} x"),
                format!(" \n{doc}\t"),
                value.to_string(),
            ];
            for path in paths.iter().step_by(stride) {
                variants.extend(REPLACEMENTS.iter().map(|w| mutated(&value, path, *w)));
            }
            for body in &variants {
                bodies += 1;
                match check(body.as_bytes()) {
                    Ok((ok, f)) => {
                        valid += usize::from(ok);
                        fast += usize::from(f);
                    }
                    Err(e) => failures.push(format!("{id}: {e}")),
                }
            }
        }
        eprintln!(
            "mutations of {valid_docs} valid coaching requests: {bodies} bodies, {valid} valid, \
             {fast} on the direct reader"
        );
        assert!(valid_docs > 50, "{valid_docs} valid coaching requests");
        assert!(
            fast * 10 >= valid * 7,
            "{fast} of {valid} on the direct reader"
        );
        assert!(
            failures.is_empty(),
            "{} failures:\n{}",
            failures.len(),
            failures.join("\n\n")
        );
    }

    #[test]
    fn the_benchmark_body_takes_the_direct_reader() {
        for steps in [1, 3, 50] {
            // The bench's second body too: a step's `output` may be `null`.
            let without = gen_like_coaching_request_without_decisions(steps);
            assert_eq!(
                check(without.as_bytes()),
                Ok((true, true)),
                "{steps} steps, no decisions"
            );
            let r = read(without.as_bytes()).expect("the direct reader");
            assert!(r.trajectory.iter().all(|s| s.output.is_none()));
            let body = gen_like_coaching_request(steps);
            assert_eq!(check(body.as_bytes()), Ok((true, true)), "{steps} steps");
            let r = read(body.as_bytes()).expect("the direct reader");
            // Every non-empty free-form object in the body stays text.
            let kept = representations(&r).iter().filter(|t| t.is_some()).count();
            let empty = representations(&r).iter().filter(|t| t.is_none()).count();
            assert!(
                kept > 10 * steps,
                "{steps} steps: {kept} kept, {empty} trees"
            );
            // GEN's tool and robot names are held without an allocation of
            // their own (those allocations were half of a decision's cost).
            for step in &r.trajectory {
                let output = step.output.as_ref().expect("GEN's decision");
                for call in &output.tool_calls {
                    assert!(call.name.is_inline() && call.target_robot_name.is_inline());
                }
            }
            // The trajectory was sized after its first step: the vector never
            // grew (its first allocation holds 4 steps), and holds room for
            // at most the steps it has, one more, and the reinjection point's
            // input.
            let (len, room) = (r.trajectory.len(), r.trajectory.capacity());
            assert!(room <= (len + 2).max(4), "{steps} steps: room for {room}");
        }
    }

    /// The bodies of `parse_ratio --decisions` take the direct reader, and
    /// the one with decisions holds GEN's in every step.
    #[test]
    fn the_decision_dense_bodies_take_the_direct_reader() {
        for steps in [1, 1000] {
            for decisions in [true, false] {
                let body = decision_dense_coaching_request(steps, decisions);
                assert_eq!(check(body.as_bytes()), Ok((true, true)), "{steps} steps");
                let r = read(body.as_bytes()).expect("the direct reader");
                assert_eq!(r.trajectory.len(), steps);
                let calls = r.trajectory.iter().filter_map(|s| s.output.as_ref());
                assert_eq!(
                    calls.map(|d| d.tool_calls.len()).sum::<usize>(),
                    if decisions { steps } else { 0 }
                );
            }
        }
    }

    /// The bodies of `parse_ratio --parts` take the direct reader, and their
    /// steps hold what each says they hold.
    #[test]
    fn the_parts_bodies_take_the_direct_reader() {
        for parts in StepParts::ALL {
            for steps in [1, 50] {
                let body = gen_like_coaching_body(steps, parts);
                assert_eq!(check(body.as_bytes()), Ok((true, true)), "{parts:?}");
                let r = read(body.as_bytes()).expect("the direct reader");
                assert_eq!(r.trajectory.len(), steps, "{parts:?}");
                let decisions = matches!(parts, StepParts::Gen | StepParts::DecisionsOnly);
                let records = matches!(parts, StepParts::Gen | StepParts::WithoutDecisions);
                for step in &r.trajectory {
                    assert_eq!(step.output.is_some(), decisions, "{parts:?}");
                    assert_eq!(step.internal_steps.len(), usize::from(records), "{parts:?}");
                    assert_eq!(step.execution.is_empty(), !records, "{parts:?}");
                    assert!(step.error.is_none());
                }
            }
        }
    }

    /// A first step far smaller than what follows it makes room for at most
    /// [`STEPS_RESERVED_AT_MOST`] steps, however long the document.
    #[test]
    fn a_small_first_step_reserves_a_bounded_trajectory() {
        let step = |id: usize, content: &str| {
            format!(
                r#"{{"id":{id},"input":{{"id":0,"instruction":{{"type":"user","content":"{content}"}}}}}}"#
            )
        };
        let body = format!(
            r#"{{"run_id":"r","request_id":"q","kind":"failure","stage":{{"id":1,"goal":"g"}},"target_step_id":0,"trajectory":[{},{}],"reinjection_points":[{{"id":"p","input_step_id":0}}]}}"#,
            step(0, "a"),
            step(1, &"x".repeat(1 << 20)),
        );
        let r = read(body.as_bytes()).expect("the direct reader");
        assert_eq!(r.trajectory.len(), 2);
        assert_eq!(r.trajectory.capacity(), 1 + STEPS_RESERVED_AT_MOST);
        assert_eq!(
            SpecializedCoachingRequest::from_slice(body.as_bytes()),
            Ok(r)
        );
    }
}
