//! [`ExportExample`]: one selected candidate as GEN's export hands it to an
//! agent's exporter, with the input it answered; its validator and writer.

use crate::json::write::write_str;
use crate::json::{Json, Shape, WriteJson};
use crate::validate::{Fields, Validate, Validation, model_object, strict_str};
use crate::{AgentInput, CandidateRecord};

use super::candidate::CANDIDATE_SHAPE;
use crate::model::INPUT_SHAPE;

/// Where an example holds free-form objects, for the parser.
const SHAPE: Shape = Shape::Model {
    declared: &["example_id", "input", "candidate"],
    fields: &[
        ("example_id", Shape::Scalar),
        ("input", INPUT_SHAPE),
        ("candidate", CANDIDATE_SHAPE),
    ],
};

/// One example to export: GEN names it `<situation id>:<candidate id>` and
/// gives a copy of the situation's input (its tools, attributes and
/// `memory.memory_list` shuffled with the export's seed).
#[derive(Debug, Clone, PartialEq)]
pub struct ExportExample {
    /// The example's id; every result names it.
    pub example_id: String,
    /// The input the candidate answered.
    pub input: AgentInput,
    /// The candidate.
    pub candidate: CandidateRecord,
}

fn export_example(v: Json, cx: &mut Validation) -> Option<ExportExample> {
    let obj = model_object(v, "ExportExample", cx)?;
    let mut f = Fields::new(obj, &["example_id", "input", "candidate"], cx);
    let id = f.required("example_id", cx, strict_str);
    let input = f.required("input", cx, AgentInput::validate);
    let candidate = f.required("candidate", cx, CandidateRecord::validate);
    f.finish(cx).then_some(())?;
    Some(ExportExample {
        example_id: id?,
        input: input?,
        candidate: candidate?,
    })
}

impl WriteJson for ExportExample {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"example_id\":");
        write_str(out, &self.example_id);
        out.push_str(",\"input\":");
        self.input.write_json(out);
        out.push_str(",\"candidate\":");
        self.candidate.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        48 + self.example_id.len() + self.input.size_hint() + self.candidate.size_hint()
    }
}

document!(ExportExample, &SHAPE, export_example);
