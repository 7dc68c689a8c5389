//! `--only proxy`: what `magma-validate proxy` costs in front of
//! `magma-server` (issue 36): requests/s and p99 latency through the proxy
//! against the same server directly, interleaved, under the HTTP section's
//! BENCH-like load (8-input body, keep-alive connections); and the proxy's
//! peak resident memory while it is sent the attack suite's large bodies.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use magma_protocol::routes::Endpoint;

use super::{Bench, Proc, Spread, bench_like, post, rss_mib};

/// Run only the memory part (`MAGMA_BENCH_PROXY_MEMORY_ONLY=1`), e.g. to
/// repeat it without the wrk runs.
const MEMORY_ONLY: &str = "MAGMA_BENCH_PROXY_MEMORY_ONLY";

/// The proxy's limits in the memory run: magma-server's default request
/// limit, and a budget of four such bodies.
const BODY_LIMIT: u64 = 16 << 20;
const BUDGET: u64 = 64 << 20;

impl Bench {
    fn start_proxy(&mut self, upstream_port: u16, extra: &[&str]) -> Result<Proc> {
        let port = crate::process::free_port()?;
        let mut cmd = Command::new(self.bin.join("magma-validate"));
        cmd.args([
            "proxy",
            "--upstream",
            &format!("http://127.0.0.1:{upstream_port}"),
            "--listen",
            &format!("127.0.0.1:{port}"),
        ])
        .args(extra)
        .stderr(std::process::Stdio::null());
        self.note_command(&cmd, "");
        let p = Proc::spawn("magma-validate proxy", &mut cmd, port)?;
        p.wait(Duration::from_secs(30))?;
        Ok(p)
    }

    pub(super) fn proxy(&mut self) -> Result<()> {
        if std::env::var_os(MEMORY_ONLY).is_some() {
            return self.proxy_memory();
        }
        let script = self.dir.join("post.lua");
        std::fs::write(&script, super::WRK_SCRIPT)?;
        let body_path = self.dir.join("body8.json");
        std::fs::write(&body_path, bench_like::http_body(8))?;
        let magma = self.start_magma(None)?;
        let proxy = self.start_proxy(magma.port, &[])?;
        let (code, direct) = post(magma.port, &std::fs::read(&body_path)?)?;
        let (code_p, through) = post(proxy.port, &std::fs::read(&body_path)?)?;
        if code != 200 || code_p != 200 || direct != through {
            bail!("the proxy's answer differs from magma-server's ({code} vs {code_p})");
        }
        for port in [magma.port, proxy.port] {
            self.wrk(port, false, &script, &body_path, 16, 1, false)?;
        }
        let reps = self.opts.reps;
        let secs = self.opts.secs;
        for conns in [1usize, 16, 64] {
            let (mut rps, mut p99) = (Vec::new(), Vec::new());
            let (mut d_rps, mut p_rps, mut d_p99, mut p_p99) =
                (Vec::new(), Vec::new(), Vec::new(), Vec::new());
            for _ in 0..reps {
                let d = self.wrk(magma.port, false, &script, &body_path, conns, secs, false)?;
                let p = self.wrk(proxy.port, false, &script, &body_path, conns, secs, false)?;
                rps.push(p.rps / d.rps);
                p99.push(p.p99_ms - d.p99_ms);
                d_rps.push(d.rps);
                p_rps.push(p.rps);
                d_p99.push(d.p99_ms);
                p_p99.push(p.p99_ms);
            }
            self.row(
                format!(
                    "8-input, {conns} keep-alive conn.: requests/s through the proxy vs direct"
                ),
                format!(
                    "proxy {} req/s vs magma-server {}: **{}**",
                    Spread::of(p_rps).num(),
                    Spread::of(d_rps).num(),
                    Spread::of(rps).x()
                ),
                "(reported)",
                None,
            );
            self.row(
                format!("8-input, {conns} keep-alive conn.: p99 latency added by the proxy"),
                format!(
                    "proxy {} ms vs magma-server {} ms: **+{} ms**",
                    Spread::of(p_p99).num(),
                    Spread::of(d_p99).num(),
                    Spread::of(p99).num()
                ),
                "(reported)",
                None,
            );
        }
        drop((proxy, magma));
        self.notes.push(
            "proxy: `magma-validate proxy` (release, default limits, no --record) in front of \
             the same magma-server; wrk runs direct and through the proxy alternate; the added \
             p99 is the proxy's p99 minus the direct p99 of the same repetition"
                .to_owned(),
        );
        self.proxy_memory()
    }

