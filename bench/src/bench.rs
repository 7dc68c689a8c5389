//! `cargo xtask bench`: reproduces the table of `docs/performance.md`.
//!
//! Everything is set up here: wrk and hyperfine (Debian packages, installed with apt-get
//! when missing), the Python 3.12 venv of `cargo xtask interop` (FastAPI, uvicorn,
//! requests, pydantic, magma-core 2.0.1), release builds of `magma-server` (feature
//! `tls`), `magma-validate` and of `magma-bench` (the floor server and the
//! `magma-client` loop, see `helpers.rs`).
//!
//! Every figure is a ratio of two things measured side by side in the same run, on
//! loopback: repetitions are interleaved (A, B, C, A, B, C, ...) so that the noise of a
//! shared machine falls on both sides of a ratio; each figure is the median of the
//! repetitions with their range, and the 1-minute load average when it was taken. Every
//! command that produces a figure is printed as it runs.
//!
//! Sections (`--only a,b`): `parse` (criterion), `http` (wrk), `batch` (hyperfine),
//! `memory`, `client`, `compose` (wrk: the `metrics` feature and the agent nested in
//! axum, against the standalone server), `proxy` (wrk and peak memory: `magma-validate
//! proxy` in front of `magma-server`, `bench/proxy.rs`), `instructions` (callgrind:
//! instructions and allocations per request of `magma-server` and the floor, by stage,
//! `bench/instructions.rs`).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use magma_protocol::routes::Endpoint;
use serde_json::Value;

use crate::python;

use magma_testkit::fixtures as bench_like;

mod callgrind;
mod instructions;
mod proxy;

const SECTIONS: &[&str] = &[
    "parse",
    "http",
    "batch",
    "memory",
    "client",
    "compose",
    "proxy",
    "instructions",
];

/// Options of `cargo xtask bench`.
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// Repetitions per figure (default 5; 3 with --quick).
    #[arg(long = "reps", value_name = "N")]
    reps_arg: Option<usize>,
    /// Seconds per wrk run (default 3; 1 with --quick).
    #[arg(long = "duration", value_name = "SECS")]
    secs_arg: Option<u64>,
    /// Fewer repetitions and shorter runs (a smoke test of the harness).
    #[arg(long)]
    quick: bool,
    /// Sections to run, comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(SECTIONS), default_values = SECTIONS)]
    only: Vec<String>,
    #[arg(skip)]
    reps: usize,
    #[arg(skip)]
    secs: u64,
}

impl Options {
    /// Resolves the defaults that depend on `--quick`.
    fn resolved(&self) -> Options {
        let (reps, secs) = if self.quick { (3, 1) } else { (5, 3) };
        Options {
            reps: self.reps_arg.unwrap_or(reps).max(1),
            secs: self.secs_arg.unwrap_or(secs).max(1),
            ..self.clone()
        }
    }

    fn wants(&self, section: &str) -> bool {
        self.only.iter().any(|s| s == section)
    }
}

/// The requirements of the `uvicorn[standard]` FastAPI venv.
const STANDARD_REQUIREMENTS: &str = "harness/python/requirements-bench-standard.txt";

/// One FastAPI configuration: its venv's Python, and whether it is
/// `uvicorn[standard]` (uvloop, httptools) rather than plain uvicorn.
struct Fastapi {
    python: PathBuf,
    standard: bool,
}

/// One line of the table.
struct Row {
    figure: String,
    value: String,
    goal: String,
    met: Option<bool>,
    load: String,
}

struct Bench {
    opts: Options,
    root: PathBuf,
    dir: PathBuf,
    bin: PathBuf,
    rows: Vec<Row>,
    commands: Vec<String>,
    notes: Vec<String>,
    /// Markdown blocks printed after the table (the instructions breakdown).
    sections: Vec<String>,
}

pub fn run(opts: &Options) -> Result<()> {
    let opts = &opts.resolved();
    let root = crate::project_root()?;
    let dir = crate::xtask_dir()?.join("bench");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let bin = crate::process::target_dir(&root).join("release");
    let mut b = Bench {
        opts: opts.clone(),
        root,
        dir,
        bin,
        rows: Vec::new(),
        commands: Vec::new(),
        notes: Vec::new(),
        sections: Vec::new(),
    };
    let started = Instant::now();
    let machine = machine_facts();
    eprintln!("{machine}");
    b.setup_tools()?;
    b.build()?;
    if opts.wants("parse") {
        b.parse()?;
    }
    if opts.wants("http") {
        b.http()?;
    }
    if opts.wants("batch") {
        b.batch()?;
    }
    if opts.wants("memory") {
        b.memory()?;
    }
    if opts.wants("client") {
        b.client()?;
    }
    if opts.wants("compose") {
        b.compose()?;
    }
    if opts.wants("proxy") {
        b.proxy()?;
    }
    if opts.wants("instructions") {
        b.instructions()?;
    }
    let report = b.report(&machine, started.elapsed());
    let path = b.dir.join("report.md");
    std::fs::write(&path, &report).with_context(|| format!("writing {}", path.display()))?;
    println!("{report}");
    eprintln!("bench: report written to {}", path.display());
    Ok(())
}

impl Bench {
    fn setup_tools(&mut self) -> Result<()> {
        let wanted: &[&str] = if self.opts.wants("instructions") {
            &["wrk", "hyperfine", "valgrind"]
        } else {
            &["wrk", "hyperfine"]
        };
        let missing: Vec<&str> = wanted
            .iter()
            .copied()
            .filter(|t| {
                !Command::new("sh")
                    .args(["-c", &format!("command -v {t} >/dev/null")])
                    .status()
                    .is_ok_and(|s| s.success())
            })
            .collect();
        if !missing.is_empty() {
            eprintln!("bench: installing {} with apt-get", missing.join(" "));
            self.exec(Command::new("apt-get").arg("update").arg("-qq"))?;
            self.exec(
                Command::new("apt-get")
                    .args(["install", "-y", "-qq"])
                    .args(&missing),
            )?;
        }
        Ok(())
    }

