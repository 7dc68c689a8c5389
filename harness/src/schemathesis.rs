//! `cargo xtask schemathesis`: property-based tests of `magma-server` from `docs/openapi.json`.
//!
//! Builds the `magma-server` binary (demo agent), starts it on a free port of 127.0.0.1 and
//! runs schemathesis (PyPI, exact pins in `harness/python/requirements-schemathesis.txt`, venv
//! `<target>/xtask/venv-schemathesis`) against it: every operation of the document, all of
//! schemathesis's phases that apply (examples, coverage, fuzzing; stateful needs links, which
//! the document has none of), positive and negative data, and the response checks below, a
//! bounded number of test cases per operation and a fixed seed so that runs are repeatable.
//! Any failed check fails the command, with schemathesis's own report (each failure with the
//! request as a curl command, the response and the check) above the error. The server's log
//! is kept in `<target>/xtask/schemathesis/server.log`.
//!
//! Nothing leaves the machine: the document is read from disk, the only base URL is the
//! loopback address, and proxy variables are removed from schemathesis's environment.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::process::{Guard, fmt_duration, free_port, wait_for_port};
use crate::python;

/// The response checks run on every test case: the server never answers 5xx (503 is in the
/// document and the demo agent is always ready, so any 5xx is a bug), every status code,
/// content type, header and body is one the document declares for the operation.
const CHECKS: &[&str] = &[
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_headers_conformance",
    "response_schema_conformance",
];

/// Test cases per operation in the fuzzing phase (the coverage phase adds its own fixed set):
/// under a minute in all on 2 cores.
const DEFAULT_MAX_EXAMPLES: u32 = 200;
/// A fixed seed so that CI runs are repeatable; `--seed` explores other inputs.
const DEFAULT_SEED: u64 = 20_261_202;

/// Flags of `cargo xtask schemathesis`.
#[derive(Debug, clap::Args)]
pub struct Options {
    /// Examples per operation.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_EXAMPLES, value_parser = clap::value_parser!(u32).range(1..))]
    max_examples: u32,
    /// The hypothesis seed (fixed by default, so CI runs are repeatable).
    #[arg(long, value_name = "N", default_value_t = DEFAULT_SEED)]
    seed: u64,
}

/// Runs schemathesis against magma-server.
pub fn run(options: &Options) -> Result<()> {
    let root = crate::project_root()?;
    let openapi = root.join("docs/openapi.json");
    if !openapi.is_file() {
        bail!(
            "{} is missing; run `cargo xtask codegen`",
            openapi.display()
        );
    }
    let python = python::ensure_venv(
        "schemathesis",
        &root.join("harness/python/requirements-schemathesis.txt"),
        &[],
    )?;

    let server_bin = crate::process::build_magma_server(&root, false, false)?;

    // Schemathesis runs in a scratch directory of its own: it reads `schemathesis.toml` from
    // the working directory, and no file of the repository should influence or receive it.
    let work = crate::xtask_dir()?.join("schemathesis");
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let log_path = work.join("server.log");
    let log =
        fs::File::create(&log_path).with_context(|| format!("creating {}", log_path.display()))?;

    let port = free_port()?;
    let mut server = Guard::spawn(
        "magma-server",
        Command::new(&server_bin)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log),
    )?;
    wait_for_port(&mut server, port, Duration::from_secs(30))?;
    let url = format!("http://127.0.0.1:{port}");
    eprintln!(
        "xtask schemathesis: magma-server (demo agent) listens on {url}; log: {}",
        log_path.display()
    );

    let mut cmd = schemathesis_command(&python, options, &openapi, &url);
    cmd.current_dir(&work);
    eprintln!(
        "xtask schemathesis: schemathesis run {} --url {url} --checks {} --max-examples {} \
         --seed {}",
        openapi.display(),
        CHECKS.join(","),
        options.max_examples,
        options.seed,
    );
    let started = Instant::now();
    let status = cmd
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("running {cmd:?}"))?;
    let elapsed = started.elapsed();
    let server_state = server.ensure_running();
    drop(server);

    if !status.success() {
        bail!(
            "schemathesis reported failures against magma-server ({status}, after {}); its \
             report is above, and the server's log is in {}. Reproduce one case with the curl \
             command printed for it, or the whole run with `cargo xtask schemathesis --seed {}`",
            fmt_duration(elapsed),
            log_path.display(),
            options.seed,
        );
    }
    server_state.context("magma-server stopped during the schemathesis run")?;
    println!(
        "schemathesis: passed, no failures in {} (checks: {}; --max-examples {}; seed {})",
        fmt_duration(elapsed),
        CHECKS.join(", "),
        options.max_examples,
        options.seed,
    );
    Ok(())
}

fn schemathesis_command(python: &Path, options: &Options, openapi: &Path, url: &str) -> Command {
    let mut cmd = python::command(python);
    cmd.args(["-m", "schemathesis.cli", "run"])
        .arg(openapi)
        .args(["--url", url])
        .args(["--checks", &CHECKS.join(",")])
        .args(["--mode", "all"])
        .args(["--max-examples", &options.max_examples.to_string()])
        .args(["--seed", &options.seed.to_string()])
        // Every request gets an answer within a second from the demo agent; a hang is a bug.
        .args(["--request-timeout", "10"])
        // No example database: a run depends on the seed alone and writes nothing.
        .args(["--generation-database", "none"])
        .arg("--no-color")
        .env("COLUMNS", "120")
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .env_remove("SCHEMATHESIS_HOOKS");
    for var in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        cmd.env_remove(var);
    }
    cmd
}
