//! `POST /v1/coaching`: [`SpecializedCoachingRequest`] and its
//! [`CoachingKind`]; the shape the parser follows, the validator with the
//! reference's rules (unique ids, target step present, known
//! `input_step_id`s) and the writer. The direct reader of the usual valid
//! request is `request/direct.rs`.

use crate::error::{Error, ErrorKind, Issue};
use crate::json::write::{write_i64, write_str};
use crate::json::{Json, Location, Object, Segment, Shape, WriteJson, to_value};
use crate::limits::READ;
use crate::validate::{
    Fields, NonEmptyString, Validate, Validation, free_object, int64, list, literal, model_object,
    non_empty,
};

use super::step::{DIAGNOSIS_SHAPE, ERROR_SHAPE, POINT_SHAPE, STAGE_SHAPE, STEP_SHAPE};
use super::{CoachingDiagnosis, CoachingError, CoachingStage, CoachingStep, ReinjectionPoint};

mod direct;

/// The fields of `SHAPE`, in the order the direct reader numbers them.
pub(super) const ROOT_FIELDS: &[&str] = &[
    "run_id",
    "request_id",
    "kind",
    "stage",
    "active_errors",
    "diagnosis",
    "target_step_id",
    "trajectory",
    "reinjection_points",
    "additional_info",
];
/// Where a coaching request holds free-form objects, for the parser; its
/// models are strict and list their fields (see `step.rs`).
const SHAPE: Shape = Shape::Model {
    declared: ROOT_FIELDS,
    fields: &[
        ("run_id", Shape::Scalar),
        ("request_id", Shape::Scalar),
        ("kind", Shape::Scalar),
        ("target_step_id", Shape::Scalar),
        ("stage", STAGE_SHAPE),
        ("active_errors", Shape::List(&ERROR_SHAPE)),
        ("diagnosis", DIAGNOSIS_SHAPE),
        ("trajectory", Shape::List(&STEP_SHAPE)),
        ("reinjection_points", Shape::List(&POINT_SHAPE)),
        ("additional_info", Shape::FreeObject),
    ],
};

/// What kind of repair is asked for (`kind` of a coaching request, and the
/// names an agent lists in `AgentInfo.specialized_coaching`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CoachingKind {
    /// `"failure"`: the step failed; the diagnosis says why.
    Failure,
    /// `"suboptimal"`: the step worked, but could be better.
    Suboptimal,
    /// `"format"`: the answer was malformed or invalid.
    Format,
}

