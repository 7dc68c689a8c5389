//! The attack suite: each attack of issue 20 that grows with what one
//! request asks for, replayed against the binary at its default flags, with
//! `/health` timed while it runs and the process's resident memory read
//! from `/proc`.
//!
//! Short form (what `cargo test` runs): 2 MiB requests. Full form, at the
//! largest inputs the default flags allow (16 MiB requests): `cargo xtask
//! attack` (release binary), or against any build: `MAGMA_ATTACK_FULL=1 MAGMA_SERVER_BIN=target/release/magma-server
//! cargo test -p magma-rs-server --test it attack -- --nocapture`.

#![allow(clippy::print_stderr)] // the suite reports what it measured

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;

use crate::hostile::binary_process::Proc;
use crate::support::{raw_exchange, send, user_request};

/// The resident-memory ceiling of the acceptance, in KiB.
const CEILING_KIB: u64 = 512 * 1024;

fn full() -> bool {
    std::env::var_os("MAGMA_ATTACK_FULL").is_some()
}

/// One request of `mib` MiB whose only input carries that much memory and
/// asks for the default `--max-candidates` (1024).
fn amplification(mib: usize) -> String {
    let blob = "m".repeat(mib * 1024 * 1024 - 200);
    format!(
        r#"{{"request_id":"amp","inputs":[{{"id":0,"instruction":{{"type":"user","content":"go"}},"num_outputs":1024,"memory":{{"blob":"{blob}"}}}}]}}"#
    )
}

/// `{"request_id":"e","inputs":[0,0,...]}` of `mib` MiB.
fn error_bomb(mib: usize) -> String {
    let n = (mib * 1024 * 1024 - 40) / 2;
    let mut s = String::with_capacity(n * 2 + 40);
    s.push_str(r#"{"request_id":"e","inputs":["#);
    for i in 0..n {
        if i > 0 {
            s.push(',');
        }
        s.push('0');
    }
    s.push_str("]}");
    s
}

/// The largest answer the default response limit allows, from an honest
/// request: 15 candidates of 1 MiB memory.
fn largest_answer() -> String {
    let blob = "m".repeat(1024 * 1024 - 200);
    format!(
        r#"{{"request_id":"big","inputs":[{{"id":0,"instruction":{{"type":"user","content":"go"}},"num_outputs":15,"memory":{{"blob":"{blob}"}}}}]}}"#
    )
}

/// Sends `body` `copies` times at once while `/health` is asked every
/// 20 ms; returns the statuses and the slowest `/health`.
async fn replay(server: &Proc, body: String, copies: usize) -> (Vec<u16>, Duration) {
    let addr = server.addr;
    let body = Bytes::from(body);
    let running = Arc::new(AtomicBool::new(true));
    let health = {
        let running = Arc::clone(&running);
        tokio::spawn(async move {
            let mut slowest = Duration::ZERO;
            while running.load(Ordering::Relaxed) {
                let started = Instant::now();
                let (_, reply) =
                    raw_exchange(addr, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n").await;
                assert_eq!(reply.status, 200, "{reply:?}");
                slowest = slowest.max(started.elapsed());
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            slowest
        })
    };
    let attacks: Vec<_> = (0..copies)
        .map(|_| {
            let body = body.clone();
            tokio::spawn(async move {
                let reply = send(
                    addr,
                    Method::POST,
                    "/v1/responses",
                    &[("content-type", "application/json")],
                    body,
                )
                .await;
                reply.status.as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for a in attacks {
        statuses.push(a.await.expect("attack task"));
    }
    running.store(false, Ordering::Relaxed);
    let slowest = health.await.expect("health task");
    (statuses, slowest)
}

/// Acceptance of issue 20, for the attacks that grow with one request:
/// each is answered with its status, `/health` keeps answering, the server
/// stays up, and its peak resident memory stays under 512 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attacks_at_default_flags_stay_within_the_budget() {
    let mut server = Proc::start(&[]);
    let (mib, copies) = if full() { (16, 2) } else { (2, 2) };
    // The health limit of the acceptance is 100 ms; the short form, on a
    // shared CI machine, allows more but still fails a server that stalls.
    let health_limit = Duration::from_millis(if full() { 100 } else { 1000 });
    let mut report = Vec::new();
    let attacks: [(String, String, u16); 3] = [
        (
            format!("amplification ({copies} x {mib} MiB, 1024 candidates)"),
            amplification(mib),
            422,
        ),
        (
            format!("422 error-list bomb ({copies} x {mib} MiB)"),
            error_bomb(mib),
            422,
        ),
        (
            format!("largest allowed answer ({copies} x 15 MiB answers)"),
            largest_answer(),
            200,
        ),
    ];
    for (name, body, want) in attacks {
        let before = server.peak_rss_kib();
        let (statuses, slowest) = replay(&server, body, copies).await;
        assert!(server.is_running(), "{name}: the server died");
        assert!(
            statuses.iter().all(|s| *s == want),
            "{name}: {statuses:?}, want {want}"
        );
        let peak = server.peak_rss_kib();
        let line = format!(
            "{name}: {statuses:?}, slowest /health {slowest:?}, \
             peak RSS {before} -> {peak} KiB, now {} KiB",
            server.rss_kib()
        );
        eprintln!("attack: {line}");
        report.push(line);
        assert!(slowest <= health_limit, "{name}: /health took {slowest:?}");
        assert!(peak < CEILING_KIB, "{name}: peak RSS {peak} KiB");
    }
    // Still serving, and memory goes back down.
    let request = user_request("after", "still there?", 2);
    let reply = send(
        server.addr,
        Method::POST,
        "/v1/responses",
        &[("content-type", "application/json")],
        Bytes::from(request),
    )
    .await;
    assert_eq!(reply.status.as_u16(), 200);
    let settle = if full() { 60 } else { 5 };
    let mut now = server.rss_kib();
    for _ in 0..settle {
        if now < 128 * 1024 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        now = server.rss_kib();
    }
    eprintln!(
        "attacks:\n  {}\n  RSS after: {now} KiB",
        report.join("\n  ")
    );
    assert!(now < 128 * 1024, "RSS {now} KiB after the attacks");
}
