//! Project automation for magma-rs, run as `cargo xtask <command>`.
//!
//! Thin commands: the arguments are parsed here (clap), the work is done by
//! the modules of this crate (generation, release, supply chain, fuzzing,
//! the attack suite's full form) or by the crates it runs: `magma-harness`
//! (the Python conformance and interop harnesses, the docs, packaging and
//! minimum-Rust checks) and `magma-bench` (the benchmark suite, code layouts
//! and soak). `tidy` (tests only) keeps the workspace's sources free of
//! benchmark run numbers and this crate under its size.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod attack;
mod codegen;
mod deny;
mod fuzz;
mod release;
#[cfg(test)]
mod tidy;

use std::process::ExitCode;

use anyhow::Result;
use clap::{Parser, Subcommand};
use magma_bench::layouts;
use magma_harness::{
    conformance, deploy, docs_check, e2e, gen_export, interop, msrv, newest_deps, publish_check,
    schema_check, schemathesis, wheel,
};
pub(crate) use magma_harness::{process, project_root, xtask_dir};

/// cargo xtask: project automation for magma-rs.
#[derive(Debug, Parser)]
#[command(
    name = "cargo xtask",
    bin_name = "cargo xtask",
    after_help = "ENVIRONMENT:\n    MAGMA_PYTHON    Python 3.12 interpreter for the reference venvs \
                  (default: python3.12, run with PYENV_VERSION=3.12.1 unless PYENV_VERSION is set)"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write docs/schema/*.schema.json and docs/openapi.json.
    Codegen {
        /// Fail if the files are stale instead of writing them.
        #[arg(long)]
        check: bool,
    },
    /// Compare docs/schema with the JSON Schemas of magma-core 2.0.1's pydantic models.
    SchemaDiff,
    /// Validate docs/openapi.json and docs/schema, and replay the reference fixtures through
    /// the schemas.
    OpenapiCheck,
    /// Regenerate crates/magma-protocol/tests/fixtures/reference.jsonl against magma-core
    /// 2.0.1.
    Conformance {
        /// Fail if the committed file is stale instead of writing it.
        #[arg(long)]
        check: bool,
    },
    /// magma-server under a BENCH-like Python client and magma-client against a FastAPI
    /// agent on magma-core 2.0.1, over HTTP and HTTPS.
    Interop,
    /// The real magma-bench and magma-gen (PyPI, CPU physics) against magma-server and
    /// llm-agent, with the stand-ins listed in docs/e2e.md; outputs under target/e2e.
    E2e(e2e::Options),
    /// GEN's dataset export (magma-gen 2.0.0 `launch_export`) through python/magma-rs-export
    /// and the demo agent's exporter: datasets, splits, manifest, refusals, failures.
    GenExport,
    /// Build the magma-validate Python wheel, install it into a fresh Python 3.12 venv and
    /// probe magma-server with it.
    Wheel(wheel::Options),
    /// Fuzz magma-server (demo agent, loopback) with schemathesis from docs/openapi.json.
    Schemathesis(schemathesis::Options),
    /// Bump the lockstep version, date the CHANGELOG, run `cargo publish --workspace
    /// --dry-run` (see RELEASING.md).
    Release(release::Options),
    /// Package and verify every publishable crate alone, in dependency order.
    PublishCheck,
    /// Derive the libraries' minimum Rust from Cargo.lock; fail unless Cargo.toml and
    /// README.md state it.
    Msrv,
    /// Copy the workspace, `cargo update` the copy to the newest semver-compatible
    /// dependencies, then clippy (warnings denied) and the libraries' tests there.
    NewestDeps,
    /// What the README and docs/ tell a user to type, done outside the workspace: a new
    /// crate with the documented dependency lines runs the guides' examples; both binaries
    /// install with `cargo install --locked`; unpublished installs are marked.
    DocsCheck,
    /// The full attack suite of the memory budget (16 MiB requests) against the release
    /// magma-server; each attack's peak resident memory checked against 512 MiB and printed.
    Attack {
        /// Measure the debug build instead of the release one.
        #[arg(long)]
        debug: bool,
    },
    /// Two magma-server replicas behind nginx (TLS, path prefix, load balancing) on
    /// loopback, one killed mid-run.
    DeployCheck,
    /// Build the cargo-fuzz targets under fuzz/ and run each briefly.
    Fuzz(fuzz::Options),
    /// Reproduce the table of docs/performance.md (magma-bench).
    Bench(magma_bench::bench::Options),
    /// magma-protocol's parse_ratio bench built with its functions in N random orders, each
    /// figure reported over them (where code lies moves its figures between builds).
    Layouts(layouts::Options),
    /// Minutes of mixed load on the release magma-server; fails on any unexpected answer or
    /// an upward RSS trend (magma-bench).
    Soak(magma_bench::soak::Options),
    /// cargo deny check bans licenses sources.
    Deny {
        /// Also check RustSec advisories (needs GitHub).
        #[arg(long)]
        advisories: bool,
    },
}

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<()> {
    match command {
        Command::Codegen { check } => codegen::run(check),
        Command::SchemaDiff => schema_check::schema_diff(),
        Command::OpenapiCheck => {
            codegen::run(true).map_err(|e| {
                e.context("the generated files must be up to date before they are validated")
            })?;
            schema_check::openapi_check()
        }
        Command::Conformance { check } => conformance::run(check),
        Command::Interop => interop::run(),
        Command::E2e(options) => e2e::run(&options),
        Command::GenExport => gen_export::run(),
        Command::Wheel(options) => wheel::run(&options),
        Command::Schemathesis(options) => schemathesis::run(&options),
        Command::Release(options) => release::run(&options),
        Command::PublishCheck => publish_check::run(),
        Command::Msrv => msrv::run(),
        Command::NewestDeps => newest_deps::run(),
        Command::DocsCheck => docs_check::run(),
        Command::Attack { debug } => attack::run(&attack::Options { debug }),
        Command::DeployCheck => deploy::run(),
        Command::Fuzz(options) => fuzz::run(&options),
        Command::Bench(options) => magma_bench::bench::run(&options),
        Command::Layouts(options) => layouts::run(&options),
        Command::Soak(options) => magma_bench::soak::run(&options),
        Command::Deny { advisories } => deny::run(advisories),
    }
}
