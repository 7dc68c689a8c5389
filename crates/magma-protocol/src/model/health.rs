//! `GET /health`: [`AgentHealth`], its validator, writer and serde impls.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::error::Error;
use crate::json::{Json, WriteJson, parse, to_string};
use crate::limits::READ;
use crate::validate::{Fields, Validation, literal, model_object};

/// The body of `GET /health`: `{"status":"ready"}`. `{}` is valid too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AgentHealth;

impl AgentHealth {
    /// Parses and validates a body, exactly as the reference would.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        let value = parse(bytes, READ).map_err(|e| Error::from(e).with_model("AgentHealth"))?;
        Self::from_json(value)
    }

    /// Validates an already parsed value.
    pub fn from_json(value: Json) -> Result<Self, Error> {
        Validation::document("AgentHealth", value, health)
    }

    /// `{"status":"ready"}`.
    pub fn to_json_string(&self) -> String {
        to_string(self)
    }
}

fn health(v: Json, cx: &mut Validation) -> Option<AgentHealth> {
    let obj = model_object(v, "AgentHealth", cx)?;
    let mut f = Fields::new(obj, &[], cx);
    let status = f.optional("status", cx, || 0, |v, cx| literal(v, cx, &["ready"]));
    f.finish(cx).then_some(())?;
    status.map(|_| AgentHealth)
}

impl WriteJson for AgentHealth {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"status\":\"ready\"}");
    }

    fn size_hint(&self) -> usize {
        18
    }
}

impl Serialize for AgentHealth {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentHealth", 1)?;
        st.serialize_field("status", "ready")?;
        st.end()
    }
}

impl<'de> serde::Deserialize<'de> for AgentHealth {
    /// Deserializes any value and validates it as the reference does.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AgentHealth, D::Error> {
        let value = <Json as serde::Deserialize>::deserialize(d)?;
        AgentHealth::from_json(value).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::AgentHealth;
    use crate::json::Object;
    use crate::json_schema::{HasSchema, Refs, S, model};

    impl HasSchema for AgentHealth {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "AgentHealth",
                "The body of `GET /health` when the agent is ready; `{}` is valid too.",
                vec![(
                    "status",
                    S::ty("string")
                        .set("const", "ready")
                        .set("default", "ready")
                        .doc("Always `ready`: an agent that is not ready answers 503."),
                )],
                &[],
            )
        }
    }
}
