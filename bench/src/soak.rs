//! `cargo xtask soak [--minutes N]`: N minutes (default 5) of mixed load on loopback against
//! the release `magma-server` binary, watching its resident memory.
//!
//! Load, one thread per kind, each looping until the deadline (and at most `MAX_PER_WORKER`
//! requests), on 127.0.0.1 only:
//! - `valid`: a new connection per request, random batches (1-4 inputs, 1-3 outputs, `user`
//!   and `env` with tools, memory carried over from the previous answer); the answer must be
//!   a valid `AgentResponse` matching the request;
//! - `keepalive`: the same on one HTTP/1.1 connection, reopened every 200 requests;
//! - `invalid`: bad JSON, invalid requests (422), a foreign content type (415), an unknown
//!   path (404), a wrong method (405), a declared body over `--max-body-bytes` (413);
//! - `slow` (2 threads): `extra_keys.delay_ms` 100-1500 ms, answered 200 after the delay;
//! - `health`: `GET /health` and `GET /v1/info` on new connections.
//!
//! Any other status, an I/O error or an invalid answer is an error, and any error fails the
//! run. RSS (`VmRSS` of `/proc/<pid>/status`) is sampled every `SAMPLE_EVERY`; an upward
//! trend, defined as the median of the last minute's samples above the median of the first
//! minute's by more than 10 %, fails the run. Samples go to `<target>/xtask/soak/rss.csv`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use magma_protocol::routes::Endpoint;
use magma_protocol::{AgentRequest, AgentResponse};
use magma_testkit::Rng;
use magma_testkit::process::ChildGuard;

use crate::process::free_port;

const RESPONSES: &str = Endpoint::Responses.path();

/// Requests one worker sends at most, whatever the duration.
const MAX_PER_WORKER: u64 = 2_000_000;
/// Time between two RSS samples.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// The body limit the server runs with (the 413 case sends more).
const MAX_BODY: u64 = 1 << 20;
/// Allowed growth of the last minute's median RSS over the first minute's.
const TREND_LIMIT: f64 = 0.10;

/// Options of `cargo xtask soak`.
#[derive(Debug, PartialEq, clap::Args)]
pub struct Options {
    /// Minutes of load (1 to 1440).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1440))]
    pub minutes: u64,
}

/// What one worker did.
#[derive(Debug, Default)]
struct Tally {
    kind: &'static str,
    requests: u64,
    connections: u64,
    errors: Vec<String>,
}

impl Tally {
    fn error(&mut self, what: String) {
        if self.errors.len() < 20 {
            self.errors.push(what);
        } else if self.errors.len() == 20 {
            self.errors.push("(more errors not kept)".into());
        }
    }
}

