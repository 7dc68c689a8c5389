//! What a coaching request describes: the [`CoachingStage`], its
//! [`CoachingError`]s and [`CoachingDiagnosis`], the [`CoachingStep`]s of
//! the trajectory and the [`ReinjectionPoint`]s; their validators and
//! writers.

use crate::error::ErrorKind;
use crate::json::write::{write_i64, write_str};
use crate::json::{Json, Object, Shape, WriteJson};
use crate::limits::READ;
use crate::validate::{
    Fields, Validate, Validation, free_object, int64, list, model_object, opt_int64, opt_str,
    strict_str,
};
use crate::{AgentDecision, AgentError, AgentInput};

// The inference models inside a step read as they do in a request and an
// answer: their strict shapes (declared fields, so that the parser counts a
// hostile object's unknown keys past the error cap and keeps an unknown
// key's array or object as text; `tests/it/hostile.rs` checks the lists
// against the validators).
use crate::model::{AGENT_ERROR_SHAPE, DECISION_SHAPE, INPUT_SHAPE};

/// The fields of `STEP_SHAPE`, in the order the direct reader numbers them.
pub(super) const STEP_FIELDS: &[&str] = &[
    "id",
    "input",
    "output",
    "error",
    "internal_steps",
    "execution",
];
/// Where a trajectory step holds free-form objects.
pub(super) const STEP_SHAPE: Shape = Shape::Model {
    declared: STEP_FIELDS,
    fields: &[
        ("id", Shape::Scalar),
        ("input", INPUT_SHAPE),
        ("output", DECISION_SHAPE),
        ("error", AGENT_ERROR_SHAPE),
        ("internal_steps", Shape::List(&Shape::FreeObject)),
        ("execution", Shape::FreeObject),
    ],
};
/// The fields of `POINT_SHAPE`, in the order the direct reader numbers them.
pub(super) const POINT_FIELDS: &[&str] = &["id", "input_step_id", "input"];
/// Where a reinjection point holds free-form objects.
pub(super) const POINT_SHAPE: Shape = Shape::Model {
    declared: POINT_FIELDS,
    fields: &[
        ("id", Shape::Scalar),
        ("input_step_id", Shape::Scalar),
        ("input", INPUT_SHAPE),
    ],
};
/// The fields of `ERROR_SHAPE`, in the order the direct reader numbers them.
pub(super) const ERROR_FIELDS: &[&str] = &["code", "description", "details"];
/// Where an active error holds free-form objects.
pub(super) const ERROR_SHAPE: Shape = Shape::Model {
    declared: ERROR_FIELDS,
    fields: &[
        ("code", Shape::Scalar),
        ("description", Shape::Scalar),
        ("details", Shape::FreeObject),
    ],
};
/// The fields of `STAGE_SHAPE`, in the order the direct reader numbers them.
pub(super) const STAGE_FIELDS: &[&str] = &["id", "goal", "hint"];
/// The stage and the diagnosis of a coaching request.
pub(super) const STAGE_SHAPE: Shape = Shape::Model {
    declared: STAGE_FIELDS,
    fields: &[
        ("id", Shape::Scalar),
        ("goal", Shape::Scalar),
        ("hint", Shape::Scalar),
    ],
};
/// The fields of `DIAGNOSIS_SHAPE`, in the order the direct reader numbers them.
pub(super) const DIAGNOSIS_FIELDS: &[&str] = &["explanation", "expected_decision"];
pub(super) const DIAGNOSIS_SHAPE: Shape = Shape::Model {
    declared: DIAGNOSIS_FIELDS,
    fields: &[
        ("explanation", Shape::Scalar),
        ("expected_decision", Shape::Scalar),
    ],
};

/// The stage of the task the coached step belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoachingStage {
    /// The stage's id.
    pub id: i64,
    /// What the stage asks for.
    pub goal: String,
    /// A hint for the coach, if any.
    pub hint: Option<String>,
}

impl CoachingStage {
    /// A stage without hint.
    pub fn new(id: i64, goal: impl Into<String>) -> Self {
        CoachingStage {
            id,
            goal: goal.into(),
            hint: None,
        }
    }
}

