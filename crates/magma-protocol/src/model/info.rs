//! `GET /v1/info`: [`AgentInfo`] and what BENCH checks of it, its
//! validator, writer and serde impls.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::error::Error;
use crate::json::write::{write_bool, write_str};
use crate::json::{Json, Map, WriteJson, parse, to_string};
use crate::limits::READ;
use crate::validate::{
    Fields, Validation, bool_map, list, model_object, opt_str, strict_bool, strict_str,
};

/// The protocol version this crate implements, as `AgentInfo` advertises it.
pub const PROTOCOL_VERSION: &str = "2.0";

/// `capabilities` of [`AgentInfo`]: names to flags, in order.
pub type Capabilities = Map<bool>;

/// The body of `GET /v1/info`.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentInfo {
    /// Default `"2.0"`; the model takes any string, clients require `"2.0"`.
    pub protocol_version: String,
    /// The agent's name (may be empty in the model).
    pub agent_id: String,
    /// The agent's version.
    pub agent_version: String,
    /// Coaching kinds handled (`failure`, `suboptimal`, `format`).
    pub specialized_coaching: Vec<String>,
    /// Whether coached decisions can be replayed through `extra_keys.coaching`.
    pub coaching_resume: bool,
    /// Why coaching is off, if it is.
    pub coaching_unavailable_reason: Option<String>,
    /// Capability flags; BENCH requires `inference: true`.
    pub capabilities: Capabilities,
}

impl AgentInfo {
    /// Info for an agent that can answer inferences: protocol `2.0`,
    /// `capabilities: {"inference": true}`, coaching off.
    pub fn new(agent_id: impl Into<String>, agent_version: impl Into<String>) -> Self {
        let mut capabilities = Capabilities::new();
        capabilities.insert("inference", true);
        AgentInfo {
            protocol_version: PROTOCOL_VERSION.to_owned(),
            agent_id: agent_id.into(),
            agent_version: agent_version.into(),
            specialized_coaching: Vec::new(),
            coaching_resume: false,
            coaching_unavailable_reason: None,
            capabilities,
        }
    }

    /// Parses and validates a body, exactly as the reference would.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, Error> {
        let value = parse(bytes, READ).map_err(|e| Error::from(e).with_model("AgentInfo"))?;
        Self::from_json(value)
    }

    /// Validates an already parsed value.
    pub fn from_json(value: Json) -> Result<Self, Error> {
        Validation::document("AgentInfo", value, info)
    }

    /// What BENCH checks before a run: protocol `2.0` and `inference: true`.
    pub fn check_compatible(&self) -> Result<(), IncompatibleAgent> {
        if self.protocol_version != PROTOCOL_VERSION {
            return Err(IncompatibleAgent::ProtocolVersion(
                self.protocol_version.clone(),
            ));
        }
        if self.capabilities.get("inference") != Some(&true) {
            return Err(IncompatibleAgent::NoInference);
        }
        Ok(())
    }

    /// Compact JSON with every field, as FastAPI would send it.
    pub fn to_json_string(&self) -> String {
        to_string(self)
    }
}

/// Why an agent's `/v1/info` does not satisfy what BENCH requires.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IncompatibleAgent {
    /// `protocol_version` is not `2.0`.
    #[error("agent speaks protocol {0:?}, expected \"2.0\"")]
    ProtocolVersion(String),
    /// `capabilities.inference` is missing or false.
    #[error("agent does not advertise capabilities.inference = true")]
    NoInference,
}

