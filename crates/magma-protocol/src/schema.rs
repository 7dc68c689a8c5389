//! JSON Schemas (draft 2020-12) of the wire types and of the HTTP error bodies.
//!
//! Each [`Schema`] describes what this crate accepts, field by field: required
//! fields, JSON types, `additionalProperties: false` at every typed level,
//! `minLength`, the bounds of `num_outputs` and `candidate_index`, defaults,
//! literal values, nullable fields, and free-form positions (`memory`, `tools`,
//! ...) as unconstrained objects. Typed integers are 64-bit in Rust, so their
//! schemas carry the `i64`/`u64` bounds; the reference has none.
//!
//! The status/output/error rule of a candidate is a `oneOf`. What JSON Schema
//! cannot say is written in `description`s: unique input ids, the order of
//! candidates in a response, integers written without fraction or exponent
//! (JSON Schema's `integer` admits `1.0`, this crate and the reference do not),
//! finite numbers and nesting limits.
//!
//! [`Schema::document`] is a self-contained schema document (its dependencies
//! under `$defs`); [`Schema::definition`] is the bare schema with `$ref`s under
//! a prefix of your choice, e.g. `#/components/schemas/` for OpenAPI.
//! `cargo xtask codegen` writes both forms to `docs/` in the repository.
//!
//! ```
//! use magma_protocol::schema::{DIALECT, Schema};
//!
//! let doc = Schema::AgentInput.document();
//! assert_eq!(doc.get("$schema").and_then(|v| v.as_str()), Some(DIALECT));
//! let num_outputs = doc.get("properties").and_then(|p| p.get("num_outputs")).unwrap();
//! assert_eq!(num_outputs.get("exclusiveMinimum").and_then(|v| v.as_i64()), Some(0));
//! assert_eq!(num_outputs.get("default").and_then(|v| v.as_i64()), Some(1));
//! ```

use crate::json::{Json, Object};
use crate::json_schema::{HasSchema, Refs, S, open_object, strings};

/// The JSON Schema dialect of every schema here: draft 2020-12.
pub const DIALECT: &str = "https://json-schema.org/draft/2020-12/schema";

/// Where [`Schema::document`] keeps dependencies.
const DEFS: &str = "#/$defs/";

/// The wire types that publish a schema, one line each, in the reference's
/// declaration order: the type (its schema has the same name), the rest of
/// its doc line, and the schemas it refers to with `$ref`. The type
/// describes itself through `HasSchema` in its own model file, so a new
/// model with a schema is one line here.
macro_rules! wire_schemas {
    ($($ty:ident $doc:literal refers [$($r:ident),*];)*) => {
        /// A named schema: one of the wire types or one of the HTTP error bodies.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[non_exhaustive]
        pub enum Schema {
            $(
                #[doc = concat!("[`crate::", stringify!($ty), "`]", $doc)]
                $ty,
            )*
            /// The 422 body for an invalid request body, as FastAPI names it:
            /// `{"detail": [ValidationError, ...]}` (see [`crate::Error::to_fastapi_body`]).
            HttpValidationError,
            /// One entry of [`Schema::HttpValidationError`]: `{"type","loc","msg","input","ctx"?}`.
            ValidationError,
            /// Every other error body: `{"detail": "<message>"}` (404, 405, 413, 415,
            /// agent-specific 422, 500, 503).
            ErrorDetail,
        }

        /// How many wire types publish a schema.
        const WIRE_COUNT: usize = [$(Schema::$ty),*].len();

        impl Schema {
            /// The wire types, in the reference's declaration order (top-down).
            pub const WIRE_TYPES: [Schema; WIRE_COUNT] = [$(Schema::$ty),*];

            /// The schema's name: the type's name, or FastAPI's name for its error
            /// bodies (`HTTPValidationError`, `ValidationError`), or `ErrorDetail`.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Schema::$ty => stringify!($ty),)*
                    Schema::HttpValidationError => "HTTPValidationError",
                    Schema::ValidationError => "ValidationError",
                    Schema::ErrorDetail => "ErrorDetail",
                }
            }

            /// The schemas this one refers to with `$ref`, directly.
            const fn references(self) -> &'static [Schema] {
                match self {
                    $(Schema::$ty => &[$(Schema::$r),*],)*
                    Schema::HttpValidationError => &[Schema::ValidationError],
                    Schema::ValidationError | Schema::ErrorDetail => &[],
                }
            }

            /// This schema's object; other schemas are referred to as `{p}{name}`.
            fn body(self, p: &str) -> Object {
                let refs = Refs::new(p);
                match self {
                    $(Schema::$ty => <crate::$ty as HasSchema>::schema(&refs),)*
                    Schema::HttpValidationError => http_validation_error(self.name(), &refs),
                    Schema::ValidationError => validation_error(self.name()),
                    Schema::ErrorDetail => error_detail(self.name()),
                }
            }
        }
    };
}

