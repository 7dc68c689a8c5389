//! Reading tool descriptions in the shapes MAGMA sends, and turning them into
//! JSON Schema for model providers.
//!
//! The consumers send `{"name", "description", "arguments": {p: {"description",
//! "type"}}}` with MAGMA type names (`str int float bool list dict`); the docs
//! show `"parameters"` in place of `"arguments"`, with an optional
//! `"optional": [names]`; scenario files may already hold a JSON Schema
//! (`{"type": "object", "properties": ...}`), and some tools come in the
//! OpenAI shape `{"type": "function", "function": {...}}`. All are read here.

use crate::json::{Json, Object};
use crate::model::AgentInput;

/// A tool description, whatever shape it came in.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDescription {
    /// The tool's name.
    pub name: String,
    /// What it does (empty if absent).
    pub description: String,
    /// The parameters, in order.
    pub parameters: Vec<ToolParameter>,
    /// The parameters' JSON Schema, when the tool gave one directly.
    pub schema: Option<Object>,
}

/// One parameter of a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolParameter {
    /// Its name.
    pub name: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// Its JSON Schema type name (`string`, `integer`, `number`, `boolean`,
    /// `array`, `object`), mapped from MAGMA's Python type names.
    pub json_type: &'static str,
    /// The type as written, if any (`str`, `int`, ...).
    pub declared_type: Option<String>,
    /// `false` when listed in `optional` (or absent from a schema's `required`).
    pub required: bool,
}

/// Why a tool object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No non-empty string `name` (nor `function.name`).
    #[error("tool has no name")]
    NoName,
    /// `arguments`/`parameters` is neither an object of parameters nor a schema.
    #[error("tool {0:?}: parameters are not an object")]
    BadParameters(String),
}

/// Maps a MAGMA / Python type name to a JSON Schema type; unknown names give
/// `string`, as the reference agents do.
pub fn json_type_of(declared: &str) -> &'static str {
    match declared.trim().to_ascii_lowercase().as_str() {
        "str" | "string" => "string",
        "int" | "integer" => "integer",
        "float" | "double" | "number" => "number",
        "bool" | "boolean" => "boolean",
        "list" | "array" | "tuple" => "array",
        "dict" | "object" => "object",
        _ => "string",
    }
}

impl ToolDescription {
    /// Reads one entry of an input's `tools`.
    pub fn from_object(mut tool: &Object) -> Result<ToolDescription, ToolError> {
        // OpenAI shape: {"type": "function", "function": {...}}; unwrapped in
        // a loop, so no nesting can exhaust the stack.
        while let Some(Json::Object(inner)) = tool.get("function") {
            tool = inner;
        }
        let name = match tool.get("name") {
            Some(Json::String(s)) if !s.is_empty() => s.clone(),
            _ => return Err(ToolError::NoName),
        };
        let description = tool
            .get("description")
            .and_then(Json::as_str)
            .unwrap_or("")
            .to_owned();
        let optional: Vec<&str> = tool
            .get("optional")
            .and_then(Json::as_array)
            .map(|a| a.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default();
        let params = tool.get("arguments").or_else(|| tool.get("parameters"));
        let (parameters, schema) = match params {
            None | Some(Json::Null) => (Vec::new(), None),
            Some(Json::Object(p)) if is_schema(p) => (params_of_schema(p), Some(p.clone())),
            Some(Json::Object(p)) => (params_of_magma(p, &optional), None),
            Some(_) => return Err(ToolError::BadParameters(name)),
        };
        Ok(ToolDescription {
            name,
            description,
            parameters,
            schema,
        })
    }

    /// The parameters as a JSON Schema object: the schema given, or
    /// `{"type": "object", "properties": {...}, "required": [...]}`.
    pub fn parameters_schema(&self) -> Object {
        if let Some(s) = &self.schema {
            return s.clone();
        }
        let mut properties = Object::new();
        for p in &self.parameters {
            let mut prop = Object::new();
            prop.insert("type", Json::from(p.json_type));
            if let Some(d) = &p.description {
                prop.insert("description", Json::from(d.as_str()));
            }
            properties.insert(p.name.clone(), Json::Object(prop));
        }
        let required = self
            .parameters
            .iter()
            .filter(|p| p.required)
            .map(|p| Json::from(p.name.as_str()))
            .collect();
        let mut schema = Object::new();
        schema.insert("type", Json::from("object"));
        schema.insert("properties", Json::Object(properties));
        schema.insert("required", Json::Array(required));
        schema
    }

    /// The OpenAI-style function tool:
    /// `{"type": "function", "function": {"name", "description", "parameters"}}`.
    pub fn to_function_tool(&self) -> Json {
        let mut function = Object::new();
        function.insert("name", Json::from(self.name.as_str()));
        function.insert("description", Json::from(self.description.as_str()));
        function.insert("parameters", Json::Object(self.parameters_schema()));
        let mut tool = Object::new();
        tool.insert("type", Json::from("function"));
        tool.insert("function", Json::Object(function));
        Json::Object(tool)
    }
}

fn is_schema(p: &Object) -> bool {
    p.get("type").and_then(Json::as_str) == Some("object")
        && p.get("properties").is_none_or(|v| v.as_object().is_some())
}

fn params_of_schema(schema: &Object) -> Vec<ToolParameter> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Json::as_object) else {
        return Vec::new();
    };
    props
        .iter()
        .map(|(name, spec)| {
            let declared = spec.get("type").and_then(Json::as_str);
            ToolParameter {
                name: name.to_owned(),
                description: spec
                    .get("description")
                    .and_then(Json::as_str)
                    .map(str::to_owned),
                json_type: declared.map_or("string", json_type_of),
                declared_type: declared.map(str::to_owned),
                required: required.contains(&name),
            }
        })
        .collect()
}

