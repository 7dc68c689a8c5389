//! Fixtures shared across crates: the BENCH-like request bodies (the
//! protocol's benchmarks and parsing-path tests, `cargo xtask bench`, the
//! bench crate), the deviation families from the reference
//! (`docs/conformance.md`) and where the public corpus is.

use std::path::PathBuf;

/// A BENCH-like request: `inputs` environments with tools, attributes and a
/// growing history in memory, about `inputs * 11.6` KB (52 inputs: 0.6 MB).
pub fn bench_like_request(inputs: usize) -> String {
    let tools = r#"[{"name":"cancel_current_action","description":"Cancel the current action running on the targeted robot.","arguments":{}},{"name":"press_button","description":"Press a button.","arguments":{"id":{"description":"Button name.","type":"str"}}},{"name":"move_to","description":"Move the base to a position in the map frame.","arguments":{"x":{"description":"Target x in metres","type":"float"},"y":{"description":"Target y in metres","type":"float"},"speed":{"description":"Optional speed","type":"float"}}},{"name":"pick","description":"Pick an object.","arguments":{"object_id":{"description":"Identifier","type":"str"},"force":{"description":"Grip force in newtons","type":"float"}}}]"#;
    let mut out = String::from(r#"{"request_id":"0f8fad5bd9cb469fa16570867728950e","inputs":["#);
    for i in 0..inputs {
        if i > 0 {
            out.push(',');
        }
        let mut history = String::new();
        for step in 0..40 {
            if step > 0 {
                history.push(',');
            }
            history.push_str(&format!(
                r#"{{"author":"USER","content":"Put the red cube {step} on the shelf, then report back.","t":{}.{:03}}},{{"author":"MODEL","content":"{{\"say\": \"\", \"action\": {{\"panda\": {{\"name\": \"move_to\", \"arguments\": {{\"x\": {}.25, \"y\": -{}.5}}}}}}}}","score":0.{:04}}}"#,
                1_712_000_000 + step * 7,
                step * 37 % 1000,
                step % 9,
                step % 4,
                (step * 7919) % 10_000,
            ));
        }
        out.push_str(&format!(
            r#"{{"id":{i},"instruction":{{"type":"env","content":"{{\"infos\": \"panda: press_button succeed with message: sw{i} is now pressed\", \"previous_tool_call\": {{\"panda\": {{\"name\": \"press_button\", \"arguments\": {{\"id\": \"sw{i}\"}}}}}}}}"}},"tools":{tools},"attributes":{{"objects":["sw0","sw1","cube_red","shelf"],"known_robots":["panda","ur5e"],"robot_statuses":{{"panda":"FREE","ur5e":"RUNNING move_to(x=1.5, y=-2.0)"}},"location":{{"x":-9.491,"y":0.828,"frame":"map"}}}},"memory":{{"memory_list":["Always confirm completion to the user.","Never move two robots at once."],"history":[{history}]}},"num_outputs":1,"extra_keys":{{"inference_mode":true}}}}"#
        ));
    }
    out.push_str("]}");
    out
}

/// The body `cargo xtask bench` posts to the servers: a BENCH-like request of
/// `inputs` env inputs (the skill API as BENCH sends it, robots, a short
/// history); 8 inputs make 6676 bytes.
pub fn http_body(inputs: usize) -> String {
    use std::fmt::Write;
    let tools = r#"[{"name":"cancel_current_action","description":"Cancel the current action running on the targeted robot.","arguments":{}},{"name":"press_button","description":"Press a button.","arguments":{"id":{"description":"Button name.","type":"str"}}},{"name":"move_to","description":"Move the base to a position in the map frame.","arguments":{"x":{"description":"Target x in metres","type":"float"},"y":{"description":"Target y in metres","type":"float"}}}]"#;
    let mut out = String::from(r#"{"request_id":"7c9e6679742540de944be07fc1f90ae7","inputs":["#);
    for i in 0..inputs {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            r#"{{"id":{i},"instruction":{{"type":"env","content":"{{\"infos\": \"panda: press_button succeed\"}}"}},"tools":{tools},"attributes":{{"objects":["sw0","sw1","cube_red","shelf"],"known_robots":["panda"],"robot_statuses":{{"panda":"FREE"}}}},"memory":{{"memory_list":[],"history":[{{"author":"USER","content":"Press sw{i}."}},{{"author":"MODEL","content":"Pressing sw{i}."}}]}},"num_outputs":1,"extra_keys":{{}}}}"#
        );
    }
    out.push_str("]}");
    out
}

/// The smallest useful request: one `user` input (`cargo xtask bench`'s
/// tiny body).
pub const TINY_BODY: &str = r#"{"request_id":"r-1","inputs":[{"id":0,"instruction":{"type":"user","content":"Hello"},"num_outputs":1}]}"#;

/// The families where the project deliberately differs from the reference
/// (`docs/conformance.md`). Families are matched exactly or, when the entry
/// ends in `*`, by prefix.
pub const DEVIATIONS: &[&str] = &[
    "nonfinite.response_memory",
    "nonfinite.response_internal_steps",
    "nonfinite.exchange_response_memory",
    "dup.key.shadow_*",
    "str.lone_surrogate*",
    "int.beyond_i64",
    "int.beyond_u64",
    "int.huge",
    "dup.input_ids.big_distinct",
    "exchange.big_ids",
    "int.digit_limit",
];

/// Whether `family` is one of [`DEVIATIONS`].
pub fn is_deviation(family: &str) -> bool {
    DEVIATIONS.iter().any(|d| match d.strip_suffix('*') {
        Some(prefix) => family.starts_with(prefix),
        None => family == *d,
    })
}

/// The public corpus of reference verdicts: `$MAGMA_PUBLIC_CORPUS` (then it
/// must exist), else `shared/conformance/public.jsonl` beside the repository,
/// else `None`. `manifest_dir` is the calling crate's `CARGO_MANIFEST_DIR`.
pub fn public_corpus(manifest_dir: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MAGMA_PUBLIC_CORPUS") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "MAGMA_PUBLIC_CORPUS={} is not a file",
            p.display()
        );
        return Some(p);
    }
    let p = PathBuf::from(manifest_dir).join("../../../shared/conformance/public.jsonl");
    p.is_file().then_some(p)
}