pub fn run(options: &Options) -> Result<()> {
    let root = crate::project_root()?;
    eprintln!("xtask soak: building the release magma-server");
    let bin = crate::process::build_magma_server(&root, true, false)?;
    let dir = crate::xtask_dir()?.join("soak");
    std::fs::create_dir_all(&dir)?;
    let port = free_port()?;
    let log = std::fs::File::create(dir.join("server.log"))?;
    let mut server = ChildGuard::new(
        Command::new(&bin)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--max-body-bytes", &MAX_BODY.to_string()])
            .args(["--max-concurrent-inferences", "16"])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?,
    );
    let addr: SocketAddr = ([127, 0, 0, 1], port).into();
    let started = Instant::now();
    while TcpStream::connect(addr).is_err() {
        if let Some(status) = server.child().try_wait()? {
            bail!("magma-server exited at start ({status})");
        }
        if started.elapsed() > Duration::from_secs(30) {
            bail!("magma-server did not listen within 30 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let pid = server.id();
    let duration = Duration::from_secs(options.minutes * 60);
    eprintln!(
        "xtask soak: {} min of mixed load on {addr} (pid {pid}), RSS every {} s",
        options.minutes,
        SAMPLE_EVERY.as_secs()
    );

    let deadline = Instant::now() + duration;
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    let kinds: [(&'static str, u64); 6] = [
        ("valid", 1),
        ("keepalive", 2),
        ("invalid", 3),
        ("slow", 4),
        ("slow", 5),
        ("health", 6),
    ];
    for (kind, seed) in kinds {
        let stop = Arc::clone(&stop);
        workers.push(std::thread::spawn(move || {
            worker(kind, seed, addr, deadline, &stop)
        }));
    }

    let mut samples: Vec<(f64, u64)> = Vec::new();
    let t0 = Instant::now();
    while Instant::now() < deadline {
        if let Some(status) = server.child().try_wait()? {
            stop.store(true, Ordering::SeqCst);
            bail!("magma-server exited during the soak ({status})");
        }
        samples.push((t0.elapsed().as_secs_f64(), rss_kib(pid)?));
        let next = Instant::now() + SAMPLE_EVERY;
        while Instant::now() < next.min(deadline) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    stop.store(true, Ordering::SeqCst);
    let tallies: Vec<Tally> = workers
        .into_iter()
        .map(|w| w.join().expect("a soak worker panicked"))
        .collect();
    samples.push((t0.elapsed().as_secs_f64(), rss_kib(pid)?));
    if let Some(status) = server.child().try_wait()? {
        bail!("magma-server exited during the soak ({status})");
    }
    let after = get(addr, Endpoint::Health.path());
    drop(server);

    let csv: String = std::iter::once("seconds,rss_kib\n".to_owned())
        .chain(samples.iter().map(|(t, r)| format!("{t:.1},{r}\n")))
        .collect();
    std::fs::write(dir.join("rss.csv"), csv)?;

    let total: u64 = tallies.iter().map(|t| t.requests).sum();
    let secs = t0.elapsed().as_secs_f64();
    println!(
        "soak: {:.1} min, {total} requests ({:.0}/s), server pid {pid}",
        secs / 60.0,
        total as f64 / secs
    );
    println!(
        "soak: {:<10} {:>10} {:>12} {:>7}",
        "kind", "requests", "connections", "errors"
    );
    let mut errors = Vec::new();
    for t in &tallies {
        println!(
            "soak: {:<10} {:>10} {:>12} {:>7}",
            t.kind,
            t.requests,
            t.connections,
            t.errors.len()
        );
        errors.extend(t.errors.iter().map(|e| format!("{}: {e}", t.kind)));
    }
    let trend = Trend::of(&samples);
    println!(
        "soak: RSS KiB: start {}, first-minute median {}, last-minute median {}, max {}, end {} \
         ({} samples, growth {:+.1} %, limit +{:.0} %)",
        samples.first().map_or(0, |s| s.1),
        trend.first_median,
        trend.last_median,
        trend.max,
        samples.last().map_or(0, |s| s.1),
        samples.len(),
        trend.growth() * 100.0,
        TREND_LIMIT * 100.0
    );
    match after {
        Ok((200, _)) => {}
        other => errors.push(format!("{} after the soak: {other:?}", Endpoint::Health)),
    }
    if !errors.is_empty() {
        bail!(
            "{} unexpected answers or errors:\n{}",
            errors.len(),
            errors.join("\n")
        );
    }
    if trend.growth() > TREND_LIMIT {
        bail!(
            "memory trends upward: last-minute median {} KiB vs first-minute median {} KiB \
             (samples in {})",
            trend.last_median,
            trend.first_median,
            dir.join("rss.csv").display()
        );
    }
    println!("soak: no unexpected answer, no upward memory trend");
    Ok(())
}

/// The medians the trend rule compares.
#[derive(Debug, PartialEq)]
struct Trend {
    first_median: u64,
    last_median: u64,
    max: u64,
}

impl Trend {
    fn of(samples: &[(f64, u64)]) -> Trend {
        let end = samples.last().map_or(0.0, |s| s.0);
        let median = |mut v: Vec<u64>| {
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        };
        Trend {
            first_median: median(
                samples
                    .iter()
                    .filter(|s| s.0 <= 60.0)
                    .map(|s| s.1)
                    .collect(),
            ),
            last_median: median(
                samples
                    .iter()
                    .filter(|s| s.0 >= end - 60.0)
                    .map(|s| s.1)
                    .collect(),
            ),
            max: samples.iter().map(|s| s.1).max().unwrap_or(0),
        }
    }

    fn growth(&self) -> f64 {
        if self.first_median == 0 {
            return 0.0;
        }
        self.last_median as f64 / self.first_median as f64 - 1.0
    }
}

fn rss_kib(pid: u32) -> Result<u64> {
    magma_testkit::process::rss_kib(pid).context("no VmRSS in /proc/<pid>/status")
}

fn worker(
    kind: &'static str,
    seed: u64,
    addr: SocketAddr,
    deadline: Instant,
    stop: &AtomicBool,
) -> Tally {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (seed * 0x1000_0001));
    let mut tally = Tally {
        kind,
        ..Tally::default()
    };
    let mut memory = String::from("{}");
    let mut conn: Option<TcpStream> = None;
    let mut on_conn = 0;
    while Instant::now() < deadline && !stop.load(Ordering::Relaxed) {
        if tally.requests >= MAX_PER_WORKER {
            break;
        }
        tally.requests += 1;
        let n = tally.requests;
        let outcome: Result<()> = match kind {
            "valid" | "keepalive" => {
                let request = valid_request(&mut rng, n, &memory);
                let reply = if kind == "keepalive" {
                    if conn.is_none() || on_conn >= 200 {
                        conn = TcpStream::connect(addr).ok();
                        tally.connections += 1;
                        on_conn = 0;
                    }
                    on_conn += 1;
                    match conn.as_mut() {
                        Some(stream) => exchange(stream, "POST", RESPONSES, JSON, &request, true),
                        None => Err(anyhow::anyhow!("connect failed")),
                    }
                } else {
                    tally.connections += 1;
                    post(addr, RESPONSES, JSON, &request)
                };
                match reply {
                    Ok((200, body)) => check_answer(&request, &body).map(|m| memory = m),
                    Ok((status, body)) => Err(anyhow::anyhow!(
                        "status {status}: {}",
                        String::from_utf8_lossy(&body)
                    )),
                    Err(e) => {
                        conn = None;
                        Err(e)
                    }
                }
            }
            "invalid" => {
                tally.connections += 1;
                invalid(&mut rng, addr, n)
            }
            "slow" => {
                tally.connections += 1;
                let delay = 100 + rng.below(1400);
                let request = format!(
                    r#"{{"request_id":"slow-{seed}-{n}","inputs":[{{"id":0,"instruction":{{"type":"user","content":"slow"}},"extra_keys":{{"delay_ms":{delay}}}}}]}}"#
                );
                let started = Instant::now();
                match post(addr, RESPONSES, JSON, &request) {
                    Ok((200, body)) => check_answer(&request, &body).and_then(|_| {
                        let took = started.elapsed();
                        if took < Duration::from_millis(delay) {
                            bail!("answered after {took:?}, before its {delay} ms delay");
                        }
                        Ok(())
                    }),
                    Ok((status, _)) => Err(anyhow::anyhow!("status {status}")),
                    Err(e) => Err(e),
                }
            }
            _ => {
                tally.connections += 1;
                let path = if n.is_multiple_of(2) {
                    Endpoint::Health.path()
                } else {
                    Endpoint::Info.path()
                };
                match get(addr, path) {
                    Ok((200, _)) => Ok(()),
                    Ok((status, _)) => Err(anyhow::anyhow!("{path}: status {status}")),
                    Err(e) => Err(e),
                }
            }
        };
        if let Err(e) = outcome {
            tally.error(format!("request {n}: {e:#}"));
        }
    }
    tally
}

const JSON: &str = "application/json";

/// A random valid batch whose memory is the previous answer's.
fn valid_request(rng: &mut Rng, n: u64, memory: &str) -> String {
    let inputs: Vec<String> = (0..1 + rng.below(4))
        .map(|i| {
            let outputs = 1 + rng.below(3);
            let instruction = if rng.below(2) == 0 {
                format!(r#"{{"type":"user","content":"take the cube {n}-{i} to the shelf \u00e9\u4e16"}}"#)
            } else {
                r#"{"type":"env","content":"{\"infos\": \"panda: press_button succeed with message: ok\"}"}"#.to_owned()
            };
            format!(
                r#"{{"id":{i},"instruction":{instruction},"tools":[{{"name":"press_button","description":"Press.","arguments":{{"id":{{"type":"str","description":"button"}}}}}}],"attributes":{{"known_robots":["panda","ur5"]}},"memory":{memory},"num_outputs":{outputs},"extra_keys":{{"big":{big},"f":1.0}}}}"#,
                big = "1".repeat(30),
            )
        })
        .collect();
    format!(
        r#"{{"request_id":"soak-{n}","inputs":[{}]}}"#,
        inputs.join(",")
    )
}

/// Checks a 200 answer against its request; returns the first candidate's memory, to send
/// back next time (bounded: its `steps` counter is reset past 1000 steps).
fn check_answer(request: &str, body: &[u8]) -> Result<String> {
    let req = AgentRequest::from_slice(request.as_bytes()).context("our own request")?;
    let resp = AgentResponse::from_slice(body).context("invalid AgentResponse")?;
    resp.validate_request(&req)
        .map_err(|e| anyhow::anyhow!("candidates do not match: {e}"))?;
    let first = resp.candidates().first().context("no candidate")?;
    let steps = first
        .memory
        .get("steps")
        .and_then(magma_protocol::Json::as_i64)
        .unwrap_or(0);
    if steps > 1000 {
        return Ok("{}".to_owned());
    }
    Ok(magma_protocol::Json::Object(first.memory.clone()).to_json_string())
}

/// One of the invalid requests, with the status it must get.
fn invalid(rng: &mut Rng, addr: SocketAddr, n: u64) -> Result<()> {
    let (expected, reply) = match rng.below(7) {
        0 => (422, post(addr, RESPONSES, JSON, "{\"request_id\": ")),
        1 => (
            422,
            post(
                addr,
                RESPONSES,
                JSON,
                &format!(
                    r#"{{"request_id":"bad-{n}","inputs":[{{"id":1.5,"instruction":{{"type":"user","content":"x"}}}}]}}"#
                ),
            ),
        ),
        2 => (
            422,
            post(
                addr,
                RESPONSES,
                JSON,
                r#"{"request_id":"dup","inputs":[{"id":0,"instruction":{"type":"user","content":"a"}},{"id":0,"instruction":{"type":"user","content":"b"}}]}"#,
            ),
        ),
        3 => (415, post(addr, RESPONSES, "text/plain", "{}")),
        4 => (404, get(addr, &format!("/nowhere/{n}"))),
        5 => (405, get(addr, RESPONSES)),
        _ => (413, too_large(addr)),
    };
    match reply {
        Ok((status, _)) if status == expected => Ok(()),
        Ok((status, body)) => bail!(
            "expected {expected}, got {status}: {}",
            String::from_utf8_lossy(&body)
        ),
        Err(e) => Err(e.context(format!("expecting {expected}"))),
    }
}

/// Announces a body over the limit and sends only its start: the server answers 413 at once.
fn too_large(addr: SocketAddr) -> Result<(u16, Vec<u8>)> {
    let mut stream = connect(addr)?;
    let head = format!(
        "POST {RESPONSES} HTTP/1.1\r\nHost: soak\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{{\"request_id\"",
        MAX_BODY * 4
    );
    stream.write_all(head.as_bytes())?;
    read_reply(&mut stream)
}

fn connect(addr: SocketAddr) -> Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    stream.set_write_timeout(Some(Duration::from_secs(30)))?;
    Ok(stream)
}

fn post(addr: SocketAddr, path: &str, content_type: &str, body: &str) -> Result<(u16, Vec<u8>)> {
    exchange(&mut connect(addr)?, "POST", path, content_type, body, false)
}

fn get(addr: SocketAddr, path: &str) -> Result<(u16, Vec<u8>)> {
    exchange(&mut connect(addr)?, "GET", path, "", "", false)
}

/// One HTTP/1.1 request on `stream` (`Connection: close` unless `keep_alive`).
fn exchange(
    stream: &mut TcpStream,
    method: &str,
    path: &str,
    content_type: &str,
    body: &str,
    keep_alive: bool,
) -> Result<(u16, Vec<u8>)> {
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: soak\r\n");
    if !keep_alive {
        head.push_str("Connection: close\r\n");
    }
    if method == "POST" {
        head.push_str(&format!(
            "Content-Type: {content_type}\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    head.push_str(body);
    stream.write_all(head.as_bytes())?;
    read_reply(stream)
}

/// Reads one response with a `Content-Length` body.
fn read_reply(stream: &mut TcpStream) -> Result<(u16, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            bail!("connection closed before a response");
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let status: u16 = head
        .get(9..12)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("no status in {head:?}"))?;
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .with_context(|| format!("no content-length in {head:?}"))?;
    while buf.len() < head_end + len {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            bail!("connection closed inside the body");
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok((status, buf[head_end..head_end + len].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse() {
        let args = |s: &[&str]| s.iter().map(|a| (*a).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            magma_harness::parse_args::<Options>("soak", &[]).unwrap(),
            Options { minutes: 5 }
        );
        assert_eq!(
            magma_harness::parse_args::<Options>("soak", &args(&["--minutes", "2"])).unwrap(),
            Options { minutes: 2 }
        );
        assert!(magma_harness::parse_args::<Options>("soak", &args(&["--minutes", "0"])).is_err());
        assert!(magma_harness::parse_args::<Options>("soak", &args(&["--hours", "1"])).is_err());
    }

    #[test]
    fn the_trend_compares_first_and_last_minute_medians() {
        let flat: Vec<(f64, u64)> = (0..60).map(|i| (i as f64 * 5.0, 10_000 + i % 3)).collect();
        assert!(Trend::of(&flat).growth().abs() < 0.01);
        let rising: Vec<(f64, u64)> = (0..60)
            .map(|i| (i as f64 * 5.0, 10_000 + i * 100))
            .collect();
        let t = Trend::of(&rising);
        assert!(t.growth() > TREND_LIMIT, "{t:?}");
        assert_eq!(t.max, 10_000 + 59 * 100);
    }

    #[test]
    fn generated_requests_are_valid() {
        let mut rng = Rng(7);
        for n in 0..50 {
            let r = valid_request(&mut rng, n, r#"{"steps": 3, "x": [1, 2.0]}"#);
            AgentRequest::from_slice(r.as_bytes()).unwrap_or_else(|e| panic!("{e}: {r}"));
        }
    }
}
