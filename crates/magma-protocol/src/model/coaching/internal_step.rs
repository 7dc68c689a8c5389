//! [`InternalStep`]: the record of one model call (or coaching) inside a
//! candidate, as agents return them in `internal_steps` and exporters read
//! them; its builder, validator and writer.

use crate::json::write::write_str;
use crate::json::{Json, Object, Shape, WriteJson};
use crate::validate::{Fields, Validation, free_object, literal, model_object, strict_str};

/// Where an internal step holds free-form objects, for the parser.
const SHAPE: Shape = Shape::Fields(&[("input_elements", Shape::FreeObject)]);

/// Who produced an internal step.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum InternalStepOrigin {
    /// `"model"` (the default): the agent's own model.
    #[default]
    Model,
    /// `"coaching"`: a coached replacement.
    Coaching,
}

impl InternalStepOrigin {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            InternalStepOrigin::Model => "model",
            InternalStepOrigin::Coaching => "coaching",
        }
    }
}

/// One internal step of a candidate: the prompt a component sent, what it
/// was built from, and the raw output. The inference wire does not enforce
/// it (`internal_steps` there are free-form objects); exporters read it.
/// Build one with [`InternalStep::builder`] and put
/// [`to_object`](InternalStep::to_object) in `AgentOutput.internal_steps`.
///
/// ```
/// use magma_protocol::coaching::{InternalStep, InternalStepOrigin};
///
/// let step = InternalStep::builder("call-1", "planner")
///     .full_prompt("You are a robot.")
///     .output_raw("{\"say\": \"hi\"}")
///     .origin(InternalStepOrigin::Coaching)
///     .build();
/// let object = step.to_object();
/// assert_eq!(object.get_str("origin"), Some("coaching"));
/// assert_eq!(InternalStep::from_json(object.into()).unwrap(), step);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct InternalStep {
    /// The step's id.
    pub id: String,
    /// The component that made the call.
    pub component: String,
    /// Who produced it (default [`InternalStepOrigin::Model`]).
    pub origin: InternalStepOrigin,
    /// The prompt, in full.
    pub full_prompt: String,
    /// What the prompt was built from, free-form (default `{}`).
    pub input_elements: Object,
    /// The raw output.
    pub output_raw: String,
}

impl InternalStep {
    /// A builder: origin `model`, empty prompt, input elements and output.
    pub fn builder(id: impl Into<String>, component: impl Into<String>) -> InternalStepBuilder {
        InternalStepBuilder {
            step: InternalStep {
                id: id.into(),
                component: component.into(),
                origin: InternalStepOrigin::Model,
                full_prompt: String::new(),
                input_elements: Object::new(),
                output_raw: String::new(),
            },
        }
    }

    /// The JSON object the inference wire carries in `internal_steps`,
    /// every field present.
    pub fn to_object(&self) -> Object {
        self.clone().into_object()
    }

    /// [`to_object`](InternalStep::to_object), consuming the step.
    pub fn into_object(self) -> Object {
        let mut o = Object::with_capacity(6);
        o.insert("id", Json::String(self.id));
        o.insert("component", Json::String(self.component));
        o.insert("origin", Json::from(self.origin.as_str()));
        o.insert("full_prompt", Json::String(self.full_prompt));
        o.insert("input_elements", Json::Object(self.input_elements));
        o.insert("output_raw", Json::String(self.output_raw));
        o
    }
}

impl From<InternalStep> for Object {
    fn from(step: InternalStep) -> Object {
        step.into_object()
    }
}

/// Builds an [`InternalStep`]; see [`InternalStep::builder`].
#[derive(Debug, Clone)]
#[must_use]
pub struct InternalStepBuilder {
    step: InternalStep,
}

impl InternalStepBuilder {
    /// Sets who produced the step.
    pub fn origin(mut self, origin: InternalStepOrigin) -> Self {
        self.step.origin = origin;
        self
    }

    /// Sets the prompt.
    pub fn full_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.step.full_prompt = prompt.into();
        self
    }

    /// Sets what the prompt was built from.
    pub fn input_elements(mut self, elements: Object) -> Self {
        self.step.input_elements = elements;
        self
    }

    /// Adds one input element.
    pub fn input_element(mut self, key: impl Into<String>, value: Json) -> Self {
        self.step.input_elements.insert(key.into(), value);
        self
    }

    /// Sets the raw output.
    pub fn output_raw(mut self, output: impl Into<String>) -> Self {
        self.step.output_raw = output.into();
        self
    }

    /// The step.
    pub fn build(self) -> InternalStep {
        self.step
    }

    /// The step as the JSON object of `internal_steps`.
    pub fn build_object(self) -> Object {
        self.step.into_object()
    }
}

// ---------------------------------------------------------------------------
// Validation, field by field in the reference's declaration order

fn internal_step(v: Json, cx: &mut Validation) -> Option<InternalStep> {
    let obj = model_object(v, "InternalStep", cx)?;
    let mut f = Fields::new(obj, &["id", "component", "full_prompt", "output_raw"], cx);
    let id = f.required("id", cx, strict_str);
    let component = f.required("component", cx, strict_str);
    let origin = f.optional(
        "origin",
        cx,
        || InternalStepOrigin::Model,
        |v, cx| {
            literal(v, cx, &["model", "coaching"]).map(|i| {
                if i == 0 {
                    InternalStepOrigin::Model
                } else {
                    InternalStepOrigin::Coaching
                }
            })
        },
    );
    let prompt = f.required("full_prompt", cx, strict_str);
    let elements = f.optional("input_elements", cx, Object::new, free_object);
    let output = f.required("output_raw", cx, strict_str);
    f.finish(cx).then_some(())?;
    Some(InternalStep {
        id: id?,
        component: component?,
        origin: origin?,
        full_prompt: prompt?,
        input_elements: elements?,
        output_raw: output?,
    })
}

// ---------------------------------------------------------------------------
// Writing, every field in the reference's order

impl WriteJson for InternalStep {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        write_str(out, &self.id);
        out.push_str(",\"component\":");
        write_str(out, &self.component);
        out.push_str(",\"origin\":\"");
        out.push_str(self.origin.as_str());
        out.push_str("\",\"full_prompt\":");
        write_str(out, &self.full_prompt);
        out.push_str(",\"input_elements\":");
        self.input_elements.write_json(out);
        out.push_str(",\"output_raw\":");
        write_str(out, &self.output_raw);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        100 + self.id.len()
            + self.component.len()
            + self.full_prompt.len()
            + self.input_elements.size_hint()
            + self.output_raw.len()
    }
}

document!(InternalStep, &SHAPE, internal_step);

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::InternalStep;
    use crate::json::Object;
    use crate::json_schema::{HasSchema, Refs, S, model, object, strings};

    impl HasSchema for InternalStep {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "InternalStep",
                "One internal step of a candidate (`internal_steps` on the inference wire, \
                 where it is not enforced; exporters read it).",
                vec![
                    ("id", S::ty("string").doc("The step's id.")),
                    (
                        "component",
                        S::ty("string").doc("The component that made the call."),
                    ),
                    (
                        "origin",
                        S::ty("string")
                            .set("enum", strings(&["model", "coaching"]))
                            .set("default", "model")
                            .doc("Who produced it."),
                    ),
                    ("full_prompt", S::ty("string").doc("The prompt, in full.")),
                    ("input_elements", object("What the prompt was built from.")),
                    ("output_raw", S::ty("string").doc("The raw output.")),
                ],
                &["id", "component", "full_prompt", "output_raw"],
            )
        }
    }
}
