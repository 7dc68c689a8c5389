//! Memory goes through the server exactly: numbers as written, unicode,
//! deep nests, key order, and every key the agent did not touch.

use magma_server::demo::DemoAgent;
use magma_server::{Json, Object};

use crate::support::{TestServer, check_response};

fn nest(depth: usize) -> String {
    format!(
        "{}\"bottom\"{}",
        "[".repeat(depth / 2) + &"{\"k\":".repeat(depth - depth / 2),
        "}".repeat(depth - depth / 2) + &"]".repeat(depth / 2)
    )
}

fn memory_text() -> String {
    format!(
        r#"{{"big":123456789012345678901234567890,"neg_big":-1180591620717411303424,"u64_max_plus_one":18446744073709551616,"one_point_zero":1.0,"tiny":5e-324,"exp":1E+2,"neg_zero":-0.0,"unicode":"h\u00e9llo — 世界 🤖 \ud83d\ude00","raw_unicode":"Ünïcødé ✓","escapes":"tab\tquote\"backslash\\","empty":{{}},"list":[],"nulls":[null,true,false],"deep":{},"memory_list":["Always confirm completion to the user."],"history":[{{"author":"USER","content":"Press sw0."}}],"z_last":0}}"#,
        nest(200)
    )
}

fn request(id: &str, memory: &str) -> String {
    format!(
        r#"{{"request_id":"{id}","inputs":[{{"id":0,"instruction":{{"type":"user","content":"go"}},"memory":{memory},"num_outputs":2}}]}}"#
    )
}

fn parse_object(text: &str) -> Object {
    match Json::from_slice(text.as_bytes()).expect("memory is JSON") {
        Json::Object(o) => o,
        other => panic!("not an object: {other}"),
    }
}

#[tokio::test]
async fn memory_round_trips_exactly_over_five_steps() {
    let server = TestServer::start(DemoAgent::new()).await;
    let original = parse_object(&memory_text());
    let mut memory_text = memory_text();
    for step in 1..=5u64 {
        let req = request(&format!("mem-{step}"), &memory_text);
        let reply = server.respond(req.clone()).await;
        let response = check_response(&req, &reply);
        assert_eq!(response.len(), 2);
        for candidate in response.iter() {
            let mut memory = candidate.memory.clone();
            let steps = memory.remove("steps").expect("steps counter");
            assert_eq!(
                steps.as_number().map(|n| n.as_str().to_owned()),
                Some(step.to_string())
            );
            // Every other key, in order, with exactly the same values.
            assert_eq!(memory, original, "step {step}");
        }
        // The literal text of the numbers survives (no float conversion).
        let text = reply.text();
        for lexeme in [
            "123456789012345678901234567890",
            "-1180591620717411303424",
            "18446744073709551616",
            "\"one_point_zero\":1.0",
            "5e-324",
            "1E+2",
            "-0.0",
        ] {
            assert!(text.contains(lexeme), "{lexeme} lost in step {step}");
        }
        // Feed the first candidate's memory back, as BENCH does.
        let first = &response[0].memory;
        memory_text = Json::Object(first.clone()).to_json_string();
    }
}

#[tokio::test]
async fn unicode_survives_both_escaped_and_raw() {
    let server = TestServer::start(DemoAgent::new()).await;
    let req = request("uni", &memory_text());
    let response = check_response(&req, &server.respond(req.clone()).await);
    let memory = &response[0].memory;
    assert_eq!(
        memory.get("unicode").and_then(Json::as_str),
        Some("héllo — 世界 🤖 😀")
    );
    assert_eq!(
        memory.get("raw_unicode").and_then(Json::as_str),
        Some("Ünïcødé ✓")
    );
    assert_eq!(
        memory.get("escapes").and_then(Json::as_str),
        Some("tab\tquote\"backslash\\")
    );
}

#[tokio::test]
async fn a_200_deep_nest_comes_back_whole() {
    let server = TestServer::start(DemoAgent::new()).await;
    let req = request("deep", &memory_text());
    let response = check_response(&req, &server.respond(req.clone()).await);
    let mut v = response[0].memory.get("deep").expect("deep").clone();
    let mut depth = 0;
    loop {
        v = match v {
            Json::Array(mut a) => a.remove(0),
            Json::Object(mut o) => o.remove("k").expect("k"),
            Json::String(s) => {
                assert_eq!(s, "bottom");
                break;
            }
            other => panic!("unexpected {other}"),
        };
        depth += 1;
    }
    assert_eq!(depth, 200);
}

#[tokio::test]
async fn an_error_candidate_keeps_the_input_memory_unchanged() {
    let server = TestServer::start(DemoAgent::new()).await;
    let memory = memory_text();
    let req = format!(
        r#"{{"request_id":"err","inputs":[{{"id":0,"instruction":{{"type":"user","content":"__error__"}},"memory":{memory}}}]}}"#
    );
    let response = check_response(&req, &server.respond(req.clone()).await);
    assert_eq!(response[0].memory, parse_object(&memory));
}
