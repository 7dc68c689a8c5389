//! `serde` support of the values: `Serialize` and `Deserialize` for [`Json`],
//! and `Serialize` for [`Number`], [`Object`] and [`Map`].
//!
//! With `serde_json` as the serializer, numbers are written exactly as they
//! were read and objects kept as validated text are copied as they are
//! (both through `serde_json::value::RawValue`), so JSON output is lossless.
//! Other serializers get plain maps, and numbers as `i64`/`u64`/`i128`/
//! `u128` or, failing that, `f64`. The output of `serde_json` here is byte
//! for byte what the direct writer (`write.rs`) gives: change both together.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, SerializeStruct, Serializer};

use super::{Json, Map, Number, Object};

/// `true` when `S` is one of serde_json's serializers, which understand
/// `RawValue` and so can take number lexemes and object text verbatim.
pub(crate) fn is_serde_json<S>() -> bool {
    std::any::type_name::<S>().contains("serde_json::")
}

/// Writes `text`, which is already valid JSON, verbatim. serde_json's
/// serializers recognise the struct name its `RawValue` uses and copy the
/// field's string as it is; going through `RawValue` itself would re-validate
/// the text on every write. The round-trip tests pin this behaviour.
pub(crate) fn raw<S: Serializer>(text: &str, s: S) -> Result<S::Ok, S::Error> {
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
