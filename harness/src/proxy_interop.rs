//! The part of `cargo xtask interop` that runs the Python clients through
//! `magma-validate proxy`: BENCH's client (`bench_client.py`) and GEN's
//! coaching client (`gen_coaching.py`) against `magma-server` and against
//! the FastAPI agent on magma-core 2.0.1, over HTTP and HTTPS, once directly
//! and once through the proxy. `dump_answers.py` writes down every answer
//! the client receives (with seeded request and run ids); the two dumps
//! must be identical byte for byte, the client's verdicts the same, and the
//! proxy's summary must count every exchange with no agent-side error.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use serde_json::Value;

use crate::process::{Guard, free_port, wait_for_port};

/// What the proxy runs need from `interop::run`.
#[derive(Debug)]
pub struct Tools<'a> {
    /// The interop venv's Python.
    pub python: &'a Path,
    /// The `magma-server` binary (with TLS).
    pub server: &'a Path,
    /// The `magma-validate` binary.
    pub validate: &'a Path,
    /// Where `magma-server --tls-self-signed` keeps `ca.pem`, `cert.pem`, `key.pem`.
    pub tls_dir: &'a Path,
    /// `harness/python`.
    pub scripts: &'a Path,
}

/// The proxy, stopped with SIGTERM (its summary is written then); killed
/// when dropped on an error path.
struct ProxyChild(Child);

