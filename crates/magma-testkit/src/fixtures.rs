//! Fixtures shared across crates: the BENCH-like request bodies and a
//! GEN-sized coaching body (the protocol's benchmarks and parsing-path
//! tests, `cargo xtask bench`), the deviation families from the reference
//! (`docs/conformance.md`) and where the public corpora are.

use std::path::PathBuf;

/// A BENCH-like request: `inputs` environments with tools, attributes and a
/// growing history in memory, about `inputs * 11.6` KB (52 inputs: 0.6 MB).
pub fn bench_like_request(inputs: usize) -> String {
    let mut out = String::from(r#"{"request_id":"0f8fad5bd9cb469fa16570867728950e","inputs":["#);
    for i in 0..inputs {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&bench_like_input(i));
    }
    out.push_str("]}");
    out
}

/// One input of [`bench_like_request`] (about 11.6 KB): tools, attributes
/// and a 40-step history in memory.
pub fn bench_like_input(i: usize) -> String {
    let tools = r#"[{"name":"cancel_current_action","description":"Cancel the current action running on the targeted robot.","arguments":{}},{"name":"press_button","description":"Press a button.","arguments":{"id":{"description":"Button name.","type":"str"}}},{"name":"move_to","description":"Move the base to a position in the map frame.","arguments":{"x":{"description":"Target x in metres","type":"float"},"y":{"description":"Target y in metres","type":"float"},"speed":{"description":"Optional speed","type":"float"}}},{"name":"pick","description":"Pick an object.","arguments":{"object_id":{"description":"Identifier","type":"str"},"force":{"description":"Grip force in newtons","type":"float"}}}]"#;
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
    format!(
        r#"{{"id":{i},"instruction":{{"type":"env","content":"{{\"infos\": \"panda: press_button succeed with message: sw{i} is now pressed\", \"previous_tool_call\": {{\"panda\": {{\"name\": \"press_button\", \"arguments\": {{\"id\": \"sw{i}\"}}}}}}}}"}},"tools":{tools},"attributes":{{"objects":["sw0","sw1","cube_red","shelf"],"known_robots":["panda","ur5e"],"robot_statuses":{{"panda":"FREE","ur5e":"RUNNING move_to(x=1.5, y=-2.0)"}},"location":{{"x":-9.491,"y":0.828,"frame":"map"}}}},"memory":{{"memory_list":["Always confirm completion to the user.","Never move two robots at once."],"history":[{history}]}},"num_outputs":1,"extra_keys":{{"inference_mode":true}}}}"#
    )
}

/// A GEN-sized `POST /v1/coaching` body: `steps` trajectory steps, each
/// with a [`bench_like_input`], GEN's decision, an internal step and
/// GEN's `execution` record, the target the last step, a `replacement`
/// point at it and a `recovery` point with an explicit input; every field
/// present, explicit nulls included, as GEN sends it (50 steps: 0.63 MB).
pub fn gen_like_coaching_request(steps: usize) -> String {
    gen_like_coaching_body(steps, StepParts::Gen)
}

/// [`gen_like_coaching_request`] with every step's `output` `null` (a step
/// whose agent decided nothing) and nothing else changed: what the steps'
/// decisions cost a parser is the difference between the two
/// (`cargo bench -p magma-rs-protocol --bench parse_ratio -- --coaching
/// without-decisions`).
pub fn gen_like_coaching_request_without_decisions(steps: usize) -> String {
    gen_like_coaching_body(steps, StepParts::WithoutDecisions)
}

/// What each step of [`gen_like_coaching_body`] holds beside its `id` and
/// its input. The bodies differ only in the steps, so the differences
/// between their parses say what each part of a step costs where it is
/// read, between GEN-sized inputs (`parse_ratio -- --parts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepParts {
    /// As GEN sends them: its decision, `error: null`, an internal step,
    /// its `execution` record ([`gen_like_coaching_request`]).
    Gen,
    /// [`StepParts::Gen`] with `output: null`.
    WithoutDecisions,
    /// GEN's decision and `error: null`, with `internal_steps: []` and
    /// `execution: {}`.
    DecisionsOnly,
    /// `output: null`, `error: null`, `internal_steps: []`, `execution: {}`.
    Bare,
    /// Only `id` and `input`.
    Minimal,
}

impl StepParts {
    /// Every value, in the order of the variants.
    pub const ALL: [StepParts; 5] = [
        StepParts::Gen,
        StepParts::WithoutDecisions,
        StepParts::DecisionsOnly,
        StepParts::Bare,
        StepParts::Minimal,
    ];
}

