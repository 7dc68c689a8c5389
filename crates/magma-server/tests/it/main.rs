//! Integration tests: a real hyper server on 127.0.0.1 port 0, real clients.

mod support;

mod budget;
mod coaching;
mod demo;
mod export;
mod faults;
mod guide;
mod hostile;
mod http_table;
mod limits;
mod memory;
mod protocols;
mod request_span;
mod shutdown;
mod tidy;

#[cfg(feature = "cli")]
mod attack;
#[cfg(feature = "cli")]
mod binary;
#[cfg(feature = "metrics")]
mod metrics;
#[cfg(feature = "cli")]
mod nested;
#[cfg(feature = "tls")]
mod tls;
