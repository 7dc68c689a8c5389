//! Project automation for magma-rs, run as `cargo xtask <subcommand>`.
//!
//! Only `anyhow` and `serde_json` here; external tools (Python, pip) are driven through
//! `std::process::Command`. Each subcommand lives in its own module and is dispatched from
//! [`run`]; add new ones to [`SUBCOMMANDS`] and to the `match` there.
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod conformance;
mod python;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result, bail};

/// Name and one-line summary of every subcommand, for `--help`.
const SUBCOMMANDS: &[(&str, &str)] = &[(
    "conformance [--check]",
    "regenerate crates/magma-protocol/tests/fixtures/reference.jsonl against magma-core 2.0.1 \
     (--check: fail if the committed file is stale)",
)];

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
