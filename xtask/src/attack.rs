//! `cargo xtask attack [--debug]`: the full form of the attack suite of
//! issue 20 (`crates/magma-server/tests/it/attack.rs` with
//! `MAGMA_ATTACK_FULL=1`): every attack at the largest inputs the default
//! flags allow (16 MiB requests), against the release `magma-server`
//! binary (`--debug`: the debug build), each run's peak resident memory
//! checked against the 512 MiB ceiling and printed.
//!
//! Self-contained: [`Options::parse`] reads the arguments after the
//! subcommand and [`run`] does the work.

use anyhow::{Result, bail};

use crate::process::{build_magma_server, cargo, run_inherited};

#[derive(Debug, PartialEq)]
pub(crate) struct Options {
    /// Measure the debug binary instead of the release one.
    pub(crate) debug: bool,
}

impl Options {
    pub(crate) fn parse(args: &[String]) -> Result<Options> {
        let mut debug = false;
        for arg in args {
            match arg.as_str() {
                "--debug" => debug = true,
                other => bail!("unknown option `{other}` for `attack`"),
            }
        }
        Ok(Options { debug })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options() {
        assert_eq!(Options::parse(&[]).unwrap(), Options { debug: false });
        let debug = Options::parse(&["--debug".to_owned()]).unwrap();
        assert_eq!(debug, Options { debug: true });
        assert!(Options::parse(&["--fast".to_owned()]).is_err());
    }
}
