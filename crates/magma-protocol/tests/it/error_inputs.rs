//! Values that are only an error's `input` (an undeclared key's array or
//! object in a strict model) are read as text, not built: the errors, their
//! inputs and the `422` text are still those of validating the whole tree.

use magma_protocol::{AgentRequest, AgentResponse, Error, Json, SpecializedCoachingRequest};
use proptest::prelude::*;

/// The fields of a valid completed candidate, without braces.
const CANDIDATE: &str =
    r#""request_id":"r","source_id":1,"candidate_index":0,"status":"completed","memory":{}"#;

/// Reads `doc` as `from_slice` does and as the tree validated whole; the
/// two errors must agree in every issue (inputs included) and in their
/// `422` texts, which both ways of writing give byte for byte.
fn same_as_the_whole_tree(
    doc: &str,
    read: impl Fn(&[u8]) -> Result<(), Error>,
    whole: impl Fn(Json) -> Result<(), Error>,
) -> Error {
    let counted = read(doc.as_bytes()).expect_err(doc);
    let tree = whole(Json::from_slice(doc.as_bytes()).expect("JSON")).expect_err(doc);
    assert_eq!(counted.omitted(), tree.omitted(), "{doc:.200}");
    assert_eq!(counted.issues().len(), tree.issues().len(), "{doc:.200}");
    for (c, w) in counted.issues().iter().zip(tree.issues()) {
        assert_eq!(
            (c.kind(), c.location(), c.message()),
            (w.kind(), w.location(), w.message()),
            "{doc:.200}"
        );
        assert_eq!(c.input_text(), w.input_text(), "{doc:.200}");
        assert_eq!(c.input(), w.input(), "{doc:.200}");
    }
    let text = counted.to_fastapi_string();
    assert_eq!(
        text,
        counted.to_fastapi_body().to_json_string(),
        "{doc:.200}"
    );
    assert_eq!(text, tree.to_fastapi_string(), "{doc:.200}");
    assert_eq!(text, tree.to_fastapi_body().to_json_string(), "{doc:.200}");
    counted
}

fn response(doc: &str) -> Error {
    same_as_the_whole_tree(
        doc,
        |b| AgentResponse::from_slice(b).map(drop),
        |v| AgentResponse::from_json(v).map(drop),
    )
}

fn request(doc: &str) -> Error {
    same_as_the_whole_tree(
        doc,
        |b| AgentRequest::from_slice(b).map(drop),
        |v| AgentRequest::from_json(v).map(drop),
    )
}

fn coaching_request(doc: &str) -> Error {
    same_as_the_whole_tree(
        doc,
        |b| SpecializedCoachingRequest::from_slice(b).map(drop),
        |v| SpecializedCoachingRequest::from_json(v).map(drop),
    )
}