    fn build(&mut self) -> Result<()> {
        // First the server with the system allocator, kept aside for the
        // allocator comparison, then everything as benchmarked: `magma-server`
        // with its `tls` and `mimalloc` features.
        let root = self.root.clone();
        let release_build = |args: &[&str]| {
            let mut cmd = crate::process::cargo();
            cmd.current_dir(&root)
                .args(["build", "--release", "--quiet"])
                .args(args);
            cmd
        };
        self.exec(&mut release_build(&[
            "-p",
            "magma-rs-server",
            "--features",
            "tls",
            "--bin",
            "magma-server",
        ]))?;
        let exe = format!("magma-server{}", std::env::consts::EXE_SUFFIX);
        std::fs::copy(self.bin.join(&exe), self.system_alloc_server())
            .context("keeping the system-allocator build of magma-server")?;
        self.exec(&mut release_build(&[
            "-p",
            "magma-rs-server",
            "-p",
            "magma-rs-validator",
            "-p",
            "magma-bench",
            "--features",
            "magma-rs-server/tls,magma-rs-server/mimalloc",
            "--bins",
        ]))
    }

    /// The `magma-server` binary built without the `mimalloc` feature.
    fn system_alloc_server(&self) -> PathBuf {
        self.dir.join(format!(
            "magma-server-system-alloc{}",
            std::env::consts::EXE_SUFFIX
        ))
    }

    fn python(&self) -> Result<PathBuf> {
        python::ensure_venv(
            "interop",
            &self.root.join("harness/python/requirements-interop.txt"),
            &["magma-core==2.0.1"],
        )
    }

    /// Both FastAPI configurations a user runs: plain `uvicorn` (asyncio
    /// and h11, what gpt-agent's requirements install) and
    /// `uvicorn[standard]` (uvloop and httptools), each in its own venv.
    fn fastapis(&self) -> Result<[Fastapi; 2]> {
        let standard = python::ensure_venv(
            "bench-standard",
            &self.root.join(STANDARD_REQUIREMENTS),
            &["magma-core==2.0.1"],
        )?;
        Ok([
            Fastapi {
                python: self.python()?,
                standard: false,
            },
            Fastapi {
                python: standard,
                standard: true,
            },
        ])
    }

    /// Runs `cmd` with inherited output, recording its command line.
    fn exec(&mut self, cmd: &mut Command) -> Result<()> {
        let line = show(cmd);
        eprintln!("$ {line}");
        let status = cmd
            .stdin(Stdio::null())
            .status()
            .with_context(|| format!("running {line}"))?;
        if !status.success() {
            bail!("`{line}` failed with {status}");
        }
        Ok(())
    }

