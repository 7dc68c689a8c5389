//! The harnesses and drivers of magma-rs, run by `cargo xtask`: the
//! conformance and interop harnesses, whose Python side lives in
//! `harness/python/` (fixture generator, FastAPI agent, BENCH-like client,
//! pydantic schema dump, OpenAPI check, the wheel's pytest example), and the
//! checks of the workspace as a user and a publisher meet it ([`docs_check`],
//! [`publish_check`], [`msrv`], [`newest_deps`]). Each module is one xtask
//! command's work, [`process`] and [`python`] the machinery they share.
//! `src/bin/interop-client.rs` is the magma-client interop driver.
#![allow(clippy::print_stdout, clippy::print_stderr)] // commands report on the terminal

pub mod conformance;
pub mod deploy;
pub mod docs_check;
pub mod e2e;
pub mod gen_export;
pub mod interop;
pub mod msrv;
pub mod newest_deps;
pub mod process;
pub mod proxy_interop;
pub mod publish_check;
pub mod python;
pub mod schema_check;
pub mod schemathesis;
pub mod wheel;

use std::path::PathBuf;

use anyhow::{Context, Result};

/// The workspace root (the parent of this crate's directory).
pub fn project_root() -> Result<PathBuf> {
    let manifest_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = manifest_dir
        .parent()
        .with_context(|| format!("{} has no parent directory", manifest_dir.display()))?;
    Ok(root.to_path_buf())
}

/// Where the commands keep their scratch files: `<target>/xtask` (honours
/// `CARGO_TARGET_DIR`).
pub fn xtask_dir() -> Result<PathBuf> {
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

/// Parses `args` (without the command's name) as the options `T` of
/// `command`, as `cargo xtask COMMAND ARGS` would.
pub fn parse_args<T: clap::Args>(command: &'static str, args: &[String]) -> Result<T> {
    #[derive(clap::Parser)]
    struct Wrap<T: clap::Args> {
        #[command(flatten)]
        inner: T,
    }
    let argv = std::iter::once(command.to_owned()).chain(args.iter().cloned());
    Ok(<Wrap<T> as clap::Parser>::try_parse_from(argv)?.inner)
}
