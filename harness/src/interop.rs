//! `cargo xtask interop`: magma-rs against the Python side MAGMA users run.
//!
//! 1. `magma-server` (demo agent) under `harness/python/bench_client.py`, a
//!    Python client that does what magma-bench 2.0.1 does, and under
//!    `harness/python/gen_coaching.py`, GEN's coaching client (magma-gen
//!    2.0.0's `RemoteCoaching` and its POST path), over HTTP and over HTTPS
//!    with the server's generated development CA.
//! 2. `magma-client` (`harness/src/bin/interop-client.rs`) against
//!    `harness/python/fastapi_agent.py --coaching`, a FastAPI agent on the
//!    magma-core 2.0.1 models with magma-core's own coaching routes
//!    (`mount_coaching_routes`, its LLM worker pool replaced by a stub), over
//!    HTTP (starting while the agent still answers 503) and over HTTPS.
//! 3. `magma-validate probe` against the same FastAPI agent, started while it
//!    still answers 503: exit 0 with a warning naming FastAPI's 500 for NaN
//!    and the coaching and behaviour checks passed; exit 1 with `--strict`; exit 0 with
//!    `--skip invalid-request/nan` and the waiver in the report.
//! 4. GEN's repair loop through GEN's own code (`harness/python/gen_repair_loop.py`
//!    in the full MAGMA venv of `cargo xtask e2e`): `RemoteCoaching.submit`,
//!    `AgentCoachingManager.add_coaching_nodes` and
//!    `BaseAgentManager._send_coaching_pending` re-inject every proposal of
//!    `magma-server`'s demo coach (HTTP and HTTPS) and of the FastAPI agent on
//!    magma-core's coaching routes (full-history's proposal shape); each comes
//!    back as the decision it asks for. The negative control: the FastAPI agent
//!    with `--wrap-proposals` (the wrapped shape) gets bad nodes in GEN, and
//!    `magma-validate probe` fails it on `coaching/reinject`.
//!
//! Everything runs on 127.0.0.1 and is stopped at the end, also on failure.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use serde_json::Value;

use crate::process::{Guard, cargo, free_port, run_inherited, target_dir, wait_for_port};
use crate::python;

fn run_checked(what: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("xtask interop: {what}");
    run_inherited(what, cmd)
}

