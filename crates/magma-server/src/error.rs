//! The server's errors: starting it, never serving a request (request
//! failures are HTTP answers, not errors).

use std::net::SocketAddr;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The listening socket could not be opened.
    #[error("cannot listen on {addr}")]
    Bind {
        /// The address asked for (the first one tried if several resolved).
        addr: String,
        /// The operating system's reason.
        #[source]
        source: std::io::Error,
    },
    /// The address did not resolve to anything.
    #[error("address {0:?} resolves to nothing")]
    NoAddress(String),
    /// A [`Config`](crate::Config) value is out of range.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// The listening socket could not be set up (made non-blocking,
    /// registered with the runtime) or its local address read.
    #[error("cannot set up the listening socket")]
    Listener(#[source] std::io::Error),
    /// The TLS configuration could not be built.
    #[cfg(feature = "tls")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tls")))]
    #[error(transparent)]
    Tls(#[from] crate::TlsError),
}

impl Error {
    pub(crate) fn bind(addr: &SocketAddr, source: std::io::Error) -> Error {
        Error::Bind {
            addr: addr.to_string(),
            source,
        }
    }
}
