//! `check` and `exchange` through the real binary: every problem at once
//! with location and kind, lints as warnings that keep exit code 0, the
//! three formats, and usage errors.

use serde_json::Value;

use magma_testkit::TempDir;

use crate::support::{code, run, stderr, stdout};

fn json_report(args: &[&str], stdin: &[u8]) -> (i32, Value) {
    let mut all = args.to_vec();
    all.extend_from_slice(&["--format", "json"]);
    let out = run(&all, stdin);
    let report = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}{}", stdout(&out), stderr(&out)));
    (code(&out), report)
}

/// `(severity, code, location)` of every finding.
fn triples(report: &Value) -> Vec<(String, String, String)> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["severity"].as_str().unwrap().to_owned(),
                f["code"].as_str().unwrap().to_owned(),
                f["location"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn t(sev: &str, code: &str, loc: &str) -> (String, String, String) {
    (sev.to_owned(), code.to_owned(), loc.to_owned())
}

const BAD_REQUEST: &str = r#"{"request_id": "", "inputs": [
  {"id": 7.0, "instruction": {"type": "system", "content": "hi"}, "num_outputs": 0},
  {"id": "3", "instruction": {"type": "user"}, "memory": null, "tools": [1], "colour": "red"}
]}"#;

#[test]
fn every_problem_of_a_request_at_once() {
    let (exit, report) = json_report(&["check", "--kind", "request", "-"], BAD_REQUEST.as_bytes());
    assert_eq!(exit, 1);
    assert_eq!(
        triples(&report),
        [
            t("error", "string_too_short", "request_id"),
            t("error", "int_type", "inputs[0].id"),
            t("error", "literal_error", "inputs[0].instruction.type"),
            t("error", "greater_than", "inputs[0].num_outputs"),
            t("error", "int_type", "inputs[1].id"),
            t("error", "missing", "inputs[1].instruction.content"),
            t("error", "dict_type", "inputs[1].tools[0]"),
            t("error", "dict_type", "inputs[1].memory"),
            t("error", "extra_forbidden", "inputs[1].colour"),
        ]
    );
    assert_eq!(report["conformant"], false);
    assert_eq!(report["summary"]["errors"], 9);
    let first = &report["findings"][0];
    assert!(first["impact"].as_str().unwrap().contains("422"));
    assert!(!first["fix"].as_str().unwrap().is_empty());
    assert_eq!(report["findings"][1]["input"], "7.0");
}

#[test]
fn human_and_junit_list_every_problem_too() {
    let dir = TempDir::new("check");
    let file = dir.file("bad.json", BAD_REQUEST.as_bytes());
    let out = run(&["check", "--kind", "request", &file], b"");
    assert_eq!(code(&out), 1);
    let text = stdout(&out);
    assert!(text.contains("9 errors"), "{text}");
    assert!(
        text.contains(
            "error int_type at inputs[0].id: Input should be a valid integer (input: 7.0)"
        ),
        "{text}"
    );
    assert!(
        text.contains("consumers: BENCH and GEN never send such a request"),
        "{text}"
    );

    let out = run(
        &["check", "--kind", "request", "--format", "junit", &file],
        b"",
    );
    assert_eq!(code(&out), 1);
    let xml = stdout(&out);
    assert!(xml.contains("failures=\"1\""), "{xml}");
    assert!(xml.contains("extra_forbidden at inputs[1].colour"), "{xml}");
    assert!(!xml.contains("<system-out>"), "no warnings here: {xml}");
}

#[test]
fn json_syntax_errors_have_a_line_and_column() {
    let (exit, report) = json_report(
        &["check", "--kind", "health", "-"],
        b"{\n  \"status\": \"ready\",\n}",
    );
    assert_eq!(exit, 1);
    assert_eq!(
        triples(&report),
        [t("error", "json_invalid", "line 3 column 1")]
    );
}

#[test]
fn response_lints_warn_without_failing() {
    let response = r#"[
      {"request_id": "r", "source_id": 0, "candidate_index": 0, "status": "completed",
       "memory": {}, "output": {"say": "Pressing it.", "tool_calls": [
         {"name": "press_button", "arguments": {"id": "sw0"}, "target_robot_name": "panda"}]}},
      {"request_id": "r", "source_id": 0, "candidate_index": 1, "status": "completed",
       "memory": {}, "output": {"say": "", "tool_calls": []}}
    ]"#;
    let (exit, report) = json_report(&["check", "--kind", "response", "-"], response.as_bytes());
    assert_eq!(exit, 0, "{report:#}");
    assert_eq!(report["conformant"], true);
    assert_eq!(
        triples(&report),
        [
            t("warning", "say_with_tool_calls", "[0].output"),
            t("warning", "empty_decision", "[1].output"),
        ]
    );
    assert!(report["notes"][0].as_str().unwrap().contains("--request"));
}