pub fn run() -> Result<()> {
    let root = crate::project_root()?;
    let python = python::ensure_venv(
        "interop",
        &root.join("harness/python/requirements-interop.txt"),
        &["magma-core==2.0.1", "magma-gen==2.0.0"],
    )?;
    let server_bin = crate::process::build_magma_server(&root, false, true)?;
    run_checked(
        "building the magma-client interop driver",
        cargo().current_dir(&root).args([
            "build",
            "--quiet",
            "-p",
            "magma-harness",
            "--bin",
            "interop-client",
        ]),
    )?;
    run_checked(
        "building magma-validate",
        cargo().current_dir(&root).args([
            "build",
            "--quiet",
            "-p",
            "magma-rs-validator",
            "--bin",
            "magma-validate",
        ]),
    )?;
    let bin = target_dir(&root).join("debug");
    let validate = bin.join(format!("magma-validate{}", std::env::consts::EXE_SUFFIX));
    let client_example = bin.join(format!("interop-client{}", std::env::consts::EXE_SUFFIX));
    let tls_dir = crate::xtask_dir()?.join("interop-tls");
    std::fs::create_dir_all(&tls_dir).with_context(|| format!("creating {}", tls_dir.display()))?;
    let bench_client = root.join("harness/python/bench_client.py");
    let gen_coaching = root.join("harness/python/gen_coaching.py");
    let fastapi_agent = root.join("harness/python/fastapi_agent.py");
    let gen_repair_loop = root.join("harness/python/gen_repair_loop.py");
    let full_python = crate::e2e::full_venv()?;
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

        let mut gen_client = Command::new(&python);
        gen_client.arg(&gen_coaching).arg(&url);
        if https {
            gen_client.arg("--cacert").arg(tls_dir.join("ca.pem"));
        }
        let what = format!(
            "GEN's RemoteCoaching (magma-gen 2.0.0) -> magma-server coaching over {scheme}"
        );
        run_checked(&what, &mut gen_client)?;
        server.ensure_running()?;
        passed.push(what);

        let mut repair = Command::new(&full_python);
        repair.arg(&gen_repair_loop).arg(&url);
        if https {
            repair.arg("--cacert").arg(tls_dir.join("ca.pem"));
        }
        let what = format!(
            "GEN's repair loop (RemoteCoaching.submit, AgentCoachingManager, \
             BaseAgentManager) re-injects every demo proposal -> magma-server over {scheme}"
        );
        run_checked(&what, &mut repair)?;
        server.ensure_running()?;
        passed.push(what);
    }

    // 2. The Rust client against a FastAPI agent on magma-core.
    for https in [false, true] {
        let port = free_port()?;
        let mut cmd = Command::new(&python);
        cmd.arg(&fastapi_agent).args([
            "--port",
            &port.to_string(),
            "--ready-after",
            "5",
            "--coaching",
        ]);
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
        client
            .arg(format!("{scheme}://127.0.0.1:{port}"))
            .arg("--coaching");
        if https {
            client.arg("--cacert").arg(tls_dir.join("ca.pem"));
        } else {
            // Started right away, the agent is still loading: 503 is exercised.
            client.arg("--expect-not-ready");
        }
        let what = format!(
            "magma-client (with a coaching session) -> FastAPI agent (magma-core 2.0.1, \
             mount_coaching_routes) over {scheme}"
        );
        run_checked(&what, &mut client)?;
        agent.ensure_running()?;
        passed.push(what);
    }

    // 3. magma-validate probe against the FastAPI agent: severities and waivers.
    let port = free_port()?;
    let mut cmd = Command::new(&python);
    cmd.arg(&fastapi_agent).args([
        "--port",
        &port.to_string(),
        "--ready-after",
        "3",
        "--coaching",
    ]);
    let mut agent = Guard::spawn("fastapi_agent.py", &mut cmd)?;
    wait_for_port(&mut agent, port, Duration::from_secs(60))?;
    let url = format!("http://127.0.0.1:{port}");
    for case in PROBE_CASES {
        let what = format!(
            "magma-validate probe{} -> FastAPI agent (magma-core 2.0.1): exit {}",
            case.flags
                .iter()
                .map(|f| format!(" {f}"))
                .collect::<String>(),
            case.exit
        );
        eprintln!("xtask interop: {what}");
        let out = Command::new(&validate)
            .args(["probe", &url, "--format", "json", "--ready-timeout", "60"])
            .args(case.flags)
            .output()
            .with_context(|| format!("running {}", validate.display()))?;
        let report: Value = serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "{what}: no JSON report; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })?;
        (case.verify)(out.status.code(), &report).with_context(|| format!("{what}: {report:#}"))?;
        agent.ensure_running()?;
        passed.push(what);
    }
    drop(agent);

    // 4. GEN's repair loop against magma-core's own coaching routes: the
    // full-history shape passes; the wrapped shape is caught by GEN and the probe.
    for wrapped in [false, true] {
        let port = free_port()?;
        let mut cmd = Command::new(&python);
        cmd.arg(&fastapi_agent)
            .args(["--port", &port.to_string(), "--coaching"]);
        if wrapped {
            cmd.arg("--wrap-proposals");
        }
        let mut agent = Guard::spawn("fastapi_agent.py", &mut cmd)?;
        wait_for_port(&mut agent, port, Duration::from_secs(60))?;
        let url = format!("http://127.0.0.1:{port}");
        let mut repair = Command::new(&full_python);
        repair.arg(&gen_repair_loop).arg(&url);
        let what = if wrapped {
            repair.arg("--expect-fail");
            "GEN's repair loop -> FastAPI agent whose stub coach wraps its proposals: \
             GEN records the coached nodes as bad"
        } else {
            "GEN's repair loop -> FastAPI agent (mount_coaching_routes, full-history's \
             replace_decision proposals): every coached node makes its decision"
        };
        run_checked(what, &mut repair)?;
        passed.push(what.to_owned());
        if wrapped {
            let what = "magma-validate probe -> FastAPI agent with wrapped proposals: exit 1, \
                        coaching/reinject fails and its fix says what GEN sends";
            eprintln!("xtask interop: {what}");
            let out = Command::new(&validate)
                .args(["probe", &url, "--format", "json", "--ready-timeout", "60"])
                .output()
                .with_context(|| format!("running {}", validate.display()))?;
            let report: Value = serde_json::from_slice(&out.stdout)
                .with_context(|| format!("{what}: no JSON report"))?;
            let reinject = report["checks"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["name"] == "coaching/reinject"))
                .context("no coaching/reinject check in the report")?;
            let fix_says_what_gen_sends = reinject["findings"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|f| {
                    f["fix"]
                        .as_str()
                        .is_some_and(|t| t.contains("so GEN sent extra_keys.coaching"))
                });
            ensure!(
                out.status.code() == Some(1)
                    && reinject["status"] == "fail"
                    && fix_says_what_gen_sends,
                "{what}: exit {:?}, {reinject:#}",
                out.status.code()
            );
            passed.push(what.to_owned());
        }
        agent.ensure_running()?;
    }

    println!("interop: {} passed, 0 failed", passed.len());
    for p in &passed {
        println!("  ok  {p}");
    }
    Ok(())
}

