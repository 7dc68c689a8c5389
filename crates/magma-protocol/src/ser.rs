//! `serde` support.
//!
//! Serialization emits every field in the reference's declaration order,
//! including defaults and nulls, as FastAPI's `response_model` does. With
//! `serde_json` as the serializer, numbers are written exactly as they were
//! read and objects kept as validated text are copied as they are (both
//! through `serde_json::value::RawValue`), so JSON output is lossless. Other
//! serializers get plain maps, and numbers as `i64`/`u64`/`i128`/`u128` or,
//! failing that, `f64`.
//!
//! The crate's own `to_json_string()` methods do not come through here: they
//! use the direct writer of `crate::write`, whose output is tested to be byte
//! for byte what `serde_json::to_string` makes of these impls. A change to
//! the output of one must be made in the other.
//!
//! Deserialization through `serde` goes through [`Json`] and then the same
//! validation as [`AgentRequest::from_slice`]. It is only as lossless as the
//! deserializer: `serde_json` without `arbitrary_precision` hands over big
//! integers as `f64`. Use the `from_slice` constructors for untrusted bodies.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, SerializeStruct, Serializer};

use crate::json::{Json, Map, Number, Object};
use crate::model::{
    AgentDecision, AgentError, AgentHealth, AgentInfo, AgentInput, AgentInstruction, AgentOutput,
    AgentRequest, AgentResponse, CandidateStatus, InstructionType, NonEmptyString, Outcome,
    ToolCall,
};

/// A value of this crate as [`Json`] (used for error `input`s).
pub(crate) fn to_json<T: crate::write::WriteJson + ?Sized>(value: &T) -> Json {
    crate::parse::parse(crate::write::to_string(value).as_bytes()).unwrap_or_default()
}

/// `true` when `S` is one of serde_json's serializers, which understand
/// `RawValue` and so can take number lexemes and object text verbatim.
fn is_serde_json<S>() -> bool {
    std::any::type_name::<S>().contains("serde_json::")
}

/// Writes `text`, which is already valid JSON, verbatim. serde_json's
/// serializers recognise the struct name its `RawValue` uses and copy the
/// field's string as it is; going through `RawValue` itself would re-validate
/// the text on every write. The round-trip tests pin this behaviour.
fn raw<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
    const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";
    let mut st = s.serialize_struct(RAW_VALUE_TOKEN, 1)?;
    st.serialize_field(RAW_VALUE_TOKEN, text)?;
    st.end()
}

impl Serialize for Number {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.as_str();
        if self.is_integer() {
            if let Ok(i) = text.parse::<i64>() {
                if text != "-0" {
                    return s.serialize_i64(i);
                }
            } else if let Ok(u) = text.parse::<u64>() {
                return s.serialize_u64(u);
            }
        }
        if !self.is_finite() {
            // Only reachable for the `input` of a `finite_number` error:
            // JSON has no NaN, so name it.
            return s.serialize_str(text);
        }
        if is_serde_json::<S>() {
            return raw(text, s);
        }
        if self.is_integer() {
            if let Ok(i) = text.parse::<i128>() {
                return s.serialize_i128(i);
            }
            if let Ok(u) = text.parse::<u128>() {
                return s.serialize_u128(u);
            }
        }
        s.serialize_f64(self.as_f64().unwrap_or_default())
    }
}

impl Serialize for Object {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.raw_text() {
            Some(text) if is_serde_json::<S>() => raw(text, s),
            _ => self.as_map().serialize(s),
        }
    }
}

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Number(n) => n.serialize(s),
            Json::String(t) => s.serialize_str(t),
            Json::Array(a) => {
                let mut seq = s.serialize_seq(Some(a.len()))?;
                for v in a {
                    seq.serialize_element(v)?;
                }
                seq.end()
            }
            Json::Object(o) => o.serialize(s),
        }
    }
}

impl<V: Serialize> Serialize for Map<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.len()))?;
        for (k, v) in self.iter() {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl Serialize for NonEmptyString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self)
    }
}

impl Serialize for InstructionType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for CandidateStatus {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl Serialize for AgentInstruction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentInstruction", 2)?;
        st.serialize_field("type", &self.kind)?;
        st.serialize_field("content", &self.content)?;
        st.end()
    }
}