#[test]
fn lints_that_need_the_request() {
    let dir = TempDir::new("lints");
    let request = dir.file(
        "request.json",
        br#"{"request_id": "r", "inputs": [{"id": 4,
            "instruction": {"type": "env", "content": "{\"infos\": \"panda: press_button succeed with message: ok\"}"},
            "tools": [{"name": "cancel_current_action", "arguments": {}},
                      {"name": "press_button", "arguments": {"id": {"type": "str"}}}],
            "attributes": {"known_robots": ["panda"]},
            "memory": {"memory_list": ["Never press sw1."], "history": []}}]}"#,
    );
    let response = dir.file(
        "response.json",
        br#"[{"request_id": "r", "source_id": 4, "candidate_index": 0, "status": "completed",
             "memory": {"history": []},
             "output": {"tool_calls": [
               {"name": "press_button", "arguments": {}, "target_robot_name": "panda"},
               {"name": "open_door", "arguments": {}, "target_robot_name": "rover"}]}}]"#,
    );
    let expected = [
        t("warning", "unknown_tool", "[0].output.tool_calls[1].name"),
        t(
            "warning",
            "unknown_robot",
            "[0].output.tool_calls[1].target_robot_name",
        ),
        t("warning", "memory_list_dropped", "[0].memory"),
    ];
    let (exit, report) = json_report(
        &[
            "check",
            "--kind",
            "response",
            "--request",
            &request,
            &response,
        ],
        b"",
    );
    assert_eq!(exit, 0, "{report:#}");
    assert_eq!(triples(&report), expected);
    let (exit, report) = json_report(
        &["exchange", "--request", &request, "--response", &response],
        b"",
    );
    assert_eq!(exit, 0, "{report:#}");
    assert_eq!(triples(&report), expected);
    let msg = report["findings"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("\"open_door\"") && msg.contains("\"press_button\""),
        "{msg}"
    );
    let impact = report["findings"][2]["impact"].as_str().unwrap();
    assert!(impact.contains("memory_list"), "{impact}");
}

#[test]
fn duplicate_keys_warn_at_any_level() {
    let (exit, report) = json_report(
        &["check", "--kind", "info", "-"],
        br#"{"agent_id": "a", "agent_version": "1", "agent_id": "b",
             "capabilities": {"inference": false, "inference": true}}"#,
    );
    assert_eq!(exit, 0);
    assert_eq!(
        triples(&report),
        [
            t("warning", "duplicate_key", "agent_id"),
            t("warning", "duplicate_key", "capabilities.inference"),
        ]
    );
}

#[test]
fn info_lints() {
    let (exit, report) = json_report(
        &["check", "--kind", "info", "-"],
        br#"{"protocol_version": "1.0", "agent_id": "a", "agent_version": "1", "capabilities": {"inference": false}}"#,
    );
    assert_eq!(exit, 0);
    assert_eq!(
        triples(&report),
        [
            t("warning", "protocol_version", "protocol_version"),
            t("warning", "inference_capability", "capabilities.inference"),
        ]
    );
    let (exit, report) = json_report(
        &["check", "--kind", "info", "-"],
        br#"{"agent_id": "a", "agent_version": "1", "capabilities": {}, "coaching_session_version": "1"}"#,
    );
    assert_eq!(exit, 1);
    // Lints are about valid documents: an invalid one gets its errors only.
    assert_eq!(
        triples(&report),
        [t("error", "extra_forbidden", "coaching_session_version")]
    );
}