/// [`gen_like_coaching_request`] with steps holding `parts`: the same
/// header, inputs and reinjection points.
pub fn gen_like_coaching_body(steps: usize, parts: StepParts) -> String {
    use std::fmt::Write;
    let mut out = String::from(
        r#"{"run_id":"2026-02-22_20-02-08_handover","request_id":"ae5c812fe2994fc1abb51d18b559e8ca","kind":"failure","stage":{"id":2,"goal":"Hand the green sponge over to stretch.","hint":null},"active_errors":[{"code":"environment","description":"panda: move_to failed: path blocked","details":{"robot":"panda","attempts":2}}],"diagnosis":{"explanation":"The robot moved before the gripper was free.","expected_decision":"Release the cube, then move."},"target_step_id":"#,
    );
    let _ = write!(out, "{}", steps - 1);
    out.push_str(r#","trajectory":["#);
    for i in 0..steps {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, r#"{{"id":{i},"input":{}"#, bench_like_input(i));
        let output = match parts {
            StepParts::Gen | StepParts::DecisionsOnly => GEN_DECISION,
            StepParts::WithoutDecisions | StepParts::Bare => NO_DECISION,
            StepParts::Minimal => {
                out.push('}');
                continue;
            }
        };
        let _ = write!(out, r#",{output},"error":null,"#);
        if matches!(parts, StepParts::Gen | StepParts::WithoutDecisions) {
            let _ = write!(
                out,
                r#""internal_steps":[{{"id":"llm-{i}","component":"planner","origin":"model","full_prompt":"You control two robots. Answer with JSON: say and action.","input_elements":{{"turn":{i}}},"output_raw":"{{\"say\": \"\", \"action\": {{\"panda\": {{\"name\": \"move_to\", \"arguments\": {{\"x\": 1.25, \"y\": -0.5}}}}}}}}"}}],"execution":{{"diagnosable":true,"execution_results":[{{"robot":"panda","tool":"move_to","result":"FAILURE","error_flag":true,"message":"path blocked"}}],"input_type":"FEEDBACK","input_content":"panda: press_button succeed","answer":"","answer_data":{{"say":"","action":{{"panda":{{"name":"move_to"}}}}}}}}}}"#
            );
        } else {
            out.push_str(r#""internal_steps":[],"execution":{}}"#);
        }
    }
    let _ = write!(
        out,
        r#"],"reinjection_points":[{{"id":"replacement","input_step_id":{},"input":null}},{{"id":"recovery","input_step_id":null,"input":{}}}],"additional_info":{{"node_id":{},"delay_ms":0}}}}"#,
        steps - 1,
        bench_like_input(steps),
        steps - 1
    );
    out
}

/// The decision every step of [`gen_like_coaching_request`] records.
const GEN_DECISION: &str = r#""output":{"say":"","tool_calls":[{"name":"move_to","arguments":{"x":1.25,"y":-0.5},"target_robot_name":"panda"}]}"#;

/// A step's `output` when its agent decided nothing.
const NO_DECISION: &str = r#""output":null"#;

/// A coaching request that is mostly decisions: `steps` steps, each with
/// the smallest input there is (a user instruction `"Hi"`), no internal
/// steps, an empty `execution` and GEN's decision, or `output: null` when
/// `decisions` is false. The two bodies differ only in the decisions, so
/// what one decision costs a parser is the difference of their parses over
/// `steps` (`parse_ratio -- --decisions`); with little else around them, a change to a decision's cost shows at
/// once (1,000 steps: 253 kB with decisions, 153 kB without).
pub fn decision_dense_coaching_request(steps: usize, decisions: bool) -> String {
    use std::fmt::Write;
    let output = if decisions { GEN_DECISION } else { NO_DECISION };
    let mut out = String::from(
        r#"{"run_id":"r","request_id":"q","kind":"failure","stage":{"id":1,"goal":"g","hint":null},"active_errors":[],"diagnosis":null,"target_step_id":0,"trajectory":["#,
    );
    for i in 0..steps {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            r#"{{"id":{i},"input":{{"id":{i},"instruction":{{"type":"user","content":"Hi"}},"num_outputs":1}},{output},"error":null,"internal_steps":[],"execution":{{}}}}"#
        );
    }
    out.push_str(
        r#"],"reinjection_points":[{"id":"p","input_step_id":0,"input":null}],"additional_info":{}}"#,
    );
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
    // The coaching corpus (`coaching-public.jsonl`), for the same reasons.
    "coaching.dup.key.shadow_*",
    "coaching.str.lone_surrogate*",
    "coaching.int.beyond_i64",
    "coaching.int.beyond_u64",
    "coaching.int.huge",
    "coaching.ref.big_ids",
    "coaching.int.digit_limit",
];

/// Whether `family` is one of [`DEVIATIONS`].
pub fn is_deviation(family: &str) -> bool {
    DEVIATIONS.iter().any(|d| match d.strip_suffix('*') {
        Some(prefix) => family.starts_with(prefix),
        None => family == *d,
    })
}

/// The coaching corpus of reference verdicts, `coaching-public.jsonl`:
/// `$MAGMA_COACHING_CORPUS`, else beside `$MAGMA_PUBLIC_CORPUS` (then it must
/// exist in either case: CI sets the latter and checks both), else
/// `shared/conformance/coaching-public.jsonl` beside the repository, else
/// `None`, after a line on standard error saying what is skipped.
pub fn coaching_corpus(manifest_dir: &str) -> Option<PathBuf> {
    let required = if let Some(p) = std::env::var_os("MAGMA_COACHING_CORPUS") {
        Some(PathBuf::from(p))
    } else {
        std::env::var_os("MAGMA_PUBLIC_CORPUS").map(|p| {
            let p = PathBuf::from(p);
            if p.is_dir() {
                p.join("coaching-public.jsonl")
            } else {
                p.with_file_name("coaching-public.jsonl")
            }
        })
    };
    if let Some(p) = required {
        assert!(
            p.is_file(),
            "{} is not a file: set MAGMA_COACHING_CORPUS to coaching-public.jsonl",
            p.display()
        );
        return Some(p);
    }
    let p = PathBuf::from(manifest_dir).join("../../../shared/conformance/coaching-public.jsonl");
    found_or_skipped(p, "coaching corpus", "MAGMA_COACHING_CORPUS")
}

/// The public corpus of reference verdicts: `$MAGMA_PUBLIC_CORPUS` (then it
/// must exist), else `shared/conformance/public.jsonl` beside the repository,
/// else `None`, after a line on standard error saying what is skipped.
/// `MAGMA_PUBLIC_CORPUS` may also name the folder holding `public.jsonl`.
/// `manifest_dir` is the calling crate's `CARGO_MANIFEST_DIR`.
pub fn public_corpus(manifest_dir: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MAGMA_PUBLIC_CORPUS") {
        let p = PathBuf::from(p);
        let p = if p.is_dir() {
            p.join("public.jsonl")
        } else {
            p
        };
        assert!(
            p.is_file(),
            "MAGMA_PUBLIC_CORPUS: {} is not a file",
            p.display()
        );
        return Some(p);
    }
    let p = PathBuf::from(manifest_dir).join("../../../shared/conformance/public.jsonl");
    found_or_skipped(p, "public corpus", "MAGMA_PUBLIC_CORPUS")
}

/// `Some(path)` if `path` is a file; else says on standard error that the checks of
/// `what` are skipped, and how to run them.
#[allow(
    clippy::print_stderr,
    reason = "the note is for whoever reads the test output"
)]
fn found_or_skipped(path: PathBuf, what: &str, variable: &str) -> Option<PathBuf> {
    if path.is_file() {
        return Some(path);
    }
    // CI never passes a test that checked nothing.
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true and the {what} is not at {}: set {variable} to it",
        path.display()
    );
    eprintln!("SKIPPED, nothing checked against the {what}: not found; set {variable} to check it");
    None
}

/// `[c0,c1,...]`: valid `completed` candidates (empty memory, `say: "hi"`)
/// of input `source_id` of request `request_id`, indices 0, 1, ..., in a
/// body of at most `bytes` bytes and at least `bytes - 200`; and how many.
/// What a hostile agent answers to make a client build millions of
/// candidates.
pub fn many_candidates(request_id: &str, source_id: u64, bytes: usize) -> (Vec<u8>, usize) {
    let mut doc = Vec::with_capacity(bytes);
    doc.push(b'[');
    let mut n = 0;
    loop {
        let c = format!(
            r#"{{"request_id":"{request_id}","source_id":{source_id},"candidate_index":{n},"status":"completed","memory":{{}},"output":{{"say":"hi"}}}}"#
        );
        if doc.len() + c.len() + 2 > bytes {
            break;
        }
        if n > 0 {
            doc.push(b',');
        }
        doc.extend_from_slice(c.as_bytes());
        n += 1;
    }
    doc.push(b']');
    assert!(doc.len() <= bytes && doc.len() + 200 >= bytes);
    (doc, n)
}