    /// Runs `cmd`, recording its command line, and returns its standard output.
    fn capture(&mut self, cmd: &mut Command) -> Result<String> {
        let line = show(cmd);
        eprintln!("$ {line}");
        if !self.commands.contains(&line) {
            self.commands.push(line.clone());
        }
        let out = cmd
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .with_context(|| format!("running {line}"))?;
        if !out.status.success() {
            bail!("`{line}` failed with {}", out.status);
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    fn row(&mut self, figure: impl Into<String>, value: String, goal: &str, met: Option<bool>) {
        let row = Row {
            figure: figure.into(),
            value,
            goal: goal.to_owned(),
            met,
            load: loadavg(),
        };
        eprintln!(
            "bench: {} = {} (goal {}, {}; load {})",
            row.figure,
            row.value,
            row.goal,
            met_word(row.met),
            row.load
        );
        self.rows.push(row);
    }

    // ---------------------------------------------------------------- 1. parse

    fn parse(&mut self) -> Result<()> {
        let mut cmd = crate::process::cargo();
        // Absolute: the bench binary runs in the crate's directory and
        // criterion would resolve a relative CARGO_TARGET_DIR from there.
        let target = crate::process::target_dir(&self.root);
        cmd.current_dir(&self.root)
            .env("CARGO_TARGET_DIR", &target)
            .args(["bench", "-p", "magma-rs-protocol", "--bench", "parse", "--"]);
        if self.opts.quick {
            cmd.args([
                "--warm-up-time",
                "1",
                "--measurement-time",
                "2",
                "--sample-size",
                "20",
            ]);
        }
        let line = show(&cmd);
        self.commands.push(line);
        self.exec(&mut cmd)?;
        let dir = crate::process::target_dir(&self.root).join("criterion");
        let est = |id: &str| criterion_median(&dir, id);
        const REQUEST: &str = "AgentRequest";
        for (group, label, model) in [
            ("large_0.6MB", "0.6 MB BENCH-like request", REQUEST),
            ("one_input", "1-input BENCH-like request (11.6 KB)", REQUEST),
            (
                "http_body_8",
                "8-input body of the HTTP runs (6.6 KB)",
                REQUEST,
            ),
            (
                "coaching_50_steps",
                "GEN-sized 50-step coaching request (0.63 MB)",
                "SpecializedCoachingRequest",
            ),
        ] {
            let m = est(&format!(
                "parse/{group}/magma_protocol::{model}::from_slice"
            ))?;
            // Each baseline: its short name, its criterion id, and the goal
            // for the 0.6 MB request (the other bodies are reported).
            for (short, id, title, goal, min, other) in [
                (
                    "IgnoredAny",
                    "serde_json::IgnoredAny",
                    "serde_json IgnoredAny",
                    ">= 0.5x",
                    0.5,
                    "(latency, reported)",
                ),
                (
                    "Value",
                    "serde_json::Value",
                    "serde_json::Value",
                    ">= 2x",
                    2.0,
                    "(reported)",
                ),
            ] {
                let base = est(&format!("parse/{group}/{id}"))?;
                let ratio = Spread::ratio(&base, &m);
                let value = format!(
                    "magma-protocol {} vs {short} {}: **{}**",
                    m.time(),
                    base.time(),
                    ratio.x()
                );
                let (goal, met) = if group == "large_0.6MB" {
                    (goal, Some(ratio.median >= min))
                } else {
                    (other, None)
                };
                self.row(
                    format!("parse+validate {label}, speed vs {title}"),
                    value,
                    goal,
                    met,
                );
            }
        }
        Ok(())
    }

    // ----------------------------------------------------------------- 2. http

    fn http(&mut self) -> Result<()> {
        let [plain, standard] = self.fastapis()?;
        let script = self.dir.join("post.lua");
        std::fs::write(&script, WRK_SCRIPT)?;
        let bodies = [
            (
                "8-input (BENCH-like)",
                "body8.json",
                bench_like::http_body(8),
            ),
            (
                "1-input (tiny)",
                "body1.json",
                bench_like::TINY_BODY.to_owned(),
            ),
        ];
        let reps = self.opts.reps;
        let secs = self.opts.secs;
        for (body_name, file, body) in &bodies {
            let body_path = self.dir.join(file);
            std::fs::write(&body_path, body)?;
            self.notes.push(format!(
                "{body_name} body: {} bytes ({})",
                body.len(),
                body_path.display()
            ));
            let magma = self.start_magma(None)?;
            let (code, magma_resp) = post(magma.port, body.as_bytes())?;
            if code != 200 {
                bail!("magma-server answered {code} to the {body_name} body");
            }
            let resp_path = self.dir.join(format!("response-{file}"));
            std::fs::write(&resp_path, &magma_resp)?;
            let floor = self.start_floor(&resp_path)?;
            let fastapi = self.start_fastapi(&plain, None)?;
            let fastapi_std = self.start_fastapi(&standard, None)?;
            let (code, fa_resp) = post(fastapi.port, body.as_bytes())?;
            let (code_std, fa_std_resp) = post(fastapi_std.port, body.as_bytes())?;
            if code != 200 || code_std != 200 || fa_resp != fa_std_resp {
                bail!(
                    "the FastAPI agents answered {code} and {code_std} to the {body_name} body, or \
                     differently"
                );
            }
            self.notes.push(format!(
                "{body_name}: response bytes: magma-server {}, floor {} (the same bytes), FastAPI agent {} (both configurations)",
                magma_resp.len(),
                magma_resp.len(),
                fa_resp.len()
            ));
            let servers = [&magma, &floor, &fastapi, &fastapi_std];
            for s in servers {
                // Warm-up, not recorded.
                self.wrk(s.port, false, &script, &body_path, 16, 1, false)?;
            }
            for conns in [1usize, 16, 64] {
                let mut results: Vec<[Wrk; 4]> = Vec::new();
                for _ in 0..reps {
                    let mut one = [Wrk::default(); 4];
                    for (i, s) in servers.iter().enumerate() {
                        one[i] =
                            self.wrk(s.port, false, &script, &body_path, conns, secs, false)?;
                    }
                    results.push(one);
                }
                self.http_rows(
                    &format!("{body_name}, {conns} keep-alive conn."),
                    &results,
                    conns == 64 && file == &"body8.json",
                );
            }
            drop((magma, floor, fastapi, fastapi_std));
        }

        // What the allocator is worth: the same server built without the
        // `mimalloc` feature, interleaved with the mimalloc build.
        let body_path = self.dir.join("body8.json");
        let system = self.system_alloc_server();
        let glibc = self.start_magma_exe(&system, None)?;
        let magma = self.start_magma(None)?;
        for s in [&glibc, &magma] {
            self.wrk(s.port, false, &script, &body_path, 16, 1, false)?;
        }
        let mut ratios = Vec::new();
        let (mut with, mut without) = (Vec::new(), Vec::new());
        for _ in 0..reps {
            let a = self.wrk(magma.port, false, &script, &body_path, 64, secs, false)?;
            let b = self.wrk(glibc.port, false, &script, &body_path, 64, secs, false)?;
            ratios.push(a.rps / b.rps);
            with.push(a.rps);
            without.push(b.rps);
        }
        drop((glibc, magma));
        self.row(
            "8-input, 64 keep-alive conn.: magma-server with mimalloc vs the system allocator",
            format!(
                "mimalloc {} req/s vs system allocator {}: **{}**",
                Spread::of(with).num(),
                Spread::of(without).num(),
                Spread::of(ratios).x()
            ),
            "(reported)",
            None,
        );

        // A new connection per request, over HTTP and HTTPS (wrk with `Connection: close`).
        let body_path = self.dir.join("body8.json");
        let tls_dir = self.dir.join("tls");
        std::fs::create_dir_all(&tls_dir)?;
        for https in [false, true] {
            let tls = https.then_some(tls_dir.as_path());
            let magma = self.start_magma(tls)?;
            let fastapi = self.start_fastapi(&plain, tls)?;
            let fastapi_std = self.start_fastapi(&standard, tls)?;
            let floor = if https {
                None
            } else {
                Some(self.start_floor(&self.dir.join("response-body8.json"))?)
            };
            let mut servers = vec![&magma, &fastapi, &fastapi_std];
            if let Some(f) = &floor {
                servers.push(f);
            }
            for s in &servers {
                self.wrk(s.port, https, &script, &body_path, 16, 1, true)?;
            }
            let mut results: Vec<[Wrk; 4]> = Vec::new();
            for _ in 0..reps {
                let a = self.wrk(magma.port, https, &script, &body_path, 16, secs, true)?;
                let c = self.wrk(fastapi.port, https, &script, &body_path, 16, secs, true)?;
                let d = self.wrk(fastapi_std.port, https, &script, &body_path, 16, secs, true)?;
                let b = match &floor {
                    Some(f) => self.wrk(f.port, https, &script, &body_path, 16, secs, true)?,
                    None => Wrk::default(),
                };
                results.push([a, b, c, d]);
            }
            let scheme = if https { "HTTPS" } else { "HTTP" };
            self.http_rows(
                &format!("8-input, new connection per request over {scheme}, 16 conn."),
                &results,
                false,
            );
        }
        self.notes.push(
            "new connection per request: wrk with the header `Connection: close` (each response \
             closes the connection, wrk reconnects; over HTTPS a full TLS handshake each time, wrk \
             does not resume sessions); no floor over HTTPS"
                .to_owned(),
        );
        Ok(())
    }

    /// The rows of one load: `results` per repetition as magma-server, the
    /// floor (`rps` 0 when there is none), FastAPI on plain uvicorn and on
    /// `uvicorn[standard]`; `goals` marks the load the goals are set on.
    fn http_rows(&mut self, what: &str, results: &[[Wrk; 4]], goals: bool) {
        let col =
            |i: usize, f: fn(&Wrk) -> f64| Spread::of(results.iter().map(|r| f(&r[i])).collect());
        let rps = |w: &Wrk| w.rps;
        let p99 = |w: &Wrk| w.p99_ms;
        let m_rps = col(0, rps);
        let m_p99 = col(0, p99);
        let errs: f64 = results
            .iter()
            .flat_map(|r| r.iter())
            .map(|w| w.socket_errors)
            .sum();
        if errs > 0.0 {
            self.notes.push(format!(
                "{what}: wrk reported {errs} socket errors in total"
            ));
        }
        for (i, fastapi) in [(2, "FastAPI (uvicorn)"), (3, "FastAPI (uvicorn[standard])")] {
            let fa_rps = col(i, rps);
            let fa_p99 = col(i, p99);
            let vs_fa = Spread::of(results.iter().map(|r| r[0].rps / r[i].rps).collect());
            let p99_fa = Spread::of(results.iter().map(|r| r[i].p99_ms / r[0].p99_ms).collect());
            self.row(
                format!("{what}: requests/s vs {fastapi}"),
                format!(
                    "magma-server {} req/s vs {fastapi} {}: **{}**",
                    m_rps.num(),
                    fa_rps.num(),
                    vs_fa.x()
                ),
                if goals { ">= 20x" } else { "(reported)" },
                goals.then_some(vs_fa.median >= 20.0),
            );
            self.row(
                format!("{what}: p99 latency vs {fastapi}"),
                format!(
                    "magma-server {} ms vs {fastapi} {} ms: **1/{}**",
                    m_p99.num(),
                    fa_p99.num(),
                    p99_fa.plain()
                ),
                if goals { "<= 1/5" } else { "(reported)" },
                goals.then_some(p99_fa.median >= 5.0),
            );
        }
        if results[0][1].rps > 0.0 {
            let fl_rps = col(1, rps);
            let vs_floor = Spread::of(results.iter().map(|r| r[0].rps / r[1].rps).collect());
            self.row(
                format!("{what}: requests/s vs the hyper floor"),
                format!(
                    "magma-server {} req/s vs floor {}: **{}**",
                    m_rps.num(),
                    fl_rps.num(),
                    vs_floor.x()
                ),
                if goals { ">= 0.8x" } else { "(reported)" },
                goals.then_some(vs_floor.median >= 0.8),
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn wrk(
        &mut self,
        port: u16,
        https: bool,
        script: &Path,
        body: &Path,
        conns: usize,
        secs: u64,
        close: bool,
    ) -> Result<Wrk> {
        self.wrk_at(
            port,
            Endpoint::Responses.path(),
            https,
            script,
            body,
            conns,
            secs,
            close,
        )
    }

    /// [`wrk`](Bench::wrk) against `path` instead of `/v1/responses`.
    #[allow(clippy::too_many_arguments)]
    fn wrk_at(
        &mut self,
        port: u16,
        path: &str,
        https: bool,
        script: &Path,
        body: &Path,
        conns: usize,
        secs: u64,
        close: bool,
    ) -> Result<Wrk> {
        let scheme = if https { "https" } else { "http" };
        let mut cmd = Command::new("wrk");
        cmd.env("BENCH_BODY", body)
            .args([
                "-t1",
                &format!("-c{conns}"),
                &format!("-d{secs}s"),
                "--timeout",
                "10s",
                "-s",
            ])
            .arg(script);
        if close {
            cmd.args(["-H", "Connection: close"]);
        }
        cmd.arg(format!("{scheme}://127.0.0.1:{port}{path}"));
        let out = self.capture(&mut cmd)?;
        let json = out
            .lines()
            .find_map(|l| l.strip_prefix("WRKJSON "))
            .with_context(|| format!("no WRKJSON line in wrk's output:\n{out}"))?;
        let v: Value = serde_json::from_str(json)?;
        let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
        if f("status_errors") > 0.0 {
            bail!(
                "wrk saw {} non-2xx answers from port {port}",
                f("status_errors")
            );
        }
        let w = Wrk {
            rps: f("requests") / (f("duration_us") / 1e6),
            p99_ms: f("p99_us") / 1e3,
            socket_errors: f("connect_errors")
                + f("read_errors")
                + f("write_errors")
                + f("timeouts"),
        };
        Ok(w)
    }

    fn start_magma(&mut self, tls: Option<&Path>) -> Result<Proc> {
        let exe = self.bin.join("magma-server");
        self.start_magma_exe(&exe, tls)
    }

    fn start_magma_exe(&mut self, exe: &Path, tls: Option<&Path>) -> Result<Proc> {
        let port = crate::process::free_port()?;
        let mut cmd = Command::new(exe);
        cmd.args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--max-connections",
            "1100",
        ])
        .env("RUST_LOG", "warn");
        if let Some(dir) = tls {
            cmd.arg("--tls-self-signed").arg(dir);
        }
        self.note_command(&cmd, "RUST_LOG=warn ");
        let p = Proc::spawn("magma-server", &mut cmd, port)?;
        p.wait(Duration::from_secs(30))?;
        Ok(p)
    }

    fn start_floor(&mut self, response: &Path) -> Result<Proc> {
        let port = crate::process::free_port()?;
        let mut cmd = Command::new(self.bin.join("magma-bench"));
        cmd.args(["floor", "--port", &port.to_string(), "--response"])
            .arg(response);
        self.note_command(&cmd, "");
        let p = Proc::spawn("floor", &mut cmd, port)?;
        p.wait(Duration::from_secs(30))?;
        Ok(p)
    }

    fn start_fastapi(&mut self, fastapi: &Fastapi, tls: Option<&Path>) -> Result<Proc> {
        let port = crate::process::free_port()?;
        let mut cmd = python::command(&fastapi.python);
        let (event_loop, http) = match fastapi.standard {
            false => ("asyncio", "h11"),
            true => ("uvloop", "httptools"),
        };
        cmd.arg(self.root.join("harness/python/fastapi_agent.py"))
            .args(["--port", &port.to_string()])
            .args(["--loop", event_loop, "--http", http]);
        if let Some(dir) = tls {
            cmd.arg("--ssl-certfile")
                .arg(dir.join("cert.pem"))
                .arg("--ssl-keyfile")
                .arg(dir.join("key.pem"));
        }
        self.note_command(&cmd, "");
        let p = Proc::spawn("FastAPI agent", &mut cmd, port)?;
        p.wait(Duration::from_secs(60))?;
        Ok(p)
    }

    fn note_command(&mut self, cmd: &Command, prefix: &str) {
        let line = format!("{prefix}{}", show(cmd));
        eprintln!("$ {line} &");
        let generic = line.replace(char::is_numeric, "N");
        if !self
            .commands
            .iter()
            .any(|c| c.replace(char::is_numeric, "N") == generic)
        {
            self.commands.push(format!("{line} &"));
        }
    }

    // ---------------------------------------------------------------- 3. batch

    fn batch(&mut self) -> Result<()> {
        let python = self.python()?;
        let file = self.dir.join("batch-40x0.6MB.jsonl");
        let mut text = String::new();
        for i in 0..40 {
            let doc = bench_like::bench_like_request(52).replacen(
                "0f8fad5bd9cb469fa16570867728950e",
                &format!("{i:032x}"),
                1,
            );
            let kind = magma_protocol::documents::DocumentKind::Request.name();
            let line = serde_json::json!({"kind": kind, "doc": doc});
            text.push_str(&line.to_string());
            text.push('\n');
        }
        std::fs::write(&file, &text)?;
        self.notes.push(format!(
            "batch file: 40 BENCH-like requests of 52 inputs (0.6 MB each), {:.1} MB of JSON Lines ({})",
            text.len() as f64 / 1e6,
            file.display()
        ));
        let rust = format!(
            "{} batch < {}",
            self.bin.join("magma-validate").display(),
            file.display()
        );
        let py = format!(
            "{} {} batch {}",
            python.display(),
            self.root
                .join("harness/python/bench_reference.py")
                .display(),
            file.display()
        );
        // Same verdicts first.
        for c in [&rust, &py] {
            let out = self.capture(Command::new("sh").args(["-c", c]))?;
            let accepts = out.lines().filter(|l| l.contains("\"accept\"")).count();
            if accepts != 40 {
                bail!("`{c}` accepted {accepts} of 40 requests");
            }
        }
        let json = self.dir.join("hyperfine-batch.json");
        let runs = if self.opts.quick {
            3
        } else {
            self.opts.reps.max(5)
        };
        let mut cmd = Command::new("hyperfine");
        cmd.args([
            "--warmup",
            "1",
            "--runs",
            &runs.to_string(),
            "--style",
            "basic",
            "--export-json",
        ])
        .arg(&json)
        .args([
            "-n",
            "magma-validate batch",
            &rust,
            "-n",
            "python json.loads + model_validate",
            &py,
        ]);
        self.commands.push(show(&cmd));
        self.exec(&mut cmd)?;
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&json)?)?;
        let times = |i: usize| -> Spread {
            Spread::of(
                v["results"][i]["times"]
                    .as_array()
                    .map(|a| a.iter().filter_map(Value::as_f64).collect())
                    .unwrap_or_default(),
            )
        };
        let rs = times(0);
        let pyt = times(1);
        let ratio = Spread::ratio(&pyt, &rs);
        self.row(
            "batch verdicts, 40 x 0.6 MB requests, whole process",
            format!(
                "magma-validate {} s vs Python {} s: **{}**",
                rs.num(),
                pyt.num(),
                ratio.x()
            ),
            ">= 5x",
            Some(ratio.median >= 5.0),
        );
        Ok(())
    }

    // --------------------------------------------------------------- 4. memory

    fn memory(&mut self) -> Result<()> {
        let plain = Fastapi {
            python: self.python()?,
            standard: false,
        };
        let body = bench_like::http_body(8);
        let magma = self.start_magma(None)?;
        let fastapi = self.start_fastapi(&plain, None)?;
        let mut figures = Vec::new();
        for p in [&magma, &fastapi] {
            // Idle: after start-up and one request of each kind.
            let _ = post(p.port, body.as_bytes())?;
            std::thread::sleep(Duration::from_millis(300));
            let idle = rss_mib(p.pid())?;
            let conns = hold_connections(p.port, 1000)?;
            std::thread::sleep(Duration::from_millis(500));
            let held = rss_mib(p.pid())?;
            drop(conns);
            figures.push((idle, held));
        }
        let [(m_idle, m_held), (f_idle, f_held)] = [figures[0], figures[1]];
        self.row(
            "resident memory, idle (after one 8-input request)",
            format!(
                "magma-server {m_idle:.1} MiB vs FastAPI {f_idle:.1} MiB: **1/{:.1}**",
                f_idle / m_idle
            ),
            "(reported)",
            None,
        );
        self.row(
            "resident memory holding 1000 keep-alive connections",
            format!(
                "magma-server {m_held:.1} MiB vs FastAPI {f_held:.1} MiB: **1/{:.1}**",
                f_held / m_held
            ),
            "< 64 MiB",
            Some(m_held < 64.0),
        );
        self.notes.push(
            "memory: VmRSS from /proc/PID/status; 1000 connections opened by xtask, each sends \
             one `GET /health` (keep-alive) and reads the answer, all held open while measured; \
             magma-server runs with --max-connections 1100 (default 512)"
                .to_owned(),
        );
        Ok(())
    }

    // --------------------------------------------------------------- 5. client

    fn client(&mut self) -> Result<()> {
        let python = self.python()?;
        let body_path = self.dir.join("body8.json");
        std::fs::write(&body_path, bench_like::http_body(8))?;
        let magma = self.start_magma(None)?;
        let url = format!("http://127.0.0.1:{}", magma.port);
        let (rust_calls, py_calls) = if self.opts.quick {
            (300, 60)
        } else {
            (1500, 200)
        };
        let mut rows: Vec<[f64; 3]> = Vec::new();
        let calls_per_sec = |out: &str| -> Result<f64> {
            let v: Value = serde_json::from_str(out.trim().lines().last().unwrap_or(""))
                .with_context(|| format!("bad output {out:?}"))?;
            Ok(v["calls"].as_f64().unwrap_or(0.0) / v["secs"].as_f64().unwrap_or(f64::INFINITY))
        };
        for _ in 0..self.opts.reps {
            let mut r = [0.0; 3];
            for (i, new_conn) in [(0, false), (1, true)] {
                let mut cmd = Command::new(self.bin.join("magma-bench"));
                cmd.args(["client", "--url", &url, "--body"])
                    .arg(&body_path)
                    .args(["--calls", &rust_calls.to_string()]);
                if new_conn {
                    cmd.arg("--new-connection");
                }
                r[i] = calls_per_sec(&self.capture(&mut cmd)?)?;
            }
            let mut cmd = python::command(&python);
            cmd.arg(self.root.join("harness/python/bench_reference.py"))
                .args(["client", &url])
                .arg(&body_path)
                .arg(py_calls.to_string());
            r[2] = calls_per_sec(&self.capture(&mut cmd)?)?;
            rows.push(r);
        }
        let col = |i: usize| Spread::of(rows.iter().map(|r| r[i]).collect());
        let ratio = |i: usize| Spread::of(rows.iter().map(|r| r[i] / r[2]).collect());
        let (keep, newc, py) = (col(0), col(1), col(2));
        self.row(
            "client calls/s against magma-server (8-input), magma-client keep-alive vs Python requests",
            format!("magma-client {} calls/s vs requests {}: **{}**", keep.num(), py.num(), ratio(0).x()),
            "(reported)",
            None,
        );
        self.row(
            "client calls/s, magma-client new connection per call vs Python requests (new connection per call)",
            format!("magma-client {} calls/s vs requests {}: **{}**", newc.num(), py.num(), ratio(1).x()),
            "(reported)",
            None,
        );
        Ok(())
    }

    // -------------------------------------------------------------- compose

    /// What the optional layers cost, interleaved in one run on the 8-input
    /// body over 64 keep-alive connections: the `metrics` feature with
    /// `--metrics` against the same build without it, and the agent nested
    /// in the `axum_app` example against the standalone server (both with
    /// the system allocator, as the example sets none).
    fn compose(&mut self) -> Result<()> {
        let root = self.root.clone();
        let mut build = crate::process::cargo();
        build.current_dir(&root).args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "magma-rs-server",
            "--features",
            "tls,mimalloc,metrics",
            "--bin",
            "magma-server",
        ]);
        self.exec(&mut build)?;
        let exe = format!("magma-server{}", std::env::consts::EXE_SUFFIX);
        let metrics_exe = self.dir.join(format!(
            "magma-server-metrics{}",
            std::env::consts::EXE_SUFFIX
        ));
        std::fs::copy(self.bin.join(&exe), &metrics_exe)
            .context("keeping the metrics build of magma-server")?;
        // Back to the build the other sections benchmark.
        self.build()?;
        let mut example = crate::process::cargo();
        example.current_dir(&root).args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "magma-rs-server",
            "--example",
            "axum_app",
        ]);
        self.exec(&mut example)?;

        let script = self.dir.join("post.lua");
        std::fs::write(&script, WRK_SCRIPT)?;
        let body_path = self.dir.join("body8.json");
        std::fs::write(&body_path, bench_like::http_body(8))?;

        let plain = self.start_magma(None)?;
        let metered = self.start_magma_args(&metrics_exe, &["--metrics"])?;
        let system = self.system_alloc_server();
        let standalone = self.start_magma_exe(&system, None)?;
        let nested = self.start_axum_app()?;
        let (path, nested_path) = (
            Endpoint::Responses.path(),
            format!("/agent{}", Endpoint::Responses),
        );
        let servers: [(&Proc, &str); 4] = [
            (&plain, path),
            (&metered, path),
            (&standalone, path),
            (&nested, &nested_path),
        ];
        for (s, path) in servers {
            let (code, _) = post_at(s.port, path, bench_like::http_body(8).as_bytes())?;
            if code != 200 {
                bail!("{} answered {code} on {path}", s.name);
            }
            self.wrk_at(s.port, path, false, &script, &body_path, 16, 1, false)?;
        }
        let mut rps: [Vec<f64>; 4] = Default::default();
        let (mut metrics_ratio, mut nested_ratio) = (Vec::new(), Vec::new());
        for _ in 0..self.opts.reps {
            let mut one = [0.0; 4];
            for (i, (s, path)) in servers.iter().enumerate() {
                let w = self.wrk_at(
                    s.port,
                    path,
                    false,
                    &script,
                    &body_path,
                    64,
                    self.opts.secs,
                    false,
                )?;
                one[i] = w.rps;
                rps[i].push(w.rps);
            }
            metrics_ratio.push(one[1] / one[0]);
            nested_ratio.push(one[3] / one[2]);
        }
        let (code, text) = get_at(metered.port, "/metrics")?;
        if code != 200 || !String::from_utf8_lossy(&text).contains("magma_requests_total") {
            bail!("the metrics build did not serve /metrics ({code})");
        }
        drop((plain, metered, standalone, nested));
        let [a, b, c, d] = rps.map(Spread::of);
        let metrics = Spread::of(metrics_ratio);
        self.row(
            "8-input, 64 keep-alive conn.: feature `metrics` with `--metrics` vs the same server without it",
            format!(
                "with metrics {} req/s vs without {}: **{}**",
                b.num(),
                a.num(),
                metrics.x()
            ),
            ">= 0.97x",
            Some(metrics.median >= 0.97),
        );
        self.row(
            "8-input, 64 keep-alive conn.: nested in axum (`axum_app` example, under `/agent`) vs the standalone server, system allocator both",
            format!(
                "axum {} req/s vs standalone {}: **{}**",
                d.num(),
                c.num(),
                Spread::of(nested_ratio).x()
            ),
            "(reported)",
            None,
        );
        Ok(())
    }

    fn start_magma_args(&mut self, exe: &Path, args: &[&str]) -> Result<Proc> {
        let port = crate::process::free_port()?;
        let mut cmd = Command::new(exe);
        cmd.args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--max-connections",
            "1100",
        ])
        .args(args)
        .env("RUST_LOG", "warn");
        self.note_command(&cmd, "RUST_LOG=warn ");
        let p = Proc::spawn("magma-server", &mut cmd, port)?;
        p.wait(Duration::from_secs(30))?;
        Ok(p)
    }

    fn start_axum_app(&mut self) -> Result<Proc> {
        let port = crate::process::free_port()?;
        let exe = self
            .bin
            .join("examples")
            .join(format!("axum_app{}", std::env::consts::EXE_SUFFIX));
        let mut cmd = Command::new(exe);
        cmd.arg(format!("127.0.0.1:{port}")).env("RUST_LOG", "warn");
        self.note_command(&cmd, "RUST_LOG=warn ");
        let p = Proc::spawn("axum_app", &mut cmd, port)?;
        p.wait(Duration::from_secs(30))?;
        Ok(p)
    }

    // --------------------------------------------------------------- report

    fn report(&self, machine: &str, elapsed: Duration) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "## Results of `cargo xtask bench`\n");
        let _ = writeln!(
            s,
            "{} repetitions per figure, wrk runs of {} s; ran in {}.\n",
            self.opts.reps,
            self.opts.secs,
            crate::process::fmt_duration(elapsed)
        );
        let _ = writeln!(s, "```text\n{machine}\n```\n");
        let _ = writeln!(s, "| figure | median (range) | goal | met | load 1m |");
        let _ = writeln!(s, "|---|---|---|---|---|");
        for r in &self.rows {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                r.figure,
                r.value,
                r.goal,
                met_word(r.met),
                r.load
            );
        }
        for section in &self.sections {
            let _ = writeln!(s, "\n{section}");
        }
        let _ = writeln!(s, "\nNotes:\n");
        for n in &self.notes {
            let _ = writeln!(s, "- {n}");
        }
        let _ = writeln!(s, "\nCommands (ports vary per run):\n\n```sh");
        for c in &self.commands {
            let _ = writeln!(s, "{c}");
        }
        let _ = writeln!(s, "```");
        s
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Wrk {
    rps: f64,
    p99_ms: f64,
    socket_errors: f64,
}