impl CoachingKind {
    /// Every kind, in the reference's order.
    pub const ALL: [CoachingKind; 3] = [
        CoachingKind::Failure,
        CoachingKind::Suboptimal,
        CoachingKind::Format,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CoachingKind::Failure => "failure",
            CoachingKind::Suboptimal => "suboptimal",
            CoachingKind::Format => "format",
        }
    }

    /// The kind named `name`, if any.
    pub fn from_name(name: &str) -> Option<Self> {
        CoachingKind::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for CoachingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `POST /v1/coaching` body: always valid (the reference's rules hold:
/// unique step and point ids, the target step in the trajectory, every
/// `input_step_id` a trajectory step), which is why its fields are reached
/// through methods.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecializedCoachingRequest {
    run_id: NonEmptyString,
    request_id: NonEmptyString,
    kind: CoachingKind,
    stage: CoachingStage,
    active_errors: Vec<CoachingError>,
    diagnosis: Option<CoachingDiagnosis>,
    target_step_id: i64,
    trajectory: Vec<CoachingStep>,
    reinjection_points: Vec<ReinjectionPoint>,
    additional_info: Object,
}

impl SpecializedCoachingRequest {
    /// Builds a request without active errors, diagnosis or additional
    /// info; fails, with the errors the parser gives, on an empty `run_id`
    /// or `request_id` or when a rule of the reference does not hold.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        run_id: impl Into<String>,
        request_id: impl Into<String>,
        kind: CoachingKind,
        stage: CoachingStage,
        target_step_id: i64,
        trajectory: Vec<CoachingStep>,
        reinjection_points: Vec<ReinjectionPoint>,
    ) -> Result<Self, Error> {
        let (run_id, request_id) = (run_id.into(), request_id.into());
        let mut issues = Vec::new();
        for (field, value) in [("run_id", &run_id), ("request_id", &request_id)] {
            if value.is_empty() {
                issues.push(
                    Issue::new(
                        ErrorKind::StringTooShort,
                        Location::from(vec![Segment::Key(field.into())]),
                        "String should have at least 1 character",
                    )
                    .with_input(Json::from(""))
                    .with_ctx("min_length", Json::from(1)),
                );
            }
        }
        let (Some(run_id), Some(request_id)) =
            (NonEmptyString::new(run_id), NonEmptyString::new(request_id))
        else {
            return Err(Error::new("SpecializedCoachingRequest", issues));
        };
        let request = SpecializedCoachingRequest {
            run_id,
            request_id,
            kind,
            stage,
            active_errors: Vec::new(),
            diagnosis: None,
            target_step_id,
            trajectory,
            reinjection_points,
            additional_info: Object::new(),
        };
        match rules_issue(&request) {
            Some(issue) => Err(Error::new("SpecializedCoachingRequest", vec![issue])),
            None => Ok(request),
        }
    }

    /// Sets the active errors.
    pub fn with_active_errors(mut self, active_errors: Vec<CoachingError>) -> Self {
        self.active_errors = active_errors;
        self
    }

    /// Sets the diagnosis.
    pub fn with_diagnosis(mut self, diagnosis: CoachingDiagnosis) -> Self {
        self.diagnosis = Some(diagnosis);
        self
    }

    /// Sets the additional info (free-form).
    pub fn with_additional_info(mut self, additional_info: Object) -> Self {
        self.additional_info = additional_info;
        self
    }

    /// The run (GEN's run id) whose coaching session this request uses.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// The request's id; the reply echoes it.
    pub fn request_id(&self) -> &str {
        &self.request_id
    }

    /// The kind of repair asked for.
    pub fn kind(&self) -> CoachingKind {
        self.kind
    }

    /// The stage of the task.
    pub fn stage(&self) -> &CoachingStage {
        &self.stage
    }

    /// The errors active at the target step.
    pub fn active_errors(&self) -> &[CoachingError] {
        &self.active_errors
    }

    /// The caller's diagnosis, if any.
    pub fn diagnosis(&self) -> Option<&CoachingDiagnosis> {
        self.diagnosis.as_ref()
    }

    /// The id of the step to repair.
    pub fn target_step_id(&self) -> i64 {
        self.target_step_id
    }

    /// The step to repair (always in the trajectory).
    pub fn target_step(&self) -> &CoachingStep {
        // The rules guarantee it; the first step is an unreachable fallback.
        self.step(self.target_step_id)
            .unwrap_or_else(|| &self.trajectory[0])
    }

    /// The trajectory step with this id.
    pub fn step(&self, id: i64) -> Option<&CoachingStep> {
        self.trajectory.iter().find(|s| s.id == id)
    }

    /// The trajectory, in order.
    pub fn trajectory(&self) -> &[CoachingStep] {
        &self.trajectory
    }

    /// Where proposals may be re-injected.
    pub fn reinjection_points(&self) -> &[ReinjectionPoint] {
        &self.reinjection_points
    }

    /// The input a reinjection point stands for: its own, or its step's.
    pub fn point_input<'a>(&'a self, point: &'a ReinjectionPoint) -> Option<&'a crate::AgentInput> {
        match point.input() {
            Some(input) => Some(input),
            None => point
                .input_step_id()
                .and_then(|id| self.step(id))
                .map(|s| &s.input),
        }
    }

    /// Free-form additional info (e.g. `delay_ms` for the demo coach).
    pub fn additional_info(&self) -> &Object {
        &self.additional_info
    }
}

// ---------------------------------------------------------------------------
// Validation

