//! Pieces of JSON Schema (draft 2020-12) documents, for the models to
//! describe themselves ([`HasSchema`]) and for `schema.rs` to assemble.
//! Feature `schema`.

use crate::json::{Json, Object};
use crate::limits::MAX_FREE_FORM_DEPTH;

/// A wire type that describes itself as a JSON Schema object.
pub(crate) trait HasSchema {
    /// The schema; other schemas are referred to through `refs`.
    fn schema(refs: &Refs<'_>) -> Object;
}

/// How a schema refers to another one: `{prefix}{name}`.
pub(crate) struct Refs<'a> {
    prefix: &'a str,
}

impl<'a> Refs<'a> {
    pub(crate) fn new(prefix: &'a str) -> Refs<'a> {
        Refs { prefix }
    }

    /// `{"$ref": "<prefix><name>"}`.
    pub(crate) fn to(&self, name: &str) -> S {
        S::new().set("$ref", format!("{}{name}", self.prefix))
    }
}

/// A schema object under construction; keys keep their insertion order.
pub(crate) struct S(Object);

impl S {
    pub(crate) fn new() -> S {
        S(Object::new())
    }

    /// `{"type": ty}`.
    pub(crate) fn ty(ty: &str) -> S {
        S::new().set("type", ty)
    }

    pub(crate) fn set(mut self, key: &str, value: impl Into<Json>) -> S {
        self.0.insert(key, value.into());
        self
    }

    /// Adds the description and finishes.
    pub(crate) fn doc(self, description: &str) -> Json {
        self.set("description", description).build()
    }

    pub(crate) fn build(self) -> Json {
        Json::Object(self.0)
    }

    pub(crate) fn into_object(self) -> Object {
        self.0
    }
}

impl From<S> for Json {
    fn from(s: S) -> Json {
        s.build()
    }
}

/// A closed object: the rule of every wire type (`extra="forbid"`).
pub(crate) fn model(
    name: &str,
    description: &str,
    properties: Vec<(&str, Json)>,
    required: &[&str],
) -> Object {
    let mut body = open_object(name, description, properties, required);
    body.insert("additionalProperties", Json::Bool(false));
    body
}

/// An object that tolerates members it does not name (the error bodies).
pub(crate) fn open_object(
    name: &str,
    description: &str,
    properties: Vec<(&str, Json)>,
    required: &[&str],
) -> Object {
    let mut props = Object::new();
    for (name, schema) in properties {
        props.insert(name, schema);
    }
    let mut body = S::new()
        .set("title", name)
        .set("description", description)
        .set("type", "object")
        .set("properties", props);
    if !required.is_empty() {
        body = body.set("required", strings(required));
    }
    body.0
}

pub(crate) fn strings(items: &[&str]) -> Json {
    Json::Array(items.iter().map(|&s| Json::from(s)).collect())
}

pub(crate) fn non_empty(description: &str) -> Json {
    S::ty("string").set("minLength", 1).doc(description)
}

/// A free-form object that defaults to `{}`.
pub(crate) fn object(description: &str) -> Json {
    S::ty("object")
        .set("default", Object::new())
        .doc(&free_form(description))
}

pub(crate) fn free_form(description: &str) -> String {
    format!(
        "{description} Any JSON: numbers must be finite (no NaN or Infinity), and values nest \
         at most {MAX_FREE_FORM_DEPTH} containers below this field."
    )
}

pub(crate) fn integer(description: &str, signedness: &str) -> String {
    format!(
        "{description} A JSON integer written without fraction or exponent (`1.0`, `1e2`, \
         `\"1\"` and `true` are refused); {signedness}64-bit in magma-rs, unbounded in the \
         reference."
    )
}

/// A signed 64-bit integer.
pub(crate) fn int64(description: &str) -> Json {
    S::ty("integer")
        .set("minimum", i64::MIN)
        .set("maximum", i64::MAX)
        .doc(&integer(description, ""))
}

/// `schema` or `null`, default `null`.
pub(crate) fn nullable(schema: S, description: &str) -> Json {
    S::new()
        .set(
            "anyOf",
            Json::Array(vec![schema.build(), S::ty("null").build()]),
        )
        .set("default", Json::Null)
        .doc(description)
}
