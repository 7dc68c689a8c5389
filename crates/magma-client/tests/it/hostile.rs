//! A hostile agent answering a `[0,0,...]` bomb, or many small valid
//! candidates, just under the response limit: the client's peak memory
//! stays under twice the limit; its error keeps the first 100 problems of
//! the bomb, counting the rest, and refuses the candidates the request did
//! not ask for before building any.
//!
//! The memory is measured in a child process (this test binary run again
//! for [`bomb_child`] alone), whose peak resident memory (`VmHWM`) is read
//! while it runs, so that other tests of this binary do not count.

use std::process::{Command, Stdio};
use std::time::Duration;

use magma_client::{Client, ErrorKind};
use magma_testkit::fixtures::many_candidates;
use magma_testkit::process::peak_rss_kib;

use crate::support::{Reply, StubServer, info_json, request};

const MIB: usize = 1 << 20;
const URL_VAR: &str = "MAGMA_CLIENT_BOMB_URL";
const LIMIT_VAR: &str = "MAGMA_CLIENT_BOMB_LIMIT";
const KIND_VAR: &str = "MAGMA_CLIENT_BOMB_KIND";

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

/// What a hostile agent answers.
#[derive(Clone, Copy, Debug)]
enum Bomb {
    /// `[0,0,...]`.
    Zeros,
    /// Valid candidates, far more than the one asked for.
    Candidates,
    /// The one candidate asked for, with an unknown key holding a string
    /// as long as the rest of the answer: one error, whose input is that
    /// string.
    UnknownValue,
    /// The one candidate asked for, valid, its `memory` an object of
    /// unique keys as long as the rest of the answer: kept as its text.
    HugeMemory,
    /// The same with the object's first key repeated at its end: the
    /// reference's reading (the last value at the first place) kept as
    /// its text.
    RepeatedKeyMemory,
}

const OPEN: &str = r#"[{"request_id":"bomb","source_id":10,"candidate_index":0,"status":"completed","output":{"say":"hi"},"#;
const CLOSE: &str = "}]";

/// The length of the tail of [`one_candidate`] of `bytes` bytes.
fn tail_len(bytes: usize) -> usize {
    bytes - OPEN.len() - CLOSE.len()
}

/// [`huge_memory`] whose padding entry is followed by `"k00000000":1`, a
/// repeat of its first key, `n` bytes.
fn repeated_key_memory(n: usize) -> String {
    let repeat = r#","k00000000":1"#;
    let mut out = huge_memory(n - repeat.len());
    out.insert_str(out.len() - 1, repeat);
    assert_eq!(out.len(), n);
    out
}

/// The one candidate a request `bomb` asks for (input 10), `bytes` long:
/// `tail` (`"memory":{},"zzz":"xx..."` or `"memory":{...}`) sized to fill it.
fn one_candidate(bytes: usize, tail: impl Fn(usize) -> String) -> Vec<u8> {
    let doc = format!("{OPEN}{}{CLOSE}", tail(tail_len(bytes)));
    assert_eq!(doc.len(), bytes);
    doc.into_bytes()
}

