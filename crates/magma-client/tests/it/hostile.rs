//! A hostile agent answering a `[0,0,...]` bomb just under the response
//! limit: the client's peak memory stays under twice the limit and its
//! error keeps the first 100 problems, counting the rest.
//!
//! The memory is measured in a child process (this test binary run again
//! for [`bomb_child`] alone), whose peak resident memory (`VmHWM`) is read
//! while it runs, so that other tests of this binary do not count.

use std::process::{Command, Stdio};
use std::time::Duration;

use magma_client::{Client, ErrorKind};
use magma_testkit::process::peak_rss_kib;

use crate::support::{Reply, StubServer, info_json, request};

const MIB: usize = 1 << 20;
const URL_VAR: &str = "MAGMA_CLIENT_BOMB_URL";
const LIMIT_VAR: &str = "MAGMA_CLIENT_BOMB_LIMIT";

/// `[0,0,...,0]` of exactly `bytes` bytes (odd), and its element count.
fn zeros(bytes: usize) -> (Vec<u8>, usize) {
    let n = (bytes - 1) / 2;
    let mut doc = Vec::with_capacity(bytes);
    doc.push(b'[');
    for i in 0..n {
        doc.extend_from_slice(if i + 1 == n { b"0]" } else { b"0," });
    }
    assert_eq!(doc.len(), bytes);
    (doc, n)
}

fn bomb_agent(body: Vec<u8>) -> StubServer {
    StubServer::start(move |req| match (req.method.as_str(), req.path_only()) {
        ("POST", _) => Reply::json(200, body.clone()),
        (_, "/v1/info") => Reply::json(200, info_json()),
        _ => Reply::json(200, r#"{"status":"ready"}"#),
    })
}

/// One `respond` against the bomb at `url` with `limit`: an invalid body,
/// 100 errors kept, the other `n - 100` counted.
fn respond_to_the_bomb(url: &str, limit: usize, n: usize) {
    let client = Client::builder(url)
        .max_response_bytes(limit as u64)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let err = client.respond(&request("bomb", 1, 1)).unwrap_err();
    let ErrorKind::InvalidBody(e) = err.kind() else {
        panic!("{err:?}")
    };
    assert_eq!(e.issues().len(), 100);
    assert_eq!(e.omitted(), n - 100);
    assert_eq!(e.issues()[99].location().to_string(), "[99]");
}

/// Run by [`the_client_stays_under_twice_its_limit_against_the_bomb`] in a
/// child process, against the parent's agent. Run alone (no variables),
/// the same call against a small bomb of its own.
#[test]
fn bomb_child() {
    match (std::env::var(URL_VAR), std::env::var(LIMIT_VAR)) {
        (Ok(url), Ok(limit)) => {
            let limit: usize = limit.parse().unwrap();
            respond_to_the_bomb(&url, limit, (limit - 2) / 2);
            // Time for the parent to read the high-water mark once more.
            std::thread::sleep(Duration::from_millis(200));
        }
        _ => {
            let limit = MIB;
            let (body, n) = zeros(limit - 1);
            let server = bomb_agent(body);
            respond_to_the_bomb(&server.url(), limit, n);
        }
    }
}

/// The acceptance of issue 20 for magma-client, at a quarter of the
/// default limit (16 MiB, an answer of 16 MiB less a byte) so that the
/// debug build runs it in seconds.
#[test]
fn the_client_stays_under_twice_its_limit_against_the_bomb() {
    let limit = 16 * MIB;
    let (body, _) = zeros(limit - 1);
    let server = bomb_agent(body);
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["hostile::bomb_child", "--exact", "--test-threads", "1"])
        .env(URL_VAR, server.url())
        .env(LIMIT_VAR, limit.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut peak_kib = 0;
    let status = loop {
        if let Some(kib) = peak_rss_kib(pid) {
            peak_kib = peak_kib.max(kib);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(status.success(), "the child's call went wrong: {status}");
    let limit_kib = (limit / 1024) as u64;
    eprintln!("magma-client against a 16 MiB bomb: peak {peak_kib} KiB");
    // It held the answer (the readings saw the peak), and not twice.
    assert!(peak_kib > limit_kib * 9 / 10, "{peak_kib} KiB");
    assert!(peak_kib < 2 * limit_kib, "{peak_kib} KiB");
}
