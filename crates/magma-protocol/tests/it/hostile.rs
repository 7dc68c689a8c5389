//! No input can crash the crate: extreme depth, huge strings, random bytes.

use magma_protocol::{
    AgentHealth, AgentInfo, AgentRequest, AgentResponse, ErrorKind, Json, MAX_JSON_DEPTH,
    validate_exchange,
};
use proptest::prelude::*;

fn all_parsers(bytes: &[u8]) {
    let _ = Json::from_slice(bytes);
    let _ = AgentRequest::from_slice(bytes);
    let _ = AgentResponse::from_slice(bytes);
    let _ = AgentInfo::from_slice(bytes);
    let _ = AgentHealth::from_slice(bytes);
    let _ = validate_exchange(bytes, bytes);
}

/// Runs `f` on a thread with a small stack, so a recursion that grows with
/// the input would overflow and abort the test binary.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(f)
        .expect("spawn")
        .join()
        .expect("no panic");
}

fn request_with_memory(value: &str) -> String {
    format!(
        r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":"x"}},"memory":{{"deep":{value}}}}}]}}"#
    )
}

#[test]
fn nesting_100_000_deep_is_refused_without_recursion() {
    on_small_stack(|| {
        for open in ["[", "{\"k\":"] {
            let doc = open.repeat(100_000);
            let err = AgentRequest::from_slice(doc.as_bytes()).unwrap_err();
            assert_eq!(err.first().kind(), ErrorKind::JsonInvalid);
            assert!(err.to_string().contains("depth"), "{err}");
            let err = AgentRequest::from_slice(request_with_memory(&doc).as_bytes()).unwrap_err();
            assert_eq!(err.first().kind(), ErrorKind::JsonInvalid);
            all_parsers(doc.as_bytes());
        }
    });
}

#[test]
fn depth_limits_match_the_reference() {
    // json.loads takes 1497 nested containers and refuses 1498.
    let ok = "[".repeat(MAX_JSON_DEPTH) + &"]".repeat(MAX_JSON_DEPTH);
    assert!(Json::from_slice(ok.as_bytes()).is_ok());
    let deeper = format!("[{ok}]");
    assert_eq!(
        Json::from_slice(deeper.as_bytes())
            .unwrap_err()
            .first()
            .kind(),
        ErrorKind::JsonInvalid
    );
    // A free-form value nests at most 254 containers below its key.
    let nest = |n: usize| "[".repeat(n) + "1" + &"]".repeat(n);
    assert!(AgentRequest::from_slice(request_with_memory(&nest(254)).as_bytes()).is_ok());
    let err = AgentRequest::from_slice(request_with_memory(&nest(255)).as_bytes()).unwrap_err();
    assert_eq!(err.first().kind(), ErrorKind::RecursionDepthExceeded);
    assert!(
        err.first()
            .location()
            .to_string()
            .starts_with("inputs[0].memory.deep[0][0]")
    );
}

#[test]
fn values_as_deep_as_the_parser_allows_are_safe_on_a_small_stack() {
    // Built by hand at the parser's limit: validation, errors, clone,
    // printing and drop all cope on a 256 KiB stack in an optimised build
    // and on the default 2 MiB stack in a debug build.
    let depth = MAX_JSON_DEPTH - 10;
    let run = move || {
        let doc = request_with_memory(&("[".repeat(depth) + &"]".repeat(depth)));
        let err = AgentRequest::from_slice(doc.as_bytes()).unwrap_err();
        assert_eq!(err.first().kind(), ErrorKind::RecursionDepthExceeded);
        let body = err.to_fastapi_body().to_json_string();
        assert!(body.contains("recursion_depth_exceeded"));
        let v = Json::from_slice(doc.as_bytes()).unwrap();
        let copy = v.clone();
        assert_eq!(copy.to_json_string().len(), doc.len());
        drop((v, copy));
    };
    let stack = if cfg!(debug_assertions) {
        2 * 1024 * 1024
    } else {
        256 * 1024
    };
    std::thread::Builder::new()
        .stack_size(stack)
        .spawn(run)
        .unwrap()
        .join()
        .unwrap();
}