impl Drop for ProxyChild {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

impl ProxyChild {
    fn stop(mut self) -> Result<i32> {
        let pid = self.0.id().to_string();
        let status = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .context("running kill -TERM")?;
        ensure!(status.success(), "kill -TERM {pid} failed");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.0.try_wait()? {
                return status
                    .code()
                    .context("magma-validate proxy ended by a signal");
            }
            if Instant::now() > deadline {
                bail!("magma-validate proxy did not stop within 30 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Runs one client with its answers dumped; returns its exit code and dump.
fn client_run(
    tools: &Tools<'_>,
    script: &str,
    url: &str,
    https: bool,
    dump: &Path,
) -> Result<(Option<i32>, Vec<u8>)> {
    let mut cmd = Command::new(tools.python);
    cmd.arg(tools.scripts.join("dump_answers.py"))
        .arg(dump)
        .arg(tools.scripts.join(script))
        .arg(url)
        .stdout(Stdio::null());
    if https {
        cmd.arg("--cacert").arg(tools.tls_dir.join("ca.pem"));
    }
    let status = cmd
        .status()
        .with_context(|| format!("running {script} against {url}"))?;
    let bytes = std::fs::read(dump).with_context(|| format!("reading {}", dump.display()))?;
    Ok((status.code(), bytes))
}

/// The first line where two dumps differ, for the error message.
fn first_difference(a: &[u8], b: &[u8]) -> String {
    let (a, b) = (String::from_utf8_lossy(a), String::from_utf8_lossy(b));
    for (i, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}: direct {x:.300} / proxied {y:.300}", i + 1);
        }
    }
    format!(
        "{} lines direct, {} through the proxy",
        a.lines().count(),
        b.lines().count()
    )
}

/// The runs; returns one line per passed comparison.
pub fn run(tools: &Tools<'_>) -> Result<Vec<String>> {
    let work = crate::xtask_dir()?.join("interop-proxy");
    std::fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let mut passed = Vec::new();
    for agent in ["magma-server", "fastapi"] {
        for https in [false, true] {
            passed.extend(one_agent(tools, &work, agent, https)?);
        }
    }
    Ok(passed)
}

fn one_agent(tools: &Tools<'_>, work: &Path, agent: &str, https: bool) -> Result<Vec<String>> {
    let scheme = if https { "https" } else { "http" };
    let port = free_port()?;
    let mut guard = if agent == "magma-server" {
        let mut cmd = Command::new(tools.server);
        cmd.args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "warn");
        if https {
            cmd.arg("--tls-self-signed").arg(tools.tls_dir);
        }
        Guard::spawn("magma-server", &mut cmd)?
    } else {
        let mut cmd = Command::new(tools.python);
        cmd.arg(tools.scripts.join("fastapi_agent.py")).args([
            "--port",
            &port.to_string(),
            "--ready-after",
            "0",
            "--coaching",
        ]);
        if https {
            cmd.arg("--ssl-certfile")
                .arg(tools.tls_dir.join("cert.pem"))
                .arg("--ssl-keyfile")
                .arg(tools.tls_dir.join("key.pem"));
        }
        Guard::spawn("fastapi_agent.py", &mut cmd)?
    };
    wait_for_port(&mut guard, port, Duration::from_secs(60))?;
    let upstream = format!("{scheme}://127.0.0.1:{port}");

    let proxy_port = free_port()?;
    let tag = format!("{agent}-{scheme}");
    let record: PathBuf = work.join(format!("{tag}.jsonl"));
    let summary_path = work.join(format!("{tag}-summary.json"));
    let mut cmd = Command::new(tools.validate);
    cmd.args([
        "proxy",
        "--upstream",
        &upstream,
        "--listen",
        &format!("127.0.0.1:{proxy_port}"),
        "--format",
        "json",
    ])
    .arg("--record")
    .arg(&record)
    .arg("-o")
    .arg(&summary_path)
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if https {
        cmd.arg("--cacert")
            .arg(tools.tls_dir.join("ca.pem"))
            .arg("--tls-cert")
            .arg(tools.tls_dir.join("cert.pem"))
            .arg("--tls-key")
            .arg(tools.tls_dir.join("key.pem"));
    }
    let proxy = ProxyChild(cmd.spawn().context("starting magma-validate proxy")?);
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", proxy_port)).is_err() {
        ensure!(
            Instant::now() < deadline,
            "magma-validate proxy did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let through = format!("{scheme}://127.0.0.1:{proxy_port}");

    let mut passed = Vec::new();
    let mut answers = 0;
    for (script, client) in [
        ("bench_client.py", "BENCH-like client"),
        ("gen_coaching.py", "GEN's RemoteCoaching"),
    ] {
        let what = format!(
            "{client} through magma-validate proxy -> {agent} over {scheme}: answers identical to a direct run"
        );
        eprintln!("xtask interop: {what}");
        let stem = script.trim_end_matches(".py");
        let (code_direct, direct) = client_run(
            tools,
            script,
            &upstream,
            https,
            &work.join(format!("{tag}-{stem}-direct.jsonl")),
        )?;
        let (code_proxied, proxied) = client_run(
            tools,
            script,
            &through,
            https,
            &work.join(format!("{tag}-{stem}-proxied.jsonl")),
        )?;
        ensure!(
            !direct.is_empty(),
            "{what}: the direct run received nothing"
        );
        ensure!(
            direct == proxied,
            "{what}: the answers differ: {}",
            first_difference(&direct, &proxied)
        );
        ensure!(
            code_direct == code_proxied,
            "{what}: exit {code_direct:?} directly, {code_proxied:?} through the proxy"
        );
        if agent == "magma-server" {
            ensure!(
                code_direct == Some(0),
                "{what}: the client failed (exit {code_direct:?})"
            );
        }
        answers += proxied.iter().filter(|&&b| b == b'\n').count();
        passed.push(what);
        guard.ensure_running()?;
    }
    let exit = proxy.stop()?;
    let summary: Value = serde_json::from_slice(
        &std::fs::read(&summary_path)
            .with_context(|| format!("reading {}", summary_path.display()))?,
    )
    .context("the proxy's JSON summary")?;
    ensure!(
        summary["exchanges"].as_u64() == Some(answers as u64),
        "{tag}: the proxy counted {} exchanges, the clients received {answers} answers",
        summary["exchanges"]
    );
    // The clients send one invalid request on purpose (the `request` check
    // flags it); nothing the agent answered may fail a check.
    let failed: Vec<&String> = summary["checks"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, c)| name.as_str() != "request" && c["failed"].as_u64() != Some(0))
        .map(|(name, _)| name)
        .collect();
    ensure!(
        failed.is_empty(),
        "{tag}: agent-side checks failed through the proxy: {failed:?}; see {}",
        summary_path.display()
    );
    ensure!(
        exit == 0 || exit == 1,
        "{tag}: magma-validate proxy exited {exit}"
    );
    let recorded = std::fs::read_to_string(&record)
        .with_context(|| format!("reading {}", record.display()))?;
    ensure!(
        recorded.lines().count() == answers,
        "{tag}: {} recorded lines for {answers} answers",
        recorded.lines().count()
    );
    passed.push(format!(
        "magma-validate proxy -> {agent} over {scheme}: {answers} exchanges counted and recorded, no agent-side finding"
    ));
    Ok(passed)
}
