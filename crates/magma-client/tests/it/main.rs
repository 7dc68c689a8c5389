//! Integration tests of magma-client against real servers on 127.0.0.1.
#![allow(clippy::print_stderr)] // tests report what they measured

mod support;

mod basics;
mod concurrency;
mod faults;
mod hostile;
mod magma_server;
mod runtime_context;
mod timeouts;
#[cfg(feature = "tls")]
mod tls;
