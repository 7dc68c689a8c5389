//! No data loss: any JSON value in a free-form position survives parse and
//! serialize as the same value (number lexemes, key order, big integers).

use magma_protocol::{AgentRequest, AgentResponse, Json, Number, Object};
use proptest::prelude::*;

/// JSON number lexemes of every shape the grammar allows.
fn number() -> impl Strategy<Value = Json> {
    let int = "-?(0|[1-9][0-9]{0,40})";
    let frac = "-?(0|[1-9][0-9]{0,5})\\.[0-9]{1,8}";
    let exp = "-?(0|[1-9][0-9]{0,3})(\\.[0-9]{1,4})?[eE][+-]?[0-9]{1,3}";
    prop_oneof![int, frac, exp].prop_filter_map("finite lexeme", |s| {
        Number::from_lexeme(&s).map(Json::Number)
    })
}

fn leaf() -> impl Strategy<Value = Json> {
    prop_oneof![
        Just(Json::Null),
        any::<bool>().prop_map(Json::Bool),
        number(),
        any::<String>().prop_map(Json::String),
        "[\\u{0}-\\u{1f}\"\\\\\\u{2028}\\u{feff}a-z]{0,8}".prop_map(Json::String),
    ]
}

fn value() -> impl Strategy<Value = Json> {
    leaf().prop_recursive(6, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Json::Array),
            prop::collection::vec((any::<String>(), inner), 0..6)
                .prop_map(|kv| Json::Object(kv.into_iter().collect())),
        ]
    })
}

fn object() -> impl Strategy<Value = Object> {
    prop::collection::vec(("[a-z_]{1,6}|\\PC{0,4}", value()), 0..6)
        .prop_map(|kv| kv.into_iter().collect())
}

/// Keys from a small set, so that operations meet them: plain ones, one that
/// needs an escape, non-ASCII.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("a"),
        Just("b"),
        Just("steps"),
        Just("a b"),
        Just("é"),
        Just("q\"uote"),
        Just("tab\t"),
    ]
    .prop_map(str::to_owned)
}

fn object_with_keys() -> impl Strategy<Value = Object> {
    prop::collection::vec((key(), value()), 0..5).prop_map(|kv| kv.into_iter().collect())
}

#[derive(Debug, Clone)]
enum Op {
    Get(String),
    Contains(String),
    Insert(String, Json),
    Remove(String),
    Copy,
    Len,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        key().prop_map(Op::Get),
        key().prop_map(Op::Contains),
        (key(), leaf()).prop_map(|(k, v)| Op::Insert(k, v)),
        (key(), value()).prop_map(|(k, v)| Op::Insert(k, v)),
        key().prop_map(Op::Remove),
        Just(Op::Copy),
        Just(Op::Len),
    ]
}