/// An error active at the coached step (a failed check, a rule broken).
#[derive(Debug, Clone, PartialEq)]
pub struct CoachingError {
    /// Machine-readable code.
    pub code: String,
    /// What went wrong.
    pub description: String,
    /// Free-form details (default `{}`).
    pub details: Object,
}

impl CoachingError {
    /// An error without details.
    pub fn new(code: impl Into<String>, description: impl Into<String>) -> Self {
        CoachingError {
            code: code.into(),
            description: description.into(),
            details: Object::new(),
        }
    }
}

/// What the caller's diagnosis says about the failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoachingDiagnosis {
    /// Why the step failed.
    pub explanation: String,
    /// What the agent should have decided, in words, if known.
    pub expected_decision: Option<String>,
}

impl CoachingDiagnosis {
    /// A diagnosis without expected decision.
    pub fn new(explanation: impl Into<String>) -> Self {
        CoachingDiagnosis {
            explanation: explanation.into(),
            expected_decision: None,
        }
    }
}

/// One step of the trajectory sent to the coach: the input the agent saw,
/// what it answered (a decision, an error, both or neither: the reference
/// does not tie them), its diagnostics and what executing it gave.
#[derive(Debug, Clone, PartialEq)]
pub struct CoachingStep {
    /// The step's id, unique in its trajectory.
    pub id: i64,
    /// The input the agent answered.
    pub input: AgentInput,
    /// The agent's decision, if any.
    pub output: Option<AgentDecision>,
    /// The agent's error, if any.
    pub error: Option<AgentError>,
    /// The candidate's `internal_steps`, free-form (see [`InternalStep`](super::InternalStep)).
    pub internal_steps: Vec<Object>,
    /// What executing the decision gave, free-form (default `{}`).
    pub execution: Object,
}

impl CoachingStep {
    /// A step with neither decision nor error, no diagnostics, empty execution.
    pub fn new(id: i64, input: AgentInput) -> Self {
        CoachingStep {
            id,
            input,
            output: None,
            error: None,
            internal_steps: Vec::new(),
            execution: Object::new(),
        }
    }
}

/// Where a proposal may be re-injected: at the input of a trajectory step,
/// or at an input given here. Exactly one of the two, which is why the
/// fields are reached through methods.
#[derive(Debug, Clone, PartialEq)]
pub struct ReinjectionPoint {
    id: String,
    at: At,
}

#[derive(Debug, Clone, PartialEq)]
enum At {
    Step(i64),
    Input(Box<AgentInput>),
}

impl ReinjectionPoint {
    /// A point at the input of the trajectory step `step_id`.
    pub fn at_step(id: impl Into<String>, step_id: i64) -> Self {
        ReinjectionPoint {
            id: id.into(),
            at: At::Step(step_id),
        }
    }

    /// A point at an input of its own.
    pub fn at_input(id: impl Into<String>, input: AgentInput) -> Self {
        ReinjectionPoint {
            id: id.into(),
            at: At::Input(Box::new(input)),
        }
    }

    /// The point's id, unique in its request; proposals name it.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `input_step_id`: the trajectory step whose input it is, if given so.
    pub fn input_step_id(&self) -> Option<i64> {
        match &self.at {
            At::Step(id) => Some(*id),
            At::Input(_) => None,
        }
    }

    /// `input`: the input itself, if given so.
    pub fn input(&self) -> Option<&AgentInput> {
        match &self.at {
            At::Step(_) => None,
            At::Input(input) => Some(input),
        }
    }
}

// ---------------------------------------------------------------------------
// Validation, field by field in the reference's declaration order

impl Validate for CoachingStage {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "CoachingStage", cx)?;
        let mut f = Fields::new(obj, &["id", "goal"], cx);
        let id = f.required("id", cx, int64);
        let goal = f.required("goal", cx, strict_str);
        let hint = f.optional("hint", cx, || None, opt_str);
        f.finish(cx).then_some(())?;
        Some(CoachingStage {
            id: id?,
            goal: goal?,
            hint: hint?,
        })
    }
}

