//! `magma-validate proxy` under load: more requests than call threads
//! (they wait in the queue, past it `503`, and every one ends), and the
//! proxy's peak resident memory under a flood of large bodies (the child's
//! `VmHWM`) within twice its memory budget (`--max-total-body-bytes`).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::Duration;

use magma_client::RawRequest;
use magma_testkit::process::peak_rss_kib;
use magma_testkit::stub::{Options, StubServer};
use serde_json::Value;

use crate::probe_live::RealServer;
use crate::proxy::{REQUEST, client, start};
use crate::support::{Fault, handle};

const MIB: u64 = 1 << 20;

/// A correct agent whose `POST`s wait until `gate` is opened.
fn gated_agent() -> (StubServer, tokio::sync::watch::Sender<bool>) {
    let (open, gate) = tokio::sync::watch::channel(false);
    let agent = StubServer::start_async(Options::default(), move |rec| {
        let mut gate = gate.clone();
        Box::pin(async move {
            if rec.method == "POST" {
                let _ = gate.wait_for(|open| *open).await;
            }
            handle(Fault::None, &rec.method, rec.path_only(), &rec.body)
        })
    });
    (agent, open)
}

/// The log's finding lines with `code`.
fn finding_lines(log: &str, code: &str) -> usize {
    log.lines()
        .filter(|l| l.starts_with("[exchange ") && l.contains(&format!(" {code}: ")))
        .count()
}

/// Waits for the agent to have seen `n` requests (a guard against a hang,
/// not a measure of time).
fn wait_for_requests(agent: &StubServer, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while agent.requests().len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "the agent saw {} of {n} requests",
            agent.requests().len()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Two call threads and a queue of two, six requests at once while the
/// agent holds every answer: two are forwarded, two wait, two get `503`
/// with a JSON `detail`. Once the agent answers, the four end with its
/// answers, unchanged, and the threads serve the next request.
#[test]
fn more_requests_than_call_threads_wait_in_the_queue_or_get_a_503() {
    let (agent, open) = gated_agent();
    let proxy = start(
        &agent.url(),
        &["--max-concurrent-calls", "2", "--max-queued-calls", "2"],
    );
    let (tx, rx) = mpsc::channel();
    for _ in 0..6 {
        let (url, tx) = (proxy.url.clone(), tx.clone());
        std::thread::spawn(move || {
            let answer = client(&url)
                .execute(RawRequest::post("/v1/responses").json(REQUEST))
                .expect("the proxy answers");
            let _ = tx.send((answer.status().as_u16(), answer.body().clone()));
        });
    }
    // The refused ones answer while the agent still holds the others.
    let within = Duration::from_secs(60);
    let refused: Vec<_> = (0..2)
        .map(|_| rx.recv_timeout(within).expect("two requests refused"))
        .collect();
    for (status, body) in &refused {
        assert_eq!(*status, 503);
        let body: Value = serde_json::from_slice(body).unwrap();
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains("--max-concurrent-calls"), "{detail}");
        assert!(detail.contains("--max-queued-calls"), "{detail}");
    }
    // Two are at the agent; the two queued ones are not sent yet.
    wait_for_requests(&agent, 2);
    assert_eq!(agent.requests().len(), 2);
    assert!(rx.try_recv().is_err(), "an answer came before the agent's");

    open.send(true).expect("open the gate");
    let direct = client(&agent.url())
        .execute(RawRequest::post("/v1/responses").json(REQUEST))
        .expect("the agent answers");
    for _ in 0..4 {
        let (status, body) = rx.recv_timeout(within).expect("a queued request ends");
        assert_eq!(status, 200);
        assert_eq!(body, *direct.body(), "the answer changed on its way");
    }
    // Four forwarded, and the direct call.
    assert_eq!(agent.requests().len(), 5);
    let next = client(&proxy.url)
        .execute(RawRequest::post("/v1/responses").json(REQUEST))
        .expect("the proxy answers");
    assert_eq!(next.status().as_u16(), 200);

    let (exit, log) = proxy.stop();
    assert_eq!(exit, 1, "{log}");
    assert_eq!(finding_lines(&log, "call_queue"), 2, "{log}");
}

/// A request queued behind a hung call gets its `504` when `--timeout`
/// (counted from its arrival) passes, like the hung one.
#[test]
fn queued_requests_get_their_504_at_the_timeout() {
    let (agent, _gate) = gated_agent();
    let proxy = start(
        &agent.url(),
        &["--max-concurrent-calls", "1", "--timeout", "1"],
    );
    let (tx, rx) = mpsc::channel();
    for _ in 0..2 {
        let (url, tx) = (proxy.url.clone(), tx.clone());
        std::thread::spawn(move || {
            let answer = client(&url)
                .execute(RawRequest::post("/v1/responses").json(REQUEST))
                .expect("the proxy answers");
            let _ = tx.send((answer.status().as_u16(), answer.body().clone()));
        });
    }
    for _ in 0..2 {
        let (status, body) = rx.recv_timeout(Duration::from_secs(60)).expect("an answer");
        assert_eq!(status, 504);
        let body: Value = serde_json::from_slice(&body).unwrap();
        let detail = body["detail"].as_str().unwrap();
        assert!(detail.contains("--timeout"), "{detail}");
    }
    let (exit, log) = proxy.stop();
    assert_eq!(exit, 1, "{log}");
    assert_eq!(finding_lines(&log, "upstream_timeout"), 2, "{log}");
}

