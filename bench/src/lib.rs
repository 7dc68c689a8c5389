//! The benchmark suite of magma-rs, kept out of xtask like ripgrep keeps its
//! own: [`bench`](mod@bench) reproduces the table of `docs/performance.md`, [`soak`]
//! runs mixed load for minutes and watches the server's memory, and the
//! `magma-bench` binary ([`helpers`]) is the bare-hyper floor server and the
//! magma-client loop those measurements compare against. `cargo xtask bench`
//! and `cargo xtask soak` call into this crate.
#![allow(clippy::print_stdout, clippy::print_stderr)] // commands report on the terminal

pub mod bench;
pub mod helpers;
pub mod soak;

use magma_harness::{process, project_root, python, xtask_dir};