impl Serialize for AgentInput {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentInput", 7)?;
        st.serialize_field("id", &self.id)?;
        st.serialize_field("instruction", &self.instruction)?;
        st.serialize_field("tools", &self.tools)?;
        st.serialize_field("attributes", &self.attributes)?;
        st.serialize_field("memory", &self.memory)?;
        st.serialize_field("num_outputs", &self.num_outputs.get())?;
        st.serialize_field("extra_keys", &self.extra_keys)?;
        st.end()
    }
}

impl Serialize for AgentRequest {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentRequest", 2)?;
        st.serialize_field("request_id", self.request_id())?;
        st.serialize_field("inputs", self.inputs())?;
        st.end()
    }
}

impl Serialize for ToolCall {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("ToolCall", 3)?;
        st.serialize_field("name", &self.name)?;
        st.serialize_field("arguments", &self.arguments)?;
        st.serialize_field("target_robot_name", &self.target_robot_name)?;
        st.end()
    }
}

impl Serialize for AgentDecision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentDecision", 2)?;
        st.serialize_field("say", &self.say)?;
        st.serialize_field("tool_calls", &self.tool_calls)?;
        st.end()
    }
}

impl Serialize for AgentError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentError", 3)?;
        st.serialize_field("code", &self.code)?;
        st.serialize_field("message", &self.message)?;
        st.serialize_field("component", &self.component)?;
        st.end()
    }
}

impl Serialize for AgentOutput {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentOutput", 8)?;
        st.serialize_field("request_id", &self.request_id)?;
        st.serialize_field("source_id", &self.source_id)?;
        st.serialize_field("candidate_index", &self.candidate_index)?;
        st.serialize_field("status", &self.outcome.status())?;
        st.serialize_field("memory", &self.memory)?;
        st.serialize_field("internal_steps", &self.internal_steps)?;
        st.serialize_field("output", &self.outcome.decision())?;
        st.serialize_field("error", &self.outcome.error())?;
        st.end()
    }
}

impl Serialize for Outcome {
    /// `{"status", "output", "error"}` as they appear in a candidate.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("Outcome", 3)?;
        st.serialize_field("status", &self.status())?;
        st.serialize_field("output", &self.decision())?;
        st.serialize_field("error", &self.error())?;
        st.end()
    }
}

impl Serialize for AgentResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.candidates().serialize(s)
    }
}

impl Serialize for AgentHealth {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("AgentHealth", 1)?;
        st.serialize_field("status", "ready")?;
        st.end()
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

// ---------------------------------------------------------------------------
// Deserialize

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        Json::deserialize(d)
    }
    fn visit_bool<E>(self, b: bool) -> Result<Json, E> {
        Ok(Json::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Json, E> {
        Ok(Json::from(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Json, E> {
        Ok(Json::from(u))
    }
    fn visit_i128<E>(self, i: i128) -> Result<Json, E> {
        Ok(Json::from(i))
    }
    fn visit_u128<E>(self, u: u128) -> Result<Json, E> {
        Ok(Json::from(u))
    }
    fn visit_f64<E: de::Error>(self, f: f64) -> Result<Json, E> {
        Number::from_f64(f)
            .map(Json::Number)
            .ok_or_else(|| E::custom("JSON numbers must be finite (no NaN or infinity)"))
    }
    fn visit_str<E>(self, s: &str) -> Result<Json, E> {
        Ok(Json::String(s.to_owned()))
    }
    fn visit_string<E>(self, s: String) -> Result<Json, E> {
        Ok(Json::String(s))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(v) = seq.next_element()? {
            out.push(v);
        }
        Ok(Json::Array(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut out = Object::new();
        while let Some((k, v)) = map.next_entry::<String, Json>()? {
            out.insert(k, v);
        }
        Ok(Json::Object(out))
    }
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

macro_rules! deserialize_via_json {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            /// Deserializes any value and validates it as the reference does.
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$t, D::Error> {
                let value = Json::deserialize(d)?;
                <$t>::from_json(value).map_err(de::Error::custom)
            }
        }
    )*};
}
deserialize_via_json!(AgentRequest, AgentResponse, AgentInfo, AgentHealth);
