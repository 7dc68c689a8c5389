//! The requests the probe sends, shaped like BENCH's and GEN's.

use std::num::NonZeroU64;

use magma_protocol::{AgentInput, AgentInstruction, AgentRequest, Json, Object, json};

/// The robot the probe's scenarios know.
pub(crate) const ROBOT: &str = "panda";
/// The second robot.
pub(crate) const ROBOT2: &str = "rover";

fn object(v: Json) -> Object {
    match v {
        Json::Object(o) => o,
        // The callers pass object literals only.
        _ => Object::new(),
    }
}

fn outputs(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).unwrap_or(NonZeroU64::MIN)
}

/// The skill API BENCH and GEN send: `cancel_current_action` first, then
/// skills in the `arguments` shape with MAGMA type names.
pub(crate) fn tools() -> Vec<Object> {
    vec![
        object(json!({
            "name": "cancel_current_action",
            "description": "Cancel the current action running on the targeted robot.",
            "arguments": {}
        })),
        object(json!({
            "name": "press_button",
            "description": "Press a button.",
            "arguments": {"id": {"description": "Button name.", "type": "str"}}
        })),
        object(json!({
            "name": "navigate_to",
            "description": "Drive the robot to a named location.",
            "arguments": {
                "location": {"description": "Name of the target location", "type": "str"},
                "speed": {"description": "Speed in m/s", "type": "float"}
            }
        })),
    ]
}

/// Scenario attributes with `known_robots` and `robot_statuses`.
pub(crate) fn attributes() -> Object {
    object(json!({
        "objects": ["sw0", "sw1"],
        "known_robots": [ROBOT, ROBOT2],
        "robot_statuses": {"panda": "FREE", "rover": "RUNNING navigate_to(location=dock)"}
    }))
}

/// A scenario's initial memory, with `history: []` as BENCH inserts it.
pub(crate) fn initial_memory() -> Object {
    object(json!({
        "memory_list": [
            "Always confirm completion to the user.",
            "Never press sw1."
        ],
        "history": []
    }))
}

pub(crate) fn user(id: i64, content: &str) -> AgentInput {
    AgentInput::new(id, AgentInstruction::user(content))
}

/// An input as BENCH sends it: tools, attributes, memory, one output,
/// `inference_mode: true`.
pub(crate) fn bench_input(id: i64, instruction: AgentInstruction, memory: Object) -> AgentInput {
    let mut input = AgentInput::new(id, instruction);
    input.tools = tools();
    input.attributes = attributes();
    input.memory = memory;
    input.extra_keys = object(json!({"inference_mode": true}));
    input
}

/// An input as GEN sends it: like BENCH's, with `num_outputs` branches and
/// no `inference_mode`.
pub(crate) fn gen_input(id: i64, content: &str, branches: u64) -> AgentInput {
    let mut input = AgentInput::new(id, AgentInstruction::user(content));
    input.tools = tools();
    input.attributes = attributes();
    input.memory = initial_memory();
    input.num_outputs = outputs(branches);
    input
}

/// An `env` instruction's content as the consumers encode it: the status
/// object as a JSON string (Python `json.dumps`, spaced separators).
pub(crate) fn env_status(robot: &str, tool: &str, arguments: &Object) -> String {
    let args = Json::Object(arguments.clone()).to_json_string();
    format!(
        "{{\"infos\": \"{robot}: {tool} succeed with message: done\", \
         \"previous_tool_call\": {{\"{robot}\": {{\"name\": \"{tool}\", \"arguments\": {args}}}}}}}"
    )
}

/// The docs' ordering example: input 7 asks 2 candidates, input 3 asks 1.
pub(crate) fn ordering(request_id: &str) -> Option<AgentRequest> {
    let mut a = user(7, "Say hello.");
    a.num_outputs = outputs(2);
    let b = user(3, "Say goodbye.");
    AgentRequest::new(request_id, vec![a, b]).ok()
}

/// About `bytes` bytes of filler, for a memory's `probe_bulk` key.
pub(crate) fn bulk(bytes: usize) -> Json {
    let chunk = "0123456789abcdef".repeat(64); // 1 KiB
    let n = (bytes / chunk.len()).max(1);
    Json::Array(vec![Json::String(chunk); n])
}

