//! Parse + validate throughput against serde_json on the same bytes.
//!
//! `cargo bench -p magma-protocol --bench parse`. The baselines run in the same
//! process: `serde_json` skipping every value (`IgnoredAny`: a syntax-only
//! pass, the floor for any JSON reader) and building a `serde_json::Value`
//! (what a hand-rolled validator on top of serde_json would start from).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use magma_protocol::AgentRequest;

#[path = "bench_like.rs"]
mod bench_like;
use bench_like::bench_like_request;

fn parse(c: &mut Criterion) {
    for (name, inputs) in [("large_0.6MB", 52usize), ("one_input", 1)] {
        let body = bench_like_request(inputs);
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
    let body = bench_like_request(52);
    let req = AgentRequest::from_slice(body.as_bytes()).unwrap();
    c.bench_function("serialize/large_0.6MB", |b| {
        b.iter(|| black_box(&req).to_json_string())
    });
}

criterion_group!(benches, parse);
criterion_main!(benches);