fn params_of_magma(params: &Object, optional: &[&str]) -> Vec<ToolParameter> {
    params
        .iter()
        .map(|(name, spec)| {
            let (declared, description) = match spec {
                Json::Object(o) => (
                    o.get("type").and_then(Json::as_str).map(str::to_owned),
                    o.get("description")
                        .and_then(Json::as_str)
                        .map(str::to_owned),
                ),
                // `{"x": "float"}`: the type alone.
                Json::String(t) => (Some(t.clone()), None),
                _ => (None, None),
            };
            ToolParameter {
                name: name.to_owned(),
                description,
                json_type: declared.as_deref().map_or("string", json_type_of),
                declared_type: declared,
                required: !optional.contains(&name),
            }
        })
        .collect()
}

impl AgentInput {
    /// The input's tools that could be read, in order (unreadable entries
    /// are skipped; use [`ToolDescription::from_object`] to see why).
    pub fn tool_descriptions(&self) -> Vec<ToolDescription> {
        self.tools
            .iter()
            .filter_map(|t| ToolDescription::from_object(t).ok())
            .collect()
    }

    /// The tool names, in order.
    pub fn tool_names(&self) -> Vec<String> {
        self.tool_descriptions()
            .into_iter()
            .map(|t| t.name)
            .collect()
    }

    /// `attributes.known_robots`: the robot names a tool call may target.
    pub fn known_robots(&self) -> Vec<&str> {
        self.attributes
            .get("known_robots")
            .and_then(Json::as_array)
            .map(|a| a.iter().filter_map(Json::as_str).collect())
            .unwrap_or_default()
    }

    /// `memory.memory_list`: the persistent rules a scenario gives, if present.
    pub fn memory_list(&self) -> Option<&[Json]> {
        self.memory.get("memory_list").and_then(Json::as_array)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(text: &str) -> Object {
        match Json::from_slice(text.as_bytes()).unwrap() {
            Json::Object(o) => o,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn magma_arguments_shape() {
        let t = obj(
            r#"{"name":"press_button","description":"Press a button.","arguments":{"id":{"description":"Button name.","type":"str"},"force":{"type":"float"}}}"#,
        );
        let d = ToolDescription::from_object(&t).unwrap();
        assert_eq!(d.name, "press_button");
        assert_eq!(
            d.parameters.iter().map(|p| p.json_type).collect::<Vec<_>>(),
            ["string", "number"]
        );
        assert_eq!(
            Json::Object(d.parameters_schema()).to_json_string(),
            r#"{"type":"object","properties":{"id":{"type":"string","description":"Button name."},"force":{"type":"number"}},"required":["id","force"]}"#
        );
    }

    #[test]
    fn docs_parameters_shape_with_optional() {
        let t = obj(
            r#"{"name":"move","parameters":{"x":{"type":"int"},"speed":{"type":"weird"}},"optional":["speed"]}"#,
        );
        let d = ToolDescription::from_object(&t).unwrap();
        assert_eq!(d.parameters[1].json_type, "string");
        assert!(d.parameters[0].required && !d.parameters[1].required);
    }

    #[test]
    fn schema_and_openai_shapes() {
        let t = obj(
            r#"{"type":"function","function":{"name":"look_at","description":"Point.","parameters":{"type":"object","properties":{"target":{"type":"string"}},"required":["target"]}}}"#,
        );
        let d = ToolDescription::from_object(&t).unwrap();
        assert_eq!(d.name, "look_at");
        assert!(d.schema.is_some() && d.parameters[0].required);
        assert!(
            d.to_function_tool()
                .to_json_string()
                .contains(r#""required":["target"]"#)
        );
        assert_eq!(
            ToolDescription::from_object(&obj(r#"{"name":""}"#)),
            Err(ToolError::NoName)
        );
        assert!(matches!(
            ToolDescription::from_object(&obj(r#"{"name":"x","arguments":[1]}"#)),
            Err(ToolError::BadParameters(_))
        ));
        // Wrappers nested as deep as a document may be are unwrapped without recursion.
        let deep = format!(
            "{}{}{}",
            r#"{"function":"#.repeat(1400),
            r#"{"name":"deep"}"#,
            "}".repeat(1400)
        );
        let deep = obj(&deep);
        // (The value itself is dropped on this thread: dropping is recursive.)
        let (name, deep) = std::thread::Builder::new()
            .stack_size(64 * 1024)
            .spawn(move || (ToolDescription::from_object(&deep).map(|d| d.name), deep))
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(name.unwrap(), "deep");
        drop(deep);
        let cancel = ToolDescription::from_object(&obj(
            r#"{"name":"cancel_current_action","arguments":{}}"#,
        ))
        .unwrap();
        assert!(cancel.parameters.is_empty());
    }
}