impl Validate for CoachingError {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "CoachingError", cx)?;
        let mut f = Fields::new(obj, &["code", "description"], cx);
        let code = f.required("code", cx, strict_str);
        let description = f.required("description", cx, strict_str);
        let details = f.optional("details", cx, Object::new, free_object);
        f.finish(cx).then_some(())?;
        Some(CoachingError {
            code: code?,
            description: description?,
            details: details?,
        })
    }
}

impl Validate for CoachingDiagnosis {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "CoachingDiagnosis", cx)?;
        let mut f = Fields::new(obj, &["explanation"], cx);
        let explanation = f.required("explanation", cx, strict_str);
        let expected = f.optional("expected_decision", cx, || None, opt_str);
        f.finish(cx).then_some(())?;
        Some(CoachingDiagnosis {
            explanation: explanation?,
            expected_decision: expected?,
        })
    }
}

impl Validate for CoachingStep {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "CoachingStep", cx)?;
        let mut f = Fields::new(obj, &["id", "input"], cx);
        let id = f.required("id", cx, int64);
        let input = f.required("input", cx, AgentInput::validate);
        let output = f.optional("output", cx, || None, AgentDecision::validate_opt);
        let error = f.optional("error", cx, || None, AgentError::validate_opt);
        let steps = f.optional("internal_steps", cx, Vec::new, |v, cx| {
            list(v, cx, free_object)
        });
        let execution = f.optional("execution", cx, Object::new, free_object);
        f.finish(cx).then_some(())?;
        Some(CoachingStep {
            id: id?,
            input: input?,
            output: output?,
            error: error?,
            internal_steps: steps?,
            execution: execution?,
        })
    }
}

impl Validate for ReinjectionPoint {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "ReinjectionPoint", cx)?;
        let mut f = Fields::new(obj, &["id"], cx);
        let id = f.required("id", cx, strict_str);
        let step = f.optional("input_step_id", cx, || None, opt_int64);
        let input = f.optional("input", cx, || None, AgentInput::validate_opt);
        f.finish(cx).then_some(())?;
        let (id, step, input) = (id?, step?, input?);
        let at = match (step, input) {
            (Some(step), None) => At::Step(step),
            (None, Some(input)) => At::Input(Box::new(input)),
            (step, input) => {
                let mut o = Object::new();
                o.insert("id", Json::String(id));
                o.insert("input_step_id", step.map_or(Json::Null, Json::from));
                o.insert(
                    "input",
                    input.map_or(Json::Null, |i| crate::json::to_value(&i, READ)),
                );
                cx.report(
                    ErrorKind::ValueError,
                    "Value error, Provide exactly one input or input_step_id",
                    Json::Object(o),
                );
                return None;
            }
        };
        Some(ReinjectionPoint { id, at })
    }
}

// ---------------------------------------------------------------------------
// Writing, every field in the reference's order

impl WriteJson for CoachingStage {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        write_i64(out, self.id);
        out.push_str(",\"goal\":");
        write_str(out, &self.goal);
        out.push_str(",\"hint\":");
        self.hint.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        48 + self.goal.len() + self.hint.size_hint()
    }
}

impl WriteJson for CoachingError {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"code\":");
        write_str(out, &self.code);
        out.push_str(",\"description\":");
        write_str(out, &self.description);
        out.push_str(",\"details\":");
        self.details.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        40 + self.code.len() + self.description.len() + self.details.size_hint()
    }
}

impl WriteJson for CoachingDiagnosis {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"explanation\":");
        write_str(out, &self.explanation);
        out.push_str(",\"expected_decision\":");
        self.expected_decision.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        40 + self.explanation.len() + self.expected_decision.size_hint()
    }
}

impl WriteJson for CoachingStep {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        write_i64(out, self.id);
        out.push_str(",\"input\":");
        self.input.write_json(out);
        out.push_str(",\"output\":");
        self.output.write_json(out);
        out.push_str(",\"error\":");
        self.error.write_json(out);
        out.push_str(",\"internal_steps\":");
        self.internal_steps.write_json(out);
        out.push_str(",\"execution\":");
        self.execution.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        90 + self.input.size_hint()
            + self.output.size_hint()
            + self.error.size_hint()
            + self.internal_steps.size_hint()
            + self.execution.size_hint()
    }
}

