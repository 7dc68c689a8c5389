//! Conversions between [`Json`] and [`serde_json::Value`], for code that
//! already works with `serde_json` (a provider SDK, a templating engine).
//!
//! - `Value` -> `Json` never fails ([`From`]): every number keeps the text
//!   `serde_json` writes for it (`1.0` stays a float), and objects keep the
//!   order in which the `Value` iterates them.
//! - `Json` -> `Value` ([`TryFrom`]) fails only on a number `serde_json`
//!   cannot hold: an integer outside `i64`/`u64` (this crate keeps integers
//!   of any size), or a number outside `f64`'s range. The error says where.
//!   Other numbers become the nearest `f64` when they have a fraction or an
//!   exponent (`0.10000000000000000001` becomes `0.1`).
//!
//! **Key order.** `Json` keeps every object's key order. `serde_json::Value`
//! keeps it only when `serde_json`'s `preserve_order` feature is enabled in
//! your build (any crate in the build can enable it); without it, a `Value`
//! object is a sorted map, so `Json` -> `Value` sorts the keys and
//! `Value` -> `Json` yields them sorted. Nothing else is lost either way.
//!
//! Neither direction recurses: any depth is safe.

use std::fmt;

use serde_json::Value;

use super::{Json, Number, Object};
use super::{Location, Segment};

/// A [`Json`] number that `serde_json::Value` cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ValueConversionError {
    /// The number at `location` does not fit `i64`, `u64` or a finite `f64`.
    #[error("number {lexeme} at {location} does not fit serde_json's i64, u64 or f64")]
    NumberOutOfRange {
        /// The number, as written.
        lexeme: String,
        /// Where it is, from the converted value (`$` is the value itself).
        location: ValueLocation,
    },
}

/// Where a value is, from the converted value: `$`, `$.memory.history[2]`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ValueLocation(Location);

impl ValueLocation {
    /// The steps from the converted value.
    pub fn segments(&self) -> &[Segment] {
        self.0.segments()
    }
}

impl fmt::Display for ValueLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("$")?;
        for segment in self.0.segments() {
            match segment {
                Segment::Key(k) => write!(f, ".{k}")?,
                Segment::Index(i) => write!(f, "[{i}]")?,
            }
        }
        Ok(())
    }
}

impl From<Value> for Json {
    /// Converts a `serde_json` value: every number keeps the text
    /// `serde_json` writes for it, and objects keep the order in which the
    /// `Value` iterates them (sorted unless `serde_json`'s `preserve_order`
    /// feature is on).
    fn from(value: Value) -> Json {
        from_value(value)
    }
}

impl From<serde_json::Map<String, Value>> for Object {
    /// Converts a `serde_json` object, in its iteration order.
    fn from(map: serde_json::Map<String, Value>) -> Object {
        match from_value(Value::Object(map)) {
            Json::Object(o) => o,
            // An object converts to an object.
            _ => Object::new(),
        }
    }
}

impl TryFrom<&Json> for Value {
    type Error = ValueConversionError;

    /// Converts to a `serde_json` value; fails on numbers it cannot hold.
    fn try_from(json: &Json) -> Result<Value, ValueConversionError> {
        to_value(json)
    }
}

impl TryFrom<Json> for Value {
    type Error = ValueConversionError;

    /// Converts to a `serde_json` value; fails on numbers it cannot hold.
    fn try_from(json: Json) -> Result<Value, ValueConversionError> {
        to_value(&json)
    }
}

impl TryFrom<&Object> for serde_json::Map<String, Value> {
    type Error = ValueConversionError;

    /// Converts to a `serde_json` object (sorted unless `preserve_order`).
    fn try_from(object: &Object) -> Result<Self, ValueConversionError> {
        let mut map = serde_json::Map::new();
        for (key, value) in object.iter() {
            let value = to_value(value).map_err(|e| e.under(Segment::Key(key.to_owned())))?;
            map.insert(key.to_owned(), value);
        }
        Ok(map)
    }
}

impl ValueConversionError {
    /// The same error, one level deeper.
    fn under(self, segment: Segment) -> Self {
        match self {
            ValueConversionError::NumberOutOfRange { lexeme, location } => {
                let mut segments = vec![segment];
                segments.extend(location.segments().iter().cloned());
                ValueConversionError::NumberOutOfRange {
                    lexeme,
                    location: ValueLocation(Location::from(segments)),
                }
            }
        }
    }
}