fn request_text(tools: &Object, attributes: &Object, memory: &Object, extra: &Object) -> String {
    format!(
        r#"{{"request_id":"r","inputs":[{{"id":1,"instruction":{{"type":"user","content":"x"}},"tools":[{}],"attributes":{},"memory":{},"extra_keys":{}}}]}}"#,
        Json::Object(tools.clone()),
        Json::Object(attributes.clone()),
        Json::Object(memory.clone()),
        Json::Object(extra.clone()),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Integers become the lexeme Rust prints for them, at every width.
    #[test]
    fn integers_keep_their_decimal_form(a in any::<i64>(), b in any::<u64>(), c in any::<i128>(), d in any::<u128>(), e in any::<i8>()) {
        prop_assert_eq!(Number::from(a).to_string(), a.to_string());
        prop_assert_eq!(Number::from(b).to_string(), b.to_string());
        prop_assert_eq!(Number::from(c).to_string(), c.to_string());
        prop_assert_eq!(Number::from(d).to_string(), d.to_string());
        prop_assert_eq!(Number::from(e).to_string(), e.to_string());
        for edge in [i128::MIN, i128::MAX, 0, -1, i128::from(i64::MIN), i128::from(u64::MAX)] {
            prop_assert_eq!(Number::from(edge).to_string(), edge.to_string());
        }
        prop_assert_eq!(Number::from(u128::MAX).to_string(), u128::MAX.to_string());
    }

    #[test]
    fn request_free_form_values_survive(
        tools in object(), attributes in object(), memory in object(), extra in object()
    ) {
        let text = request_text(&tools, &attributes, &memory, &extra);
        let req = AgentRequest::from_slice(text.as_bytes()).expect("valid request");
        let input = &req.inputs()[0];
        prop_assert_eq!(&input.tools[0], &tools);
        prop_assert_eq!(&input.attributes, &attributes);
        prop_assert_eq!(&input.memory, &memory);
        prop_assert_eq!(&input.extra_keys, &extra);
        // And once more through our own serializer.
        let again = AgentRequest::from_slice(req.to_json_string().as_bytes()).expect("reparse");
        prop_assert_eq!(again, req);
    }

    #[test]
    fn response_free_form_values_survive(memory in object(), step in object(), args in object()) {
        let text = format!(
            r#"[{{"request_id":"r","source_id":1,"candidate_index":0,"status":"completed","memory":{},"internal_steps":[{}],"output":{{"say":"","tool_calls":[{{"name":"t","arguments":{},"target_robot_name":"r"}}]}}}}]"#,
            Json::Object(memory.clone()), Json::Object(step.clone()), Json::Object(args.clone()),
        );
        let resp = AgentResponse::from_slice(text.as_bytes()).expect("valid response");
        let c = &resp[0];
        prop_assert_eq!(&c.memory, &memory);
        prop_assert_eq!(&c.internal_steps[0], &step);
        let call = &c.outcome.decision().expect("completed").tool_calls[0];
        prop_assert_eq!(&call.arguments, &args);
        let again = AgentResponse::from_slice(resp.to_json_string().as_bytes()).expect("reparse");
        prop_assert_eq!(again, resp);
    }

    /// An object kept as the request's text behaves exactly like the same
    /// object built as a map, whatever is done to it: reads that do not
    /// materialise it, scalars written into its text, other changes that turn
    /// it into a map, copies at any point.
    #[test]
    fn kept_text_objects_behave_like_maps(
        memory in object_with_keys(), ops in prop::collection::vec(op(), 0..12)
    ) {
        let text = request_text(&Object::new(), &Object::new(), &memory, &Object::new());
        let req = AgentRequest::from_slice(text.as_bytes()).expect("valid request");
        let mut kept = req.inputs()[0].memory.clone();
        let mut map = memory;
        for op in ops {
            match op {
                Op::Get(k) => prop_assert_eq!(kept.get(&k), map.get(&k)),
                Op::Contains(k) => prop_assert_eq!(kept.contains_key(&k), map.contains_key(&k)),
                Op::Insert(k, v) => prop_assert_eq!(kept.insert(k.clone(), v.clone()), map.insert(k, v)),
                Op::Remove(k) => prop_assert_eq!(kept.remove(&k), map.remove(&k)),
                Op::Copy => kept = kept.clone(),
                Op::Len => prop_assert_eq!(kept.len(), map.len()),
            }
            prop_assert_eq!(&kept, &map);
            let out = Json::Object(kept.clone()).to_json_string();
            prop_assert!(magma_protocol::duplicate_keys(out.as_bytes()).unwrap().is_empty());
            prop_assert_eq!(Json::from_slice(out.as_bytes()).unwrap(), Json::Object(map.clone()));
            let keys: Vec<&str> = kept.keys().collect();
            let expected: Vec<&str> = map.keys().collect();
            prop_assert_eq!(keys, expected);
        }
    }

    #[test]
    fn any_value_text_roundtrips(v in value()) {
        let text = v.to_json_string();
        let back = Json::from_slice(text.as_bytes()).expect("our output is JSON");
        prop_assert_eq!(&back, &v);
        // serde_json agrees that it is JSON.
        prop_assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
    }
}

#[test]
fn the_hard_values_survive_exactly() {
    let memory = r#"{"z":1,"a":123456789012345678901234567890,"m":-9223372036854775809,"f":1.0,"tiny":5e-324,"neg0":-0,"negf":-0.0,"e":1E+2,"nested":{"b":2,"a":[1.50,{"y":null,"x":true}]},"s":"\u2028\ud83d\ude00 é \u0000"}"#;
    let text = format!(
        r#"{{"request_id":"r","inputs":[{{"id":0,"instruction":{{"type":"env","content":""}},"memory":{memory}}}]}}"#
    );
    let req = AgentRequest::from_slice(text.as_bytes()).unwrap();
    let m = &req.inputs()[0].memory;
    let keys: Vec<&str> = m.keys().collect();
    assert_eq!(
        keys,
        [
            "z", "a", "m", "f", "tiny", "neg0", "negf", "e", "nested", "s"
        ]
    );
    let lexeme = |k: &str| {
        m.get(k)
            .and_then(Json::as_number)
            .map(|n| n.as_str().to_owned())
    };
    assert_eq!(
        lexeme("a").as_deref(),
        Some("123456789012345678901234567890")
    );
    assert_eq!(lexeme("m").as_deref(), Some("-9223372036854775809"));
    assert_eq!(lexeme("f").as_deref(), Some("1.0"));
    assert_eq!(lexeme("tiny").as_deref(), Some("5e-324"));
    assert_eq!(lexeme("negf").as_deref(), Some("-0.0"));
    assert_eq!(lexeme("e").as_deref(), Some("1E+2"));
    assert!(!m.get("f").unwrap().as_number().unwrap().is_integer());
    // Serialized, every lexeme is kept, and the text reads back as the same value.
    let out = Json::Object(m.clone()).to_json_string();
    for lexeme in [
        "123456789012345678901234567890",
        "-9223372036854775809",
        ":1.0,",
        "5e-324",
        ":-0,",
        "-0.0",
        "1E+2",
        "1.50",
    ] {
        assert!(out.contains(lexeme), "{lexeme} lost in {out}");
    }
    assert_eq!(
        &Json::from_slice(out.as_bytes()).unwrap(),
        &Json::Object(m.clone())
    );
    // A scalar set on kept text is written into the text: everything else
    // stays exactly as the client wrote it, escapes included, and the entries
    // already read follow.
    let mut spliced = m.clone();
    assert_eq!(spliced.insert("added", Json::from(1)), None);
    assert_eq!(spliced.insert("z", Json::from("two")), Some(Json::from(1)));
    assert_eq!(spliced.get("z"), Some(&Json::from("two")));
    assert_eq!(spliced.keys().last(), Some("added"));
    let out = Json::Object(spliced.clone()).to_json_string();
    assert_eq!(
        out,
        memory
            .replacen(r#""z":1"#, r#""z":"two""#, 1)
            .trim_end_matches('}')
            .to_owned()
            + r#","added":1}"#
    );
    assert_eq!(
        Json::from_slice(out.as_bytes()).unwrap(),
        Json::Object(spliced)
    );
    // Once changed otherwise, the object is written from its entries, compactly.
    let mut changed = m.clone();
    changed.insert("added", Json::Array(vec![Json::from(1)]));
    let out = Json::Object(changed).to_json_string();
    assert!(
        out.ends_with("\"s\":\"\u{2028}\u{1f600} é \\u0000\",\"added\":[1]}"),
        "{out}"
    );
    assert!(
        out.contains(r#""nested":{"b":2,"a":[1.50,{"y":null,"x":true}]}"#),
        "{out}"
    );
}

#[test]
fn duplicate_keys_keep_the_last_value_in_the_first_position() {
    let v = Json::from_slice(br#"{"a":1,"b":2,"a":3}"#).unwrap();
    assert_eq!(v.to_json_string(), r#"{"a":3,"b":2}"#);
    // Also in big objects, where the parser switches to a hash index.
    let mut text = String::from("{");
    for i in 0..40 {
        text.push_str(&format!("\"k{i}\":{i},"));
    }
    text.push_str("\"k3\":\"last\",\"k39\":null}");
    let v = Json::from_slice(text.as_bytes()).unwrap();
    let o = v.as_object().unwrap();
    assert_eq!(o.len(), 40);
    assert_eq!(o.get("k3"), Some(&Json::from("last")));
    assert_eq!(o.keys().nth(3), Some("k3"));
    assert_eq!(o.get("k39"), Some(&Json::Null));
}

#[test]
fn typed_fields_serialize_like_fastapi() {
    let text = r#"[{"request_id":"r","source_id":-0,"candidate_index":0,"status":"error","memory":{},"error":{"code":"c","message":"m"}}]"#;
    let resp = AgentResponse::from_slice(text.as_bytes()).unwrap();
    assert_eq!(
        resp.to_json_string(),
        r#"[{"request_id":"r","source_id":0,"candidate_index":0,"status":"error","memory":{},"internal_steps":[],"output":null,"error":{"code":"c","message":"m","component":null}}]"#
    );
}

#[test]
fn serde_deserialize_validates_too() {
    let ok: Result<AgentRequest, _> = serde_json::from_str(
        r#"{"request_id":"r","inputs":[{"id":1,"instruction":{"type":"user","content":"hi"}}]}"#,
    );
    assert_eq!(ok.unwrap().inputs()[0].instruction.content, "hi");
    let bad: Result<AgentRequest, _> = serde_json::from_str(r#"{"request_id":"","inputs":[]}"#);
    let msg = bad.unwrap_err().to_string();
    assert!(
        msg.contains("request_id") && msg.contains("string_too_short"),
        "{msg}"
    );
}

#[test]
fn serde_json_serializers_see_the_same_document() {
    let text = br#"{"request_id":"r","inputs":[{"id":1,"instruction":{"type":"user","content":"x"},"memory":{"b": [1.5, {"c": "\u00e9"}], "a": 7}}]}"#;
    let req = AgentRequest::from_slice(text).unwrap();
    // serde_json::Value (to_value) and text (to_vec, pretty) agree with ours.
    let value = serde_json::to_value(&req).unwrap();
    assert_eq!(value["inputs"][0]["memory"]["b"][1]["c"], "é");
    let ours: serde_json::Value = serde_json::from_str(&req.to_json_string()).unwrap();
    assert_eq!(value, ours);
    let pretty = serde_json::to_string_pretty(&req).unwrap();
    assert_eq!(AgentRequest::from_slice(pretty.as_bytes()).unwrap(), req);
}

/// Kept text written with whitespace everywhere JSON allows it: lookups,
/// scalar inserts (new and existing keys) and the output agree with the same
/// object built as a map.
#[test]
fn kept_text_with_whitespace_reads_and_changes_like_a_map() {
    let memory = "{ \"a\" :\t[1, {\"b\" : 2}] ,\n \"c\":\"x\\\"y\" , \"d\" : -1.5e3 ,\r\n\"e\" : { } , \"f\":true,\"g\" : null }";
    let text = format!(
        r#"{{"request_id":"r","inputs":[{{"id":0,"instruction":{{"type":"user","content":""}},"memory":{memory}}}]}}"#
    );
    let req = AgentRequest::from_slice(text.as_bytes()).unwrap();
    let map = Json::from_slice(memory.as_bytes()).unwrap();
    let map = map.as_object().unwrap();
    for key in ["a", "c", "d", "e", "f", "g", "missing"] {
        // A fresh copy for each key: the first lookup is the one-value path.
        let kept = AgentRequest::from_slice(text.as_bytes()).unwrap();
        assert_eq!(kept.inputs()[0].memory.get(key), map.get(key), "{key}");
    }
    for (key, value) in [
        ("d", Json::from(7)),
        ("new", Json::from("v")),
        ("g", Json::Null),
    ] {
        let mut kept = req.inputs()[0].memory.clone();
        let mut expected = map.clone();
        assert_eq!(kept.insert(key, value.clone()), expected.insert(key, value));
        let out = Json::Object(kept.clone()).to_json_string();
        assert_eq!(
            Json::from_slice(out.as_bytes()).unwrap(),
            Json::Object(expected)
        );
        assert_eq!(kept.keys().collect::<Vec<_>>(), map_keys_after(map, key));
    }
}

fn map_keys_after<'a>(map: &'a Object, inserted: &'a str) -> Vec<&'a str> {
    let mut keys: Vec<&str> = map.keys().collect();
    if !keys.contains(&inserted) {
        keys.push(inserted);
    }
    keys
}