wire_schemas! {
    AgentRequest ", the body of `POST /v1/responses`." refers [AgentInput];
    AgentInput "." refers [AgentInstruction];
    AgentInstruction "." refers [];
    ToolCall "." refers [];
    AgentDecision "." refers [ToolCall];
    AgentError "." refers [];
    AgentOutput ", one candidate." refers [AgentDecision, AgentError];
    AgentResponse ", the body of a 200 answer to `POST /v1/responses`." refers [AgentOutput];
    AgentHealth ", the body of `GET /health` when ready." refers [];
    AgentInfo ", the body of `GET /v1/info`." refers [];
    InternalStep ", one record of a candidate's `internal_steps`." refers [];
    CoachingStage "." refers [];
    CoachingError "." refers [];
    CoachingDiagnosis "." refers [];
    CoachingStep ", one step of a coaching trajectory." refers [AgentInput, AgentDecision, AgentError];
    ReinjectionPoint "." refers [AgentInput];
    CoachingBackendConfig "." refers [];
    CoachingSessionConfig ", the body of `PUT /v1/coaching/sessions/{run_id}`." refers [CoachingBackendConfig];
    CoachingLog "." refers [];
    SpecializedCoachingRequest ", the body of `POST /v1/coaching`." refers [CoachingStage, CoachingError, CoachingDiagnosis, CoachingStep, ReinjectionPoint];
    CoachingProposal "." refers [];
    SpecializedCoachingResponse ", the body of a 200 answer to `POST /v1/coaching`." refers [CoachingLog, CoachingProposal];
    ReplaceSay ", the `replace_say` payload of `extra_keys.coaching`." refers [];
}

impl Schema {
    /// The error bodies.
    pub const ERROR_BODIES: [Schema; 3] = [
        Schema::HttpValidationError,
        Schema::ValidationError,
        Schema::ErrorDetail,
    ];

    /// Every schema: the wire types, then the error bodies.
    pub const ALL: [Schema; WIRE_COUNT + 3] = {
        let mut all = [Schema::ErrorDetail; WIRE_COUNT + 3];
        let mut i = 0;
        while i < all.len() {
            all[i] = if i < Self::WIRE_TYPES.len() {
                Self::WIRE_TYPES[i]
            } else {
                Self::ERROR_BODIES[i - Self::WIRE_TYPES.len()]
            };
            i += 1;
        }
        all
    };

    /// A self-contained schema document: `$schema`, this schema, and every
    /// schema it refers to (directly or not) under `$defs`, in [`Schema::ALL`]
    /// order, referred to as `#/$defs/<name>`.
    pub fn document(self) -> Json {
        let mut doc = Object::new();
        doc.insert("$schema", Json::from(DIALECT));
        for (key, value) in self.body(DEFS) {
            doc.insert(key, value);
        }
        let mut needed = Vec::new();
        let mut todo = self.references().to_vec();
        while let Some(s) = todo.pop() {
            if !needed.contains(&s) {
                needed.push(s);
                todo.extend_from_slice(s.references());
            }
        }
        if !needed.is_empty() {
            let mut defs = Object::new();
            for s in Schema::ALL.into_iter().filter(|s| needed.contains(s)) {
                defs.insert(s.name(), Json::Object(s.body(DEFS)));
            }
            doc.insert("$defs", Json::Object(defs));
        }
        Json::Object(doc)
    }

    /// This schema alone, without `$schema`; other schemas are referred to
    /// as `{ref_prefix}{name}`, e.g. `#/components/schemas/AgentInput`.
    pub fn definition(self, ref_prefix: &str) -> Json {
        Json::Object(self.body(ref_prefix))
    }
}

/// The 422 body of FastAPI for an invalid request body.
fn http_validation_error(name: &str, refs: &Refs<'_>) -> Object {
    open_object(
        name,
        "422 body for a request body that is not JSON or not a valid AgentRequest, in \
         FastAPI's shape: one entry per problem.",
        vec![(
            "detail",
            S::ty("array")
                .set("items", refs.to("ValidationError"))
                .doc("The problems, in the order pydantic reports them."),
        )],
        &["detail"],
    )
}

