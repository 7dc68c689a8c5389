//! `cargo xtask attack [--debug]`: the full form of the attack suite of
//! issue 20 (`crates/magma-server/tests/it/attack.rs` with
//! `MAGMA_ATTACK_FULL=1`): every attack at the largest inputs the default
//! flags allow (16 MiB requests), against the release `magma-server`
//! binary (`--debug`: the debug build), each run's peak resident memory
//! checked against the 512 MiB ceiling and printed.
//!
//! `main.rs` parses the flag (clap) and [`run`] does the work.

use anyhow::Result;

use crate::process::{build_magma_server, cargo, run_inherited};

#[derive(Debug)]
pub(crate) struct Options {
    /// Measure the debug binary instead of the release one.
    pub(crate) debug: bool,
}

pub(crate) fn run(options: &Options) -> Result<()> {
    let root = crate::project_root()?;
    let bin = build_magma_server(&root, !options.debug, false)?;
    eprintln!(
        "xtask attack: the full attack suite against {}",
        bin.display()
    );
    let mut cmd = cargo();
    cmd.current_dir(&root)
        .args([
            "test",
            "-p",
            "magma-rs-server",
            "--test",
            "it",
            "attack::",
            "--",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("MAGMA_ATTACK_FULL", "1")
        .env("MAGMA_SERVER_BIN", &bin);
    run_inherited("the attack suite (full form)", &mut cmd)
}