/// A median with the range it came from (also `cargo xtask layouts`'s).
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Spread {
    /// The median and range of the finite values of `v` (all `NaN` when
    /// there are none).
    pub fn of(mut v: Vec<f64>) -> Spread {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            return Spread {
                median: f64::NAN,
                lo: f64::NAN,
                hi: f64::NAN,
            };
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            median,
            lo: v[0],
            hi: v[n - 1],
        }
    }

    /// `a / b`, its range taken crosswise from the two ranges.
    fn ratio(a: &Spread, b: &Spread) -> Spread {
        Spread {
            median: a.median / b.median,
            lo: a.lo / b.hi,
            hi: a.hi / b.lo,
        }
    }

    fn x(&self) -> String {
        format!("{:.2}x ({:.2}-{:.2})", self.median, self.lo, self.hi)
    }

    fn plain(&self) -> String {
        format!("{:.1} ({:.1}-{:.1})", self.median, self.lo, self.hi)
    }

    fn num(&self) -> String {
        let digits = if self.median >= 100.0 {
            0
        } else if self.median >= 1.0 {
            2
        } else {
            3
        };
        format!(
            "{:.*} ({:.*}-{:.*})",
            digits, self.median, digits, self.lo, digits, self.hi
        )
    }

    /// A criterion time in ns, shown in a readable unit.
    fn time(&self) -> String {
        let (div, unit) = if self.median >= 1e6 {
            (1e6, "ms")
        } else if self.median >= 1e3 {
            (1e3, "µs")
        } else {
            (1.0, "ns")
        };
        format!(
            "{:.2} {unit} ({:.2}-{:.2})",
            self.median / div,
            self.lo / div,
            self.hi / div
        )
    }
}