#[test]
fn exchange_says_where_the_sequences_first_differ() {
    let dir = TempDir::new("exchange");
    let request = dir.file(
        "request.json",
        br#"{"request_id": "demo", "inputs": [
            {"id": 7, "instruction": {"type": "user", "content": "a"}, "num_outputs": 2},
            {"id": 3, "instruction": {"type": "user", "content": "b"}}]}"#,
    );
    let cand = |src: u32, k: u32| {
        format!(
            r#"{{"request_id": "demo", "source_id": {src}, "candidate_index": {k}, "status": "completed", "memory": {{}}, "output": {{"say": "x"}}}}"#
        )
    };
    let response = dir.file(
        "response.json",
        format!("[{}, {}, {}]", cand(7, 0), cand(3, 0), cand(7, 1)).as_bytes(),
    );
    let (exit, report) = json_report(
        &["exchange", "--request", &request, "--response", &response],
        b"",
    );
    assert_eq!(exit, 1);
    assert_eq!(triples(&report), [t("error", "candidates_mismatch", "[1]")]);
    let msg = report["findings"][0]["message"].as_str().unwrap();
    assert!(
        msg.contains("candidate 1 should be (request_id \"demo\", source_id 7, candidate_index 1), found (request_id \"demo\", source_id 3, candidate_index 0)"),
        "{msg}"
    );

    // An invalid request and an invalid response: both listed, each named.
    let bad_request = dir.file("bad-request.json", br#"{"inputs": []}"#);
    let bad_response = dir.file("bad-response.json", br#"[{"source_id": 1}]"#);
    let (exit, report) = json_report(
        &[
            "exchange",
            "--request",
            &bad_request,
            "--response",
            &bad_response,
        ],
        b"",
    );
    assert_eq!(exit, 1);
    let docs: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["document"].as_str().unwrap())
        .collect();
    assert_eq!(docs[0], "request");
    assert!(docs[1..].iter().all(|d| *d == "response"), "{docs:?}");
}

#[test]
fn usage_and_io_errors_exit_2() {
    for (args, needle) in [
        (
            &["check", "--kind", "request", "/nonexistent/file.json"][..],
            "cannot read",
        ),
        (&["check", "--kind", "bogus", "-"][..], "invalid value"),
        (&["check", "-"][..], "--kind"),
        (
            &["check", "--kind", "info", "--request", "-", "x.json"][..],
            "--kind response",
        ),
        (
            &["exchange", "--request", "-", "--response", "-"][..],
            "standard input",
        ),
        (&["frobnicate"][..], "unrecognized subcommand"),
    ] {
        let out = run(args, b"{}");
        assert_eq!(code(&out), 2, "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    let out = run(&["--help"], b"");
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("Exit status: 0 conformant"));
}

#[test]
fn hostile_documents_are_findings_not_crashes() {
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_obj = format!(
        r#"{{"request_id": "r", "inputs": [{{"id": 1, "instruction": {{"type": "user", "content": ""}}, "memory": {{"m": {}1{}}}}}]}}"#,
        r#"{"k": "#.repeat(3000),
        "}".repeat(3000)
    );
    for (kind, doc) in [
        ("request", deep.as_bytes()),
        ("response", deep.as_bytes()),
        ("request", deep_obj.as_bytes()),
        ("info", b"\xff\xfe{}"),
        ("health", b""),
    ] {
        let (exit, report) = json_report(&["check", "--kind", kind, "-"], doc);
        assert_eq!(exit, 1, "{kind}");
        assert!(report["summary"]["errors"].as_u64().unwrap() >= 1);
    }
}

/// The error-list bomb: `check` lists the first 100 problems as the
/// reference reports them and one finding that counts the rest.
#[test]
fn an_error_list_bomb_lists_the_first_hundred_and_counts_the_rest() {
    let zeros = vec!["0"; 20_000].join(",");
    let doc = format!(r#"{{"request_id":"e","inputs":[{zeros}]}}"#);
    let (exit, report) = json_report(&["check", "--kind", "request", "-"], doc.as_bytes());
    assert_eq!(exit, 1);
    let found = triples(&report);
    assert_eq!(found.len(), 101);
    assert_eq!(found[0], t("error", "model_type", "inputs[0]"));
    assert_eq!(found[99], t("error", "model_type", "inputs[99]"));
    assert_eq!(found[100], t("error", "too_many_errors", "(document)"));
    let last = report["findings"][100]["message"].as_str().unwrap();
    assert!(last.starts_with("19900 more problems"), "{last}");
}

const COACHING_REQUEST: &str = r#"{"run_id": "run-1", "request_id": "r1", "kind": "format",
  "stage": {"id": 0, "goal": "greet", "hint": null}, "active_errors": [], "diagnosis": null,
  "target_step_id": 3,
  "trajectory": [{"id": 3, "input": {"id": 0, "instruction": {"type": "user", "content": "hi"}},
                  "output": {"say": "", "tool_calls": []}, "error": null,
                  "internal_steps": [], "execution": {"diagnosable": true}}],
  "reinjection_points": [{"id": "replacement", "input_step_id": 3, "input": null}],
  "additional_info": {}}"#;

#[test]
fn every_problem_of_a_coaching_session_at_once() {
    let session = br#"{"backends": {"main": {"type": "openai", "endpoint": "http://x",
        "default_model": "m", "headers": {"a": null}, "timeout": "30", "max_retry": 1.0},
        "other": {"type": "openai"}}, "capture_logs": 1, "provider": "llm"}"#;
    for kind in ["coaching_session", "coaching-session"] {
        let (exit, report) = json_report(&["check", "--kind", kind, "-"], session);
        assert_eq!(exit, 1);
        assert_eq!(
            triples(&report),
            [
                t("error", "string_type", "backends.main.headers.a"),
                t("error", "float_type", "backends.main.timeout"),
                t("error", "int_type", "backends.main.max_retry"),
                t("error", "missing", "backends.other.endpoint"),
                t("error", "missing", "backends.other.default_model"),
                t("error", "bool_type", "capture_logs"),
                t("error", "extra_forbidden", "provider"),
            ]
        );
    }
    // Without backends, the model rule speaks (at the root).
    let (exit, report) = json_report(&["check", "--kind", "coaching_session", "-"], b"{}");
    assert_eq!(exit, 1);
    assert_eq!(triples(&report), [t("error", "value_error", "(root)")]);
    let msg = report["findings"][0]["message"].as_str().unwrap();
    assert_eq!(
        msg,
        "Value error, LLM coaching requires at least one backend"
    );
}