    /// The proxy's peak memory (VmHWM) under the attack suite's large
    /// bodies: 8 clients at once, each a valid request of 15 MiB (answered
    /// with a 15 MiB echo), a body declared over the limit, a body without
    /// Content-Length over the limit (chunked), three rounds.
    fn proxy_memory(&mut self) -> Result<()> {
        let magma = self.start_magma(None)?;
        let proxy = self.start_proxy(
            magma.port,
            &[
                "--max-body-bytes",
                &BODY_LIMIT.to_string(),
                "--max-total-body-bytes",
                &BUDGET.to_string(),
            ],
        )?;
        let small = bench_like::http_body(8);
        let _ = post(proxy.port, small.as_bytes())?;
        std::thread::sleep(Duration::from_millis(300));
        let idle = rss_mib(proxy.pid())?;
        let large = format!(
            r#"{{"request_id":"large","inputs":[{{"id":1,"instruction":{{"type":"user","content":"{}"}}}}]}}"#,
            "a".repeat(15 << 20)
        );
        let port = proxy.port;
        let mut statuses = std::collections::BTreeMap::<u16, u32>::new();
        for _ in 0..3 {
            let handles: Vec<_> = (0..8)
                .map(|i| {
                    let body = large.clone();
                    std::thread::spawn(move || -> Result<u16> {
                        match i % 4 {
                            // Declared over the limit: refused before it is read.
                            3 => Ok(declared_over(port)?),
                            // Chunked over the limit: read up to it, then 413.
                            2 => Ok(chunked_over(port)?),
                            _ => Ok(post_large(port, body.as_bytes())?),
                        }
                    })
                })
                .collect();
            for h in handles {
                let code = h
                    .join()
                    .map_err(|_| anyhow::anyhow!("a client panicked"))??;
                *statuses.entry(code).or_default() += 1;
            }
        }
        let peak = hwm_mib(proxy.pid())?;
        drop((proxy, magma));
        let limit_mib = BUDGET as f64 / (1 << 20) as f64;
        let answers: Vec<String> = statuses.iter().map(|(k, v)| format!("{v} x {k}")).collect();
        self.row(
            "proxy peak resident memory under large bodies (budget 64 MiB)",
            format!(
                "idle {idle:.1} MiB, peak {peak:.1} MiB: **{:.2} x the budget** (answers: {})",
                peak / limit_mib,
                answers.join(", ")
            ),
            "<= 2 x the budget",
            Some(peak <= 2.0 * limit_mib),
        );
        self.notes.push(format!(
            "proxy memory: --max-body-bytes {BODY_LIMIT} --max-total-body-bytes {BUDGET}; three \
             rounds of 8 clients at once: 4 valid 15 MiB requests (magma-server echoes them: a \
             15 MiB answer), 2 chunked bodies of 20 MiB, 2 declaring 20 MiB; peak = VmHWM of \
             the proxy process from /proc/PID/status"
        ));
        Ok(())
    }
}

/// Peak resident memory (VmHWM), MiB.
fn hwm_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .context("no VmHWM")?;
    Ok(kib / 1024.0)
}

fn status_of(s: &mut TcpStream) -> Result<u16> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&head)
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no status code")
}

/// A large valid request; the proxy may refuse it (`503`, the budget in
/// use) before reading it all, so a failed write still reads the status.
fn post_large(port: u16, body: &[u8]) -> Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(60)))?;
    let sent = write!(
        s,
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        Endpoint::Responses,
        body.len()
    )
    .and_then(|()| s.write_all(body));
    let status = status_of(&mut s);
    match (sent, status) {
        (_, Ok(code)) => {
            // Read the answer to its end, as a client does.
            let mut sink = Vec::new();
            let _ = s.read_to_end(&mut sink);
            Ok(code)
        }
        (Err(e), Err(_)) => Err(e.into()),
        (Ok(()), Err(e)) => Err(e),
    }
}

/// A request declaring 20 MiB: the proxy answers 413 before reading it.
fn declared_over(port: u16) -> Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        Endpoint::Responses,
        20u64 << 20
    )?;
    status_of(&mut s)
}

/// 20 MiB in 1 MiB chunks without Content-Length: read up to the limit, then 413.
fn chunked_over(port: u16) -> Result<u16> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        Endpoint::Responses,
    );
    s.write_all(head.as_bytes())?;
    let chunk = vec![b'b'; 1 << 20];
    for _ in 0..20 {
        let sent = write!(s, "{:x}\r\n", chunk.len())
            .and_then(|()| s.write_all(&chunk))
            .and_then(|()| s.write_all(b"\r\n"));
        if sent.is_err() {
            // The proxy answered and closed: read its status.
            break;
        }
    }
    let _ = s.write_all(b"0\r\n\r\n");
    status_of(&mut s)
}