/// The median of a criterion benchmark (ns) with its 95% confidence interval, found by
/// its full id in `<target>/criterion/**/new/benchmark.json`.
fn criterion_median(dir: &Path, full_id: &str) -> Result<Spread> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).with_context(|| format!("reading {}", d.display()))? {
            let p = entry?.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.file_name().is_some_and(|n| n == "benchmark.json")
                && p.parent()
                    .and_then(Path::file_name)
                    .is_some_and(|n| n == "new")
            {
                let v: Value = serde_json::from_str(&std::fs::read_to_string(&p)?)?;
                if v["full_id"].as_str() == Some(full_id) {
                    let est: Value = serde_json::from_str(&std::fs::read_to_string(
                        p.with_file_name("estimates.json"),
                    )?)?;
                    let m = &est["median"];
                    let g = |v: &Value| v.as_f64().unwrap_or(f64::NAN);
                    return Ok(Spread {
                        median: g(&m["point_estimate"]),
                        lo: g(&m["confidence_interval"]["lower_bound"]),
                        hi: g(&m["confidence_interval"]["upper_bound"]),
                    });
                }
            }
        }
    }
    bail!(
        "no criterion result for `{full_id}` under {}",
        dir.display()
    )
}

/// A server process, killed when dropped.
struct Proc {
    name: &'static str,
    child: Child,
    port: u16,
}

