//! `cargo xtask interop`: magma-rs against the Python side MAGMA users run.
//!
//! 1. `magma-server` (demo agent) under `xtask/python/bench_client.py`, a
//!    Python client that does what magma-bench 2.0.1 does, over HTTP and
//!    over HTTPS with the server's generated development CA.
//! 2. `magma-client` (`crates/magma-client/examples/interop.rs`) against
//!    `xtask/python/fastapi_agent.py`, a FastAPI agent on the magma-core
//!    2.0.1 models, over HTTP (starting while the agent still answers 503)
//!    and over HTTPS.
//!
//! Everything runs on 127.0.0.1 and is stopped at the end, also on failure.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::python;

/// A child process that is killed when dropped.
struct Guard {
    name: &'static str,
    child: Child,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Guard {
    fn spawn(name: &'static str, cmd: &mut Command) -> Result<Guard> {
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {name}: {cmd:?}"))?;
        Ok(Guard { name, child })
    }

    fn ensure_running(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{} exited early with {status}", self.name);
        }
        Ok(())
    }
}

fn free_port() -> Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("binding a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

/// Waits until something accepts connections on `port`.
fn wait_for_port(guard: &mut Guard, port: u16, within: Duration) -> Result<()> {
    let deadline = Instant::now() + within;
    loop {
        guard.ensure_running()?;
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "{} did not listen on port {port} within {within:?}",
                guard.name
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map_or_else(
            || root.join("target"),
            |p| if p.is_absolute() { p } else { root.join(p) },
        )
}

fn run_checked(what: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("xtask interop: {what}");
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("running {cmd:?}"))?;
    if !status.success() {
        bail!("{what}: failed with {status}");
    }
    Ok(())
}

pub(crate) fn run() -> Result<()> {
    let root = crate::project_root()?;
    let python = python::ensure_venv(
        "interop",
        &root.join("xtask/python/requirements-interop.txt"),
        &["magma-core==2.0.1"],
    )?;
    run_checked(
        "building magma-server and the magma-client interop example (feature tls)",
        cargo().current_dir(&root).args([
            "build",
            "--quiet",
            "-p",
            "magma-server",
            "--features",
            "tls",
            "--bin",
            "magma-server",
        ]),
    )?;
    run_checked(
        "building the magma-client interop example",
        cargo().current_dir(&root).args([
            "build",
            "--quiet",
            "-p",
            "magma-client",
            "--features",
            "tls",
            "--example",
            "interop",
        ]),
    )?;
    let bin = target_dir(&root).join("debug");
    let server_bin = bin.join("magma-server");
    let client_example = bin.join("examples").join("interop");
    let tls_dir = crate::xtask_dir()?.join("interop-tls");
    std::fs::create_dir_all(&tls_dir).with_context(|| format!("creating {}", tls_dir.display()))?;
    let bench_client = root.join("xtask/python/bench_client.py");
    let fastapi_agent = root.join("xtask/python/fastapi_agent.py");
    let mut passed = Vec::new();

    // 1. The Rust server under a BENCH-like Python client.
    for https in [false, true] {
        let port = free_port()?;
        let mut cmd = Command::new(&server_bin);
        cmd.args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "warn");
        if https {
            cmd.arg("--tls-self-signed").arg(&tls_dir);
        }
        let mut server = Guard::spawn("magma-server", &mut cmd)?;
        wait_for_port(&mut server, port, Duration::from_secs(30))?;
        let scheme = if https { "https" } else { "http" };
        let url = format!("{scheme}://127.0.0.1:{port}");
        let mut client = Command::new(&python);
        client.arg(&bench_client).arg(&url);
        if https {
            client.arg("--cacert").arg(tls_dir.join("ca.pem"));
        }
        let what = format!("Python BENCH-like client -> magma-server over {scheme}");
        run_checked(&what, &mut client)?;
        server.ensure_running()?;
        passed.push(what);
    }

    // 2. The Rust client against a FastAPI agent on magma-core.
    for https in [false, true] {
        let port = free_port()?;
        let mut cmd = Command::new(&python);
        cmd.arg(&fastapi_agent)
            .args(["--port", &port.to_string(), "--ready-after", "5"]);
        if https {
            cmd.arg("--ssl-certfile")
                .arg(tls_dir.join("cert.pem"))
                .arg("--ssl-keyfile")
                .arg(tls_dir.join("key.pem"));
        }
        let mut agent = Guard::spawn("fastapi_agent.py", &mut cmd)?;
        wait_for_port(&mut agent, port, Duration::from_secs(60))?;
        let scheme = if https { "https" } else { "http" };
        let mut client = Command::new(&client_example);
        client.arg(format!("{scheme}://127.0.0.1:{port}"));
        if https {
            client.arg("--cacert").arg(tls_dir.join("ca.pem"));
        } else {
            // Started right away, the agent is still loading: 503 is exercised.
            client.arg("--expect-not-ready");
        }
        let what = format!("magma-client -> FastAPI agent (magma-core 2.0.1) over {scheme}");
        run_checked(&what, &mut client)?;
        agent.ensure_running()?;
        passed.push(what);
    }

    println!("interop: {} passed, 0 failed", passed.len());
    for p in &passed {
        println!("  ok  {p}");
    }
    Ok(())
}