#[test]
fn coaching_documents_pass_check_when_valid() {
    let cases: [(&str, &[u8]); 5] = [
        ("coaching_request", COACHING_REQUEST.as_bytes()),
        (
            "coaching_response",
            br#"{"logs": [{"coaching_type": "format", "content": "ok"}], "request_id": "r1",
                "status": "abandoned", "proposals": [], "reason": " "}"#,
        ),
        (
            "coaching_session",
            br#"{"backends": {"a": {"type": "t", "endpoint": "e", "default_model": "m", "timeout": 30}}}"#,
        ),
        (
            "internal_step",
            br#"{"id": "1", "component": "c", "full_prompt": "p", "output_raw": "o"}"#,
        ),
        ("replace_say", br#"{"text": "Hello."}"#),
    ];
    for (kind, doc) in cases {
        let (exit, report) = json_report(&["check", "--kind", kind, "-"], doc);
        assert_eq!(exit, 0, "{kind}: {report}");
        assert_eq!(triples(&report), [], "{kind}");
    }
}

#[test]
fn a_wrapped_proposal_warns_and_full_historys_shape_is_silent() {
    // full-history's coach: the proposal's extra_keys is the payload itself.
    let full_history = br#"{"request_id": "r1", "status": "corrected", "proposals": [
        {"reinjection_point_id": "replacement", "extra_keys": {"kind": "replace_decision",
         "decision": {"say": "", "tool_calls": [{"name": "press_button", "arguments": {"id": "sw1"},
                                                 "target_robot_name": "panda"}]}}},
        {"reinjection_point_id": "recovery", "extra_keys": {"kind": "replace_say", "text": "Done."}}]}"#;
    let (exit, report) = json_report(&["check", "--kind", "coaching_response", "-"], full_history);
    assert_eq!((exit, triples(&report)), (0, vec![]), "{report:#}");

    let wrapped = br#"{"request_id": "r1", "status": "corrected", "proposals": [
        {"reinjection_point_id": "replacement",
         "extra_keys": {"coaching": {"kind": "replace_say", "text": "Done."}}},
        {"reinjection_point_id": "recovery", "extra_keys": {"text": "Done."}},
        {"reinjection_point_id": "other", "extra_keys": {"kind": "replace_decision",
         "decision": {"say": "Done.", "tool_calls": [{"name": "n", "target_robot_name": "r"}]}}},
        {"reinjection_point_id": "own", "extra_keys": {"kind": "retry_with_plan", "plan": 1}}]}"#;
    let (exit, report) = json_report(&["check", "--kind", "coaching_response", "-"], wrapped);
    assert_eq!(exit, 0, "lints are warnings: {report:#}");
    assert_eq!(
        triples(&report),
        [
            t("warning", "proposal_payload", "proposals[0].extra_keys"),
            t("warning", "proposal_payload", "proposals[1].extra_keys"),
            t("warning", "proposal_payload", "proposals[2].extra_keys"),
        ]
    );
    let messages: Vec<&str> = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["message"].as_str().unwrap())
        .collect();
    assert!(
        messages[0].contains("wraps its payload in a \"coaching\" key")
            && messages[0].contains(
                r#"GEN will send extra_keys.coaching = {"coaching": {"kind": "replace_say", "text": "Done."}}"#
            ),
        "{}",
        messages[0]
    );
    assert!(messages[1].contains("has no \"kind\""), "{}", messages[1]);
    assert!(
        messages[2].contains("exactly one of a non-empty say or tool calls"),
        "{}",
        messages[2]
    );
    assert!(
        report["findings"][0]["impact"]
            .as_str()
            .unwrap()
            .contains("_create_injected_node")
    );
}