impl Proc {
    fn spawn(name: &'static str, cmd: &mut Command, port: u16) -> Result<Proc> {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        Ok(Proc { name, child, port })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait(&self, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                bail!(
                    "{} did not listen on port {} within {within:?}",
                    self.name,
                    self.port
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `POST /v1/responses` with `Connection: close`: the status and the body.
fn post(port: u16, body: &[u8]) -> Result<(u16, Vec<u8>)> {
    post_at(port, Endpoint::Responses.path(), body)
}

fn post_at(port: u16, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>)> {
    exchange(port, "POST", path, body)
}

fn get_at(port: u16, path: &str) -> Result<(u16, Vec<u8>)> {
    exchange(port, "GET", path, b"")
}

/// One request on a new connection; (status, body).
fn exchange(port: u16, method: &str, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    s.write_all(body)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of head in the response")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    if head.contains("transfer-encoding: chunked") {
        bail!("chunked response: not expected from this server");
    }
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no status code")?;
    Ok((code, raw[split + 4..].to_vec()))
}

/// Opens `n` connections, each sending one keep-alive `GET /health` and reading the answer.
fn hold_connections(port: u16, n: usize) -> Result<Vec<TcpStream>> {
    let mut conns = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = TcpStream::connect(("127.0.0.1", port))?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let head = format!(
            "GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
            Endpoint::Health
        );
        s.write_all(head.as_bytes())?;
        let mut buf = [0u8; 4096];
        let got = s.read(&mut buf)?;
        if got == 0 {
            bail!("connection closed before an answer to {}", Endpoint::Health);
        }
        conns.push(s);
    }
    Ok(conns)
}

