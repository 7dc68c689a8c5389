//! [`CandidateRecord`]: one candidate of a saved generation graph, as GEN
//! writes it (`magma_gen.storage.records.candidate_record`) and hands it to
//! exporters; its [`SituationLink`]s; their validators and writers.

use crate::error::ErrorKind;
use crate::json::write::{write_i64, write_str};
use crate::json::{Json, Object, Shape, WriteJson, to_value};
use crate::limits::READ;
use crate::validate::{
    Fields, Validate, Validation, free_object, int64, list, literal, model_object, opt_int64,
    strict_bool, strict_str,
};
use crate::{AgentDecision, AgentError, Outcome};

use crate::model::{AGENT_ERROR_SHAPE, DECISION_SHAPE};

/// The fields of a candidate record, in the reference's order.
const FIELDS: &[&str] = &[
    "id",
    "parent_id",
    "stage_id",
    "kind",
    "response_status",
    "output",
    "error",
    "internal_steps",
    "execution",
    "status",
    "execution_finished",
    "score",
    "coaching",
    "coaching_source",
    "coaching_attempt_ids",
    "origin",
    "links",
];
/// Where a situation link is, for the parser.
const LINK_SHAPE: Shape = Shape::Model {
    declared: &["situation_id", "kind"],
    fields: &[("situation_id", Shape::Scalar), ("kind", Shape::Scalar)],
};
/// Where a candidate record holds free-form objects, for the parser.
pub(crate) const CANDIDATE_SHAPE: Shape = Shape::Model {
    declared: FIELDS,
    fields: &[
        ("id", Shape::Scalar),
        ("parent_id", Shape::Scalar),
        ("stage_id", Shape::Scalar),
        ("kind", Shape::Scalar),
        ("response_status", Shape::Scalar),
        ("output", DECISION_SHAPE),
        ("error", AGENT_ERROR_SHAPE),
        ("internal_steps", Shape::List(&Shape::FreeObject)),
        ("execution", Shape::FreeObject),
        ("status", Shape::Scalar),
        ("execution_finished", Shape::Scalar),
        ("score", Shape::FreeObject),
        ("coaching", Shape::FreeObject),
        ("coaching_source", Shape::FreeObject),
        ("links", Shape::List(&LINK_SHAPE)),
    ],
};

/// `kind` of a situation link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LinkKind {
    /// `"next"`: the situation the candidate led to.
    Next,
    /// `"alternative"`: an alternative branch from the candidate.
    Alternative,
}

impl LinkKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            LinkKind::Next => "next",
            LinkKind::Alternative => "alternative",
        }
    }
}

/// A link from a candidate to a situation saved in the same graph folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SituationLink {
    /// The linked situation's id (its file is `<id>.json`).
    pub situation_id: i64,
    /// How it is linked.
    pub kind: LinkKind,
}

/// `kind` of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CandidateKind {
    /// `"agent"`: an answer of the agent.
    Agent,
    /// `"simulation_resume"`: the simulator resumed without the agent.
    SimulationResume,
}

impl CandidateKind {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CandidateKind::Agent => "agent",
            CandidateKind::SimulationResume => "simulation_resume",
        }
    }
}

/// `origin` of a candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CandidateOrigin {
    /// `"model"`: the agent's own answer.
    Model,
    /// `"coaching"`: a coached replacement.
    Coaching,
    /// `"simulation"`: made by the simulator.
    Simulation,
}

impl CandidateOrigin {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            CandidateOrigin::Model => "model",
            CandidateOrigin::Coaching => "coaching",
            CandidateOrigin::Simulation => "simulation",
        }
    }
}

/// One candidate of a saved graph. The reference's rule (`completed` has an
/// output and no error, `error` an error and no output) is its
/// [`Outcome`]: `response_status`, `output` and `error` are written from it.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateRecord {
    /// The candidate's id, unique in its graph.
    pub id: i64,
    /// The candidate this one's situation followed, if any.
    pub parent_id: Option<i64>,
    /// The stage of the task.
    pub stage_id: i64,
    /// Who answered.
    pub kind: CandidateKind,
    /// The answer: a decision (`completed`) or an error (`error`).
    pub outcome: Outcome,
    /// The agent's `internal_steps`, free-form (see
    /// [`InternalStep`](crate::InternalStep)).
    pub internal_steps: Vec<Object>,
    /// What executing the decision gave, free-form (default `{}`).
    pub execution: Object,
    /// GEN's status of the candidate (`finished`, `success`, `invalid`, ...).
    pub status: String,
    /// Whether its execution finished.
    pub execution_finished: bool,
    /// The candidate's score per stage (`stage_<n>`), free-form (default `{}`).
    pub score: Object,
    /// Coaching diagnostics, free-form (default `{}`).
    pub coaching: Object,
    /// Where a coached candidate came from, free-form (default `{}`).
    pub coaching_source: Object,
    /// The coaching attempts made on it.
    pub coaching_attempt_ids: Vec<i64>,
    /// Who produced it.
    pub origin: CandidateOrigin,
    /// The situations it leads to.
    pub links: Vec<SituationLink>,
}