fn kind(v: Json, cx: &mut Validation) -> Option<CoachingKind> {
    literal(v, cx, &["failure", "suboptimal", "format"]).map(|i| CoachingKind::ALL[i])
}

fn request(v: Json, cx: &mut Validation) -> Option<SpecializedCoachingRequest> {
    let obj = model_object(v, "SpecializedCoachingRequest", cx)?;
    let mut f = Fields::new(
        obj,
        &[
            "run_id",
            "request_id",
            "kind",
            "stage",
            "target_step_id",
            "trajectory",
            "reinjection_points",
        ],
        cx,
    );
    let run_id = f.required("run_id", cx, non_empty);
    let request_id = f.required("request_id", cx, non_empty);
    let kind = f.required("kind", cx, kind);
    let stage = f.required("stage", cx, CoachingStage::validate);
    let active_errors = f.optional("active_errors", cx, Vec::new, |v, cx| {
        list(v, cx, CoachingError::validate)
    });
    let diagnosis = f.optional("diagnosis", cx, || None, CoachingDiagnosis::validate_opt);
    let target = f.required("target_step_id", cx, int64);
    let trajectory = f.required("trajectory", cx, |v, cx| {
        list(v, cx, CoachingStep::validate)
    });
    let points = f.required("reinjection_points", cx, |v, cx| {
        list(v, cx, ReinjectionPoint::validate)
    });
    let info = f.optional("additional_info", cx, Object::new, free_object);
    f.finish(cx).then_some(())?;
    let request = SpecializedCoachingRequest {
        run_id: run_id?,
        request_id: request_id?,
        kind: kind?,
        stage: stage?,
        active_errors: active_errors?,
        diagnosis: diagnosis?,
        target_step_id: target?,
        trajectory: trajectory?,
        reinjection_points: points?,
        additional_info: info?,
    };
    if let Some(issue) = rules_issue(&request) {
        cx.push(issue);
        return None;
    }
    Some(request)
}

/// The reference's `validate_references` rule, reported at the root.
fn rules_issue(req: &SpecializedCoachingRequest) -> Option<Issue> {
    let msg = rules_problem(req)?;
    Some(
        Issue::new(
            ErrorKind::ValueError,
            Location::root(),
            format!("Value error, {msg}"),
        )
        .with_input(to_value(req, READ)),
    )
}

/// What `validate_references` refuses, checked in its order: repeated step
/// or point ids, a target step not in the trajectory, a point's
/// `input_step_id` not in it.
///
/// GEN numbers its steps in order, and ids that increase along the
/// trajectory are unique and sorted as they lie: they are looked up in the
/// trajectory itself, and the few point ids compared with each other, with
/// nothing allocated. Other trajectories' ids are copied and sorted rather
/// than hashed: std's `HashSet` (SipHash, a random state made per set) cost
/// a GEN-sized request 0.3% of its parse.
fn rules_problem(req: &SpecializedCoachingRequest) -> Option<&'static str> {
    let steps = &req.trajectory;
    let in_order = steps.is_sorted_by(|a, b| a.id < b.id);
    let mut sorted = Vec::new();
    if !in_order {
        sorted.extend(steps.iter().map(|s| s.id));
        sorted.sort_unstable();
    }
    if has_repeats(&sorted) || point_ids_repeat(&req.reinjection_points) {
        return Some("Step and reinjection point ids must be unique");
    }
    let known = |id: i64| {
        if in_order {
            steps.binary_search_by_key(&id, |s| s.id).is_ok()
        } else {
            sorted.binary_search(&id).is_ok()
        }
    };
    if !known(req.target_step_id) {
        return Some("Target step is absent from trajectory");
    }
    let unknown = req
        .reinjection_points
        .iter()
        .any(|p| p.input_step_id().is_some_and(|id| !known(id)));
    unknown.then_some("Unknown reinjection input reference")
}

/// Points compared pair by pair up to this many; more are sorted.
const POINTS_COMPARED_IN_PAIRS: usize = 8;

