#![doc = include_str!("../README.md")]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod client;
mod coaching;
mod connect;
#[cfg(feature = "tls")]
mod crypto;
mod error;
mod raw;
mod runtime;
#[cfg(feature = "tls")]
mod tls;

pub use client::{
    Client, ClientBuilder, DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_POOL_IDLE_TIMEOUT, DEFAULT_TIMEOUT,
};
pub use coaching::CoachingSession;
pub use error::{Error, ErrorKind, HttpStatus, TransportCause};
pub use raw::{RawRequest, RawResponse};

/// The rustls crypto provider this crate and `magma-server` use: *ring*'s
/// parts, named explicitly (key exchange X25519, then P-256, then P-384; the
/// reasons are in the repository's `docs/security.md`, "Crypto provider").
/// For a tool that also serves TLS next to its client, so that both sides
/// make the same choice.
#[cfg(feature = "tls")]
pub fn crypto_provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    crypto::provider()
}

/// The `http` crate, whose types appear in this API.
pub use http;
/// The wire types, for building requests and reading responses.
pub use magma_protocol;

/// The tool author's guide, `docs/client.md`: its examples compile as
/// doctests of this crate, so the guide cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/client.md")]
struct ClientGuide;