/// `"memory":{},"zzz":"xx...x"`, `n` bytes.
fn unknown_string(n: usize) -> String {
    let out = format!(r#""memory":{{}},"zzz":"{}""#, "x".repeat(n - 20));
    assert_eq!(out.len(), n);
    out
}

/// `"memory":{"k0000000":0,...}`, `n` bytes: keys of 8 digits, the last
/// value padded with a string to fill.
fn huge_memory(n: usize) -> String {
    let mut out = String::with_capacity(n);
    out.push_str(r#""memory":{"#);
    let mut i = 0;
    // Room for one more entry and the padding entry of at least 16 bytes.
    while out.len() + 15 + 16 + 1 < n {
        out.push_str(&format!(r#""k{i:08}":0,"#));
        i += 1;
    }
    let pad = n - out.len() - r#""pad":"""#.len() - 1;
    out.push_str(&format!(r#""pad":"{}"}}"#, "p".repeat(pad)));
    assert_eq!(out.len(), n);
    out
}

impl Bomb {
    const ALL: [Bomb; 5] = [
        Bomb::Zeros,
        Bomb::Candidates,
        Bomb::UnknownValue,
        Bomb::HugeMemory,
        Bomb::RepeatedKeyMemory,
    ];

    fn name(self) -> &'static str {
        match self {
            Bomb::Zeros => "zeros",
            Bomb::Candidates => "candidates",
            Bomb::UnknownValue => "unknown-value",
            Bomb::HugeMemory => "huge-memory",
            Bomb::RepeatedKeyMemory => "repeated-key-memory",
        }
    }

    fn body(self, bytes: usize) -> Vec<u8> {
        match self {
            Bomb::Zeros => zeros(bytes).0,
            Bomb::Candidates => many_candidates("bomb", 10, bytes).0,
            Bomb::UnknownValue => one_candidate(bytes, unknown_string),
            Bomb::HugeMemory => one_candidate(bytes, huge_memory),
            Bomb::RepeatedKeyMemory => one_candidate(bytes, repeated_key_memory),
        }
    }
}

/// One `respond` (one input, one candidate asked for) against `bomb` at
/// `url` with `limit`, the bomb `limit - 1` bytes long: the bomb is an
/// invalid body, 100 errors kept, the others counted; the candidates are
/// refused at the second one, before any is built.
fn respond_to(bomb: Bomb, url: &str, limit: usize) {
    let client = Client::builder(url)
        .max_response_bytes(limit as u64)
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap();
    let result = client.respond(&request("bomb", 1, 1));
    if let Bomb::HugeMemory | Bomb::RepeatedKeyMemory = bomb {
        // Valid: the memory comes back as text (one lookup of one key,
        // which reads no other entry): the text it was read from, or
        // without the repeat, whose value took the first key's place.
        let response = result.unwrap();
        let memory = &response.candidates()[0].memory;
        let tail = huge_memory(tail_len(limit - 1));
        let written = tail.len() - r#""memory":"#.len();
        if let Bomb::HugeMemory = bomb {
            assert_eq!(memory.json_len_hint(), written);
            let pad = memory.get_str("pad").unwrap();
            assert!(pad.len() > 10 && pad.bytes().all(|b| b == b'p'));
        } else {
            let repeat = r#","k00000000":1"#.len();
            assert_eq!(memory.json_len_hint(), written - repeat);
            assert_eq!(memory.get("k00000000").and_then(|v| v.as_i64()), Some(1));
        }
        return;
    }
    let err = result.unwrap_err();
    match (bomb, err.kind()) {
        (Bomb::Zeros, ErrorKind::InvalidBody(e)) => {
            let n = (limit - 2) / 2;
            assert_eq!(e.issues().len(), 100);
            assert_eq!(e.omitted(), n - 100);
            assert_eq!(e.issues()[99].location().to_string(), "[99]");
        }
        (Bomb::Candidates, ErrorKind::CandidateMismatch(m)) => {
            assert_eq!((m.position, &m.expected, &m.found), (1, &None, &None));
            assert!(
                err.to_string()
                    .contains("the request asks for 1 candidates and the response holds more"),
                "{err}"
            );
        }
        (Bomb::UnknownValue, ErrorKind::InvalidBody(e)) => {
            assert_eq!((e.issues().len(), e.omitted()), (1, 0), "{e}");
            let issue = e.first();
            assert_eq!(issue.kind().as_str(), "extra_forbidden");
            assert!(issue.location().to_string().contains("zzz"), "{issue:?}");
            // The input is the whole string, kept as its text.
            let head = issue.input_text_head(20).unwrap();
            assert!(head.starts_with("\"xxxx"), "{head}");
        }
        _ => panic!("{bomb:?}: {err:?}"),
    }
}

/// Run by [`the_client_stays_under_twice_its_limit_against_the_bomb`] in a
/// child process, against the parent's agent. Run alone (no variables),
/// the same calls against small bombs of its own.
#[test]
fn bomb_child() {
    match (
        std::env::var(URL_VAR),
        std::env::var(LIMIT_VAR),
        std::env::var(KIND_VAR),
    ) {
        (Ok(url), Ok(limit), Ok(kind)) => {
            let limit: usize = limit.parse().unwrap();
            let bomb = Bomb::ALL.into_iter().find(|b| b.name() == kind).unwrap();
            respond_to(bomb, &url, limit);
            // Time for the parent to read the high-water mark once more.
            std::thread::sleep(Duration::from_millis(200));
        }
        _ => {
            let limit = MIB;
            for bomb in Bomb::ALL {
                let server = bomb_agent(bomb.body(limit - 1));
                respond_to(bomb, &server.url(), limit);
            }
        }
    }
}

/// `respond` in a child process against an agent answering `bomb`, just
/// under `limit`; the child's peak resident memory in KiB.
fn child_peak_kib(bomb: Bomb, limit: usize) -> u64 {
    let server = bomb_agent(bomb.body(limit - 1));
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["hostile::bomb_child", "--exact", "--test-threads", "1"])
        .env(URL_VAR, server.url())
        .env(LIMIT_VAR, limit.to_string())
        .env(KIND_VAR, bomb.name())
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
    assert!(
        status.success(),
        "{bomb:?}: the child's call went wrong: {status}"
    );
    peak_kib
}

/// The acceptance of issue 20 for magma-client, at a quarter of the
/// default limit (16 MiB, an answer of 16 MiB less a byte) so that the
/// debug build runs it in seconds.
#[test]
fn the_client_stays_under_twice_its_limit_against_the_bomb() {
    let limit = 16 * MIB;
    let peak_kib = child_peak_kib(Bomb::Zeros, limit);
    let limit_kib = (limit / 1024) as u64;
    eprintln!("magma-client against a 16 MiB bomb: peak {peak_kib} KiB");
    // It held the answer (the readings saw the peak), and not twice.
    assert!(peak_kib > limit_kib * 9 / 10, "{peak_kib} KiB");
    assert!(peak_kib < 2 * limit_kib, "{peak_kib} KiB");
}

/// The same bound against 16 MiB of small valid candidates (about 150,000)
/// answering a request for one: refused at the second, none built. Built,
/// they cost about 1.6 kB each, 15 times the body.
#[test]
fn the_client_stays_under_twice_its_limit_against_many_candidates() {
    let limit = 16 * MIB;
    let peak_kib = child_peak_kib(Bomb::Candidates, limit);
    let limit_kib = (limit / 1024) as u64;
    eprintln!("magma-client against 16 MiB of candidates: peak {peak_kib} KiB");
    assert!(peak_kib > limit_kib * 9 / 10, "{peak_kib} KiB");
    assert!(peak_kib < 2 * limit_kib, "{peak_kib} KiB");
}

/// Against an answer whose one candidate carries a 16 MiB text the client
/// keeps (an unknown key's string, which its one error echoes, or a valid
/// `memory` of a million keys, which the response holds as its text): the
/// body and that copy of it are held at once, so the client grows by
/// twice the answer, not by a tree of it (about 20 times). Measured as the
/// growth from a 1 MiB answer to a 16 MiB one, so that the test binary's
/// own baseline (about 11 MiB) does not count; 2.2 allows for allocator
/// rounding (`docs/security.md` has the figures).
fn assert_grows_by_at_most_twice(bomb: Bomb) {
    assert_grows_by_at_most(bomb, 22);
}

/// [`assert_grows_by_at_most_twice`] with a bound of `tenths` / 10 times
/// the answer's growth.
fn assert_grows_by_at_most(bomb: Bomb, tenths: u64) {
    let (small, large) = (MIB, 16 * MIB);
    let small_kib = child_peak_kib(bomb, small);
    let large_kib = child_peak_kib(bomb, large);
    let growth_kib = large_kib.saturating_sub(small_kib);
    let answer_growth_kib = ((large - small) / 1024) as u64;
    eprintln!(
        "magma-client against {bomb:?}: peak {small_kib} KiB at 1 MiB, {large_kib} KiB at \
         16 MiB: grew by {growth_kib} KiB for {answer_growth_kib} KiB more answer"
    );
    assert!(growth_kib > answer_growth_kib * 9 / 10, "{growth_kib} KiB");
    assert!(
        growth_kib < answer_growth_kib * tenths / 10,
        "{growth_kib} KiB"
    );
}

#[test]
fn the_client_keeps_a_huge_unknown_value_as_text_once() {
    assert_grows_by_at_most_twice(Bomb::UnknownValue);
}

#[test]
fn the_client_keeps_a_huge_valid_memory_as_text_once() {
    assert_grows_by_at_most_twice(Bomb::HugeMemory);
}

/// A repeated key: the object is kept as the text of the reference's
/// reading, written beside the body and then copied into the text the
/// response shares, with the set of its keys while they are checked: four
/// times the answer (measured 4.0), not the tree (about twenty times).
#[test]
fn the_client_keeps_a_huge_memory_with_a_repeated_key_as_text() {
    assert_grows_by_at_most(Bomb::RepeatedKeyMemory, 45);
}