fn info(v: Json, cx: &mut Validation) -> Option<AgentInfo> {
    let obj = model_object(v, "AgentInfo", cx)?;
    let mut f = Fields::new(obj, &["agent_id", "agent_version", "capabilities"], cx);
    let protocol_version = f.optional(
        "protocol_version",
        cx,
        || PROTOCOL_VERSION.to_owned(),
        strict_str,
    );
    let agent_id = f.required("agent_id", cx, strict_str);
    let agent_version = f.required("agent_version", cx, strict_str);
    let coaching = f.optional("specialized_coaching", cx, Vec::new, |v, cx| {
        list(v, cx, strict_str)
    });
    let resume = f.optional("coaching_resume", cx, || false, strict_bool);
    let reason = f.optional("coaching_unavailable_reason", cx, || None, opt_str);
    let capabilities = f.required("capabilities", cx, bool_map);
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

impl WriteJson for AgentInfo {
    fn write_json(&self, out: &mut String) {
        out.push_str("{\"protocol_version\":");
        write_str(out, &self.protocol_version);
        out.push_str(",\"agent_id\":");
        write_str(out, &self.agent_id);
        out.push_str(",\"agent_version\":");
        write_str(out, &self.agent_version);
        out.push_str(",\"specialized_coaching\":");
        self.specialized_coaching.write_json(out);
        out.push_str(",\"coaching_resume\":");
        write_bool(out, self.coaching_resume);
        out.push_str(",\"coaching_unavailable_reason\":");
        self.coaching_unavailable_reason.write_json(out);
        out.push_str(",\"capabilities\":");
        self.capabilities.write_json(out);
        out.push('}');
    }

    fn size_hint(&self) -> usize {
        170 + self.protocol_version.len()
            + self.agent_id.len()
            + self.agent_version.len()
            + self.specialized_coaching.size_hint()
            + self.coaching_unavailable_reason.size_hint()
            + self.capabilities.size_hint()
    }
}

impl Serialize for AgentInfo {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentInfo", 7)?;
        st.serialize_field("protocol_version", &self.protocol_version)?;
        st.serialize_field("agent_id", &self.agent_id)?;
        st.serialize_field("agent_version", &self.agent_version)?;
        st.serialize_field("specialized_coaching", &self.specialized_coaching)?;
        st.serialize_field("coaching_resume", &self.coaching_resume)?;
        st.serialize_field(
            "coaching_unavailable_reason",
            &self.coaching_unavailable_reason,
        )?;
        st.serialize_field("capabilities", &self.capabilities)?;
        st.end()
    }
}

impl<'de> serde::Deserialize<'de> for AgentInfo {
    /// Deserializes any value and validates it as the reference does.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AgentInfo, D::Error> {
        let value = <Json as serde::Deserialize>::deserialize(d)?;
        AgentInfo::from_json(value).map_err(serde::de::Error::custom)
    }
}

// ---------------------------------------------------------------------------
// JSON Schema (feature `schema`)

#[cfg(feature = "schema")]
mod json_schema {
    use super::{AgentInfo, PROTOCOL_VERSION};
    use crate::json::{Json, Object};
    use crate::json_schema::{HasSchema, Refs, S, model, strings};

    impl HasSchema for AgentInfo {
        fn schema(_refs: &Refs<'_>) -> Object {
            model(
                "AgentInfo",
                "The body of `GET /v1/info`.",
                vec![
                    (
                        "protocol_version",
                        S::ty("string")
                            .set("default", PROTOCOL_VERSION)
                            .doc("Any string is valid here; clients such as BENCH require `2.0`."),
                    ),
                    (
                        "agent_id",
                        S::ty("string").doc("The agent's name; may be empty."),
                    ),
                    ("agent_version", S::ty("string").doc("The agent's version.")),
                    (
                        "specialized_coaching",
                        S::ty("array")
                            .set("items", S::ty("string"))
                            .set("default", Json::Array(Vec::new()))
                            .doc("Coaching kinds handled: `failure`, `suboptimal`, `format`."),
                    ),
                    (
                        "coaching_resume",
                        S::ty("boolean").set("default", false).doc(
                            "Whether coached decisions can be replayed through \
                         `extra_keys.coaching`.",
                        ),
                    ),
                    (
                        "coaching_unavailable_reason",
                        S::new()
                            .set("type", strings(&["string", "null"]))
                            .set("default", Json::Null)
                            .doc("Why coaching is off, if it is."),
                    ),
                    (
                        "capabilities",
                        S::ty("object")
                            .set("additionalProperties", S::ty("boolean"))
                            .doc(
                                "Capability flags, may be empty; BENCH requires `inference: true`.",
                            ),
                    ),
                ],
                &["agent_id", "agent_version", "capabilities"],
            )
        }
    }
}
