//! Integration tests of magma-protocol: one test binary, one module per theme.
#![allow(clippy::print_stderr, clippy::print_stdout)] // tests report what they measured

mod coaching;
mod code_map;
mod corpus;
mod error_inputs;
mod errors;
mod exchange;
mod export;
mod fixtures;
mod hostile;
mod inline_vec;
mod public_corpus;
mod regression;
mod roundtrip;
mod tidy;