fn rss_mib(pid: u32) -> Result<f64> {
    let kib = magma_testkit::process::rss_kib(pid).context("no VmRSS")?;
    Ok(kib as f64 / 1024.0)
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}

fn machine_facts() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|l| l.trim_start_matches([' ', '\t', ':']).to_owned())
        .unwrap_or_else(|| "?".to_owned());
    let out = |prog: &str, args: &[&str]| {
        Command::new(prog)
            .args(args)
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_owned()
            })
            .unwrap_or_default()
    };
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .next()
        .unwrap_or("")
        .to_owned();
    format!(
        "nproc: {}\nCPU: {model}\n{mem}\nkernel: {}\nrustc: {}\nload average at start: {}",
        out("nproc", &[]),
        out("uname", &["-r"]),
        out("rustc", &["--version"]),
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    )
}

fn met_word(met: Option<bool>) -> &'static str {
    match met {
        Some(true) => "yes",
        Some(false) => "**no**",
        None => "-",
    }
}

/// A command line for the report (arguments with spaces quoted).
fn show(cmd: &Command) -> String {
    let mut parts = vec![cmd.get_program().to_string_lossy().into_owned()];
    for a in cmd.get_args() {
        let a = a.to_string_lossy();
        if a.contains(' ') || a.contains('<') {
            parts.push(format!("'{a}'"));
        } else {
            parts.push(a.into_owned());
        }
    }
    let envs: Vec<String> = cmd
        .get_envs()
        .filter(|(k, _)| k.to_str() == Some("BENCH_BODY"))
        .filter_map(|(k, v)| v.map(|v| format!("{}={}", k.to_string_lossy(), v.to_string_lossy())))
        .collect();
    if envs.is_empty() {
        parts.join(" ")
    } else {
        format!("{} {}", envs.join(" "), parts.join(" "))
    }
}