impl CandidateRecord {
    /// A candidate of `kind` agent and origin model, with the given
    /// outcome, status `finished`, execution finished, and everything else
    /// empty.
    pub fn new(id: i64, stage_id: i64, outcome: Outcome) -> Self {
        CandidateRecord {
            id,
            parent_id: None,
            stage_id,
            kind: CandidateKind::Agent,
            outcome,
            internal_steps: Vec::new(),
            execution: Object::new(),
            status: "finished".to_owned(),
            execution_finished: true,
            score: Object::new(),
            coaching: Object::new(),
            coaching_source: Object::new(),
            coaching_attempt_ids: Vec::new(),
            origin: CandidateOrigin::Model,
            links: Vec::new(),
        }
    }

    /// The decision, if the response completed.
    pub fn decision(&self) -> Option<&AgentDecision> {
        self.outcome.decision()
    }

    /// The error, if the response failed.
    pub fn error(&self) -> Option<&AgentError> {
        match &self.outcome {
            Outcome::Completed(_) => None,
            Outcome::Error(e) => Some(e),
        }
    }
}

// ---------------------------------------------------------------------------
// Validation, field by field in the reference's declaration order

impl Validate for SituationLink {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "SituationLink", cx)?;
        let mut f = Fields::new(obj, &["situation_id", "kind"], cx);
        let id = f.required("situation_id", cx, int64);
        let kind = f.required("kind", cx, |v, cx| {
            literal(v, cx, &["next", "alternative"]).map(|i| {
                if i == 0 {
                    LinkKind::Next
                } else {
                    LinkKind::Alternative
                }
            })
        });
        f.finish(cx).then_some(())?;
        Some(SituationLink {
            situation_id: id?,
            kind: kind?,
        })
    }
}

impl Validate for CandidateRecord {
    fn validate(v: Json, cx: &mut Validation) -> Option<Self> {
        let obj = model_object(v, "CandidateRecord", cx)?;
        let mut f = Fields::new(
            obj,
            &[
                "id",
                "parent_id",
                "stage_id",
                "kind",
                "response_status",
                "status",
                "execution_finished",
                "origin",
            ],
            cx,
        );
        let id = f.required("id", cx, int64);
        let parent_id = f.required("parent_id", cx, opt_int64);
        let stage_id = f.required("stage_id", cx, int64);
        let kind = f.required("kind", cx, |v, cx| {
            literal(v, cx, &["agent", "simulation_resume"]).map(|i| {
                if i == 0 {
                    CandidateKind::Agent
                } else {
                    CandidateKind::SimulationResume
                }
            })
        });
        let response_status = f.required("response_status", cx, |v, cx| {
            literal(v, cx, &["completed", "error"])
        });
        let output = f.optional("output", cx, || None, AgentDecision::validate_opt);
        let error = f.optional("error", cx, || None, AgentError::validate_opt);
        let steps = f.optional("internal_steps", cx, Vec::new, |v, cx| {
            list(v, cx, free_object)
        });
        let execution = f.optional("execution", cx, Object::new, free_object);
        let status = f.required("status", cx, strict_str);
        let finished = f.required("execution_finished", cx, strict_bool);
        let score = f.optional("score", cx, Object::new, free_object);
        let coaching = f.optional("coaching", cx, Object::new, free_object);
        let source = f.optional("coaching_source", cx, Object::new, free_object);
        let attempts = f.optional("coaching_attempt_ids", cx, Vec::new, |v, cx| {
            list(v, cx, int64)
        });
        let origin = f.required("origin", cx, |v, cx| {
            literal(v, cx, &["model", "coaching", "simulation"]).map(|i| match i {
                0 => CandidateOrigin::Model,
                1 => CandidateOrigin::Coaching,
                _ => CandidateOrigin::Simulation,
            })
        });
        let links = f.optional("links", cx, Vec::new, |v, cx| {
            list(v, cx, SituationLink::validate)
        });
        f.finish(cx).then_some(())?;
        let (response_status, output, error) = (response_status?, output?, error?);
        let mut record = CandidateRecord {
            id: id?,
            parent_id: parent_id?,
            stage_id: stage_id?,
            kind: kind?,
            // Replaced below once the rule holds.
            outcome: Outcome::Completed(AgentDecision::default()),
            internal_steps: steps?,
            execution: execution?,
            status: status?,
            execution_finished: finished?,
            score: score?,
            coaching: coaching?,
            coaching_source: source?,
            coaching_attempt_ids: attempts?,
            origin: origin?,
            links: links?,
        };
        record.outcome = match (response_status, output, error) {
            (0, Some(d), None) => Outcome::Completed(d),
            (1, None, Some(e)) => Outcome::Error(e),
            (status, output, error) => {
                let msg = if status == 1 {
                    "Value error, An invalid response requires error and no output"
                } else {
                    "Value error, A completed response requires output and no error"
                };
                let mut input = to_value(&record, READ);
                if let Json::Object(o) = &mut input {
                    o.insert(
                        "response_status",
                        Json::from(if status == 0 { "completed" } else { "error" }),
                    );
                    o.insert("output", output.map_or(Json::Null, |d| to_value(&d, READ)));
                    o.insert("error", error.map_or(Json::Null, |e| to_value(&e, READ)));
                }
                cx.report(ErrorKind::ValueError, msg, input);
                return None;
            }
        };
        Some(record)
    }
}