#[test]
fn ten_megabyte_strings_are_fine() {
    let big = "é".repeat(5 * 1024 * 1024);
    let doc = format!(
        r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":"{big}"}}}}]}}"#
    );
    let req = AgentRequest::from_slice(doc.as_bytes()).unwrap();
    assert_eq!(req.inputs()[0].instruction.content.len(), big.len());
    // Escaped, and broken at the very end.
    let escaped = "\\u00e9\\n".repeat(1024 * 1024);
    let doc = format!(r#"{{"request_id":"{escaped}","inputs":[]}}"#);
    assert!(AgentRequest::from_slice(doc.as_bytes()).is_ok());
    let err = AgentRequest::from_slice(&doc.as_bytes()[..doc.len() - 1]).unwrap_err();
    assert!(err.is_syntax());
}

#[test]
fn syntax_errors_say_where() {
    let err =
        AgentRequest::from_slice(b"{\"request_id\": \"r\",\n  \"inputs\": [1,]}").unwrap_err();
    let p = err.first().position().expect("a position");
    assert_eq!((p.line, p.column), (2, 16));
    assert_eq!(err.first().kind(), ErrorKind::JsonInvalid);
    let body = err.to_fastapi_body().to_json_string();
    assert!(
        body.starts_with(
            r#"{"detail":[{"type":"json_invalid","loc":["body",35],"msg":"JSON decode error""#
        ),
        "{body}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        all_parsers(&bytes);
    }

    #[test]
    fn mangled_documents_never_panic(
        cut in 0usize..400, at in 0usize..400, byte in any::<u8>()
    ) {
        let doc = br#"{"request_id":"r","inputs":[{"id":7,"instruction":{"type":"env","content":"{\"infos\": \"ok\"}"},"tools":[{"name":"t","arguments":{}}],"memory":{"memory_list":[1.5,-0,"\u00e9"]},"num_outputs":2}]}"#;
        let mut v = doc.to_vec();
        if at < v.len() { v[at] = byte; }
        v.truncate(cut.min(v.len()).max(1));
        all_parsers(&v);
        let mut w = doc.to_vec();
        if at < w.len() { w[at] = byte; }
        all_parsers(&w);
    }
}

/// The error-list bomb: one problem per element of a long list. The first
/// `MAX_REPORTED_ERRORS` are kept exactly as reported, the rest only counted,
/// and the 422 body stays a small multiple of the cap, not of the request.
#[test]
fn error_lists_keep_the_first_problems_and_count_the_rest() {
    use magma_protocol::MAX_REPORTED_ERRORS;
    let n = 50_000;
    let zeros = vec!["0"; n].join(",");
    let request = format!(r#"{{"request_id":"e","inputs":[{zeros}]}}"#);
    let err = AgentRequest::from_slice(request.as_bytes()).unwrap_err();
    assert_eq!(err.issues().len(), MAX_REPORTED_ERRORS);
    assert_eq!(err.omitted(), n - MAX_REPORTED_ERRORS);
    for (i, issue) in err.issues().iter().enumerate() {
        assert_eq!(issue.kind(), ErrorKind::ModelType);
        assert_eq!(issue.location().to_string(), format!("inputs[{i}]"));
    }
    let body = err.to_fastapi_body();
    let detail = body.as_object().unwrap().get("detail").unwrap();
    assert_eq!(detail.as_array().unwrap().len(), MAX_REPORTED_ERRORS);
    let omitted = body.as_object().unwrap().get("omitted_errors").unwrap();
    assert_eq!(
        omitted.as_number().unwrap().as_u64(),
        Some((n - 100) as u64)
    );
    assert!(body.to_json_string().len() < 200 * MAX_REPORTED_ERRORS);
    assert!(
        err.to_string().contains("and 49900 more not listed"),
        "{err}"
    );

    // The same list in a response, as a hostile agent would answer.
    let response = format!("[{zeros}]");
    let err = AgentResponse::from_slice(response.as_bytes()).unwrap_err();
    assert_eq!(err.issues().len(), MAX_REPORTED_ERRORS);
    assert_eq!(err.omitted(), n - MAX_REPORTED_ERRORS);

    // At the cap exactly nothing is omitted and the body has no extra member.
    let zeros = vec!["0"; MAX_REPORTED_ERRORS].join(",");
    let err = AgentResponse::from_slice(format!("[{zeros}]").as_bytes()).unwrap_err();
    assert_eq!(
        (err.issues().len(), err.omitted()),
        (MAX_REPORTED_ERRORS, 0)
    );
    assert!(
        err.to_fastapi_body()
            .as_object()
            .unwrap()
            .get("omitted_errors")
            .is_none()
    );
}

/// Scalars past the cap where objects belong are counted by the parser, not
/// built: the errors, the kept ones and the count, are those of validating
/// the whole tree.
#[test]
fn counted_scalars_give_the_errors_of_the_whole_tree() {
    let objects = r#"{"id":1},{"request_id":"r"},"#;
    for doc in [
        format!("[{}{objects}0]", "0,".repeat(150)),
        format!("[{objects}{}null]", "\"s\",".repeat(99)),
        format!("[{}{objects}{}true]", "1.5,".repeat(100), "{},".repeat(3)),
        format!(
            r#"[{}{{"memory":[{}0]}}]"#,
            "0,".repeat(120),
            "0,".repeat(300)
        ),
    ] {
        let counted = AgentResponse::from_slice(doc.as_bytes()).unwrap_err();
        let whole =
            AgentResponse::from_json(Json::from_slice(doc.as_bytes()).unwrap()).unwrap_err();
        assert_eq!(counted.issues(), whole.issues(), "{doc:.80}");
        assert_eq!(counted.omitted(), whole.omitted(), "{doc:.80}");
        let request = format!(r#"{{"request_id":"r","inputs":{doc}}}"#);
        let counted = AgentRequest::from_slice(request.as_bytes()).unwrap_err();
        let whole =
            AgentRequest::from_json(Json::from_slice(request.as_bytes()).unwrap()).unwrap_err();
        assert_eq!(counted.issues(), whole.issues(), "{request:.80}");
        assert_eq!(counted.omitted(), whole.omitted(), "{request:.80}");
    }
}

/// Extra keys and non-boolean capability values are capped the same way.
#[test]
fn extra_key_bombs_are_capped_too() {
    let keys: Vec<String> = (0..5000).map(|i| format!(r#""k{i}":0"#)).collect();
    let doc = format!(r#"{{"request_id":"r","inputs":[],{}}}"#, keys.join(","));
    let err = AgentRequest::from_slice(doc.as_bytes()).unwrap_err();
    assert_eq!((err.issues().len(), err.omitted()), (100, 4900));
    assert_eq!(err.issues()[0].kind(), ErrorKind::ExtraForbidden);
}

/// `dict[str, str]` and `dict[str, bool]` values of the wrong type go
/// through the same cap: a million wrong header values cost 100 errors.
#[test]
fn wrong_values_in_string_and_boolean_maps_are_capped() {
    let n = 5000;
    let values: Vec<String> = (0..n).map(|i| format!(r#""h{i}":{i}"#)).collect();
    let config = format!(
        r#"{{"backends":{{"b":{{"type":"t","endpoint":"e","default_model":"m","headers":{{{}}}}}}}}}"#,
        values.join(",")
    );
    let err =
        magma_protocol::coaching::CoachingSessionConfig::from_slice(config.as_bytes()).unwrap_err();
    assert_eq!((err.issues().len(), err.omitted()), (100, n - 100));
    assert_eq!(err.issues()[0].kind(), ErrorKind::StringType);
    assert_eq!(
        err.issues()[99].location().to_string(),
        "backends.b.headers.h99"
    );

    let info = format!(
        r#"{{"agent_id":"a","agent_version":"1","capabilities":{{{}}}}}"#,
        values.join(",")
    );
    let err = AgentInfo::from_slice(info.as_bytes()).unwrap_err();
    assert_eq!((err.issues().len(), err.omitted()), (100, n - 100));
    assert_eq!(err.issues()[0].kind(), ErrorKind::BoolType);
}

/// `"k{from}":{from},...` up to `to`, without braces.
fn members(from: usize, to: usize) -> String {
    (from..to)
        .map(|i| format!(r#""k{i}":{i}"#))
        .collect::<Vec<_>>()
        .join(",")
}

/// The fields of a valid completed candidate, without braces.
const CANDIDATE: &str =
    r#""request_id":"r","source_id":1,"candidate_index":0,"status":"completed","memory":{}"#;

/// One object of thousands of distinct unknown keys in a strict model: the
/// parser builds the values of the first 100 and counts the distinct rest
/// (a repeat of a counted key counts once, escaped or not; a repeat of a
/// built one replaces its value), so the errors are those of the whole
/// tree. A `missing` error's input is the object as built: its declared
/// fields and first 100 unknown keys (the reference shows all of them).
#[test]
fn unknown_keys_past_the_cap_give_the_errors_of_the_whole_tree() {
    let docs = [
        format!(
            r#"[{{{CANDIDATE},"output":{{"say":"s"}},{}}}]"#,
            members(0, 5000)
        ),
        format!(
            r#"[{{{CANDIDATE},"output":{{"say":"s"}},{},"k3":"last","k4000":[1,{{"a":2}}],"k\u0034001":0,"k\u0033":[],{}}}]"#,
            members(0, 5000),
            members(4990, 5100)
        ),
        format!("[{{{}}}]", members(0, 300)),
        format!(
            r#"[{{{CANDIDATE},"output":{{"tool_calls":[{{"name":"n","target_robot_name":"t",{}}}],{}}}}},{{{}}}]"#,
            members(0, 150),
            members(0, 150),
            members(0, 150)
        ),
        format!(
            r#"[{{{CANDIDATE},"status":"error","error":{{"code":"c","message":"m",{}}}}}]"#,
            members(0, 400)
        ),
        // At the cap exactly, and one past it.
        format!("[{{{CANDIDATE},{}}}]", members(0, 100)),
        format!("[{{{CANDIDATE},{}}}]", members(0, 101)),
    ];
    for doc in &docs {
        let counted = AgentResponse::from_slice(doc.as_bytes()).unwrap_err();
        let whole =
            AgentResponse::from_json(Json::from_slice(doc.as_bytes()).unwrap()).unwrap_err();
        assert_eq!(counted.omitted(), whole.omitted(), "{doc:.120}");
        assert_eq!(counted.issues().len(), whole.issues().len(), "{doc:.120}");
        for (c, w) in counted.issues().iter().zip(whole.issues()) {
            assert_eq!(
                (c.kind(), c.location(), c.message()),
                (w.kind(), w.location(), w.message()),
                "{doc:.120}"
            );
            if c.kind() != ErrorKind::Missing {
                assert_eq!(c.input(), w.input(), "{doc:.120}");
            }
        }
    }
    // The kept key `k3` has its last value.
    let err = AgentResponse::from_slice(docs[1].as_bytes()).unwrap_err();
    let k3 = err
        .issues()
        .iter()
        .find(|i| i.location().to_string() == "[0].k3")
        .unwrap();
    assert_eq!(k3.input().unwrap().to_json_string(), "[]");
    assert_eq!(err.omitted(), 5100 - 100);
}

/// A value skipped past the cap is still read as the parser reads it: a
/// syntax error or a nesting too deep inside it is refused at the same
/// place with the same message.
#[test]
fn skipped_values_are_refused_like_built_ones() {
    let deep = "[".repeat(MAX_JSON_DEPTH) + &"]".repeat(MAX_JSON_DEPTH);
    for bad in [
        r#"[1,2,}"#.to_owned(),
        r#"{"a":1 "b":2}"#.to_owned(),
        r#"{"a":NaN,"b":-Infinity,"c":"\ud800"}"#.to_owned(),
        r#"{3:1}"#.to_owned(),
        r#""unterminated"#.to_owned(),
        deep,
    ] {
        let doc = format!(r#"[{{{CANDIDATE},{},"bad":{bad}}}]"#, members(0, 200));
        let counted = AgentResponse::from_slice(doc.as_bytes()).unwrap_err();
        let tree = Json::from_slice(doc.as_bytes()).unwrap_err();
        assert_eq!(counted.first().kind(), ErrorKind::JsonInvalid, "{bad:.40}");
        assert_eq!(
            counted.first().position(),
            tree.first().position(),
            "{bad:.40}"
        );
        assert_eq!(
            counted.first().message(),
            tree.first().message(),
            "{bad:.40}"
        );
    }
    // One level less is accepted, and counted as one unknown key.
    let ok = "[".repeat(MAX_JSON_DEPTH - 3) + &"]".repeat(MAX_JSON_DEPTH - 3);
    let doc = format!(r#"[{{{CANDIDATE},{},"bad":{ok}}}]"#, members(0, 200));
    let err = AgentResponse::from_slice(doc.as_bytes()).unwrap_err();
    assert_eq!((err.issues().len(), err.omitted()), (100, 101));
}

/// Every strict model of a response lists its declared fields for the
/// parser: an object of only declared keys past the cap is built whole
/// (no field counted as unknown) and validates.
#[test]
fn declared_fields_are_never_counted_as_unknown() {
    let doc = format!(
        r#"[{{{CANDIDATE},"internal_steps":[],"output":{{"say":"s","tool_calls":[{{"name":"n","arguments":{{}},"target_robot_name":"t"}}]}},"error":null}},{{{CANDIDATE},"status":"error","output":null,"error":{{"code":"c","message":"m","component":null}}}}]"#
    );
    assert!(AgentResponse::from_slice(doc.as_bytes()).is_ok());
}
