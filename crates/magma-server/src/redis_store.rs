use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisConnectionInfo, RedisError, Value};
use tokio::net::TcpStream;

mod scripts;
use scripts as lua;

/// Time allowed to connect (TCP, TLS, `AUTH`, `SELECT`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Time allowed for one answer of Redis.
const RESPONSE_TIMEOUT: Duration = Duration::from_secs(3);
/// The key prefix unless [`RedisStoreBuilder::key_prefix`] says otherwise.
pub(crate) const DEFAULT_PREFIX: &str = "magma:coaching:";
const DEFAULT_PORT: u16 = 6379;

// ---------------------------------------------------------------------------
// The public handle

/// A Redis that holds the coaching sessions of every replica of an agent
/// (feature `redis`): set [`Config::coaching_store`](crate::Config::coaching_store)
/// to it and `PUT`, `POST` and `DELETE` of a session may reach any replica.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let store = magma_server::RedisStore::builder("rediss://redis.internal:6380/0")?
///     .password(std::env::var("REDIS_PASSWORD")?)
///     .connect()
///     .await?;
/// let mut config = magma_server::Config::default();
/// config.coaching_store = Some(store);
/// # Ok(()) }
/// ```
///
/// One connection per process, multiplexed; lost, it is made again on the
/// next call (coaching answers `503` meanwhile). A single Redis (or a
/// primary), version 5 or newer; not Redis Cluster. Cloning shares it.
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) link: Arc<Link>,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore")
            .field("target", &self.link.target.shown)
            .field("key_prefix", &self.link.prefix)
            .finish_non_exhaustive()
    }
}

/// How to reach the store; see [`RedisStore::builder`].
pub struct RedisStoreBuilder {
    url: StoreUrl,
    ca_file: Option<PathBuf>,
    prefix: String,
}

impl fmt::Debug for RedisStoreBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStoreBuilder")
            .field("target", &self.url.shown())
            .field("password", &self.url.password.as_ref().map(|_| "<given>"))
            .field("ca_file", &self.ca_file)
            .field("key_prefix", &self.prefix)
            .finish()
    }
}

/// Why the store could not be set up. The messages never show a password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RedisStoreError {
    /// The URL is not `redis://` or `rediss://` as expected.
    #[error("{0}")]
    Url(String),
    /// The CA file of `rediss://` could not be used.
    #[error("the coaching store's CA file: {0}")]
    Tls(#[source] crate::TlsError),
    /// Redis could not be reached, or refused the connection (for example a
    /// wrong password).
    #[error("cannot reach the coaching session store at {target}: {reason}")]
    Connect {
        /// The store, without credentials.
        target: String,
        /// Why.
        reason: String,
    },
    /// The Redis found is older than the store needs.
    #[error(
        "the coaching session store at {target} runs Redis {version}; sessions need Redis 5 \
         or newer"
    )]
    Version {
        /// The store, without credentials.
        target: String,
        /// The version it reported.
        version: String,
    },
}

impl RedisStore {
    /// Reads `url`: `redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`, or
    /// `rediss://` for TLS (with the server's root certificates unless
    /// [`ca_file`](RedisStoreBuilder::ca_file) is given); the user and
    /// password percent-encoded, the port 6379 and the database 0 by default.
    pub fn builder(url: &str) -> Result<RedisStoreBuilder, RedisStoreError> {
        Ok(RedisStoreBuilder {
            url: StoreUrl::parse(url).map_err(RedisStoreError::Url)?,
            ca_file: None,
            prefix: DEFAULT_PREFIX.to_owned(),
        })
    }

    /// The store, without credentials, e.g. `redis://127.0.0.1:6379/0`.
    pub fn target(&self) -> &str {
        &self.link.target.shown
    }
}

impl RedisStoreBuilder {
    /// The password (`AUTH`), instead of one in the URL.
    pub fn password(mut self, password: impl Into<String>) -> Self {
        self.url.password = Some(password.into());
        self
    }

    /// `rediss://`: trust the CA certificates of this PEM file instead of
    /// the usual web roots.
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// What every key of the store starts with (default `magma:coaching:`):
    /// agents that share one Redis database need different prefixes.
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Connects, checks the server's version, and returns the store.
    pub async fn connect(self) -> Result<RedisStore, RedisStoreError> {
        let target = Target::new(&self.url, self.ca_file.as_deref())?;
        let shown = target.shown.clone();
        let link = Arc::new(Link {
            target,
            prefix: self.prefix,
            slot: tokio::sync::Mutex::new(Slot::default()),
            attempts: AtomicU64::new(0),
            down: AtomicBool::new(false),
        });
        let connect = |reason: String| RedisStoreError::Connect {
            target: shown.clone(),
            reason,
        };
        let info = link
            .exec::<String>(Op::Cmd(redis::cmd("INFO").arg("server")))
            .await
            .map_err(connect)?;
        let version = info
            .lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("")
            .trim()
            .to_owned();
        let major = version
            .split('.')
            .next()
            .and_then(|m| m.parse::<u32>().ok());
        if major.is_some_and(|m| m < 5) {
            return Err(RedisStoreError::Version {
                target: shown,
                version,
            });
        }
        Ok(RedisStore { link })
    }
}

