//! Timeouts (connect and whole call) and waiting for readiness. Durations
//! are short for the client and long for the servers, with wide margins.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use magma_client::{Client, ErrorKind, RawRequest};

use crate::support::{Options, Reply, StubServer, echo_agent, free_port, request};

#[test]
fn a_slow_agent_hits_the_request_timeout() {
    let server = StubServer::start(|_: &_| {
        Reply::json(200, r#"{"status":"ready"}"#).after(Duration::from_secs(30))
    });
    let c = Client::builder(server.url())
        .timeout(Duration::from_millis(300))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = c.health().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Timeout(d) if *d == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(err.is_timeout() && !err.is_connect());
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        err.to_string().contains("did not complete within 0.3s"),
        "{err}"
    );

    // The same for a POST, and nothing is retried.
    let err = c.respond(&request("slow", 1, 1)).unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Timeout(_)), "{err:?}");
    assert_eq!(
        server
            .requests()
            .iter()
            .filter(|r| r.method == "POST")
            .count(),
        1
    );
}

#[test]
fn a_per_call_timeout_overrides_the_client_default() {
    let server = StubServer::start(|_: &_| {
        Reply::json(200, r#"{"status":"ready"}"#).after(Duration::from_secs(30))
    });
    let c = Client::new(server.url()).unwrap();
    assert_eq!(c.timeout(), magma_client::DEFAULT_TIMEOUT);
    let err = c
        .execute(RawRequest::get("/health").timeout(Duration::from_millis(200)))
        .unwrap_err();
    assert!(matches!(err.kind(), ErrorKind::Timeout(d) if *d == Duration::from_millis(200)));
}

/// A listener whose accept queue is full, so that new connection attempts
/// get no answer (Linux drops the SYN) and hang until the connect timeout.
struct BlackHole {
    addr: SocketAddr,
    _listener: tokio::net::TcpListener,
    _held: Vec<std::net::TcpStream>,
    _rt: tokio::runtime::Runtime,
}

fn black_hole() -> BlackHole {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let listener = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
        socket.listen(0).unwrap()
    });
    let addr = listener.local_addr().unwrap();
    let mut held = Vec::new();
    for _ in 0..64 {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            Ok(s) => held.push(s),
            Err(_) => {
                return BlackHole {
                    addr,
                    _listener: listener,
                    _held: held,
                    _rt: rt,
                };
            }
        }
    }
    panic!("could not fill the accept queue of {addr} after 64 connections");
}

#[test]
fn an_unanswered_connect_hits_the_connect_timeout() {
    let hole = black_hole();
    let c = Client::builder(format!("http://{}", hole.addr))
        .connect_timeout(Duration::from_millis(300))
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let started = Instant::now();
    let err = c.health().unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::ConnectTimeout(d) if *d == Duration::from_millis(300)),
        "{err:?}"
    );
    assert!(err.is_timeout() && err.is_connect());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
    assert!(err.to_string().contains("connect timeout"), "{err}");
}

#[test]
fn wait_ready_waits_through_503_until_ready() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let server = StubServer::start(move |r: &_| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        if n < 3 {
            Reply::json(503, r#"{"detail":"Models are not ready"}"#)
        } else {
            echo_agent()(r)
        }
    });
    let c = Client::new(server.url()).unwrap();
    assert!(c.health().unwrap_err().is_not_ready());
    c.wait_ready(Duration::from_secs(30)).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    c.respond(&request("after-wait", 1, 1)).unwrap();
}

#[test]
fn wait_ready_waits_for_an_agent_that_starts_late() {
    let addr = free_port();
    let starter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        StubServer::start_with(
            Options {
                addr: Some(addr),
                ..Options::default()
            },
            echo_agent(),
        )
    });
    let c = Client::new(format!("http://{addr}")).unwrap();
    let result = c.wait_ready(Duration::from_secs(30));
    let server = starter.join().unwrap();
    result.unwrap();
    assert!(server.requests().iter().any(|r| r.path == "/health"));
}

#[test]
fn wait_ready_returns_the_last_error_at_its_deadline() {
    let c = Client::new(format!("http://{}", free_port())).unwrap();
    let started = Instant::now();
    let err = c.wait_ready(Duration::from_millis(500)).unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(err.kind(), ErrorKind::ConnectionRefused),
        "{err:?}"
    );
    assert!(
        took >= Duration::from_millis(500),
        "gave up early: {took:?}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");

    let server =
        StubServer::start(|_: &_| Reply::json(503, r#"{"detail":"Models are not ready"}"#));
    let c = Client::new(server.url()).unwrap();
    let err = c.wait_ready(Duration::from_millis(400)).unwrap_err();
    assert!(err.is_not_ready(), "{err:?}");
    assert!(server.requests().len() >= 2, "should poll more than once");
}

#[test]
fn wait_ready_gives_up_at_once_on_a_permanent_error() {
    let server = StubServer::start(|_: &_| Reply::json(404, r#"{"detail":"Not Found"}"#));
    let c = Client::new(server.url()).unwrap();
    let err = c.wait_ready(Duration::from_secs(60)).unwrap_err();
    assert_eq!(err.http_status().map(|s| s.status().as_u16()), Some(404));
    assert_eq!(server.requests().len(), 1);
}
