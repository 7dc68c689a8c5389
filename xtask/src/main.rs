//! Project automation for magma-rs, run as `cargo xtask <subcommand>`.
//!
//! Only `anyhow` and `serde_json` here; external tools (Python, pip) are driven through
//! `std::process::Command`. Each subcommand lives in its own module and is dispatched from
//! [`run`]; add new ones to [`SUBCOMMANDS`] and to the `match` there.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod attack;
mod bench;
mod bench_helpers;
mod codegen;
mod conformance;
mod deny;
mod deploy;
mod fuzz;
mod interop;
mod msrv;
mod process;
mod publish_check;
mod python;
mod release;
mod schemathesis;
mod soak;
mod wheel;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

/// Name and one-line summary of every subcommand, for `--help`.
const SUBCOMMANDS: &[(&str, &str)] = &[
    (
        "codegen [--check]",
        "write docs/schema/*.schema.json and docs/openapi.json (--check: fail if they are stale)",
    ),
    (
        "schema-diff",
        "compare docs/schema with the JSON Schemas of magma-core 2.0.1's pydantic models",
    ),
    (
        "openapi-check",
        "validate docs/openapi.json (openapi-spec-validator) and docs/schema, and replay the \
     reference fixtures through the schemas",
    ),
    (
        "conformance [--check]",
        "regenerate crates/magma-protocol/tests/fixtures/reference.jsonl against magma-core 2.0.1 \
     (--check: fail if the committed file is stale)",
    ),
    (
        "interop",
        "run magma-server under a BENCH-like Python client and magma-client against a FastAPI \
     agent on magma-core 2.0.1, over HTTP and HTTPS",
    ),
    (
        "wheel [--release]",
        "build the magma-validate Python wheel with maturin, install it into a fresh Python 3.12 \
     venv and probe magma-server with the installed binary",
    ),
    (
        "schemathesis [--max-examples N] [--seed N]",
        "fuzz magma-server (demo agent, loopback) with schemathesis from docs/openapi.json; \
     fails on any failed check",
    ),
    (
        "release X.Y.Z [--tag] [--commit] [--dry-run]",
        "bump the lockstep version, date the CHANGELOG's Unreleased section, run `cargo publish \
     --workspace --dry-run`; see RELEASING.md",
    ),
    (
        "publish-check",
        "package and verify every publishable crate alone, in dependency order: names free on \
     crates.io (or ours), README links absolute, no tests/fixtures/benches, each .crate < 300 KiB",
    ),
    (
        "msrv",
        "derive the libraries' minimum Rust from Cargo.lock (highest rust-version of their \
     dependencies); fail unless Cargo.toml and README.md state it",
    ),
    (
        "deploy-check",
        "two magma-server replicas behind nginx (TLS, path prefix, load balancing) on loopback; \
     the BENCH-like client passes, one replica is killed mid-run (installs nginx if missing)",
    ),
    (
        "fuzz [--seconds N] [--target T]",
        "build the cargo-fuzz targets under fuzz/ and run each N s (default 20), seeded from the \
     reference fixtures (installs cargo-fuzz if missing)",
    ),
    (
        "bench [--quick] [--reps N] [--duration SECS] [--only parse,http,batch,memory,client]",
        "reproduce the table of docs/performance.md (criterion, wrk, hyperfine; installs wrk and \
     hyperfine, builds release binaries and the Python venv)",
    ),
    (
        "soak [--minutes N]",
        "N minutes (default 5) of mixed load on the release magma-server on loopback; fails on \
     any unexpected answer or an upward RSS trend",
    ),
    (
        "attack [--debug]",
        "the full attack suite of issue 20 (16 MiB requests) against the release magma-server, \
     peak RSS of each attack checked against 512 MiB and printed",
    ),
    (
        "deny [--advisories]",
        "cargo deny check bans licenses sources (installs cargo-deny if missing; --advisories \
     also checks RustSec, which needs GitHub)",
    ),
];