// ---------------------------------------------------------------------------
// The URL

#[derive(Clone)]
struct StoreUrl {
    tls: bool,
    host: String,
    port: u16,
    db: i64,
    username: Option<String>,
    password: Option<String>,
}

impl StoreUrl {
    fn parse(url: &str) -> Result<StoreUrl, String> {
        const FORM: &str = "expected redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or rediss://... \
                            for TLS";
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(format!("not a Redis URL; {FORM}"));
        };
        let tls = match scheme.to_ascii_lowercase().as_str() {
            "redis" => false,
            "rediss" => true,
            other => return Err(format!("unknown scheme {other:?}; {FORM}")),
        };
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        if path.contains(['?', '#']) {
            return Err(format!(
                "a query or fragment is not understood here; {FORM}"
            ));
        }
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((u, h)) => (Some(u), h),
            None => (None, authority),
        };
        let decode = |part: &str, what: &str| match part {
            "" => Ok(String::new()),
            _ => magma_protocol::routes::decode_run_id(part)
                .ok_or_else(|| format!("the {what} is not valid percent-encoded UTF-8")),
        };
        let (username, password) = match userinfo {
            None => (None, None),
            Some(u) => match u.split_once(':') {
                Some((name, pass)) => (
                    Some(decode(name, "user name")?).filter(|n| !n.is_empty()),
                    Some(decode(pass, "password")?),
                ),
                None => (
                    Some(decode(u, "user name")?).filter(|n| !n.is_empty()),
                    None,
                ),
            },
        };
        let (host, port) = if let Some(inner) = hostport.strip_prefix('[') {
            let Some((ip, after)) = inner.split_once(']') else {
                return Err(format!("an IPv6 address without its closing ']'; {FORM}"));
            };
            let port = match after {
                "" => None,
                p => Some(
                    p.strip_prefix(':')
                        .ok_or(format!("junk after the host; {FORM}"))?,
                ),
            };
            (ip.to_owned(), port)
        } else {
            match hostport.rsplit_once(':') {
                Some((h, p)) => (h.to_owned(), Some(p)),
                None => (hostport.to_owned(), None),
            }
        };
        if host.is_empty() {
            return Err(format!("no host; {FORM}"));
        }
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("{p:?} is not a port (1 to 65535); {FORM}"))?,
        };
        let db = match path.trim_matches('/') {
            "" => 0,
            d => d
                .parse::<i64>()
                .ok()
                .filter(|d| *d >= 0)
                .ok_or_else(|| format!("{d:?} is not a database number; {FORM}"))?,
        };
        Ok(StoreUrl {
            tls,
            host,
            port,
            db,
            username,
            password,
        })
    }

    /// The URL without credentials.
    fn shown(&self) -> String {
        let scheme = if self.tls { "rediss" } else { "redis" };
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        format!("{scheme}://{host}:{}/{}", self.port, self.db)
    }
}

// ---------------------------------------------------------------------------
// The connection

/// Where and how to connect.
struct Target {
    host: String,
    port: u16,
    info: RedisConnectionInfo,
    tls: Option<(
        tokio_rustls::TlsConnector,
        rustls_pki_types::ServerName<'static>,
    )>,
    shown: String,
}

impl Target {
    fn new(url: &StoreUrl, ca_file: Option<&std::path::Path>) -> Result<Target, RedisStoreError> {
        let mut info = RedisConnectionInfo::default().set_db(url.db);
        if let Some(user) = &url.username {
            info = info.set_username(user);
        }
        if let Some(password) = &url.password {
            info = info.set_password(password);
        }
        let tls = match url.tls {
            false => None,
            true => Some(tls_connector(&url.host, ca_file)?),
        };
        Ok(Target {
            host: url.host.clone(),
            port: url.port,
            info,
            tls,
            shown: url.shown(),
        })
    }