/// A request with a memory of about `bytes` bytes.
pub(crate) fn large(request_id: &str, bytes: usize) -> Option<AgentRequest> {
    let mut memory = initial_memory();
    memory.insert("probe_bulk", bulk(bytes));
    let input = bench_input(0, AgentInstruction::user("Press sw0."), memory);
    AgentRequest::new(request_id, vec![input]).ok()
}

/// Escapes every non-ASCII character as `\uXXXX` (surrogate pairs above
/// U+FFFF), as Python's `json.dumps` does by default. Non-ASCII appears
/// only inside strings, so the result is the same document.
pub(crate) fn ascii_escaped(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{u:04x}"));
            }
        }
    }
    out
}

/// Invalid request bodies, each with the name of its check and what is
/// wrong. Every one must be answered with a 4xx (422 expected).
pub(crate) fn invalid_bodies() -> Vec<(&'static str, &'static str, String)> {
    let input = r#"{"id": 0, "instruction": {"type": "user", "content": "Press sw0."}}"#;
    let with_input = |i: &str| format!(r#"{{"request_id": "probe-invalid", "inputs": [{i}]}}"#);
    vec![
        (
            "not-json",
            "a body cut short (not JSON)",
            r#"{"request_id": "probe-invalid", "inputs": [{"id": 0"#.to_owned(),
        ),
        (
            "nan",
            "NaN in memory (not JSON)",
            with_input(
                r#"{"id": 0, "instruction": {"type": "user", "content": "x"}, "memory": {"score": NaN}}"#,
            ),
        ),
        (
            "string-id",
            "input id \"7\" (a string)",
            with_input(r#"{"id": "7", "instruction": {"type": "user", "content": "x"}}"#),
        ),
        (
            "float-id",
            "input id 7.0 (a float)",
            with_input(r#"{"id": 7.0, "instruction": {"type": "user", "content": "x"}}"#),
        ),
        (
            "unknown-field",
            "an unknown top-level field",
            format!(r#"{{"request_id": "probe-invalid", "inputs": [{input}], "session": "s1"}}"#),
        ),
        (
            "missing-inputs",
            "no inputs field",
            r#"{"request_id": "probe-invalid"}"#.to_owned(),
        ),
        (
            "empty-request-id",
            "an empty request_id",
            format!(r#"{{"request_id": "", "inputs": [{input}]}}"#),
        ),
        (
            "duplicate-ids",
            "two inputs with id 0",
            format!(r#"{{"request_id": "probe-invalid", "inputs": [{input}, {input}]}}"#),
        ),
        (
            "zero-outputs",
            "num_outputs 0",
            with_input(
                r#"{"id": 0, "instruction": {"type": "user", "content": "x"}, "num_outputs": 0}"#,
            ),
        ),
        (
            "bad-instruction-type",
            "instruction type \"system\"",
            with_input(r#"{"id": 0, "instruction": {"type": "system", "content": "x"}}"#),
        ),
        (
            "array-body",
            "a JSON array instead of an object",
            format!("[{input}]"),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_requests_are_valid_and_invalid_ones_are_invalid() {
        let valid = [
            ordering("r").unwrap(),
            large("r", 4096).unwrap(),
            AgentRequest::new(
                "r",
                vec![
                    gen_input(0, "x", 3),
                    bench_input(
                        1,
                        AgentInstruction::env(env_status(
                            "panda",
                            "press_button",
                            &object(json!({"id": "sw0"})),
                        )),
                        initial_memory(),
                    ),
                ],
            )
            .unwrap(),
        ];
        for r in valid {
            let text = r.to_json_string();
            AgentRequest::from_slice(text.as_bytes()).unwrap();
            AgentRequest::from_slice(ascii_escaped(&text).as_bytes()).unwrap();
        }
        for (name, _, body) in invalid_bodies() {
            assert!(
                AgentRequest::from_slice(body.as_bytes()).is_err(),
                "{name} should be invalid"
            );
        }
        let status = env_status("panda", "press_button", &object(json!({"id": "sw0"})));
        let fb = magma_protocol::EnvFeedback::parse(&status).unwrap();
        assert_eq!(fb.outcomes()[0].tool, "press_button");
    }

    #[test]
    fn escaping_matches_python() {
        assert_eq!(ascii_escaped("é🤖"), "\\u00e9\\ud83e\\udd16");
    }
}