impl WriteJson for ReinjectionPoint {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        write_str(out, &self.id);
        out.push_str(",\"input_step_id\":");
        match self.input_step_id() {
            Some(step) => write_i64(out, step),
            None => out.push_str("null"),
        }
        out.push_str(",\"input\":");
        self.input().write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        48 + self.id.len() + self.input().size_hint()
    }
}

document!(CoachingStage, &STAGE_SHAPE, CoachingStage::validate);
document!(CoachingError, &ERROR_SHAPE, CoachingError::validate);
document!(
    CoachingDiagnosis,
    &DIAGNOSIS_SHAPE,
    CoachingDiagnosis::validate
);
document!(CoachingStep, &STEP_SHAPE, CoachingStep::validate);
document!(ReinjectionPoint, &POINT_SHAPE, ReinjectionPoint::validate);

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::{CoachingDiagnosis, CoachingError, CoachingStage, CoachingStep, ReinjectionPoint};
    use crate::json::{Json, Object};
    use crate::json_schema::{
        HasSchema, Refs, S, free_form, int64, integer, model, nullable, object, strings,
    };

    fn nullable_str(description: &str) -> Json {
        nullable(S::ty("string"), description)
    }

    impl HasSchema for CoachingStage {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "CoachingStage",
                "The stage of the task the coached step belongs to.",
                vec![
                    ("id", int64("The stage's id.")),
                    ("goal", S::ty("string").doc("What the stage asks for.")),
                    ("hint", nullable_str("A hint for the coach, if any.")),
                ],
                &["id", "goal"],
            )
        }
    }

    impl HasSchema for CoachingError {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "CoachingError",
                "An error active at the coached step.",
                vec![
                    (
                        "code",
                        S::ty("string").doc("Machine-readable code, e.g. `environment`."),
                    ),
                    ("description", S::ty("string").doc("What went wrong.")),
                    ("details", object("Details.")),
                ],
                &["code", "description"],
            )
        }
    }

    impl HasSchema for CoachingDiagnosis {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "CoachingDiagnosis",
                "What the caller's diagnosis says about the failure.",
                vec![
                    ("explanation", S::ty("string").doc("Why the step failed.")),
                    (
                        "expected_decision",
                        nullable_str("What the agent should have decided, in words, if known."),
                    ),
                ],
                &["explanation"],
            )
        }
    }

    impl HasSchema for CoachingStep {
        fn schema(refs: &Refs<'_>) -> Object {
            model(
                "CoachingStep",
                "One step of the trajectory: the input the agent saw, its decision and its \
                 error (both, one or neither), its diagnostics and what executing it gave.",
                vec![
                    ("id", int64("The step's id, unique in its trajectory.")),
                    ("input", refs.to("AgentInput").build()),
                    (
                        "output",
                        nullable(refs.to("AgentDecision"), "The agent's decision, if any."),
                    ),
                    (
                        "error",
                        nullable(refs.to("AgentError"), "The agent's error, if any."),
                    ),
                    (
                        "internal_steps",
                        S::ty("array")
                            .set("items", S::ty("object"))
                            .set("default", Json::Array(Vec::new()))
                            .doc(&free_form(
                                "The candidate's internal steps, each an object.",
                            )),
                    ),
                    ("execution", object("What executing the decision gave.")),
                ],
                &["id", "input"],
            )
        }
    }

    impl HasSchema for ReinjectionPoint {
        fn schema(refs: &Refs<'_>) -> Object {
            model(
                "ReinjectionPoint",
                "Where a proposal may be re-injected: exactly one of `input_step_id` (a \
                 trajectory step of the request) and `input` is set; `null` counts as absent.",
                vec![
                    (
                        "id",
                        S::ty("string").doc("The point's id, unique in its request."),
                    ),
                    (
                        "input_step_id",
                        S::new()
                            .set("type", strings(&["integer", "null"]))
                            .set("minimum", i64::MIN)
                            .set("maximum", i64::MAX)
                            .set("default", Json::Null)
                            .doc(&integer("The trajectory step whose input it is.", "")),
                    ),
                    (
                        "input",
                        nullable(refs.to("AgentInput"), "The input itself."),
                    ),
                ],
                &["id"],
            )
        }
    }
}