fn number_to_value(n: &Number) -> Option<Value> {
    if n.is_integer() {
        if let Some(i) = n.as_i64() {
            return Some(Value::from(i));
        }
        return n.as_u64().map(Value::from);
    }
    let f = n.as_f64().filter(|f| f.is_finite())?;
    serde_json::Number::from_f64(f).map(Value::Number)
}

/// A container being filled, innermost last.
enum ToFrame<'a> {
    Array(std::slice::Iter<'a, Json>, Vec<Value>),
    Object(
        Box<dyn Iterator<Item = (&'a str, &'a Json)> + 'a>,
        serde_json::Map<String, Value>,
        &'a str,
    ),
}

fn to_value(root: &Json) -> Result<Value, ValueConversionError> {
    let mut stack: Vec<ToFrame<'_>> = Vec::new();
    let mut next = Some(root);
    loop {
        // 1. Turn `next` into a finished value, or open its container.
        let mut done = match next.take() {
            Some(Json::Array(items)) => {
                stack.push(ToFrame::Array(
                    items.iter(),
                    Vec::with_capacity(items.len()),
                ));
                None
            }
            Some(Json::Object(object)) => {
                stack.push(ToFrame::Object(
                    Box::new(object.iter()),
                    serde_json::Map::new(),
                    "",
                ));
                None
            }
            Some(Json::Null) => Some(Value::Null),
            Some(Json::Bool(b)) => Some(Value::Bool(*b)),
            Some(Json::String(s)) => Some(Value::String(s.clone())),
            Some(Json::Number(n)) => match number_to_value(n) {
                Some(v) => Some(v),
                None => {
                    return Err(ValueConversionError::NumberOutOfRange {
                        lexeme: n.as_str().to_owned(),
                        location: location_of(&stack),
                    });
                }
            },
            None => None,
        };
        // 2. Hand finished values to their containers; close full ones.
        loop {
            if let Some(value) = done.take() {
                match stack.last_mut() {
                    None => return Ok(value),
                    Some(ToFrame::Array(_, out)) => out.push(value),
                    Some(ToFrame::Object(_, out, key)) => {
                        out.insert((*key).to_owned(), value);
                    }
                }
            }
            let advanced = match stack.last_mut() {
                Some(ToFrame::Array(items, _)) => items.next(),
                Some(ToFrame::Object(entries, _, key)) => entries.next().map(|(k, v)| {
                    *key = k;
                    v
                }),
                None => None,
            };
            if let Some(child) = advanced {
                next = Some(child);
                break;
            }
            done = match stack.pop() {
                Some(ToFrame::Array(_, out)) => Some(Value::Array(out)),
                Some(ToFrame::Object(_, out, _)) => Some(Value::Object(out)),
                None => return Ok(Value::Null),
            };
        }
    }
}

