//! The benchmark suite of magma-rs, kept out of xtask like ripgrep keeps its
//! own: [`bench`](mod@bench) reproduces the table of `docs/performance.md`, [`soak`]
//! runs mixed load for minutes and watches the server's memory, and the
//! `magma-bench` binary ([`helpers`]) is the bare-hyper floor server and the
//! magma-client loop those measurements compare against; [`layouts`] runs
//! magma-protocol's `parse_ratio` bench over random code layouts. `cargo
//! xtask bench`, `cargo xtask soak` and `cargo xtask layouts` call into this
//! crate. What the runs measured is logged in `bench/runs/`.
#![allow(clippy::print_stdout, clippy::print_stderr)] // commands report on the terminal

pub mod bench;
pub mod helpers;
pub mod layouts;
pub mod soak;

use magma_harness::{process, project_root, python, xtask_dir};