    /// A new connection, its driver spawned on the current runtime.
    async fn connect(&self) -> Result<MultiplexedConnection, String> {
        let attempt = async {
            let tcp = TcpStream::connect((self.host.as_str(), self.port))
                .await
                .map_err(|e| e.to_string())?;
            let _ = tcp.set_nodelay(true);
            let config = AsyncConnectionConfig::new().set_response_timeout(Some(RESPONSE_TIMEOUT));
            // Each driver runs the connection's socket; it ends with it.
            match &self.tls {
                None => {
                    let (connection, driver) =
                        MultiplexedConnection::new_with_config(&self.info, tcp, config)
                            .await
                            .map_err(|e| describe(&e))?;
                    tokio::spawn(driver);
                    Ok(connection)
                }
                Some((connector, name)) => {
                    let stream = connector
                        .connect(name.clone(), tcp)
                        .await
                        .map_err(|e| format!("TLS: {e}"))?;
                    let (connection, driver) =
                        MultiplexedConnection::new_with_config(&self.info, stream, config)
                            .await
                            .map_err(|e| describe(&e))?;
                    tokio::spawn(driver);
                    Ok(connection)
                }
            }
        };
        match tokio::time::timeout(CONNECT_TIMEOUT, attempt).await {
            Ok(made) => made,
            Err(_) => Err(format!(
                "no connection within {} s",
                CONNECT_TIMEOUT.as_secs()
            )),
        }
    }
}

/// rustls with the crate's provider; the web roots or the CA file.
fn tls_connector(
    host: &str,
    ca_file: Option<&std::path::Path>,
) -> Result<
    (
        tokio_rustls::TlsConnector,
        rustls_pki_types::ServerName<'static>,
    ),
    RedisStoreError,
> {
    let mut roots = rustls::RootCertStore::empty();
    match ca_file {
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(path) => {
            for cert in crate::tls::certs(path).map_err(RedisStoreError::Tls)? {
                roots.add(cert).map_err(|e| {
                    RedisStoreError::Tls(crate::TlsError::Pem {
                        path: path.to_owned(),
                        what: format!("a certificate rustls refuses as a root: {e}"),
                    })
                })?;
            }
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(crate::crypto::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| RedisStoreError::Tls(crate::TlsError::Config(e.into())))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls_pki_types::ServerName::try_from(host.to_owned())
        .map_err(|_| RedisStoreError::Url(format!("{host:?} is not a host name TLS can check")))?;
    Ok((tokio_rustls::TlsConnector::from(Arc::new(config)), name))
}

/// What a Redis error says, without anything the server was sent.
fn describe(e: &RedisError) -> String {
    e.to_string()
}

/// Whether `e` means the connection is gone (not an answer of Redis).
fn lost(e: &RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
}

#[derive(Default)]
struct Slot {
    connection: Option<(u64, MultiplexedConnection)>,
    made: u64,
    /// Why the last attempt failed.
    failed: Option<String>,
}

/// The one connection of a store, made again when lost.
pub(crate) struct Link {
    target: Target,
    pub(crate) prefix: String,
    slot: tokio::sync::Mutex<Slot>,
    /// Connection attempts made (one at a time, under `slot`).
    attempts: AtomicU64,
    /// Whether the last attempt failed (logged once per outage).
    down: AtomicBool,
}

/// One thing to send.
pub(crate) enum Op<'a> {
    Script(&'a redis::ScriptInvocation<'a>),
    Pipe(&'a redis::Pipeline),
    Cmd(&'a redis::Cmd),
}

impl Link {
    /// The connection, made if there is none: `(id, connection, fresh)`.
    /// Calls that waited for another's attempt take its outcome instead of
    /// making their own: an unreachable Redis costs one attempt at a time.
    async fn connection(&self) -> Result<(u64, MultiplexedConnection, bool), String> {
        let seen = self.attempts.load(Ordering::Acquire);
        let mut slot = self.slot.lock().await;
        if let Some((id, c)) = &slot.connection {
            return Ok((*id, c.clone(), false));
        }
        if self.attempts.load(Ordering::Acquire) != seen
            && let Some(why) = &slot.failed
        {
            return Err(why.clone());
        }
        let made = self.target.connect().await;
        self.attempts.fetch_add(1, Ordering::Release);
        match made {
            Ok(c) => {
                slot.made += 1;
                let id = slot.made;
                slot.connection = Some((id, c.clone()));
                slot.failed = None;
                self.up();
                Ok((id, c, true))
            }
            Err(why) => {
                slot.failed = Some(why.clone());
                self.gone(&why);
                Err(why)
            }
        }
    }

    /// Drops connection `id` (lost); the next call makes a new one.
    async fn forget(&self, id: u64) {
        let mut slot = self.slot.lock().await;
        if slot.connection.as_ref().is_some_and(|(i, _)| *i == id) {
            slot.connection = None;
        }
    }

    fn up(&self) {
        if self.down.swap(false, Ordering::Relaxed) {
            tracing::info!(store = %self.target.shown, "the coaching session store is reachable again");
        }
    }

    fn gone(&self, why: &str) {
        if !self.down.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                store = %self.target.shown,
                reason = why,
                "the coaching session store (--coaching-store) cannot be reached; coaching \
                 routes answer 503 until it is back (inference is unaffected)"
            );
        }
    }

    /// Sends `op`; a connection found lost is made again and `op` sent once
    /// more (every script is safe to repeat).
    pub(crate) async fn exec<T: redis::FromRedisValue>(&self, op: Op<'_>) -> Result<T, String> {
        let mut again = false;
        loop {
            let (id, mut c, fresh) = self.connection().await?;
            let sent = match &op {
                Op::Script(inv) => inv.invoke_async::<T>(&mut c).await,
                Op::Pipe(pipe) => pipe.query_async::<T>(&mut c).await,
                Op::Cmd(cmd) => cmd.query_async::<T>(&mut c).await,
            };
            match sent {
                Ok(v) => return Ok(v),
                Err(e) if lost(&e) => {
                    self.forget(id).await;
                    let why = describe(&e);
                    if fresh || again {
                        self.gone(&why);
                        return Err(why);
                    }
                    again = true;
                }
                Err(e) => return Err(format!("Redis answered: {}", describe(&e))),
            }
        }
    }

    pub(crate) fn key(&self, kind: &str, run_id: &str) -> String {
        format!("{}{kind}:{run_id}", self.prefix)
    }

    pub(crate) fn sessions_key(&self) -> String {
        format!("{}sessions", self.prefix)
    }

    pub(crate) fn bytes_key(&self) -> String {
        format!("{}bytes", self.prefix)
    }
}

/// The scripts, compiled once (their SHA-1 computed).
pub(crate) struct Scripts {
    pub(crate) open: redis::Script,
    pub(crate) hold: redis::Script,
    pub(crate) release: redis::Script,
    pub(crate) refresh: redis::Script,
    pub(crate) close: redis::Script,
    pub(crate) in_flight: redis::Script,
    pub(crate) finish: redis::Script,
    pub(crate) expire: redis::Script,
}

pub(crate) fn scripts() -> &'static Scripts {
    static SCRIPTS: std::sync::OnceLock<Scripts> = std::sync::OnceLock::new();
    SCRIPTS.get_or_init(|| Scripts {
        open: lua::script(lua::OPEN),
        hold: lua::script(lua::HOLD),
        release: lua::script(lua::RELEASE),
        refresh: lua::script(lua::REFRESH),
        close: lua::script(lua::CLOSE),
        in_flight: lua::script(lua::IN_FLIGHT),
        finish: lua::script(lua::FINISH),
        expire: lua::script(lua::EXPIRE),
    })
}