/// The location of the value being converted: the open containers' current
/// index or key.
fn location_of(stack: &[ToFrame<'_>]) -> ValueLocation {
    let segments = stack
        .iter()
        .map(|frame| match frame {
            ToFrame::Array(_, out) => Segment::Index(out.len()),
            ToFrame::Object(_, _, key) => Segment::Key((*key).to_owned()),
        })
        .collect::<Vec<_>>();
    ValueLocation(Location::from(segments))
}

/// A container being filled, innermost last.
enum FromFrame {
    Array(std::vec::IntoIter<Value>, Vec<Json>),
    Object(serde_json::map::IntoIter, Object, String),
}

fn from_value(root: Value) -> Json {
    let mut stack: Vec<FromFrame> = Vec::new();
    let mut next = Some(root);
    loop {
        let mut done = match next.take() {
            Some(Value::Array(items)) => {
                let n = items.len();
                stack.push(FromFrame::Array(items.into_iter(), Vec::with_capacity(n)));
                None
            }
            Some(Value::Object(map)) => {
                let n = map.len();
                stack.push(FromFrame::Object(
                    map.into_iter(),
                    Object::with_capacity(n),
                    String::new(),
                ));
                None
            }
            Some(Value::Null) => Some(Json::Null),
            Some(Value::Bool(b)) => Some(Json::Bool(b)),
            Some(Value::String(s)) => Some(Json::String(s)),
            // serde_json writes finite numbers only, as valid JSON lexemes.
            Some(Value::Number(n)) => {
                Some(Number::from_lexeme(&n.to_string()).map_or(Json::Null, Json::Number))
            }
            None => None,
        };
        loop {
            if let Some(value) = done.take() {
                match stack.last_mut() {
                    None => return value,
                    Some(FromFrame::Array(_, out)) => out.push(value),
                    Some(FromFrame::Object(_, out, key)) => {
                        out.insert(std::mem::take(key), value);
                    }
                }
            }
            let advanced = match stack.last_mut() {
                Some(FromFrame::Array(items, _)) => items.next(),
                Some(FromFrame::Object(entries, _, key)) => entries.next().map(|(k, v)| {
                    *key = k;
                    v
                }),
                None => None,
            };
            if let Some(child) = advanced {
                next = Some(child);
                break;
            }
            done = match stack.pop() {
                Some(FromFrame::Array(_, out)) => Some(Json::Array(out)),
                Some(FromFrame::Object(_, out, _)) => Some(Json::Object(out)),
                None => return Json::Null,
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Json {
        Json::from_slice(text.as_bytes()).unwrap()
    }

    #[test]
    fn values_round_trip_with_numbers_as_written() {
        let text = r#"{"b":[1,-2,1.0,2.5e-3,18446744073709551615,-9223372036854775808,null,true,"é\n"],"a":{"x":{}}}"#;
        let value = Value::try_from(&json(text)).unwrap();
        // serde_json without preserve_order sorts keys; the numbers keep their kind.
        assert_eq!(value["b"][2], serde_json::json!(1.0));
        assert!(value["b"][2].is_f64());
        assert_eq!(value["b"][4].as_u64(), Some(u64::MAX));
        assert_eq!(value["b"][5].as_i64(), Some(i64::MIN));
        let back = Json::from(value.clone());
        assert_eq!(Value::try_from(&back).unwrap(), value);
        assert_eq!(
            back.get("b").unwrap().to_json_string(),
            r#"[1,-2,1.0,0.0025,18446744073709551615,-9223372036854775808,null,true,"é\n"]"#
        );
    }

    #[test]
    fn key_order_is_what_serde_json_iterates() {
        let value = Value::try_from(&json(r#"{"z":1,"a":2,"m":3}"#)).unwrap();
        let keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        // Sorted without `preserve_order` (this workspace does not enable it),
        // in document order with it.
        assert!(
            keys == ["a", "m", "z"] || keys == ["z", "a", "m"],
            "{keys:?}"
        );
        let back = Json::from(value);
        let back_keys: Vec<&str> = back.as_object().unwrap().keys().collect();
        assert_eq!(
            back_keys,
            keys.iter().map(|k| k.as_str()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn numbers_serde_json_cannot_hold_are_errors_with_their_location() {
        let big = json(r#"{"memory": {"history": [1, {"n": 123456789012345678901234567890}]}}"#);
        let e = Value::try_from(&big).unwrap_err();
        assert_eq!(
            e.to_string(),
            "number 123456789012345678901234567890 at $.memory.history[1].n does not fit \
             serde_json's i64, u64 or f64"
        );
        let ValueConversionError::NumberOutOfRange { location, .. } = e;
        assert_eq!(
            location.segments(),
            [
                Segment::Key("memory".into()),
                Segment::Key("history".into()),
                Segment::Index(1),
                Segment::Key("n".into())
            ]
        );
        let object = big.as_object().unwrap();
        let e = serde_json::Map::try_from(object).unwrap_err();
        assert!(e.to_string().contains("at $.memory.history[1].n"), "{e}");
        let top = Value::try_from(&json("-123456789012345678901234567890")).unwrap_err();
        assert!(top.to_string().contains(" at $ "), "{top}");
    }

    #[test]
    fn any_depth_converts_without_recursion() {
        let depth = 100_000;
        let mut deep = Json::Null;
        for _ in 0..depth {
            deep = Json::Array(vec![deep]);
        }
        let value = Value::try_from(&deep).unwrap();
        let back = Json::from(value);
        let mut level = &back;
        let mut n = 0;
        while let Json::Array(items) = level {
            level = &items[0];
            n += 1;
        }
        assert_eq!(n, depth);
        // Dropping values this deep recurses (in `Json` as in `Value`), which
        // is not what this test is about: leak them.
        std::mem::forget(back);
        std::mem::forget(deep);
    }
}
