//! Test support for the magma-rs workspace, written once and used as a
//! dev-dependency by every crate and by xtask (never published).
//!
//! - [`stub`]: a loopback hyper server whose answers a closure chooses
//!   (optional TLS, hang-up mode, per-reply delay, recorded requests) and a
//!   raw TCP server for answers hyper would not send;
//! - [`pki`]: a test CA that signs server and client leaves, and rustls
//!   configurations for them;
//! - [`TempDir`]: a fresh temporary directory removed on drop;
//! - [`http1`]: raw HTTP/1 exchanges on a TCP stream;
//! - [`process`]: a child-process guard and `/proc` readers (RSS);
//! - [`fixtures`]: the BENCH-like bodies and the deviation list;
//! - [`Rng`]: a deterministic generator for load and garbage;
//! - [`source`]: a crate's source text read for the tidy tests (tokens,
//!   module references, root re-exports).
//!
//! Everything here panics with a message on failure: it runs inside tests.

pub mod fixtures;
pub mod http1;
pub mod pki;
pub mod process;
mod rng;
pub mod source;
pub mod stub;
mod temp;

pub use rng::Rng;
pub use temp::TempDir;