#[test]
fn a_coaching_reply_is_checked_against_its_request() {
    let dir = TempDir::new("coaching-exchange");
    let request = dir.file("request.json", COACHING_REQUEST.as_bytes());
    let unknown_point = dir.file(
        "reply.json",
        br#"{"request_id": "r1", "status": "corrected",
            "proposals": [{"reinjection_point_id": "recovery", "extra_keys": {"kind": "replace_say", "text": "hi"}}]}"#,
    );
    let other_id = dir.file(
        "other.json",
        br#"{"request_id": "r2", "status": "error", "reason": "boom"}"#,
    );
    let good = dir.file(
        "good.json",
        br#"{"request_id": "r1", "status": "corrected",
            "proposals": [{"reinjection_point_id": "replacement", "extra_keys": {"kind": "replace_say", "text": "hi"}}]}"#,
    );
    let exchange = |reply: &str| {
        json_report(
            &[
                "exchange",
                "--coaching",
                "--request",
                &request,
                "--response",
                reply,
            ],
            b"",
        )
    };
    let (exit, report) = exchange(&unknown_point);
    assert_eq!(exit, 1);
    assert_eq!(
        triples(&report),
        [t(
            "error",
            "coaching_mismatch",
            "proposals[0].reinjection_point_id"
        )]
    );
    assert_eq!(
        report["findings"][0]["message"].as_str(),
        Some("Unknown reinjection point")
    );
    let (exit, report) = exchange(&other_id);
    assert_eq!(exit, 1);
    assert_eq!(
        triples(&report),
        [t("error", "coaching_mismatch", "request_id")]
    );
    let (exit, report) = exchange(&good);
    assert_eq!((exit, triples(&report)), (0, vec![]));
    // `check --kind coaching_response --request` is the same check.
    let (exit, report) = json_report(
        &[
            "check",
            "--kind",
            "coaching_response",
            "--request",
            &request,
            &unknown_point,
        ],
        b"",
    );
    assert_eq!(exit, 1);
    assert_eq!(report["findings"][0]["code"], "coaching_mismatch");
    // An invalid request is reported as such, with the request's own errors.
    let bad_request = dir.file(
        "bad-request.json",
        COACHING_REQUEST
            .replace("\"target_step_id\": 3", "\"target_step_id\": 4")
            .as_bytes(),
    );
    let (exit, report) = json_report(
        &[
            "exchange",
            "--coaching",
            "--request",
            &bad_request,
            "--response",
            &good,
        ],
        b"",
    );
    assert_eq!(exit, 1);
    assert_eq!(triples(&report), [t("error", "value_error", "(root)")]);
    assert_eq!(report["findings"][0]["document"], "coaching_request");
    assert!(
        report["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("Target step is absent from trajectory")
    );
}

#[test]
fn request_goes_with_response_kinds_only() {
    let out = run(
        &["check", "--kind", "coaching_session", "--request", "x", "-"],
        b"{}",
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("--request goes with"),
        "{}",
        stderr(&out)
    );
}

/// A trailing comma keeps the reference's words and location, and the
/// finding says it is a trailing comma (not a byte order mark or NaN) and
/// where the comma is, also when the bracket is on the next line.
#[test]
fn a_trailing_comma_is_named_as_such() {
    let doc = "{\"request_id\": \"r\", \"inputs\": [\n  {\"id\": 0, \"instruction\": {\"type\": \"user\", \"content\": \"hi\"}},\n]}";
    let out = run(&["check", "--kind", "request", "-"], doc.as_bytes());
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("json_invalid"), "{text}");
    assert!(
        text.contains(
            "a trailing comma: the ',' at line 2 column 62 is followed by ']', and JSON allows no comma before a closing bracket"
        ),
        "{text}"
    );
    assert!(
        text.contains("remove the ',' at line 2 column 62"),
        "{text}"
    );
    assert!(!text.contains("byte order mark"), "{text}");
    // On one line, before a `}`.
    let (_, report) = json_report(
        &["check", "--kind", "health", "-"],
        br#"{"status": "ready", }"#,
    );
    let finding = &report["findings"][0];
    assert!(
        finding["message"]
            .as_str()
            .unwrap()
            .contains("the ',' at line 1 column 19 is followed by '}'"),
        "{finding}"
    );
    // Another syntax error keeps the general fix.
    let (_, report) = json_report(&["check", "--kind", "health", "-"], br#"{"status": }"#);
    assert!(
        !report["findings"][0]["message"]
            .as_str()
            .unwrap()
            .contains("trailing comma"),
        "{report}"
    );
}
