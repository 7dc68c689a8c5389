//! Integration tests of magma-validator: the real `magma-validate` binary
//! against documents, JSON Lines batches and live agents on loopback.
#![allow(clippy::print_stderr)] // tests report what they measured

mod batch;
mod cli_check;
mod docs;
mod hostile;
mod kinds;
mod probe_behaviour;
mod probe_ci;
mod probe_coaching;
mod probe_faults;
mod probe_live;
#[cfg(feature = "tls")]
mod probe_tls;
mod proxy;
mod support;