/// wrk script: POST the file named by `BENCH_BODY`, print a JSON summary at the end.
const WRK_SCRIPT: &str = r#"wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  io.write(string.format(
    "WRKJSON {\"requests\":%d,\"duration_us\":%d,\"p50_us\":%d,\"p99_us\":%d,\"connect_errors\":%d,\"read_errors\":%d,\"write_errors\":%d,\"status_errors\":%d,\"timeouts\":%d}\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status,
    summary.errors.timeout))
end
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_valid_requests_of_the_intended_size() {
        let body = bench_like::http_body(8);
        assert!(magma_protocol::AgentRequest::from_slice(body.as_bytes()).is_ok());
        assert!((6000..7200).contains(&body.len()), "{} bytes", body.len());
        assert!(
            magma_protocol::AgentRequest::from_slice(bench_like::TINY_BODY.to_owned().as_bytes())
                .is_ok()
        );
    }

    /// The `uvicorn[standard]` venv differs from the interop one only by
    /// uvicorn's `standard` extra: the same FastAPI agent on the same pins.
    #[test]
    fn the_standard_requirements_repeat_every_interop_pin() {
        let root = crate::project_root().unwrap();
        let pins = |file: &str| -> Vec<String> {
            std::fs::read_to_string(root.join(file))
                .unwrap()
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned)
                .collect()
        };
        let standard = pins(STANDARD_REQUIREMENTS);
        for pin in pins("harness/python/requirements-interop.txt") {
            assert!(standard.contains(&pin), "{pin} is missing or differs");
        }
        for extra in ["uvloop==", "httptools=="] {
            assert!(standard.iter().any(|p| p.starts_with(extra)), "{extra}");
        }
    }

    #[test]
    fn spread_is_median_and_range() {
        let s = Spread::of(vec![3.0, 1.0, 2.0, 10.0]);
        assert_eq!((s.median, s.lo, s.hi), (2.5, 1.0, 10.0));
        let r = Spread::ratio(&Spread::of(vec![4.0]), &Spread::of(vec![2.0]));
        assert_eq!(r.median, 2.0);
    }

    #[test]
    fn options_parse() {
        let o = magma_harness::parse_args::<Options>(
            "bench",
            &["--quick".into(), "--only".into(), "http,batch".into()],
        )
        .unwrap()
        .resolved();
        assert_eq!((o.reps, o.secs), (3, 1));
        assert!(o.wants("http") && !o.wants("parse"));
        assert!(
            magma_harness::parse_args::<Options>("bench", &["--only".into(), "nope".into()])
                .is_err()
        );
    }
}
