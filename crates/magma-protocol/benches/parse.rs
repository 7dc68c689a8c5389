//! Parse + validate throughput against serde_json on the same bytes.
//!
//! `cargo bench -p magma-rs-protocol --bench parse`. The baselines run in the same
//! process: `serde_json` skipping every value (`IgnoredAny`: a syntax-only
//! pass, the floor for any JSON reader) and building a `serde_json::Value`
//! (what a hand-rolled validator on top of serde_json would start from).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use magma_protocol::coaching::SpecializedCoachingRequest;
use magma_protocol::{
    AgentDecision, AgentRequest, AgentResponse, Candidate, Json, NonEmptyString, Object, ToolCall,
};

use magma_testkit::fixtures::{bench_like_request, gen_like_coaching_request, http_body};

fn parse(c: &mut Criterion) {
    let bodies = [
        ("large_0.6MB", bench_like_request(52)),
        ("one_input", bench_like_request(1)),
        // What `cargo xtask bench` posts to the servers (6676 bytes).
        ("http_body_8", http_body(8)),
    ];
    for (name, body) in bodies {
        assert!(AgentRequest::from_slice(body.as_bytes()).is_ok());
        let mut g = c.benchmark_group(format!("parse/{name}"));
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function("magma_protocol::AgentRequest::from_slice", |b| {
            b.iter(|| AgentRequest::from_slice(black_box(body.as_bytes())).map(drop))
        });
        g.bench_function("serde_json::IgnoredAny", |b| {
            b.iter(|| {
                serde_json::from_slice::<serde::de::IgnoredAny>(black_box(body.as_bytes()))
                    .map(drop)
            })
        });
        g.bench_function("serde_json::Value", |b| {
            b.iter(|| {
                serde_json::from_slice::<serde_json::Value>(black_box(body.as_bytes())).map(drop)
            })
        });
        g.finish();
    }
    // A GEN-sized coaching request (50 steps), against the same baselines.
    let body = gen_like_coaching_request(50);
    assert!(SpecializedCoachingRequest::from_slice(body.as_bytes()).is_ok());
    let mut g = c.benchmark_group("parse/coaching_50_steps");
    g.throughput(Throughput::Bytes(body.len() as u64));
    g.bench_function(
        "magma_protocol::SpecializedCoachingRequest::from_slice",
        |b| b.iter(|| SpecializedCoachingRequest::from_slice(black_box(body.as_bytes())).map(drop)),
    );
    g.bench_function("serde_json::IgnoredAny", |b| {
        b.iter(|| {
            serde_json::from_slice::<serde::de::IgnoredAny>(black_box(body.as_bytes())).map(drop)
        })
    });
    g.bench_function("serde_json::Value", |b| {
        b.iter(|| serde_json::from_slice::<serde_json::Value>(black_box(body.as_bytes())).map(drop))
    });
    g.finish();
    let body = bench_like_request(52);
    let req = AgentRequest::from_slice(body.as_bytes()).unwrap();
    c.bench_function("serialize/large_0.6MB", |b| {
        b.iter(|| black_box(&req).to_json_string())
    });
    let response = demo_like_response(&AgentRequest::from_slice(http_body(8).as_bytes()).unwrap());
    c.bench_function("serialize/response_8", |b| {
        b.iter(|| black_box(&response).to_json_string())
    });
}

/// What magma-server's `DemoAgent` answers to `request`: the input memory
/// plus `"steps": 1` (written into the kept text) and one tool call.
fn demo_like_response(request: &AgentRequest) -> AgentResponse {
    let per_input = request
        .inputs()
        .iter()
        .map(|input| {
            let mut memory = input.memory.clone();
            memory.insert("steps", Json::from(1));
            let call = ToolCall {
                name: NonEmptyString::new("cancel_current_action").unwrap(),
                arguments: Object::new(),
                target_robot_name: NonEmptyString::new("panda").unwrap(),
            };
            vec![Candidate::new(memory, AgentDecision::call(vec![call]))]
        })
        .collect();
    AgentResponse::assemble(request, per_input).unwrap()
}

criterion_group!(benches, parse);
criterion_main!(benches);