fn candidate_record(v: Json, cx: &mut Validation) -> Option<CandidateRecord> {
    CandidateRecord::validate(v, cx)
}

fn situation_link(v: Json, cx: &mut Validation) -> Option<SituationLink> {
    SituationLink::validate(v, cx)
}

// ---------------------------------------------------------------------------
// Writing, every field in the reference's order

impl WriteJson for SituationLink {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"situation_id\":");
        write_i64(out, self.situation_id);
        out.push_str(",\"kind\":\"");
        out.push_str(self.kind.as_str());
        out.push_str("\"}");
    }

    fn size_hint(&self) -> usize {
        64
    }
}

impl WriteJson for CandidateRecord {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        write_i64(out, self.id);
        out.push_str(",\"parent_id\":");
        match self.parent_id {
            Some(id) => write_i64(out, id),
            None => out.push_str("null"),
        }
        out.push_str(",\"stage_id\":");
        write_i64(out, self.stage_id);
        out.push_str(",\"kind\":\"");
        out.push_str(self.kind.as_str());
        out.push_str("\",\"response_status\":\"");
        out.push_str(self.outcome.status().as_str());
        out.push_str("\",\"output\":");
        self.decision().write_json(out);
        out.push_str(",\"error\":");
        self.error().write_json(out);
        out.push_str(",\"internal_steps\":");
        self.internal_steps.write_json(out);
        out.push_str(",\"execution\":");
        self.execution.write_json(out);
        out.push_str(",\"status\":");
        write_str(out, &self.status);
        out.push_str(",\"execution_finished\":");
        out.push_str(if self.execution_finished {
            "true"
        } else {
            "false"
        });
        out.push_str(",\"score\":");
        self.score.write_json(out);
        out.push_str(",\"coaching\":");
        self.coaching.write_json(out);
        out.push_str(",\"coaching_source\":");
        self.coaching_source.write_json(out);
        out.push_str(",\"coaching_attempt_ids\":[");
        for (i, id) in self.coaching_attempt_ids.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_i64(out, *id);
        }
        out.push_str("],\"origin\":\"");
        out.push_str(self.origin.as_str());
        out.push_str("\",\"links\":");
        self.links.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        360 + self.decision().size_hint()
            + self.error().size_hint()
            + self.internal_steps.size_hint()
            + self.execution.size_hint()
            + self.status.len()
            + self.score.size_hint()
            + self.coaching.size_hint()
            + self.coaching_source.size_hint()
            + 21 * self.coaching_attempt_ids.len()
            + self.links.size_hint()
    }
}

document!(CandidateRecord, &CANDIDATE_SHAPE, candidate_record);
document!(SituationLink, &LINK_SHAPE, situation_link);