/// A reply's words: bulk and simple strings and integers as text, nil as
/// `None`.
pub(crate) fn words(v: Value) -> Option<Vec<Option<String>>> {
    match v {
        Value::Nil => None,
        Value::Array(items) => Some(items.into_iter().map(word).collect()),
        other => Some(vec![word(other)]),
    }
}

fn word(v: Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        Value::Int(i) => Some(i.to_string()),
        Value::Okay => Some("OK".to_owned()),
        _ => None,
    }
}

pub(crate) fn malformed(what: &str) -> String {
    format!("Redis answered {what} in an unexpected form")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_read_with_their_credentials_and_shown_without() {
        let u = StoreUrl::parse("redis://127.0.0.1").unwrap();
        assert_eq!(u.shown(), "redis://127.0.0.1:6379/0");
        assert!(!u.tls && u.password.is_none() && u.username.is_none());
        let u = StoreUrl::parse("rediss://app:s%40cret:x@redis.internal:6380/3").unwrap();
        assert!(u.tls);
        assert_eq!(u.username.as_deref(), Some("app"));
        assert_eq!(u.password.as_deref(), Some("s@cret:x"));
        assert_eq!(u.shown(), "rediss://redis.internal:6380/3");
        let u = StoreUrl::parse("redis://:hunter2@[::1]:7000").unwrap();
        assert_eq!(u.username, None);
        assert_eq!(u.password.as_deref(), Some("hunter2"));
        assert_eq!(u.shown(), "redis://[::1]:7000/0");
        for bad in [
            "http://h",
            "h:6379",
            "redis://",
            "redis://h:0",
            "redis://h:99999",
            "redis://h/x",
            "redis://h/-1",
            "redis://h/0?timeout=1",
            "redis://[::1",
            "redis://:%ff@h",
        ] {
            let e = StoreUrl::parse(bad)
                .err()
                .unwrap_or_else(|| panic!("{bad} accepted"));
            assert!(!e.contains("%ff"), "{e}");
        }
        let e = StoreUrl::parse("redis://:hunter2@h:x").err().unwrap();
        assert!(!e.contains("hunter2"), "{e}");
    }
}