/// The status of an HTTP/1.1 answer on `s`.
fn status_of(s: &mut TcpStream) -> Option<u16> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&head)
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect to the proxy");
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .expect("read timeout");
    s
}

/// A large valid request; the proxy may answer (`503`) before reading it
/// all, so a failed write still reads the status. The answer is read to
/// its end, as a consumer does.
fn post_large(port: u16, body: &[u8]) -> u16 {
    let mut s = connect(port);
    let _ = write!(
        s,
        "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .and_then(|()| s.write_all(body));
    let status = status_of(&mut s).expect("a status");
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
    status
}

/// A body without `Content-Length` over the limit (1 MiB chunks).
fn chunked_over(port: u16, total: u64) -> u16 {
    let mut s = connect(port);
    let _ = s.write_all(
        b"POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    );
    let chunk = vec![b'b'; MIB as usize];
    for _ in 0..total / MIB {
        let sent = write!(s, "{:x}\r\n", chunk.len())
            .and_then(|()| s.write_all(&chunk))
            .and_then(|()| s.write_all(b"\r\n"));
        if sent.is_err() {
            break; // the proxy answered and closed
        }
    }
    let _ = s.write_all(b"0\r\n\r\n");
    status_of(&mut s).expect("a status")
}

/// A request declaring more than the limit.
fn declared_over(port: u16, total: u64) -> u16 {
    let mut s = connect(port);
    let _ = write!(
        s,
        "POST /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {total}\r\nConnection: close\r\n\r\n"
    );
    status_of(&mut s).expect("a status")
}

/// The bench's memory run (`cargo xtask bench --only proxy`) at half its
/// size, so that the debug binary runs it: `--max-body-bytes 8 MiB
/// --max-total-body-bytes 32 MiB`, three rounds of eight clients at once,
/// each round four valid requests just under the limit (magma-server
/// echoes them: answers as large), two chunked bodies and two declared
/// bodies over it. The valid ones are sent again after a `503` (the budget
/// in use), so that twelve large exchanges go through in any case. The
/// proxy's peak stays under twice its budget: what the budget lets one
/// exchange hold is not kept again by each thread that touched it.
#[test]
fn the_proxys_peak_stays_within_twice_its_memory_budget_under_large_bodies() {
    const BODY: u64 = 8 * MIB;
    const BUDGET: u64 = 32 * MIB;
    let server = RealServer::start_with(magma_server::Config::default());
    let proxy = start(
        &server.url(),
        &[
            "--max-body-bytes",
            &BODY.to_string(),
            "--max-total-body-bytes",
            &BUDGET.to_string(),
        ],
    );
    let port: u16 = proxy
        .url
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("the proxy's port");
    let pid = proxy.child.id();
    let small = client(&proxy.url)
        .execute(RawRequest::post("/v1/responses").json(REQUEST))
        .expect("the proxy answers");
    assert_eq!(small.status().as_u16(), 200);
    let idle_kib = peak_rss_kib(pid).expect("the proxy's VmHWM");

    let content = "a".repeat((BODY - MIB / 2) as usize);
    let large = std::sync::Arc::new(format!(
        r#"{{"request_id":"large","inputs":[{{"id":1,"instruction":{{"type":"user","content":"{content}"}}}}]}}"#
    ));
    let mut statuses = std::collections::BTreeMap::<u16, u32>::new();
    let mut retried = 0;
    for _ in 0..3 {
        let clients: Vec<_> = (0..8)
            .map(|i| {
                let large = std::sync::Arc::clone(&large);
                std::thread::spawn(move || match i % 4 {
                    3 => (declared_over(port, BODY + 2 * MIB), 0),
                    2 => (chunked_over(port, BODY + 2 * MIB), 0),
                    _ => {
                        // Bounded: each 503 came after a second's wait.
                        for tries in 0..120 {
                            let status = post_large(port, large.as_bytes());
                            if status != 503 {
                                return (status, tries);
                            }
                        }
                        (503, 120)
                    }
                })
            })
            .collect();
        for c in clients {
            let (status, tries) = c.join().expect("a client");
            *statuses.entry(status).or_default() += 1;
            retried += tries;
        }
    }
    let peak_kib = peak_rss_kib(pid).expect("the proxy's VmHWM");
    let (exit, log) = proxy.stop();
    eprintln!(
        "proxy under large bodies (budget {} MiB): idle {} KiB, peak {} KiB; answers {statuses:?}, \
         {retried} retries after 503",
        BUDGET / MIB,
        idle_kib,
        peak_kib
    );
    // Every valid one went through; each one over the limit got its 413,
    // or a 503 when it found the budget in use.
    assert_eq!(statuses.get(&200), Some(&12), "{statuses:?}\n{log}");
    assert!(statuses.get(&413) >= Some(&6), "{statuses:?}\n{log}");
    assert_eq!(statuses.values().sum::<u32>(), 24, "{statuses:?}");
    assert!(
        statuses.keys().all(|s| [200, 413, 503].contains(s)),
        "{statuses:?}\n{log}"
    );
    assert_eq!(exit, 1, "the 413s are findings: {log}");
    let budget_kib = BUDGET / 1024;
    // It held large bodies (the reading saw them), and stayed in its bound.
    assert!(
        peak_kib > idle_kib + BODY / 1024,
        "idle {idle_kib} KiB, peak {peak_kib} KiB"
    );
    assert!(
        peak_kib < 2 * budget_kib,
        "peak {peak_kib} KiB over twice the {budget_kib} KiB budget"
    );
}
