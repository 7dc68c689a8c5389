//! `ToolDescription::from_object` and `parameters_schema` on arbitrary JSON.
//!
//! The input is a JSON document: an object is one tool, an array a list of tools.
//! Invariants: no panic; the schema is an object of type `object`; a schema built
//! from parameters lists each parameter once in `properties`, and `required` only
//! names listed parameters; the OpenAI function tool, serialized and parsed back,
//! reads back as the same name, description and parameters (names, JSON types,
//! required flags).
#![no_main]

use libfuzzer_sys::fuzz_target;
use magma_protocol::Json;
use magma_protocol::tools::ToolDescription;

fn check(tool: &magma_protocol::Object) {
    let Ok(desc) = ToolDescription::from_object(tool) else {
        return;
    };
    assert!(!desc.name.is_empty(), "a tool without a name was read");
    let schema = desc.parameters_schema();
    if desc.schema.is_none() {
        assert_eq!(schema.get("type").and_then(Json::as_str), Some("object"));
        let props = schema
            .get("properties")
            .and_then(Json::as_object)
            .expect("properties");
        assert_eq!(
            props.len(),
            desc.parameters.len(),
            "parameters lost or repeated"
        );
        for p in &desc.parameters {
            assert!(props.contains_key(&p.name));
        }
        let required = schema
            .get("required")
            .and_then(Json::as_array)
            .expect("required");
        for r in required {
            let name = r.as_str().expect("a required entry that is not a string");
            assert!(
                props.contains_key(name),
                "required names an unknown parameter"
            );
        }
    } else {
        assert_eq!(Some(&schema), desc.schema.as_ref());
    }
    let function = desc.to_function_tool();
    let text = function.to_json_string();
    let reparsed = Json::from_slice(text.as_bytes())
        .unwrap_or_else(|e| panic!("function tool does not parse: {e}\n{text}"));
    assert_eq!(reparsed, function, "function tool changed through its text");
    let Json::Object(obj) = &reparsed else {
        panic!("function tool is not an object")
    };
    let back = ToolDescription::from_object(obj)
        .unwrap_or_else(|e| panic!("function tool does not read back: {e}\n{text}"));
    assert_eq!(back.name, desc.name);
    assert_eq!(back.description, desc.description);
    let shape = |d: &ToolDescription| {
        d.parameters
            .iter()
            .map(|p| (p.name.clone(), p.json_type, p.required))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        shape(&back),
        shape(&desc),
        "parameters changed through the function tool\n{text}"
    );
}

fuzz_target!(|data: &[u8]| {
    match Json::from_slice(data) {
        Ok(Json::Object(tool)) => check(&tool),
        Ok(Json::Array(tools)) => {
            for tool in tools.iter().filter_map(Json::as_object) {
                check(tool);
            }
        }
        _ => {}
    }
});
