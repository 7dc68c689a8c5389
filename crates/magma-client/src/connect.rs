//! The connector hyper-util's pool calls for a new connection: name
//! resolution and TCP, then TLS for `https`, all under the connect timeout.
//! Its errors say which of those failed, so the client can classify them.

use std::fmt;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::Uri;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

#[derive(Clone)]
pub(crate) struct Connector {
    pub(crate) connect_timeout: Duration,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<tokio_rustls::TlsConnector>,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

/// Why a connection could not be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnectFailureKind {
    Refused,
    Timeout(Duration),
    Tls,
    Other,
}

#[derive(Debug)]
pub(crate) struct ConnectFailure {
    pub(crate) kind: ConnectFailureKind,
    pub(crate) source: Option<io::Error>,
}

impl ConnectFailure {
    fn io(e: io::Error) -> Self {
        let kind = if e.kind() == io::ErrorKind::ConnectionRefused {
            ConnectFailureKind::Refused
        } else {
            ConnectFailureKind::Other
        };
        ConnectFailure {
            kind,
            source: Some(e),
        }
    }
}

impl fmt::Display for ConnectFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ConnectFailureKind::Refused => "connection refused",
            ConnectFailureKind::Timeout(_) => "connect timeout",
            ConnectFailureKind::Tls => "TLS handshake failed",
            ConnectFailureKind::Other => "connect failed",
        };
        match &self.source {
            Some(e) => write!(f, "{what}: {e}"),
            None => f.write_str(what),
        }
    }
}

impl std::error::Error for ConnectFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

/// A plain or TLS connection.
pub(crate) enum Conn {
    Plain(TcpStream),
    #[cfg(feature = "tls")]
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Connection for Conn {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            #[cfg(feature = "tls")]
            Conn::Tls(s) => Pin::new(&mut **s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            #[cfg(feature = "tls")]
            Conn::Tls(s) => Pin::new(&mut **s).poll_write(cx, buf),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            #[cfg(feature = "tls")]
            Conn::Tls(s) => Pin::new(&mut **s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Plain(s) => s.is_write_vectored(),
            #[cfg(feature = "tls")]
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            #[cfg(feature = "tls")]
            Conn::Tls(s) => Pin::new(&mut **s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            #[cfg(feature = "tls")]
            Conn::Tls(s) => Pin::new(&mut **s).poll_shutdown(cx),
        }
    }
}

type ConnectFuture =
    Pin<Box<dyn Future<Output = Result<TokioIo<Conn>, ConnectFailure>> + Send + 'static>>;

impl tower_service::Service<Uri> for Connector {
    type Response = TokioIo<Conn>;
    type Error = ConnectFailure;
    type Future = ConnectFuture;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: Uri) -> Self::Future {
        let this = self.clone();
        let limit = self.connect_timeout;
        Box::pin(async move {
            match tokio::time::timeout(limit, this.connect(uri)).await {
                Ok(result) => result.map(TokioIo::new),
                Err(_elapsed) => Err(ConnectFailure {
                    kind: ConnectFailureKind::Timeout(limit),
                    source: None,
                }),
            }
        })
    }
}

impl Connector {
    async fn connect(self, uri: Uri) -> Result<Conn, ConnectFailure> {
        let other = |msg: &str| ConnectFailure {
            kind: ConnectFailureKind::Other,
            source: Some(io::Error::new(io::ErrorKind::InvalidInput, msg.to_owned())),
        };
        let https = match uri.scheme_str() {
            Some("http") => false,
            Some("https") => true,
            _ => return Err(other("URL scheme must be http or https")),
        };
        let host = uri.host().ok_or_else(|| other("URL has no host"))?;
        // `Uri::host` keeps the brackets of an IPv6 literal.
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });

        let tcp = TcpStream::connect((host.as_str(), port))
            .await
            .map_err(ConnectFailure::io)?;
        // Requests are small and latency matters more than packet count.
        let _ = tcp.set_nodelay(true);

        if !https {
            return Ok(Conn::Plain(tcp));
        }
        self.tls_handshake(host, tcp).await
    }

    #[cfg(feature = "tls")]
    async fn tls_handshake(&self, host: String, tcp: TcpStream) -> Result<Conn, ConnectFailure> {
        let Some(tls) = &self.tls else {
            return Err(ConnectFailure {
                kind: ConnectFailureKind::Tls,
                source: Some(io::Error::other("this client has no TLS configuration")),
            });
        };
        let name = rustls_pki_types::ServerName::try_from(host).map_err(|e| ConnectFailure {
            kind: ConnectFailureKind::Tls,
            source: Some(io::Error::new(io::ErrorKind::InvalidInput, e)),
        })?;
        let stream = tls.connect(name, tcp).await.map_err(|e| ConnectFailure {
            kind: ConnectFailureKind::Tls,
            source: Some(e),
        })?;
        Ok(Conn::Tls(Box::new(stream)))
    }

    #[cfg(not(feature = "tls"))]
    async fn tls_handshake(&self, _host: String, _tcp: TcpStream) -> Result<Conn, ConnectFailure> {
        Err(ConnectFailure {
            kind: ConnectFailureKind::Tls,
            source: Some(io::Error::other(
                "https needs the `tls` feature of magma-client",
            )),
        })
    }
}