fn help() -> String {
    let mut text = String::from(
        "cargo xtask: project automation for magma-rs\n\nUSAGE:\n    cargo xtask <SUBCOMMAND> [OPTIONS]\n\nSUBCOMMANDS:\n",
    );
    for (name, summary) in SUBCOMMANDS {
        text.push_str(&format!("    {name:<24} {summary}\n"));
    }
    text.push_str(
        "\nENVIRONMENT:\n    MAGMA_PYTHON             Python 3.12 interpreter for the reference venvs \
         (default: python3.12, run with PYENV_VERSION=3.12.1 unless PYENV_VERSION is set)\n",
    );
    text
}

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<()> {
    let Some((command, rest)) = args.split_first() else {
        eprint!("{}", help());
        bail!("no subcommand given");
    };
    match command.as_str() {
        "-h" | "--help" | "help" => {
            print!("{}", help());
            Ok(())
        }
        "codegen" => {
            let mut check = false;
            for arg in rest {
                match arg.as_str() {
                    "--check" => check = true,
                    other => bail!("unknown option `{other}` for `codegen`\n\n{}", help()),
                }
            }
            codegen::run(check)
        }
        "schema-diff" | "openapi-check" => {
            if let Some(other) = rest.first() {
                bail!("unknown option `{other}` for `{command}`\n\n{}", help());
            }
            if command == "schema-diff" {
                codegen::schema_diff()
            } else {
                codegen::openapi_check()
            }
        }
        "conformance" => {
            let mut check = false;
            for arg in rest {
                match arg.as_str() {
                    "--check" => check = true,
                    "-h" | "--help" => {
                        print!("{}", help());
                        return Ok(());
                    }
                    other => bail!("unknown option `{other}` for `conformance`\n\n{}", help()),
                }
            }
            conformance::run(check)
        }
        "interop" => {
            if let Some(other) = rest.first() {
                bail!("unknown option `{other}` for `interop`\n\n{}", help());
            }
            interop::run()
        }
        "schemathesis" => schemathesis::run(&schemathesis::Options::parse(rest)?),
        "wheel" => wheel::run(&wheel::Options::parse(rest)?),
        "release" => release::run(&release::Options::parse(rest)?),
        "publish-check" | "msrv" => {
            if let Some(other) = rest.first() {
                bail!("unknown option `{other}` for `{command}`\n\n{}", help());
            }
            if command == "msrv" {
                msrv::run()
            } else {
                publish_check::run()
            }
        }
        "deploy-check" => {
            if let Some(other) = rest.first() {
                bail!("unknown option `{other}` for `deploy-check`\n\n{}", help());
            }
            deploy::run()
        }
        "fuzz" => fuzz::run(&fuzz::Options::parse(rest)?),
        "soak" => soak::run(&soak::Options::parse(rest)?),
        "attack" => attack::run(&attack::Options::parse(rest)?),
        "deny" => {
            let mut advisories = false;
            for arg in rest {
                match arg.as_str() {
                    "--advisories" => advisories = true,
                    other => bail!("unknown option `{other}` for `deny`\n\n{}", help()),
                }
            }
            deny::run(advisories)
        }
        "bench" => bench::run(&bench::Options::parse(rest)?),
        // Internal: the floor server and the magma-client loop, run by `bench` (release build).
        "bench-helper" => bench_helpers::run(rest),
        other => bail!("unknown subcommand `{other}`\n\n{}", help()),
    }
}

/// The workspace root (the parent of this crate's directory).
pub(crate) fn project_root() -> Result<PathBuf> {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .with_context(|| format!("{} has no parent directory", manifest_dir.display()))?;
    Ok(root.to_path_buf())
}

/// Where xtask keeps its scratch files: `<target>/xtask` (honours `CARGO_TARGET_DIR`).
pub(crate) fn xtask_dir() -> Result<PathBuf> {
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                project_root()?.join(dir)
            }
        }
        _ => project_root()?.join("target"),
    };
    Ok(target.join("xtask"))
}