/// One run of `magma-validate probe` against the FastAPI agent.
struct ProbeCase {
    flags: &'static [&'static str],
    exit: i32,
    verify: fn(Option<i32>, &Value) -> Result<()>,
}

/// The check of the NaN request in a probe report.
fn nan_check(report: &Value) -> Result<&Value> {
    report["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == "invalid-request/nan"))
        .context("no invalid-request/nan check in the report")
}

const PROBE_CASES: &[ProbeCase] = &[
    ProbeCase {
        flags: &[],
        exit: 0,
        verify: |code, report| {
            ensure!(code == Some(0), "exit {code:?}, expected 0");
            let nan = nan_check(report)?;
            ensure!(
                nan["status"] == "warn",
                "invalid-request/nan is not a warning"
            );
            ensure!(
                nan["reason"].as_str().unwrap_or("").contains("500"),
                "the warning does not name the 500"
            );
            ensure!(report["summary"]["failed"] == 0, "a check failed");
            // The behaviour checks pass: the agent answers from the request
            // alone, samples its branches, honours delay_ms without blocking.
            for name in [
                "state/hidden",
                "branches/identical",
                "concurrency/health-while-busy",
                "concurrency/parallel",
                "concurrency/memory-isolation",
            ] {
                let check = report["checks"]
                    .as_array()
                    .and_then(|cs| cs.iter().find(|c| c["name"] == name))
                    .with_context(|| format!("no check {name} in the report"))?;
                ensure!(
                    check["status"] == "pass",
                    "{name} did not pass: {}",
                    check["reason"]
                );
            }
            // magma-core's own coaching routes, with full-history's proposal
            // shape, pass every coaching check, the re-injection included.
            for check in report["checks"].as_array().into_iter().flatten() {
                let name = check["name"].as_str().unwrap_or("");
                if name.starts_with("coaching/") {
                    ensure!(check["status"] == "pass", "{name} did not pass");
                }
            }
            Ok(())
        },
    },
    ProbeCase {
        flags: &["--strict"],
        exit: 1,
        verify: |code, report| {
            ensure!(code == Some(1), "exit {code:?}, expected 1");
            ensure!(nan_check(report)?["status"] == "fail", "NaN does not fail");
            Ok(())
        },
    },
    ProbeCase {
        flags: &["--skip", "invalid-request/nan"],
        exit: 0,
        verify: |code, report| {
            ensure!(code == Some(0), "exit {code:?}, expected 0");
            ensure!(
                nan_check(report)?["status"] == "skip",
                "NaN was not skipped"
            );
            ensure!(
                report["waived"]
                    == serde_json::json!([{"check": "invalid-request/nan", "waiver": "skip"}]),
                "the waiver is not in the report"
            );
            Ok(())
        },
    },
];