/// `true` when two points share an id.
fn point_ids_repeat(points: &[ReinjectionPoint]) -> bool {
    if points.len() <= POINTS_COMPARED_IN_PAIRS {
        return points
            .iter()
            .enumerate()
            .any(|(i, p)| points.iter().take(i).any(|q| q.id() == p.id()));
    }
    let mut ids: Vec<&str> = points.iter().map(ReinjectionPoint::id).collect();
    ids.sort_unstable();
    has_repeats(&ids)
}

/// `true` when two neighbours of `sorted` are equal.
fn has_repeats<T: PartialEq>(sorted: &[T]) -> bool {
    sorted.windows(2).any(|w| w.first() == w.get(1))
}

// ---------------------------------------------------------------------------
// Writing, every field in the reference's order

impl WriteJson for SpecializedCoachingRequest {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"run_id\":");
        write_str(out, &self.run_id);
        out.push_str(",\"request_id\":");
        write_str(out, &self.request_id);
        out.push_str(",\"kind\":\"");
        out.push_str(self.kind.as_str());
        out.push_str("\",\"stage\":");
        self.stage.write_json(out);
        out.push_str(",\"active_errors\":");
        self.active_errors.write_json(out);
        out.push_str(",\"diagnosis\":");
        self.diagnosis.write_json(out);
        out.push_str(",\"target_step_id\":");
        write_i64(out, self.target_step_id);
        out.push_str(",\"trajectory\":");
        self.trajectory.write_json(out);
        out.push_str(",\"reinjection_points\":");
        self.reinjection_points.write_json(out);
        out.push_str(",\"additional_info\":");
        self.additional_info.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        200 + self.run_id.len()
            + self.request_id.len()
            + self.stage.size_hint()
            + self.active_errors.size_hint()
            + self.diagnosis.size_hint()
            + self.trajectory.size_hint()
            + self.reinjection_points.size_hint()
            + self.additional_info.size_hint()
    }
}

document!(SpecializedCoachingRequest, &SHAPE, request, direct::read);

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::SpecializedCoachingRequest;
    use crate::json::{Json, Object};
    use crate::json_schema::{
        HasSchema, Refs, S, int64, model, non_empty, nullable, object, strings,
    };

    impl HasSchema for SpecializedCoachingRequest {
        fn schema(refs: &Refs<'_>) -> Object {
            let list = |item: &str, description: &str| {
                S::ty("array").set("items", refs.to(item)).doc(description)
            };
            model(
                "SpecializedCoachingRequest",
                "The body of `POST /v1/coaching`. Not expressible here: step ids are unique \
                 and point ids are unique; `target_step_id` is the id of a trajectory step; \
                 every `input_step_id` is the id of a trajectory step (the reference's \
                 `validate_references`).",
                vec![
                    (
                        "run_id",
                        non_empty("The run whose coaching session this request uses."),
                    ),
                    (
                        "request_id",
                        non_empty("The request's id; the reply echoes it."),
                    ),
                    (
                        "kind",
                        S::ty("string")
                            .set("enum", strings(&["failure", "suboptimal", "format"]))
                            .doc("The kind of repair asked for."),
                    ),
                    ("stage", refs.to("CoachingStage").build()),
                    (
                        "active_errors",
                        S::ty("array")
                            .set("items", refs.to("CoachingError"))
                            .set("default", Json::Array(Vec::new()))
                            .doc("The errors active at the target step."),
                    ),
                    (
                        "diagnosis",
                        nullable(
                            refs.to("CoachingDiagnosis"),
                            "The caller's diagnosis, if any.",
                        ),
                    ),
                    ("target_step_id", int64("The id of the step to repair.")),
                    (
                        "trajectory",
                        list("CoachingStep", "The trajectory, in order."),
                    ),
                    (
                        "reinjection_points",
                        list("ReinjectionPoint", "Where proposals may be re-injected."),
                    ),
                    ("additional_info", object("Additional info.")),
                ],
                &[
                    "run_id",
                    "request_id",
                    "kind",
                    "stage",
                    "target_step_id",
                    "trajectory",
                    "reinjection_points",
                ],
            )
        }
    }
}