/// One entry of the 422 body.
fn validation_error(name: &str) -> Object {
    open_object(
        name,
        "One problem with a request body, as pydantic reports it.",
        vec![
            (
                "type",
                S::ty("string")
                    .doc("pydantic's error type, e.g. `missing`, `int_type`, `json_invalid`."),
            ),
            (
                "loc",
                S::ty("array")
                    .set(
                        "items",
                        S::new().set("type", strings(&["string", "integer"])),
                    )
                    .doc(
                        "Where: `\"body\"`, then keys and indices; for malformed JSON, \
                         `\"body\"` and the character offset.",
                    ),
            ),
            ("msg", S::ty("string").doc("A message for humans.")),
            (
                "input",
                S::new().doc(
                    "The offending value (`null` for a missing body, `{}` for \
                     malformed JSON); magma-server and current FastAPI always send it.",
                ),
            ),
            (
                "ctx",
                S::ty("object").doc("Facts about the rule, e.g. `{\"min_length\": 1}`."),
            ),
        ],
        &["type", "loc", "msg"],
    )
}

/// Every other error body: `{"detail": "..."}`.
fn error_detail(name: &str) -> Object {
    open_object(
        name,
        "Every other error body, as FastAPI's `HTTPException` sends it: 404 unknown \
         path, 405 wrong method, 413 body too large, 415 not JSON, 422 agent-specific \
         rejection, 500 bug in the agent, 503 not ready.",
        vec![("detail", S::ty("string").doc("What went wrong."))],
        &["detail"],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{AgentHealth, AgentInfo, AgentRequest, AgentResponse};

    fn object_of(v: &Json) -> &Object {
        v.as_object().expect("an object")
    }

    /// The value at `path` (object keys), which must exist.
    fn g<'a>(v: &'a Json, path: &[&str]) -> &'a Json {
        path.iter().fold(v, |v, key| {
            v.get(key).unwrap_or_else(|| panic!("no {key} in {v}"))
        })
    }

    /// The names listed in `required`, if any.
    fn required_of(def: &Json) -> Vec<&str> {
        def.get("required")
            .and_then(Json::as_array)
            .unwrap_or_default()
            .iter()
            .filter_map(Json::as_str)
            .collect()
    }

    /// Every `$ref` under `v`, as written.
    fn refs(v: &Json, out: &mut Vec<String>) {
        match v {
            Json::Object(o) => {
                for (k, v) in o.iter() {
                    match (k, v) {
                        ("$ref", Json::String(r)) => out.push(r.clone()),
                        _ => refs(v, out),
                    }
                }
            }
            Json::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }

    #[test]
    fn names_are_unique_and_lists_agree() {
        let mut names: Vec<_> = Schema::ALL.iter().map(|s| s.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Schema::ALL.len());
        let joined: Vec<_> = Schema::WIRE_TYPES
            .iter()
            .chain(&Schema::ERROR_BODIES)
            .collect();
        assert_eq!(joined, Schema::ALL.iter().collect::<Vec<_>>());
    }

    #[test]
    fn references_list_exactly_the_refs_used() {
        for s in Schema::ALL {
            let mut found = Vec::new();
            refs(&s.definition("#/x/"), &mut found);
            found.sort();
            found.dedup();
            let mut declared: Vec<_> = s
                .references()
                .iter()
                .map(|r| format!("#/x/{}", r.name()))
                .collect();
            declared.sort();
            assert_eq!(found, declared, "{}", s.name());
        }
    }

    #[test]
    fn documents_are_self_contained() {
        for s in Schema::ALL {
            let doc = s.document();
            assert_eq!(g(&doc, &["$schema"]).as_str(), Some(DIALECT));
            assert_eq!(g(&doc, &["title"]).as_str(), Some(s.name()));
            let mut found = Vec::new();
            refs(&doc, &mut found);
            for r in found {
                let name = r
                    .strip_prefix(DEFS)
                    .unwrap_or_else(|| panic!("{r} is not local"));
                let def = g(&doc, &["$defs"])
                    .get(name)
                    .unwrap_or_else(|| panic!("{}: {r} dangles", s.name()));
                let target = Schema::ALL
                    .into_iter()
                    .find(|t| t.name() == name)
                    .expect("known");
                assert_eq!(*def, target.definition(DEFS), "{}: $defs/{name}", s.name());
            }
        }
        assert!(Schema::AgentHealth.document().get("$defs").is_none());
        let defs = g(&Schema::AgentResponse.document(), &["$defs"])
            .as_object()
            .map(|d| d.keys().map(str::to_owned).collect::<Vec<_>>());
        assert_eq!(
            defs.as_deref(),
            Some(&["ToolCall", "AgentDecision", "AgentError", "AgentOutput"].map(String::from)[..])
        );
    }

    #[test]
    fn wire_types_are_closed_and_required_fields_exist() {
        for s in Schema::WIRE_TYPES {
            let def = s.definition(DEFS);
            let Some(props) = def.get("properties") else {
                assert_eq!(s, Schema::AgentResponse);
                continue;
            };
            assert_eq!(
                *g(&def, &["additionalProperties"]),
                Json::Bool(false),
                "{}",
                s.name()
            );
            for r in required_of(&def) {
                assert!(
                    props.get(r).is_some(),
                    "{}: required {r} is not a property",
                    s.name()
                );
                assert!(
                    props.get(r).and_then(|p| p.get("default")).is_none(),
                    "{}: required {r} has a default",
                    s.name()
                );
            }
        }
    }

    /// A minimal valid document, where in it an object of `schema` sits, and
    /// how to check a variant of the document with the Rust parser.
    type Accepts = fn(&str) -> bool;

    fn request_ok(s: &str) -> bool {
        AgentRequest::from_slice(s.as_bytes()).is_ok()
    }
    fn response_ok(s: &str) -> bool {
        AgentResponse::from_slice(s.as_bytes()).is_ok()
    }
    fn info_ok(s: &str) -> bool {
        AgentInfo::from_slice(s.as_bytes()).is_ok()
    }
    fn health_ok(s: &str) -> bool {
        AgentHealth::from_slice(s.as_bytes()).is_ok()
    }

    const REQUEST: &str =
        r#"{"request_id":"r","inputs":[{"id":0,"instruction":{"type":"user","content":""}}]}"#;
    const COMPLETED: &str = concat!(
        r#"[{"request_id":"r","source_id":0,"candidate_index":0,"status":"completed","memory":{},"#,
        r#""output":{"tool_calls":[{"name":"n","target_robot_name":"t"}]}}]"#
    );
    const FAILED: &str = concat!(
        r#"[{"request_id":"r","source_id":0,"candidate_index":0,"status":"error","memory":{},"#,
        r#""error":{"code":"c","message":"m"}}]"#
    );
    const INFO: &str = r#"{"agent_id":"a","agent_version":"1","capabilities":{}}"#;

    /// (schema, minimal document, path of keys/indices to the object, parser).
    fn cases() -> Vec<(Schema, &'static str, Vec<Json>, Accepts)> {
        let k = |s: &str| Json::from(s);
        let i = |n: usize| Json::from(n);
        vec![
            (Schema::AgentRequest, REQUEST, vec![], request_ok),
            (
                Schema::AgentInput,
                REQUEST,
                vec![k("inputs"), i(0)],
                request_ok,
            ),
            (
                Schema::AgentInstruction,
                REQUEST,
                vec![k("inputs"), i(0), k("instruction")],
                request_ok,
            ),
            (Schema::AgentOutput, COMPLETED, vec![i(0)], response_ok),
            (Schema::AgentOutput, FAILED, vec![i(0)], response_ok),
            (
                Schema::AgentDecision,
                COMPLETED,
                vec![i(0), k("output")],
                response_ok,
            ),
            (
                Schema::ToolCall,
                COMPLETED,
                vec![i(0), k("output"), k("tool_calls"), i(0)],
                response_ok,
            ),
            (
                Schema::AgentError,
                FAILED,
                vec![i(0), k("error")],
                response_ok,
            ),
            (Schema::AgentInfo, INFO, vec![], info_ok),
            (Schema::AgentHealth, "{}", vec![], health_ok),
        ]
    }

    fn at<'a>(doc: &'a mut Json, path: &[Json]) -> &'a mut Object {
        let mut v = doc;
        for seg in path {
            v = match (v, seg) {
                (Json::Object(o), Json::String(key)) => o.get_mut(key).expect("key"),
                (Json::Array(a), Json::Number(n)) => {
                    &mut a[usize::try_from(n.as_u64().expect("index")).expect("index")]
                }
                _ => panic!("bad path"),
            };
        }
        v.as_object_mut().expect("an object")
    }

    /// The Rust parser agrees with `required` and with `additionalProperties:
    /// false`, and fills in exactly the schema's defaults.
    #[test]
    fn required_defaults_and_closedness_match_the_parser() {
        for (s, minimal, path, accepts) in cases() {
            let def = s.definition(DEFS);
            let props = object_of(g(&def, &["properties"]));
            let required = required_of(&def);
            let doc: Json = minimal.parse().expect("json");
            assert!(accepts(minimal), "{minimal}");

            // What the parser fills in shows when the parsed value is written back.
            let written = match s {
                Schema::AgentInfo => AgentInfo::from_slice(minimal.as_bytes())
                    .expect("valid")
                    .to_json_string(),
                Schema::AgentHealth => AgentHealth::from_slice(minimal.as_bytes())
                    .expect("valid")
                    .to_json_string(),
                _ if minimal.starts_with('[') => AgentResponse::from_slice(minimal.as_bytes())
                    .expect("valid")
                    .to_json_string(),
                _ => AgentRequest::from_slice(minimal.as_bytes())
                    .expect("valid")
                    .to_json_string(),
            };
            let mut written: Json = written.parse().expect("json");
            let filled = at(&mut written, &path).clone();
            assert_eq!(
                filled.keys().collect::<Vec<_>>(),
                props.keys().collect::<Vec<_>>(),
                "{}: written fields are the schema's properties, in order",
                s.name()
            );

            for (name, prop) in props.iter() {
                let mut without = doc.clone();
                let present = at(&mut without, &path).remove(name).is_some();
                if required.contains(&name) {
                    assert!(
                        present,
                        "{}: required {name} missing from {minimal}",
                        s.name()
                    );
                    assert!(
                        !accepts(&without.to_json_string()),
                        "{}: {name} is required",
                        s.name()
                    );
                } else {
                    let default = prop.get("default");
                    // `output`/`error` are optional with default null, but the
                    // oneOf makes one of them necessary for a given status.
                    if present && matches!(name, "output" | "error") {
                        continue;
                    }
                    assert!(
                        accepts(&without.to_json_string()),
                        "{}: {name} is optional",
                        s.name()
                    );
                    let expected =
                        default.unwrap_or_else(|| panic!("{}: {name} has no default", s.name()));
                    if !present {
                        assert_eq!(
                            filled.get(name),
                            Some(expected),
                            "{}: default of {name}",
                            s.name()
                        );
                    }
                }
            }

            let mut extra = doc.clone();
            at(&mut extra, &path).insert("zzz", Json::Null);
            assert!(
                !accepts(&extra.to_json_string()),
                "{}: unknown keys are refused",
                s.name()
            );
        }
    }

    #[test]
    fn one_of_matches_the_status_rule() {
        let def = Schema::AgentOutput.definition(DEFS);
        let branches = g(&def, &["oneOf"]).as_array().expect("oneOf");
        assert_eq!(branches.len(), 2);
        // completed + error set, or error + output set, are refused by the parser.
        let both = COMPLETED.replace(
            r#""memory":{},"#,
            r#""memory":{},"error":{"code":"c","message":"m"},"#,
        );
        assert!(!response_ok(&both));
        let nulls = FAILED.replace(r#""memory":{},"#, r#""memory":{},"output":null,"#);
        assert!(response_ok(&nulls));
    }

    /// The 422 bodies this crate renders fit `HTTPValidationError`.
    #[test]
    fn fastapi_bodies_fit_the_validation_error_schema() {
        let item = Schema::ValidationError.definition(DEFS);
        let props = object_of(g(&item, &["properties"]));
        for body in [
            r#"{"request_id":"","inputs":[{"id":1.0,"zzz":0}]}"#,
            "{\"request_id\":",
        ] {
            let err = AgentRequest::from_slice(body.as_bytes()).expect_err("invalid");
            let rendered = err.to_fastapi_body();
            let detail = g(&rendered, &["detail"]).as_array().expect("a list");
            assert!(!detail.is_empty());
            for entry in detail {
                let entry = object_of(entry);
                for key in entry.keys() {
                    assert!(props.contains_key(key), "{key} is not in ValidationError");
                }
                for key in required_of(&item) {
                    assert!(entry.contains_key(key), "{key} is required");
                }
                let loc = entry.get("loc").and_then(Json::as_array).expect("loc");
                assert!(
                    loc.iter()
                        .all(|s| matches!(s, Json::String(_)) || s.as_i64().is_some())
                );
            }
        }
    }

    #[test]
    fn bounds_are_the_rust_types() {
        let input = Schema::AgentInput.definition(DEFS);
        assert_eq!(
            g(&input, &["properties", "id", "minimum"]).as_i64(),
            Some(i64::MIN)
        );
        assert_eq!(
            g(&input, &["properties", "id", "maximum"]).as_i64(),
            Some(i64::MAX)
        );
        let max = g(&input, &["properties", "num_outputs", "maximum"])
            .as_number()
            .map(|n| n.as_u64());
        assert_eq!(max, Some(Some(u64::MAX)));
        let at_bound = REQUEST.replace(r#""id":0"#, &format!(r#""id":{}"#, i64::MIN));
        assert!(request_ok(&at_bound));
        let beyond = REQUEST.replace(r#""id":0"#, r#""id":9223372036854775808"#);
        assert!(!request_ok(&beyond));
    }
}
