//! [`SituationRecord`]: one situation of a saved generation graph (the file
//! `<id>.json` of a graph folder), the input the agent saw and the
//! candidates it gave; its validator and writer.

use crate::json::write::write_i64;
use crate::json::{Json, Shape, WriteJson};
use crate::validate::{Fields, Validate, Validation, int64, list, model_object, opt_int64};
use crate::{AgentInput, CandidateRecord};

use super::candidate::CANDIDATE_SHAPE;
use crate::model::INPUT_SHAPE;

/// Where a situation record holds free-form objects, for the parser.
const SHAPE: Shape = Shape::Model {
    declared: &["id", "stage_id", "parent_id", "input", "candidates"],
    fields: &[
        ("id", Shape::Scalar),
        ("stage_id", Shape::Scalar),
        ("parent_id", Shape::Scalar),
        ("input", INPUT_SHAPE),
        ("candidates", Shape::List(&CANDIDATE_SHAPE)),
    ],
};

/// One situation of a saved graph: the input the agent answered and its
/// candidates. GEN's reader (`magma_gen.storage.reader.SavedGraph`) checks
/// the links between situations; this type checks one file.
#[derive(Debug, Clone, PartialEq)]
pub struct SituationRecord {
    /// The situation's id (its file is `<id>.json`).
    pub id: i64,
    /// The stage of the task.
    pub stage_id: i64,
    /// The candidate that led here, if any (`null` for a root).
    pub parent_id: Option<i64>,
    /// The input the agent answered.
    pub input: AgentInput,
    /// The candidates.
    pub candidates: Vec<CandidateRecord>,
}

fn situation_record(v: Json, cx: &mut Validation) -> Option<SituationRecord> {
    let obj = model_object(v, "SituationRecord", cx)?;
    let mut f = Fields::new(
        obj,
        &["id", "stage_id", "parent_id", "input", "candidates"],
        cx,
    );
    let id = f.required("id", cx, int64);
    let stage_id = f.required("stage_id", cx, int64);
    let parent_id = f.required("parent_id", cx, opt_int64);
    let input = f.required("input", cx, AgentInput::validate);
    let candidates = f.required("candidates", cx, |v, cx| {
        list(v, cx, CandidateRecord::validate)
    });
    f.finish(cx).then_some(())?;
    Some(SituationRecord {
        id: id?,
        stage_id: stage_id?,
        parent_id: parent_id?,
        input: input?,
        candidates: candidates?,
    })
}

impl WriteJson for SituationRecord {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        write_i64(out, self.id);
        out.push_str(",\"stage_id\":");
        write_i64(out, self.stage_id);
        out.push_str(",\"parent_id\":");
        match self.parent_id {
            Some(id) => write_i64(out, id),
            None => out.push_str("null"),
        }
        out.push_str(",\"input\":");
        self.input.write_json(out);
        out.push_str(",\"candidates\":");
        self.candidates.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        96 + self.input.size_hint() + self.candidates.size_hint()
    }
}

document!(SituationRecord, &SHAPE, situation_record);
