//! Raw HTTP/1 on a TCP stream: what a test writes byte by byte and reads
//! back without a client library in between (framing a server should refuse,
//! answers a client should refuse).

use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a raw read may wait before the test fails instead of hanging.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// One HTTP/1 response read raw.
#[derive(Debug, Clone)]
pub struct RawReply {
    /// The status code.
    pub status: u16,
    /// The head, status line to the blank line included.
    pub head: String,
    /// The `Content-Length` body, as text.
    pub body: String,
}

impl RawReply {
    /// The value of header `name` (case-insensitive), if present.
    pub fn header(&self, name: &str) -> Option<&str> {
        header(&self.head, name)
    }
}

/// The value of header `name` (case-insensitive) in a message head.
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

/// Where the head ends (after the blank line) and how long the body is.
fn framing(data: &[u8]) -> Option<(usize, usize)> {
    let end = data.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = String::from_utf8_lossy(&data[..end]);
    let len = header(&head, "content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    Some((end, len))
}

/// Reads one message (head and `Content-Length` body) from a blocking
/// stream; `None` if the stream ends or fails first.
pub fn read_message(stream: &mut impl Read) -> Option<Vec<u8>> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some((end, len)) = framing(&data)
            && data.len() >= end + len
        {
            data.truncate(end + len);
            return Some(data);
        }
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
}

/// Writes `bytes` on a new connection to `addr`, then reads one response;
/// returns the connection too (for keep-alive checks).
pub async fn exchange(addr: SocketAddr, bytes: &[u8]) -> (TcpStream, RawReply) {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(bytes).await.expect("write");
    let reply = read_reply(&mut stream).await;
    (stream, reply)
}

/// Reads one response (head and a `Content-Length` body); panics if the
/// connection closes first or nothing comes within [`PATIENCE`].
pub async fn read_reply(stream: &mut TcpStream) -> RawReply {
    let read = async {
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some((end, len)) = framing(&buf)
                && buf.len() >= end + len
            {
                let head = String::from_utf8(buf[..end].to_vec()).expect("ASCII head");
                assert!(
                    header(&head, "content-length").is_some(),
                    "no content-length: {head}"
                );
                let status = head
                    .get(9..12)
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("no status code in {head:?}"));
                let body = String::from_utf8(buf[end..end + len].to_vec()).expect("UTF-8 body");
                return RawReply { status, head, body };
            }
            let n = stream.read(&mut chunk).await.expect("read");
            assert!(
                n > 0,
                "connection closed before a whole response: {:?}",
                String::from_utf8_lossy(&buf)
            );
            buf.extend_from_slice(&chunk[..n]);
        }
    };
    tokio::time::timeout(PATIENCE, read)
        .await
        .unwrap_or_else(|_| panic!("no raw HTTP/1.1 response within {PATIENCE:?}"))
}

/// Writes `payload` on a new connection, then reads until the peer closes
/// (at most [`PATIENCE`]); returns what came back. Connect and write errors
/// are expected (the peer may close first) and give what was read so far.
pub async fn throw(addr: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let Ok(mut stream) = TcpStream::connect(addr).await else {
        return Vec::new();
    };
    let _ = stream.write_all(payload).await;
    let mut got = Vec::new();
    let _ = tokio::time::timeout(PATIENCE, stream.read_to_end(&mut got))
        .await
        .expect("the peer closes the connection");
    got
}