#[test]
fn kept_values_give_the_errors_and_the_422_of_the_whole_tree() {
    let err = response(r#"[{"k":[0,0,0]}]"#);
    // Five `missing` errors echo the object, one `extra_forbidden` the value.
    assert_eq!(err.issues().len(), 6);
    assert_eq!(err.issues()[0].input_text().unwrap(), r#"{"k":[0,0,0]}"#);
    assert_eq!(err.issues()[5].input_text().unwrap(), "[0,0,0]");
    // Whitespace, escapes, numbers of every form, nesting.
    response(
        r#"[{"k": [ 1 , {"a" : "x\u0041\/\n\"\u001f" , "b":[ ] , "\u0063":{}}, -0, 1.5E3, 1e2,
            123456789012345678901234567890, true, false, null, "é\u00e9\ud83d\ude00", [[[]]] ] ,
            "j" : { "z" : { } } , "s": "plain" , "n": 7}]"#,
    );
    // A value the text would not give exactly (a repeated key here; a
    // non-finite number too, see the unit tests of `json/kept.rs`) is
    // small: built as a tree, as before.
    response(r#"[{"k":[{"a":1,"b":2,"a":3}]}]"#);
    // Repeated unknown keys: the last value wins, a container or not.
    response(r#"[{"k":[1],"k":2}]"#);
    response(r#"[{"k":2,"k":[1]}]"#);
    response(r#"[{"k":[1],"k":{"a":[2]},"m":{}}]"#);
    // Kept values in nested models, echoed inside their objects too.
    response(&format!(
        r#"[{{{CANDIDATE},"status":"error","error":{{"code":"c","k":[1,2]}}}}]"#
    ));
    response(&format!(
        r#"[{{"request_id":"r","output":{{"say":"s","x":{{"y":[1]}},"tool_calls":[{{"name":"n","q":[3]}}]}}}},{{{CANDIDATE},"k":[4]}}]"#
    ));
    // The request's models, at every level: the root's `missing` error
    // echoes the whole document with the texts of three levels in place.
    request(r#"{"request_id":"e","inputs":[{"k":[0,{"x":" y "}]}]}"#);
    request(
        r#"{"k":{"a":1},"inputs":[{"id":1,"instruction":{"type":"user","content":"c","q":[1]},"z":[2]},{"w":{"v":[]}}]}"#,
    );
    // An array or an object where a field is a scalar: refused whatever it
    // holds, kept as text too.
    response(
        r#"[{"request_id":[1,{"a":2}],"status":{"x":[]},"source_id":[],"output":{"say":{"s":[1]}}}]"#,
    );
    request(
        r#"{"request_id":{"a":[1]},"inputs":[{"id":[1],"num_outputs":{},"instruction":{"type":[2],"content":{"c":1}}}]}"#,
    );
    request(r#"{"request_id":[1],"request_id":"r","inputs":[{"id":1,"id":[2]}]}"#);
    coaching_request(r#"{"run_id":"r","k":[1],"stage":{"id":1,"x":[2]}}"#);
    coaching_request(r#"{"run_id":["r"],"kind":{"k":1},"stage":{"id":[1],"goal":{}}}"#);
    coaching_request(
        r#"{"run_id":"r","request_id":"q","kind":"failure","stage":{"id":1,"goal":"g"},"target_step_id":1,
            "trajectory":[{"id":1,"input":{"id":1,"k":[1]},"output":{"say":"s","x":[{}]},"q":{"r":1}}],
            "reinjection_points":[{"id":"p","z":[[1]]}],"active_errors":[{"code":"c","y":[0]}],
            "diagnosis":{"explanation":"e","w":[1]}}"#,
    );
}

/// Past [`EXACT_FALLBACK_BYTES`] (64 KiB), a value with a repeated key
/// inside is kept as written instead of built: its text keeps both
/// members, where the reference's dict keeps the last value at the first
/// place (the one difference, `docs/conformance.md`).
#[test]
fn a_large_value_with_a_repeated_key_is_kept_as_written() {
    let zeros = ",0".repeat(40_000);
    let doc = format!(r#"[{{"k":[{{"a":1, "a":2}}{zeros}]}}]"#);
    let err = AgentResponse::from_slice(doc.as_bytes()).unwrap_err();
    let extra = &err.issues()[5];
    assert_eq!(extra.location().to_string(), "[0].k");
    let text = extra.input_text().unwrap();
    assert!(text.starts_with(r#"[{"a":1,"a":2},0,0"#), "{text:.40}");
    assert_eq!(text.len(), 14 + 2 * 40_000 + 1);
    // Without the repeat, the same size is exact.
    response(&format!(r#"[{{"k":[{{"a":1, "b":2}}{zeros}]}}]"#));
}

/// A value kept as text is still read as the parser reads it: the same
/// texts refused at the same place with the same message.
#[test]
fn kept_values_are_refused_like_built_ones() {
    for bad in [
        r#"[1,2,}"#,
        r#"{"a":1 "b":2}"#,
        r#"{"c":"\ud800"}"#,
        r#"[01]"#,
        r#"{3:1}"#,
        r#"["unterminated"#,
    ] {
        let doc = format!(r#"[{{"k":{bad}}}]"#);
        let counted = AgentResponse::from_slice(doc.as_bytes()).unwrap_err();
        let tree = Json::from_slice(doc.as_bytes()).unwrap_err();
        assert!(counted.is_syntax(), "{bad}");
        assert_eq!(counted.first().position(), tree.first().position(), "{bad}");
        assert_eq!(counted.first().detail(), tree.first().detail(), "{bad}");
    }
}

/// JSON text of random values: every scalar form, escapes and whitespace.
fn value_text() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("0".to_owned()),
        Just("-0".to_owned()),
        Just("1.5e-3".to_owned()),
        Just("1E2".to_owned()),
        Just("123456789012345678901234567890".to_owned()),
        Just("true".to_owned()),
        Just("null".to_owned()),
        Just(r#""plain""#.to_owned()),
        Just(r#""\u0041\/\b\u00e9\ud83d\ude00\"""#.to_owned()),
        Just("\"é\u{7f}\"".to_owned()),
    ];
    let key = prop_oneof![
        Just(r#""a""#),
        Just(r#""b""#),
        Just(r#""\u0063""#),
        Just(r#""d e""#)
    ];
    leaf.prop_recursive(4, 40, 5, move |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..5)
                .prop_map(|v| format!("[ {} ]", v.join(" ,\n"))),
            proptest::collection::vec((key.clone(), inner), 0..5).prop_map(|kv| {
                let members: Vec<String> =
                    kv.into_iter().map(|(k, v)| format!("{k} : {v}")).collect();
                format!("{{{}}}", members.join(","))
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn random_kept_values_give_the_errors_of_the_whole_tree(v in value_text(), w in value_text()) {
        response(&format!(r#"[{{"k":{v},"output":{{"say":"s","x":{w}}}}}]"#));
        request(&format!(r#"{{"request_id":"e","inputs":[{{"k":{v},"instruction":{{"c":{w}}}}}]}}"#));
        request(&format!(r#"{{"request_id":{v},"inputs":[{{"id":{w},"instruction":{{"content":{v}}}}}]}}"#));
    }
}
