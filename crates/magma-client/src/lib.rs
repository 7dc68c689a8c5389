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

/// The `http` crate, whose types appear in this API.
pub use http;
/// The wire types, for building requests and reading responses.
pub use magma_protocol;

/// The tool author's guide, `docs/client.md`: its examples compile as
/// doctests of this crate, so the guide cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/client.md")]
struct ClientGuide;
