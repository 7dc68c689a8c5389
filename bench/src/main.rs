//! `magma-bench floor|client ...`: the helpers `cargo xtask bench` runs in a
//! release build (see `helpers.rs`).
#![allow(clippy::print_stderr)]

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    match magma_bench::helpers::run(&magma_bench::helpers::Helper::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}
